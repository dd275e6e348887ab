//! cgroup v2: one unified hierarchy, controllers enabled per subtree.

use std::path::Path;

use super::stat::{self, Device};
use super::{fs, Cgroup, CgroupError, Controller, Plan, Usage, PERIOD_US};

/// The controllers nnb needs from a v2 hierarchy; cpuset is used where offered.
pub(super) const REQUIRED: [&str; 3] = ["cpu", "memory", "io"];

/// The `io.max` keys, in the order of [`IoLimit::values`](super::IoLimit).
const IO_KEYS: [&str; 4] = ["riops", "wiops", "rbps", "wbps"];

/// The first required controller a `cgroup.controllers` text does not list.
pub(super) fn missing(controllers: &str) -> Option<&'static str> {
    REQUIRED
        .into_iter()
        .find(|c| !controllers.split_whitespace().any(|l| l == *c))
}

/// Creates the cgroup `child` below `parent` after enabling the controllers for
/// `parent`'s children (`+cpu +memory +io`, and `+cpuset` where `parent` offers it).
pub(super) fn create_below(parent: &Path, child: &Path) -> Result<(), CgroupError> {
    let offered = fs::read(&parent.join("cgroup.controllers"))?;
    if let Some(controller) = missing(&offered) {
        return Err(CgroupError::ControllerMissing {
            controller,
            dir: parent.to_path_buf(),
        });
    }
    let mut enable = REQUIRED.map(|c| format!("+{c}")).join(" ");
    if offered.split_whitespace().any(|c| c == "cpuset") {
        enable.push_str(" +cpuset");
    }
    fs::write(&parent.join("cgroup.subtree_control"), &enable)?;
    fs::mkdir(child)
}

/// The `io.max` line for one device: "MAJ:MIN riops=N wiops=N rbps=N wbps=N", `max`
/// where there is no limit.
fn io_line(dev: Device, values: [Option<u64>; 4]) -> String {
    let mut line = format!("{}:{}", dev.0, dev.1);
    for (key, value) in IO_KEYS.iter().zip(values) {
        let value = value.map_or("max".to_string(), |v| v.to_string());
        line.push_str(&format!(" {key}={value}"));
    }
    line
}

/// Writes the checked grant `plan`: `cpu.max` "QUOTA PERIOD" (`max`: none), the
/// cpuset (the parent's effective CPUs when none is granted; skipped where cpuset
/// is not enabled, an error if CPUs are granted there), `memory.max` and one
/// `io.max` line per device.
pub(super) fn apply(cg: &Cgroup, plan: &Plan) -> Result<(), CgroupError> {
    let dir = cg.dir(Controller::Cpu);
    let quota = plan.quota_us.map_or("max".to_string(), |q| q.to_string());
    fs::write(&dir.join("cpu.max"), &format!("{quota} {PERIOD_US}"))?;

    let cpuset = dir.join("cpuset.cpus");
    let cpus = match (&plan.cpus, cpuset.exists()) {
        (Some(cpus), true) => Some(cpus.clone()),
        (Some(_), false) => {
            return Err(CgroupError::ControllerMissing {
                controller: "cpuset",
                dir,
            })
        }
        (None, true) => {
            let parent = cg.parent_dir(Controller::Cpuset);
            Some(
                fs::read(&parent.join("cpuset.cpus.effective"))?
                    .trim()
                    .to_string(),
            )
        }
        (None, false) => None,
    };
    if let Some(cpus) = cpus {
        fs::write(&cpuset, &cpus)?;
    }

    let memory = plan
        .memory_bytes
        .map_or("max".to_string(), |m| m.to_string());
    fs::write(&dir.join("memory.max"), &memory)?;

    let io_max = dir.join("io.max");
    let limited = fs::parse(&io_max, stat::rule_devices)?;
    for (dev, values) in plan.io_rules(&limited) {
        fs::write(&io_max, &io_line(dev, values))?;
    }
    Ok(())
}

/// The cgroup's accounting: `usage_usec` of `cpu.stat`; `anon` of `memory.stat`
/// and `memory.current`; reads plus writes of `io.stat`.
pub(super) fn usage(cg: &Cgroup) -> Result<Usage, CgroupError> {
    let dir = cg.dir(Controller::Cpu);
    let cpu_ns = fs::parse(&dir.join("cpu.stat"), |t| {
        stat::keyed(t, "usage_usec")?
            .checked_mul(1000)
            .ok_or_else(|| "usage_usec overflows in nanoseconds".to_string())
    })?;
    let (io_ops, io_bytes) = fs::parse(&dir.join("io.stat"), stat::io_stat)?;
    Ok(Usage {
        cpu_ns,
        memory_bytes: fs::parse(&dir.join("memory.stat"), |t| stat::keyed(t, "anon"))?,
        memory_usage_bytes: fs::parse(&dir.join("memory.current"), stat::number)?,
        io_ops,
        io_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_controllers() {
        assert_eq!(missing("cpuset cpu io memory hugetlb pids rdma misc"), None);
        assert_eq!(missing("cpu memory"), Some("io"));
        assert_eq!(missing("hugetlb"), Some("cpu"));
        assert_eq!(missing("cpuset iocost memory cpu"), Some("io"));
    }

    #[test]
    fn io_lines() {
        assert_eq!(
            io_line((8, 16), [Some(200), None, None, Some(1_048_576)]),
            "8:16 riops=200 wiops=max rbps=max wbps=1048576"
        );
    }
}
