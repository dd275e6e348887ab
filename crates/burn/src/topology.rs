//! CPU topology read from sysfs: which logical CPUs exist, which are online, which
//! share a physical core (SMT siblings), a package (socket), a die, a cluster and a
//! NUMA node.
//!
//! Everything is read under a configurable root so that tests (and `nnb topo
//! --sysfs-root DIR`) can read a fixture tree: root `/` is this machine, root `DIR`
//! reads `DIR/sys/devices/system/{cpu,node}`.
//!
//! The set of CPUs is the set of `cpuN` directories (the *present* CPUs). The
//! `possible` list is deliberately not used: on many guests it names hot-plug slots
//! that never had a CPU (e.g. `0-239` on an 8-vCPU VM). Whether a CPU is online comes
//! from the `online` list, else from `cpuN/online`, else from the presence of its
//! `topology` directory (the kernel removes it when a CPU goes offline). Offline CPUs
//! are kept with `online == false` so that a user asking for one gets told why it
//! cannot be used.
//!
//! Physical cores get a *global* index (`Cpu::core`) because raw `core_id`s repeat
//! across packages and dies and can have holes. Cores are numbered package by package
//! (then die), and within a package in the order of their lowest logical CPU: on an
//! m5.metal (cpu n and n+48 are siblings, cpus 0-23 on package 0) core 0 is {0,48},
//! core 23 is {23,71}, core 24 is {24,72}. Placement strategies follow that order.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// CPU lists in the kernel's `0-3,8` syntax, as sysfs writes them and people type
/// them: formatted by nnb-units, re-exported here beside the topology they describe.
pub use nnb_units::{format_cpu_list as format_list, CpuListError};

/// One logical CPU (`/sys/devices/system/cpu/cpuN`).
///
/// For an offline CPU the kernel publishes no topology, so `core`, `core_id` and
/// `package` are 0, `die`, `cluster` and `numa_node` are `None` and `siblings` is
/// empty: only `id` and `online` mean anything. Placement never uses offline CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cpu {
    /// Logical CPU number (the N of `cpuN`), what `sched_setaffinity` takes.
    pub id: usize,
    /// Whether the CPU is online (can run threads).
    pub online: bool,
    /// Global physical-core index `0..physical_cores()`, unique per sibling group,
    /// numbered package-major (see the module documentation).
    pub core: usize,
    /// Raw `topology/core_id` from sysfs (repeats across packages).
    pub core_id: usize,
    /// `topology/physical_package_id` (socket). A kernel that reports -1 (unknown)
    /// is taken to mean a single package, 0.
    pub package: usize,
    /// `topology/die_id`, when the kernel publishes a meaningful one.
    pub die: Option<usize>,
    /// `topology/cluster_id`, when the kernel publishes a meaningful one (x86 writes
    /// 65535 when it has no cluster information; that reads as `None`).
    pub cluster: Option<usize>,
    /// NUMA node whose `cpulist` names this CPU, when the machine has NUMA nodes.
    pub numa_node: Option<usize>,
    /// Logical CPUs sharing this physical core (SMT siblings), this one included,
    /// sorted. One entry on a machine without SMT (or a hypervisor hiding it).
    pub siblings: Vec<usize>,
}

/// One NUMA node (`/sys/devices/system/node/nodeN`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NumaNode {
    /// Node number (the N of `nodeN`).
    pub id: usize,
    /// CPUs the node's `cpulist` names, sorted.
    pub cpus: Vec<usize>,
}

/// The CPU topology of one machine (or of a fixture tree).
#[derive(Debug, Clone, Serialize)]
pub struct Topology {
    /// Every present CPU, online and offline, sorted by id.
    pub cpus: Vec<Cpu>,
    /// NUMA nodes sorted by id; empty when the kernel publishes none.
    pub numa_nodes: Vec<NumaNode>,
    /// The root the topology was read under (`/` for this machine).
    pub sysfs_root: PathBuf,
}

