//! The UDP sink: counts load datagrams per (sender address, stream id) with loss,
//! duplicates, reordering, bytes, arrival times, an arrival series
//! ([`super::series`]) and arrival checkpoints for fine-grained throughput and
//! buffer bursts ([`crate::grain`]), in bounded memory, and answers report, series
//! and fine requests.
//!
//! [`SinkState::handle`] is the whole per-datagram logic, free of sockets, so tests
//! and the fuzz target drive it directly; [`super::shards`] holds one per shard of
//! the senders and runs the receive loops around them, one per socket.
//!
//! The sink's own drops: each datagram comes with its socket's kernel drop count
//! ([`Rx`]); a stream keeps the count on each socket it used at its first and at its
//! latest datagram or request there, and reports the rise
//! ([`StreamReport::socket_drops`]). The kernel counts what it drops: a datagram, or
//! a buffer of several that coalesced receive (`UDP_GRO`) made of one sender's run
//! (a GSO send, or a NIC's burst), which counts once: a floor of the datagrams lost
//! at the receiver.

use std::collections::HashMap;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::garbage::{GarbageCounts, GarbageKind};
use super::series::{ArrivalSeries, BIN_NS};
use crate::grain::{validate_grain, Arrivals};
use crate::report::{
    encode_fine, encode_report, encode_series, fine_request_grain, FinePage, SeriesPage,
    StreamReport, FLAG_FINE, MAX_FINE_ENDS, MAX_PAGE_BINS,
};
use crate::seq::{SeqStats, SeqTracker};
use crate::wire::{Header, Kind, FLAG_REPORT_REQUEST, FLAG_SERIES};

/// Default bound on streams tracked at once.
pub const DEFAULT_MAX_STREAMS: usize = 4096;

/// What [`SinkState::handle`] did with one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkOutcome {
    /// Counted as load data.
    Data,
    /// A report request: the answer datagram is in the reply buffer (empty if it could
    /// not be built, which is logged).
    Report,
    /// Dropped and counted as garbage.
    Garbage(GarbageKind),
}

/// Where a datagram arrived: which of the sink's sockets, and that socket's kernel
/// drop count when it was queued (`SO_RXQ_OVFL`, cumulative, wrapping at 2^32).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rx {
    /// Index of the socket among the sink's.
    pub socket: u16,
    /// Datagrams the socket had dropped when this one was queued.
    pub drops: u32,
}

/// A stream's use of one sink socket: the socket's drop count at the stream's first
/// datagram there and at its latest datagram or request there.
#[derive(Debug, Clone, Copy)]
struct SocketSpan {
    socket: u16,
    first: u32,
    last: u32,
}

/// One stream's counters.
#[derive(Debug)]
struct StreamState {
    id: u32,
    seq: SeqTracker,
    bytes: u64,
    first_bytes: u64,
    first_ns: u64,
    last_ns: u64,
    series: ArrivalSeries,
    arrivals: Arrivals,
    /// The sockets the stream arrived on, latest last; at most one entry per socket
    /// of the sink (bounded by its socket count).
    spans: Vec<SocketSpan>,
}

impl StreamState {
    fn new(id: u32, now_ns: u64) -> Self {
        StreamState {
            id,
            seq: SeqTracker::new(),
            bytes: 0,
            first_bytes: 0,
            first_ns: now_ns,
            last_ns: now_ns,
            series: ArrivalSeries::default(),
            arrivals: Arrivals::default(),
            spans: Vec::new(),
        }
    }

    /// Notes the drop count of the socket a datagram or request of this stream
    /// arrived on; the socket becomes the stream's latest.
    fn note_rx(&mut self, rx: Rx) {
        let at = self.spans.iter().rposition(|s| s.socket == rx.socket);
        let mut span = at.map_or(
            SocketSpan {
                socket: rx.socket,
                first: rx.drops,
                last: rx.drops,
            },
            |i| self.spans.remove(i),
        );
        span.last = rx.drops;
        self.spans.push(span);
    }

    /// Datagrams the stream's sockets dropped while it used them.
    fn socket_drops(&self) -> u64 {
        self.spans
            .iter()
            .map(|s| u64::from(s.last.wrapping_sub(s.first)))
            .sum()
    }

