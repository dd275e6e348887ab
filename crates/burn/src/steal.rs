//! Time stolen from a running thread, seen from inside it: seed 003's CPUTest and
//! sysjitter's method. A pinned thread reads the clock in a tight loop; an iteration
//! normally takes tens of nanoseconds, so any gap between two reads above a threshold
//! is time the thread did not run (an interrupt, the kernel, or the hypervisor running
//! someone else). Gaps go into an HDR histogram; the share of time actually run is
//! 1 - (sum of gaps) / span, reported beside the /proc/stat steal counter (which only
//! counts what the hypervisor admits to).
//!
//! A gap is either the guest's own doing (its kernel ran another thread on this CPU)
//! or not (an interrupt, or the hypervisor running another VM). After each gap the
//! thread reads its involuntary context-switch count (`getrusage`): a gap during
//! which it rose is in-guest preemption, which no hypervisor stole; the rest is
//! interrupts and steal. Only the second part says anything about neighbors.
//!
//! A CPU quota (CFS bandwidth control: v1 `cpu.cfs_quota_us`, v2 `cpu.max`) also
//! switches the thread out when its cgroup has used its quota, and the CPU then sits
//! idle: nothing else ran. Those gaps are in-guest too, so the scan also reads the
//! throttled time of this process's CPU cgroup (`cpu.stat`: v1 `throttled_time` in
//! ns, v2 `throttled_usec`) before and after, and reports it apart.
//!
//! Default threshold: 5 us. sysjitter takes the threshold as an argument (typically
//! hundreds of ns on a quiet host). 5 us is far above a loop iteration on any clock
//! (TSC read ~10-40 ns, clock_gettime under a hypervisor < 1 us), so every gap counted
//! is a real interruption, and low enough to catch host interrupts and short VM exits.
//!
//! Wang & Ng's CPUTest (seed 003, §IV, l.310-314) takes [`CPUTEST_THRESHOLD`], 1 ms:
//! "If one loop iteration takes more than 1 ms, we treat this time gap as a schedule
//! off period", and the CPU share is the share of wall time outside those periods.
//! A gap counts when it is strictly longer than the threshold (their "more than"),
//! whatever the threshold; `ran_share` is 1 - (sum of those gaps) / span, so with
//! their threshold it is their CPU share exactly. A threshold far below the
//! scheduler's time slice would count interrupts and sub-millisecond preemptions as
//! "scheduled off" too, which their share does not. The number of gaps longer than
//! 1 ms is reported in any case. With a trace (`cputrace`), the scan also keeps the
//! timestamp trace of their Fig. 1.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::burner::{pin_current_thread, Gate, PinError};
use crate::clock::Clock;
use crate::cputrace::{CpuTrace, TraceRecorder, BIN, MAX_GAPS, MAX_TRACE_DURATION};
use crate::env::{read_proc_stat_steal, user_hz, StealTicks};

/// Default gap threshold (see the module documentation).
pub const DEFAULT_THRESHOLD: Duration = Duration::from_micros(5);
/// CPUTest's threshold: a gap longer than this is a "schedule off period" (seed 003,
/// l.311-313); `nnb steal --cputest` and the pair suite's steal jobs use it.
pub const CPUTEST_THRESHOLD: Duration = Duration::from_millis(1);
/// Percentiles reported for the gap distribution.
pub const PERCENTILES: [f64; 6] = [50.0, 90.0, 99.0, 99.9, 99.99, 100.0];

/// Errors of a steal measurement.
#[derive(Debug, thiserror::Error)]
pub enum StealError {
    /// No CPUs to measure.
    #[error("no CPUs to measure")]
    NoCpus,
    /// A measuring thread could not be pinned.
    #[error("CPU {cpu}: {source}")]
    Pin {
        /// The CPU.
        cpu: usize,
        /// What went wrong.
        source: PinError,
    },
    /// A traced scan longer than the trace's bound.
    #[error("a traced steal scan of these CPUs lasts at most {max:?} (10 min over all CPUs), not {asked:?}")]
    TraceTooLong {
        /// The bound, [`MAX_TRACE_DURATION`] over the CPUs.
        max: Duration,
        /// The duration asked for.
        asked: Duration,
    },
    /// The histogram could not be built (a bound that hdrhistogram rejects).
    #[error("histogram: {0}")]
    Histogram(String),
    /// A measuring thread could not be started or panicked.
    #[error("measuring thread for CPU {0} failed")]
    Thread(usize),
}

