//! The clock every measurement reads: the TSC on x86_64, the generic timer
//! (`cntvct_el0`) on aarch64, calibrated against `CLOCK_MONOTONIC_RAW`.
//!
//! Why not `Instant` alone: a counter read costs a few nanoseconds and can be ordered
//! against the surrounding work (`lfence; rdtsc`, and a trailing `lfence` for start
//! stamps), and the repeatability of its calibration can be measured and reported.
//! When the counter cannot be trusted (no invariant TSC, a calibration that scatters)
//! the clock falls back to `clock_gettime` and says so in [`ClockInfo::warning`]: the
//! fallback is recorded, never silent. Whether the CPUs' counters agree is checked at
//! calibration ([`crate::tsc_sync`]); a disagreement above 1 us is a warning.

use std::str::FromStr;
use std::time::Duration;

pub use nnb_sys::clock::monotonic_raw_ns;
use nnb_sys::clock::{read_counter, read_counter_start};
use serde::Serialize;

use crate::placement::allowed_cpus;
use crate::tsc_sync::{self, CrossCpuCheck};

/// Number of calibration windows; the spread of their frequencies is the calibration's
/// repeatability.
const CALIBRATION_WINDOWS: usize = 5;
/// Length of one calibration window (5 x 20 ms = 100 ms of start-up cost).
const CALIBRATION_WINDOW: Duration = Duration::from_millis(20);
/// A counter whose calibration windows disagree by more than this (relative standard
/// deviation, ppm) is not trusted: something rescales or stops it.
const MAX_TRUSTED_SPREAD_PPM: f64 = 1000.0;
/// Clock reads timed to estimate the cost of one read.
const READ_COST_SAMPLES: u32 = 10_000;

/// Which clock the user asked for (`--clock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ClockChoice {
    /// The hardware counter when it can be trusted, else `clock_gettime` with a warning.
    Auto,
    /// The hardware counter (TSC or `cntvct_el0`), even if its invariance is unknown
    /// (recorded as a warning); an error where no such counter exists.
    Tsc,
    /// `clock_gettime(CLOCK_MONOTONIC_RAW)`: slower to read, but needs no calibration.
    Monotonic,
}

impl FromStr for ClockChoice {
    type Err = ClockError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "tsc" => Ok(Self::Tsc),
            "monotonic" => Ok(Self::Monotonic),
            other => Err(ClockError::UnknownChoice(other.to_string())),
        }
    }
}

/// Errors choosing a clock.
#[derive(Debug, thiserror::Error)]
pub enum ClockError {
    /// The `--clock` value is not one of auto, tsc, monotonic.
    #[error("unknown clock '{0}': expected auto, tsc or monotonic")]
    UnknownChoice(String),
    /// `--clock tsc` on an architecture without a readable hardware counter.
    #[error("no hardware cycle counter on this architecture; use --clock monotonic")]
    NoCounter,
}

/// What was learnt about the clock: which source, whether it is invariant, its
/// calibrated frequency, how repeatable that calibration is and whether the CPUs'
/// counters agree. Stored with every result.
#[derive(Debug, Clone, Serialize)]
pub struct ClockInfo {
    /// "tsc", "cntvct" or "clock_gettime".
    pub source: String,
    /// Architecturally invariant counter (cpuid 0x80000007 EDX bit 8 on x86; always on aarch64).
    pub invariant: bool,
    /// `/proc/cpuinfo` flag `constant_tsc`: the TSC ticks at a constant rate.
    pub constant_tsc: bool,
    /// `/proc/cpuinfo` flag `nonstop_tsc`: the TSC keeps ticking in deep C-states.
    pub nonstop_tsc: bool,
    /// Ticks per second, calibrated against `CLOCK_MONOTONIC_RAW` (1e9 for clock_gettime).
    pub freq_hz: f64,
    /// Repeatability of the calibration: the relative sample standard deviation of the
    /// frequencies of its 5 windows, in ppm. It is not the frequency's error: that of
    /// `CLOCK_MONOTONIC_RAW` (tens of ppm is common) is inherited and not seen here.
    /// `None` (null) for `clock_gettime`, which is not calibrated. Files written before
    /// the rename call it `calibration_error_ppm` (0.0 for `clock_gettime`).
    pub calibration_repeatability_ppm: Option<f64>,
    /// Counter offsets between CPUs, measured by ping-pong from the first allowed CPU
    /// to every other ([`crate::tsc_sync`]); `None` for `clock_gettime` (one clock for
    /// all CPUs), with a single CPU, or when the check could not run.
    pub cross_cpu: Option<CrossCpuCheck>,
    /// Mean cost of one clock read in nanoseconds (measured at calibration).
    pub read_cost_ns: f64,
    /// Why the counter is not used, or why its readings may be doubtful.
    pub warning: Option<String>,
}

