//! Closed-loop ping-pong (sockperf's `ping-pong`): one ping in flight at a time, the
//! next sent as soon as the previous is answered or has timed out.
//!
//! The receive either blocks in `recv` (with the timeout as the socket's read
//! timeout) or, with `busy_poll`, spins on a non-blocking socket. A pong is matched
//! to the ping in flight by its sequence number; an older sequence number is a late
//! pong of a ping that already timed out (or a duplicate) and never becomes an RTT
//! sample.

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nnb_sys::socket::is_datagram_lost;

use super::{
    connect_probe, pin, Interval, IntervalClock, ProbeConfig, ProbeCounts, ProbeError, ProbeLength,
    ProbeReport, TtlRange,
};
use crate::clock::{duration_ns, now_ns};
use crate::hist::LatencyHist;
use crate::seq::SeqTracker;
use crate::wire::{Header, Kind, HEADER_LEN};

/// Receive buffer size: larger than any datagram, so oversized ones are seen whole.
const RECV_BUF: usize = 65_536;
/// Busy-polling reads the clock (for the timeout) once per this many empty receives.
const CLOCK_EVERY: u32 = 32;

/// How one ping ended.
enum Outcome {
    /// Answered after `rtt_ns`, the pong arriving with IP TTL `ttl` (when the
    /// kernel reported it).
    Answered { rtt_ns: u64, ttl: Option<u8> },
    /// No pong within the timeout.
    TimedOut,
}

/// The socket and counters of a running ping-pong.
struct Pinger<'a> {
    cfg: &'a ProbeConfig,
    sock: UdpSocket,
    tx: Vec<u8>,
    rx: Vec<u8>,
    timeout_ns: u64,
    /// The socket's read timeout was shortened while waiting out a ping.
    read_timeout_dirty: bool,
    /// Pongs with a sequence number below this are warm-up leftovers, ignored.
    first_measured: u64,
    tracker: SeqTracker,
    counts: ProbeCounts,
}

impl<'a> Pinger<'a> {
    fn new(cfg: &'a ProbeConfig) -> Result<Self, ProbeError> {
        let sock = connect_probe(cfg.target)?;
        if cfg.busy_poll {
            sock.set_nonblocking(true)
                .map_err(ProbeError::io("making the socket non-blocking"))?;
        } else {
            sock.set_read_timeout(Some(cfg.timeout))
                .map_err(ProbeError::io("setting the read timeout"))?;
        }
        Ok(Pinger {
            cfg,
            sock,
            tx: vec![0; cfg.msg_size],
            rx: vec![0; RECV_BUF],
            timeout_ns: duration_ns(cfg.timeout),
            read_timeout_dirty: false,
            first_measured: 0,
            tracker: SeqTracker::new(),
            counts: ProbeCounts::default(),
        })
    }

    /// Sends ping `seq` and waits for its pong or the timeout.
    fn ping(&mut self, seq: u64) -> Result<Outcome, ProbeError> {
        if self.read_timeout_dirty {
            self.sock
                .set_read_timeout(Some(self.cfg.timeout))
                .map_err(ProbeError::io("setting the read timeout"))?;
            self.read_timeout_dirty = false;
        }
        let t0 = now_ns();
        Header {
            kind: Kind::Ping,
            flags: 0,
            seq,
            send_ts: t0,
            stream: 0,
            payload_len: (self.cfg.msg_size - HEADER_LEN) as u32,
        }
        .encode(&mut self.tx);
        match self.sock.send(&self.tx) {
            Ok(_) => {}
            // The kernel refused the datagram (e.g. ICMP port unreachable reported on
            // a connected socket, or a full queue): the ping is lost, not the probe.
            Err(e) if is_datagram_lost(&e) => {
                tracing::debug!("send of ping {seq} failed: {e}");
                self.wait_out(t0 + self.timeout_ns)?;
                return Ok(Outcome::TimedOut);
            }
            Err(e) => return Err(ProbeError::io("sending a ping")(e)),
        }
        let deadline = t0 + self.timeout_ns;
        let mut first = true;
        loop {
            if !first && !self.cfg.busy_poll {
                // A stale or foreign datagram came first: wait only for what is left.
                self.shorten_read_timeout(deadline.saturating_sub(now_ns()))?;
            }
            first = false;
            let Some((len, t1, ttl)) = self.recv_until(deadline)? else {
                return Ok(Outcome::TimedOut);
            };
            match Header::decode(&self.rx[..len]) {
                Ok(h) if h.kind == Kind::Pong && h.seq == seq => {
                    if t1 > deadline {
                        // Arrived, but after its timeout: lost and late, like any other.
                        self.stale_pong(seq);
                        return Ok(Outcome::TimedOut);
                    }
                    if seq >= self.first_measured {
                        self.tracker.record(seq);
                    }
                    return Ok(Outcome::Answered {
                        rtt_ns: t1 - t0,
                        ttl,
                    });
                }
                Ok(h) if h.kind == Kind::Pong && h.seq < seq => self.stale_pong(h.seq),
                _ => self.counts.garbage += 1,
            }
        }
    }