/// The headline numbers of a topology, recorded with every result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct TopologySummary {
    /// Present logical CPUs (online and offline).
    pub logical: usize,
    /// Online logical CPUs.
    pub online: usize,
    /// Physical cores with at least one online CPU.
    pub cores: usize,
    /// Packages (sockets) with at least one online CPU.
    pub packages: usize,
    /// NUMA nodes published by the kernel (0 when none are).
    pub numa_nodes: usize,
    /// Threads per core: the largest sibling group (1 without SMT).
    pub smt_ways: usize,
}

/// Why the topology could not be read. Each variant names the file involved.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// A file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// What was being read.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// A file holds something other than what the kernel writes there.
    #[error("{path}: {what} (content: {content:?})")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The trimmed content found.
        content: String,
        /// What was wrong with it.
        what: String,
    },
    /// The cpu directory exists but holds no `cpuN` entry.
    #[error("{path} lists no cpuN directories: is this a sysfs root?")]
    NoCpus {
        /// The directory searched.
        path: PathBuf,
    },
    /// The files disagree with each other (e.g. two CPUs of one core naming
    /// different sibling sets, or a sibling that does not exist).
    #[error("{path}: {what}")]
    Inconsistent {
        /// The file whose content does not fit the rest.
        path: PathBuf,
        /// What does not fit.
        what: String,
    },
}

/// Raw per-CPU facts read from `cpuN/topology` before global core numbering.
struct RawTopology {
    core_id: usize,
    package: usize,
    die: Option<usize>,
    cluster: Option<usize>,
    siblings: Vec<usize>,
    siblings_file: PathBuf,
}

impl Topology {
    /// Reads the topology under `sysfs_root` (`/` for this machine): CPUs from
    /// `root/sys/devices/system/cpu`, NUMA nodes from `root/sys/devices/system/node`.
    pub fn read(sysfs_root: &Path) -> Result<Topology, TopologyError> {
        let cpu_dir = sysfs_root.join("sys/devices/system/cpu");
        let ids = cpu_ids(&cpu_dir)?;
        let online_list = read_optional(&cpu_dir.join("online"))?
            .map(|(path, text)| parse_file_list(&path, &text))
            .transpose()?
            .map(|v| v.into_iter().collect::<BTreeSet<usize>>());

        let mut raw = BTreeMap::new();
        let mut online = BTreeMap::new();
        for &id in &ids {
            let dir = cpu_dir.join(format!("cpu{id}"));
            let is_online = match &online_list {
                Some(list) => list.contains(&id),
                None => match read_optional(&dir.join("online"))? {
                    Some((path, text)) => parse_number(&path, &text)? == 1,
                    None => dir.join("topology").is_dir(),
                },
            };
            online.insert(id, is_online);
            if is_online {
                raw.insert(id, read_cpu_topology(&dir.join("topology"), id)?);
            }
        }
        check_siblings(&raw, &online)?;
        let numa_nodes = read_numa_nodes(&sysfs_root.join("sys/devices/system/node"))?;
        let cores = number_cores(&raw);

        let cpus = ids
            .iter()
            .map(|&id| match raw.get(&id) {
                Some(r) => Cpu {
                    id,
                    online: true,
                    core: cores[&r.siblings[0]],
                    core_id: r.core_id,
                    package: r.package,
                    die: r.die,
                    cluster: r.cluster,
                    numa_node: numa_nodes
                        .iter()
                        .find(|n| n.cpus.contains(&id))
                        .map(|n| n.id),
                    siblings: r.siblings.clone(),
                },
                None => Cpu {
                    id,
                    online: false,
                    core: 0,
                    core_id: 0,
                    package: 0,
                    die: None,
                    cluster: None,
                    numa_node: None,
                    siblings: Vec::new(),
                },
            })
            .collect();
        Ok(Topology {
            cpus,
            numa_nodes,
            sysfs_root: sysfs_root.to_path_buf(),
        })
    }

    /// Reads this machine's topology (`read("/")`).
    pub fn host() -> Result<Topology, TopologyError> {
        Topology::read(Path::new("/"))
    }

    /// The CPU with logical number `id`, online or not; `None` if absent.
    pub fn cpu(&self, id: usize) -> Option<&Cpu> {
        self.cpus
            .binary_search_by_key(&id, |c| c.id)
            .ok()
            .map(|i| &self.cpus[i])
    }

