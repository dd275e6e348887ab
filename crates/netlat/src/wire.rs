//! The nnb wire header: 32 bytes in front of every probe and load datagram.
//!
//! Layout (little-endian):
//!
//! | offset | size | field                                           |
//! |-------:|-----:|-------------------------------------------------|
//! | 0      | 4    | magic `b"NNB\x01"`'s u32 ([`MAGIC`])            |
//! | 4      | 1    | version ([`VERSION`])                           |
//! | 5      | 1    | kind ([`Kind`])                                 |
//! | 6      | 2    | flags ([`Header::flags`], kind-specific)        |
//! | 8      | 8    | sequence number, per stream, starting at 0      |
//! | 16     | 8    | send timestamp (sender's clock, nanoseconds)    |
//! | 24     | 4    | stream id (a sender picks one per socket)       |
//! | 28     | 4    | payload length: bytes that follow the header    |
//!
//! Everything is validated on receipt: a datagram that is too short, carries another
//! magic or version, an unknown kind, or a payload length that disagrees with its
//! size is rejected with a [`DecodeError`] that the receiver counts; it never panics.

use thiserror::Error;

/// Size of the encoded header in bytes.
pub const HEADER_LEN: usize = 32;
/// The largest UDP payload over IPv4: the 65,535 bytes of an IP datagram less its
/// 20-byte header and the 8-byte UDP header. No datagram nnb sends is longer: a
/// ping, a load datagram, nor a GSO message of several.
pub const MAX_UDP_PAYLOAD: usize = 65_507;
/// Magic number identifying nnb datagrams (`"NNB\x01"` read little-endian).
pub const MAGIC: u32 = u32::from_le_bytes(*b"NNB\x01");
/// Version of this header layout.
pub const VERSION: u8 = 1;

/// What a datagram is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A latency probe request; a reflector answers it with a [`Kind::Pong`].
    Ping = 1,
    /// A reflector's answer, echoing the ping's sequence number and timestamp.
    Pong = 2,
    /// Load traffic for a sink; answered only when it carries [`FLAG_REPORT_REQUEST`].
    Load = 3,
    /// A sink's answer to a report request: the payload is the JSON of its view of
    /// the requesting stream.
    Report = 4,
}

/// Flag on a [`Kind::Load`] datagram asking the sink to answer with a [`Kind::Report`]
/// for this stream (sent by a load generator when it finishes).
pub const FLAG_REPORT_REQUEST: u16 = 1;
/// With [`FLAG_REPORT_REQUEST`]: ask for a page of the stream's arrival series
/// instead of its report, from the bin the header's `seq` names (see
/// [`crate::report::encode_series_request`]). A sink without series answers with its
/// report, which a series reader refuses.
pub const FLAG_SERIES: u16 = 2;
/// On a [`Kind::Ping`] whose payload has room for a u64 ([`STAMP_LEN`]): ask the
/// reflector to write its own receive time (nanoseconds of its clock,
/// little-endian) into the first payload bytes of the pong, so the sender learns the
/// one-way delay (less the clocks' offset) and not only the round trip (Badabing).
/// A reflector without this flag's support answers with the payload unchanged and
/// without [`FLAG_RECEIVE_STAMPED`].
pub const FLAG_STAMP_RECEIVE: u16 = 4;
/// On a [`Kind::Pong`]: the reflector wrote its receive time as
/// [`FLAG_STAMP_RECEIVE`] asked.
pub const FLAG_RECEIVE_STAMPED: u16 = 8;
/// Bytes of the receive stamp at the start of a stamped pong's payload.
pub const STAMP_LEN: usize = 8;

impl Kind {
    fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(Kind::Ping),
            2 => Some(Kind::Pong),
            3 => Some(Kind::Load),
            4 => Some(Kind::Report),
            _ => None,
        }
    }
}

