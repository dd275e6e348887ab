//! cgroups: one per tenant, with enforced grants and host-side accounting.
//!
//! nnb's local provider runs each tenant (an `nnb agent` child process) in its own
//! cgroup, following Volpert et al.'s isolation method: every tenant gets explicit
//! grants (CPUs, a CPU quota, memory, disk I/O rates) that the kernel enforces, and
//! the host samples each tenant's cumulative usage from outside, where the tenant
//! cannot disturb it. cgroup v2 is used where its cpu, memory and io controllers
//! are available, v1 (cpu, cpuacct, cpuset, memory, blkio) otherwise; callers see
//! one interface. Cgroups live under a prefix such as `nnb/run-<pid>/...`, so
//! [`Hierarchy::sweep_dead`] can clear what a crashed run left behind.

mod device;
mod error;
mod fs;
mod mountinfo;
mod stat;
mod teardown;
mod v1;
mod v2;

use std::path::{Component, Path, PathBuf};

pub use device::block_device_of;
pub use error::CgroupError;
use stat::Device;

/// The CFS period nnb sets, in microseconds (100 ms, the kernel's default): a
/// quota of q CPUs runs q * 100 ms per 100 ms.
const PERIOD_US: u64 = 100_000;
/// The smallest quota the kernel takes (1 ms per period).
const MIN_QUOTA_US: u64 = 1_000;
/// CPU numbers a cpuset may name (those of `cpu_set_t`).
const MAX_CPUS: usize = libc::CPU_SETSIZE as usize;
/// The most devices one grant limits.
const MAX_IO_LIMITS: usize = 64;
/// The deepest cgroup path nnb creates.
const MAX_PATH_DEPTH: usize = 16;
/// Where the kernel describes the mounts this process sees.
const MOUNTINFO: &str = "/proc/self/mountinfo";

/// Which cgroup interface a hierarchy speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// One hierarchy per controller.
    V1,
    /// The unified hierarchy.
    V2,
}

/// The controllers nnb uses, named as v1 mounts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Controller {
    Cpu,
    Cpuacct,
    Cpuset,
    Memory,
    Blkio,
}

impl Controller {
    /// Every controller, in the order of [`Mounts::V1`]'s array.
    const ALL: [Controller; 5] = [
        Controller::Cpu,
        Controller::Cpuacct,
        Controller::Cpuset,
        Controller::Memory,
        Controller::Blkio,
    ];

    /// The v1 name (mount option and usual directory).
    fn name(self) -> &'static str {
        match self {
            Controller::Cpu => "cpu",
            Controller::Cpuacct => "cpuacct",
            Controller::Cpuset => "cpuset",
            Controller::Memory => "memory",
            Controller::Blkio => "blkio",
        }
    }
}

/// Where a hierarchy's cgroups live.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Mounts {
    /// The unified root.
    V2(PathBuf),
    /// One mount per controller, indexed as [`Controller::ALL`]; controllers
    /// mounted together (`cpu,cpuacct`) share a directory.
    V1([PathBuf; 5]),
}

/// Which cgroup interface a host offers and where: v2's one root directory, or v1's
/// mount directory per controller (cpu, cpuacct, cpuset, memory, blkio).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    mounts: Mounts,
}

impl Hierarchy {
    /// The host's hierarchy, from `/proc/self/mountinfo` (see [`Self::from_mountinfo`]).
    pub fn detect() -> Result<Hierarchy, CgroupError> {
        Hierarchy::from_mountinfo(&fs::read(Path::new(MOUNTINFO))?)
    }

    /// The hierarchy that a mountinfo text describes: v2 when a `cgroup2` mount's
    /// `cgroup.controllers` lists cpu, memory and io (cpuset optional); else v1 with
    /// `cgroup` mounts of cpu, cpuacct, cpuset, memory and blkio (an error names
    /// the first missing one). Malformed text is an error naming
    /// `/proc/self/mountinfo`.
    pub fn from_mountinfo(text: &str) -> Result<Hierarchy, CgroupError> {
        let mounts =
            mountinfo::parse(text).map_err(|what| fs::malformed(Path::new(MOUNTINFO), what))?;
        for m in mounts.iter().filter(|m| m.fstype == "cgroup2") {
            let offered = fs::read(&m.point.join("cgroup.controllers"));
            if offered.is_ok_and(|c| v2::missing(&c).is_none()) {
                return Ok(Hierarchy::v2_at(&m.point));
            }
        }
        let find = |c: Controller| {
            mounts
                .iter()
                .find(|m| m.is_v1_of(c.name()))
                .map(|m| m.point.clone())
                .ok_or(CgroupError::NotMounted {
                    controller: c.name(),
                })
        };
        let dirs = [
            find(Controller::Cpu)?,
            find(Controller::Cpuacct)?,
            find(Controller::Cpuset)?,
            find(Controller::Memory)?,
            find(Controller::Blkio)?,
        ];
        Ok(Hierarchy {
            mounts: Mounts::V1(dirs),
        })
    }

