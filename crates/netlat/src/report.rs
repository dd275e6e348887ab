//! What a sink says about one stream, and the report request/answer datagrams.
//!
//! A load generator that finishes sends, on each stream's socket, a [`Kind::Load`]
//! datagram with [`FLAG_REPORT_REQUEST`] set (see [`encode_request`]); the sink answers
//! to the sender's address with a [`Kind::Report`] datagram whose payload is the
//! `serde_json` of a [`StreamReport`] (see [`encode_report`] and [`decode_report`]).
//! The request itself is not counted as load data. Answers stay under
//! [`MAX_REPORT_DATAGRAM`] bytes so they fit one unfragmented datagram.
//!
//! No amplification: a request is padded to [`REPORT_REQUEST_LEN`], and a sink never
//! answers with more bytes than the request it answers. A forged request (a spoofed
//! source address) thus sends the forged address no more than the forger sent; a
//! short request, like those of nnb before this rule, gets no answer.
//!
//! A series request ([`encode_series_request`], [`FLAG_SERIES`] set) asks instead for
//! a page of the stream's arrival series ([`crate::serve::series`]): at most
//! [`MAX_PAGE_BINS`] bins from the offset in its `seq`, answered as the JSON of a
//! [`SeriesPage`] under the same size rule.
//!
//! A fine request ([`encode_fine_request`], [`FLAG_FINE`] set) asks for a page of
//! the ends of the stream's grains ([`crate::grain`]): the grain, in bytes, is the
//! first 8 bytes (little-endian) of the request's padding, the offset its `seq`; the
//! answer is the JSON of a [`FinePage`] of at most [`MAX_FINE_ENDS`] ends. The sink
//! needs no grain before the data: it records arrival checkpoints and cuts them into
//! grains when asked. A sink without fine requests answers with its report, which a
//! fine reader refuses.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::seq::SeqStats;
use crate::wire::{DecodeError, Header, Kind, FLAG_REPORT_REQUEST, FLAG_SERIES, HEADER_LEN};

/// With [`FLAG_REPORT_REQUEST`] on a [`Kind::Load`]: ask for a page of the stream's
/// grain ends instead of its report ([`encode_fine_request`]). Kept beside its
/// protocol; the other flags are in [`crate::wire`].
pub const FLAG_FINE: u16 = 16;

/// Most grain ends one [`FinePage`] carries: 48 ends of up to 20 digits stay under
/// [`MAX_REPORT_DATAGRAM`] with the page's other fields.
pub const MAX_FINE_ENDS: usize = 48;

/// One page of a stream's grain ends, a sink's answer to a fine request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinePage {
    /// Stream id from the wire header.
    pub stream: u32,
    /// Grain, bytes: the one asked for, or 0 when the sink refused it (not a whole
    /// multiple of [`crate::grain::CHECKPOINT_BYTES`], or too large).
    pub grain: u64,
    /// Index of the stream's first grain end the sink still knows (see
    /// [`crate::grain::GrainEnds::first_end`]).
    pub first_end: u64,
    /// Grain ends the sink knows in all.
    pub total: u64,
    /// Index of `t_ns[0]` among the known ends.
    pub offset: u64,
    /// Arrival of each end, ns after the stream's first arrival.
    pub t_ns: Vec<u64>,
}

/// Largest report datagram (header and JSON) a sink sends.
pub const MAX_REPORT_DATAGRAM: usize = 1200;
/// Size of a report request, padding included: as large as any answer, so that
/// answering never amplifies.
pub const REPORT_REQUEST_LEN: usize = MAX_REPORT_DATAGRAM;

/// Most bins one [`SeriesPage`] carries: 80 bins of up to 10 digits stay under
/// [`MAX_REPORT_DATAGRAM`] with the page's other fields.
pub const MAX_PAGE_BINS: usize = 80;