    fn record(&mut self, h: &Header, len: u64, arrival_ns: u64, rx: Rx) {
        if self.spans.last().map(|s| s.socket) == Some(rx.socket) {
            // The common case, a run of one stream on one socket: no search.
            if let Some(s) = self.spans.last_mut() {
                s.last = rx.drops;
            }
        } else {
            self.note_rx(rx);
        }
        if self.bytes == 0 {
            self.first_bytes = len;
            self.first_ns = arrival_ns;
        }
        self.seq.record(h.seq);
        self.series.record(arrival_ns, len);
        self.arrivals.record(arrival_ns, len);
        self.bytes += len;
        self.last_ns = self.last_ns.max(arrival_ns);
    }

    fn report(&self, peer: &SocketAddr, garbage: u64) -> StreamReport {
        let span = self.last_ns.saturating_sub(self.first_ns);
        let rate_bps = if span == 0 {
            0.0
        } else {
            (self.bytes - self.first_bytes) as f64 * 8e9 / span as f64
        };
        StreamReport {
            peer: peer.to_string(),
            stream: self.id,
            seq: self.seq.stats(),
            bytes: self.bytes,
            first_arrival_ns: self.first_ns,
            last_arrival_ns: self.last_ns,
            rate_bps,
            garbage,
            socket_drops: Some(self.socket_drops()),
            socket: self.spans.last().map(|s| u32::from(s.socket)),
        }
    }
}

/// A sender address with streams in the table: how many, and the garbage it sent.
#[derive(Debug, Default)]
struct Peer {
    live: usize,
    garbage: u64,
}

/// One stream in the table.
#[derive(Debug)]
struct Slot {
    peer: SocketAddr,
    state: StreamState,
}

/// Sums over streams, evicted ones included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SinkTotals {
    /// Streams ever seen.
    pub streams_seen: u64,
    /// Streams in the table now.
    pub live_streams: u64,
    /// Streams dropped from the table to keep it bounded (oldest idle first).
    pub evicted_streams: u64,
    /// Sequence counters summed over streams.
    pub seq: SeqStats,
    /// Load bytes received.
    pub bytes: u64,
    /// Report requests answered.
    pub reports_sent: u64,
    /// Report requests left unanswered because they were smaller than the answer
    /// (not padded to [`crate::report::REPORT_REQUEST_LEN`]): answering would amplify.
    #[serde(default)]
    pub short_report_requests: u64,
}

impl SinkTotals {
    fn add_stream(&mut self, s: &StreamState) {
        self.seq.merge(&s.seq.stats());
        self.bytes += s.bytes;
    }

    /// Adds another shard's totals to these.
    pub(crate) fn merge(&mut self, o: &SinkTotals) {
        self.streams_seen += o.streams_seen;
        self.live_streams += o.live_streams;
        self.evicted_streams += o.evicted_streams;
        self.seq.merge(&o.seq);
        self.bytes += o.bytes;
        self.reports_sent += o.reports_sent;
        self.short_report_requests += o.short_report_requests;
    }
}

/// One of the sink's receive sockets, as a snapshot sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkSocket {
    /// The CPU its receiving thread is pinned to, if pinned.
    pub cpu: Option<usize>,
    /// Datagrams it received (load, requests and garbage; a coalesced buffer counts
    /// as the datagrams in it).
    pub datagrams: u64,
    /// Datagrams (or coalesced buffers of several) the kernel dropped on it: its drop
    /// count as of its latest datagram; drops after that show with the next one.
    pub drops: u64,
}

/// A sink's state as a snapshot sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SinkSnapshot {
    /// Every live stream, ordered by peer address then stream id.
    pub streams: Vec<StreamReport>,
    /// Sums over all streams ever seen.
    pub totals: SinkTotals,
    /// Dropped datagrams by kind.
    pub garbage: GarbageCounts,
    /// Datagrams (or coalesced buffers of several, each counted once) the sink's own
    /// sockets dropped, all sockets together (the sum of `sockets[].drops`): loss at
    /// the receiver, which no stream's sequence numbers
    /// can tell from the network's.
    #[serde(default)]
    pub drops: u64,
    /// Each receive socket (several with `SO_REUSEPORT`, one thread each).
    #[serde(default)]
    pub sockets: Vec<SinkSocket>,
}

impl SinkSnapshot {
    /// Adds another shard's streams, totals and garbage to these (streams stay
    /// ordered by peer address then stream id).
    pub(crate) fn merge(&mut self, o: SinkSnapshot) {
        self.streams.extend(o.streams);
        self.streams
            .sort_by(|a, b| (&a.peer, a.stream).cmp(&(&b.peer, b.stream)));
        self.totals.merge(&o.totals);
        self.garbage.merge(&o.garbage);
    }
}