/// The raw result of one gap scan: iterations and the gaps longer than the threshold.
#[derive(Debug, Clone)]
pub struct Scan {
    /// Clock reads done.
    pub iterations: u64,
    /// Ticks at the first and last read.
    pub start_ticks: u64,
    /// See `start_ticks`.
    pub end_ticks: u64,
    /// Gaps longer than the threshold, in nanoseconds (1 ns .. 10 s, 3 significant
    /// digits).
    pub gaps: Histogram<u64>,
    /// Sum of those gaps, in ticks.
    pub gap_ticks: u64,
    /// Gaps longer than [`CPUTEST_THRESHOLD`].
    pub scheduled_off: u64,
    /// Gaps during which the guest kernel switched the thread out (its involuntary
    /// context switches rose): another thread of this VM ran, no hypervisor stole.
    pub preempted: u64,
    /// Their sum, in ticks (part of `gap_ticks`).
    pub preempted_ticks: u64,
    /// The timestamp trace, when asked for.
    pub trace: Option<TraceRecorder>,
}

/// An empty gap histogram: 1 ns to 10 s, 3 significant digits.
pub fn gap_histogram() -> Result<Histogram<u64>, StealError> {
    Histogram::new_with_bounds(1, 10_000_000_000, 3)
        .map_err(|e| StealError::Histogram(e.to_string()))
}

/// Loop iterations between two looks at the stop flag: a relaxed load every 65,536
/// clock reads (a millisecond or so) costs nothing measurable and ends a stopped
/// scan promptly.
const STOP_CHECK: u64 = 1 << 16;

/// Reads the clock in a tight loop for `span_ticks` or `max_iterations` (or until
/// `stop` is raised), recording every gap longer than `threshold_ticks`, and with
/// `trace` the timestamp trace, keeping at most that many gaps. The loop body is one clock read, a subtraction and
/// three compares; gaps (rare) cost a histogram update and a `getrusage`, which
/// tells in-guest preemption from the rest (see the module documentation), and a
/// traced scan closes a count bin once a millisecond. The reads happen in the loop,
/// as run time, well below any threshold (under a microsecond).
pub fn scan(
    clock: &Clock,
    span_ticks: u64,
    max_iterations: u64,
    threshold_ticks: u64,
    trace: Option<usize>,
    stop: &AtomicBool,
) -> Result<Scan, StealError> {
    let start = clock.now();
    let trace =
        trace.map(|max_gaps| TraceRecorder::new(start, clock.duration_to_ticks(BIN), max_gaps));
    let switches = || nnb_sys::process::thread_involuntary_switches().unwrap_or(0);
    scan_reads(
        || clock.now(),
        start,
        ScanLimits {
            span_ticks,
            max_iterations,
            threshold_ticks,
            off_ticks: clock.duration_to_ticks(CPUTEST_THRESHOLD),
        },
        trace,
        switches,
        |d| clock.ticks_to_ns(d).max(1.0) as u64,
        stop,
    )
}

/// Where a scan stops and what it counts, in ticks.
#[derive(Debug, Clone, Copy)]
struct ScanLimits {
    /// Ticks after the first read at which the loop ends.
    span_ticks: u64,
    /// Reads after which the loop ends.
    max_iterations: u64,
    /// A gap longer than this is counted.
    threshold_ticks: u64,
    /// A gap longer than this is a CPUTest "schedule off period".
    off_ticks: u64,
}

