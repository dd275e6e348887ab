//! The effective frequency of some CPUs over an interval, where the machine lets it
//! be read. A burn that ran 5% slower on a CPU clocked 5% lower is not a neighbor's
//! doing: the frequency qualifies the number.
//!
//! Three sources, best first (the first one that can be read at the start is used to
//! the end):
//! - **APERF/MPERF** (MSRs `0xE8`/`0xE7` through `/dev/cpu/N/msr`: needs root and the
//!   `msr` module, and a hypervisor that exposes them, which KVM and Xen guests mostly
//!   do not). MPERF counts at the reference rate (the TSC's: the nominal frequency on
//!   Intel, P0 on AMD) and APERF at the actual rate, both only while the CPU runs, so
//!   `base * ΔAPERF / ΔMPERF` is the mean frequency the CPUs ran at while busy.
//! - **`scaling_cur_freq`** of cpufreq, read at the start and the end: the kernel's
//!   estimate at those two moments, not a mean over the interval.
//! - **`/proc/cpuinfo` `cpu MHz`**, read at the start and the end. In most VMs this is
//!   a constant (the TSC's nominal rate) that shows no throttling at all.
//!
//! Paths are taken under a root directory so that tests can give a fixture tree.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// IA32_MPERF: counts at the reference rate while the CPU is in C0.
pub const MSR_MPERF: u64 = 0xE7;
/// IA32_APERF: counts actual core cycles while the CPU is in C0.
pub const MSR_APERF: u64 = 0xE8;

/// Where an [`EffectiveFreq`] was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FreqSource {
    /// `base * ΔAPERF / ΔMPERF` over the interval: the mean busy frequency.
    AperfMperf,
    /// cpufreq's `scaling_cur_freq`, the mean of the readings at the start and the end.
    ScalingCurFreq,
    /// `/proc/cpuinfo`'s `cpu MHz`, the mean of the readings at the start and the end.
    Cpuinfo,
}

impl FreqSource {
    /// The source's name in results: `aperf-mperf`, `scaling-cur-freq`, `cpuinfo`.
    pub const fn name(self) -> &'static str {
        match self {
            FreqSource::AperfMperf => "aperf-mperf",
            FreqSource::ScalingCurFreq => "scaling-cur-freq",
            FreqSource::Cpuinfo => "cpuinfo",
        }
    }
}

/// The effective frequency of some CPUs over an interval, and how it was read.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EffectiveFreq {
    /// MHz.
    pub mhz: f64,
    /// How it was read.
    pub source: FreqSource,
}

/// The mean busy frequency of some CPUs in MHz, from each CPU's `(aperf, mperf)` at
/// the start and the end (in the same CPU order): `base_hz * ΣΔaperf / ΣΔmperf`, so a
/// CPU that was busier weighs more. A counter that wrapped past 2^64 still counts its
/// increase. `None` when MPERF did not move (the CPUs never left idle) or the base is
/// not a positive rate.
pub fn aperf_mperf_mhz(base_hz: f64, start: &[(u64, u64)], end: &[(u64, u64)]) -> Option<f64> {
    let (d_aperf, d_mperf) = start.iter().zip(end).fold((0u64, 0u64), |(a, m), (s, e)| {
        (
            a.saturating_add(e.0.wrapping_sub(s.0)),
            m.saturating_add(e.1.wrapping_sub(s.1)),
        )
    });
    (d_mperf > 0 && base_hz.is_finite() && base_hz > 0.0)
        .then(|| base_hz * d_aperf as f64 / d_mperf as f64 / 1e6)
}

/// A frequency reading begun at the start of an interval: [`FreqWatch::finish`] at its
/// end gives the effective frequency over it.
#[derive(Debug)]
pub struct FreqWatch {
    root: PathBuf,
    cpus: Vec<usize>,
    start: Start,
}

/// What was read at the start.
#[derive(Debug)]
enum Start {
    /// `(aperf, mperf)` of each CPU, in the order of `cpus`.
    Counters(Vec<(u64, u64)>),
    /// MHz readings of one sampled source.
    Sampled(FreqSource, Vec<f64>),
    /// No source could be read.
    Nothing,
}