/// One page of a stream's arrival series, a sink's answer to a series request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeriesPage {
    /// Stream id from the wire header.
    pub stream: u32,
    /// Width of a bin, ns of the sink's clock.
    pub bin_ns: u64,
    /// Bin index (arrival ns / `bin_ns`) of the series' oldest bin kept.
    pub first_bin: u64,
    /// Bins the series holds in all.
    pub total: usize,
    /// Index of `bytes[0]` in the series.
    pub offset: usize,
    /// UDP payload bytes received per bin, from `offset`.
    pub bytes: Vec<u32>,
}

/// A sink's view of one stream (one sender address and stream id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamReport {
    /// Sender address as `ip:port`.
    pub peer: String,
    /// Stream id from the wire header.
    pub stream: u32,
    /// Loss, duplicates and reordering from sequence numbers.
    pub seq: SeqStats,
    /// UDP payload bytes received (nnb header included), report requests excluded.
    pub bytes: u64,
    /// Arrival of the first datagram, nanoseconds of the server's monotonic clock.
    pub first_arrival_ns: u64,
    /// Arrival of the last datagram, nanoseconds of the server's monotonic clock.
    pub last_arrival_ns: u64,
    /// Received rate in bit/s over `[first_arrival_ns, last_arrival_ns]` (the first
    /// datagram's bytes excluded, as they arrived at the interval's start); 0 with
    /// fewer than two datagrams.
    pub rate_bps: f64,
    /// Undecodable datagrams from this stream's sender address.
    pub garbage: u64,
    /// Datagrams the sink's own receive sockets dropped while this stream used them
    /// (a full receive buffer, above all): the rise of each socket's kernel drop
    /// count (`SO_RXQ_OVFL`) from the stream's first datagram on it to its latest
    /// datagram or request there, summed over the sockets it arrived on. The kernel
    /// does not say whose datagrams it dropped: any sender's on those sockets in that
    /// time count, and a buffer of several datagrams coalesced on receive (`UDP_GRO`)
    /// counts once: a floor of the datagrams lost at the receiver. Loss the sink
    /// caused, not the network. `None` from a sink that does not count them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_drops: Option<u64>,
    /// The sink socket this stream's latest datagram arrived on (an index among the
    /// sink's sockets): streams on one socket share its drops, so a load sums
    /// [`StreamReport::socket_drops`] over sockets, not over streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<u32>,
}

impl StreamReport {
    /// An empty report: what a sink answers for a stream it never saw (all lost, or
    /// evicted from its bounded table).
    pub fn empty(peer: String, stream: u32) -> Self {
        StreamReport {
            peer,
            stream,
            seq: SeqStats::default(),
            bytes: 0,
            first_arrival_ns: 0,
            last_arrival_ns: 0,
            rate_bps: 0.0,
            garbage: 0,
            socket_drops: None,
            socket: None,
        }
    }
}