/// A decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// What the datagram is for.
    pub kind: Kind,
    /// Kind-specific flags; 0 unless a sender defines one.
    pub flags: u16,
    /// Sequence number within the stream, from 0.
    pub seq: u64,
    /// Sender's timestamp in nanoseconds of its own clock (echoed by reflectors).
    pub send_ts: u64,
    /// Identifies the sending socket so sinks can count each stream on its own.
    pub stream: u32,
    /// Number of payload bytes after the header.
    pub payload_len: u32,
}

/// Why a datagram was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// Fewer than [`HEADER_LEN`] bytes.
    #[error("datagram of {0} bytes is shorter than the {HEADER_LEN}-byte header")]
    Truncated(usize),
    /// Not an nnb datagram.
    #[error("foreign datagram (magic {0:#010x})")]
    BadMagic(u32),
    /// An nnb datagram of a version this build does not speak.
    #[error("unsupported header version {0} (this build speaks {VERSION})")]
    BadVersion(u8),
    /// A kind byte this version does not define.
    #[error("unknown datagram kind {0}")]
    UnknownKind(u8),
    /// The payload length field disagrees with the datagram's size.
    #[error("payload length {claimed} disagrees with the {actual} bytes received")]
    LengthMismatch {
        /// Payload length written in the header.
        claimed: u32,
        /// Payload bytes actually present.
        actual: usize,
    },
}

impl Header {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than [`HEADER_LEN`]: buffers are sized by the sender, never
    /// by received data.
    pub fn encode(&self, buf: &mut [u8]) {
        let b = &mut buf[..HEADER_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4] = VERSION;
        b[5] = self.kind as u8;
        b[6..8].copy_from_slice(&self.flags.to_le_bytes());
        b[8..16].copy_from_slice(&self.seq.to_le_bytes());
        b[16..24].copy_from_slice(&self.send_ts.to_le_bytes());
        b[24..28].copy_from_slice(&self.stream.to_le_bytes());
        b[28..32].copy_from_slice(&self.payload_len.to_le_bytes());
    }