/// The loop of [`scan`], over any source of reads (`read`, after a first read at
/// `start`) and of involuntary switch counts (`switches`), so a test can feed it a
/// hand-made series; `to_ns` converts ticks for the histogram.
fn scan_reads(
    mut read: impl FnMut() -> u64,
    start: u64,
    limits: ScanLimits,
    mut trace: Option<TraceRecorder>,
    mut switches: impl FnMut() -> u64,
    to_ns: impl Fn(u64) -> u64,
    stop: &AtomicBool,
) -> Result<Scan, StealError> {
    let mut gaps = gap_histogram()?;
    let end_tick = start.saturating_add(limits.span_ticks);
    let mut next_edge = trace.as_ref().map_or(u64::MAX, TraceRecorder::next_edge);
    let mut switched = switches();
    let (mut preempted, mut preempted_ticks) = (0u64, 0u64);
    let (mut prev, mut iterations, mut gap_ticks, mut scheduled_off) = (start, 0u64, 0u64, 0u64);
    while prev < end_tick && iterations < limits.max_iterations {
        if iterations % STOP_CHECK == 0 && stop.load(Ordering::Relaxed) {
            break;
        }
        let now = read();
        if now >= next_edge {
            if let Some(t) = trace.as_mut() {
                t.cross(now, iterations);
                next_edge = t.next_edge();
            }
        }
        let d = now.wrapping_sub(prev);
        if d > limits.threshold_ticks {
            gaps.saturating_record(to_ns(d));
            gap_ticks += d;
            scheduled_off += u64::from(d > limits.off_ticks);
            if let Some(t) = trace.as_mut() {
                t.gap(prev, d);
            }
            let after = switches();
            if after > switched {
                preempted += 1;
                preempted_ticks += d;
            }
            switched = after;
        }
        prev = now;
        iterations += 1;
    }
    if let Some(t) = trace.as_mut() {
        t.finish(iterations);
    }
    Ok(Scan {
        iterations,
        start_ticks: start,
        end_ticks: prev,
        gaps,
        gap_ticks,
        scheduled_off,
        preempted,
        preempted_ticks,
        trace,
    })
}

/// What happened on one measured CPU.
#[derive(Debug, Clone, Serialize)]
pub struct CpuSteal {
    /// The CPU.
    pub cpu: usize,
    /// Measured span, ns.
    pub span_ns: f64,
    /// Share of the span the thread ran: 1 - (gaps longer than the threshold) /
    /// span; with [`CPUTEST_THRESHOLD`], Wang & Ng's CPU share.
    pub ran_share: f64,
    /// Gaps longer than the threshold.
    pub gaps: u64,
    /// Their sum, ns.
    pub gap_total_ns: f64,
    /// Gaps during which this VM's own kernel ran another thread on the CPU
    /// (in-guest preemption, not steal).
    pub preempted_gaps: u64,
    /// Their sum, ns (part of `gap_total_ns`); `gap_total_ns - preempted_ns` is
    /// what interrupts and the hypervisor took.
    pub preempted_ns: f64,
    /// Gaps longer than 1 ms (CPUTest's "schedule off periods"; only those longer
    /// than the threshold too are seen).
    pub scheduled_off_gaps: u64,
    /// Longest gap, ns (0 without gaps).
    pub longest_gap_ns: u64,
    /// `(percentile, ns)` of the gaps, for [`PERCENTILES`]; empty without gaps.
    pub percentiles: Vec<(f64, u64)>,
    /// Loop iterations (clock reads).
    pub iterations: u64,
    /// Mean loop iteration, ns (span / iterations).
    pub iteration_ns: f64,
    /// /proc/stat steal ticks of this CPU during the measurement.
    pub proc_steal_ticks: Option<u64>,
    /// CPUTest's timestamp trace (seed 003, Fig. 1), when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<CpuTrace>,
}

/// The result of `nnb steal`.
#[derive(Debug, Clone, Serialize)]
pub struct StealReport {
    /// Gap threshold, ns.
    pub threshold_ns: u64,
    /// Requested duration, ns.
    pub duration_ns: u64,
    /// One entry per measured CPU.
    pub cpus: Vec<CpuSteal>,
    /// /proc/stat steal ticks of all CPUs during the measurement.
    pub proc_steal_ticks_all: Option<u64>,
    /// Ticks per second of the /proc/stat counters.
    pub user_hz: u64,
    /// Time this process's CPU cgroup was throttled by its CPU quota during the
    /// measurement, ns (`cpu.stat` `throttled_time`/`throttled_usec`, summed over its
    /// CPUs by the kernel); `None` where the cgroup has no such counter (the root
    /// cgroup, no cpu controller). Part of the in-guest time of the CPUs it held
    /// back: they sat idle, no other thread ran.
    pub throttled_ns: Option<u64>,
}

/// `cpu.stat` of this process's CPU cgroup: from `/proc/self/cgroup` (the v1 line
/// naming the `cpu` controller, else v2's `0::` line) and the matching cgroup mount
/// in `/proc/self/mountinfo`.
fn own_cpu_stat() -> Option<PathBuf> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    cpu_stat_path(&cgroup, &mountinfo)
}

