//! Badabing (Sommers, Barford, Duffield and Ron, SIGCOMM 2005) as Wang & Ng ran it
//! between EC2 instances (seed 003, §III.A and §VI, Figs 10 and 11).
//!
//! **The probe process.** Time is cut into slots (5 ms); each slot carries a probe
//! with a probability (0.3), drawn from a seeded generator so a run can be repeated;
//! a probe is a few packets (3) sent back to back, each stamped with its send time.
//! An `nnb serve` reflector stamps each packet's receive time into its answer
//! ([`crate::wire::FLAG_STAMP_RECEIVE`]), so the sender learns each packet's one-way
//! delay towards the reflector, not only its round trip.
//!
//! **The estimator** ([`Estimator`]), as the seed states it: a probed slot is lossy
//! when a packet was lost within τ (50 ms) of it, or when its one-way delay exceeds
//! `max_owd × (1 − α)` (α = 0.005), `max_owd` being the one-way delay of the most
//! recent successfully received packet at the time a loss happens (replaced at
//! each loss; before the first loss there is none, and only the τ rule applies).
//! The loss frequency is lossy slots / probed slots; the probe loss rate, beside it,
//! is lost probes / probes (a probe is lost when any of its packets is).
//!
//! **One-way delays need no clock sync.** The sender's and the reflector's clocks
//! have an unknown offset; every one-way delay here is reported relative to the
//! smallest one seen in the run (receiver stamp − sender stamp − that minimum), so
//! the offset cancels. The α rule is applied to these relative delays: it is the
//! seed's rule with the path's smallest delay taken as zero (on a data-centre path,
//! tens of µs against the ms of a descheduled receiver). A drift between the two
//! clocks is not removed (a 10 ppm drift is 0.6 ms over a minute).

use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use nnb_sys::socket::is_datagram_lost;
use serde::Serialize;
use thiserror::Error;

use crate::clock::{duration_ns, now_ns, wait_until};
use crate::probe::connect_udp;
use crate::sendbatch::{set_socket_buffer, Direction};
use crate::wire::{Header, Kind, FLAG_STAMP_RECEIVE, HEADER_LEN, MAX_UDP_PAYLOAD, STAMP_LEN};

/// The seed's slot length.
pub const DEFAULT_SLOT: Duration = Duration::from_millis(5);
/// The seed's probability that a slot carries a probe.
pub const DEFAULT_PROBABILITY: f64 = 0.3;
/// The seed's packets per probe.
pub const DEFAULT_PACKETS: u32 = 3;
/// The seed's τ: a slot within this of a lost packet is lossy.
pub const DEFAULT_TAU: Duration = Duration::from_millis(50);
/// The seed's α: a slot whose one-way delay exceeds `max_owd × (1 − α)` is lossy.
pub const DEFAULT_ALPHA: f64 = 0.005;
/// Wang & Ng ran Badabing for one minute per pair (§III.C).
pub const DEFAULT_DURATION: Duration = Duration::from_secs(60);
/// Packet size, bytes (UDP payload: nnb's 32-byte header, the 8-byte receive stamp
/// and padding): Badabing's own 600 (the seed does not say).
pub const DEFAULT_MSG_SIZE: usize = 600;
/// The most slots one run may have (83 minutes of 5 ms slots): bounds the series.
pub const MAX_SLOTS: u64 = 1_000_000;
/// The most packets one probe may have.
pub const MAX_PACKETS: u32 = 100;
/// A packet whose answer has not come back this long after the last send is lost.
pub const LOSS_TIMEOUT: Duration = Duration::from_secs(1);
/// The sender sleeps until this close to a slot's start, then spins.
const SPIN_NS: u64 = 50_000;
/// How often the receiver wakes up to check whether the run is over.
const RECV_POLL: Duration = Duration::from_millis(20);
/// Receive buffer asked for, bytes: room for the answers a held path releases at once.
const RECV_BUFFER: usize = 4 << 20;

