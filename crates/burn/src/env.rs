//! The environment a result was measured in, stored with every result: a number
//! without its CPU model, kernel, clocksource, governor, hypervisor and the steal time
//! around it cannot be compared with another one.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::topology::{Topology, TopologySummary};

/// Where and how a measurement ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// `model name` from /proc/cpuinfo (or `CPU part` on aarch64), "unknown" if absent.
    pub cpu_model: String,
    /// Kernel release and machine from uname, e.g. "6.8.0-1008-aws x86_64".
    pub kernel: String,
    /// The kernel's current clocksource (tsc, kvm-clock, arch_sys_counter, ...).
    pub clocksource: String,
    /// cpufreq governor of cpu0; `None` where there is no cpufreq (most VMs).
    pub governor: Option<String>,
    /// Hypervisor vendor (kvm, xen, hyperv, vmware, ...), "none" on bare metal; `None`
    /// where it cannot be told.
    pub hypervisor: Option<String>,
    /// Version of the nnb binary that measured.
    pub nnb_version: String,
    /// The exact command line.
    pub command: Vec<String>,
    /// Headline numbers of the CPU topology.
    pub topology: TopologySummary,
    /// Steal ticks of all CPUs from /proc/stat when the run started (USER_HZ units).
    pub steal_ticks: Option<u64>,
    /// Steal ticks when the run ended (see [`Environment::record_steal_after`]).
    pub steal_ticks_after: Option<u64>,
    /// Ticks per second of /proc/stat counters (USER_HZ, normally 100).
    pub user_hz: u64,
}

impl Environment {
    /// Captures this machine's environment. `nnb_version` is the binary's version
    /// (`env!("CARGO_PKG_VERSION")` of the caller, not of this library).
    pub fn capture(topo: &Topology, nnb_version: &str) -> Environment {
        Environment {
            cpu_model: cpu_model(),
            kernel: kernel(),
            clocksource: read_trimmed(Path::new(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            ))
            .unwrap_or_else(|| "unknown".to_string()),
            governor: read_trimmed(Path::new(
                "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
            )),
            hypervisor: hypervisor(),
            nnb_version: nnb_version.to_string(),
            command: std::env::args().collect(),
            topology: topo.summary(),
            steal_ticks: read_steal_ticks(),
            steal_ticks_after: None,
            user_hz: user_hz(),
        }
    }

    /// Records the steal counter at the end of the run, for the before/after delta.
    pub fn record_steal_after(&mut self) {
        self.steal_ticks_after = read_steal_ticks();
    }

    /// Steal ticks accumulated between capture and [`Environment::record_steal_after`].
    pub fn steal_delta(&self) -> Option<u64> {
        Some(self.steal_ticks_after?.saturating_sub(self.steal_ticks?))
    }
}

/// Steal time counters from /proc/stat, in USER_HZ ticks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StealTicks {
    /// The `cpu` line: all CPUs together.
    pub all: u64,
    /// `(cpu, ticks)` from each `cpuN` line.
    pub per_cpu: Vec<(usize, u64)>,
}

impl StealTicks {
    /// Ticks of one CPU, if /proc/stat has a line for it.
    pub fn cpu(&self, cpu: usize) -> Option<u64> {
        self.per_cpu
            .iter()
            .find(|(c, _)| *c == cpu)
            .map(|(_, t)| *t)
    }
}

/// Steal during one measurement on some CPUs: the hypervisor's steal counters of
/// those CPUs (from /proc/stat) before and after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepSteal {
    /// The CPUs counted.
    pub cpus: Vec<usize>,
    /// Steal ticks on them during the measurement (the sum of each CPU's increase).
    pub ticks: u64,
    /// Ticks per second ([`user_hz`]).
    pub user_hz: u64,
    /// The CPUs' steal counters summed, before the measurement (ticks since boot).
    pub before: u64,
    /// The same sum after it.
    pub after: u64,
}