/// See [`own_cpu_stat`]: the path from the two files' texts.
fn cpu_stat_path(cgroup: &str, mountinfo: &str) -> Option<PathBuf> {
    let entries: Vec<(&str, &str)> = cgroup
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
            Some((controllers, path))
        })
        .collect();
    let v1 = entries
        .iter()
        .find(|(c, _)| c.split(',').any(|c| c == "cpu"));
    let (v2, path) = match v1 {
        Some((_, path)) => (false, *path),
        None => (true, entries.iter().find(|(c, _)| c.is_empty())?.1),
    };
    for line in mountinfo.lines() {
        // ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let left: Vec<&str> = left.split_whitespace().collect();
        let right: Vec<&str> = right.split_whitespace().collect();
        let (Some(root), Some(point), Some(&fstype)) = (left.get(3), left.get(4), right.first())
        else {
            continue;
        };
        let ours = if v2 {
            fstype == "cgroup2"
        } else {
            fstype == "cgroup"
                && right
                    .get(2)
                    .is_some_and(|o| o.split(',').any(|o| o == "cpu"))
        };
        if !ours {
            continue;
        }
        // The path is relative to the hierarchy's root; the mount shows `root` of it.
        let rel = path
            .strip_prefix(root.trim_end_matches('/'))
            .unwrap_or(path);
        return Some(
            Path::new(point)
                .join(rel.trim_start_matches('/'))
                .join("cpu.stat"),
        );
    }
    None
}

/// Throttled time in a `cpu.stat` text, ns: v1 `throttled_time` (ns) or v2
/// `throttled_usec`.
fn parse_throttled_ns(cpu_stat: &str) -> Option<u64> {
    cpu_stat.lines().find_map(|l| {
        let (key, value) = l.split_once(' ')?;
        let value: u64 = value.trim().parse().ok()?;
        match key {
            "throttled_time" => Some(value),
            "throttled_usec" => value.checked_mul(1000),
            _ => None,
        }
    })
}

/// The throttled time now of the cgroup whose `cpu.stat` is at `path`, ns.
fn read_throttled_ns(path: Option<&Path>) -> Option<u64> {
    parse_throttled_ns(&std::fs::read_to_string(path?).ok()?)
}

/// Refuses a traced scan of `cpus` CPUs whose duration times its CPUs is above the
/// trace's bound ([`MAX_TRACE_DURATION`]).
pub fn check_trace_duration(duration: Duration, cpus: usize) -> Result<(), StealError> {
    let max = MAX_TRACE_DURATION / u32::try_from(cpus.max(1)).unwrap_or(u32::MAX);
    if duration > max {
        return Err(StealError::TraceTooLong {
            max,
            asked: duration,
        });
    }
    Ok(())
}

/// Runs a pinned gap scan on each of `cpus` for `duration`, all starting together,
/// each keeping its timestamp trace with `trace`; raising `stop` ends every scan
/// early (a stopped agent job), with what it saw.
pub fn measure(
    clock: &Clock,
    cpus: &[usize],
    duration: Duration,
    threshold: Duration,
    trace: bool,
    stop: &AtomicBool,
) -> Result<StealReport, StealError> {
    if cpus.is_empty() {
        return Err(StealError::NoCpus);
    }
    if trace {
        check_trace_duration(duration, cpus.len())?;
    }
    let trace = trace.then(|| MAX_GAPS / cpus.len());
    let threshold_ticks = clock.duration_to_ticks(threshold).max(1);
    let gate = Gate::new(cpus.len());
    let cpu_stat = own_cpu_stat();
    let throttled_before = read_throttled_ns(cpu_stat.as_deref());
    let before = read_proc_stat_steal();
    let scans: Vec<Result<Scan, StealError>> = std::thread::scope(|s| {
        let handles: Vec<_> = cpus
            .iter()
            .map(|&cpu| {
                let gate = &gate;
                s.spawn(move || {
                    let pinned = pin_current_thread(cpu);
                    if pinned.is_err() {
                        gate.abort();
                    }
                    let released = gate.wait();
                    pinned.map_err(|source| StealError::Pin { cpu, source })?;
                    let span = if released {
                        clock.duration_to_ticks(duration)
                    } else {
                        0
                    };
                    scan(clock, span, u64::MAX, threshold_ticks, trace, stop)
                })
            })
            .collect();
        handles
            .into_iter()
            .zip(cpus)
            .map(|(h, &cpu)| h.join().unwrap_or(Err(StealError::Thread(cpu))))
            .collect()
    });
    let after = read_proc_stat_steal();
    let throttled_after = read_throttled_ns(cpu_stat.as_deref());
    let delta = |f: &dyn Fn(&StealTicks) -> Option<u64>| -> Option<u64> {
        Some(f(after.as_ref()?)?.saturating_sub(f(before.as_ref()?)?))
    };
    let mut out = Vec::with_capacity(cpus.len());
    for (scan, &cpu) in scans.into_iter().zip(cpus) {
        let mut c = summarize(clock, &scan?, cpu);
        c.proc_steal_ticks = delta(&|s| s.cpu(cpu));
        out.push(c);
    }
    Ok(StealReport {
        threshold_ns: threshold.as_nanos() as u64,
        duration_ns: duration.as_nanos() as u64,
        cpus: out,
        proc_steal_ticks_all: delta(&|s| Some(s.all)),
        user_hz: user_hz(),
        throttled_ns: throttled_before
            .zip(throttled_after)
            .map(|(b, a)| a.saturating_sub(b)),
    })
}

