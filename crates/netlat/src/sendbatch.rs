//! Batched UDP sending for the load generator: `sendmmsg` moves many messages per
//! system call, and with UDP GSO (`UDP_SEGMENT`) each message is a run of up to
//! [`MAX_GSO_SEGMENTS`] equal datagrams that the kernel (or the NIC) splits, so one
//! pass down the stack carries tens of kilobytes.
//!
//! GSO is asked for with `setsockopt(UDP_SEGMENT, msg_size)`. Kernels before 4.18
//! refuse the option, and a device without checksum offload refuses the first
//! segmented send (`EIO`); `EINVAL` and `EOPNOTSUPP` are treated alike. In every such
//! case the sender turns GSO off, records why in [`GsoUse::Fallback`], and resends
//! plain datagrams.

use std::io;
use std::net::UdpSocket;

use nnb_sys::mmsg::SendBatch;
pub use nnb_sys::socket::Direction;
use serde::{Deserialize, Serialize};

use crate::wire::{Header, Kind, HEADER_LEN, MAX_UDP_PAYLOAD};

/// Most segments per GSO message (the kernel's `UDP_MAX_SEGMENTS` before 6.x).
pub const MAX_GSO_SEGMENTS: usize = 64;

/// Whether the sender used UDP GSO.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "gso")]
pub enum GsoUse {
    /// Not asked for (or pointless: one datagram per message would fit).
    Off,
    /// In use with this many datagrams per message at most.
    On {
        /// Datagrams per GSO message.
        segments: usize,
    },
    /// Asked for, refused by the kernel; plain datagrams were sent.
    Fallback {
        /// The kernel's refusal.
        reason: String,
    },
}

/// Sends runs of load datagrams on one connected UDP socket.
pub struct BatchSender {
    sock: UdpSocket,
    msg_size: usize,
    /// Datagrams per message (1 without GSO).
    segments: usize,
    gso: GsoUse,
    /// One slot per message (`sendmmsg` entry), `segments` datagrams each.
    batch: SendBatch,
}

impl BatchSender {
    /// A sender of `msg_size`-byte datagrams, `messages` per system call, trying
    /// GSO when `want_gso` and at least two datagrams fit one message.
    pub fn new(sock: UdpSocket, msg_size: usize, messages: usize, want_gso: bool) -> Self {
        // A GSO message is one UDP payload to the kernel, split after: its datagrams
        // together are at most the largest payload.
        let gso_segments = (MAX_UDP_PAYLOAD / msg_size.max(1)).min(MAX_GSO_SEGMENTS);
        let gso = if !want_gso || gso_segments < 2 {
            GsoUse::Off
        } else {
            match set_gso_size(&sock, msg_size) {
                Ok(()) => GsoUse::On {
                    segments: gso_segments,
                },
                Err(e) => GsoUse::Fallback {
                    reason: format!("setsockopt(UDP_SEGMENT) refused: {e}"),
                },
            }
        };
        let segments = match gso {
            GsoUse::On { segments } => segments,
            _ => 1,
        };
        BatchSender {
            sock,
            msg_size,
            segments,
            gso,
            batch: SendBatch::new(messages, segments * msg_size),
        }
    }

    /// Most datagrams one [`BatchSender::send`] can carry.
    pub fn capacity(&self) -> u64 {
        (self.batch.messages() * self.segments) as u64
    }

    /// Whether GSO is in use, off, or was refused.
    pub fn gso(&self) -> &GsoUse {
        &self.gso
    }

    /// The socket (for the report request after the run).
    pub fn socket(&self) -> &UdpSocket {
        &self.sock
    }

    /// Sends `n` (at most [`BatchSender::capacity`]) datagrams numbered from
    /// `first_seq`, stamped `send_ts`; returns how many the kernel took (fewer on a
    /// partial send).
    pub fn send(&mut self, stream: u32, first_seq: u64, n: u64, send_ts: u64) -> io::Result<u64> {
        let n = n.min(self.capacity()) as usize;
        let buf = self.batch.buffer_mut();
        for j in 0..n {
            let off = j * self.msg_size;
            Header {
                kind: Kind::Load,
                flags: 0,
                seq: first_seq + j as u64,
                send_ts,
                stream,
                payload_len: (self.msg_size - HEADER_LEN) as u32,
            }
            .encode(&mut buf[off..off + HEADER_LEN]);
        }
        let msgs = n.div_ceil(self.segments);
        match self.batch.send(&self.sock, n * self.msg_size) {
            Ok(sent_msgs) => Ok(if sent_msgs >= msgs {
                n as u64
            } else {
                (sent_msgs * self.segments) as u64
            }),
            Err(err)
                if matches!(self.gso, GsoUse::On { .. })
                    && matches!(
                        err.raw_os_error(),
                        Some(libc::EIO | libc::EINVAL | libc::EOPNOTSUPP)
                    ) =>
            {
                self.fall_back(&err)?;
                self.send(stream, first_seq, n as u64, send_ts)
            }
            Err(err) => Err(err),
        }
    }