/// The hardware counter or the OS clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Counter,
    Monotonic,
}

/// A calibrated clock: [`Clock::now`] returns ticks, [`Clock::ticks_to_ns`] converts.
#[derive(Debug, Clone)]
pub struct Clock {
    source: Source,
    ns_per_tick: f64,
    info: ClockInfo,
}

impl Clock {
    /// Calibrates the best trustworthy clock of this machine (`--clock auto`): the
    /// hardware counter when it is invariant and calibrates consistently, else
    /// `clock_gettime` with the reason in [`ClockInfo::warning`].
    pub fn calibrate() -> Clock {
        let facts = CounterFacts::read();
        if !facts.available {
            return Self::monotonic(Some(
                "no hardware counter on this architecture: using clock_gettime".into(),
            ));
        }
        if !facts.trusted() {
            return Self::monotonic(Some(format!(
                "{} is not invariant (invariant={}, constant_tsc={}, nonstop_tsc={}): \
                 using clock_gettime(CLOCK_MONOTONIC_RAW)",
                facts.name, facts.invariant, facts.constant_tsc, facts.nonstop_tsc
            )));
        }
        let clock = Self::counter(&facts, None);
        let spread = clock.info.calibration_repeatability_ppm.unwrap_or(0.0);
        if spread > MAX_TRUSTED_SPREAD_PPM {
            return Self::monotonic(Some(format!(
                "{} calibration scattered by {spread:.0} ppm (> {MAX_TRUSTED_SPREAD_PPM} ppm): \
                 using clock_gettime(CLOCK_MONOTONIC_RAW)",
                facts.name
            )));
        }
        clock
    }

    /// Calibrates the clock the user chose; `--clock tsc` where no counter exists is
    /// an error.
    pub fn with_choice(choice: ClockChoice) -> Result<Clock, ClockError> {
        match choice {
            ClockChoice::Auto => Ok(Self::calibrate()),
            ClockChoice::Monotonic => Ok(Self::monotonic(Some(
                "clock_gettime(CLOCK_MONOTONIC_RAW) forced by --clock monotonic".to_string(),
            ))),
            ClockChoice::Tsc => {
                let facts = CounterFacts::read();
                if !facts.available {
                    return Err(ClockError::NoCounter);
                }
                let warning = (!facts.trusted()).then(|| {
                    format!(
                        "{} forced by --clock tsc although it is not known to be invariant",
                        facts.name
                    )
                });
                Ok(Self::counter(&facts, warning))
            }
        }
    }

