//! Are the counters of different CPUs in step? A burn's wall time is the last thread's
//! end minus the first thread's start, read on different CPUs, so it is only right
//! when their counters agree. The kernel checks this at boot (`tsc: Marking TSC
//! unstable`) but a VM can still be migrated or have its TSC offset per vCPU.
//!
//! The check: two threads pinned to two CPUs play ping-pong through an atomic. The
//! first reads its counter (t0) and asks; the second reads its counter (tb) and
//! answers; the first reads again (t1). If the counters agree, tb lies between t0 and
//! t1, so `tb - (t0 + t1) / 2` estimates the offset to within half the round trip.
//! The round with the shortest round trip gives the estimate.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

use crate::burner::{pin_current_thread, Gate, PinError};
use crate::clock::monotonic_raw_ns;

/// Offsets larger than this are reported as a warning with the clock.
pub const MAX_OFFSET_NS: f64 = 1000.0;
/// Ping-pong rounds per pair of CPUs; the shortest round trip wins.
pub const ROUNDS: u32 = 200;
/// A pair whose partner does not answer within this (its CPU is taken by something
/// else for that long) is given up.
const PAIR_TIMEOUT: Duration = Duration::from_millis(200);

/// A pair of CPUs whose ping-pong could not be completed.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// A thread could not be pinned.
    #[error("CPU {cpu}: {source}")]
    Pin {
        /// The CPU.
        cpu: usize,
        /// What went wrong.
        source: PinError,
    },
    /// The partner did not answer in time.
    #[error("CPUs {0} and {1}: no answer within {PAIR_TIMEOUT:?}")]
    Timeout(usize, usize),
    /// A ping-pong thread panicked.
    #[error("CPUs {0} and {1}: a ping-pong thread panicked")]
    Panicked(usize, usize),
}

/// The offset of one CPU's counter against the reference CPU's, in ticks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairOffset {
    /// The compared CPU.
    pub cpu: usize,
    /// Its counter minus the reference counter, ticks (estimate of the shortest round).
    pub offset_ticks: f64,
    /// The shortest round trip, ticks: the estimate is good to half of it.
    pub round_trip_ticks: u64,
}

/// What the cross-CPU check found, stored with the clock.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CrossCpuCheck {
    /// The CPU every other one was compared with (the first allowed CPU).
    pub reference_cpu: usize,
    /// The CPUs compared with it.
    pub cpus: Vec<usize>,
    /// The CPU with the largest offset.
    pub worst_cpu: usize,
    /// Its counter minus the reference counter, ns (signed).
    pub max_offset_ns: f64,
    /// Half its shortest round trip, ns: how far the estimate can be off.
    pub uncertainty_ns: f64,
}

impl CrossCpuCheck {
    /// Summarises the pairs measured against `reference_cpu`; `None` without pairs.
    pub fn of(reference_cpu: usize, pairs: &[PairOffset], ns_per_tick: f64) -> Option<Self> {
        let worst = pairs
            .iter()
            .max_by(|a, b| a.offset_ticks.abs().total_cmp(&b.offset_ticks.abs()))?;
        Some(CrossCpuCheck {
            reference_cpu,
            cpus: pairs.iter().map(|p| p.cpu).collect(),
            worst_cpu: worst.cpu,
            max_offset_ns: worst.offset_ticks * ns_per_tick,
            uncertainty_ns: worst.round_trip_ticks as f64 * ns_per_tick / 2.0,
        })
    }

    /// A warning when some CPU's counter is more than [`MAX_OFFSET_NS`] off.
    pub fn warning(&self) -> Option<String> {
        (self.max_offset_ns.abs() > MAX_OFFSET_NS).then(|| {
            format!(
                "counters of CPUs {} and {} differ by {:.0} ns (+-{:.0} ns, > {MAX_OFFSET_NS} \
                 ns): spans read on different CPUs are off by that much",
                self.reference_cpu, self.worst_cpu, self.max_offset_ns, self.uncertainty_ns
            )
        })
    }
}

