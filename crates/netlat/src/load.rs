//! The load generator (`nnb load`): `streams` pinned threads, one socket each,
//! sending paced UDP datagrams (or a TCP byte stream) at a share of the target rate.
//!
//! Each UDP stream paces by deadline ([`crate::pacing`]) and sends batches with
//! `sendmmsg`, with UDP GSO where the kernel has it ([`crate::sendbatch`]). Every
//! datagram carries the nnb header (sequence number, send time, stream id), so an
//! `nnb serve` sink counts loss, reordering and buffer bursts per stream. At the end
//! each stream asks the sink for its [`StreamReport`] (report request protocol in
//! [`crate::report`]); when nothing answers, the sink's view is "unavailable".
//!
//! With a sampling interval ([`LoadConfig::sample_interval`]) the load also records
//! its throughput over time ([`crate::sampling`]): the sender's rate per interval,
//! and, read back from the sink's arrival series after sending, the received rate.
//!
//! # Rates
//!
//! The *payload rate* counts UDP payload bytes (nnb header included): it is what
//! `--rate` sets. The *wire rate* adds, per datagram, the UDP header (8), the IPv4
//! header (20, or IPv6 40) and Ethernet framing (38: 14 header, 4 FCS, 8 preamble and
//! SFD, 12 inter-frame gap) bytes: what the datagrams occupy on an Ethernet link. For TCP the wire rate
//! assumes full segments of [`TCP_MSS`] bytes with 32 bytes of TCP header
//! (timestamps option), 20 of IPv4 and the same 38 of framing.
//!
//! # Wang & Ng's settings (seed 003, §III.A)
//!
//! Their UDPTest paces in chunks ([`LoadConfig::pacing_chunk`], 128 KB: the chunk
//! goes out back to back, then the sender idles to keep the mean rate) of
//! 1472-byte payloads (1500-byte IP packets) through a 128 KB socket buffer; their
//! TCPTest uses 256 KB send and receive windows ([`LoadConfig::send_buffer`],
//! [`LoadConfig::recv_buffer`]). Both send 800 MB ([`LoadConfig::bytes`]). A TCP
//! load asking for a receive buffer says so in a hello ([`TCP_HELLO_MAGIC`]) that
//! the nnb TCP sink reads before any data and applies to its socket; the buffers
//! asked for and granted are in [`LoadReport::socket`]. A TCP load can sample its
//! `TCP_INFO` and find its quiet periods ([`crate::tcpinfo`]).

use nnb_units::wire::Framing;
use std::io::{self, BufRead, BufReader, ErrorKind, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use nnb_sys::socket::is_datagram_lost;
use serde::Serialize;
use thiserror::Error;

use crate::clock::{duration_ns, now_ns};
use crate::grain::{BufferBursts, FineSeries, FineSettings, GrainEnds, MAX_CHECKPOINTS};
use crate::pacing::Pacer;
use crate::probe::connected_socket;
use crate::report::{
    decode_fine, decode_report, decode_series, encode_fine_request, encode_request,
    encode_series_request, SeriesPage, StreamReport, MAX_FINE_ENDS, MAX_PAGE_BINS,
};
use crate::sampling::{ThroughputSamples, MAX_SAMPLES};
use crate::sendbatch::{set_socket_buffer, BatchSender, Direction, GsoUse, SocketBuffer};
use crate::serve::series::MAX_BINS;
use crate::serve::tcp_sink::TcpAnswer;
use crate::serve::TcpReport;
use crate::wire::{HEADER_LEN, MAX_UDP_PAYLOAD};
use nnb_units::Rate;

pub use nnb_units::wire::{DEFAULT_MSG_SIZE, TCP_MSS};
/// Messages per `sendmmsg` call.
pub const DEFAULT_BATCH: usize = 32;
/// Most bytes per `write` for TCP streams.
const TCP_CHUNK: usize = 256 * 1024;
/// Unit of TCP pacing, bytes.
const TCP_UNIT: usize = 16 * 1024;
/// Report request attempts and the wait for an answer after each.
const REPORT_ATTEMPTS: u32 = 3;
/// The longest a TCP stream waits after its last write for the peer to acknowledge
/// what it still holds (4 MiB of socket buffer leave a 10 Mbit/s link in 3.4 s).
const TCP_DRAIN_LIMIT: Duration = Duration::from_secs(5);
/// How long each report (or series) request attempt waits for the sink's answer
/// by default.
pub const DEFAULT_REPORT_WAIT: Duration = Duration::from_millis(200);
/// Samples a sampled load averages by default (the thesis' 20).
pub const DEFAULT_WINDOW: usize = 20;

/// Settings of one load run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// The sink: an `nnb serve` UDP sink (or TCP sink with `tcp`), or any receiver.
    pub target: SocketAddr,
    /// Aggregate payload rate over all streams; `None` sends as fast as possible.
    pub rate: Option<Rate>,
    /// Parallel streams, each a thread with its own socket; the rate is split evenly.
    pub streams: usize,
    /// UDP payload bytes per datagram (nnb header included); for TCP, the unit of
    /// `Rate::PacketsPerSec`.
    pub msg_size: usize,
    /// How long to send.
    pub duration: Duration,
    /// CPUs for the stream threads: stream `i` runs on `cpus[i % cpus.len()]`;
    /// empty leaves them unpinned.
    pub cpus: Vec<usize>,
    /// Send a TCP stream to a TCP sink instead of UDP datagrams.
    pub tcp: bool,
    /// Try UDP GSO (falls back to plain datagrams when refused).
    pub gso: bool,
    /// Messages per `sendmmsg` call.
    pub batch: usize,
    /// After a stall, send what fell due at once instead of dropping it.
    pub catch_up: bool,
    /// Socket send buffer to ask for, bytes (`SO_SNDBUF`; TCP: the send window);
    /// `None`: [`DEFAULT_UDP_SEND_BUFFER`] for UDP, the kernel's default (and its
    /// autotuning) for TCP.
    pub send_buffer: Option<usize>,
    /// TCP: the receive buffer (the receive window) the sink is asked to set on its
    /// socket (`SO_RCVBUF`), through the connection's hello. UDP: recorded only (the
    /// UDP sink's buffer is its own setting, `nnb serve --recv-buffer`).
    pub recv_buffer: Option<usize>,
    /// Stop after this many payload bytes over all streams (shared evenly), or at
    /// the duration, whichever comes first. UDP: the last datagram of a stream is
    /// shorter to make the count exact (but at least the nnb header).
    pub bytes: Option<u64>,
    /// Pacing granularity, bytes: each chunk goes out back to back and the sender
    /// idles until the next one is due ([`Pacer::with_chunk`]); `None` paces per
    /// datagram (per 16 KiB unit for TCP).
    pub pacing_chunk: Option<usize>,
    /// TCP: sample the first stream's `TCP_INFO` every this long
    /// ([`crate::tcpinfo::Sampler`]); `None` samples nothing.
    pub tcp_info: Option<Duration>,
    /// With `tcp_info`: the shortest silence that is a quiet period.
    pub quiet: Duration,
    /// How long each report request attempt waits for the sink's answer.
    pub report_wait: Duration,
    /// Sample the throughput every this long (a whole number of the sink's 100 ms
    /// bins, UDP only); `None` samples nothing.
    pub sample_interval: Option<Duration>,
    /// How many of the latest samples [`ThroughputSamples`]' means average.
    pub window: usize,
    /// Read each stream's fine-grained throughput and buffer bursts back from the
    /// sink after sending ([`crate::grain`]); `None` reads neither.
    pub fine: Option<FineSettings>,
    /// Lend each UDP stream's socket and the sender's totals to this tap while the
    /// load sends, so a window of it can be read while it runs
    /// ([`crate::window::read_window`]); `None` lends nothing.
    pub tap: Option<std::sync::Arc<crate::window::LoadTap>>,
}

