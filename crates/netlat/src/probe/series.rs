//! Wang & Ng's RTT series (seed 003, §III.A, §V.B): probes on a fixed schedule
//! (10 per second, 5,000 of them), every probe's RTT (or its loss) kept in send
//! order, and the statistics of the series after its first probes are dropped (the
//! seed drops 50: the first pings of a pair are held by EC2's security check).
//!
//! Probes are open loop: probe `i` leaves at `start + i / rate` whatever the answers
//! do (deadline pacing, [`crate::clock::wait_until`]), and a receiver thread matches
//! each answer to its probe by the sequence number and send time it echoes. An
//! answer that comes after later probes were sent still counts for its own probe;
//! a probe without an answer within the timeout is lost.
//!
//! Two transports carry the same probe, an nnb wire [`Header`] (`Kind::Ping`, its
//! sequence number and send time): UDP to an `nnb serve` reflector, which answers
//! with the header turned into a `Kind::Pong`; or ICMP echo ([`nnb_sys::icmp`]),
//! whose reply carries the header back unchanged as its data. The seed's
//! first-packets anomaly is ICMP's, so the mode is in the result and every line.

use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use nnb_sys::icmp::EchoSocket;
use nnb_sys::socket::is_datagram_lost;
use serde::Serialize;

use super::openloop::SPIN_NS;
use super::{connect_probe, ProbeError, ReplyTtl, TtlRange};
use crate::clock::{duration_ns, now_ns, wait_until};
use crate::wire::{Header, Kind, HEADER_LEN, MAX_UDP_PAYLOAD};

/// The seed's probe rate, per second.
pub const DEFAULT_RATE_HZ: f64 = 10.0;
/// The seed's number of probes.
pub const DEFAULT_PROBES: u64 = 5000;
/// The seed's number of first probes left out of the statistics.
pub const DEFAULT_SKIP: u64 = 50;
/// The most probes one series sends: its log is kept in memory and in the result
/// (about 50 bytes of JSON per probe, 50 MB at this bound; 28 hours at 10/s).
pub const MAX_PROBES: u64 = 1_000_000;
/// The fastest probe rate, per second (a probe every microsecond).
pub const MAX_RATE_HZ: f64 = 1e6;
/// Default wait for an answer before a probe counts as lost.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);
/// How often the receiver wakes up to declare probes lost and check for the end.
const RECV_POLL: Duration = Duration::from_millis(20);

/// What carries the probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SeriesMode {
    /// UDP to an `nnb serve` reflector.
    Udp,
    /// ICMP echo to the host (a ping socket, or a raw socket as root).
    Icmp,
}

impl SeriesMode {
    /// The mode's label, as the result and every printed line carry it.
    pub fn name(self) -> &'static str {
        match self {
            SeriesMode::Udp => "udp",
            SeriesMode::Icmp => "icmp",
        }
    }
}

/// Settings of one RTT series.
#[derive(Debug, Clone)]
pub struct SeriesConfig {
    /// The reflector (UDP), or the host to echo (ICMP: the port is ignored).
    pub target: SocketAddr,
    /// UDP or ICMP.
    pub mode: SeriesMode,
    /// Probes sent, the dropped first ones included.
    pub probes: u64,
    /// Probes per second.
    pub rate_hz: f64,
    /// The first probes left out of the statistics (not of the log).
    pub skip: u64,
    /// Bytes per probe: the UDP payload, or the ICMP echo data; at least the
    /// 32-byte nnb header both carry.
    pub msg_size: usize,
    /// A probe unanswered after this long is lost.
    pub timeout: Duration,
}