    /// Online CPUs in id order.
    pub fn online(&self) -> impl Iterator<Item = &Cpu> {
        self.cpus.iter().filter(|c| c.online)
    }

    /// Online CPUs of each physical core, indexed by global core number
    /// (`result[c]` lists core `c`'s online siblings, sorted).
    pub fn cores(&self) -> Vec<Vec<usize>> {
        let mut cores = vec![Vec::new(); self.physical_cores()];
        for cpu in self.online() {
            cores[cpu.core].push(cpu.id);
        }
        cores
    }

    /// Threads per core: the size of the largest sibling group (1 without SMT, 0
    /// when no CPU is online).
    pub fn smt_ways(&self) -> usize {
        self.online().map(|c| c.siblings.len()).max().unwrap_or(0)
    }

    /// Physical cores with an online CPU.
    pub fn physical_cores(&self) -> usize {
        self.online().map(|c| c.core + 1).max().unwrap_or(0)
    }

    /// Packages (sockets) with an online CPU.
    pub fn packages(&self) -> usize {
        self.online()
            .map(|c| c.package)
            .collect::<BTreeSet<_>>()
            .len()
    }

    /// The headline numbers recorded with results.
    pub fn summary(&self) -> TopologySummary {
        TopologySummary {
            logical: self.cpus.len(),
            online: self.online().count(),
            cores: self.physical_cores(),
            packages: self.packages(),
            numa_nodes: self.numa_nodes.len(),
            smt_ways: self.smt_ways(),
        }
    }
}

/// The `N`s of the `cpuN` directories under `cpu_dir`, sorted.
fn cpu_ids(cpu_dir: &Path) -> Result<Vec<usize>, TopologyError> {
    let entries = fs::read_dir(cpu_dir).map_err(|source| TopologyError::Read {
        path: cpu_dir.to_path_buf(),
        source,
    })?;
    let mut ids = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| TopologyError::Read {
            path: cpu_dir.to_path_buf(),
            source,
        })?;
        let name = entry.file_name();
        if let Some(id) = name
            .to_str()
            .and_then(|n| n.strip_prefix("cpu"))
            .and_then(|n| n.parse::<usize>().ok())
        {
            ids.push(id);
        }
    }
    if ids.is_empty() {
        return Err(TopologyError::NoCpus {
            path: cpu_dir.to_path_buf(),
        });
    }
    ids.sort_unstable();
    Ok(ids)
}