impl LoadConfig {
    /// One UDP stream of [`DEFAULT_MSG_SIZE`] datagrams for 10 s at `rate`, GSO on.
    pub fn new(target: SocketAddr, rate: Option<Rate>) -> Self {
        LoadConfig {
            target,
            rate,
            streams: 1,
            msg_size: DEFAULT_MSG_SIZE,
            duration: Duration::from_secs(10),
            cpus: Vec::new(),
            tcp: false,
            gso: true,
            batch: DEFAULT_BATCH,
            catch_up: false,
            send_buffer: None,
            recv_buffer: None,
            bytes: None,
            pacing_chunk: None,
            tcp_info: None,
            quiet: crate::tcpinfo::DEFAULT_QUIET,
            report_wait: DEFAULT_REPORT_WAIT,
            sample_interval: None,
            window: DEFAULT_WINDOW,
            fine: None,
            tap: None,
        }
    }

    /// Checks the settings, explaining what is wrong: every count and size is
    /// bounded here, before a thread or a buffer is made for it.
    pub fn validate(&self) -> Result<(), LoadError> {
        let bad = |m: String| Err(LoadError::Invalid(m));
        if !(1..=MAX_STREAMS).contains(&self.streams) {
            return bad(format!(
                "{} streams: between 1 and {MAX_STREAMS} (one thread each)",
                self.streams
            ));
        }
        if !self.tcp && !(HEADER_LEN..=MAX_UDP_PAYLOAD).contains(&self.msg_size) {
            return bad(format!(
                "message size {} must be between the {HEADER_LEN}-byte nnb header and {MAX_UDP_PAYLOAD}",
                self.msg_size
            ));
        }
        if self.tcp && self.msg_size == 0 {
            return bad("message size must be above zero".into());
        }
        if let Some(r) = self.rate {
            let v = r.bits_per_sec(self.msg_size);
            if !(v.is_finite() && v > 0.0) {
                return bad(format!("rate {r} must be above zero"));
            }
            if v > MAX_RATE_BPS {
                return bad(format!(
                    "rate {r} is beyond the {} any sender can pace",
                    nnb_units::format_bits_per_sec(MAX_RATE_BPS)
                ));
            }
        }
        if self.duration.is_zero() {
            return bad("the duration must be above zero".into());
        }
        if let Some(interval) = self.sample_interval {
            self.validate_sampling(interval)?;
        }
        self.validate_wang_ng()?;
        if let Some(fine) = &self.fine {
            fine.validate().map_err(LoadError::Invalid)?;
        }
        if self.duration > nnb_units::MAX_DURATION {
            return bad(format!(
                "the duration {:?} is longer than the {:?} nnb accepts",
                self.duration,
                nnb_units::MAX_DURATION
            ));
        }
        Ok(())
    }

    /// Checks a sampling interval against the sink's bins, the duration and
    /// [`MAX_SAMPLES`].
    fn validate_sampling(&self, interval: Duration) -> Result<(), LoadError> {
        let bad = |m: String| Err(LoadError::Invalid(m));
        if self.tcp {
            return bad(
                "throughput sampling reads the UDP sink's arrival series: not with TCP".into(),
            );
        }
        crate::sampling::sample_count(self.duration, interval).map_err(LoadError::Invalid)?;
        if !(1..=MAX_SAMPLES).contains(&self.window) {
            return bad(format!(
                "a window of {} samples: between 1 and {MAX_SAMPLES}",
                self.window
            ));
        }
        Ok(())
    }

    /// Checks Wang & Ng's settings: the byte bound, the pacing chunk, the buffers,
    /// `TCP_INFO` sampling and the quiet threshold.
    fn validate_wang_ng(&self) -> Result<(), LoadError> {
        let bad = |m: String| Err(LoadError::Invalid(m));
        if let Some(b) = self.bytes {
            if b < self.streams as u64 * HEADER_LEN as u64 {
                return bad(format!(
                    "a bound of {b} bytes leaves a stream less than the {HEADER_LEN}-byte nnb header"
                ));
            }
        }
        if let Some(c) = self.pacing_chunk {
            if !(1..=MAX_BUFFER).contains(&c) {
                return bad(format!(
                    "a pacing chunk of {c} bytes: between 1 and {MAX_BUFFER}"
                ));
            }
        }
        for (name, b) in [("send", self.send_buffer), ("receive", self.recv_buffer)] {
            if let Some(b) = b {
                if !(MIN_BUFFER..=MAX_BUFFER).contains(&b) {
                    return bad(format!(
                        "a {name} buffer of {b} bytes: between {MIN_BUFFER} and {MAX_BUFFER}"
                    ));
                }
            }
        }
        if let Some(i) = self.tcp_info {
            if !self.tcp {
                return bad("TCP_INFO sampling is for TCP loads".into());
            }
            if !(MIN_TCP_INFO..=MAX_TCP_INFO).contains(&i) {
                return bad(format!(
                    "a TCP_INFO interval of {i:?}: between {MIN_TCP_INFO:?} and {MAX_TCP_INFO:?}"
                ));
            }
            if self.quiet < i || self.quiet > nnb_units::MAX_DURATION {
                return bad(format!(
                    "a quiet threshold of {:?}: at least the TCP_INFO interval {i:?}",
                    self.quiet
                ));
            }
        }
        Ok(())
    }

    /// The byte bound of stream `index`: an even share of [`LoadConfig::bytes`],
    /// the first streams taking one byte more each until the remainder is spent.
    fn stream_bytes(&self, index: usize) -> Option<u64> {
        let n = self.streams as u64;
        self.bytes
            .map(|b| b / n + u64::from((index as u64) < b % n))
    }

    /// Wire bytes per payload byte on an Ethernet line ([`Framing::Line`]).
    fn wire_factor(&self) -> f64 {
        let ipv6 = self.target.is_ipv6();
        if self.tcp {
            Framing::Line.bytes_per_tcp_segment(ipv6) as f64 / TCP_MSS as f64
        } else {
            Framing::Line.bytes_per_datagram(self.msg_size, ipv6) as f64 / self.msg_size as f64
        }
    }
}