impl StepSteal {
    /// The steal on `cpus` between `before` and `after`; a CPU missing from either
    /// reading counts 0 and is left out of both sums.
    pub fn between(cpus: &[usize], before: &StealTicks, after: &StealTicks) -> StepSteal {
        let both: Vec<(u64, u64)> = cpus
            .iter()
            .filter_map(|&c| Some((before.cpu(c)?, after.cpu(c)?)))
            .collect();
        StepSteal {
            cpus: cpus.to_vec(),
            ticks: both.iter().map(|(b, a)| a.saturating_sub(*b)).sum(),
            user_hz: user_hz(),
            before: both.iter().map(|(b, _)| b).sum(),
            after: both.iter().map(|(_, a)| a).sum(),
        }
    }
}

/// Seconds since this machine's kernel booted, from /proc/uptime (`CLOCK_BOOTTIME`,
/// suspend included). On a cloud VM the kernel boots when the instance is launched or
/// started, so this is the time since then: the window of burst credits and of a
/// fresh host placement.
pub fn uptime_s() -> Option<f64> {
    parse_uptime(&std::fs::read_to_string("/proc/uptime").ok()?)
}

/// The first number of /proc/uptime's text: seconds since boot.
pub fn parse_uptime(text: &str) -> Option<f64> {
    text.split_whitespace()
        .next()?
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
}

/// All-CPU steal ticks from /proc/stat.
pub fn read_steal_ticks() -> Option<u64> {
    read_proc_stat_steal().map(|s| s.all)
}

/// All-CPU and per-CPU steal ticks from /proc/stat.
pub fn read_proc_stat_steal() -> Option<StealTicks> {
    parse_proc_stat_steal(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Parses the steal column (the 8th number) of the `cpu` and `cpuN` lines.
pub fn parse_proc_stat_steal(text: &str) -> Option<StealTicks> {
    let mut all = None;
    let mut per_cpu = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(label) = fields.next() else { continue };
        let Some(rest) = label.strip_prefix("cpu") else {
            continue;
        };
        let Some(steal) = fields.nth(7).and_then(|v| v.parse::<u64>().ok()) else {
            continue;
        };
        if rest.is_empty() {
            all = Some(steal);
        } else if let Ok(cpu) = rest.parse::<usize>() {
            per_cpu.push((cpu, steal));
        }
    }
    Some(StealTicks { all: all?, per_cpu })
}

/// CPU-seconds this machine's CPUs were busy since boot, summed over them, from
/// /proc/stat's `cpu` line: the time a burstable instance's credits pay for
/// (review item 42).
pub fn cpu_busy_s() -> Option<f64> {
    let ticks = parse_cpu_busy_ticks(&std::fs::read_to_string("/proc/stat").ok()?)?;
    Some(ticks as f64 / user_hz() as f64)
}

/// The busy ticks of /proc/stat's `cpu` line: user, nice, system, irq and softirq
/// (guest time is inside user); idle, iowait and steal (time the vCPUs did not
/// run) are not use.
pub fn parse_cpu_busy_ticks(text: &str) -> Option<u64> {
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("cpu"))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse::<u64>().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq ...
    let busy = [0, 1, 2, 5, 6].iter().map(|&i| f.get(i).copied());
    busy.sum::<Option<u64>>()
}

/// Clock ticks per second of /proc/stat (sysconf `_SC_CLK_TCK`), 100 if unknown.
pub fn user_hz() -> u64 {
    nnb_sys::process::clock_ticks_per_second().unwrap_or(100)
}

/// The hypervisor: the cpuid hypervisor bit and vendor leaf on x86, else
/// /sys/hypervisor/type; "none" when cpuid says bare metal.
pub fn hypervisor() -> Option<String> {
    cpuid_hypervisor().or_else(|| read_trimmed(Path::new("/sys/hypervisor/type")))
}