    /// Accounts a pong of an earlier ping: a duplicate or a late answer.
    fn stale_pong(&mut self, seq: u64) {
        if seq < self.first_measured {
            return;
        }
        let before = self.tracker.stats().duplicates;
        self.tracker.record(seq);
        if self.tracker.stats().duplicates == before {
            self.counts.late += 1;
        }
    }

    /// Receives one datagram before `deadline_ns`; `None` when the deadline passed.
    /// Returns its length, arrival time and IP TTL.
    fn recv_until(
        &mut self,
        deadline_ns: u64,
    ) -> Result<Option<(usize, u64, Option<u8>)>, ProbeError> {
        let mut idle_spins = 0u32;
        loop {
            match nnb_sys::ttl::recv(&self.sock, &mut self.rx) {
                Ok((len, ttl)) => return Ok(Some((len, now_ns(), ttl))),
                Err(e)
                    if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
                        || is_datagram_lost(&e) =>
                {
                    // Spinning: the clock is read every CLOCK_EVERY empty receives
                    // only, so the loop notices a pong a little sooner.
                    idle_spins += 1;
                    if self.cfg.busy_poll && idle_spins % CLOCK_EVERY != 0 {
                        continue;
                    }
                    let now = now_ns();
                    if now >= deadline_ns {
                        return Ok(None);
                    }
                    if !self.cfg.busy_poll {
                        self.shorten_read_timeout(deadline_ns - now)?;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(ProbeError::io("receiving a pong")(e)),
            }
        }
    }

    /// Sets the read timeout to what is left of the current ping's wait.
    fn shorten_read_timeout(&mut self, left_ns: u64) -> Result<(), ProbeError> {
        self.read_timeout_dirty = true;
        self.sock
            .set_read_timeout(Some(Duration::from_nanos(left_ns.max(1_000))))
            .map_err(ProbeError::io("setting the read timeout"))
    }

    /// Keeps receiving (and accounting stale pongs) until `deadline_ns`.
    fn wait_out(&mut self, deadline_ns: u64) -> Result<(), ProbeError> {
        if !self.cfg.busy_poll {
            self.shorten_read_timeout(deadline_ns.saturating_sub(now_ns()))?;
        }
        while let Some((len, _, _)) = self.recv_until(deadline_ns)? {
            match Header::decode(&self.rx[..len]) {
                Ok(h) if h.kind == Kind::Pong => self.stale_pong(h.seq),
                _ => self.counts.garbage += 1,
            }
        }
        Ok(())
    }
}

/// Runs the closed-loop ping-pong described in the module documentation.
pub(crate) fn run(
    cfg: &ProbeConfig,
    stop: &AtomicBool,
    on_interval: &mut (dyn FnMut(&Interval<'_>) + Send),
) -> Result<ProbeReport, ProbeError> {
    pin(cfg.pin)?;
    let mut p = Pinger::new(cfg)?;
    let mut seq = 0u64;
    let warmup_end = now_ns().saturating_add(duration_ns(cfg.warmup));
    while now_ns() < warmup_end && !stop.load(Ordering::Relaxed) {
        p.ping(seq)?;
        seq += 1;
    }
    let warmup_pings = seq;
    p.first_measured = seq;
    p.counts = ProbeCounts::default();

    let start = now_ns();
    let end = match cfg.length {
        ProbeLength::Duration(d) => start.saturating_add(duration_ns(d)),
        ProbeLength::Count(_) => u64::MAX,
    };
    let mut hist = LatencyHist::new();
    let mut ttl_seen = TtlRange::default();
    let mut intervals = IntervalClock::new(cfg.interval, start, None);
    let mut now = start;
    loop {
        let done = match cfg.length {
            ProbeLength::Count(n) => p.counts.sent >= n,
            ProbeLength::Duration(_) => now >= end,
        };
        if done || stop.load(Ordering::Relaxed) {
            break;
        }
        // The ping leaves now: it counts in the interval of this moment.
        intervals.advance(now, on_interval);
        let outcome = p.ping(seq)?;
        seq += 1;
        p.counts.sent += 1;
        intervals.sent_total += 1;
        // Its answer (or timeout) is now: the RTT counts in this moment's interval.
        now = now_ns();
        intervals.advance(now, on_interval);
        match outcome {
            Outcome::Answered { rtt_ns: rtt, ttl } => {
                ttl_seen.see(ttl);
                p.counts.answered += 1;
                intervals.answered += 1;
                hist.record(rtt);
                intervals.rtt.record(rtt);
            }
            Outcome::TimedOut => p.counts.lost += 1,
        }
    }
    let finished = now_ns();
    intervals.finish(finished, on_interval);

    let stats = p.tracker.stats();
    p.counts.duplicates = stats.duplicates;
    p.counts.reordered = stats.reordered;
    let rtt = hist.summary();
    Ok(ProbeReport {
        target: cfg.target.to_string(),
        mode: "ping-pong",
        rate_pps: None,
        msg_size: cfg.msg_size,
        busy_poll: cfg.busy_poll,
        elapsed_s: (finished - start) as f64 / 1e9,
        warmup_pings,
        counts: p.counts,
        rtt,
        rtt_intended: None,
        rtt_half: rtt.halved(),
        clamped: hist.clamped(),
        recv_buffer: None,
        reply_ttl: ttl_seen.report(),
    })
}