    /// A v2 hierarchy rooted at `root` (a fixture, or a known mount).
    pub fn v2_at(root: &Path) -> Hierarchy {
        Hierarchy {
            mounts: Mounts::V2(root.to_path_buf()),
        }
    }

    /// A v1 hierarchy with one directory per controller under `root` (`root/cpu`,
    /// `root/cpuacct`, `root/cpuset`, `root/memory`, `root/blkio`).
    pub fn v1_at(root: &Path) -> Hierarchy {
        Hierarchy {
            mounts: Mounts::V1(Controller::ALL.map(|c| root.join(c.name()))),
        }
    }

    /// Which interface this hierarchy speaks.
    pub fn version(&self) -> Version {
        match self.mounts {
            Mounts::V1(_) => Version::V1,
            Mounts::V2(_) => Version::V2,
        }
    }

    /// The directory holding `c`'s cgroups.
    fn mount(&self, c: Controller) -> &Path {
        match &self.mounts {
            Mounts::V2(root) => root,
            Mounts::V1(dirs) => &dirs[c as usize],
        }
    }

    /// Each directory holding cgroups, once (v1 controllers may share a mount).
    fn distinct_mounts(&self) -> Vec<&Path> {
        let mut out: Vec<&Path> = Vec::new();
        for c in Controller::ALL {
            let m = self.mount(c);
            if !out.contains(&m) {
                out.push(m);
            }
        }
        out
    }

    /// Creates the cgroup at the relative path `rel` (e.g. `nnb/run-1234/a`) and its
    /// missing parents (`mkdir -p`) in every controller; one that exists already is
    /// reused. v2 enables `+cpu +memory +io` (and `+cpuset` where offered) in each
    /// parent's `cgroup.subtree_control`; v1 gives each new cpuset its parent's CPUs
    /// and memory nodes (a new v1 cpuset has none, and no process can join it).
    pub fn create(&self, rel: &Path) -> Result<Cgroup, CgroupError> {
        check_rel(rel)?;
        let mut level = PathBuf::new();
        for part in rel.components() {
            let parent = level.clone();
            level.push(part);
            match &self.mounts {
                Mounts::V2(root) => v2::create_below(&root.join(&parent), &root.join(&level))?,
                Mounts::V1(_) => {
                    for m in self.distinct_mounts() {
                        fs::mkdir(&m.join(&level))?;
                    }
                    let cpuset = self.mount(Controller::Cpuset);
                    v1::fill_cpuset(&cpuset.join(&parent), &cpuset.join(&level))?;
                }
            }
        }
        Ok(Cgroup {
            hierarchy: self.clone(),
            rel: rel.to_path_buf(),
        })
    }

    /// Removes the leftovers of dead runs under `prefix` (e.g. `nnb`): every
    /// cgroup named `run-<pid>` (or `run-<pid>-<n>`, one of several runs of a
    /// process) there whose process is not alive, with everything
    /// below it (processes SIGKILLed, a short wait until they are gone, directories
    /// removed bottom-up). A live pid's cgroup is left alone. Returns the removed
    /// cgroups' paths relative to the hierarchy (e.g. `nnb/run-1234`), sorted.
    pub fn sweep_dead(&self, prefix: &Path) -> Result<Vec<PathBuf>, CgroupError> {
        check_rel(prefix)?;
        teardown::sweep_dead(self, prefix)
    }
}

/// Refuses a cgroup path that is empty, absolute, climbs (`..`) or nests deeper
/// than [`MAX_PATH_DEPTH`].
fn check_rel(rel: &Path) -> Result<(), CgroupError> {
    let refuse = |what| {
        Err(CgroupError::InvalidPath {
            path: rel.to_path_buf(),
            what,
        })
    };
    if rel.as_os_str().is_empty() {
        return refuse("it is empty");
    }
    if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return refuse("it must be relative, without `.` or `..`");
    }
    if rel.components().count() > MAX_PATH_DEPTH {
        return refuse("it nests too deep");
    }
    Ok(())
}

/// What a tenant is granted; `None` means no limit for that resource.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Grant {
    /// The CPUs it may run on (cpuset); None: its parent's.
    pub cpus: Option<Vec<usize>>,
    /// Its CPU time in CPUs (0.5: half of one CPU), enforced per 100 ms period.
    pub cpu_quota: Option<f64>,
    /// Its memory limit in bytes (what [`Usage::memory_usage_bytes`] counts).
    pub memory_bytes: Option<u64>,
    /// Its disk I/O rate limits, one per device.
    pub io: Vec<IoLimit>,
}