/// All the sink's accounting: a bounded table of streams plus totals.
///
/// Streams live in a dense vector indexed by (sender, stream id); the last stream
/// used is remembered, so a run of datagrams of one stream (what a batched sender
/// produces) costs no hash lookup.
#[derive(Debug)]
pub struct SinkState {
    slots: Vec<Slot>,
    index: HashMap<(SocketAddr, u32), usize>,
    peers: HashMap<SocketAddr, Peer>,
    last: Option<(SocketAddr, u32, usize)>,
    max_streams: usize,
    /// Totals of evicted streams, plus the table-independent counters.
    retired: SinkTotals,
    garbage: GarbageCounts,
}

impl SinkState {
    /// An empty sink that tracks at most `max_streams` streams (at least 1).
    pub fn new(max_streams: usize) -> Self {
        SinkState {
            slots: Vec::new(),
            index: HashMap::new(),
            peers: HashMap::new(),
            last: None,
            max_streams: max_streams.max(1),
            retired: SinkTotals::default(),
            garbage: GarbageCounts::default(),
        }
    }

    /// Handles one datagram from `peer` that arrived at `arrival_ns` (server
    /// monotonic clock) on a sink of one socket that never dropped. For a report
    /// request, the answer is written to `reply`.
    pub fn handle(
        &mut self,
        peer: SocketAddr,
        datagram: &[u8],
        arrival_ns: u64,
        reply: &mut Vec<u8>,
    ) -> SinkOutcome {
        self.handle_rx(peer, datagram, arrival_ns, Rx::default(), reply)
    }

    /// [`SinkState::handle`] for a datagram that arrived as `rx` says.
    pub fn handle_rx(
        &mut self,
        peer: SocketAddr,
        datagram: &[u8],
        arrival_ns: u64,
        rx: Rx,
        reply: &mut Vec<u8>,
    ) -> SinkOutcome {
        let header = match Header::decode(datagram) {
            Ok(h) if h.kind == Kind::Load => h,
            Ok(_) => return self.garbage(peer, GarbageKind::WrongKind),
            Err(e) => return self.garbage(peer, GarbageKind::from(&e)),
        };
        if header.flags & FLAG_REPORT_REQUEST != 0 {
            // Drops up to the request count: the stream's last datagrams may be
            // among them.
            if let Some(&i) = self.index.get(&(peer, header.stream)) {
                self.slots[i].state.note_rx(rx);
            }
            let encoded = if header.flags & FLAG_FINE != 0 {
                let grain = fine_request_grain(datagram);
                encode_fine(&header, &self.fine_page(&peer, &header, grain), reply)
            } else if header.flags & FLAG_SERIES != 0 {
                encode_series(&header, &self.series_page(&peer, &header), reply)
            } else {
                encode_report(&header, &self.stream_report(&peer, header.stream), reply)
            };
            if let Err(e) = encoded {
                tracing::error!(%peer, "cannot build report: {e}");
                reply.clear();
            }
            // Never more bytes back than came in: a forged source gets no amplification.
            if reply.len() > datagram.len() {
                reply.clear();
                self.retired.short_report_requests += 1;
            } else if !reply.is_empty() {
                self.retired.reports_sent += 1;
            }
            return SinkOutcome::Report;
        }
        self.stream_mut(peer, header.stream, arrival_ns).record(
            &header,
            datagram.len() as u64,
            arrival_ns,
            rx,
        );
        SinkOutcome::Data
    }

    fn garbage(&mut self, peer: SocketAddr, kind: GarbageKind) -> SinkOutcome {
        self.garbage.add(kind);
        if let Some(p) = self.peers.get_mut(&peer) {
            p.garbage += 1;
        }
        SinkOutcome::Garbage(kind)
    }

    fn peer_garbage(&self, peer: &SocketAddr) -> u64 {
        self.peers.get(peer).map_or(0, |p| p.garbage)
    }

    /// The report of one stream; an empty one if the stream is unknown.
    pub fn stream_report(&self, peer: &SocketAddr, stream: u32) -> StreamReport {
        match self.index.get(&(*peer, stream)) {
            Some(&i) => self.slots[i].state.report(peer, self.peer_garbage(peer)),
            None => StreamReport::empty(peer.to_string(), stream),
        }
    }