/// Why a Badabing run could not be made.
#[derive(Debug, Error)]
pub enum BadabingError {
    /// A setting is out of range.
    #[error("{0}")]
    Invalid(String),
    /// A socket operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// Packets were answered, but none carried a receive stamp.
    #[error(
        "the reflector at {0} answers without receive stamps: it is an nnb serve older than \
         this nnb (Badabing needs one-way delays)"
    )]
    NoStamps(SocketAddr),
}

fn io_error(what: &str) -> impl FnOnce(std::io::Error) -> BadabingError + '_ {
    move |source| BadabingError::Io {
        what: what.to_string(),
        source,
    }
}

/// The estimator's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimator {
    /// Slot length, ns.
    pub slot_ns: u64,
    /// A probed slot within this of a lost packet is lossy, ns.
    pub tau_ns: u64,
    /// A probed slot whose one-way delay exceeds `max_owd × (1 − alpha)` is lossy.
    pub alpha: f64,
}

/// One packet of a probe, as the estimator takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketObs {
    /// Send time from the start of the run, ns (the sender's clock).
    pub at_ns: u64,
    /// Receiver's stamp − sender's stamp, ns, with the clocks' unknown offset in it
    /// (so possibly negative); `None` when the packet (or its answer) was lost.
    pub owd_raw_ns: Option<i64>,
}

/// One probe (one probed slot), as the estimator takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeObs {
    /// Its slot's number from the start of the run.
    pub slot: u64,
    /// Its packets in send order.
    pub packets: Vec<PacketObs>,
}

/// One probed slot of the series (Fig. 11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SlotRecord {
    /// The slot's number from the start of the run.
    pub slot: u64,
    /// Send time of the probe's first packet from the start of the run, ns.
    pub t_ns: u64,
    /// The largest one-way delay of the probe's received packets, relative to the
    /// smallest of the run; `None` when every packet was lost.
    pub owd_ns: Option<u64>,
    /// The max_owd estimate in force at this slot (relative like `owd_ns`; after
    /// this slot's own losses); `None` before the first loss.
    pub max_owd_ns: Option<u64>,
    /// Packets of the probe lost.
    pub lost: u32,
    /// Whether the estimator marked the slot lossy.
    pub lossy: bool,
}

/// What the estimator makes of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// Probed slots (= probes).
    pub probed_slots: u64,
    /// Probed slots marked lossy.
    pub lossy_slots: u64,
    /// Probes sent.
    pub probes: u64,
    /// Probes with at least one packet lost.
    pub lost_probes: u64,
    /// Packets sent.
    pub packets_sent: u64,
    /// Packets lost (no answer).
    pub packets_lost: u64,
    /// Lossy slots / probed slots, 0 to 1 (Badabing's loss frequency; 0 without probes).
    pub loss_frequency: f64,
    /// Lost probes / probes, 0 to 1 (0 without probes).
    pub probe_loss_rate: f64,
    /// The smallest raw one-way delay (with the clocks' offset), the origin of the
    /// relative ones; `None` when nothing was received.
    pub min_owd_raw_ns: Option<i64>,
    /// Every probed slot in order.
    pub series: Vec<SlotRecord>,
}