/// Disk I/O rate limits on one whole-disk block device (see [`block_device_of`]).
#[derive(Debug, Clone, PartialEq)]
pub struct IoLimit {
    /// The device (major, minor).
    pub device: (u32, u32),
    /// Read operations per second.
    pub read_iops: Option<u64>,
    /// Write operations per second.
    pub write_iops: Option<u64>,
    /// Read bytes per second (the kernel's `read_bps_device`; nnb's `_bps` are bits).
    pub read_bytes_per_s: Option<u64>,
    /// Write bytes per second (the kernel's `write_bps_device`).
    pub write_bytes_per_s: Option<u64>,
}

impl IoLimit {
    /// The four limits in the order both versions' files list them: read iops,
    /// write iops, read bps, write bps.
    fn values(&self) -> [Option<u64>; 4] {
        [
            self.read_iops,
            self.write_iops,
            self.read_bytes_per_s,
            self.write_bytes_per_s,
        ]
    }
}

/// A grant checked and turned into the values the cgroup files take.
struct Plan<'a> {
    /// CFS quota per [`PERIOD_US`], None: unlimited.
    quota_us: Option<u64>,
    /// The cpuset as a list ("0,2,3"), None: the parent's.
    cpus: Option<String>,
    /// Memory limit, None: unlimited.
    memory_bytes: Option<u64>,
    /// The granted io limits (devices distinct).
    io: &'a [IoLimit],
}

impl Grant {
    /// Checks the grant against what the kernel takes, before anything is written.
    fn plan(&self) -> Result<Plan<'_>, CgroupError> {
        let invalid = |what: String| Err(CgroupError::InvalidGrant(what));
        let quota_us = match self.cpu_quota {
            None => None,
            Some(q) if q.is_finite() && q > 0.0 && q <= MAX_CPUS as f64 => {
                let us = (q * PERIOD_US as f64).round() as u64;
                if us < MIN_QUOTA_US {
                    return invalid(format!(
                        "a CPU quota of {q} is below the kernel's minimum of {} CPUs",
                        MIN_QUOTA_US as f64 / PERIOD_US as f64
                    ));
                }
                Some(us)
            }
            Some(q) => return invalid(format!("a CPU quota of {q} CPUs")),
        };
        let cpus = match &self.cpus {
            None => None,
            Some(cpus) if cpus.is_empty() => return invalid("an empty cpuset".into()),
            Some(cpus) => {
                if let Some(cpu) = cpus.iter().find(|&&c| c >= MAX_CPUS) {
                    return invalid(format!("CPU {cpu} (the largest is {})", MAX_CPUS - 1));
                }
                let mut sorted = cpus.clone();
                sorted.sort_unstable();
                sorted.dedup();
                let list: Vec<String> = sorted.iter().map(|c| c.to_string()).collect();
                Some(list.join(","))
            }
        };
        if self.memory_bytes == Some(0) {
            return invalid("a memory limit of 0 bytes".into());
        }
        if self.io.len() > MAX_IO_LIMITS {
            return invalid(format!("more than {MAX_IO_LIMITS} io limits"));
        }
        for (i, l) in self.io.iter().enumerate() {
            if self.io[..i].iter().any(|o| o.device == l.device) {
                return invalid(format!(
                    "device {}:{} limited twice",
                    l.device.0, l.device.1
                ));
            }
            if l.values().contains(&Some(0)) {
                return invalid(format!(
                    "a limit of 0 on device {}:{} (None means no limit)",
                    l.device.0, l.device.1
                ));
            }
        }
        Ok(Plan {
            quota_us,
            cpus,
            memory_bytes: self.memory_bytes,
            io: &self.io,
        })
    }
}

impl Plan<'_> {
    /// The io rules to write, given the devices that carry limits now: those
    /// devices the grant no longer names cleared (all four None) first, then the
    /// granted ones.
    fn io_rules(&self, limited: &[Device]) -> Vec<(Device, [Option<u64>; 4])> {
        let mut rules: Vec<(Device, [Option<u64>; 4])> = Vec::new();
        for &dev in limited {
            let granted = self.io.iter().any(|l| l.device == dev);
            if !granted && !rules.iter().any(|(d, _)| *d == dev) {
                rules.push((dev, [None; 4]));
            }
        }
        rules.extend(self.io.iter().map(|l| (l.device, l.values())));
        rules
    }
}