impl FreqWatch {
    /// Starts watching `cpus`, with `/dev`, `/sys` and `/proc` under `root` (`/` on a
    /// real machine).
    pub fn start(root: &Path, cpus: &[usize]) -> FreqWatch {
        let start = if cpus.is_empty() {
            Start::Nothing
        } else if let Some(counters) = read_counters(root, cpus) {
            Start::Counters(counters)
        } else {
            [FreqSource::ScalingCurFreq, FreqSource::Cpuinfo]
                .into_iter()
                .find_map(|s| Some(Start::Sampled(s, sample(root, s, cpus)?)))
                .unwrap_or(Start::Nothing)
        };
        FreqWatch {
            root: root.to_path_buf(),
            cpus: cpus.to_vec(),
            start,
        }
    }

    /// The source this watch reads, if any could be read at the start.
    pub fn source(&self) -> Option<FreqSource> {
        match &self.start {
            Start::Counters(_) => Some(FreqSource::AperfMperf),
            Start::Sampled(s, _) => Some(*s),
            Start::Nothing => None,
        }
    }

    /// The effective frequency since the start. `base_hz` gives MPERF's rate (the
    /// TSC's frequency); it is asked only for APERF/MPERF. `None` when nothing could be
    /// read.
    pub fn finish(self, base_hz: impl FnOnce() -> Option<f64>) -> Option<EffectiveFreq> {
        match self.start {
            Start::Counters(before) => {
                let after = read_counters(&self.root, &self.cpus)?;
                Some(EffectiveFreq {
                    mhz: aperf_mperf_mhz(base_hz()?, &before, &after)?,
                    source: FreqSource::AperfMperf,
                })
            }
            Start::Sampled(source, mut readings) => {
                readings.extend(sample(&self.root, source, &self.cpus).unwrap_or_default());
                Some(EffectiveFreq {
                    mhz: readings.iter().sum::<f64>() / readings.len() as f64,
                    source,
                })
            }
            Start::Nothing => None,
        }
    }
}

/// `(aperf, mperf)` of every CPU of `cpus`; `None` if any of them cannot be read.
fn read_counters(root: &Path, cpus: &[usize]) -> Option<Vec<(u64, u64)>> {
    cpus.iter()
        .map(|cpu| {
            let msr = File::open(root.join(format!("dev/cpu/{cpu}/msr"))).ok()?;
            let read = |register: u64| {
                let mut bytes = [0u8; 8];
                msr.read_exact_at(&mut bytes, register).ok()?;
                Some(u64::from_le_bytes(bytes))
            };
            Some((read(MSR_APERF)?, read(MSR_MPERF)?))
        })
        .collect()
}

/// MHz readings of `source` for those of `cpus` it has; `None` when it has none.
fn sample(root: &Path, source: FreqSource, cpus: &[usize]) -> Option<Vec<f64>> {
    let readings: Vec<f64> = match source {
        FreqSource::ScalingCurFreq => cpus
            .iter()
            .filter_map(|cpu| {
                let path = format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq");
                let khz: f64 = std::fs::read_to_string(root.join(path))
                    .ok()?
                    .trim()
                    .parse()
                    .ok()?;
                Some(khz / 1e3)
            })
            .collect(),
        FreqSource::Cpuinfo => cpuinfo_mhz(
            &std::fs::read_to_string(root.join("proc/cpuinfo")).ok()?,
            cpus,
        ),
        FreqSource::AperfMperf => Vec::new(),
    };
    let readings: Vec<f64> = readings
        .into_iter()
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    (!readings.is_empty()).then_some(readings)
}