impl SeriesConfig {
    /// The seed's series to `target`: 5,000 64-byte probes at 10 per second, the
    /// first 50 dropped, a 1 s timeout.
    pub fn new(target: SocketAddr, mode: SeriesMode) -> Self {
        SeriesConfig {
            target,
            mode,
            probes: DEFAULT_PROBES,
            rate_hz: DEFAULT_RATE_HZ,
            skip: DEFAULT_SKIP,
            msg_size: 64,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The target as results name it: the reflector's HOST:PORT, or the echoed
    /// host's address alone (ICMP has no port).
    pub fn target_label(&self) -> String {
        match self.mode {
            SeriesMode::Udp => self.target.to_string(),
            SeriesMode::Icmp => self.target.ip().to_string(),
        }
    }

    /// Checks the settings, explaining what is wrong.
    pub fn validate(&self) -> Result<(), ProbeError> {
        check_shape(self.probes, self.rate_hz, self.skip, self.msg_size)
            .map_err(ProbeError::Invalid)?;
        if self.timeout.is_zero() {
            return Err(ProbeError::Invalid("the timeout must be above zero".into()));
        }
        Ok(())
    }
}

/// Checks a series' numbers (the agent checks a job's with it before it knows the
/// target): 1 to [`MAX_PROBES`] probes, fewer skipped than sent, a finite rate
/// above zero and at most [`MAX_RATE_HZ`] that sends them within
/// [`nnb_units::MAX_DURATION`], and a probe size between the nnb header and the
/// largest UDP payload.
pub fn check_shape(probes: u64, rate_hz: f64, skip: u64, msg_size: usize) -> Result<(), String> {
    if probes == 0 || probes > MAX_PROBES {
        return Err(format!("probes = {probes}: must be 1 to {MAX_PROBES}"));
    }
    if skip >= probes {
        return Err(format!(
            "skip = {skip} would leave none of the {probes} probes for the statistics"
        ));
    }
    if !(rate_hz.is_finite() && rate_hz > 0.0 && rate_hz <= MAX_RATE_HZ) {
        return Err(format!(
            "rate = {rate_hz} probes/s: must be above zero and at most {MAX_RATE_HZ}"
        ));
    }
    if probes as f64 / rate_hz > nnb_units::MAX_DURATION.as_secs_f64() {
        return Err(format!(
            "{probes} probes at {rate_hz}/s take longer than {:?}",
            nnb_units::MAX_DURATION
        ));
    }
    if !(HEADER_LEN..=MAX_UDP_PAYLOAD).contains(&msg_size) {
        return Err(format!(
            "message size {msg_size}: must be {HEADER_LEN} (the nnb header) to {MAX_UDP_PAYLOAD} bytes"
        ));
    }
    Ok(())
}

/// One probe of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ProbeRecord {
    /// Sequence number, from 0, in send order.
    pub seq: u64,
    /// When it was sent, ns from the series' start (probe 0's scheduled time).
    pub sent_ns: u64,
    /// Its round-trip time, ns; `None` (JSON null) when it was lost.
    pub rtt_ns: Option<u64>,
}

/// The statistics of a series' kept probes (after the first `skip`), ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SeriesSummary {
    /// Smallest RTT: the propagation delay's estimate.
    pub min_ns: u64,
    /// Median (of an even count, the mean of the middle two, rounded down).
    pub p50_ns: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Largest.
    pub max_ns: u64,
    /// Standard deviation (of the population of kept RTTs).
    pub std_ns: f64,
    /// RTTs the statistics are over: the answered probes after the first `skip`.
    pub kept: u64,
    /// Probes after the first `skip` that were lost (`kept + lost` = sent − skip).
    pub lost: u64,
}

/// The statistics of `log`'s probes after the first `skip` (by sequence number);
/// `None` when none of them was answered.
pub fn summarize(log: &[ProbeRecord], skip: u64) -> Option<SeriesSummary> {
    let kept_probes = log.iter().filter(|r| r.seq >= skip);
    let mut rtts: Vec<u64> = kept_probes.clone().filter_map(|r| r.rtt_ns).collect();
    let lost = kept_probes.filter(|r| r.rtt_ns.is_none()).count() as u64;
    if rtts.is_empty() {
        return None;
    }
    rtts.sort_unstable();
    let n = rtts.len();
    let p50_ns = if n % 2 == 1 {
        rtts[n / 2]
    } else {
        ((u128::from(rtts[n / 2 - 1]) + u128::from(rtts[n / 2])) / 2) as u64
    };
    let mean_ns = rtts.iter().map(|&r| r as f64).sum::<f64>() / n as f64;
    let var = rtts
        .iter()
        .map(|&r| (r as f64 - mean_ns).powi(2))
        .sum::<f64>()
        / n as f64;
    Some(SeriesSummary {
        min_ns: rtts[0],
        p50_ns,
        mean_ns,
        max_ns: rtts[n - 1],
        std_ns: var.sqrt(),
        kept: n as u64,
        lost,
    })
}