/// A UDP stream's send buffer when none is asked for: 4 MiB, room for bursts.
pub const DEFAULT_UDP_SEND_BUFFER: usize = 4 << 20;
/// Smallest socket buffer a load asks for: the kernel's minimum (`SOCK_MIN_RCVBUF`,
/// about 2 KiB) rounded up.
pub const MIN_BUFFER: usize = 4096;
/// Largest socket buffer (and pacing chunk) a load asks for: 512 MiB, half of
/// `i32::MAX` (the kernel doubles it).
pub const MAX_BUFFER: usize = 512 << 20;
/// Shortest `TCP_INFO` sampling interval.
pub const MIN_TCP_INFO: Duration = Duration::from_micros(100);
/// Longest `TCP_INFO` sampling interval.
pub const MAX_TCP_INFO: Duration = Duration::from_secs(1);
/// First bytes of the hello a TCP load sends before its data when it asks the sink
/// for a receive buffer: the magic, then the buffer's size as a big-endian `u32`
/// ([`TCP_HELLO_LEN`] bytes in all). Load data is zeros, so a sink tells a hello
/// from data by its first byte.
pub const TCP_HELLO_MAGIC: [u8; 8] = *b"NNBTCPH1";
/// Length of the TCP hello: the magic and a `u32`.
pub const TCP_HELLO_LEN: usize = 12;

/// The TCP hello asking the sink for a receive buffer of `recv_buffer` bytes.
pub fn tcp_hello(recv_buffer: u32) -> [u8; TCP_HELLO_LEN] {
    let mut h = [0u8; TCP_HELLO_LEN];
    h[..8].copy_from_slice(&TCP_HELLO_MAGIC);
    h[8..].copy_from_slice(&recv_buffer.to_be_bytes());
    h
}

/// The socket buffers a load asked for and what the kernel granted (the first
/// stream's; every stream asks the same). Granted sizes are what `getsockopt`
/// reads back: Linux doubles the size asked for (the extra half is its
/// bookkeeping), so 256 KB asked reads 512 KB granted; a size above
/// `net.core.wmem_max`/`rmem_max` (for a process without `CAP_NET_ADMIN`) reads
/// twice the cap. `null` where not asked for or not known (a receive buffer of a
/// UDP sink, or of a TCP sink that did not say).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SocketSettings {
    /// Send buffer asked for, bytes.
    pub send_buffer_requested: Option<u64>,
    /// Send buffer as `getsockopt(SO_SNDBUF)` reads it.
    pub send_buffer_granted: Option<u64>,
    /// Receive buffer asked for, bytes.
    pub recv_buffer_requested: Option<u64>,
    /// Receive buffer as the sink's `getsockopt(SO_RCVBUF)` read it.
    pub recv_buffer_granted: Option<u64>,
}

/// Most streams one load runs (one thread and one socket each).
pub const MAX_STREAMS: usize = 256;
/// Fastest rate a load accepts, bit/s: 1 Tbit/s, beyond any NIC a sender paces.
pub const MAX_RATE_BPS: f64 = 1e12;

/// Why a load run failed.
#[derive(Debug, Error)]
pub enum LoadError {
    /// The settings are unusable.
    #[error("invalid load settings: {0}")]
    Invalid(String),
    /// A socket, thread or pinning operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The system's error.
        source: io::Error,
    },
    /// A stream thread panicked.
    #[error("load stream {0} panicked")]
    Panicked(usize),
}

impl LoadError {
    /// Whether the error is the user's to fix (invalid settings), not a failure of
    /// the network or the machine.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, LoadError::Invalid(_))
    }
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> LoadError {
    let what = what.into();
    move |source| LoadError::Io { what, source }
}

/// What the sender did, over all streams or one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct SenderTotals {
    /// Datagrams sent (TCP: `write` calls).
    pub datagrams: u64,
    /// Payload bytes sent (TCP: every byte the kernel accepted; the sender waits for
    /// the peer to acknowledge them, and its rates count to then).
    pub bytes: u64,
    /// Seconds of sending, which the rates below divide by: for a paced stream, the
    /// part of the schedule its datagrams (sent or skipped) occupy, one period each
    /// (N datagrams at rate r: N / r, although the last leaves (N - 1) / r after the
    /// first), or the time from the schedule's start to the end of the last send
    /// when that is longer (a sender behind its schedule); unpaced, the latter.
    /// Over all streams, the longest stream's.
    pub elapsed_s: f64,
    /// Payload rate, bit/s.
    pub payload_bps: f64,
    /// Wire rate, bit/s (see the module documentation for the convention).
    pub wire_bps: f64,
    /// Datagrams per second (TCP: `write` calls per second).
    pub pps: f64,
    /// Schedule slots dropped after stalls (no catch-up).
    pub skipped: u64,
    /// Sends the kernel refused (e.g. ICMP port unreachable from an absent sink).
    pub send_errors: u64,
}

/// One stream's result.
#[derive(Debug, Clone, Serialize)]
pub struct StreamResult {
    /// Stream id on the wire.
    pub stream: u32,
    /// CPU the thread was pinned to, and verified to run on: the affinity read back
    /// is exactly that CPU and `sched_getcpu` says so, or the run fails
    /// ([`nnb_sys::affinity::pin_current_thread`]).
    pub cpu: Option<usize>,
    /// Local address of the stream's socket.
    pub local: String,
    /// What this stream sent.
    pub sent: SenderTotals,
    /// UDP GSO use (UDP streams).
    pub gso: Option<GsoUse>,
    /// The socket's send buffer, asked for and granted (UDP streams).
    pub send_buffer: Option<SocketBuffer>,
    /// The UDP sink's view of this stream, when it answered.
    pub sink: Option<StreamReport>,
    /// The TCP sink's view of this connection, when it answered.
    pub tcp_sink: Option<TcpReport>,
    /// The buffers asked for and granted; summarized in [`LoadReport::socket`].
    #[serde(skip)]
    pub socket: SocketSettings,
    /// This stream's `TCP_INFO` samples and quiet periods (the first TCP stream,
    /// with [`LoadConfig::tcp_info`]); in [`LoadReport::tcp_info`] and
    /// [`LoadReport::quiet`].
    #[serde(skip)]
    pub sampled: Option<crate::tcpinfo::Sampled>,
    /// The sink's arrival series of this stream (sampled loads), when every page
    /// came back; summed into [`LoadReport::samples`], not written out itself.
    #[serde(skip)]
    pub series: Option<Vec<SeriesPage>>,
    /// The receiver's throughput per grain ([`LoadConfig::fine`]), when the sink
    /// answered with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fine: Option<FineSeries>,
    /// Buffer bursts against the link rate, from the same grains.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buffer_bursts: Option<BufferBursts>,
}

/// The sink's view over all streams.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SinkView {
    /// Streams the sink reported on (of all streams).
    pub streams_reported: usize,
    /// Payload bytes the sink received.
    pub bytes: u64,
    /// Received payload rate, sum of the streams' rates, bit/s.
    pub rate_bps: f64,
    /// Datagrams the sink never received (UDP).
    pub lost: u64,
    /// Datagrams the sink expected (UDP).
    pub expected: u64,
    /// Duplicated datagrams (UDP).
    pub duplicates: u64,
    /// Reordered datagrams (UDP).
    pub reordered: u64,
    /// Datagrams the sink's own receive sockets dropped while the streams used them
    /// (UDP; [`SinkView::socket_drops`]): of `lost`, about this many were lost at the
    /// receiver, not in the network (more where a dropped buffer held several
    /// coalesced datagrams; fewer where other senders' drops on those sockets count). `None` when no report said (a sink that does not count
    /// them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drops: Option<u64>,
}