    /// The page of a stream's arrival series a series request asks for (from the bin
    /// in its `seq`); an empty one if the stream is unknown.
    fn series_page(&self, peer: &SocketAddr, request: &Header) -> SeriesPage {
        let series = self
            .index
            .get(&(*peer, request.stream))
            .map(|&i| &self.slots[i].state.series);
        let offset = usize::try_from(request.seq).unwrap_or(usize::MAX);
        SeriesPage {
            stream: request.stream,
            bin_ns: BIN_NS,
            first_bin: series.map_or(0, ArrivalSeries::first_bin),
            total: series.map_or(0, ArrivalSeries::len),
            offset,
            bytes: series.map_or_else(Vec::new, |s| s.page(offset, MAX_PAGE_BINS)),
        }
    }

    /// The page of a stream's grain ends a fine request asks for (from the end in its
    /// `seq`, grains of `grain` bytes); an empty one, with grain 0 when the grain is
    /// refused, if the stream is unknown or the grain unusable.
    fn fine_page(&self, peer: &SocketAddr, request: &Header, grain: u64) -> FinePage {
        let usable = validate_grain(grain).is_ok();
        let ends = self
            .index
            .get(&(*peer, request.stream))
            .filter(|_| usable)
            .map(|&i| self.slots[i].state.arrivals.grain_ends(grain))
            .unwrap_or_default();
        let offset = usize::try_from(request.seq).unwrap_or(usize::MAX);
        FinePage {
            stream: request.stream,
            grain: if usable { grain } else { 0 },
            first_end: ends.first_end,
            total: ends.t_ns.len() as u64,
            offset: request.seq,
            t_ns: ends
                .t_ns
                .iter()
                .skip(offset)
                .take(MAX_FINE_ENDS)
                .copied()
                .collect(),
        }
    }

    fn stream_mut(&mut self, peer: SocketAddr, stream: u32, now_ns: u64) -> &mut StreamState {
        if let Some((p, s, i)) = self.last {
            if p == peer && s == stream {
                return &mut self.slots[i].state;
            }
        }
        let i = match self.index.get(&(peer, stream)) {
            Some(&i) => i,
            None => self.insert(peer, stream, now_ns),
        };
        self.last = Some((peer, stream, i));
        &mut self.slots[i].state
    }

    /// Adds a new stream (evicting first if the table is full); returns its slot.
    fn insert(&mut self, peer: SocketAddr, stream: u32, now_ns: u64) -> usize {
        if self.slots.len() >= self.max_streams {
            self.evict_oldest();
        }
        self.slots.push(Slot {
            peer,
            state: StreamState::new(stream, now_ns),
        });
        let i = self.slots.len() - 1;
        self.index.insert((peer, stream), i);
        self.peers.entry(peer).or_default().live += 1;
        self.retired.streams_seen += 1;
        i
    }

    /// Evicts the eighth of the streams idle the longest (at least one), folding their
    /// counters into the totals; amortises the scan over many new streams.
    fn evict_oldest(&mut self) {
        let mut idle: Vec<(u64, usize)> = self
            .slots
            .iter()
            .enumerate()
            .map(|(i, s)| (s.state.last_ns, i))
            .collect();
        let n = (self.max_streams / 8).clamp(1, idle.len());
        idle.select_nth_unstable(n - 1);
        let mut victims: Vec<usize> = idle[..n].iter().map(|&(_, i)| i).collect();
        // Highest index first: swap_remove then only moves survivors into holes.
        victims.sort_unstable_by(|a, b| b.cmp(a));
        for i in victims {
            let gone = self.slots.swap_remove(i);
            self.index.remove(&(gone.peer, gone.state.id));
            if let Some(moved) = self.slots.get(i) {
                self.index.insert((moved.peer, moved.state.id), i);
            }
            if let Some(p) = self.peers.get_mut(&gone.peer) {
                p.live -= 1;
                if p.live == 0 {
                    self.peers.remove(&gone.peer);
                }
            }
            self.retired.add_stream(&gone.state);
            self.retired.evicted_streams += 1;
        }
        self.last = None;
        tracing::debug!(evicted = n, "sink stream table full");
    }

    /// Reports of all live streams and totals over all streams ever seen.
    pub fn snapshot(&self) -> SinkSnapshot {
        let mut totals = self.retired;
        let mut streams = Vec::with_capacity(self.slots.len());
        for s in &self.slots {
            totals.add_stream(&s.state);
            streams.push(s.state.report(&s.peer, self.peer_garbage(&s.peer)));
        }
        totals.live_streams = self.slots.len() as u64;
        streams.sort_by(|a, b| (&a.peer, a.stream).cmp(&(&b.peer, b.stream)));
        SinkSnapshot {
            streams,
            totals,
            garbage: self.garbage,
            drops: 0,
            sockets: Vec::new(),
        }
    }
}

