//! What a measured job ran under, as flat columns of its sample (version 4): the
//! steal on its CPUs, the time since its machine booted, and its CPUs' effective
//! frequency; from version 9 also the machine's busy CPU time since boot and, on
//! EC2, how much the ENA's allowance counters rose while it ran. The agent that ran
//! the job reads them around it and puts them in the job's result (`steal`,
//! `uptime_s`, `freq`, `cpu_busy_s`, `ena`); [`StepConditions::of`] copies them
//! into the sample. The machine's CPU model, kernel, clocksource and hypervisor are
//! not repeated per sample: they are the tenant's `environment` in the manifest
//! (`sessions[].tenants[]`, by the sample's `tenant`).

use serde::{Deserialize, Serialize};

use crate::quality::Quality;

/// The conditions columns of a sample. Every one is null in runs before version 4,
/// in failed samples, and where the agent could not read it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepConditions {
    /// The job's CPUs' steal counters (/proc/stat, USER_HZ ticks since boot) summed,
    /// just before the job.
    #[serde(default)]
    pub steal_ticks_before: Option<u64>,
    /// The same sum just after it.
    #[serde(default)]
    pub steal_ticks_after: Option<u64>,
    /// Seconds stolen from the job's CPUs while it ran, summed over them.
    #[serde(default)]
    pub steal_s: Option<f64>,
    /// Seconds since the kernel of the tenant's machine booted, when the job started:
    /// on EC2 the time since the instance was launched or last started (the window of
    /// burst credits).
    #[serde(default)]
    pub uptime_s: Option<f64>,
    /// The effective frequency of the job's CPUs while it ran, MHz.
    #[serde(default)]
    pub effective_mhz: Option<f64>,
    /// Where `effective_mhz` was read: `aperf-mperf` (the mean busy frequency),
    /// `scaling-cur-freq` or `cpuinfo` (the mean of readings at the start and the end).
    #[serde(default)]
    pub freq_source: Option<String>,
    /// CPU-seconds all the machine's CPUs were busy since boot, when the job started
    /// (version 9): with `uptime_s`, what a burstable instance's CPU credits were
    /// spent on (`nnb analyze`'s credits table estimates the balance from it).
    #[serde(default)]
    pub cpu_busy_s: Option<f64>,
    /// Packets the EC2 instance's inbound bandwidth allowance queued or dropped while
    /// the job ran (the ENA's `bw_in_allowance_exceeded` after minus before, summed
    /// over the default-route interfaces; version 9). Null off EC2 or without
    /// `ethtool`.
    #[serde(default)]
    pub ena_bw_in_allowance_exceeded: Option<u64>,
    /// The same for the outbound bandwidth allowance (`bw_out_allowance_exceeded`).
    #[serde(default)]
    pub ena_bw_out_allowance_exceeded: Option<u64>,
    /// The same for the packets-per-second allowance (`pps_allowance_exceeded`).
    #[serde(default)]
    pub ena_pps_allowance_exceeded: Option<u64>,
    /// Packets dropped because connection tracking was full
    /// (`conntrack_allowance_exceeded`).
    #[serde(default)]
    pub ena_conntrack_allowance_exceeded: Option<u64>,
    /// Packets to link-local services dropped (`linklocal_allowance_exceeded`).
    #[serde(default)]
    pub ena_linklocal_allowance_exceeded: Option<u64>,
}

/// The names of [`StepConditions`]' columns, in order.
pub const CONDITION_COLUMNS: [&str; 12] = [
    "steal_ticks_before",
    "steal_ticks_after",
    "steal_s",
    "uptime_s",
    "effective_mhz",
    "freq_source",
    "cpu_busy_s",
    "ena_bw_in_allowance_exceeded",
    "ena_bw_out_allowance_exceeded",
    "ena_pps_allowance_exceeded",
    "ena_conntrack_allowance_exceeded",
    "ena_linklocal_allowance_exceeded",
];

impl StepConditions {
    /// The conditions an agent put in a job's raw result; none of a result without
    /// them (an older agent's).
    pub fn of(result: &serde_json::Value) -> StepConditions {
        StepConditions::from(&Quality::of(result))
    }
}