impl Estimator {
    /// The estimate of `probes` (in slot order, each packet in send order).
    pub fn estimate(&self, probes: &[ProbeObs]) -> Estimate {
        let min = probes
            .iter()
            .flat_map(|p| &p.packets)
            .filter_map(|k| k.owd_raw_ns)
            .min();
        // Relative to the smallest: never negative, at most i64's span.
        let rel = |raw: i64| (i128::from(raw) - i128::from(min.unwrap_or(raw))) as u64;
        // Walk the packets in send order: max_owd is replaced at each loss by the
        // relative delay of the most recent packet received before it.
        let mut last_ok: Option<u64> = None;
        let mut max_owd: Option<u64> = None;
        let mut losses: Vec<u64> = Vec::new();
        let mut series = Vec::with_capacity(probes.len());
        let (mut packets_sent, mut lost_probes) = (0u64, 0u64);
        for p in probes {
            let mut owd: Option<u64> = None;
            let mut lost_here = 0u32;
            for k in &p.packets {
                packets_sent += 1;
                match k.owd_raw_ns {
                    Some(raw) => {
                        let d = rel(raw);
                        owd = Some(owd.map_or(d, |o| o.max(d)));
                        last_ok = Some(d);
                    }
                    None => {
                        lost_here += 1;
                        losses.push(k.at_ns);
                        if last_ok.is_some() {
                            max_owd = last_ok;
                        }
                    }
                }
            }
            lost_probes += u64::from(lost_here > 0);
            series.push(SlotRecord {
                slot: p.slot,
                t_ns: p.packets.first().map_or(p.slot * self.slot_ns, |k| k.at_ns),
                owd_ns: owd,
                max_owd_ns: max_owd,
                lost: lost_here,
                lossy: false,
            });
        }
        losses.sort_unstable();
        let mut lossy_slots = 0u64;
        for s in &mut series {
            s.lossy = self.near_a_loss(s.slot, &losses) || self.above_max_owd(s);
            lossy_slots += u64::from(s.lossy);
        }
        let share = |n: u64, of: usize| if of == 0 { 0.0 } else { n as f64 / of as f64 };
        Estimate {
            probed_slots: series.len() as u64,
            lossy_slots,
            probes: probes.len() as u64,
            lost_probes,
            packets_sent,
            packets_lost: losses.len() as u64,
            loss_frequency: share(lossy_slots, series.len()),
            probe_loss_rate: share(lost_probes, probes.len()),
            min_owd_raw_ns: min,
            series,
        }
    }

    /// The τ rule: a loss (send time, sorted `losses`) at most τ before the slot's
    /// start or after its end.
    fn near_a_loss(&self, slot: u64, losses: &[u64]) -> bool {
        let start = slot.saturating_mul(self.slot_ns);
        let from = start.saturating_sub(self.tau_ns);
        let to = start
            .saturating_add(self.slot_ns)
            .saturating_add(self.tau_ns);
        let first = losses.partition_point(|&l| l < from);
        losses.get(first).is_some_and(|&l| l <= to)
    }

    /// The α rule: the slot's one-way delay above `max_owd × (1 − α)`.
    fn above_max_owd(&self, s: &SlotRecord) -> bool {
        match (s.owd_ns, s.max_owd_ns) {
            (Some(owd), Some(max)) => owd as f64 > max as f64 * (1.0 - self.alpha),
            _ => false,
        }
    }
}

/// Settings of one Badabing run.
#[derive(Debug, Clone)]
pub struct BadabingConfig {
    /// The reflector (`nnb serve`).
    pub target: SocketAddr,
    /// Probing time.
    pub duration: Duration,
    /// Slot length.
    pub slot: Duration,
    /// Probability that a slot carries a probe, above 0 and at most 1.
    pub probability: f64,
    /// Packets per probe.
    pub packets: u32,
    /// Bytes per packet (UDP payload, header and receive stamp included).
    pub msg_size: usize,
    /// The τ rule's window.
    pub tau: Duration,
    /// The α rule's margin, 0 to below 1.
    pub alpha: f64,
    /// Seed of the slot draw: the same seed gives the same probed slots.
    pub seed: u64,
    /// CPU for the sending thread.
    pub pin: Option<usize>,
}

impl BadabingConfig {
    /// The seed's settings (5 ms slots, 0.3, 3 packets, τ = 50 ms, α = 0.005, one
    /// minute) towards `target`, with `seed`.
    pub fn new(target: SocketAddr, seed: u64) -> Self {
        BadabingConfig {
            target,
            duration: DEFAULT_DURATION,
            slot: DEFAULT_SLOT,
            probability: DEFAULT_PROBABILITY,
            packets: DEFAULT_PACKETS,
            msg_size: DEFAULT_MSG_SIZE,
            tau: DEFAULT_TAU,
            alpha: DEFAULT_ALPHA,
            seed,
            pin: None,
        }
    }