    /// The current tick count. Reads are ordered: work before the read completes first.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        match self.source {
            Source::Counter => read_counter(),
            Source::Monotonic => monotonic_raw_ns(),
        }
    }

    /// The tick count that starts a measured span: like [`Clock::now`], and the work
    /// after it also waits for the read (`lfence; rdtsc; lfence` on x86_64), so none
    /// of it runs before the stamp. End stamps use [`Clock::now`].
    #[inline(always)]
    pub fn start_now(&self) -> u64 {
        match self.source {
            Source::Counter => read_counter_start(),
            Source::Monotonic => monotonic_raw_ns(),
        }
    }

    /// Converts a tick difference to nanoseconds.
    #[inline]
    pub fn ticks_to_ns(&self, ticks: u64) -> f64 {
        ticks as f64 * self.ns_per_tick
    }

    /// Converts a duration to ticks, rounded up, e.g. a deadline or a threshold: a
    /// span of that many ticks lasts at least `d` ([`Clock::ticks_to_ns`] of it is
    /// not below `d`), so a run told to last 300 ms never reports 299.9999999 ms.
    pub fn duration_to_ticks(&self, d: Duration) -> u64 {
        let want = d.as_nanos() as f64;
        let ticks = (want / self.ns_per_tick).ceil() as u64;
        // The division may round below the true quotient: one tick more then.
        ticks + u64::from(self.ticks_to_ns(ticks) < want)
    }

    /// What is known about this clock, for the results.
    pub fn info(&self) -> ClockInfo {
        self.info.clone()
    }

    fn monotonic(warning: Option<String>) -> Clock {
        let facts = CounterFacts::read();
        let mut clock = Clock {
            source: Source::Monotonic,
            ns_per_tick: 1.0,
            info: ClockInfo {
                source: "clock_gettime".to_string(),
                invariant: facts.invariant,
                constant_tsc: facts.constant_tsc,
                nonstop_tsc: facts.nonstop_tsc,
                freq_hz: 1e9,
                calibration_repeatability_ppm: None,
                cross_cpu: None,
                read_cost_ns: 0.0,
                warning,
            },
        };
        if let Some(w) = &clock.info.warning {
            tracing::debug!("clock: {w}");
        }
        clock.info.read_cost_ns = clock.measure_read_cost();
        clock
    }

    fn counter(facts: &CounterFacts, warning: Option<String>) -> Clock {
        let freqs: Vec<f64> = (0..CALIBRATION_WINDOWS)
            .map(|_| calibration_window())
            .collect();
        let mean = freqs.iter().sum::<f64>() / freqs.len() as f64;
        let var = freqs.iter().map(|f| (f - mean).powi(2)).sum::<f64>() / (freqs.len() - 1) as f64;
        let spread_ppm = var.sqrt() / mean * 1e6;
        tracing::debug!(?freqs, mean, spread_ppm, "counter calibration");
        if let Some(w) = &warning {
            tracing::debug!("clock: {w}");
        }
        let mut clock = Clock {
            source: Source::Counter,
            ns_per_tick: 1e9 / mean,
            info: ClockInfo {
                source: facts.name.to_string(),
                invariant: facts.invariant,
                constant_tsc: facts.constant_tsc,
                nonstop_tsc: facts.nonstop_tsc,
                freq_hz: mean,
                calibration_repeatability_ppm: Some(spread_ppm),
                cross_cpu: None,
                read_cost_ns: 0.0,
                warning,
            },
        };
        clock.info.read_cost_ns = clock.measure_read_cost();
        clock.check_cross_cpu();
        clock
    }

    /// Runs the cross-CPU counter check over the allowed CPUs, records it and adds a
    /// warning when the counters disagree by more than [`tsc_sync::MAX_OFFSET_NS`].
    fn check_cross_cpu(&mut self) {
        let cpus = allowed_cpus();
        let pairs = match tsc_sync::offsets(&cpus, &|| self.now()) {
            Ok(pairs) => pairs,
            Err(e) => {
                tracing::debug!("cross-CPU counter check not done: {e}");
                return;
            }
        };
        let check = CrossCpuCheck::of(cpus[0], &pairs, self.ns_per_tick);
        if let Some(w) = check.as_ref().and_then(CrossCpuCheck::warning) {
            tracing::warn!("clock: {w}");
            self.info.warning = Some(match self.info.warning.take() {
                Some(earlier) => format!("{earlier}; {w}"),
                None => w,
            });
        }
        self.info.cross_cpu = check;
    }

    /// Mean nanoseconds per [`Clock::now`] call over a batch of back-to-back reads.
    fn measure_read_cost(&self) -> f64 {
        let start = self.now();
        let mut last = start;
        for _ in 0..READ_COST_SAMPLES {
            last = std::hint::black_box(self.now());
        }
        self.ticks_to_ns(last.saturating_sub(start)) / f64::from(READ_COST_SAMPLES)
    }
}

/// One calibration window: counter ticks per second of `CLOCK_MONOTONIC_RAW`.
fn calibration_window() -> f64 {
    let (c0, t0) = paired_read();
    let target = t0 + CALIBRATION_WINDOW.as_nanos() as u64;
    while monotonic_raw_ns() < target {
        std::hint::spin_loop();
    }
    let (c1, t1) = paired_read();
    (c1.wrapping_sub(c0)) as f64 / ((t1 - t0) as f64 / 1e9)
}

/// A counter reading and a monotonic reading taken as close together as possible:
/// the monotonic read is bracketed by two counter reads, the tightest of several tries
/// wins, and the counter value is the bracket's midpoint.
fn paired_read() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..16 {
        let a = read_counter();
        let t = monotonic_raw_ns();
        let b = read_counter();
        let width = b.wrapping_sub(a);
        if width < best.0 {
            best = (width, a + width / 2, t);
        }
    }
    (best.1, best.2)
}

/// The facts that decide whether the hardware counter is trusted.
struct CounterFacts {
    name: &'static str,
    available: bool,
    invariant: bool,
    constant_tsc: bool,
    nonstop_tsc: bool,
}

impl CounterFacts {
    #[cfg(target_arch = "x86_64")]
    fn read() -> CounterFacts {
        let flags = cpuinfo_flags();
        let has = |f: &str| flags.iter().any(|x| x == f);
        CounterFacts {
            name: "tsc",
            available: true,
            invariant: invariant_tsc_cpuid(),
            constant_tsc: has("constant_tsc"),
            nonstop_tsc: has("nonstop_tsc"),
        }
    }

    #[cfg(target_arch = "aarch64")]
    fn read() -> CounterFacts {
        // The generic timer runs at a fixed frequency (cntfrq_el0) by architecture.
        CounterFacts {
            name: "cntvct",
            available: true,
            invariant: true,
            constant_tsc: false,
            nonstop_tsc: false,
        }
    }

    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fn read() -> CounterFacts {
        CounterFacts {
            name: "none",
            available: false,
            invariant: false,
            constant_tsc: false,
            nonstop_tsc: false,
        }
    }