impl SinkView {
    /// The sink's drops over `reports`: streams on one sink socket share its drop
    /// count, so per socket the largest of its streams' counts (they ran together),
    /// summed over the sockets. `None` when no report has a count.
    pub fn socket_drops<'a>(reports: impl IntoIterator<Item = &'a StreamReport>) -> Option<u64> {
        let mut per_socket: Vec<(u32, u64)> = Vec::new();
        for r in reports {
            let Some(d) = r.socket_drops else { continue };
            let socket = r.socket.unwrap_or(0);
            match per_socket.iter_mut().find(|(s, _)| *s == socket) {
                Some((_, most)) => *most = (*most).max(d),
                None => per_socket.push((socket, d)),
            }
        }
        (!per_socket.is_empty()).then(|| per_socket.iter().map(|(_, d)| d).sum())
    }

    /// Lost share of expected datagrams.
    pub fn loss_ratio(&self) -> f64 {
        if self.expected == 0 {
            0.0
        } else {
            self.lost as f64 / self.expected as f64
        }
    }
}

/// Result of a load run.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    /// Sink address.
    pub target: String,
    /// "udp" or "tcp".
    pub protocol: &'static str,
    /// Target payload rate, bit/s (absent: as fast as possible).
    pub target_bps: Option<f64>,
    /// Payload bytes per datagram.
    pub msg_size: usize,
    /// The sender's view over all streams.
    pub sent: SenderTotals,
    /// Per stream.
    pub streams: Vec<StreamResult>,
    /// The sink's view, when at least one stream got an answer; `None` when the
    /// target is not an nnb sink (or its answers were lost).
    pub sink: Option<SinkView>,
    /// The throughput over time, sent and received, when the load was sampled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<ThroughputSamples>,
    /// The socket buffers asked for and granted, when one was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket: Option<SocketSettings>,
    /// The byte bound over all streams ([`LoadConfig::bytes`]), when there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_bound: Option<u64>,
    /// The first stream's `TCP_INFO` samples (TCP, with [`LoadConfig::tcp_info`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_info: Option<crate::tcpinfo::TcpInfoReport>,
    /// The quiet periods in those samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quiet: Option<crate::tcpinfo::QuietReport>,
}

/// One reporting interval of a running load, over all streams.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LoadInterval {
    /// Start of the interval since the run started.
    pub start_s: f64,
    /// Length of the interval.
    pub length_s: f64,
    /// Datagrams sent in the interval.
    pub datagrams: u64,
    /// Payload rate in the interval, bit/s.
    pub payload_bps: f64,
    /// Wire rate in the interval, bit/s.
    pub wire_bps: f64,
}

/// Live counters a stream thread updates after each batch.
#[derive(Debug, Default)]
struct LiveCounters {
    datagrams: AtomicU64,
    bytes: AtomicU64,
}

/// Runs the load and returns the sender's and the sink's views.
pub fn run(cfg: &LoadConfig, stop: &AtomicBool) -> Result<LoadReport, LoadError> {
    run_with_intervals(cfg, stop, None, &mut |_| {})
}

/// Like [`run`], calling `on_interval` every `interval` with the achieved rates.
pub fn run_with_intervals(
    cfg: &LoadConfig,
    stop: &AtomicBool,
    interval: Option<Duration>,
    on_interval: &mut dyn FnMut(&LoadInterval),
) -> Result<LoadReport, LoadError> {
    cfg.validate()?;
    if interval.is_some_and(|i| i.is_zero()) {
        return Err(LoadError::Invalid("the interval must be above zero".into()));
    }
    if let (Some(i), Some(s)) = (interval, cfg.sample_interval) {
        if i != s {
            return Err(LoadError::Invalid(format!(
                "a reporting interval of {i:?} beside a sampling interval of {s:?}"
            )));
        }
    }
    let mut sent_samples = Vec::new();
    let sampled = cfg.sample_interval;
    let mut on_interval = |iv: &LoadInterval| {
        // Only whole intervals are samples: not the part after the last one.
        let whole = sampled.is_some_and(|s| iv.length_s >= s.as_secs_f64() * 0.999);
        if whole && sent_samples.len() < MAX_SAMPLES {
            sent_samples.push(iv.payload_bps);
        }
        on_interval(iv);
    };
    let interval = interval.or(sampled);
    let live: Vec<LiveCounters> = (0..cfg.streams).map(|_| LiveCounters::default()).collect();
    // Every stream starts on the same schedule, a moment after its thread is up.
    let start_ns = now_ns() + 5_000_000;
    let end_ns = start_ns.saturating_add(duration_ns(cfg.duration));
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.streams)
            .map(|i| {
                let live = &live[i];
                s.spawn(move || run_stream(cfg, i, start_ns, end_ns, stop, live))
            })
            .collect();
        watch_intervals(cfg, &live, start_ns, interval, &handles, &mut on_interval);
        handles
            .into_iter()
            .enumerate()
            .map(|(i, h)| h.join().map_err(|_| LoadError::Panicked(i))?)
            .collect::<Result<Vec<_>, LoadError>>()
    })?;
    let mut report = summarize(cfg, results);
    report.samples = sampled.map(|s| {
        let series: Vec<Option<Vec<SeriesPage>>> =
            report.streams.iter().map(|s| s.series.clone()).collect();
        ThroughputSamples::new(duration_ns(s), cfg.window, sent_samples, &series)
    });
    Ok(report)
}

/// Samples the live counters every `interval` until all streams are done.
fn watch_intervals<T>(
    cfg: &LoadConfig,
    live: &[LiveCounters],
    start_ns: u64,
    interval: Option<Duration>,
    handles: &[std::thread::ScopedJoinHandle<'_, T>],
    on_interval: &mut dyn FnMut(&LoadInterval),
) {
    let Some(interval) = interval else { return };
    let len = duration_ns(interval);
    let sample = || {
        live.iter().fold((0, 0), |(d, b), c| {
            (
                d + c.datagrams.load(Ordering::Relaxed),
                b + c.bytes.load(Ordering::Relaxed),
            )
        })
    };
    // Counters start at zero; nothing is sent before `start_ns`.
    let (mut t0, mut d0, mut b0) = (start_ns, 0, 0);
    crate::clock::wait_until(start_ns, 0);
    loop {
        let next = t0 + len;
        while now_ns() < next && !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(5).min(interval));
        }
        let t1 = now_ns().min(next);
        let (d1, b1) = sample();
        let secs = (t1 - t0) as f64 / 1e9;
        if secs > 0.0 && (d1 > d0 || t1 == next) {
            let payload_bps = (b1 - b0) as f64 * 8.0 / secs;
            on_interval(&LoadInterval {
                start_s: (t0 - start_ns) as f64 / 1e9,
                length_s: secs,
                datagrams: d1 - d0,
                payload_bps,
                wire_bps: payload_bps * cfg.wire_factor(),
            });
        }
        if handles.iter().all(|h| h.is_finished()) {
            return;
        }
        (t0, d0, b0) = (t1, d1, b1);
    }
}