    /// Slots in the run: the duration over the slot length, rounded down.
    pub fn slots(&self) -> u64 {
        let slot = self.slot.as_nanos().max(1);
        u64::try_from(self.duration.as_nanos() / slot).unwrap_or(u64::MAX)
    }

    /// Checks the settings, explaining what is wrong.
    pub fn validate(&self) -> Result<(), BadabingError> {
        let bad = |m: String| Err(BadabingError::Invalid(m));
        if self.slot.is_zero() || self.duration < self.slot {
            return bad(format!(
                "the slot ({:?}) must be above zero and at most the duration ({:?})",
                self.slot, self.duration
            ));
        }
        if self.slots() > MAX_SLOTS {
            return bad(format!(
                "{:?} of {:?} slots is {} slots, above the limit of {MAX_SLOTS}: \
                 a shorter duration or longer slots",
                self.duration,
                self.slot,
                self.slots()
            ));
        }
        if !(self.probability > 0.0 && self.probability <= 1.0) {
            return bad(format!(
                "probability {} must be above 0 and at most 1",
                self.probability
            ));
        }
        if !(1..=MAX_PACKETS).contains(&self.packets) {
            return bad(format!(
                "packets per probe {} must be 1 to {MAX_PACKETS}",
                self.packets
            ));
        }
        let min_size = HEADER_LEN + STAMP_LEN;
        if !(min_size..=MAX_UDP_PAYLOAD).contains(&self.msg_size) {
            return bad(format!(
                "message size {} must be {min_size} (nnb's header and the receive stamp) \
                 to {MAX_UDP_PAYLOAD} bytes",
                self.msg_size
            ));
        }
        if !(self.alpha >= 0.0 && self.alpha < 1.0) {
            return bad(format!(
                "alpha {} must be at least 0 and below 1",
                self.alpha
            ));
        }
        if self.tau > self.duration {
            return bad(format!(
                "tau ({:?}) must be at most the duration ({:?})",
                self.tau, self.duration
            ));
        }
        Ok(())
    }

    /// The estimator these settings ask for.
    pub fn estimator(&self) -> Estimator {
        Estimator {
            slot_ns: duration_ns(self.slot),
            tau_ns: duration_ns(self.tau),
            alpha: self.alpha,
        }
    }

    /// The probed slots, in order: slot `i` is probed when the `i`th draw of the
    /// seeded generator (splitmix64) falls below the probability.
    pub fn probed_slots(&self) -> Vec<u64> {
        let mut rng = SplitMix64(self.seed);
        (0..self.slots())
            .filter(|_| rng.unit() < self.probability)
            .collect()
    }
}

/// A seed for a run that was given none: the clock's nanoseconds and the process
/// id, mixed. Recorded in the report, so the run can still be repeated.
pub fn fresh_seed() -> u64 {
    SplitMix64(now_ns() ^ u64::from(std::process::id()).rotate_left(32)).next_u64()
}

/// splitmix64 (Steele, Lea and Flood; Vigna's reference code): every seed gives a
/// full-period sequence, and a run is repeated by its seed.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`, 53 random bits.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A Badabing run's result (the `badabing` job's result, `nnb badabing --json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BadabingReport {
    /// The reflector probed.
    pub target: String,
    /// Seed of the slot draw.
    pub seed: u64,
    /// From the first slot's start to the last packet's send, s.
    pub elapsed_s: f64,
    /// Slot length, ns.
    pub slot_ns: u64,
    /// Probability that a slot carries a probe.
    pub probability: f64,
    /// Packets per probe.
    pub packets: u32,
    /// Bytes per packet.
    pub msg_size: usize,
    /// The τ rule's window, ns.
    pub tau_ns: u64,
    /// The α rule's margin.
    pub alpha: f64,
    /// Slots of the run (probed or not; fewer when stopped early).
    pub slots: u64,
    /// Answers that carried no receive stamp (an old reflector), counted as lost.
    pub unstamped: u64,
    /// Datagrams that were not answers to this run's packets, and repeated answers.
    pub garbage: u64,
    /// Always true: one-way delays are relative to the smallest of the run (no
    /// clock sync), which `min_owd_raw_ns` holds.
    pub owd_relative: bool,
    /// The estimate: counts, loss frequency, probe loss rate and the series.
    #[serde(flatten)]
    pub estimate: Estimate,
}

