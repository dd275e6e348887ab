//! cgroup v1: one hierarchy per controller (cpu, cpuacct, cpuset, memory, blkio),
//! each with its own file names.

use std::path::Path;

use super::stat::{self, Device};
use super::{fs, Cgroup, CgroupError, Controller, Plan, Usage, PERIOD_US};

/// The blkio throttle files, in the order of [`IoLimit::values`](super::IoLimit).
const THROTTLE_FILES: [&str; 4] = [
    "blkio.throttle.read_iops_device",
    "blkio.throttle.write_iops_device",
    "blkio.throttle.read_bps_device",
    "blkio.throttle.write_bps_device",
];

/// Makes a new cpuset cgroup `child` usable: a new v1 cpuset has no CPUs and no
/// memory nodes (no process can join it), so each empty one takes its parent's.
pub(super) fn fill_cpuset(parent: &Path, child: &Path) -> Result<(), CgroupError> {
    for name in ["cpuset.cpus", "cpuset.mems"] {
        if fs::read(&child.join(name))?.trim().is_empty() {
            let inherited = fs::read(&parent.join(name))?;
            fs::write(&child.join(name), inherited.trim())?;
        }
    }
    Ok(())
}

/// Writes the checked grant `plan`: CFS quota over a 100 ms period (-1: none),
/// the cpuset (the parent's CPUs when none is granted), the memory limit (-1:
/// none) and one "MAJ:MIN N" line per throttle file and device (0: none).
pub(super) fn apply(cg: &Cgroup, plan: &Plan) -> Result<(), CgroupError> {
    let cpu = cg.dir(Controller::Cpu);
    fs::write(&cpu.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
    let quota = plan.quota_us.map_or("-1".to_string(), |q| q.to_string());
    fs::write(&cpu.join("cpu.cfs_quota_us"), &quota)?;

    let cpus = match &plan.cpus {
        Some(cpus) => cpus.clone(),
        None => fs::read(&cg.parent_dir(Controller::Cpuset).join("cpuset.cpus"))?
            .trim()
            .to_string(),
    };
    fs::write(&cg.dir(Controller::Cpuset).join("cpuset.cpus"), &cpus)?;

    let memory = plan
        .memory_bytes
        .map_or("-1".to_string(), |m| m.to_string());
    fs::write(
        &cg.dir(Controller::Memory).join("memory.limit_in_bytes"),
        &memory,
    )?;

    let blkio = cg.dir(Controller::Blkio);
    let mut limited: Vec<Device> = Vec::new();
    for name in THROTTLE_FILES {
        limited.extend(fs::parse(&blkio.join(name), stat::rule_devices)?);
    }
    for (dev, values) in plan.io_rules(&limited) {
        for (name, value) in THROTTLE_FILES.iter().zip(values) {
            let line = format!("{}:{} {}", dev.0, dev.1, value.unwrap_or(0));
            fs::write(&blkio.join(name), &line)?;
        }
    }
    Ok(())
}

/// The cgroup's accounting: `cpuacct.usage`; `total_rss` of `memory.stat` and
/// `memory.usage_in_bytes`; reads plus writes of `blkio.throttle.io_serviced` and
/// `io_service_bytes` (the `_recursive` ones, counting child cgroups, where the
/// kernel has them).
pub(super) fn usage(cg: &Cgroup) -> Result<Usage, CgroupError> {
    let memory = cg.dir(Controller::Memory);
    let blkio = cg.dir(Controller::Blkio);
    let suffix = if blkio.join("blkio.throttle.io_serviced_recursive").exists() {
        "_recursive"
    } else {
        ""
    };
    let blkio_file = |name: &str| blkio.join(format!("blkio.throttle.{name}{suffix}"));
    Ok(Usage {
        cpu_ns: fs::parse(
            &cg.dir(Controller::Cpuacct).join("cpuacct.usage"),
            stat::number,
        )?,
        memory_bytes: fs::parse(&memory.join("memory.stat"), |t| stat::keyed(t, "total_rss"))?,
        memory_usage_bytes: fs::parse(&memory.join("memory.usage_in_bytes"), stat::number)?,
        io_ops: fs::parse(&blkio_file("io_serviced"), stat::blkio_read_write)?,
        io_bytes: fs::parse(&blkio_file("io_service_bytes"), stat::blkio_read_write)?,
    })
}
