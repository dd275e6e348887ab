//! Windows of a load that keeps running: a continuous throughput staircase's node
//! sends from the level where it joins to the end (the thesis ran each client as one
//! `iperf3 -t 3600`, §6.1.1), and each level's figure is the mean of the latest
//! `window` samples of the sink's arrival series for that node's streams, read while
//! the load goes on.
//!
//! The sink keys a stream's series by its sender's address, so only the load's own
//! sockets can ask for it. A UDP load started with a [`LoadTap`] lends the tap a
//! clone of each stream's socket while the stream sends ([`LoadTap`] is what an
//! agent keeps of its running loads, in its [`LoadTaps`]); [`read_window`] waits for
//! the window to pass, then asks the sink for each stream's series through those
//! sockets (a series request is sent as one datagram whatever the socket's GSO
//! segment size, [`nnb_sys::socket::send_unsegmented`], and the sending thread never
//! reads, so the answers are the reader's) and keeps the latest `window` intervals
//! ([`crate::sampling::latest_received`]).

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::clock::{duration_ns, now_ns};
use crate::load::{series_from, LoadError};
use crate::report::SeriesPage;
use crate::sampling::{latest_received, window_mean, ThroughputSamples, MAX_SAMPLES};
use crate::serve::series::{BIN_NS, MAX_BINS};

/// Whole bins a window waits beyond its `window` intervals: the bin in progress when
/// the window started and the one in progress when it is read (both partial).
const MARGIN_BINS: u64 = 2;
/// How many times a window reader asks for each page of a stream's series: its
/// requests wait in the running load's send queue, which a saturated link drops
/// from (half of what a node sends at twice its share).
const WINDOW_ATTEMPTS: u32 = 20;

/// How long [`read_window`] takes to wait for `window` samples of `interval`, or why
/// such a window cannot be read: the interval is a whole number of the sink's bins,
/// the window at least one sample, and the whole window (with its margin) within the
/// bins the sink keeps per stream ([`MAX_BINS`]). The one statement of the rule: the
/// agent and experiment files both check it.
pub fn window_span(interval: Duration, window: usize) -> Result<Duration, String> {
    let bin = Duration::from_nanos(BIN_NS);
    if interval.is_zero() || interval.as_nanos() % bin.as_nanos() != 0 {
        return Err(format!(
            "the sampling interval {interval:?} must be a multiple of the sink's {bin:?} bins"
        ));
    }
    let bins = (interval.as_nanos() / bin.as_nanos()).saturating_mul(window as u128);
    let most = MAX_BINS as u128 - u128::from(MARGIN_BINS);
    if window == 0 || window > MAX_SAMPLES || bins > most {
        return Err(format!(
            "a window of {window} samples of {interval:?}: at least one, and at most {:?} in all \
             (the arrival series the sink keeps per stream)",
            bin * most as u32
        ));
    }
    Ok(bin * (bins as u32 + MARGIN_BINS as u32))
}

/// One stream's socket, lent by the load while the stream sends.
#[derive(Debug)]
struct Tapped {
    stream: u32,
    local: String,
    sock: UdpSocket,
}

/// What a running UDP load lends its window readers: a clone of each stream's
/// socket while it sends, the sender's running totals, and who the load is (when it
/// started, where it sends).
#[derive(Debug)]
pub struct LoadTap {
    target: SocketAddr,
    streams: usize,
    started_unix_ns: u64,
    tapped: Mutex<Vec<Tapped>>,
    datagrams: AtomicU64,
    bytes: AtomicU64,
    /// Raised while a window is read: the streams send nothing.
    paused: AtomicBool,
}

/// Holds a tap's streams paused while a window is read; resumes them when dropped.
struct Pause<'a>(&'a LoadTap);