/// One stream thread: pin, send until `end_ns`, then ask for the sink's report.
fn run_stream(
    cfg: &LoadConfig,
    index: usize,
    start_ns: u64,
    end_ns: u64,
    stop: &AtomicBool,
    live: &LiveCounters,
) -> Result<StreamResult, LoadError> {
    let cpu = (!cfg.cpus.is_empty()).then(|| cfg.cpus[index % cfg.cpus.len()]);
    if let Some(c) = cpu {
        nnb_sys::affinity::pin_current_thread(c)
            .map_err(io::Error::from)
            .map_err(io_err(format!("pinning load stream {index}")))?;
    }
    crate::clock::precise_sleeps();
    let share = 1.0 / cfg.streams as f64;
    let rate = cfg.rate.map(|r| r.scaled(share));
    let job = StreamJob {
        cfg,
        stream: index as u32,
        cpu,
        rate,
        start_ns,
        end_ns,
        stop,
        live,
        budget: cfg.stream_bytes(index),
    };
    if cfg.tcp {
        tcp_stream(job)
    } else {
        udp_stream(job)
    }
}

/// What one stream thread sends, where, when and how fast (its share of the rate),
/// and where it reports: the same for the UDP and the TCP sender.
#[derive(Clone, Copy)]
struct StreamJob<'a> {
    cfg: &'a LoadConfig,
    stream: u32,
    cpu: Option<usize>,
    rate: Option<Rate>,
    start_ns: u64,
    end_ns: u64,
    stop: &'a AtomicBool,
    live: &'a LiveCounters,
    /// Payload bytes this stream may send ([`LoadConfig::bytes`]'s share).
    budget: Option<u64>,
}

/// Totals of one stream from its counts and its sending time (see
/// [`SenderTotals::elapsed_s`] and [`sending_ns`]).
fn totals(cfg: &LoadConfig, datagrams: u64, bytes: u64, elapsed_ns: u64) -> SenderTotals {
    let secs = elapsed_ns as f64 / 1e9;
    let per_s = |v: f64| if secs > 0.0 { v / secs } else { 0.0 };
    let payload_bps = per_s(bytes as f64 * 8.0);
    SenderTotals {
        datagrams,
        bytes,
        elapsed_s: secs,
        payload_bps,
        wire_bps: payload_bps * cfg.wire_factor(),
        pps: per_s(datagrams as f64),
        skipped: 0,
        send_errors: 0,
    }
}

fn udp_stream(job: StreamJob<'_>) -> Result<StreamResult, LoadError> {
    let StreamJob {
        cfg,
        stream,
        cpu,
        rate,
        start_ns,
        end_ns,
        stop,
        live,
        budget,
    } = job;
    let sock =
        connected_socket(cfg.target).map_err(|(what, source)| LoadError::Io { what, source })?;
    let asked = cfg.send_buffer.unwrap_or(DEFAULT_UDP_SEND_BUFFER);
    let send_buffer = set_socket_buffer(&sock, Direction::Send, asked);
    let socket = SocketSettings {
        send_buffer_requested: cfg.send_buffer.map(|b| b as u64),
        send_buffer_granted: cfg
            .send_buffer
            .and_then(|_| granted(&sock, Direction::Send)),
        recv_buffer_requested: cfg.recv_buffer.map(|b| b as u64),
        recv_buffer_granted: None,
    };
    let local = sock
        .local_addr()
        .map_or_else(|_| "?".into(), |a| a.to_string());
    if let Some(tap) = &cfg.tap {
        tap.attach(stream, &local, &sock);
    }
    let mut sender = BatchSender::new(sock, cfg.msg_size, cfg.batch, cfg.gso);
    let mut pacer = Pacer::new(
        start_ns,
        rate.map(|r| r.packets_per_sec(cfg.msg_size)),
        cfg.catch_up,
    )
    .with_quantum(crate::pacing::LOAD_QUANTUM_NS);
    if let Some(c) = cfg.pacing_chunk {
        pacer = pacer.with_chunk(c.div_ceil(cfg.msg_size) as u64);
    }
    // With a byte bound: this many full datagrams, then the short ones.
    let (mut full_left, mut short) = budget.map_or((u64::MAX, Vec::new()), |b| {
        bounded_datagrams(b, cfg.msg_size)
    });
    let (mut seq, mut bytes, mut send_errors) = (0u64, 0u64, 0u64);
    let mut last_send_ns = None;
    crate::clock::wait_until(start_ns, crate::pacing::LOAD_SPIN_NS);
    let mut now = now_ns();
    while now < end_ns && !stop.load(Ordering::Relaxed) {
        let n = pacer.due(now, sender.capacity().min(full_left.max(1)));
        if n == 0 {
            pacer.wait(end_ns);
            now = now_ns();
            continue;
        }
        if cfg.tap.as_ref().is_some_and(|t| t.paused()) {
            // A window is being read through this socket: the slots pass unsent, so
            // the requests do not queue behind the load (see `LoadTap::paused`).
            pacer.sent(n);
            std::thread::sleep(std::time::Duration::from_micros(200));
            now = now_ns();
            continue;
        }
        let full = full_left > 0;
        let (result, size) = if !full {
            let Some(&len) = short.first() else { break };
            let r = send_short(sender.socket(), stream, seq, len, now).map(|()| 1);
            if r.is_ok() {
                short.remove(0);
            }
            (r, len)
        } else {
            (sender.send(stream, seq, n, now), cfg.msg_size)
        };
        match result {
            Ok(sent) => {
                seq += sent;
                bytes += sent * size as u64;
                if full && full_left != u64::MAX {
                    full_left -= sent;
                }
                last_send_ns = Some(now_ns());
                pacer.sent(sent);
                live.datagrams.fetch_add(sent, Ordering::Relaxed);
                live.bytes.fetch_add(sent * size as u64, Ordering::Relaxed);
                if let Some(tap) = &cfg.tap {
                    tap.sent(sent, sent * size as u64);
                }
            }
            Err(e) if is_datagram_lost(&e) => {
                // Nothing listens (ICMP unreachable): these slots are spent, unsent.
                send_errors += 1;
                pacer.sent(n);
            }
            Err(e) => return Err(io_err(format!("sending load stream {stream}"))(e)),
        }
        if full_left == 0 && short.is_empty() {
            break;
        }
        now = now_ns();
    }
    if let Some(tap) = &cfg.tap {
        tap.detach(stream);
    }
    let now = now_ns();
    let elapsed = sending_ns(&pacer, start_ns, last_send_ns, now);
    let mut sent = totals(cfg, seq, bytes, elapsed);
    sent.skipped = pacer.skipped();
    sent.send_errors = send_errors;
    let sink = request_report(sender.socket(), stream, seq, cfg.report_wait);
    let series = cfg
        .sample_interval
        .and_then(|_| request_series(sender.socket(), stream, cfg.report_wait));
    let (fine, buffer_bursts) = measure_fine(
        cfg.fine,
        cfg.fine
            .and_then(|f| request_fine(sender.socket(), stream, f.grain, cfg.report_wait)),
    );
    Ok(StreamResult {
        stream,
        cpu,
        local,
        sent,
        gso: Some(sender.gso().clone()),
        send_buffer: Some(send_buffer),
        sink,
        tcp_sink: None,
        socket,
        sampled: None,
        series,
        fine,
        buffer_bursts,
    })
}