/// The `cpu MHz` of each `processor` of `/proc/cpuinfo` that is one of `cpus`.
pub fn cpuinfo_mhz(text: &str, cpus: &[usize]) -> Vec<f64> {
    let mut processor = None;
    let mut out = Vec::new();
    for (key, value) in text.lines().filter_map(|l| l.split_once(':')) {
        match key.trim() {
            "processor" => processor = value.trim().parse::<usize>().ok(),
            "cpu MHz" if processor.is_some_and(|p| cpus.contains(&p)) => {
                out.extend(value.trim().parse::<f64>().ok());
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `text` at `rel` under `root`, creating its directories.
    fn put(root: &Path, rel: &str, bytes: &[u8]) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    /// A 2.0 GHz base. cpu0: APERF +2.0e9 over MPERF +1.0e9; cpu2: APERF wraps past
    /// 2^64 (2^64 - 5e8 -> 5e8, +1.0e9) over MPERF +1.0e9. Summed: 3.0e9 / 2.0e9 of
    /// 2.0 GHz = 3000 MHz. Alone, cpu2 ran at the base, 2000 MHz. An idle CPU (MPERF
    /// still) has no frequency, nor has a base of 0.
    #[test]
    fn aperf_over_mperf_scales_the_base() {
        let start = [
            (5_000_000_000, 7_000_000_000),
            (u64::MAX - 499_999_999, 100),
        ];
        let end = [(7_000_000_000, 8_000_000_000), (500_000_000, 1_000_000_100)];
        let mhz = aperf_mperf_mhz(2.0e9, &start, &end).unwrap();
        assert!((mhz - 3000.0).abs() < 1e-9, "{mhz}");
        assert_eq!(aperf_mperf_mhz(2.0e9, &start[1..], &end[1..]), Some(2000.0));
        assert_eq!(aperf_mperf_mhz(2.0e9, &[(1, 5)], &[(10, 5)]), None);
        assert_eq!(aperf_mperf_mhz(0.0, &start, &end), None);
    }

    /// With cpu0's `msr` unreadable (here too short to hold the registers, as a
    /// hypervisor that refuses the read) and cpu1's missing, the counters are not
    /// used: cpufreq is. cpu0 reads 2,000,000 kHz then 1,800,000; cpu1 2,200,000
    /// then 2,000,000: (2000 + 2200 + 1800 + 2000) / 4 = 2000 MHz.
    #[test]
    fn scaling_cur_freq_when_the_counters_cannot_be_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        put(root, "dev/cpu/0/msr", b"");
        let cur = |cpu: usize, khz: &str| {
            put(
                root,
                &format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq"),
                khz.as_bytes(),
            );
        };
        cur(0, "2000000\n");
        cur(1, "2200000\n");
        let watch = FreqWatch::start(root, &[0, 1]);
        assert_eq!(watch.source(), Some(FreqSource::ScalingCurFreq));
        cur(0, "1800000\n");
        cur(1, "2000000\n");
        let f = watch.finish(|| panic!("the base is only asked for APERF/MPERF"));
        assert_eq!(
            f,
            Some(EffectiveFreq {
                mhz: 2000.0,
                source: FreqSource::ScalingCurFreq
            })
        );
    }

    /// Without cpufreq, `cpu MHz` of the job's processors (1 and 3 of 0-3): 2400 and
    /// 2600 at the start, 2500 and 2700 at the end: mean 2550 MHz.
    #[test]
    fn cpuinfo_when_there_is_no_cpufreq() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let cpuinfo = |mhz: [&str; 4]| {
            let text: String = mhz
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    format!("processor\t: {i}\nmodel name\t: Test CPU\ncpu MHz\t\t: {m}\n\n")
                })
                .collect();
            put(root, "proc/cpuinfo", text.as_bytes());
        };
        cpuinfo(["1000.000", "2400.000", "1000.000", "2600.000"]);
        let watch = FreqWatch::start(root, &[1, 3]);
        assert_eq!(watch.source(), Some(FreqSource::Cpuinfo));
        cpuinfo(["1000.000", "2500.000", "1000.000", "2700.000"]);
        let f = watch.finish(|| None).unwrap();
        assert!((f.mhz - 2550.0).abs() < 1e-9, "{}", f.mhz);
        assert_eq!(f.source.name(), "cpuinfo");
    }

    /// An empty tree, or a cpuinfo without the job's processors, has no frequency.
    #[test]
    fn nothing_to_read_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let watch = FreqWatch::start(dir.path(), &[0]);
        assert_eq!(watch.source(), None);
        assert_eq!(watch.finish(|| Some(1e9)), None);
        put(
            dir.path(),
            "proc/cpuinfo",
            b"processor\t: 0\ncpu MHz\t\t: 2400.0\n",
        );
        assert_eq!(FreqWatch::start(dir.path(), &[5]).source(), None);
        assert_eq!(FreqWatch::start(dir.path(), &[]).source(), None);
    }
}