/// The result of an RTT series (an `rtt` job's result, `nnb rtt --json`).
#[derive(Debug, Clone, Serialize)]
pub struct SeriesReport {
    /// "udp" or "icmp".
    pub mode: SeriesMode,
    /// ICMP only: the socket that carried the echoes, "ping" (a kernel ping
    /// socket) or "raw".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub icmp_socket: Option<&'static str>,
    /// Reflector (UDP) or host (ICMP) probed.
    pub target: String,
    /// Probes per second.
    pub rate_hz: f64,
    /// Probes asked for.
    pub probes: u64,
    /// First probes left out of the summary.
    pub skip: u64,
    /// Bytes per probe (UDP payload or ICMP data).
    pub msg_size: usize,
    /// A probe unanswered after this long is lost, ns.
    pub timeout_ns: u64,
    /// Seconds from the first probe's scheduled time to the end of the last one's
    /// period, or to the last answer when that came later.
    pub elapsed_s: f64,
    /// Probes sent (fewer than `probes` when stopped early).
    pub sent: u64,
    /// Probes lost, over the whole log.
    pub lost: u64,
    /// Of `lost`: probes whose answer came, after the timeout.
    pub late: u64,
    /// Datagrams that answered no probe of this series (or answered one again).
    pub garbage: u64,
    /// The statistics of the kept probes; `None` when none of them was answered.
    pub summary: Option<SeriesSummary>,
    /// Every probe sent, in send order, the dropped first ones included.
    pub log: Vec<ProbeRecord>,
    /// UDP: the TTL the answers arrived with and the hops it suggests, over every
    /// answered probe (the dropped first ones included); `None` over ICMP, or when
    /// the kernel reported none.
    pub reply_ttl: Option<ReplyTtl>,
}

/// What carries the probes: a connected UDP socket or an ICMP echo socket.
enum Transport {
    Udp(UdpSocket),
    Icmp(EchoSocket),
}

impl Transport {
    fn open(cfg: &SeriesConfig) -> Result<Transport, ProbeError> {
        Ok(match cfg.mode {
            SeriesMode::Udp => Transport::Udp(connect_probe(cfg.target)?),
            SeriesMode::Icmp => Transport::Icmp(EchoSocket::open(cfg.target.ip()).map_err(
                ProbeError::io(format!("opening an ICMP socket to {}", cfg.target.ip())),
            )?),
        })
    }

    fn try_clone(&self) -> std::io::Result<Transport> {
        Ok(match self {
            Transport::Udp(s) => Transport::Udp(s.try_clone()?),
            Transport::Icmp(s) => Transport::Icmp(s.try_clone()?),
        })
    }

    fn set_read_timeout(&self, t: Duration) -> std::io::Result<()> {
        match self {
            Transport::Udp(s) => s.set_read_timeout(Some(t)),
            Transport::Icmp(s) => s.set_read_timeout(Some(t)),
        }
    }

    /// Sends probe `seq`, whose nnb datagram is `probe`.
    fn send(&self, seq: u64, probe: &[u8], scratch: &mut Vec<u8>) -> std::io::Result<()> {
        match self {
            Transport::Udp(s) => s.send(probe).map(drop),
            // The 16-bit ICMP sequence number wraps; the header inside does not.
            Transport::Icmp(s) => s.send_echo(seq as u16, probe, scratch),
        }
    }