/// A stream's sending time (see [`SenderTotals::elapsed_s`]): the schedule span
/// of its used slots, or the time from `start_ns` to the end of its last send
/// (`now_ns` when nothing was sent) when that is longer. Ending at the last send, not
/// at the stop: a stall between the two is not load.
fn sending_ns(pacer: &Pacer, start_ns: u64, last_send_ns: Option<u64>, now_ns: u64) -> u64 {
    let sending = last_send_ns.unwrap_or(now_ns).saturating_sub(start_ns);
    pacer.span_ns().map_or(sending, |span| span.max(sending))
}

/// A byte bound in datagrams of `msg_size`: how many full ones, then the sizes of
/// the short ones that make the count exact. A remainder of at least the nnb
/// header is one short datagram; a smaller one is merged with the last full
/// datagram and split in two (each at least the header) when that fits, and is
/// padded to the header otherwise (at most `HEADER_LEN - 1` bytes over).
fn bounded_datagrams(bytes: u64, msg_size: usize) -> (u64, Vec<usize>) {
    let (full, tail) = (bytes / msg_size as u64, (bytes % msg_size as u64) as usize);
    if tail == 0 {
        (full, Vec::new())
    } else if tail >= HEADER_LEN {
        (full, vec![tail])
    } else if full > 0 && msg_size + tail >= 2 * HEADER_LEN {
        (full - 1, vec![msg_size + tail - HEADER_LEN, HEADER_LEN])
    } else {
        (full, vec![HEADER_LEN])
    }
}

/// Sends one load datagram of `len` bytes (at least the nnb header) numbered `seq`.
fn send_short(sock: &UdpSocket, stream: u32, seq: u64, len: usize, send_ts: u64) -> io::Result<()> {
    let mut buf = vec![0u8; len.max(HEADER_LEN)];
    crate::wire::Header {
        kind: crate::wire::Kind::Load,
        flags: 0,
        seq,
        send_ts,
        stream,
        payload_len: (buf.len() - HEADER_LEN) as u32,
    }
    .encode(&mut buf[..HEADER_LEN]);
    sock.send(&buf).map(|_| ())
}

/// A socket buffer's size as `getsockopt` reads it (twice what was asked for on
/// Linux); `None` when it cannot be read.
fn granted(sock: &impl std::os::fd::AsFd, dir: Direction) -> Option<u64> {
    nnb_sys::socket::buffer_size(sock, dir)
        .ok()
        .map(|b| b as u64)
}

/// Asks the sink for its report on `stream` (up to [`REPORT_ATTEMPTS`] times);
/// `None` when nothing answers.
fn request_report(
    sock: &UdpSocket,
    stream: u32,
    next_seq: u64,
    wait: Duration,
) -> Option<StreamReport> {
    ask(sock, wait, |attempt| {
        let req = encode_request(stream, next_seq + u64::from(attempt), now_ns());
        (req, move |answer: &[u8]| match decode_report(answer) {
            Ok((h, report)) if h.stream == stream => Some(report),
            _ => None,
        })
    })
}

/// Reads the sink's arrival series of `stream` page by page (each page asked up to
/// [`REPORT_ATTEMPTS`] times); `None` when a page does not come back, or the sink
/// claims more bins than it keeps.
fn request_series(sock: &UdpSocket, stream: u32, wait: Duration) -> Option<Vec<SeriesPage>> {
    series_from(sock, stream, wait, REPORT_ATTEMPTS, 0)
}

/// [`request_series`] from bin `offset` of the series on (an offset past its end
/// gets one empty page, which says how many bins it holds), each page asked up to
/// `attempts` times: a running load's window reader asks through its sender's
/// saturated queue, where a request may be dropped like any datagram.
pub(crate) fn series_from(
    sock: &UdpSocket,
    stream: u32,
    wait: Duration,
    attempts: u32,
    mut offset: usize,
) -> Option<Vec<SeriesPage>> {
    let mut pages: Vec<SeriesPage> = Vec::new();
    // At most MAX_BINS / MAX_PAGE_BINS pages, and one to learn that there are none.
    for _ in 0..=MAX_BINS.div_ceil(MAX_PAGE_BINS) {
        let page = ask_up_to(sock, wait, attempts, |_| {
            let req = encode_series_request(stream, offset as u64, now_ns());
            (req, move |answer: &[u8]| match decode_series(answer) {
                Ok((h, page)) if h.stream == stream && page.offset == offset => Some(page),
                _ => None,
            })
        })?;
        if page.total > MAX_BINS {
            return None;
        }
        offset += page.bytes.len();
        let done = offset >= page.total || page.bytes.is_empty();
        pages.push(page);
        if done {
            return Some(pages);
        }
    }
    None
}

/// Reads the ends of the sink's grains of `stream` page by page (each page asked up
/// to [`REPORT_ATTEMPTS`] times); `None` when a page does not come back, the sink
/// refuses the grain or claims more ends than it keeps.
fn request_fine(sock: &UdpSocket, stream: u32, grain: u64, wait: Duration) -> Option<GrainEnds> {
    let mut ends = GrainEnds {
        grain,
        ..GrainEnds::default()
    };
    // The sink keeps at most MAX_CHECKPOINTS + 1 ends (the smallest grain).
    let most = MAX_CHECKPOINTS + 1;
    for _ in 0..=most.div_ceil(MAX_FINE_ENDS) {
        let offset = ends.t_ns.len() as u64;
        let page = ask(sock, wait, |_| {
            let req = encode_fine_request(stream, offset, grain, now_ns());
            (req, move |answer: &[u8]| match decode_fine(answer) {
                Ok((h, page)) if h.stream == stream && page.offset == offset => Some(page),
                _ => None,
            })
        })?;
        if page.grain != grain || page.total > most as u64 {
            return None;
        }
        ends.first_end = page.first_end;
        let done = page.t_ns.is_empty() || offset + page.t_ns.len() as u64 >= page.total;
        ends.t_ns.extend(page.t_ns);
        if done {
            return Some(ends);
        }
    }
    None
}

/// A stream's fine-grained series and buffer bursts from the ends of its grains,
/// when both the settings and the ends are there.
fn measure_fine(
    fine: Option<FineSettings>,
    ends: Option<GrainEnds>,
) -> (Option<FineSeries>, Option<BufferBursts>) {
    match fine.zip(ends).and_then(|(f, e)| f.measure(&e)) {
        Some((series, bursts)) => (Some(series), Some(bursts)),
        None => (None, None),
    }
}

/// Sends the request `attempt` builds (up to [`REPORT_ATTEMPTS`] times) and returns
/// the first answer its checker accepts within `wait` of each send.
fn ask<T, A: Fn(&[u8]) -> Option<T>>(
    sock: &UdpSocket,
    wait: Duration,
    attempt: impl FnMut(u32) -> ([u8; crate::report::REPORT_REQUEST_LEN], A),
) -> Option<T> {
    ask_up_to(sock, wait, REPORT_ATTEMPTS, attempt)
}