/// Runs Badabing: probes on the seeded slot schedule until the duration is over or
/// `stop` is set, then the estimator.
pub fn run(cfg: &BadabingConfig, stop: &AtomicBool) -> Result<BadabingReport, BadabingError> {
    cfg.validate()?;
    let tx = connect_udp(cfg.target).map_err(|e| BadabingError::Invalid(e.to_string()))?;
    let rx = tx
        .try_clone()
        .map_err(io_error("cloning the probe socket"))?;
    set_socket_buffer(&rx, Direction::Receive, RECV_BUFFER);
    rx.set_read_timeout(Some(RECV_POLL))
        .map_err(io_error("setting the read timeout"))?;
    let schedule = cfg.probed_slots();
    let total = schedule.len() as u64 * u64::from(cfg.packets);
    // One stream id per run, so answers to another run's packets are not taken.
    let stream = (cfg.seed ^ now_ns()) as u32;
    let slot_ns = duration_ns(cfg.slot);
    // Leaves the receiver a moment to start before the first slot.
    let start_ns = now_ns() + 2_000_000;
    let sent = AtomicU64::new(0);
    let sender_done = AtomicBool::new(false);
    let (send_times, answers) = std::thread::scope(|s| {
        let sender = s.spawn(|| {
            let r = send_probes(cfg, &tx, &schedule, start_ns, stream, stop, &sent);
            sender_done.store(true, Ordering::Release);
            r
        });
        let receiver = s.spawn(|| receive_answers(&rx, total, stream, &sent, &sender_done));
        let send_times = sender
            .join()
            .map_err(|_| BadabingError::Invalid("the Badabing sender panicked".into()))??;
        let answers = receiver
            .join()
            .map_err(|_| BadabingError::Invalid("the Badabing receiver panicked".into()))??;
        Ok::<_, BadabingError>((send_times, answers))
    })?;
    if answers.stamps.iter().all(Option::is_none) && answers.unstamped > 0 {
        return Err(BadabingError::NoStamps(cfg.target));
    }
    let per = cfg.packets as usize;
    let probes: Vec<ProbeObs> = send_times
        .chunks(per)
        .zip(answers.stamps.chunks(per))
        .zip(&schedule)
        .map(|((times, stamps), &slot)| ProbeObs {
            slot,
            packets: times
                .iter()
                .zip(stamps)
                .map(|(&t, r)| PacketObs {
                    at_ns: t.saturating_sub(start_ns),
                    owd_raw_ns: r.map(|r| (i128::from(r) - i128::from(t)) as i64),
                })
                .collect(),
        })
        .collect();
    let estimate = cfg.estimator().estimate(&probes);
    let last_send = send_times.last().copied().unwrap_or(start_ns);
    let slots = match probes.last() {
        // Stopped early: the slots up to the last probe's.
        Some(p) if probes.len() < schedule.len() => p.slot + 1,
        _ => cfg.slots(),
    };
    let elapsed_ns = if probes.len() < schedule.len() {
        last_send.saturating_sub(start_ns)
    } else {
        (cfg.slots() * slot_ns).max(last_send.saturating_sub(start_ns))
    };
    Ok(BadabingReport {
        target: cfg.target.to_string(),
        seed: cfg.seed,
        elapsed_s: elapsed_ns as f64 / 1e9,
        slot_ns,
        probability: cfg.probability,
        packets: cfg.packets,
        msg_size: cfg.msg_size,
        tau_ns: duration_ns(cfg.tau),
        alpha: cfg.alpha,
        slots,
        unstamped: answers.unstamped,
        garbage: answers.garbage,
        owd_relative: true,
        estimate,
    })
}