    /// Validates and decodes a whole received datagram.
    pub fn decode(datagram: &[u8]) -> Result<Header, DecodeError> {
        if datagram.len() < HEADER_LEN {
            return Err(DecodeError::Truncated(datagram.len()));
        }
        let u32_at = |i: usize| {
            u32::from_le_bytes([
                datagram[i],
                datagram[i + 1],
                datagram[i + 2],
                datagram[i + 3],
            ])
        };
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&datagram[i..i + 8]);
            u64::from_le_bytes(a)
        };
        let magic = u32_at(0);
        if magic != MAGIC {
            return Err(DecodeError::BadMagic(magic));
        }
        if datagram[4] != VERSION {
            return Err(DecodeError::BadVersion(datagram[4]));
        }
        let kind = Kind::from_u8(datagram[5]).ok_or(DecodeError::UnknownKind(datagram[5]))?;
        let payload_len = u32_at(28);
        let actual = datagram.len() - HEADER_LEN;
        if payload_len as usize != actual {
            return Err(DecodeError::LengthMismatch {
                claimed: payload_len,
                actual,
            });
        }
        Ok(Header {
            kind,
            flags: u16::from_le_bytes([datagram[6], datagram[7]]),
            seq: u64_at(8),
            send_ts: u64_at(16),
            stream: u32_at(24),
            payload_len,
        })
    }

    /// Rewrites a received ping in place into its pong (kind byte only), so a
    /// reflector answers without copying the payload.
    pub fn turn_into_pong(datagram: &mut [u8]) {
        if datagram.len() >= HEADER_LEN {
            datagram[5] = Kind::Pong as u8;
        }
    }

    /// When a valid datagram carries [`FLAG_STAMP_RECEIVE`] and a payload of at
    /// least [`STAMP_LEN`] bytes: writes `received_ns` into the payload's first bytes
    /// and sets [`FLAG_RECEIVE_STAMPED`], in place; otherwise leaves it alone. Returns
    /// whether it stamped.
    pub fn stamp_receive(datagram: &mut [u8], received_ns: u64) -> bool {
        let asked = Header::decode(datagram).is_ok_and(|h| {
            h.flags & FLAG_STAMP_RECEIVE != 0 && h.payload_len as usize >= STAMP_LEN
        });
        if asked {
            let flags = u16::from_le_bytes([datagram[6], datagram[7]]) | FLAG_RECEIVE_STAMPED;
            datagram[6..8].copy_from_slice(&flags.to_le_bytes());
            datagram[HEADER_LEN..HEADER_LEN + STAMP_LEN]
                .copy_from_slice(&received_ns.to_le_bytes());
        }
        asked
    }

    /// The receive time a reflector wrote into this pong ([`Header::stamp_receive`]),
    /// or `None` when it carries no stamp.
    pub fn receive_stamp(&self, datagram: &[u8]) -> Option<u64> {
        let stamped =
            self.flags & FLAG_RECEIVE_STAMPED != 0 && datagram.len() >= HEADER_LEN + STAMP_LEN;
        stamped.then(|| {
            let mut a = [0u8; STAMP_LEN];
            a.copy_from_slice(&datagram[HEADER_LEN..HEADER_LEN + STAMP_LEN]);
            u64::from_le_bytes(a)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(payload_len: u32) -> Header {
        Header {
            kind: Kind::Ping,
            flags: 7,
            seq: 0x0102_0304_0506_0708,
            send_ts: 99,
            stream: 3,
            payload_len,
        }
    }

    #[test]
    fn round_trip() {
        let h = sample(10);
        let mut buf = vec![0u8; HEADER_LEN + 10];
        h.encode(&mut buf);
        assert_eq!(Header::decode(&buf), Ok(h));
    }

    #[test]
    fn rejects_garbage() {
        let h = sample(0);
        let mut buf = [0u8; HEADER_LEN];
        h.encode(&mut buf);
        assert_eq!(Header::decode(&buf[..5]), Err(DecodeError::Truncated(5)));
        let mut bad = buf;
        bad[0] = b'X';
        assert!(matches!(
            Header::decode(&bad),
            Err(DecodeError::BadMagic(_))
        ));
        let mut bad = buf;
        bad[4] = 9;
        assert_eq!(Header::decode(&bad), Err(DecodeError::BadVersion(9)));
        let mut bad = buf;
        bad[5] = 200;
        assert_eq!(Header::decode(&bad), Err(DecodeError::UnknownKind(200)));
        let mut long = buf.to_vec();
        long.push(0);
        assert_eq!(
            Header::decode(&long),
            Err(DecodeError::LengthMismatch {
                claimed: 0,
                actual: 1
            })
        );
    }

    #[test]
    fn receive_stamp_only_when_asked_and_room() {
        let mut asked = sample(STAMP_LEN as u32);
        asked.flags = FLAG_STAMP_RECEIVE;
        let mut buf = vec![0u8; HEADER_LEN + STAMP_LEN];
        asked.encode(&mut buf);
        assert!(Header::stamp_receive(&mut buf, 0x1122_3344_5566_7788));
        let h = Header::decode(&buf).expect("still valid");
        assert_eq!(h.flags, FLAG_STAMP_RECEIVE | FLAG_RECEIVE_STAMPED);
        assert_eq!(h.receive_stamp(&buf), Some(0x1122_3344_5566_7788));
        // An old ping (no flag) and a ping without room keep their bytes.
        for (flags, payload) in [(0, STAMP_LEN), (FLAG_STAMP_RECEIVE, STAMP_LEN - 1)] {
            let h = Header {
                flags,
                ..sample(payload as u32)
            };
            let mut buf = vec![7u8; HEADER_LEN + payload];
            h.encode(&mut buf);
            let before = buf.clone();
            assert!(!Header::stamp_receive(&mut buf, 5));
            assert_eq!(buf, before);
            assert_eq!(h.receive_stamp(&buf), None);
        }
    }

    #[test]
    fn pong_keeps_everything_but_kind() {
        let h = sample(4);
        let mut buf = vec![0u8; HEADER_LEN + 4];
        h.encode(&mut buf);
        Header::turn_into_pong(&mut buf);
        assert_eq!(
            Header::decode(&buf),
            Ok(Header {
                kind: Kind::Pong,
                ..h
            })
        );
    }
}
