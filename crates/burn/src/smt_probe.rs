//! Empirical SMT sibling detection: which logical CPUs really share a physical core,
//! whatever sysfs says.
//!
//! A hypervisor can report every vCPU as its own core while pairs of them are the
//! two hyperthreads of one physical core (seed 002 showed this on EC2 with `taskset`
//! and gzip: two processes on "adjacent" vCPUs ran a third slower than on
//! non-adjacent ones). The probe repeats that experiment precisely:
//!
//! 1. Calibrate a fixed amount of work (`spin`: eight independent integer multiply
//!    chains, so the core's multiplier port is saturated and a sibling competing for
//!    it slows down sharply) to take about `ProbeConfig::spin` on one CPU.
//! 2. For each candidate pair (a, b), start one pinned thread on each. A trial is
//!    [`RUNS_PER_TRIAL`] run slots; in each slot the spin runs on a alone, then on b
//!    alone, then on both at once (the threads meet at a barrier before each phase).
//!    Each phase keeps its fastest run of the trial. Measuring alone and concurrent
//!    side by side, within milliseconds, cancels slow drifts (frequency, a busy
//!    neighbor) that a baseline taken once up front would turn into false verdicts.
//! 3. A trial's ratio is alone / concurrent time, averaged over the two threads. It
//!    votes "siblings" when the ratio is below `threshold` (default 0.9: alone < 0.9 x
//!    concurrent); a majority of votes makes the pair siblings.
//! 4. Sibling groups are the connected groups of sibling pairs; every probed pair on
//!    which probe and sysfs disagree is reported.
//!
//! Times are each thread's own CPU time (`CLOCK_THREAD_CPUTIME_ID`), not wall time: a
//! thread preempted by another process (this machine is shared) is not charged for
//! the time it did not run, so preemption cannot fake a slowdown. A sibling's
//! contention does slow the thread while it runs, so that is what the ratio sees.
//!
//! Cost: every pair of probed CPUs is tested (a physical core's siblings can be any
//! CPUs, and a lying hypervisor gives no hint which), so the probe is O(n^2) in the
//! number of CPUs, bounded per pair by `trials x RUNS_PER_TRIAL x 3 x spin` (3 x 4 x 3
//! x 250 us = 9 ms by default). [`estimate_duration`] says beforehand how long that
//! takes: a fraction of a second on 2 CPUs, about 45 s on 96 (probe a subset of the
//! CPUs to go faster).

use std::collections::BTreeSet;
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use nnb_format::stats::median;
use serde::Serialize;

use crate::burner::{pin_current_thread, PinError};
use crate::topology::Topology;

/// Default time of one timed run of the spin.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(250);
/// Timed runs per trial; the trial keeps the fastest. Noise (an interrupt, a
/// preemption's cache damage) only ever adds time, so the fastest of a few short runs
/// is a far steadier figure than one long run, alone and concurrent alike; SMT
/// contention slows every run, so it survives the minimum.
pub const RUNS_PER_TRIAL: usize = 4;
/// Default number of trials per CPU and per pair.
pub const DEFAULT_TRIALS: usize = 3;
/// Default threshold: siblings when alone < 0.9 x concurrent.
pub const DEFAULT_THRESHOLD: f64 = 0.9;
/// Estimated fixed cost of one pinned thread's start, pin check and join, used by
/// [`estimate_duration`].
const THREAD_OVERHEAD: Duration = Duration::from_micros(200);
/// Estimated cost of one barrier crossing (a futex wake-up on an idle machine; far
/// more on a busy one, where the report's measured duration tells).
const BARRIER_OVERHEAD: Duration = Duration::from_micros(20);

/// What to probe and how hard.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeConfig {
    /// CPUs to probe (every pair of them is tested); at least two, online and allowed.
    pub cpus: Vec<usize>,
    /// Timed runs per CPU alone and per pair; a majority of pair trials decides.
    pub trials: usize,
    /// Duration of one timed run of the spin (its work is calibrated to this).
    pub spin: Duration,
    /// A trial votes "siblings" when alone / concurrent is below this.
    pub threshold: f64,
}

impl ProbeConfig {
    /// Default settings over the given CPUs.
    pub fn new(cpus: Vec<usize>) -> ProbeConfig {
        ProbeConfig {
            cpus,
            trials: DEFAULT_TRIALS,
            spin: DEFAULT_SPIN,
            threshold: DEFAULT_THRESHOLD,
        }
    }
}