/// Cumulative accounting of a cgroup (and the cgroups below it) at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// CPU time used, ns (v1 `cpuacct.usage`, v2 `usage_usec` of `cpu.stat`).
    pub cpu_ns: u64,
    /// Resident anonymous memory, bytes (v1 `total_rss`, v2 `anon` of
    /// `memory.stat`): what the tenant's processes hold, page cache not counted.
    pub memory_bytes: u64,
    /// What the memory limit counts, page cache included (v1
    /// `memory.usage_in_bytes`, v2 `memory.current`).
    pub memory_usage_bytes: u64,
    /// Disk reads plus writes completed through the throttle, summed over devices
    /// (v1 Read + Write of `blkio.throttle.io_serviced`, v2 rios + wios of
    /// `io.stat`; discards not counted).
    pub io_ops: u64,
    /// Bytes of those reads and writes (v1 `blkio.throttle.io_service_bytes`, v2
    /// rbytes + wbytes).
    pub io_bytes: u64,
}

/// One cgroup: the same relative path in each controller of a [`Hierarchy`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    hierarchy: Hierarchy,
    rel: PathBuf,
}

impl Cgroup {
    /// The cgroup's directory for controller `c`.
    fn dir(&self, c: Controller) -> PathBuf {
        self.hierarchy.mount(c).join(&self.rel)
    }

    /// The parent cgroup's directory for controller `c`.
    fn parent_dir(&self, c: Controller) -> PathBuf {
        let parent = self.rel.parent().unwrap_or(Path::new(""));
        self.hierarchy.mount(c).join(parent)
    }

    /// The cgroup's directories, one per distinct controller mount (v2: one).
    pub fn dirs(&self) -> Vec<PathBuf> {
        let m = self.hierarchy.distinct_mounts();
        m.into_iter().map(|m| m.join(&self.rel)).collect()
    }

    /// The cgroup's path relative to its hierarchy, as given to [`Hierarchy::create`].
    pub fn path(&self) -> &Path {
        &self.rel
    }

    /// Enforces `grant`, replacing whatever was granted before: v1 writes
    /// `cpu.cfs_period_us` = 100000 and `cpu.cfs_quota_us`, `cpuset.cpus`,
    /// `memory.limit_in_bytes` and `blkio.throttle.{read,write}_{iops,bps}_device`
    /// "MAJ:MIN N"; v2 `cpu.max` "QUOTA PERIOD", `cpuset.cpus`, `memory.max` and
    /// `io.max` "MAJ:MIN riops=N wiops=N rbps=N wbps=N". A resource without a limit
    /// gets none (`-1`, `max`, `0` for v1 io, the parent's CPUs), and io limits on
    /// devices the grant does not name are cleared. The grant is checked first
    /// (positive quota of at least 0.01 CPU, CPUs below 1024, no zero limits, each
    /// device once): an invalid one writes nothing.
    pub fn apply(&self, grant: &Grant) -> Result<(), CgroupError> {
        let plan = grant.plan()?;
        match self.hierarchy.version() {
            Version::V1 => v1::apply(self, &plan),
            Version::V2 => v2::apply(self, &plan),
        }
    }

    /// Removes every limit, the unrestricted state: no CPU quota, no memory limit,
    /// no io rule on any device, the parent's CPUs (same as applying
    /// `Grant::default()`).
    pub fn lift(&self) -> Result<(), CgroupError> {
        self.apply(&Grant::default())
    }

    /// Moves process `pid` (all its threads) into the cgroup, in every controller.
    pub fn add_process(&self, pid: u32) -> Result<(), CgroupError> {
        for dir in self.dirs() {
            fs::write(&dir.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// The processes in the cgroup (in any of its controllers), ascending.
    pub fn procs(&self) -> Result<Vec<u32>, CgroupError> {
        let mut all = Vec::new();
        for dir in self.dirs() {
            all.extend(fs::parse(&dir.join("cgroup.procs"), stat::pids)?);
        }
        all.sort_unstable();
        all.dedup();
        Ok(all)
    }

    /// The cgroup's cumulative accounting now (see [`Usage`] for which file each
    /// field comes from).
    pub fn usage(&self) -> Result<Usage, CgroupError> {
        match self.hierarchy.version() {
            Version::V1 => v1::usage(self),
            Version::V2 => v2::usage(self),
        }
    }

    /// Removes the cgroup and any cgroups below it: SIGKILLs their processes, waits
    /// up to about 1 s until they are gone, then removes the directories in every
    /// controller. Idempotent: a cgroup already gone is fine. Refuses (without
    /// killing) if the calling process is inside.
    pub fn remove(&self) -> Result<(), CgroupError> {
        teardown::remove_tree(&self.dirs())
    }
}

#[cfg(test)]
pub(crate) mod tests;