/// Reads a file that must exist.
fn read_required(path: &Path) -> Result<String, TopologyError> {
    fs::read_to_string(path).map_err(|source| TopologyError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads a file that may be absent: `Ok(None)` when it is.
fn read_optional(path: &Path) -> Result<Option<(PathBuf, String)>, TopologyError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some((path.to_path_buf(), text))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(TopologyError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Parses a file holding one integer, possibly negative.
fn parse_signed(path: &Path, text: &str) -> Result<i64, TopologyError> {
    text.trim().parse().map_err(|_| TopologyError::Parse {
        path: path.to_path_buf(),
        content: text.trim().to_string(),
        what: "expected an integer".to_string(),
    })
}

/// Parses a file holding one non-negative integer.
fn parse_number(path: &Path, text: &str) -> Result<usize, TopologyError> {
    let n = parse_signed(path, text)?;
    usize::try_from(n).map_err(|_| TopologyError::Parse {
        path: path.to_path_buf(),
        content: text.trim().to_string(),
        what: "expected a non-negative integer".to_string(),
    })
}

/// Parses a file holding a CPU list, sorted.
fn parse_file_list(path: &Path, text: &str) -> Result<Vec<usize>, TopologyError> {
    let mut cpus =
        nnb_units::parse_cpu_list(text, nnb_units::MAX_CPUS).map_err(|e| TopologyError::Parse {
            path: path.to_path_buf(),
            content: text.trim().to_string(),
            what: e.to_string(),
        })?;
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Reads an optional id file (`die_id`, `cluster_id`); absent, -1 and x86's 65535
/// ("no such information") all read as `None`.
fn read_optional_id(path: &Path) -> Result<Option<usize>, TopologyError> {
    match read_optional(path)? {
        None => Ok(None),
        Some((path, text)) => {
            let n = parse_signed(&path, &text)?;
            Ok(usize::try_from(n).ok().filter(|&n| n != 0xffff))
        }
    }
}

/// Reads one online CPU's `topology` directory.
fn read_cpu_topology(dir: &Path, id: usize) -> Result<RawTopology, TopologyError> {
    if !dir.is_dir() {
        return Err(TopologyError::Inconsistent {
            path: dir.to_path_buf(),
            what: format!("cpu{id} is online but has no topology directory"),
        });
    }
    let core_cpus = dir.join("core_cpus_list");
    let siblings_file = if core_cpus.exists() {
        core_cpus
    } else {
        dir.join("thread_siblings_list")
    };
    let siblings = parse_file_list(&siblings_file, &read_required(&siblings_file)?)?;
    if !siblings.contains(&id) {
        return Err(TopologyError::Inconsistent {
            path: siblings_file,
            what: format!("the sibling list of cpu{id} does not include cpu{id}"),
        });
    }
    let core_path = dir.join("core_id");
    let package_path = dir.join("physical_package_id");
    let package = parse_signed(&package_path, &read_required(&package_path)?)?;
    Ok(RawTopology {
        core_id: parse_number(&core_path, &read_required(&core_path)?)?,
        package: usize::try_from(package).unwrap_or(0),
        die: read_optional_id(&dir.join("die_id"))?,
        cluster: read_optional_id(&dir.join("cluster_id"))?,
        siblings,
        siblings_file,
    })
}

/// Checks that every sibling named exists, is online and names the same sibling
/// set back: a core is one group, whichever of its CPUs is asked.
fn check_siblings(
    raw: &BTreeMap<usize, RawTopology>,
    online: &BTreeMap<usize, bool>,
) -> Result<(), TopologyError> {
    for (&id, r) in raw {
        for &s in &r.siblings {
            let what = match (online.get(&s), raw.get(&s)) {
                (None, _) => {
                    format!("cpu{id} names cpu{s} as a sibling, but cpu{s} does not exist")
                }
                (Some(false), _) => {
                    format!("cpu{id} names cpu{s} as a sibling, but cpu{s} is offline")
                }
                (Some(true), Some(other)) if other.siblings != r.siblings => format!(
                    "cpu{id} has siblings {} but its sibling cpu{s} has {}",
                    format_list(&r.siblings),
                    format_list(&other.siblings)
                ),
                _ => continue,
            };
            return Err(TopologyError::Inconsistent {
                path: r.siblings_file.clone(),
                what,
            });
        }
    }
    Ok(())
}

/// Numbers the physical cores globally: sibling groups sorted by (package, die,
/// lowest CPU). Returns lowest sibling CPU -> global core index.
fn number_cores(raw: &BTreeMap<usize, RawTopology>) -> BTreeMap<usize, usize> {
    let groups: BTreeSet<(usize, Option<usize>, usize)> = raw
        .values()
        .map(|r| (r.package, r.die, r.siblings[0]))
        .collect();
    groups
        .into_iter()
        .enumerate()
        .map(|(core, (_, _, first))| (first, core))
        .collect()
}

/// Reads `node_dir/nodeN/cpulist` for every node; no node directory means no NUMA
/// information (an empty list), not an error.
fn read_numa_nodes(node_dir: &Path) -> Result<Vec<NumaNode>, TopologyError> {
    let entries = match fs::read_dir(node_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(TopologyError::Read {
                path: node_dir.to_path_buf(),
                source,
            })
        }
    };
    let mut nodes = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| TopologyError::Read {
            path: node_dir.to_path_buf(),
            source,
        })?;
        let name = entry.file_name();
        let Some(id) = name
            .to_str()
            .and_then(|n| n.strip_prefix("node"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let path = entry.path().join("cpulist");
        let cpus = parse_file_list(&path, &read_required(&path)?)?;
        nodes.push(NumaNode { id, cpus });
    }
    nodes.sort_by_key(|n| n.id);
    Ok(nodes)
}