    /// Turns GSO off after the kernel refused a segmented send.
    fn fall_back(&mut self, err: &io::Error) -> io::Result<()> {
        tracing::warn!("UDP GSO refused ({err}); sending plain datagrams");
        set_gso_size(&self.sock, 0)?;
        self.gso = GsoUse::Fallback {
            reason: format!("segmented send refused: {err}"),
        };
        self.segments = 1;
        self.batch.shrink_slots(self.msg_size);
        Ok(())
    }
}

/// Sets the socket's GSO segment size (0 turns GSO off).
fn set_gso_size(sock: &UdpSocket, size: usize) -> io::Result<()> {
    let size = u16::try_from(size).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a GSO segment of {size} bytes is larger than any UDP datagram"),
        )
    })?;
    nnb_sys::socket::set_udp_segment(sock, size)
}

/// A socket buffer: the size asked for and the size the kernel granted. Recorded
/// with each result because a buffer capped by `net.core.wmem_max`/`rmem_max` (an
/// unprivileged sender or sink) overflows in bursts, and that loss looks just like
/// loss on the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketBuffer {
    /// Bytes asked for.
    pub asked: usize,
    /// Bytes granted: what `SO_SNDBUF`/`SO_RCVBUF` reads back, halved (the kernel
    /// doubles the size for its bookkeeping); `None` when it could not be read.
    pub granted: Option<usize>,
}

impl SocketBuffer {
    /// Reads back the `dir` buffer of `sock`, asked for as `asked` bytes.
    pub fn read(sock: &impl std::os::fd::AsFd, dir: Direction, asked: usize) -> SocketBuffer {
        SocketBuffer {
            asked,
            granted: nnb_sys::socket::buffer_size(sock, dir).ok().map(|b| b / 2),
        }
    }

    /// Whether the kernel granted less than was asked for.
    pub fn capped(&self) -> bool {
        self.granted.is_some_and(|g| g < self.asked)
    }
}

/// Asks for a socket buffer of `bytes` (the `...FORCE` option when privileged, else
/// the plain one, which the kernel caps at `net.core.wmem_max`/`rmem_max`) and
/// returns what the kernel granted. A refusal or a cap only costs headroom, so it is
/// logged and recorded, not an error.
pub fn set_socket_buffer(sock: &UdpSocket, dir: Direction, bytes: usize) -> SocketBuffer {
    if let Err(e) = nnb_sys::socket::set_buffer(sock, dir, bytes) {
        tracing::debug!("could not set the {dir:?} buffer to {bytes} bytes: {e}");
    }
    let buffer = SocketBuffer::read(sock, dir, bytes);
    if buffer.capped() {
        tracing::debug!(?buffer, "the kernel capped the {dir:?} buffer");
    }
    buffer
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receive_all(rx: &UdpSocket, expect: usize) -> Vec<Header> {
        rx.set_read_timeout(Some(std::time::Duration::from_millis(500)))
            .expect("timeout");
        let mut buf = [0u8; 2048];
        let mut out = Vec::new();
        while out.len() < expect {
            let Ok(n) = rx.recv(&mut buf) else { break };
            out.push(Header::decode(&buf[..n]).expect("valid datagram"));
        }
        out
    }

    #[test]
    fn sends_numbered_datagrams_with_and_without_gso() {
        for want_gso in [false, true] {
            let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
            let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
            tx.connect(rx.local_addr().expect("addr")).expect("connect");
            let mut s = BatchSender::new(tx, 200, 4, want_gso);
            if want_gso {
                assert!(
                    !matches!(s.gso(), GsoUse::Off),
                    "GSO is tried: {:?}",
                    s.gso()
                );
            } else {
                assert_eq!(s.gso(), &GsoUse::Off);
                assert_eq!(s.capacity(), 4);
            }
            let n = 3.min(s.capacity());
            assert_eq!(s.send(9, 100, n, 5).expect("send"), n);
            let more = s.capacity().min(7);
            assert_eq!(s.send(9, 100 + n, more, 6).expect("send"), more);
            let got = receive_all(&rx, (n + more) as usize);
            let seqs: Vec<u64> = got.iter().map(|h| h.seq).collect();
            assert_eq!(seqs, (100..100 + n + more).collect::<Vec<_>>());
            assert!(got.iter().all(|h| h.stream == 9 && h.payload_len == 168));
        }
    }
}