/// Why the probe could not run.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// Fewer than two CPUs: there is no pair to test.
    #[error("the SMT probe needs at least two CPUs, got {0}")]
    TooFewCpus(usize),
    /// A probed CPU is absent or offline in the topology.
    #[error("CPU {0} is absent or offline and cannot be probed")]
    UnusableCpu(usize),
    /// A CPU named twice.
    #[error("CPU {0} is named twice in the probe's CPU list")]
    DuplicateCpu(usize),
    /// Zero trials asked for.
    #[error("the probe needs at least one trial")]
    ZeroTrials,
    /// A threshold outside (0, 1].
    #[error("the sibling threshold must be in (0, 1], got {0}")]
    BadThreshold(f64),
    /// A zero-length spin.
    #[error("the probe's spin time must be positive")]
    ZeroSpin,
    /// A probe thread could not be pinned.
    #[error("probe thread: {0}")]
    Pin(#[from] PinError),
    /// A probe thread panicked.
    #[error("a probe thread on CPU {0} panicked")]
    ThreadPanicked(usize),
}

impl ProbeError {
    /// Whether the error is the user's to fix (the CPUs, trials, threshold or spin
    /// asked for), not a failure while probing.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            ProbeError::TooFewCpus(_)
                | ProbeError::UnusableCpu(_)
                | ProbeError::DuplicateCpu(_)
                | ProbeError::ZeroTrials
                | ProbeError::BadThreshold(_)
                | ProbeError::ZeroSpin
        )
    }
}

/// One CPU's time for the spin alone (the fastest over all its pairs' trials).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AloneTime {
    /// The CPU.
    pub cpu: usize,
    /// Fastest alone run, in nanoseconds of thread CPU time.
    pub ns: f64,
}

/// The verdict on one candidate pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairResult {
    /// Lower CPU of the pair.
    pub a: usize,
    /// Higher CPU of the pair.
    pub b: usize,
    /// Per trial: alone / concurrent time, averaged over both threads. About 1.0
    /// for independent cores, clearly below for SMT siblings.
    pub ratios: Vec<f64>,
    /// Trials whose ratio was below the threshold.
    pub votes: usize,
    /// Whether a majority of trials voted "siblings".
    pub siblings: bool,
    /// Whether sysfs says the two share a core.
    pub sysfs_siblings: bool,
}

/// A pair on which the probe and sysfs disagree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Disagreement {
    /// Lower CPU of the pair.
    pub a: usize,
    /// Higher CPU of the pair.
    pub b: usize,
    /// The probe's verdict.
    pub probe_siblings: bool,
    /// sysfs' verdict.
    pub sysfs_siblings: bool,
    /// Median ratio of the pair's trials.
    pub median_ratio: f64,
}

/// Everything the probe measured and concluded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeReport {
    /// The settings used.
    pub config: ProbeConfig,
    /// Iterations of the spin in one timed run, as calibrated.
    pub spin_iterations: u64,
    /// Each CPU's fastest alone run.
    pub alone: Vec<AloneTime>,
    /// Every pair tested, in (a, b) order.
    pub pairs: Vec<PairResult>,
    /// Probed CPUs grouped by detected physical core (singletons included), each
    /// sorted, groups ordered by their lowest CPU.
    pub sibling_groups: Vec<Vec<usize>>,
    /// Pairs where the probe and sysfs disagree; empty when they agree.
    pub disagreements: Vec<Disagreement>,
    /// What [`estimate_duration`] predicted, in seconds.
    pub estimated_s: f64,
    /// Wall time the probe took, in seconds.
    pub duration_s: f64,
}

/// Predicts how long [`probe`] takes on `n_cpus` CPUs with `trials` trials of
/// [`RUNS_PER_TRIAL`] runs of `spin`: every pair (n(n-1)/2 of them) costs three runs
/// per run slot (each CPU alone, then both), plus thread start-up, barriers and
/// calibration. An estimate for an idle machine: a loaded one takes longer.
pub fn estimate_duration(n_cpus: usize, trials: usize, spin: Duration) -> Duration {
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let pairs = n_cpus * n_cpus.saturating_sub(1) / 2;
    let phases = pairs * trials * RUNS_PER_TRIAL * 3;
    spin * count(phases + CALIBRATION_RUNS)
        + BARRIER_OVERHEAD * count(phases)
        + THREAD_OVERHEAD * count(2 * pairs + 1)
}

/// Runs of `spin` length the calibration costs, about (a search growing the work
/// eightfold until a trial of [`RUNS_PER_TRIAL`] runs takes an eighth of `spin`,
/// then one at full length to confirm).
const CALIBRATION_RUNS: usize = 2 * RUNS_PER_TRIAL;