    /// Receives one datagram: the nnb datagram it carries back, if any, and the IP
    /// TTL it arrived with (UDP only).
    fn recv<'a>(&self, buf: &'a mut [u8]) -> std::io::Result<Option<(&'a [u8], Option<u8>)>> {
        match self {
            Transport::Udp(s) => {
                let (n, ttl) = nnb_sys::ttl::recv(s, buf)?;
                Ok(Some((&buf[..n], ttl)))
            }
            Transport::Icmp(s) => Ok(s.recv_reply(buf)?.map(|r| (&buf[r], None))),
        }
    }

    /// The kind of header an answer carries: the reflector's pong, or the echoed
    /// ping itself.
    fn answer_kind(&self) -> Kind {
        match self {
            Transport::Udp(_) => Kind::Pong,
            Transport::Icmp(_) => Kind::Ping,
        }
    }

    fn icmp_socket(&self) -> Option<&'static str> {
        match self {
            Transport::Udp(_) => None,
            Transport::Icmp(s) => Some(s.kind().name()),
        }
    }
}

/// What the sender and the receiver share.
struct Shared {
    /// Probe 0's scheduled send time, `now_ns` clock.
    start_ns: u64,
    period_ns: f64,
    /// Each probe's actual send time (0 until sent).
    sent_at: Vec<AtomicU64>,
    /// Probes sent so far (published after their `sent_at`).
    sent: AtomicU64,
    sender_done: AtomicBool,
}

impl Shared {
    fn due_ns(&self, seq: u64) -> u64 {
        self.start_ns + (seq as f64 * self.period_ns) as u64
    }
}

/// Runs the series. `stop` ends the sending early (the probes sent are still
/// waited for); `on_probe` is called for each probe, in send order, once its fate
/// is known (its answer, or its timeout).
///
/// A series that sent probes and got not one answer fails with
/// [`ProbeError::NoAnswer`]: nothing answers at the target.
pub fn run(
    cfg: &SeriesConfig,
    stop: &AtomicBool,
    on_probe: &mut (dyn FnMut(&ProbeRecord) + Send),
) -> Result<SeriesReport, ProbeError> {
    cfg.validate()?;
    let tx = Transport::open(cfg)?;
    let rx = tx
        .try_clone()
        .map_err(ProbeError::io("cloning the probe socket"))?;
    rx.set_read_timeout(RECV_POLL)
        .map_err(ProbeError::io("setting the read timeout"))?;
    let shared = Shared {
        // Leaves the receiver a moment to start before the first probe is due.
        start_ns: now_ns() + 2_000_000,
        period_ns: 1e9 / cfg.rate_hz,
        sent_at: (0..cfg.probes).map(|_| AtomicU64::new(0)).collect(),
        sent: AtomicU64::new(0),
        sender_done: AtomicBool::new(false),
    };
    let (answers, counts) = std::thread::scope(|s| {
        let sender = s.spawn(|| {
            let r = send_probes(cfg, &tx, &shared, stop);
            shared.sender_done.store(true, Ordering::Release);
            r
        });
        let receiver = s.spawn(|| receive_answers(cfg, &rx, &shared, on_probe));
        let sent = sender
            .join()
            .map_err(|_| ProbeError::Invalid("the rtt sender panicked".into()))?;
        let received = receiver
            .join()
            .map_err(|_| ProbeError::Invalid("the rtt receiver panicked".into()))?;
        sent?;
        received
    })?;
    let sent = shared.sent.load(Ordering::Acquire);
    let log: Vec<ProbeRecord> = (0..sent)
        .map(|seq| ProbeRecord {
            seq,
            sent_ns: shared.sent_at[seq as usize]
                .load(Ordering::Relaxed)
                .saturating_sub(shared.start_ns),
            rtt_ns: answers[seq as usize],
        })
        .collect();
    let lost = log.iter().filter(|r| r.rtt_ns.is_none()).count() as u64;
    if sent > 0 && lost == sent {
        return Err(ProbeError::NoAnswer {
            target: cfg.target,
            sent,
            late: counts.late,
            timeout: cfg.timeout,
        });
    }
    let schedule_end = shared.due_ns(sent);
    let end = schedule_end.max(counts.last_answer_ns);
    Ok(SeriesReport {
        mode: cfg.mode,
        icmp_socket: tx.icmp_socket(),
        target: cfg.target_label(),
        rate_hz: cfg.rate_hz,
        probes: cfg.probes,
        skip: cfg.skip,
        msg_size: cfg.msg_size,
        timeout_ns: duration_ns(cfg.timeout),
        elapsed_s: end.saturating_sub(shared.start_ns) as f64 / 1e9,
        sent,
        lost,
        late: counts.late,
        garbage: counts.garbage,
        summary: summarize(&log, cfg.skip),
        log,
        reply_ttl: counts.ttl.report(),
    })
}