/// Sends each probe at its slot's start, its packets back to back, each stamped;
/// returns every packet's send time (sender's clock) in sequence order. Only whole
/// probes are sent: `stop` ends the run between probes.
fn send_probes(
    cfg: &BadabingConfig,
    sock: &UdpSocket,
    schedule: &[u64],
    start_ns: u64,
    stream: u32,
    stop: &AtomicBool,
    sent: &AtomicU64,
) -> Result<Vec<u64>, BadabingError> {
    if let Some(cpu) = cfg.pin {
        nnb_sys::affinity::pin_current_thread(cpu)
            .map_err(std::io::Error::from)
            .map_err(io_error("pinning the sender"))?;
    }
    crate::clock::precise_sleeps();
    let slot_ns = duration_ns(cfg.slot);
    let mut buf = vec![0u8; cfg.msg_size];
    let mut times = Vec::with_capacity(schedule.len() * cfg.packets as usize);
    for &slot in schedule {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        wait_until(start_ns + slot * slot_ns, SPIN_NS);
        for _ in 0..cfg.packets {
            let seq = times.len() as u64;
            let t = now_ns();
            Header {
                kind: Kind::Ping,
                flags: FLAG_STAMP_RECEIVE,
                seq,
                send_ts: t,
                stream,
                payload_len: (cfg.msg_size - HEADER_LEN) as u32,
            }
            .encode(&mut buf);
            times.push(t);
            // Published before the send: on loopback the answer can come first.
            sent.store(seq + 1, Ordering::Release);
            loop {
                match sock.send(&buf) {
                    Ok(_) => break,
                    Err(e)
                        if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) =>
                    {
                        std::hint::spin_loop()
                    }
                    // The kernel reports this packet (or an earlier one) lost.
                    Err(e) if is_datagram_lost(&e) => break,
                    Err(e) => return Err(io_error("sending a probe packet")(e)),
                }
            }
        }
    }
    Ok(times)
}

/// The answers the receiver collected.
struct Answers {
    /// The reflector's receive stamp of each packet, by sequence number.
    stamps: Vec<Option<u64>>,
    /// Answers without a stamp.
    unstamped: u64,
    /// Foreign datagrams and repeated answers.
    garbage: u64,
}