/// Runs the probe on this machine, comparing with `topo` (which must be this
/// machine's topology for the comparison to mean anything).
pub fn probe(topo: &Topology, config: &ProbeConfig) -> Result<ProbeReport, ProbeError> {
    check_config(topo, config)?;
    let started = Instant::now();
    let estimated = estimate_duration(config.cpus.len(), config.trials, config.spin);
    let iterations = calibrate(config.cpus[0], config.spin)?;
    tracing::debug!(iterations, "probe spin calibrated");

    let mut alone: Vec<AloneTime> = config
        .cpus
        .iter()
        .map(|&cpu| AloneTime {
            cpu,
            ns: f64::INFINITY,
        })
        .collect();
    let mut samples = Vec::new();
    for (i, &a) in config.cpus.iter().enumerate() {
        for (j, &b) in config.cpus.iter().enumerate().skip(i + 1) {
            // Phases of every run slot: a alone, b alone, both together.
            let t = measure(&[a, b], &[&[0], &[1], &[0, 1]], config.trials, iterations)?;
            let ratios: Vec<f64> = (0..config.trials)
                .map(|k| (t[0][0][k] / t[0][2][k] + t[1][1][k] / t[1][2][k]) / 2.0)
                .collect();
            tracing::debug!(a, b, ?ratios, "probe pair");
            for (slot, thread, phase) in [(i, 0, 0), (j, 1, 1)] {
                let best = t[thread][phase]
                    .iter()
                    .copied()
                    .fold(f64::INFINITY, f64::min);
                alone[slot].ns = alone[slot].ns.min(best);
            }
            samples.push((a.min(b), a.max(b), ratios));
        }
    }
    let mut report = analyze(topo, config, samples);
    report.spin_iterations = iterations;
    report.alone = alone;
    report.estimated_s = estimated.as_secs_f64();
    report.duration_s = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Checks the settings and the CPUs against the topology.
fn check_config(topo: &Topology, config: &ProbeConfig) -> Result<(), ProbeError> {
    if config.cpus.len() < 2 {
        return Err(ProbeError::TooFewCpus(config.cpus.len()));
    }
    if config.trials == 0 {
        return Err(ProbeError::ZeroTrials);
    }
    if !(config.threshold > 0.0 && config.threshold <= 1.0) {
        return Err(ProbeError::BadThreshold(config.threshold));
    }
    if config.spin.is_zero() {
        return Err(ProbeError::ZeroSpin);
    }
    let mut seen = BTreeSet::new();
    for &cpu in &config.cpus {
        if !topo.cpu(cpu).is_some_and(|c| c.online) {
            return Err(ProbeError::UnusableCpu(cpu));
        }
        if !seen.insert(cpu) {
            return Err(ProbeError::DuplicateCpu(cpu));
        }
    }
    Ok(())
}

/// Turns per-pair ratios into verdicts, sibling groups and disagreements with sysfs.
fn analyze(
    topo: &Topology,
    config: &ProbeConfig,
    samples: Vec<(usize, usize, Vec<f64>)>,
) -> ProbeReport {
    let sysfs = |a: usize, b: usize| topo.cpu(a).is_some_and(|c| c.siblings.contains(&b));
    let pairs: Vec<PairResult> = samples
        .into_iter()
        .map(|(a, b, ratios)| {
            let votes = ratios.iter().filter(|&&r| r < config.threshold).count();
            PairResult {
                a,
                b,
                siblings: 2 * votes > ratios.len(),
                votes,
                ratios,
                sysfs_siblings: sysfs(a, b),
            }
        })
        .collect();
    let disagreements = pairs
        .iter()
        .filter(|p| p.siblings != p.sysfs_siblings)
        .map(|p| Disagreement {
            a: p.a,
            b: p.b,
            probe_siblings: p.siblings,
            sysfs_siblings: p.sysfs_siblings,
            median_ratio: median(&p.ratios),
        })
        .collect();
    ProbeReport {
        config: config.clone(),
        spin_iterations: 0,
        alone: Vec::new(),
        sibling_groups: groups(&config.cpus, &pairs),
        pairs,
        disagreements,
        estimated_s: 0.0,
        duration_s: 0.0,
    }
}

/// Connected groups of CPUs linked by sibling pairs (union-find), singletons kept.
fn groups(cpus: &[usize], pairs: &[PairResult]) -> Vec<Vec<usize>> {
    let mut parent: Vec<usize> = (0..cpus.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let index = |cpu: usize| cpus.iter().position(|&c| c == cpu);
    for p in pairs.iter().filter(|p| p.siblings) {
        if let (Some(a), Some(b)) = (index(p.a), index(p.b)) {
            let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
            parent[ra] = rb;
        }
    }
    let mut by_root = std::collections::BTreeMap::<usize, Vec<usize>>::new();
    for (i, &cpu) in cpus.iter().enumerate() {
        let r = root(&mut parent, i);
        by_root.entry(r).or_default().push(cpu);
    }
    let mut out: Vec<Vec<usize>> = by_root
        .into_values()
        .map(|mut g| {
            g.sort_unstable();
            g
        })
        .collect();
    out.sort();
    out
}

/// Finds the spin iterations that take about `spin` of CPU time on `cpu`.
fn calibrate(cpu: usize, spin: Duration) -> Result<u64, ProbeError> {
    let target = spin.as_nanos() as f64;
    let mut iterations: u64 = 1024;
    for _ in 0..40 {
        let ns = measure(&[cpu], &[&[0]], 1, iterations)?[0][0][0];
        if ns >= target / 8.0 {
            let scaled = iterations as f64 * target / ns.max(1.0);
            return Ok((scaled as u64).max(1));
        }
        iterations = iterations.saturating_mul(8);
    }
    Ok(iterations)
}

/// Runs the spin on pinned threads, one per CPU of `cpus`, in phases: in each of
/// [`RUNS_PER_TRIAL`] run slots of each trial, every phase names the threads that
/// spin together while the others wait (all meet at a barrier before each phase).
/// Returns `result[thread][phase][trial]`: the fastest run's CPU time in nanoseconds
/// (infinite where the thread does not take part in the phase).
fn measure(
    cpus: &[usize],
    phases: &[&[usize]],
    trials: usize,
    iterations: u64,
) -> Result<Vec<Vec<Vec<f64>>>, ProbeError> {
    let barrier = Barrier::new(cpus.len());
    std::thread::scope(|scope| {
        let handles: Vec<_> = cpus
            .iter()
            .enumerate()
            .map(|(me, &cpu)| {
                let barrier = &barrier;
                let handle = scope.spawn(move || -> Result<Vec<Vec<f64>>, PinError> {
                    let pinned = pin_current_thread(cpu);
                    // Every thread reaches every barrier, pinned or not, so that a
                    // failure in one cannot leave the others waiting forever.
                    let mut per_trial = Vec::with_capacity(trials);
                    for _ in 0..trials {
                        let mut best = vec![f64::INFINITY; phases.len()];
                        for _ in 0..RUNS_PER_TRIAL {
                            for (phase, active) in phases.iter().enumerate() {
                                barrier.wait();
                                if active.contains(&me) {
                                    let start = nnb_sys::clock::thread_cpu_ns();
                                    black_box(spin(black_box(iterations)));
                                    let ns = nnb_sys::clock::thread_cpu_ns().saturating_sub(start)
                                        as f64;
                                    best[phase] = best[phase].min(ns);
                                }
                            }
                        }
                        per_trial.push(best);
                    }
                    let by_phase = (0..phases.len())
                        .map(|phase| per_trial.iter().map(|t| t[phase]).collect())
                        .collect();
                    pinned.map(|()| by_phase)
                });
                (cpu, handle)
            })
            .collect();
        handles
            .into_iter()
            .map(|(cpu, h)| match h.join() {
                Ok(result) => result.map_err(ProbeError::from),
                Err(_) => Err(ProbeError::ThreadPanicked(cpu)),
            })
            .collect()
    })
}

/// The probe's fixed work: eight independent 64-bit multiply-xorshift chains, four steps
/// each between two passes through `black_box`. Multiplies issue on one or two ports
/// per core; 32 of them per pass, eight in flight at once, keep those ports saturated
/// (the work is throughput-bound, not latency-bound), so an SMT sibling doing the
/// same finds them taken and both slow down sharply. `black_box` keeps the compiler
/// from folding the chains; the result depends on every step and is returned.
#[inline(never)]
fn spin(iterations: u64) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut x = [1u64, 2, 3, 4, 5, 6, 7, 8];
    for _ in 0..iterations {
        for _ in 0..4 {
            for v in &mut x {
                // Mixing multiply and xor-shift keeps the compiler from folding the
                // four steps into one multiply (it would fold `v * K + c`).
                *v = v.wrapping_mul(K) ^ (*v >> 29);
            }
        }
        x = black_box(x);
    }
    x.iter().fold(0, |acc, v| acc ^ v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn fixture(name: &str) -> Topology {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(name);
        Topology::read(&root).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Ratios as a lying hypervisor's host would produce them: (n, n+4) share a core.
    fn paired_samples(cpus: &[usize]) -> Vec<(usize, usize, Vec<f64>)> {
        let mut out = Vec::new();
        for (i, &a) in cpus.iter().enumerate() {
            for &b in &cpus[i + 1..] {
                let ratio = if b == a + 4 { 0.62 } else { 0.99 };
                out.push((a, b, vec![ratio, 0.97, ratio]));
            }
        }
        out
    }

    #[test]
    fn lying_hypervisor_pairs_show_up_as_disagreements() {
        let topo = fixture("lying-hypervisor");
        let cpus: Vec<usize> = (0..8).collect();
        let config = ProbeConfig::new(cpus.clone());
        let report = analyze(&topo, &config, paired_samples(&cpus));
        assert_eq!(report.pairs.len(), 28);
        assert_eq!(
            report.sibling_groups,
            vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]
        );
        let found: Vec<(usize, usize)> = report.disagreements.iter().map(|d| (d.a, d.b)).collect();
        assert_eq!(found, vec![(0, 4), (1, 5), (2, 6), (3, 7)]);
        assert!(report
            .disagreements
            .iter()
            .all(|d| d.probe_siblings && !d.sysfs_siblings && d.median_ratio == 0.62));
    }

    #[test]
    fn honest_guest_agrees_with_sysfs() {
        let topo = fixture("m5.2xlarge");
        let cpus: Vec<usize> = (0..8).collect();
        let report = analyze(
            &topo,
            &ProbeConfig::new(cpus.clone()),
            paired_samples(&cpus),
        );
        assert!(
            report.disagreements.is_empty(),
            "{:?}",
            report.disagreements
        );
        let pair = report.pairs.iter().find(|p| (p.a, p.b) == (1, 5));
        assert!(pair.is_some_and(|p| p.siblings && p.sysfs_siblings && p.votes == 2));
    }

    #[test]
    fn a_minority_of_slow_trials_is_not_siblings() {
        let topo = fixture("m5.2xlarge");
        let config = ProbeConfig::new(vec![0, 4]);
        let report = analyze(&topo, &config, vec![(0, 4, vec![0.5, 0.95, 0.99])]);
        assert!(!report.pairs[0].siblings);
        assert_eq!(report.pairs[0].votes, 1);
        assert_eq!(report.sibling_groups, vec![vec![0], vec![4]]);
        assert_eq!(
            report.disagreements.len(),
            1,
            "sysfs says 0 and 4 share a core"
        );
        assert!(!report.disagreements[0].probe_siblings);
    }

    #[test]
    fn bad_configs_are_rejected_before_measuring() {
        let topo = fixture("offline-cpu");
        let check = |cpus: Vec<usize>, f: &dyn Fn(&mut ProbeConfig)| {
            let mut c = ProbeConfig::new(cpus);
            f(&mut c);
            check_config(&topo, &c).map_err(|e| e.to_string())
        };
        assert!(check(vec![0, 1], &|_| {}).is_ok());
        assert!(check(vec![0], &|_| {}).is_err_and(|e| e.contains("at least two")));
        assert!(check(vec![0, 3], &|_| {}).is_err_and(|e| e.contains("CPU 3")));
        assert!(check(vec![0, 9], &|_| {}).is_err_and(|e| e.contains("CPU 9")));
        assert!(check(vec![1, 1], &|_| {}).is_err_and(|e| e.contains("twice")));
        assert!(check(vec![0, 1], &|c| c.trials = 0).is_err());
        assert!(check(vec![0, 1], &|c| c.threshold = 1.5).is_err());
        assert!(check(vec![0, 1], &|c| c.spin = Duration::ZERO).is_err());
    }

    #[test]
    fn estimate_grows_quadratically_and_stays_small_on_two_cpus() {
        let two = estimate_duration(2, DEFAULT_TRIALS, DEFAULT_SPIN);
        assert!(two < Duration::from_secs(1), "{two:?}");
        let n96 = estimate_duration(96, DEFAULT_TRIALS, DEFAULT_SPIN);
        // 4560 pairs x 3 trials x 4 runs x 3 phases of 250 us: 41 s of spinning.
        assert!(
            n96 > Duration::from_secs(41) && n96 < Duration::from_secs(50),
            "{n96:?}"
        );
        assert!(estimate_duration(192, 3, DEFAULT_SPIN) > n96 * 3);
    }
}