impl From<&Quality> for StepConditions {
    /// The conditions among a result's qualifiers (read once, with them).
    fn from(q: &Quality) -> StepConditions {
        let rose = q.ena.as_ref().map(|e| e.rose());
        StepConditions {
            steal_ticks_before: q.steal.and_then(|s| s.before),
            steal_ticks_after: q.steal.and_then(|s| s.after),
            steal_s: q.steal.filter(|s| s.user_hz > 0).map(|s| s.seconds()),
            uptime_s: q.uptime_s,
            effective_mhz: q.freq.as_ref().map(|f| f.mhz),
            freq_source: q.freq.as_ref().map(|f| f.source.clone()),
            cpu_busy_s: q.cpu_busy_s,
            ena_bw_in_allowance_exceeded: rose.map(|r| r.bw_in_allowance_exceeded),
            ena_bw_out_allowance_exceeded: rose.map(|r| r.bw_out_allowance_exceeded),
            ena_pps_allowance_exceeded: rose.map(|r| r.pps_allowance_exceeded),
            ena_conntrack_allowance_exceeded: rose.map(|r| r.conntrack_allowance_exceeded),
            ena_linklocal_allowance_exceeded: rose.map(|r| r.linklocal_allowance_exceeded),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// 25 ticks at 100 per second are 0.25 s.
    #[test]
    fn columns_from_a_result() {
        let c = StepConditions::of(&json!({"burn": {}, "steal": {"cpus": [0, 1],
            "ticks": 25, "user_hz": 100, "before": 1000, "after": 1025},
            "uptime_s": 86400.25, "freq": {"mhz": 2450.5, "source": "cpuinfo"},
            "cpu_busy_s": 5000.5, "ena": {"interfaces": ["ens5"],
            "before": {"bw_in_allowance_exceeded": 10, "bw_out_allowance_exceeded": 0,
                "pps_allowance_exceeded": 7, "conntrack_allowance_exceeded": 0,
                "linklocal_allowance_exceeded": 1},
            "after": {"bw_in_allowance_exceeded": 15, "bw_out_allowance_exceeded": 40,
                "pps_allowance_exceeded": 7, "conntrack_allowance_exceeded": 0,
                "linklocal_allowance_exceeded": 1}}}));
        assert_eq!(
            c,
            StepConditions {
                steal_ticks_before: Some(1000),
                steal_ticks_after: Some(1025),
                steal_s: Some(0.25),
                uptime_s: Some(86400.25),
                effective_mhz: Some(2450.5),
                freq_source: Some("cpuinfo".into()),
                cpu_busy_s: Some(5000.5),
                ena_bw_in_allowance_exceeded: Some(5),
                ena_bw_out_allowance_exceeded: Some(40),
                ena_pps_allowance_exceeded: Some(0),
                ena_conntrack_allowance_exceeded: Some(0),
                ena_linklocal_allowance_exceeded: Some(0),
            }
        );
        let v = serde_json::to_value(&c).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        let mut want = CONDITION_COLUMNS.to_vec();
        want.sort_unstable();
        assert_eq!(keys, want);
    }

    /// A version-2 burn's steal has no counters; an old result has nothing else.
    #[test]
    fn an_older_result_has_only_what_it_had() {
        let c = StepConditions::of(&json!({"steal": {"cpus": [0], "ticks": 3, "user_hz": 100}}));
        assert_eq!(c.steal_s, Some(0.03));
        assert_eq!(
            (c.steal_ticks_before, c.uptime_s, c.effective_mhz),
            (None, None, None)
        );
        assert_eq!(StepConditions::of(&json!(null)), StepConditions::default());
    }

    /// No ENA (null, as an agent off EC2 writes it) leaves its columns null; a
    /// malformed one does too, and costs no other column.
    #[test]
    fn no_ena_no_counters() {
        for ena in [json!(null), json!({"interfaces": "eth0"})] {
            let c = StepConditions::of(&json!({"uptime_s": 60.0, "ena": ena}));
            assert_eq!(c.uptime_s, Some(60.0));
            assert_eq!(c.ena_bw_out_allowance_exceeded, None);
        }
    }
}