/// The datagrams in one received buffer: GRO-coalesced buffers are cut every
/// `segment` bytes (the last piece may be shorter); an empty datagram is still one.
pub(crate) fn segments(buf: &[u8], segment: Option<usize>) -> impl Iterator<Item = &[u8]> {
    let size = segment.unwrap_or(buf.len()).max(1);
    std::iter::once(buf)
        .filter(|b| b.is_empty())
        .chain(buf.chunks(size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{
        decode_fine, decode_report, decode_series, encode_fine_request, encode_request,
        encode_series_request,
    };
    use crate::wire::HEADER_LEN;

    fn load(seq: u64, stream: u32, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        Header {
            kind: Kind::Load,
            flags: 0,
            seq,
            send_ts: seq * 1000,
            stream,
            payload_len: (len - HEADER_LEN) as u32,
        }
        .encode(&mut b);
        b
    }

    #[test]
    fn counts_and_reports_a_stream() {
        let mut s = SinkState::new(16);
        let peer: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        let mut reply = Vec::new();
        for (i, seq) in [0u64, 1, 3, 2, 2, 5].into_iter().enumerate() {
            let d = load(seq, 9, 100);
            assert_eq!(
                s.handle(peer, &d, 1_000 + i as u64 * 1_000, &mut reply),
                SinkOutcome::Data
            );
        }
        assert_eq!(
            s.handle(peer, b"junk", 0, &mut reply),
            SinkOutcome::Garbage(GarbageKind::Truncated)
        );
        let req = encode_request(9, 77, 0);
        assert_eq!(
            s.handle(peer, &req, 99_000, &mut reply),
            SinkOutcome::Report
        );
        let (h, r) = decode_report(&reply).unwrap();
        assert_eq!((h.seq, r.stream), (77, 9));
        assert_eq!((r.seq.received, r.seq.lost(), r.seq.duplicates), (5, 1, 1));
        assert_eq!(r.seq.reordered, 1);
        assert_eq!(r.bytes, 600);
        assert_eq!((r.first_arrival_ns, r.last_arrival_ns), (1_000, 6_000));
        // 500 bytes after the first datagram over 5 us.
        assert!((r.rate_bps - 500.0 * 8e9 / 5_000.0).abs() < 1e-3);
        assert_eq!(r.garbage, 1);
        let snap = s.snapshot();
        assert_eq!(snap.totals.reports_sent, 1);
        assert_eq!(snap.garbage.total(), 1);
    }

    #[test]
    fn answers_series_requests_page_by_page() {
        let mut s = SinkState::new(16);
        let peer: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        let mut reply = Vec::new();
        // 100 bins of one 100-byte datagram each, from bin 7 on.
        for i in 0..100u64 {
            s.handle(peer, &load(i, 3, 100), (7 + i) * BIN_NS, &mut reply);
        }
        let req = encode_series_request(3, 80, 0);
        assert_eq!(s.handle(peer, &req, 0, &mut reply), SinkOutcome::Report);
        let (h, page) = decode_series(&reply).unwrap();
        assert_eq!((h.seq, page.stream, page.bin_ns), (80, 3, BIN_NS));
        assert_eq!((page.first_bin, page.total, page.offset), (7, 100, 80));
        assert_eq!(page.bytes, vec![100; 20]);
        // The first page is full; an unknown stream's is empty.
        s.handle(peer, &encode_series_request(3, 0, 0), 0, &mut reply);
        assert_eq!(decode_series(&reply).unwrap().1.bytes.len(), MAX_PAGE_BINS);
        s.handle(peer, &encode_series_request(4, 0, 0), 0, &mut reply);
        assert_eq!(decode_series(&reply).unwrap().1.total, 0);
        // Series requests are not load data.
        assert_eq!(s.snapshot().totals.bytes, 10_000);
    }

    #[test]
    fn answers_fine_requests_with_grain_ends_page_by_page() {
        let mut s = SinkState::new(16);
        let peer: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        let mut reply = Vec::new();
        // 1024-byte datagrams 1 us apart from t = 500 us: 16 KiB grain k ends with
        // datagram 16k - 1 (counted from 0), 16k - 1 us after the first; 1600 KiB
        // make ends 0..=100.
        for i in 0..1600u64 {
            s.handle(peer, &load(i, 3, 1024), 500_000 + i * 1_000, &mut reply);
        }
        let grain = crate::grain::CHECKPOINT_BYTES;
        let req = encode_fine_request(3, 48, grain, 0);
        assert_eq!(s.handle(peer, &req, 0, &mut reply), SinkOutcome::Report);
        let (h, page) = decode_fine(&reply).unwrap();
        assert_eq!((h.seq, page.stream, page.grain), (48, 3, grain));
        assert_eq!((page.first_end, page.total, page.offset), (0, 101, 48));
        assert_eq!(page.t_ns.len(), MAX_FINE_ENDS);
        assert_eq!(page.t_ns[0], 48 * 16_000 - 1_000);
        // A grain that is no whole number of checkpoints is refused: grain 0.
        s.handle(peer, &encode_fine_request(3, 0, 1000, 0), 0, &mut reply);
        let page = decode_fine(&reply).unwrap().1;
        assert_eq!((page.grain, page.total), (0, 0));
        // Fine requests are not load data.
        assert_eq!(s.snapshot().totals.bytes, 1600 * 1024);
    }

    #[test]
    fn a_stream_that_changes_socket_keeps_one_state_and_sums_each_sockets_drops() {
        let mut s = SinkState::new(16);
        let peer: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        let mut reply = Vec::new();
        let on = |socket, drops| Rx { socket, drops };
        // Socket 0: drop count 10 at the first datagram, 14 at the last (4 drops).
        for (seq, drops) in [(0u64, 10u32), (1, 12), (2, 14)] {
            s.handle_rx(
                peer,
                &load(seq, 5, 100),
                1_000 + seq,
                on(0, drops),
                &mut reply,
            );
        }
        // Then socket 1, whose count wraps: u32::MAX - 1 to 3 is 5 drops.
        for (seq, drops) in [(3u64, u32::MAX - 1), (4, 1)] {
            s.handle_rx(
                peer,
                &load(seq, 5, 100),
                1_000 + seq,
                on(1, drops),
                &mut reply,
            );
        }
        // The request arrives on socket 1 after 2 more drops there.
        let req = encode_request(5, 1, 0);
        assert_eq!(
            s.handle_rx(peer, &req, 9_000, on(1, 3), &mut reply),
            SinkOutcome::Report
        );
        let (_, r) = decode_report(&reply).unwrap();
        assert_eq!((r.seq.received, r.bytes), (5, 500));
        assert_eq!(r.socket_drops, Some(4 + 5));
        assert_eq!(r.socket, Some(1));
        // Back on socket 0 (count 20): its span goes on from 10.
        s.handle_rx(peer, &load(5, 5, 100), 1_006, on(0, 20), &mut reply);
        let r = s.stream_report(&peer, 5);
        assert_eq!((r.socket_drops, r.socket), (Some(10 + 5), Some(0)));
        // A stream that never saw a drop reports 0, not nothing.
        s.handle(peer, &load(0, 6, 100), 2_000, &mut reply);
        assert_eq!(s.stream_report(&peer, 6).socket_drops, Some(0));
        assert_eq!(s.stream_report(&peer, 7).socket_drops, None);
    }

    #[test]
    fn coalesced_buffers_split_into_datagrams() {
        let buf: Vec<u8> = (0..25).collect();
        let parts: Vec<&[u8]> = segments(&buf, Some(10)).collect();
        assert_eq!(parts, [&buf[..10], &buf[10..20], &buf[20..]]);
        assert_eq!(segments(&buf, None).count(), 1);
        assert_eq!(segments(&[], None).collect::<Vec<_>>(), [&[] as &[u8]]);
        assert_eq!(segments(&[], Some(10)).count(), 1);
    }

    #[test]
    fn table_stays_bounded_and_totals_survive_eviction() {
        let mut s = SinkState::new(64);
        let mut reply = Vec::new();
        for port in 0..1000u16 {
            let peer = SocketAddr::from(([127, 0, 0, 1], 10_000 + port));
            s.handle(peer, &load(0, 1, 64), u64::from(port), &mut reply);
        }
        let snap = s.snapshot();
        assert!(snap.streams.len() <= 64);
        assert_eq!(snap.totals.streams_seen, 1000);
        assert_eq!(snap.totals.live_streams + snap.totals.evicted_streams, 1000);
        assert_eq!(snap.totals.seq.received, 1000);
        assert_eq!(snap.totals.bytes, 64_000);
        // The newest stream is still there.
        assert!(snap.streams.iter().any(|r| r.peer == "127.0.0.1:10999"));
    }
}