/// Sends the probes on their schedule until all are sent or `stop` is raised.
fn send_probes(
    cfg: &SeriesConfig,
    tx: &Transport,
    shared: &Shared,
    stop: &AtomicBool,
) -> Result<(), ProbeError> {
    crate::clock::precise_sleeps();
    let mut buf = vec![0u8; cfg.msg_size];
    let mut scratch = Vec::with_capacity(cfg.msg_size + nnb_sys::icmp::ECHO_HEADER_LEN);
    for seq in 0..cfg.probes {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        wait_until(shared.due_ns(seq), SPIN_NS);
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
        // Published before the send: on loopback the answer can come before `send`
        // returns, and the receiver accepts only answers of probes it knows of.
        shared.sent_at[seq as usize].store(t, Ordering::Relaxed);
        shared.sent.store(seq + 1, Ordering::Release);
        loop {
            match tx.send(seq, &buf, &mut scratch) {
                Ok(()) => break,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                    std::hint::spin_loop()
                }
                // An ICMP error for an earlier probe, or a full device queue: this
                // probe is lost, the socket works.
                Err(e) if is_datagram_lost(&e) => break,
                Err(e) => return Err(ProbeError::io("sending a probe")(e)),
            }
        }
    }
    Ok(())
}

/// The receiver's counters besides the answers.
#[derive(Default)]
struct RecvCounts {
    late: u64,
    garbage: u64,
    last_answer_ns: u64,
    ttl: TtlRange,
}

