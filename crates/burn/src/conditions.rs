//! What a job ran under, read around it on the machine that ran it: the hypervisor's
//! steal on the job's CPUs (before and after), the time since the kernel booted, the
//! CPU time the whole machine used since then, and the CPUs' effective frequency
//! ([`crate::freq`]). The agent wraps every job in a
//! [`ConditionsWatch`], so every job's result carries them, whatever its kind.

use std::path::Path;

use serde::Serialize;

use crate::env::{cpu_busy_s, read_proc_stat_steal, uptime_s, StealTicks, StepSteal};
use crate::freq::{EffectiveFreq, FreqWatch};

/// What one job ran under. Serialized as four fields of the job's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobConditions {
    /// Steal on the job's CPUs while it ran, with the counters before and after;
    /// `None` without a steal column in /proc/stat.
    pub steal: Option<StepSteal>,
    /// Seconds since the kernel booted when the job started ([`uptime_s`]): on EC2,
    /// since the instance was launched or last started.
    pub uptime_s: Option<f64>,
    /// CPU-seconds all the machine's CPUs were busy since boot, when the job started
    /// ([`cpu_busy_s`]): with `uptime_s`, what a burstable instance's CPU credits
    /// were spent on.
    pub cpu_busy_s: Option<f64>,
    /// The job's CPUs' effective frequency while it ran; `None` where none can be read.
    pub freq: Option<EffectiveFreq>,
}

/// The readings taken when a job starts, finished by [`ConditionsWatch::finish`].
#[derive(Debug)]
pub struct ConditionsWatch {
    cpus: Vec<usize>,
    steal: Option<StealTicks>,
    uptime_s: Option<f64>,
    cpu_busy_s: Option<f64>,
    freq: FreqWatch,
}

impl ConditionsWatch {
    /// Takes the start readings for a job on `cpus` (the frequency last, nearest the
    /// job).
    pub fn start(cpus: &[usize]) -> ConditionsWatch {
        let uptime_s = uptime_s();
        let cpu_busy_s = cpu_busy_s();
        let steal = read_proc_stat_steal();
        ConditionsWatch {
            cpus: cpus.to_vec(),
            steal,
            uptime_s,
            cpu_busy_s,
            freq: FreqWatch::start(Path::new("/"), cpus),
        }
    }

    /// Takes the end readings (the frequency first) and returns the job's conditions.
    /// `base_hz` is MPERF's rate, the TSC's frequency; it is asked only when the
    /// APERF/MPERF counters are read.
    pub fn finish(self, base_hz: impl FnOnce() -> Option<f64>) -> JobConditions {
        let freq = self.freq.finish(base_hz);
        let steal = self
            .steal
            .zip(read_proc_stat_steal())
            .map(|(before, after)| StepSteal::between(&self.cpus, &before, &after));
        JobConditions {
            steal,
            uptime_s: self.uptime_s,
            cpu_busy_s: self.cpu_busy_s,
            freq,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On this Linux machine: the counters of CPU 0 before and after, the uptime, and
    /// the effective frequency if any source can be read (its source is the watch's).
    #[test]
    fn a_watch_on_this_machine() {
        let watch = ConditionsWatch::start(&[0]);
        let source = watch.freq.source();
        let c = watch.finish(|| None);
        let steal = c.steal.expect("/proc/stat has a steal column on Linux");
        assert_eq!(steal.cpus, [0]);
        assert!(steal.after >= steal.before);
        assert_eq!(steal.ticks, steal.after - steal.before);
        assert!(c.uptime_s.is_some_and(|s| s > 0.0));
        assert!(
            c.cpu_busy_s.is_some_and(|s| s > 0.0),
            "this test ran on a CPU"
        );
        if source != Some(crate::freq::FreqSource::AperfMperf) {
            assert_eq!(c.freq.map(|f| f.source), source);
        }
    }
}
