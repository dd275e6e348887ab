//! Open-loop probe (sockperf's `under-load`, wrk2's corrected latency): pings leave
//! on a fixed schedule from one pinned thread whatever the answers do, and another
//! thread receives the pongs.
//!
//! Ping `i` is due at `start + i / rate` (deadline pacing: sleep while far from the
//! deadline, spin for the last [`SPIN_NS`]). Each pong gives two latencies: from the
//! ping's actual send time (echoed in its header) and from its intended send time
//! (computed from its sequence number). When the sender or the path stalls, pings
//! queue up behind the stall; the intended-time figure counts that waiting, which
//! is the coordinated-omission correction. After a stall the sender sends the pings
//! that fell due at once, as an open-loop client must.

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use nnb_sys::socket::is_datagram_lost;

use super::{
    connect_probe, pin, Interval, IntervalClock, ProbeConfig, ProbeCounts, ProbeError, ProbeLength,
    ProbeReport, TtlRange,
};
use crate::clock::{duration_ns, now_ns, wait_until};
use crate::hist::LatencyHist;
use crate::sendbatch::{set_socket_buffer, Direction};
use crate::seq::SeqTracker;
use crate::wire::{Header, Kind, HEADER_LEN};

/// The sender sleeps until this close to a deadline, then spins.
pub const SPIN_NS: u64 = 50_000;
/// How often a blocking receiver wakes up to check whether the run is over.
const RECV_POLL: Duration = Duration::from_millis(20);
/// Receive buffer asked for, bytes.
const RECV_BUFFER: usize = 4 << 20;

/// The ping schedule shared by sender and receiver.
struct Schedule {
    start_ns: u64,
    period_ns: f64,
    warmup: u64,
    total: u64,
}

impl Schedule {
    fn intended_ns(&self, seq: u64) -> u64 {
        self.start_ns + (seq as f64 * self.period_ns) as u64
    }
}

/// Runs the open-loop probe at `rate` pings per second.
pub(crate) fn run(
    cfg: &ProbeConfig,
    rate: f64,
    stop: &AtomicBool,
    on_interval: &mut (dyn FnMut(&Interval<'_>) + Send),
) -> Result<ProbeReport, ProbeError> {
    let tx = connect_probe(cfg.target)?;
    let rx = tx
        .try_clone()
        .map_err(ProbeError::io("cloning the probe socket"))?;
    // Room for the pongs that pile up while the receiver is descheduled.
    let recv_buffer = set_socket_buffer(&rx, Direction::Receive, RECV_BUFFER);
    // Non-blocking mode belongs to the shared file description: the sender copes
    // with WouldBlock by retrying.
    if cfg.busy_poll {
        rx.set_nonblocking(true)
            .map_err(ProbeError::io("making the socket non-blocking"))?;
    } else {
        rx.set_read_timeout(Some(RECV_POLL))
            .map_err(ProbeError::io("setting the read timeout"))?;
    }
    let warmup = (cfg.warmup.as_secs_f64() * rate).ceil() as u64;
    let measured = match cfg.length {
        ProbeLength::Count(n) => n,
        ProbeLength::Duration(d) => (d.as_secs_f64() * rate).round() as u64,
    };
    let schedule = Schedule {
        // Leaves the receiver a moment to start before the first ping is due.
        start_ns: now_ns() + 2_000_000,
        period_ns: 1e9 / rate,
        warmup,
        total: warmup + measured,
    };
    let sent = AtomicU64::new(0);
    let sender_done = AtomicBool::new(false);
    let last_send_ns = AtomicU64::new(0);
    std::thread::scope(|s| {
        let sender = s.spawn(|| {
            let r = send_pings(cfg, &tx, &schedule, stop, &sent, &last_send_ns);
            sender_done.store(true, Ordering::Release);
            r
        });
        let receiver = s.spawn(|| {
            receive_pongs(
                cfg,
                &rx,
                &schedule,
                &Progress {
                    sent: &sent,
                    sender_done: &sender_done,
                    last_send_ns: &last_send_ns,
                },
                on_interval,
            )
        });
        let sent_result = sender
            .join()
            .map_err(|_| ProbeError::Invalid("the open-loop sender panicked".into()));
        let report = receiver
            .join()
            .map_err(|_| ProbeError::Invalid("the open-loop receiver panicked".into()))??;
        let unsent = sent_result??;
        let mut counts = report.counts;
        // The warm-up pings come first: any left unsent are measured ones.
        counts.unsent = unsent.min(measured);
        Ok(ProbeReport {
            rate_pps: Some(rate),
            recv_buffer: Some(recv_buffer),
            counts,
            ..report
        })
    })
}

/// Sends the scheduled pings; stops early on `stop`, and when the schedule's time is
/// over (the last ping's slot has passed) while pings are still due: a sender that
/// fell behind stops at the schedule's end rather than overrun it. Returns how many
/// pings it left unsent for that reason (0 when it kept up or was stopped).
fn send_pings(
    cfg: &ProbeConfig,
    sock: &UdpSocket,
    schedule: &Schedule,
    stop: &AtomicBool,
    sent: &AtomicU64,
    last_send_ns: &AtomicU64,
) -> Result<u64, ProbeError> {
    pin(cfg.pin)?;
    crate::clock::precise_sleeps();
    let mut buf = vec![0u8; cfg.msg_size];
    let schedule_end = schedule.intended_ns(schedule.total);
    for seq in 0..schedule.total {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if now_ns() > schedule_end {
            return Ok(schedule.total - seq);
        }
        wait_until(schedule.intended_ns(seq), SPIN_NS);
        let t = now_ns();
        Header {
            kind: Kind::Ping,
            flags: 0,
            seq,
            send_ts: t,
            stream: 0,
            payload_len: (cfg.msg_size - HEADER_LEN) as u32,
        }
        .encode(&mut buf);
        // Published before the send: on loopback the pong can arrive before `send`
        // returns, and the receiver accepts only pongs of pings it knows were sent.
        last_send_ns.store(t, Ordering::Relaxed);
        sent.store(seq + 1, Ordering::Release);
        loop {
            match sock.send(&buf) {
                Ok(_) => break,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                    std::hint::spin_loop()
                }
                // ICMP errors reported on the connected socket: this ping is lost.
                Err(e) if is_datagram_lost(&e) => break,
                Err(e) => return Err(ProbeError::io("sending a ping")(e)),
            }
        }
    }
    Ok(0)
}

/// What the receiver knows of the sender's progress.
struct Progress<'a> {
    sent: &'a AtomicU64,
    sender_done: &'a AtomicBool,
    last_send_ns: &'a AtomicU64,
}