impl Drop for Pause<'_> {
    fn drop(&mut self) {
        self.0.paused.store(false, Ordering::Relaxed);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl LoadTap {
    /// The tap of a load of `streams` streams to `target`, starting now.
    pub fn new(target: SocketAddr, streams: usize) -> Arc<LoadTap> {
        let started_unix_ns = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        Arc::new(LoadTap {
            target,
            streams,
            started_unix_ns,
            tapped: Mutex::new(Vec::new()),
            datagrams: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            paused: AtomicBool::new(false),
        })
    }

    /// Whether the streams hold back while a window is read through their sockets.
    /// On a saturated link a series request sent beside the load waits in the
    /// node's own full queue and is mostly dropped (at twice a node's share, half of
    /// what it sends); with the load held back the queue drains and the request
    /// passes. The queue keeps delivering at the link's rate while it drains, so the
    /// sink's bins before the request stay those of the running load; the load
    /// resumes as soon as the pages are read.
    pub(crate) fn paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    fn pause(&self) -> Pause<'_> {
        self.paused.store(true, Ordering::Relaxed);
        Pause(self)
    }

    /// Lends stream `stream`'s socket (a clone; a clone that fails leaves the stream
    /// out, and its windows incomplete).
    pub(crate) fn attach(&self, stream: u32, local: &str, sock: &UdpSocket) {
        match sock.try_clone() {
            Ok(sock) => lock(&self.tapped).push(Tapped {
                stream,
                local: local.to_string(),
                sock,
            }),
            Err(e) => tracing::warn!("stream {stream}'s socket cannot be lent for windows: {e}"),
        }
    }

    /// Takes stream `stream`'s socket back (it stopped sending and asks for its own
    /// report now).
    pub(crate) fn detach(&self, stream: u32) {
        lock(&self.tapped).retain(|t| t.stream != stream);
    }

    /// Counts what a stream sent.
    pub(crate) fn sent(&self, datagrams: u64, bytes: u64) {
        self.datagrams.fetch_add(datagrams, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    fn totals(&self) -> (u64, u64, u64) {
        (
            now_ns(),
            self.datagrams.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

/// The loads an agent runs with taps, so that a window job finds the one it reads.
#[derive(Debug, Default)]
pub struct LoadTaps {
    taps: Mutex<Vec<Weak<LoadTap>>>,
}

impl LoadTaps {
    /// Keeps `tap` until its load ends (the load holds the only strong reference).
    pub fn register(&self, tap: &Arc<LoadTap>) {
        let mut taps = lock(&self.taps);
        taps.retain(|t| t.strong_count() > 0);
        taps.push(Arc::downgrade(tap));
    }

    /// The tap of the one load running now; an error when none runs or several do
    /// (a window reads one node's load).
    pub fn only_running(&self) -> Result<Arc<LoadTap>, String> {
        let mut live: Vec<Arc<LoadTap>> =
            lock(&self.taps).iter().filter_map(Weak::upgrade).collect();
        match live.len() {
            1 => Ok(live.remove(0)),
            0 => Err("no UDP load runs on this agent: a load window reads a running load".into()),
            n => Err(format!(
                "{n} UDP loads run on this agent: a load window reads the only one"
            )),
        }
    }
}

/// Which load a window read: the same start and sockets in the windows of several
/// levels is one load that ran through them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadIdentity {
    /// When the load started, ns since the Unix epoch (the agent's clock).
    pub started_unix_ns: u64,
    /// Local addresses of its streams' sockets, by stream.
    pub locals: Vec<String>,
}

/// What the sender sent during the window's wait.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WindowSent {
    /// Length of the wait, s.
    pub elapsed_s: f64,
    /// Datagrams sent meanwhile.
    pub datagrams: u64,
    /// Payload bytes sent meanwhile.
    pub bytes: u64,
    /// Payload rate sent meanwhile, bit/s.
    pub payload_bps: f64,
}

/// One stream of the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowStream {
    /// Stream id on the wire.
    pub stream: u32,
    /// Local address of its socket.
    pub local: String,
    /// Bins of its arrival series that came back; `None` when the series did not.
    pub bins: Option<usize>,
}

/// The sink's view of the window over all streams.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WindowSink {
    /// Streams whose series came back (of all the load's streams).
    pub streams_reported: usize,
    /// Mean received payload rate over the window, bit/s.
    pub rate_bps: f64,
}

/// A window of a running load: the shape of a sampled load's result where the
/// results format reads it (`sent`, `sink`, `streams`, `samples`), so its record is a
/// throughput staircase node's like a restarted load's.
#[derive(Debug, Clone, Serialize)]
pub struct WindowReport {
    /// Sink address.
    pub target: String,
    /// Always "udp".
    pub protocol: &'static str,
    /// The load read.
    pub load: LoadIdentity,
    /// The sender's totals during the wait.
    pub sent: WindowSent,
    /// Every stream of the load (those not lent have no series).
    pub streams: Vec<WindowStream>,
    /// The sink's view, when at least one stream's series came back.
    pub sink: Option<WindowSink>,
    /// The latest `window` received samples and their mean (`received_window_bps`,
    /// the recorded rate); `sent_bps` is empty and `sent_window_bps` is the sender's
    /// rate during the wait (it keeps no per-interval counts of a running load).
    pub samples: ThroughputSamples,
}

/// Waits `window` samples of `interval` (and the margin, [`window_span`]) from now,
/// then reads the sink's arrival series of each of `tap`'s streams through their
/// sockets (each page asked up to three times, `wait` each) and returns the latest
/// `window` samples summed over the streams: all of them taken after the call
/// began. A raised `stop` ends the wait early and reads what there is.
pub fn read_window(
    tap: &LoadTap,
    interval: Duration,
    window: usize,
    wait: Duration,
    stop: &AtomicBool,
) -> Result<WindowReport, LoadError> {
    let span = window_span(interval, window).map_err(LoadError::Invalid)?;
    let (t0, d0, b0) = tap.totals();
    let until = t0.saturating_add(duration_ns(span));
    while now_ns() < until && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (t1, d1, b1) = tap.totals();
    let _paused = tap.pause();
    let streams: Vec<(u32, String, Option<Vec<SeriesPage>>)> = {
        // The clones are taken out of the lock: a stream that stops meanwhile is not
        // held up by the reads.
        let socks: Vec<(u32, String, Option<UdpSocket>)> = lock(&tap.tapped)
            .iter()
            .map(|t| (t.stream, t.local.clone(), t.sock.try_clone().ok()))
            .collect();
        socks
            .into_iter()
            .map(|(s, local, sock)| {
                let pages = sock.and_then(|sock| latest_pages(&sock, s, wait, span));
                (s, local, pages)
            })
            .collect()
    };
    Ok(window_report(
        tap,
        interval,
        window,
        (
            t1.saturating_sub(t0),
            d1.saturating_sub(d0),
            b1.saturating_sub(b0),
        ),
        streams,
    ))
}

/// The pages of stream `stream`'s series that hold its latest `span` (and a bin
/// each side): how many bins the series holds first, then those pages.
fn latest_pages(
    sock: &UdpSocket,
    stream: u32,
    wait: Duration,
    span: Duration,
) -> Option<Vec<SeriesPage>> {
    let total = series_from(sock, stream, wait, WINDOW_ATTEMPTS, MAX_BINS)?
        .first()?
        .total;
    let need = usize::try_from(duration_ns(span) / BIN_NS).unwrap_or(MAX_BINS) + 2;
    series_from(
        sock,
        stream,
        wait,
        WINDOW_ATTEMPTS,
        total.saturating_sub(need),
    )
}

/// The report of a window from what was read: the sender's `(ns, datagrams, bytes)`
/// during the wait and each lent stream's series pages.
fn window_report(
    tap: &LoadTap,
    interval: Duration,
    window: usize,
    (ns, datagrams, bytes): (u64, u64, u64),
    read: Vec<(u32, String, Option<Vec<SeriesPage>>)>,
) -> WindowReport {
    let secs = ns as f64 / 1e9;
    let payload_bps = if secs > 0.0 {
        bytes as f64 * 8.0 / secs
    } else {
        0.0
    };
    let complete = read.len() == tap.streams && read.iter().all(|(_, _, p)| p.is_some());
    let pages: Vec<&[SeriesPage]> = read.iter().filter_map(|(_, _, p)| p.as_deref()).collect();
    let received = complete.then(|| latest_received(duration_ns(interval), window, &pages));
    let received_window_bps = received.as_deref().and_then(|r| window_mean(r, window));
    let mut streams: Vec<WindowStream> = read
        .iter()
        .map(|(stream, local, p)| WindowStream {
            stream: *stream,
            local: local.clone(),
            bins: p.as_ref().map(|p| p.iter().map(|p| p.bytes.len()).sum()),
        })
        .collect();
    // Streams not lent (a clone that failed, or one that ended): no series.
    for s in 0..tap.streams as u32 {
        if !streams.iter().any(|w| w.stream == s) {
            streams.push(WindowStream {
                stream: s,
                local: "?".to_string(),
                bins: None,
            });
        }
    }
    streams.sort_by_key(|w| w.stream);
    let reported = read.iter().filter(|(_, _, p)| p.is_some()).count();
    WindowReport {
        target: tap.target.to_string(),
        protocol: "udp",
        load: LoadIdentity {
            started_unix_ns: tap.started_unix_ns,
            locals: streams.iter().map(|s| s.local.clone()).collect(),
        },
        sent: WindowSent {
            elapsed_s: secs,
            datagrams,
            bytes,
            payload_bps,
        },
        sink: (reported > 0).then(|| WindowSink {
            streams_reported: reported,
            rate_bps: received_window_bps.unwrap_or(0.0),
        }),
        streams,
        samples: ThroughputSamples {
            interval_s: interval.as_secs_f64(),
            window,
            sent_bps: Vec::new(),
            received_bps: received,
            sent_window_bps: Some(payload_bps),
            received_window_bps,
        },
    }
}

#[cfg(test)]
mod tests;