/// Measures the offset of `cpu_b`'s counter (read with `read_b`) against `cpu_a`'s
/// (read with `read_a`) with [`ROUNDS`] ping-pong rounds between two pinned threads.
pub fn pair_offset(
    cpu_a: usize,
    cpu_b: usize,
    read_a: &(dyn Fn() -> u64 + Sync),
    read_b: &(dyn Fn() -> u64 + Sync),
) -> Result<PairOffset, SyncError> {
    // 2k - 1: the initiator asks for round k; 2k: the partner answered it.
    let seq = AtomicU64::new(0);
    let reply = AtomicU64::new(0);
    let abort = AtomicBool::new(false);
    let gate = Gate::new(2);
    let deadline = monotonic_raw_ns() + PAIR_TIMEOUT.as_nanos() as u64;
    let wait_for = |want: u64| -> bool {
        let mut spins = 0u32;
        while seq.load(Ordering::Acquire) != want {
            if abort.load(Ordering::Relaxed) {
                return false;
            }
            spins = spins.wrapping_add(1);
            if spins % 1024 == 0 && monotonic_raw_ns() > deadline {
                abort.store(true, Ordering::Relaxed);
                return false;
            }
            std::hint::spin_loop();
        }
        true
    };
    let pin = |cpu: usize| -> Result<bool, SyncError> {
        let pinned = pin_current_thread(cpu);
        if pinned.is_err() {
            gate.abort();
        }
        let released = gate.wait();
        pinned.map_err(|source| SyncError::Pin { cpu, source })?;
        Ok(released)
    };
    let (a, b) = std::thread::scope(|s| {
        let partner = s.spawn(|| -> Result<(), SyncError> {
            if !pin(cpu_b)? {
                return Ok(());
            }
            for k in 1..=u64::from(ROUNDS) {
                if !wait_for(2 * k - 1) {
                    break;
                }
                reply.store(read_b(), Ordering::Relaxed);
                seq.store(2 * k, Ordering::Release);
            }
            Ok(())
        });
        let initiator = s.spawn(|| -> Result<Option<PairOffset>, SyncError> {
            if !pin(cpu_a)? {
                return Ok(None);
            }
            let mut best: Option<PairOffset> = None;
            for k in 1..=u64::from(ROUNDS) {
                let t0 = read_a();
                seq.store(2 * k - 1, Ordering::Release);
                if !wait_for(2 * k) {
                    return Ok(None);
                }
                let tb = reply.load(Ordering::Relaxed);
                let t1 = read_a();
                let round_trip = t1.wrapping_sub(t0);
                if best.map_or(true, |b| round_trip < b.round_trip_ticks) {
                    let mid = t0 as f64 + round_trip as f64 / 2.0;
                    best = Some(PairOffset {
                        cpu: cpu_b,
                        offset_ticks: tb as f64 - mid,
                        round_trip_ticks: round_trip,
                    });
                }
            }
            Ok(best)
        });
        (initiator.join(), partner.join())
    });
    let panicked = || SyncError::Panicked(cpu_a, cpu_b);
    b.map_err(|_| panicked())??;
    a.map_err(|_| panicked())??
        .ok_or(SyncError::Timeout(cpu_a, cpu_b))
}

/// Compares the counter of every CPU in `cpus` with the first one's, each pair with
/// its own two pinned threads.
pub fn offsets(
    cpus: &[usize],
    read: &(dyn Fn() -> u64 + Sync),
) -> Result<Vec<PairOffset>, SyncError> {
    let Some((&first, rest)) = cpus.split_first() else {
        return Ok(Vec::new());
    };
    rest.iter()
        .map(|&cpu| pair_offset(first, cpu, read, read))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::allowed_cpus;
    use nnb_sys::clock::read_counter;

    fn two_cpus() -> Option<(usize, usize)> {
        match allowed_cpus()[..] {
            [a, b, ..] => Some((a, b)),
            _ => None,
        }
    }

    /// A counter that runs 50_000 ticks ahead on the second CPU is found 50_000 ticks
    /// ahead, within half the round trip, and is warned about.
    #[test]
    fn a_shifted_counter_is_found_and_warned_about() {
        let Some((a, b)) = two_cpus() else {
            eprintln!("skipped: needs two allowed CPUs");
            return;
        };
        let shifted = || read_counter() + 50_000;
        let p = pair_offset(a, b, &read_counter, &shifted).expect("ping-pong");
        assert_eq!(p.cpu, b);
        let slack = p.round_trip_ticks as f64 / 2.0 + 1.0;
        assert!(
            (p.offset_ticks - 50_000.0).abs() <= slack,
            "offset {} ticks, round trip {}",
            p.offset_ticks,
            p.round_trip_ticks
        );
        // At 1 ns per tick the 50 us offset is over the 1 us limit.
        let check = CrossCpuCheck::of(a, &[p], 1.0).expect("one pair");
        assert_eq!((check.reference_cpu, check.worst_cpu), (a, b));
        assert!(check.warning().expect("warned").contains("differ by"));
    }

    /// This machine's counters agree across its CPUs to within 1 us, and the round
    /// trip through a shared cache line is short (under 100 us even on a busy host).
    #[test]
    fn this_machines_counters_agree_across_cpus() {
        let cpus = allowed_cpus();
        if cpus.len() < 2 {
            eprintln!("skipped: needs two allowed CPUs");
            return;
        }
        let pairs = offsets(&cpus, &read_counter).expect("ping-pong");
        assert_eq!(pairs.len(), cpus.len() - 1);
        let clock = crate::clock::Clock::calibrate();
        let ns = |t: f64| clock.ticks_to_ns(1) * t;
        for p in &pairs {
            assert!(ns(p.round_trip_ticks as f64) < 100_000.0, "{p:?}");
            assert!(ns(p.offset_ticks.abs()) < MAX_OFFSET_NS, "{p:?}");
        }
    }

    #[test]
    fn pinning_to_an_absent_cpu_is_an_error() {
        let cpus = allowed_cpus();
        let (first, last) = (cpus[0], cpus[cpus.len() - 1]);
        let absent = last + 1000;
        let err = pair_offset(first, absent, &read_counter, &read_counter).unwrap_err();
        assert!(
            matches!(err, SyncError::Pin { cpu, .. } if cpu == absent),
            "{err}"
        );
        assert!(offsets(&[first], &read_counter)
            .expect("no pairs")
            .is_empty());
    }
}