    /// The counter's rate is constant and it keeps running: invariant by cpuid, or both
    /// kernel flags (hypervisors often hide the cpuid bit but the kernel still knows).
    fn trusted(&self) -> bool {
        self.available && (self.invariant || (self.constant_tsc && self.nonstop_tsc))
    }
}

/// cpuid 0x80000007 EDX bit 8: invariant TSC (the extended leaf is checked first).
#[cfg(target_arch = "x86_64")]
fn invariant_tsc_cpuid() -> bool {
    use nnb_sys::clock::cpuid;
    cpuid(0x8000_0000).eax >= 0x8000_0007 && cpuid(0x8000_0007).edx & (1 << 8) != 0
}

/// The `flags` line of the first CPU in `/proc/cpuinfo` (empty when unreadable).
#[cfg(target_arch = "x86_64")]
fn cpuinfo_flags() -> Vec<String> {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("flags"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.split_whitespace().map(str::to_string).collect())
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_choice_parses_and_rejects() {
        assert_eq!("auto".parse::<ClockChoice>().ok(), Some(ClockChoice::Auto));
        assert_eq!("tsc".parse::<ClockChoice>().ok(), Some(ClockChoice::Tsc));
        assert_eq!(
            "monotonic".parse::<ClockChoice>().ok(),
            Some(ClockChoice::Monotonic)
        );
        let err = "hpet".parse::<ClockChoice>().unwrap_err();
        assert!(err.to_string().contains("hpet"));
    }

    /// The calibrated clock agrees with CLOCK_MONOTONIC_RAW over a 50 ms span to within
    /// 0.5% (generous: a loaded 2-core VM can delay either read), and reports a
    /// frequency and the calibration's repeatability.
    #[test]
    fn calibrated_clock_tracks_monotonic_raw() {
        let clock = Clock::calibrate();
        let info = clock.info();
        assert!(info.freq_hz > 1e6, "frequency {}", info.freq_hz);
        if info.source != "clock_gettime" {
            let spread = info
                .calibration_repeatability_ppm
                .expect("a calibrated counter");
            assert!(spread >= 0.0);
            // With two CPUs or more, their counters were compared and found in step.
            if allowed_cpus().len() > 1 {
                let check = info.cross_cpu.as_ref().expect("cross-CPU check");
                assert_eq!(check.cpus.len(), allowed_cpus().len() - 1);
                assert!(check.max_offset_ns.abs() < 1000.0, "{check:?}");
            }
        }
        assert!(info.read_cost_ns > 0.0 && info.read_cost_ns < 10_000.0);
        let t0 = monotonic_raw_ns();
        let c0 = clock.now();
        std::thread::sleep(Duration::from_millis(50));
        let c1 = clock.now();
        let t1 = monotonic_raw_ns();
        let by_clock = clock.ticks_to_ns(c1 - c0);
        let by_os = (t1 - t0) as f64;
        assert!(
            (by_clock - by_os).abs() / by_os < 0.005,
            "clock {by_clock} ns vs monotonic {by_os} ns"
        );
    }

    #[test]
    fn forced_monotonic_is_recorded() {
        let clock = Clock::with_choice(ClockChoice::Monotonic).unwrap();
        let info = clock.info();
        assert_eq!(info.source, "clock_gettime");
        // Not calibrated: no repeatability (null), not a perfect 0.0.
        assert_eq!(info.calibration_repeatability_ppm, None);
        assert!(info.cross_cpu.is_none());
        let json = serde_json::to_value(&info).unwrap();
        assert!(json["calibration_repeatability_ppm"].is_null());
        assert!(json.get("calibration_error_ppm").is_none());
        assert!(info.warning.unwrap().contains("forced"));
        assert_eq!(clock.duration_to_ticks(Duration::from_micros(5)), 5000);
    }

    /// Whatever the tick length, a duration's ticks last at least the duration and
    /// less than one tick more.
    #[test]
    fn duration_ticks_cover_the_duration() {
        for ns_per_tick in [1.0, 0.3333333333333333, 0.41666666, 0.2857142857142857, 2.5] {
            let mut clock = Clock::monotonic(None);
            clock.ns_per_tick = ns_per_tick;
            for ns in [
                1u64,
                7,
                1_000,
                5_000,
                299_999_999,
                300_000_000,
                10_000_000_007,
            ] {
                let ticks = clock.duration_to_ticks(Duration::from_nanos(ns));
                let lasts = clock.ticks_to_ns(ticks);
                assert!(lasts >= ns as f64, "{ns} ns at {ns_per_tick}: {lasts}");
                assert!(
                    lasts < ns as f64 + ns_per_tick,
                    "{ns} ns at {ns_per_tick}: {lasts}"
                );
            }
        }
    }
}