/// Receives answers until the sender is done and every probe sent is answered or
/// timed out; each probe's RTT (`None`: lost), and the counters.
fn receive_answers(
    cfg: &SeriesConfig,
    rx: &Transport,
    shared: &Shared,
    on_probe: &mut (dyn FnMut(&ProbeRecord) + Send),
) -> Result<(Vec<Option<u64>>, RecvCounts), ProbeError> {
    let timeout_ns = duration_ns(cfg.timeout);
    let answer_kind = rx.answer_kind();
    let mut answers: Vec<Option<u64>> = vec![None; cfg.probes as usize];
    let mut counts = RecvCounts::default();
    let mut buf = vec![0u8; 65_536];
    // Probes before this one have been handed to `on_probe`.
    let mut next = 0u64;
    loop {
        let received = match rx.recv(&mut buf) {
            Ok(Some((d, ttl))) => Some((Header::decode(d), now_ns(), ttl)),
            Ok(None) => None,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) || is_datagram_lost(&e) =>
            {
                None
            }
            Err(e) => return Err(ProbeError::io("receiving an answer")(e)),
        };
        let sent = shared.sent.load(Ordering::Acquire);
        if let Some((header, t1, ttl)) = received {
            match header {
                Ok(h)
                    if h.kind == answer_kind
                        && h.seq < sent
                        && h.send_ts == shared.sent_at[h.seq as usize].load(Ordering::Relaxed)
                        && h.send_ts <= t1
                        && answers[h.seq as usize].is_none() =>
                {
                    let rtt = t1 - h.send_ts;
                    if rtt > timeout_ns {
                        counts.late += 1;
                    } else {
                        answers[h.seq as usize] = Some(rtt);
                        counts.ttl.see(ttl);
                        counts.last_answer_ns = counts.last_answer_ns.max(t1);
                    }
                }
                _ => counts.garbage += 1,
            }
        }
        // Hands on, in order, every probe whose fate is known.
        let now = now_ns();
        while next < sent {
            let i = next as usize;
            let sent_at = shared.sent_at[i].load(Ordering::Relaxed);
            if answers[i].is_none() && now <= sent_at + timeout_ns {
                break;
            }
            on_probe(&ProbeRecord {
                seq: next,
                sent_ns: sent_at.saturating_sub(shared.start_ns),
                rtt_ns: answers[i],
            });
            next += 1;
        }
        if shared.sender_done.load(Ordering::Acquire) && next >= shared.sent.load(Ordering::Acquire)
        {
            return Ok((answers, counts));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(seq: u64, rtt_ns: Option<u64>) -> ProbeRecord {
        ProbeRecord {
            seq,
            sent_ns: seq * 100_000_000,
            rtt_ns,
        }
    }

    #[test]
    fn the_summary_drops_exactly_the_first_skip_probes() {
        // Probes 0-2 are the seed's slow first pings (hundreds of ms); 3-7 are kept,
        // one of them lost.
        let log = [
            probe(0, Some(400_000_000)),
            probe(1, None),
            probe(2, Some(300_000_000)),
            probe(3, Some(1_000)),
            probe(4, Some(3_000)),
            probe(5, None),
            probe(6, Some(2_000)),
            probe(7, Some(10_000)),
        ];
        let s = summarize(&log, 3).expect("kept answers");
        assert_eq!((s.kept, s.lost), (4, 1));
        assert_eq!((s.min_ns, s.max_ns), (1_000, 10_000));
        // Sorted 1000, 2000, 3000, 10000: the middle two's mean.
        assert_eq!(s.p50_ns, 2_500);
        assert_eq!(s.mean_ns, 4_000.0);
        // Deviations -3000, -2000, -1000, 6000: variance 50e6 / 4.
        assert!((s.std_ns - 12.5e6_f64.sqrt()).abs() < 1e-6, "{}", s.std_ns);
        // One probe fewer dropped: probe 2's 300 ms is in.
        let s2 = summarize(&log, 2).expect("kept answers");
        assert_eq!((s2.kept, s2.max_ns), (5, 300_000_000));
        // None dropped: probe 0 is in too.
        assert_eq!(summarize(&log, 0).map(|s| s.max_ns), Some(400_000_000));
        // Every kept probe lost: no statistics.
        assert_eq!(summarize(&log[..2], 1), None);
    }

    #[test]
    fn a_lost_probe_is_null_in_the_log() {
        let json = serde_json::to_value([probe(4, None), probe(5, Some(42))]).unwrap();
        assert_eq!(
            json,
            serde_json::json!([
                {"seq": 4, "sent_ns": 400_000_000u64, "rtt_ns": null},
                {"seq": 5, "sent_ns": 500_000_000u64, "rtt_ns": 42},
            ])
        );
    }

    #[test]
    fn bad_shapes_are_refused_with_the_reason() {
        assert!(check_shape(5000, 10.0, 50, 64).is_ok());
        for (probes, rate, skip, size, says) in [
            (0, 10.0, 0, 64, "probes = 0"),
            (MAX_PROBES + 1, 10.0, 0, 64, "probes ="),
            (10, 10.0, 10, 64, "skip = 10"),
            (10, 0.0, 0, 64, "rate = 0"),
            (10, f64::NAN, 0, 64, "rate = NaN"),
            (10, f64::INFINITY, 0, 64, "rate = inf"),
            (MAX_PROBES, 1e-3, 0, 64, "take longer"),
            (10, 10.0, 0, 31, "message size 31"),
            (10, 10.0, 0, 70_000, "message size 70000"),
        ] {
            let e = check_shape(probes, rate, skip, size).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }
}