/// Why a report datagram could not be read.
#[derive(Debug, Error)]
pub enum ReportError {
    /// The header did not decode.
    #[error("bad report header: {0}")]
    Header(#[from] DecodeError),
    /// A valid nnb datagram of another kind.
    #[error("expected a report datagram, got {0:?}")]
    NotAReport(Kind),
    /// The JSON payload did not parse.
    #[error("bad report payload: {0}")]
    Json(#[from] serde_json::Error),
    /// The report does not fit [`MAX_REPORT_DATAGRAM`].
    #[error("report of {0} bytes exceeds {MAX_REPORT_DATAGRAM} bytes")]
    TooLong(usize),
}

/// A report request for `stream`, zero-padded to [`REPORT_REQUEST_LEN`] bytes. `seq`
/// lets a sender tell its retries apart; it is echoed.
pub fn encode_request(stream: u32, seq: u64, send_ts: u64) -> [u8; REPORT_REQUEST_LEN] {
    let mut buf = [0u8; REPORT_REQUEST_LEN];
    Header {
        kind: Kind::Load,
        flags: FLAG_REPORT_REQUEST,
        seq,
        send_ts,
        stream,
        payload_len: (REPORT_REQUEST_LEN - HEADER_LEN) as u32,
    }
    .encode(&mut buf);
    buf
}

/// A series request for `stream` from bin `offset` on (in the header's `seq`, which
/// the answer echoes), padded like [`encode_request`].
pub fn encode_series_request(stream: u32, offset: u64, send_ts: u64) -> [u8; REPORT_REQUEST_LEN] {
    let mut buf = encode_request(stream, offset, send_ts);
    Header {
        kind: Kind::Load,
        flags: FLAG_REPORT_REQUEST | FLAG_SERIES,
        seq: offset,
        send_ts,
        stream,
        payload_len: (REPORT_REQUEST_LEN - HEADER_LEN) as u32,
    }
    .encode(&mut buf);
    buf
}

/// A fine request for `stream`: grain ends from `offset` on (in the header's `seq`,
/// echoed), for grains of `grain` bytes (the first 8 bytes of the padding), padded
/// like [`encode_request`].
pub fn encode_fine_request(
    stream: u32,
    offset: u64,
    grain: u64,
    send_ts: u64,
) -> [u8; REPORT_REQUEST_LEN] {
    let mut buf = encode_request(stream, offset, send_ts);
    Header {
        kind: Kind::Load,
        flags: FLAG_REPORT_REQUEST | FLAG_FINE,
        seq: offset,
        send_ts,
        stream,
        payload_len: (REPORT_REQUEST_LEN - HEADER_LEN) as u32,
    }
    .encode(&mut buf);
    buf[HEADER_LEN..HEADER_LEN + 8].copy_from_slice(&grain.to_le_bytes());
    buf
}

/// The grain a fine request asks for; 0 when its datagram is too short to say.
pub fn fine_request_grain(datagram: &[u8]) -> u64 {
    datagram
        .get(HEADER_LEN..HEADER_LEN + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// Builds the datagram answering the fine request `request` with `page` into `out`.
pub fn encode_fine(
    request: &Header,
    page: &FinePage,
    out: &mut Vec<u8>,
) -> Result<(), ReportError> {
    encode_answer(request, page, out)
}

/// Reads a received fine answer: its header and page.
pub fn decode_fine(datagram: &[u8]) -> Result<(Header, FinePage), ReportError> {
    decode_answer(datagram)
}

/// Builds the datagram answering the series request `request` with `page` into `out`.
pub fn encode_series(
    request: &Header,
    page: &SeriesPage,
    out: &mut Vec<u8>,
) -> Result<(), ReportError> {
    encode_answer(request, page, out)
}

/// Reads a received series answer: its header and page.
pub fn decode_series(datagram: &[u8]) -> Result<(Header, SeriesPage), ReportError> {
    decode_answer(datagram)
}

/// Builds the report datagram answering `request` (its seq and timestamp echoed) into
/// `out`, replacing its contents.
pub fn encode_report(
    request: &Header,
    report: &StreamReport,
    out: &mut Vec<u8>,
) -> Result<(), ReportError> {
    encode_answer(request, report, out)
}

/// A [`Kind::Report`] datagram answering `request` with the JSON of `answer`.
fn encode_answer(
    request: &Header,
    answer: &impl Serialize,
    out: &mut Vec<u8>,
) -> Result<(), ReportError> {
    out.clear();
    out.resize(HEADER_LEN, 0);
    serde_json::to_writer(&mut *out, answer)?;
    if out.len() > MAX_REPORT_DATAGRAM {
        return Err(ReportError::TooLong(out.len()));
    }
    let payload_len = (out.len() - HEADER_LEN) as u32;
    Header {
        kind: Kind::Report,
        flags: 0,
        seq: request.seq,
        send_ts: request.send_ts,
        stream: request.stream,
        payload_len,
    }
    .encode(out);
    Ok(())
}

/// Reads a received report datagram: its header (for the echoed seq) and report.
pub fn decode_report(datagram: &[u8]) -> Result<(Header, StreamReport), ReportError> {
    decode_answer(datagram)
}

fn decode_answer<T: serde::de::DeserializeOwned>(
    datagram: &[u8],
) -> Result<(Header, T), ReportError> {
    let header = Header::decode(datagram)?;
    if header.kind != Kind::Report {
        return Err(ReportError::NotAReport(header.kind));
    }
    let report = serde_json::from_slice(&datagram[HEADER_LEN..])?;
    Ok((header, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_round_trip_fits_one_datagram() {
        let req = encode_request(7, 3, 42);
        let request = Header::decode(&req).unwrap();
        assert_eq!(request.flags & FLAG_REPORT_REQUEST, FLAG_REPORT_REQUEST);
        let mut report = StreamReport::empty("[ffff:ffff::ffff:ffff]:65535".into(), 7);
        report.seq.received = u64::MAX;
        report.bytes = u64::MAX;
        report.rate_bps = f64::MAX;
        report.socket_drops = Some(u64::MAX);
        report.socket = Some(u32::MAX);
        let mut out = Vec::new();
        encode_report(&request, &report, &mut out).unwrap();
        assert!(out.len() <= MAX_REPORT_DATAGRAM);
        let (h, back) = decode_report(&out).unwrap();
        assert_eq!((h.seq, h.send_ts, h.stream), (3, 42, 7));
        assert_eq!(back, report);
    }

    #[test]
    fn a_full_series_page_fits_one_datagram_and_a_report_is_not_one() {
        let req = encode_series_request(u32::MAX, 1199, 42);
        let request = Header::decode(&req).unwrap();
        assert_eq!(request.flags, FLAG_REPORT_REQUEST | FLAG_SERIES);
        assert_eq!(request.seq, 1199);
        let page = SeriesPage {
            stream: u32::MAX,
            bin_ns: u64::MAX,
            first_bin: u64::MAX,
            total: usize::MAX,
            offset: usize::MAX,
            bytes: vec![u32::MAX; MAX_PAGE_BINS],
        };
        let mut out = Vec::new();
        encode_series(&request, &page, &mut out).unwrap();
        assert!(out.len() <= REPORT_REQUEST_LEN, "{}", out.len());
        assert_eq!(decode_series(&out).unwrap().1, page);
        // An old sink answers a series request with its report: not a page.
        let report = StreamReport::empty("10.0.0.1:1".into(), 1);
        encode_report(&request, &report, &mut out).unwrap();
        assert!(decode_series(&out).is_err());
    }

    #[test]
    fn a_full_fine_page_fits_one_datagram_and_carries_its_grain() {
        let req = encode_fine_request(u32::MAX, 4000, 256 * 1024, 42);
        let request = Header::decode(&req).unwrap();
        assert_eq!(request.flags, FLAG_REPORT_REQUEST | FLAG_FINE);
        assert_eq!((request.seq, fine_request_grain(&req)), (4000, 256 * 1024));
        assert_eq!(fine_request_grain(&req[..HEADER_LEN + 4]), 0);
        let page = FinePage {
            stream: u32::MAX,
            grain: u64::MAX,
            first_end: u64::MAX,
            total: u64::MAX,
            offset: u64::MAX,
            t_ns: vec![u64::MAX; MAX_FINE_ENDS],
        };
        let mut out = Vec::new();
        encode_fine(&request, &page, &mut out).unwrap();
        assert!(out.len() <= REPORT_REQUEST_LEN, "{}", out.len());
        assert_eq!(decode_fine(&out).unwrap().1, page);
        // An old sink answers a fine request with its report: not a page.
        let report = StreamReport::empty("10.0.0.1:1".into(), 1);
        encode_report(&request, &report, &mut out).unwrap();
        assert!(decode_fine(&out).is_err());
    }

    #[test]
    fn rejects_other_kinds_and_bad_json() {
        let req = encode_request(1, 0, 0);
        assert!(matches!(
            decode_report(&req),
            Err(ReportError::NotAReport(Kind::Load))
        ));
        let mut bad = vec![0u8; HEADER_LEN + 3];
        Header {
            kind: Kind::Report,
            flags: 0,
            seq: 0,
            send_ts: 0,
            stream: 0,
            payload_len: 3,
        }
        .encode(&mut bad);
        bad[HEADER_LEN..].copy_from_slice(b"{x}");
        assert!(matches!(decode_report(&bad), Err(ReportError::Json(_))));
    }
}