/// [`ask`], up to `attempts` times.
fn ask_up_to<T, A: Fn(&[u8]) -> Option<T>>(
    sock: &UdpSocket,
    wait: Duration,
    attempts: u32,
    mut attempt: impl FnMut(u32) -> ([u8; crate::report::REPORT_REQUEST_LEN], A),
) -> Option<T> {
    if sock.set_read_timeout(Some(wait)).is_err() {
        return None;
    }
    let mut buf = vec![0u8; 65_536];
    for n in 0..attempts {
        let (req, accept) = attempt(n);
        // The padded request is larger than a load datagram: sent as one datagram
        // whatever GSO segment size the socket has (a running load's window reader
        // shares the socket with its sender, whose GSO stays on).
        if let Err(e) = nnb_sys::socket::send_unsegmented(sock, &req) {
            tracing::debug!("report request failed: {e}");
        }
        let deadline = now_ns().saturating_add(duration_ns(wait));
        while now_ns() < deadline {
            match sock.recv(&mut buf) {
                Ok(len) => {
                    // Anything else (a stray pong, an old answer): keep waiting.
                    if let Some(answer) = accept(&buf[..len]) {
                        return Some(answer);
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    }
    None
}

fn tcp_stream(job: StreamJob<'_>) -> Result<StreamResult, LoadError> {
    let StreamJob {
        cfg,
        stream,
        cpu,
        rate,
        start_ns,
        end_ns,
        stop,
        live,
        budget,
    } = job;
    let mut conn = TcpStream::connect_timeout(&cfg.target, Duration::from_secs(3))
        .map_err(io_err(format!("connecting to the TCP sink {}", cfg.target)))?;
    let local = conn
        .local_addr()
        .map_or_else(|_| "?".into(), |a| a.to_string());
    if let Some(b) = cfg.send_buffer {
        if let Err(e) = nnb_sys::socket::set_buffer(&conn, Direction::Send, b) {
            tracing::debug!("could not set the TCP send buffer to {b} bytes: {e}");
        }
    }
    if let Some(b) = cfg.recv_buffer {
        // Validated: at most MAX_BUFFER, which a u32 holds.
        conn.write_all(&tcp_hello(b as u32))
            .map_err(io_err(format!("sending the hello of TCP stream {stream}")))?;
    }
    let mut socket = SocketSettings {
        send_buffer_requested: cfg.send_buffer.map(|b| b as u64),
        send_buffer_granted: cfg
            .send_buffer
            .and_then(|_| granted(&conn, Direction::Send)),
        recv_buffer_requested: cfg.recv_buffer.map(|b| b as u64),
        recv_buffer_granted: None,
    };
    let sampler = match cfg.tcp_info.filter(|_| stream == 0) {
        Some(every) => Some(
            crate::tcpinfo::Sampler::start(&conn, every, cfg.quiet, start_ns).map_err(io_err(
                format!("starting TCP_INFO sampling of stream {stream}"),
            ))?,
        ),
        None => None,
    };
    // The pacer counts TCP_UNIT-byte units: small enough for smooth pacing, large
    // enough that a write is worth its system call.
    let mut pacer = Pacer::new(
        start_ns,
        rate.map(|r| r.bits_per_sec(cfg.msg_size) / 8.0 / TCP_UNIT as f64),
        cfg.catch_up,
    );
    if let Some(c) = cfg.pacing_chunk {
        pacer = pacer.with_chunk(c.div_ceil(TCP_UNIT) as u64);
    }
    let chunk = vec![0u8; TCP_CHUNK];
    let max_units = (TCP_CHUNK / TCP_UNIT) as u64;
    let (mut bytes, mut writes) = (0u64, 0u64);
    let limit = budget.unwrap_or(u64::MAX);
    let mut last_send_ns = None;
    crate::clock::wait_until(start_ns, crate::pacing::LOAD_SPIN_NS);
    let mut now = now_ns();
    while now < end_ns && bytes < limit && !stop.load(Ordering::Relaxed) {
        let n = pacer.due(now, max_units);
        if n == 0 {
            pacer.wait(end_ns);
            now = now_ns();
            continue;
        }
        let len = (n as usize * TCP_UNIT).min(usize::try_from(limit - bytes).unwrap_or(usize::MAX));
        conn.write_all(&chunk[..len])
            .map_err(io_err(format!("writing TCP stream {stream}")))?;
        pacer.sent(n);
        bytes += len as u64;
        writes += 1;
        last_send_ns = Some(now_ns());
        live.datagrams.fetch_add(1, Ordering::Relaxed);
        live.bytes.fetch_add(len as u64, Ordering::Relaxed);
        now = now_ns();
    }
    // Every byte the kernel accepted is sent: the sink reads them all before it
    // reports. They have not all left when the last write returns (on a slow link up to
    // a whole socket buffer, megabytes, is still queued), so the rate is taken over the
    // time the send queue took to drain, which a short run would otherwise overstate.
    let drain = drain_send_queue(
        &conn,
        now_ns().saturating_add(duration_ns(TCP_DRAIN_LIMIT)),
        stop,
    );
    let last = last_send_ns.map(|t| t.max(drain.at_ns));
    let elapsed = sending_ns(&pacer, start_ns, last, drain.at_ns);
    let mut sent = totals(cfg, writes, bytes.saturating_sub(drain.left), elapsed);
    sent.bytes = bytes;
    sent.skipped = pacer.skipped();
    let sampled = sampler.and_then(crate::tcpinfo::Sampler::finish);
    let answer = tcp_report(conn, cfg.report_wait * REPORT_ATTEMPTS);
    socket.recv_buffer_granted = answer.as_ref().and_then(|a| a.report.recv_buffer_granted);
    let (fine, buffer_bursts) = measure_fine(
        cfg.fine,
        answer.as_ref().and_then(|a| a.checkpoints.clone()),
    );
    let tcp_sink = answer.map(|a| a.report);
    Ok(StreamResult {
        stream,
        cpu,
        local,
        sent,
        gso: None,
        send_buffer: None,
        sink: None,
        tcp_sink,
        socket,
        sampled,
        series: None,
        fine,
        buffer_bursts,
    })
}

/// Where a TCP send queue stood when [`drain_send_queue`] stopped waiting.
struct Drain {
    /// When the queue was found empty, or the wait ended.
    at_ns: u64,
    /// Bytes still unacknowledged then: 0 unless the wait ran out or was stopped.
    left: u64,
}

/// Waits (polling every millisecond) until the peer has acknowledged every byte
/// written to `conn`, `deadline_ns` passes or `stop` is set.
fn drain_send_queue(conn: &TcpStream, deadline_ns: u64, stop: &AtomicBool) -> Drain {
    loop {
        let left = nnb_sys::socket::send_queue_bytes(conn).unwrap_or(0) as u64;
        let at_ns = now_ns();
        if left == 0 || at_ns >= deadline_ns || stop.load(Ordering::Relaxed) {
            return Drain { at_ns, left };
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Longest answer line read from a TCP sink: its checkpoints (at most
/// [`MAX_CHECKPOINTS`] + 1 numbers of up to 20 digits) and report fit.
const MAX_TCP_ANSWER: u64 = 4 << 20;

/// Half-closes the connection and reads the TCP sink's one-line JSON answer (at most
/// [`MAX_TCP_ANSWER`] bytes).
fn tcp_report(conn: TcpStream, wait: Duration) -> Option<TcpAnswer> {
    conn.shutdown(Shutdown::Write).ok()?;
    conn.set_read_timeout(Some(wait)).ok()?;
    let mut line = String::new();
    BufReader::new(io::Read::take(conn, MAX_TCP_ANSWER))
        .read_line(&mut line)
        .ok()?;
    serde_json::from_str(line.trim()).ok()
}

/// Adds the streams up.
fn summarize(cfg: &LoadConfig, mut streams: Vec<StreamResult>) -> LoadReport {
    let first_sampled = streams.first_mut().and_then(|s| s.sampled.take());
    let socket = streams
        .first()
        .filter(|_| cfg.send_buffer.is_some() || cfg.recv_buffer.is_some())
        .map(|s| s.socket);
    let (datagrams, bytes) = streams
        .iter()
        .fold((0, 0), |(d, b), s| (d + s.sent.datagrams, b + s.sent.bytes));
    let elapsed_ns = streams
        .iter()
        .map(|s| (s.sent.elapsed_s * 1e9) as u64)
        .max()
        .unwrap_or(0);
    let mut sent = totals(cfg, datagrams, bytes, elapsed_ns);
    sent.skipped = streams.iter().map(|s| s.sent.skipped).sum();
    sent.send_errors = streams.iter().map(|s| s.sent.send_errors).sum();
    let mut view = SinkView {
        drops: SinkView::socket_drops(streams.iter().filter_map(|s| s.sink.as_ref())),
        ..SinkView::default()
    };
    for s in &streams {
        if let Some(r) = &s.sink {
            view.streams_reported += 1;
            view.bytes += r.bytes;
            view.rate_bps += r.rate_bps;
            // Datagrams sent but never seen by the sink are lost too, even past the
            // highest sequence number it saw.
            let expected = r.seq.expected.max(s.sent.datagrams);
            view.expected += expected;
            view.lost += expected.saturating_sub(r.seq.received);
            view.duplicates += r.seq.duplicates;
            view.reordered += r.seq.reordered;
        }
        if let Some(t) = &s.tcp_sink {
            view.streams_reported += 1;
            view.bytes += t.bytes;
            view.rate_bps += t.rate_bps;
        }
    }
    LoadReport {
        target: cfg.target.to_string(),
        protocol: if cfg.tcp { "tcp" } else { "udp" },
        target_bps: cfg.rate.map(|r| r.bits_per_sec(cfg.msg_size)),
        msg_size: cfg.msg_size,
        sent,
        streams,
        sink: (view.streams_reported > 0).then_some(view),
        samples: None,
        socket,
        bytes_bound: cfg.bytes,
        tcp_info: first_sampled.as_ref().map(|s| s.tcp_info.clone()),
        quiet: first_sampled.map(|s| s.quiet),
    }
}

#[cfg(test)]
mod wang_ng_tests {
    use super::*;

    #[test]
    fn a_byte_bound_is_whole_datagrams_then_exact_short_ones() {
        let sum = |(full, short): (u64, Vec<usize>), m: u64| {
            full * m + short.iter().map(|&s| s as u64).sum::<u64>()
        };
        // 800 MB in 1472-byte datagrams: 543 478 full ones and one of 384 bytes.
        assert_eq!(bounded_datagrams(800_000_000, 1472), (543_478, vec![384]));
        assert_eq!(bounded_datagrams(2944, 1472), (2, vec![]));
        // A remainder under the header: the last full datagram and it become two.
        assert_eq!(bounded_datagrams(1472 + 10, 1472), (0, vec![1450, 32]));
        for b in [32u64, 33, 63, 64, 100, 1_000, 1_481, 99_999] {
            for m in [32usize, 40, 64, 1472] {
                let split = bounded_datagrams(b, m);
                assert!(split
                    .1
                    .iter()
                    .all(|&s| s >= HEADER_LEN && s <= m.max(HEADER_LEN)));
                // Exact, or padded up to the header when nothing else fits.
                let total = sum(split, m as u64);
                assert!(
                    total >= b && total < b + HEADER_LEN as u64,
                    "{b} {m}: {total}"
                );
            }
        }
    }

    #[test]
    fn the_byte_bound_is_shared_evenly() {
        let cfg = LoadConfig {
            streams: 3,
            bytes: Some(10),
            ..LoadConfig::new("127.0.0.1:9".parse().expect("addr"), None)
        };
        let shares: Vec<_> = (0..3).map(|i| cfg.stream_bytes(i)).collect();
        assert_eq!(shares, vec![Some(4), Some(3), Some(3)]);
    }

    #[test]
    fn wang_ng_settings_are_checked() {
        let base = LoadConfig::new("127.0.0.1:9".parse().expect("addr"), None);
        let bad = |c: LoadConfig| c.validate().expect_err("refused").to_string();
        assert!(bad(LoadConfig {
            tcp_info: Some(Duration::from_millis(1)),
            ..base.clone()
        })
        .contains("TCP"));
        assert!(bad(LoadConfig {
            send_buffer: Some(1),
            ..base.clone()
        })
        .contains("send buffer"));
        assert!(bad(LoadConfig {
            bytes: Some(3),
            ..base.clone()
        })
        .contains("header"));
        assert!(bad(LoadConfig {
            pacing_chunk: Some(0),
            ..base.clone()
        })
        .contains("chunk"));
        LoadConfig {
            tcp: true,
            tcp_info: Some(Duration::from_millis(1)),
            send_buffer: Some(256 << 10),
            recv_buffer: Some(256 << 10),
            bytes: Some(800_000_000),
            pacing_chunk: Some(128 << 10),
            ..base
        }
        .validate()
        .expect("the seed's settings");
    }

    #[test]
    fn a_tcp_load_tells_the_sink_its_receive_window() {
        let server = crate::serve::Server::start(&crate::serve::ServeConfig {
            reflector_port: None,
            sink_port: None,
            ..Default::default()
        })
        .expect("serve");
        let cfg = LoadConfig {
            tcp: true,
            bytes: Some(3_000_000),
            send_buffer: Some(256 << 10),
            recv_buffer: Some(256 << 10),
            tcp_info: Some(Duration::from_millis(1)),
            ..LoadConfig::new(server.tcp_addr().expect("tcp sink"), None)
        };
        let r = run(&cfg, &AtomicBool::new(false)).expect("load");
        assert_eq!(r.sent.bytes, 3_000_000);
        // The hello is not data: the sink counts exactly the bound.
        assert_eq!(r.sink.as_ref().expect("sink answered").bytes, 3_000_000);
        let s = r.socket.expect("socket");
        assert_eq!(s.send_buffer_requested, Some(256 << 10));
        assert_eq!(s.recv_buffer_requested, Some(256 << 10));
        // Linux doubles what is asked for (root's FORCE option is not capped by
        // net.core.rmem_max, anyone else's may be: the integration test, as root,
        // holds it to exactly twice).
        let granted = s
            .recv_buffer_granted
            .expect("the sink read its buffer back");
        assert!(granted > 0 && granted <= 512 << 10, "{s:?}");
        let info = r.tcp_info.expect("tcp_info");
        assert!(!info.samples.is_empty());
        assert_eq!(info.retransmissions, 0);
        assert!(r.quiet.is_some());
    }
}