/// Collects the answers until the sender is done and every packet is answered or
/// [`LOSS_TIMEOUT`] has passed since it finished.
fn receive_answers(
    sock: &UdpSocket,
    total: u64,
    stream: u32,
    sent: &AtomicU64,
    sender_done: &AtomicBool,
) -> Result<Answers, BadabingError> {
    let mut buf = vec![0u8; 65_536];
    let mut out = Answers {
        stamps: vec![None; total as usize],
        unstamped: 0,
        garbage: 0,
    };
    let mut answered = 0u64;
    let mut done_at: Option<u64> = None;
    loop {
        match sock.recv(&mut buf) {
            Ok(len) => {
                let datagram = &buf[..len];
                match Header::decode(datagram) {
                    Ok(h)
                        if h.kind == Kind::Pong
                            && h.stream == stream
                            && h.seq < sent.load(Ordering::Acquire) =>
                    {
                        match (h.receive_stamp(datagram), &mut out.stamps[h.seq as usize]) {
                            (None, _) => out.unstamped += 1,
                            (Some(_), Some(_)) => out.garbage += 1,
                            (Some(r), slot) => {
                                *slot = Some(r);
                                answered += 1;
                            }
                        }
                    }
                    _ => out.garbage += 1,
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) || is_datagram_lost(&e) => {}
            Err(e) => return Err(io_error("receiving an answer")(e)),
        }
        if sender_done.load(Ordering::Acquire) {
            let done = *done_at.get_or_insert_with(now_ns);
            let all = answered + out.unstamped >= sent.load(Ordering::Acquire);
            if all || now_ns() > done + duration_ns(LOSS_TIMEOUT) {
                break;
            }
        }
    }
    out.stamps.truncate(sent.load(Ordering::Acquire) as usize);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// The seed's rules with 5 ms slots, τ = 50 ms and α = 0.005.
    fn seed_rules() -> Estimator {
        Estimator {
            slot_ns: 5 * MS,
            tau_ns: 50 * MS,
            alpha: 0.005,
        }
    }

    /// A probe of one packet in `slot`, sent at the slot's start, with raw OWD `owd`
    /// in ms (`None`: lost).
    fn one(slot: u64, owd_ms: Option<i64>) -> ProbeObs {
        ProbeObs {
            slot,
            packets: vec![PacketObs {
                at_ns: slot * 5 * MS,
                owd_raw_ns: owd_ms.map(|d| d * MS as i64),
            }],
        }
    }

    #[test]
    fn tau_window_reaches_50_ms_either_side_of_a_loss() {
        // A loss in slot 100 (sent at 500 ms). Slot i spans [5i, 5i + 5) ms: it is
        // within 50 ms when 5i - 50 <= 500 <= 5i + 5 + 50, i.e. 89 <= i <= 110.
        // No delay makes a slot lossy: every received OWD is the same (relative 0)
        // and max_owd = 0 gives a threshold of 0, which 0 does not exceed.
        let slots = [80, 88, 89, 95, 100, 105, 110, 111, 130];
        let probes: Vec<ProbeObs> = slots
            .iter()
            .map(|&s| one(s, (s != 100).then_some(7)))
            .collect();
        let e = seed_rules().estimate(&probes);
        let lossy: Vec<u64> = e
            .series
            .iter()
            .filter(|s| s.lossy)
            .map(|s| s.slot)
            .collect();
        assert_eq!(lossy, [89, 95, 100, 105, 110]);
        assert_eq!((e.probed_slots, e.lossy_slots), (9, 5));
        assert_eq!((e.probes, e.lost_probes), (9, 1));
        assert_eq!((e.packets_sent, e.packets_lost), (9, 1));
        assert!((e.loss_frequency - 5.0 / 9.0).abs() < 1e-12);
        assert!((e.probe_loss_rate - 1.0 / 9.0).abs() < 1e-12);
    }

    #[test]
    fn alpha_rule_and_max_owd_update_worked_by_hand() {
        // Raw OWDs with a clock offset of 1000 ms; the smallest is 1000, so the
        // relative ones are raw - 1000. Slots 0..: far apart, so τ (50 ms = 10 slots)
        // marks only slots 40..=60 around the loss in slot 50.
        //   slot 0:  1000 (rel 0)   before any loss: no max_owd, not lossy
        //   slot 20: 1030 (rel 30)  no max_owd yet: not lossy (a big delay alone is not)
        //   slot 49: 1020 (rel 20)  the last received packet before the loss
        //   slot 50: lost           max_owd := 20 ms; lossy by τ
        //   slot 70: 1019 (rel 19)  threshold 20 * 0.995 = 19.9: 19 is not above
        //   slot 80: 1020 (rel 20)  20 > 19.9: lossy (the seed's false positive shape)
        //   slot 90: 1025 (rel 25)  lossy
        //   slot 100: 1000 (rel 0)  not lossy
        //   slot 130: lost          max_owd := 0 (the slot-100 packet's); lossy by τ
        //   slot 150: 1001 (rel 1)  1 > 0 * 0.995: lossy
        let probes = vec![
            one(0, Some(1000)),
            one(20, Some(1030)),
            one(49, Some(1020)),
            one(50, None),
            one(70, Some(1019)),
            one(80, Some(1020)),
            one(90, Some(1025)),
            one(100, Some(1000)),
            one(130, None),
            one(150, Some(1001)),
        ];
        let e = seed_rules().estimate(&probes);
        assert_eq!(e.min_owd_raw_ns, Some(1000 * MS as i64));
        let got: Vec<(u64, Option<u64>, Option<u64>, bool)> = e
            .series
            .iter()
            .map(|s| {
                (
                    s.slot,
                    s.owd_ns.map(|d| d / MS),
                    s.max_owd_ns.map(|d| d / MS),
                    s.lossy,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (0, Some(0), None, false),
                (20, Some(30), None, false),
                (49, Some(20), None, true), // within τ of the slot-50 loss
                (50, None, Some(20), true),
                (70, Some(19), Some(20), false),
                (80, Some(20), Some(20), true),
                (90, Some(25), Some(20), true),
                (100, Some(0), Some(20), false),
                (130, None, Some(0), true),
                (150, Some(1), Some(0), true),
            ]
        );
        assert_eq!((e.lossy_slots, e.probed_slots), (6, 10));
    }

    #[test]
    fn max_owd_is_the_previous_packet_in_send_order_and_a_probe_is_lost_by_any_packet() {
        // One probe of three packets at 0, 10 and 20 µs; the middle one lost. The most
        // recent received packet is the first (rel 4 ms), not the larger third (6 ms).
        let us = 1_000;
        let probes = vec![
            one(0, Some(0)),
            ProbeObs {
                slot: 40,
                packets: vec![
                    PacketObs {
                        at_ns: 200 * MS,
                        owd_raw_ns: Some(4 * MS as i64),
                    },
                    PacketObs {
                        at_ns: 200 * MS + 10 * us,
                        owd_raw_ns: None,
                    },
                    PacketObs {
                        at_ns: 200 * MS + 20 * us,
                        owd_raw_ns: Some(6 * MS as i64),
                    },
                ],
            },
        ];
        let e = seed_rules().estimate(&probes);
        assert_eq!(e.series[1].max_owd_ns, Some(4 * MS));
        assert_eq!(e.series[1].owd_ns, Some(6 * MS));
        assert_eq!((e.packets_sent, e.packets_lost, e.lost_probes), (4, 1, 1));
        assert!((e.probe_loss_rate - 0.5).abs() < 1e-12);
    }

    #[test]
    fn a_first_packet_lost_sets_no_max_owd_and_nothing_received_is_no_delay() {
        let e = seed_rules().estimate(&[one(0, None), one(100, None)]);
        assert_eq!(e.min_owd_raw_ns, None);
        assert!(e
            .series
            .iter()
            .all(|s| s.owd_ns.is_none() && s.max_owd_ns.is_none()));
        assert_eq!((e.lossy_slots, e.loss_frequency), (2, 1.0));
        let empty = seed_rules().estimate(&[]);
        assert_eq!((empty.loss_frequency, empty.probe_loss_rate), (0.0, 0.0));
    }

    #[test]
    fn the_slot_draw_is_repeatable_by_its_seed_and_near_its_probability() {
        let target: SocketAddr = "127.0.0.1:9".parse().expect("address");
        let cfg = BadabingConfig::new(target, 42);
        assert_eq!(cfg.slots(), 12_000);
        let a = cfg.probed_slots();
        assert_eq!(a, cfg.probed_slots());
        assert_ne!(a, BadabingConfig::new(target, 43).probed_slots());
        // 12,000 draws at 0.3: 3,600 expected, standard deviation 50.
        assert!((3_400..=3_800).contains(&a.len()), "{}", a.len());
    }

    #[test]
    fn bad_settings_are_refused() {
        let target: SocketAddr = "127.0.0.1:9".parse().expect("address");
        let ok = BadabingConfig::new(target, 1);
        ok.validate().expect("the seed's settings");
        for bad in [
            BadabingConfig {
                probability: 0.0,
                ..ok.clone()
            },
            BadabingConfig {
                probability: 1.5,
                ..ok.clone()
            },
            BadabingConfig {
                packets: 0,
                ..ok.clone()
            },
            BadabingConfig {
                msg_size: HEADER_LEN + STAMP_LEN - 1,
                ..ok.clone()
            },
            BadabingConfig {
                alpha: 1.0,
                ..ok.clone()
            },
            BadabingConfig {
                slot: Duration::ZERO,
                ..ok.clone()
            },
            BadabingConfig {
                slot: Duration::from_micros(1),
                ..ok.clone()
            },
            BadabingConfig {
                tau: Duration::from_secs(61),
                ..ok.clone()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