#[cfg(target_arch = "x86_64")]
fn cpuid_hypervisor() -> Option<String> {
    use nnb_sys::clock::cpuid;
    // Leaf 1 always exists; leaf 0x40000000 is only read when the hypervisor bit says
    // a hypervisor defines it.
    if cpuid(1).ecx & (1 << 31) == 0 {
        return Some("none".to_string());
    }
    let regs = cpuid(0x4000_0000);
    let bytes: Vec<u8> = [regs.ebx, regs.ecx, regs.edx]
        .iter()
        .flat_map(|r| r.to_le_bytes())
        .collect();
    let vendor = String::from_utf8_lossy(&bytes)
        .trim_matches(char::from(0))
        .trim()
        .to_string();
    Some(hypervisor_name(&vendor))
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid_hypervisor() -> Option<String> {
    None
}

/// Friendly name of a cpuid hypervisor vendor signature (kept raw when unknown).
fn hypervisor_name(vendor: &str) -> String {
    match vendor {
        "KVMKVMKVM" => "kvm",
        "Microsoft Hv" => "hyperv",
        "VMwareVMware" => "vmware",
        "XenVMMXenVMM" => "xen",
        "TCGTCGTCGTCG" => "qemu-tcg",
        "ACRNACRNACRN" => "acrn",
        "" => "unknown",
        other => other,
    }
    .to_string()
}

fn cpu_model() -> String {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    ["model name", "Model", "CPU part"]
        .iter()
        .find_map(|key| {
            text.lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.trim() == *key)
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string())
}

fn kernel() -> String {
    nnb_sys::process::uname().map_or_else(
        |_| "unknown".to_string(),
        |k| format!("{} {}", k.release, k.machine),
    )
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  100 0 50 9000 5 0 2 37 0 0\n\
                        cpu0 50 0 25 4500 2 0 1 30 0 0\n\
                        cpu1 50 0 25 4500 3 0 1 7 0 0\n\
                        intr 12345\nctxt 999\n";

    #[test]
    fn parses_steal_columns() {
        let s = parse_proc_stat_steal(STAT).unwrap();
        assert_eq!(s.all, 37);
        assert_eq!(s.per_cpu, vec![(0, 30), (1, 7)]);
        assert_eq!(s.cpu(1), Some(7));
        assert_eq!(s.cpu(5), None);
        // Kernels before 2.6.11 had no steal column: nothing to report.
        assert!(parse_proc_stat_steal("cpu 1 2 3 4\n").is_none());
    }

    /// cpu0 30 -> 42 (+12), cpu1 7 -> 9 (+2, not counted), cpu7 absent: 12 ticks,
    /// counters 30 before and 42 after; cpus 0 and 1: 37 -> 51.
    #[test]
    fn step_steal_counts_the_cpus_used() {
        let before = parse_proc_stat_steal(STAT).unwrap();
        let after = parse_proc_stat_steal(
            "cpu  100 0 50 9000 5 0 2 51 0 0\n\
             cpu0 50 0 25 4500 2 0 1 42 0 0\n\
             cpu1 50 0 25 4500 3 0 1 9 0 0\n",
        )
        .unwrap();
        let s = StepSteal::between(&[0, 7], &before, &after);
        assert_eq!((s.ticks, s.cpus.clone()), (12, vec![0, 7]));
        assert_eq!((s.before, s.after), (30, 42));
        assert_eq!(StepSteal::between(&[1], &before, &after).ticks, 2);
        let both = StepSteal::between(&[0, 1], &before, &after);
        assert_eq!((both.ticks, both.before, both.after), (14, 37, 51));
    }

    #[test]
    fn uptime_is_the_first_number() {
        assert_eq!(parse_uptime("53336.63 56377.81\n"), Some(53336.63));
        assert_eq!(parse_uptime(""), None);
        assert_eq!(parse_uptime("-1 2"), None);
        assert!(uptime_s().is_some_and(|s| s > 0.0), "/proc/uptime on Linux");
    }

    #[test]
    fn captures_this_machine() {
        let topo = Topology::host().unwrap();
        let mut env = Environment::capture(&topo, "9.9.9");
        assert_eq!(env.nnb_version, "9.9.9");
        assert!(!env.kernel.is_empty() && env.kernel != "unknown");
        assert_eq!(env.topology.online, topo.online().count());
        assert!(!env.command.is_empty());
        assert!(
            env.steal_ticks.is_some(),
            "/proc/stat has a steal column on Linux"
        );
        env.record_steal_after();
        assert!(env.steal_delta().is_some());
        assert!(env.user_hz > 0);
        assert!(env.hypervisor.is_some());
        let json = serde_json::to_value(&env).unwrap();
        assert!(json["topology"]["logical"].as_u64().unwrap() >= 1);
    }

    #[test]
    fn hypervisor_names() {
        assert_eq!(hypervisor_name("KVMKVMKVM"), "kvm");
        assert_eq!(hypervisor_name("Microsoft Hv"), "hyperv");
        assert_eq!(hypervisor_name("SomethingNew"), "SomethingNew");
    }
}