/// Turns a scan into the per-CPU report.
pub fn summarize(clock: &Clock, scan: &Scan, cpu: usize) -> CpuSteal {
    let span_ns = clock.ticks_to_ns(scan.end_ticks.saturating_sub(scan.start_ticks));
    let gap_total_ns = clock.ticks_to_ns(scan.gap_ticks);
    let gaps = scan.gaps.len();
    CpuSteal {
        cpu,
        span_ns,
        ran_share: if span_ns > 0.0 {
            (1.0 - gap_total_ns / span_ns).max(0.0)
        } else {
            0.0
        },
        gaps,
        gap_total_ns,
        preempted_gaps: scan.preempted,
        preempted_ns: clock.ticks_to_ns(scan.preempted_ticks),
        scheduled_off_gaps: scan.scheduled_off,
        longest_gap_ns: if gaps > 0 { scan.gaps.max() } else { 0 },
        percentiles: if gaps > 0 {
            PERCENTILES
                .iter()
                .map(|&p| (p, scan.gaps.value_at_percentile(p)))
                .collect()
        } else {
            Vec::new()
        },
        iterations: scan.iterations,
        iteration_ns: if scan.iterations > 0 {
            span_ns / scan.iterations as f64
        } else {
            0.0
        },
        proc_steal_ticks: None,
        trace: scan.trace.as_ref().map(|t| t.to_trace(clock)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::allowed_cpus;

    /// The CPU cgroup's `cpu.stat` is found from /proc/self/cgroup and mountinfo: v1
    /// through the mount whose super options name `cpu` (here `cpu,cpuacct`), v2
    /// through the cgroup2 mount, with a mount root (a container's) taken off the
    /// path; and both counters read in ns.
    #[test]
    fn the_cpu_cgroup_and_its_throttled_time_are_read() {
        let cgroup_v1 = "4:memory:/a\n2:cpu,cpuacct:/quota/job\n0::/\n";
        let mountinfo_v1 = "\
            30 25 0:26 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n\
            31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:9 - cgroup cgroup rw,cpu,cpuacct\n\
            32 25 0:28 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cpu_stat_path(cgroup_v1, mountinfo_v1),
            Some(PathBuf::from(
                "/sys/fs/cgroup/cpu,cpuacct/quota/job/cpu.stat"
            ))
        );
        let cgroup_v2 = "0::/kubepods/pod1/c1\n";
        let mountinfo_v2 = "40 30 0:30 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cpu_stat_path(cgroup_v2, mountinfo_v2),
            Some(PathBuf::from("/sys/fs/cgroup/c1/cpu.stat"))
        );
        assert_eq!(
            cpu_stat_path(cgroup_v2, mountinfo_v1.lines().next().unwrap()),
            None
        );
        let v1 = "nr_periods 20\nnr_throttled 19\nthrottled_time 1401234567\n";
        assert_eq!(parse_throttled_ns(v1), Some(1_401_234_567));
        let v2 = "usage_usec 600000\nnr_throttled 19\nthrottled_usec 1400000\n";
        assert_eq!(parse_throttled_ns(v2), Some(1_400_000_000));
        assert_eq!(parse_throttled_ns("usage_usec 5\n"), None);
    }

    /// A hand-made scan: 10 ms span on a monotonic clock (1 tick = 1 ns) with gaps of
    /// 10 us, 20 us and 2 ms: ran share 1 - 2.03/10 = 0.797, one "scheduled off" gap.
    #[test]
    fn summary_of_a_known_scan() {
        let clock = Clock::with_choice(crate::clock::ClockChoice::Monotonic).unwrap();
        let mut gaps = gap_histogram().unwrap();
        for g in [10_000, 20_000, 2_000_000] {
            gaps.record(g).unwrap();
        }
        let scan = Scan {
            iterations: 1000,
            start_ticks: 5_000_000,
            end_ticks: 15_000_000,
            gaps,
            gap_ticks: 2_030_000,
            scheduled_off: 1,
            preempted: 1,
            preempted_ticks: 2_000_000,
            trace: None,
        };
        let c = summarize(&clock, &scan, 3);
        assert_eq!(c.cpu, 3);
        assert_eq!(c.gaps, 3);
        assert!((c.ran_share - 0.797).abs() < 1e-9);
        assert!((c.iteration_ns - 10_000.0).abs() < 1e-9);
        // 3 significant digits: values come back within 0.1%.
        assert!(c.longest_gap_ns.abs_diff(2_000_000) <= 2_000);
        assert_eq!(c.percentiles.len(), PERCENTILES.len());
        assert!(c.percentiles[0].1.abs_diff(20_000) <= 20);
        assert_eq!(c.scheduled_off_gaps, 1);
        assert_eq!(c.preempted_gaps, 1);
        assert!((c.preempted_ns - 2e6).abs() < 1e-6);
    }

    /// A hand-made scan (1 tick = 1 ns, a read every 1 us): 2.5 ms of reads, a gap
    /// of 3 ms + 1 ns, 1.5 ms of reads, a gap of exactly 1 ms, a gap of 0.4 ms, 1.6 ms
    /// of reads. With CPUTest's 1 ms threshold only the first gap is a schedule off
    /// period (the seed's "more than 1 ms": the gap of exactly 1 ms is not), kept
    /// exactly in the trace; the reads are counted per ms, the bins under the gap
    /// empty, summing to the iterations. With the 5 us hiccup threshold all three
    /// gaps count.
    #[test]
    fn cputest_share_and_trace_of_a_hand_made_scan() {
        let mut reads: Vec<u64> = (1..=2500).map(|k| 1000 * k).collect();
        reads.extend((0..1500).map(|j| 5_500_001 + 1000 * j));
        reads.push(7_999_001);
        reads.extend((0..1601).map(|m| 8_399_001 + 1000 * m));
        assert_eq!(*reads.last().unwrap(), 9_999_001);
        let run = |threshold_ticks: u64| {
            let mut it = reads.iter().copied();
            let s = scan_reads(
                || it.next().expect("a read"),
                0,
                ScanLimits {
                    span_ticks: u64::MAX,
                    max_iterations: reads.len() as u64,
                    threshold_ticks,
                    off_ticks: 1_000_000,
                },
                Some(TraceRecorder::new(0, 1_000_000, MAX_GAPS)),
                || 0,
                |d| d,
                &AtomicBool::new(false),
            )
            .unwrap();
            let clock = Clock::with_choice(crate::clock::ClockChoice::Monotonic).unwrap();
            summarize(&clock, &s, 1)
        };
        let c = run(1_000_000);
        assert_eq!(c.iterations, 5602);
        assert_eq!((c.gaps, c.scheduled_off_gaps), (1, 1));
        assert!((c.ran_share - (1.0 - 3_000_001.0 / 9_999_001.0)).abs() < 1e-12);
        let t = c.trace.expect("a trace");
        assert_eq!(t.gaps, vec![[2_500_000, 3_000_001]]);
        assert_eq!(t.gaps_left_out, 0);
        assert_eq!(
            t.counts_per_ms,
            vec![999, 1000, 501, 0, 0, 500, 1000, 1, 601, 1000]
        );
        assert_eq!(
            t.counts_per_ms.iter().map(|&n| u64::from(n)).sum::<u64>(),
            5602
        );

        let hiccups = run(5_000);
        assert_eq!((hiccups.gaps, hiccups.scheduled_off_gaps), (3, 1));
        assert!((hiccups.ran_share - (1.0 - 4_400_001.0 / 9_999_001.0)).abs() < 1e-12);
        let t = hiccups.trace.expect("a trace");
        assert_eq!(
            t.gaps,
            vec![
                [2_500_000, 3_000_001],
                [6_999_001, 1_000_000],
                [7_999_001, 400_000]
            ]
        );
    }

    /// A traced scan is bounded in time: longer than the trace's bound is refused.
    #[test]
    fn a_traced_scan_is_bounded() {
        let clock = Clock::calibrate();
        let cpu = allowed_cpus()[0];
        let err = measure(
            &clock,
            &[cpu],
            MAX_TRACE_DURATION + Duration::from_millis(1),
            CPUTEST_THRESHOLD,
            true,
            &AtomicBool::new(false),
        )
        .unwrap_err();
        assert!(matches!(err, StealError::TraceTooLong { .. }), "{err}");
        // Over two CPUs the bound is half as long each: the traces' size is what is
        // bounded, and each CPU keeps its own.
        let half = MAX_TRACE_DURATION / 2 + Duration::from_millis(1);
        assert!(matches!(
            check_trace_duration(half, 2),
            Err(StealError::TraceTooLong { max, .. }) if max == MAX_TRACE_DURATION / 2
        ));
        assert!(check_trace_duration(MAX_TRACE_DURATION / 2, 2).is_ok());
    }

    /// With a threshold of one tick every iteration is a gap: the loop sees them all
    /// and stops at its iteration limit.
    #[test]
    fn threshold_of_one_tick_records_every_read() {
        let clock = Clock::calibrate();
        let s = scan(&clock, u64::MAX, 100, 1, None, &AtomicBool::new(false)).unwrap();
        assert_eq!(s.iterations, 100);
        // Consecutive reads of a ticking clock differ by at least one tick nearly always;
        // a repeated value (a coarse clock) is the only way to miss one.
        assert!(s.gaps.len() >= 90, "{}", s.gaps.len());
        let c = summarize(&clock, &s, 0);
        assert!(c.ran_share < 0.5);
        assert_eq!(c.percentiles.len(), PERCENTILES.len());
    }

    #[test]
    fn measures_every_allowed_cpu() {
        let clock = Clock::calibrate();
        let cpus = allowed_cpus();
        let never = AtomicBool::new(false);
        let r = measure(
            &clock,
            &cpus,
            Duration::from_millis(50),
            DEFAULT_THRESHOLD,
            false,
            &never,
        )
        .unwrap();
        assert_eq!(r.cpus.len(), cpus.len());
        for c in &r.cpus {
            // The loop runs until the TSC passes start + 50 ms in ticks; converting
            // those ticks back to ns may round a hair below 50 ms.
            assert!(c.span_ns >= 50e6 * 0.999, "{}", c.span_ns);
            assert!(c.ran_share > 0.0 && c.ran_share <= 1.0);
            assert!(c.iteration_ns > 0.0 && c.iteration_ns < 5_000.0);
            assert!(c.proc_steal_ticks.is_some());
        }
        assert!(r.proc_steal_ticks_all.is_some());
        assert!(matches!(
            measure(
                &clock,
                &[],
                Duration::from_millis(1),
                DEFAULT_THRESHOLD,
                false,
                &never
            ),
            Err(StealError::NoCpus)
        ));
    }

    /// A stopped scan ends at once with what it saw, not at the end of its duration
    /// (reliability review M1: a stopped agent job must not keep a CPU busy).
    #[test]
    fn a_stopped_scan_ends_early() {
        let clock = Clock::calibrate();
        let stop = AtomicBool::new(false);
        let cpu = allowed_cpus()[0];
        let started = std::time::Instant::now();
        let r = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                stop.store(true, Ordering::Relaxed);
            });
            measure(
                &clock,
                &[cpu],
                Duration::from_secs(60),
                DEFAULT_THRESHOLD,
                false,
                &stop,
            )
        })
        .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        assert!(r.cpus[0].span_ns < 10e9, "{}", r.cpus[0].span_ns);
        assert!(
            r.cpus[0].span_ns >= 50e6,
            "it ran until the stop: {}",
            r.cpus[0].span_ns
        );
    }
}