/// Receives pongs until the sender is done and the last ping answered or timed out.
fn receive_pongs(
    cfg: &ProbeConfig,
    sock: &UdpSocket,
    schedule: &Schedule,
    progress: &Progress<'_>,
    on_interval: &mut (dyn FnMut(&Interval<'_>) + Send),
) -> Result<ProbeReport, ProbeError> {
    pin(cfg.recv_pin)?;
    let timeout_ns = duration_ns(cfg.timeout);
    let origin = schedule.intended_ns(schedule.warmup);
    let mut buf = vec![0u8; 65_536];
    let mut tracker = SeqTracker::new();
    let mut counts = ProbeCounts::default();
    let mut rtt = LatencyHist::new();
    let mut rtt_intended = LatencyHist::new();
    let mut ttl_seen = TtlRange::default();
    let mut intervals = IntervalClock::new(cfg.interval, origin, Some(schedule.period_ns));
    // Arrival of the last pong accepted as an RTT sample.
    let mut last_answer_ns = None;
    let measured_sent = || {
        progress
            .sent
            .load(Ordering::Acquire)
            .saturating_sub(schedule.warmup)
    };
    loop {
        let received = match nnb_sys::ttl::recv(sock, &mut buf) {
            Ok((len, ttl)) => Some((len, now_ns(), ttl)),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                None
            }
            // An ICMP error for an earlier ping: that ping is lost, the socket works.
            Err(e) if is_datagram_lost(&e) => None,
            Err(e) => return Err(ProbeError::io("receiving a pong")(e)),
        };
        let sender_done = progress.sender_done.load(Ordering::Acquire);
        intervals.sent_total = measured_sent();
        // Intervals advance with the pongs, and with the clock while pings are
        // still going out; not through the wait for the last pongs after that.
        match received {
            Some((_, t1, _)) => intervals.advance(t1, on_interval),
            None if !sender_done => intervals.advance(now_ns(), on_interval),
            None => {}
        }
        if let Some((len, t1, ttl)) = received {
            match Header::decode(&buf[..len]) {
                Ok(h)
                    if h.kind == Kind::Pong
                        && h.seq < progress.sent.load(Ordering::Acquire)
                        && h.send_ts <= t1
                        && h.send_ts >= schedule.start_ns =>
                {
                    if h.seq >= schedule.warmup {
                        let actual = t1 - h.send_ts;
                        if actual > timeout_ns {
                            counts.late += 1;
                        } else {
                            let before = tracker.stats().duplicates;
                            tracker.record(h.seq - schedule.warmup);
                            if tracker.stats().duplicates == before {
                                let intended = t1.saturating_sub(schedule.intended_ns(h.seq));
                                counts.answered += 1;
                                intervals.answered += 1;
                                ttl_seen.see(ttl);
                                rtt.record(actual);
                                rtt_intended.record(intended);
                                intervals.rtt.record(actual);
                                intervals.rtt_intended.record(intended);
                                last_answer_ns = Some(t1);
                            }
                        }
                    }
                }
                _ => counts.garbage += 1,
            }
        }
        if sender_done {
            let all_answered = counts.answered + counts.late >= intervals.sent_total;
            let last = progress.last_send_ns.load(Ordering::Relaxed);
            if all_answered || now_ns() > last + timeout_ns {
                break;
            }
        }
    }
    let sent_now = measured_sent();
    // The measuring phase ends with the schedule of the pings sent (the last one's
    // slot included, or its actual send when the sender ran late) or with the last
    // answer, whichever is later: not with the wait for pongs that never came.
    let schedule_end = origin + (sent_now as f64 * schedule.period_ns) as u64;
    let last_send = if sent_now > 0 {
        progress.last_send_ns.load(Ordering::Relaxed)
    } else {
        origin
    };
    let measured_end = schedule_end
        .max(last_send)
        .max(last_answer_ns.unwrap_or(origin));
    intervals.sent_total = sent_now;
    intervals.finish(measured_end, on_interval);
    let stats = tracker.stats();
    counts.sent = sent_now;
    counts.lost = sent_now.saturating_sub(counts.answered);
    counts.duplicates = stats.duplicates;
    counts.reordered = stats.reordered;
    let summary = rtt.summary();
    Ok(ProbeReport {
        target: cfg.target.to_string(),
        mode: "open-loop",
        rate_pps: None,
        msg_size: cfg.msg_size,
        busy_poll: cfg.busy_poll,
        elapsed_s: measured_end.saturating_sub(origin) as f64 / 1e9,
        warmup_pings: schedule.warmup.min(progress.sent.load(Ordering::Acquire)),
        counts,
        rtt: summary,
        rtt_intended: Some(rtt_intended.summary()),
        rtt_half: summary.halved(),
        clamped: rtt.clamped() + rtt_intended.clamped(),
        recv_buffer: None,
        reply_ttl: ttl_seen.report(),
    })
}
