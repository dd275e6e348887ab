//! Where each burner thread runs: pin strategies turned into a placement plan
//! (thread -> CPU -> core -> package) against a [`Topology`].
//!
//! Strategies, all walking physical cores in the topology's global core order
//! (package 0's cores, then package 1's; see [`crate::topology`]):
//!
//! - `none`: threads are not pinned; the OS scheduler decides.
//! - `cores`: one thread per physical core first, then the second SMT thread of each
//!   core only after every core has one (round r takes the r-th sibling of every
//!   core). On an m5.metal 48 threads use the 48 cores and no sibling pair; the 49th
//!   lands on cpu 48, cpu 0's sibling. This is the order that shows the SMT knee at
//!   `n/2 + 1` threads. Following package order (rather than interleaving sockets)
//!   keeps the first threads on one socket and its memory, as a compact run would.
//! - `smt-sibling`: both threads of a core before the next core (0, 48, 1, 49, ...
//!   on an m5.metal), so that thread pairs share a core. Only *complete* cores are
//!   filled first: those whose every SMT thread (as many as the host's
//!   [`Topology::smt_ways`]) is online and allowed. A core with a sibling offline or
//!   outside the allowed set would leave a thread alone where a pair was asked for,
//!   so such cores come after every complete core, and a thread that lands on one
//!   is named in the placement's warnings.
//! - `compact`: logical CPU order (0, 1, 2, ...), whatever the cores.
//! - an explicit list (`--cpus 0,2,4-7`): threads take the listed CPUs in order.
//!
//! More threads than usable CPUs is an error unless oversubscription is asked for,
//! in which case the order wraps around (thread i takes CPU `order[i % len]`).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::topology::{format_list, CpuListError, Topology};

/// How threads are assigned to CPUs (`--pin`, or `--cpus` for a list).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum PinStrategy {
    /// Not pinned: the OS decides.
    None,
    /// One thread per physical core first, SMT siblings after every core has one.
    Cores,
    /// Fill every SMT thread of a core before moving to the next core; cores with
    /// every SMT thread usable first, cores with a sibling offline or not allowed last.
    SmtSibling,
    /// Logical CPU order.
    Compact,
    /// Exactly these CPUs, in this order.
    List(Vec<usize>),
}

impl PinStrategy {
    /// The placement when none is named (`nnb cpu --pin`, experiment files, the
    /// agent's background burners): one thread per physical core first.
    pub const DEFAULT: PinStrategy = PinStrategy::Cores;
    /// Its name, as typed (`cores`).
    pub const DEFAULT_NAME: &'static str = "cores";
}

impl FromStr for PinStrategy {
    type Err = PlacementError;

    /// Parses a `--pin` value: `none`, `cores`, `smt-sibling` or `compact`. A CPU list
    /// is given with `--cpus` and parsed by [`parse_cpu_list`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(PinStrategy::None),
            "cores" => Ok(PinStrategy::Cores),
            "smt-sibling" => Ok(PinStrategy::SmtSibling),
            "compact" => Ok(PinStrategy::Compact),
            other => Err(PlacementError::UnknownStrategy(other.to_string())),
        }
    }
}

impl fmt::Display for PinStrategy {
    /// The name as typed on the command line (`cpus:0,2,4-7` for a list).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinStrategy::None => f.write_str("none"),
            PinStrategy::Cores => f.write_str("cores"),
            PinStrategy::SmtSibling => f.write_str("smt-sibling"),
            PinStrategy::Compact => f.write_str("compact"),
            PinStrategy::List(cpus) => {
                let items: Vec<String> = cpus.iter().map(ToString::to_string).collect();
                write!(f, "cpus:{}", items.join(","))
            }
        }
    }
}

/// Why a placement could not be made. Messages are meant for the person who typed
/// the command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// Zero threads asked for.
    #[error("the thread count must be at least 1")]
    ZeroThreads,
    /// More threads than usable CPUs, without oversubscription.
    #[error(
        "{threads} threads but only {available} usable CPUs ({cpus}); \
         use fewer threads or --oversubscribe to share CPUs"
    )]
    TooManyThreads {
        /// Threads asked for.
        threads: usize,
        /// CPUs the strategy may use.
        available: usize,
        /// Those CPUs, as a list.
        cpus: String,
    },
    /// A listed CPU that the machine does not have.
    #[error("CPU {cpu} does not exist (this machine has CPUs {present})")]
    AbsentCpu {
        /// The CPU asked for.
        cpu: usize,
        /// The CPUs present.
        present: String,
    },
    /// A listed CPU that is offline.
    #[error("CPU {cpu} is offline (online CPUs: {online})")]
    OfflineCpu {
        /// The CPU asked for.
        cpu: usize,
        /// The online CPUs.
        online: String,
    },
    /// A listed CPU outside this process's affinity mask (taskset, cgroup cpuset).
    #[error("CPU {cpu} is not allowed for this process (allowed: {allowed}; see taskset or the cgroup cpuset)")]
    NotAllowed {
        /// The CPU asked for.
        cpu: usize,
        /// The allowed CPUs.
        allowed: String,
    },
    /// A CPU listed twice.
    #[error("CPU {cpu} is listed twice; use --oversubscribe to put several threads on a CPU")]
    DuplicateCpu {
        /// The repeated CPU.
        cpu: usize,
    },
    /// An empty CPU list.
    #[error("the CPU list is empty")]
    EmptyList,
    /// A CPU list that does not parse.
    #[error("bad CPU list {input:?}: {source}")]
    BadList {
        /// What was typed.
        input: String,
        /// What is wrong with it.
        source: CpuListError,
    },
    /// A `--pin` value that names no strategy.
    #[error(
        "unknown pin strategy {0:?}: expected none, cores, smt-sibling or compact (or --cpus LIST)"
    )]
    UnknownStrategy(String),
    /// No online CPU is in the allowed set.
    #[error("no usable CPU: none of the online CPUs ({online}) is in the allowed set ({allowed})")]
    NoUsableCpu {
        /// The online CPUs.
        online: String,
        /// The allowed CPUs.
        allowed: String,
    },
}

/// Parses a user's CPU list (`--cpus 0,2,4-7`), keeping its order, with the CPU
/// numbers bounded by [`nnb_units::MAX_CPUS`] before expansion. Empty lists and CPUs
/// listed twice are rejected.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, PlacementError> {
    let cpus = nnb_units::parse_cpu_list(s, nnb_units::MAX_CPUS).map_err(|source| {
        PlacementError::BadList {
            input: s.to_string(),
            source,
        }
    })?;
    if cpus.is_empty() {
        return Err(PlacementError::EmptyList);
    }
    let mut seen = std::collections::BTreeSet::new();
    for &cpu in &cpus {
        if !seen.insert(cpu) {
            return Err(PlacementError::DuplicateCpu { cpu });
        }
    }
    Ok(cpus)
}

/// Where one thread runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Slot {
    /// Thread index, 0-based.
    pub thread: usize,
    /// Logical CPU the thread is pinned to; `None` when not pinned (`none`).
    pub cpu: Option<usize>,
    /// Global physical-core index of that CPU.
    pub core: Option<usize>,
    /// Package (socket) of that CPU.
    pub package: Option<usize>,
}

/// A placement plan: one slot per thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// The strategy's name (as [`PinStrategy`]'s `Display` writes it).
    pub strategy: String,
    /// One slot per thread, in thread order.
    pub slots: Vec<Slot>,
    /// Where the placement falls short of what the strategy promises, one sentence
    /// each (e.g. `smt-sibling` threads that could not get a full sibling set);
    /// empty when it keeps the promise.
    pub warnings: Vec<String>,
}

/// Plans where `threads` threads run under `strategy`.
///
/// `allowed` is the set of CPUs the process may use: online CPUs intersected with
/// [`allowed_cpus`] on the real host, every online CPU for a fixture topology. CPUs
/// in `allowed` that are absent or offline in `topo` are ignored. With
/// `oversubscribe`, more threads than usable CPUs wrap around the CPU order.
pub fn plan(
    topo: &Topology,
    strategy: &PinStrategy,
    threads: usize,
    allowed: &[usize],
    oversubscribe: bool,
) -> Result<Placement, PlacementError> {
    if threads == 0 {
        return Err(PlacementError::ZeroThreads);
    }
    let usable = |id: usize| topo.cpu(id).is_some_and(|c| c.online) && allowed.contains(&id);
    let online: Vec<usize> = topo.online().map(|c| c.id).collect();
    // `partial`: CPUs of cores without a full usable sibling set (smt-sibling only).
    let (order, partial): (Vec<usize>, Vec<usize>) = match strategy {
        PinStrategy::List(cpus) => (check_list(topo, cpus, allowed, &online)?, Vec::new()),
        PinStrategy::Compact | PinStrategy::None => (
            online.iter().copied().filter(|&id| usable(id)).collect(),
            Vec::new(),
        ),
        PinStrategy::Cores => {
            let cores: Vec<Vec<usize>> = topo
                .cores()
                .into_iter()
                .map(|core| core.into_iter().filter(|&id| usable(id)).collect())
                .collect();
            let ways = cores.iter().map(Vec::len).max().unwrap_or(0);
            let order = (0..ways)
                .flat_map(|round| {
                    cores
                        .iter()
                        .filter_map(move |core| core.get(round).copied())
                })
                .collect();
            (order, Vec::new())
        }
        PinStrategy::SmtSibling => smt_sibling_order(topo, usable),
    };
    if order.is_empty() {
        return Err(PlacementError::NoUsableCpu {
            online: format_list(&online),
            allowed: format_list(allowed),
        });
    }
    if threads > order.len() && !oversubscribe {
        return Err(PlacementError::TooManyThreads {
            threads,
            available: order.len(),
            cpus: format_list(&order),
        });
    }
    let pinned = *strategy != PinStrategy::None;
    let slots: Vec<Slot> = (0..threads)
        .map(|thread| {
            let cpu = topo.cpu(order[thread % order.len()]).filter(|_| pinned);
            Slot {
                thread,
                cpu: cpu.map(|c| c.id),
                core: cpu.map(|c| c.core),
                package: cpu.map(|c| c.package),
            }
        })
        .collect();
    let warnings: Vec<String> =
        Vec::from_iter(lone_thread_warning(&slots, &partial, topo.smt_ways()));
    for w in &warnings {
        tracing::warn!("{w}");
    }
    Ok(Placement {
        strategy: strategy.to_string(),
        slots,
        warnings,
    })
}

/// The `smt-sibling` CPU order: the usable CPUs of every complete core (all of the
/// host's [`Topology::smt_ways`] SMT threads online and allowed) in core order, then
/// the usable CPUs of the other cores in core order. Returns the order and the CPUs
/// of those incomplete cores.
///
/// The kernel lists only online siblings (an offline sibling's core reads as a
/// smaller core), so a core is measured against the host's widest core, not its own
/// sibling list.
fn smt_sibling_order(topo: &Topology, usable: impl Fn(usize) -> bool) -> (Vec<usize>, Vec<usize>) {
    let ways = topo.smt_ways();
    let (complete, partial): (Vec<Vec<usize>>, Vec<Vec<usize>>) = topo
        .cores()
        .into_iter()
        .map(|core| {
            core.into_iter()
                .filter(|&id| usable(id))
                .collect::<Vec<_>>()
        })
        .partition(|core| core.len() == ways);
    let partial: Vec<usize> = partial.into_iter().flatten().collect();
    let mut order: Vec<usize> = complete.into_iter().flatten().collect();
    order.extend_from_slice(&partial);
    (order, partial)
}

/// The warning for threads placed on CPUs of incomplete cores (`partial`, from
/// [`smt_sibling_order`]); `None` when no thread is.
fn lone_thread_warning(slots: &[Slot], partial: &[usize], ways: usize) -> Option<String> {
    let (threads, cpus): (Vec<usize>, Vec<usize>) = slots
        .iter()
        .filter_map(|s| s.cpu.filter(|c| partial.contains(c)).map(|c| (s.thread, c)))
        .unzip();
    if threads.is_empty() {
        return None;
    }
    let plural = |n: usize, one: &'static str, many: &'static str| if n == 1 { one } else { many };
    let distinct = cpus.iter().collect::<std::collections::BTreeSet<_>>().len();
    Some(format!(
        "smt-sibling: {} {} could not get a full sibling set (no free core with all {ways} \
         SMT threads online and allowed): {} {} {} a sibling offline or not allowed",
        plural(threads.len(), "thread", "threads"),
        format_list(&threads),
        plural(distinct, "CPU", "CPUs"),
        format_list(&cpus),
        plural(distinct, "has", "have"),
    ))
}

/// Checks every CPU of an explicit list: present, online, allowed, not repeated.
fn check_list(
    topo: &Topology,
    cpus: &[usize],
    allowed: &[usize],
    online: &[usize],
) -> Result<Vec<usize>, PlacementError> {
    if cpus.is_empty() {
        return Err(PlacementError::EmptyList);
    }
    let mut seen = std::collections::BTreeSet::new();
    for &cpu in cpus {
        match topo.cpu(cpu) {
            None => {
                let present: Vec<usize> = topo.cpus.iter().map(|c| c.id).collect();
                return Err(PlacementError::AbsentCpu {
                    cpu,
                    present: format_list(&present),
                });
            }
            Some(c) if !c.online => {
                return Err(PlacementError::OfflineCpu {
                    cpu,
                    online: format_list(online),
                })
            }
            Some(_) if !allowed.contains(&cpu) => {
                return Err(PlacementError::NotAllowed {
                    cpu,
                    allowed: format_list(allowed),
                })
            }
            Some(_) if !seen.insert(cpu) => return Err(PlacementError::DuplicateCpu { cpu }),
            Some(_) => {}
        }
    }
    Ok(cpus.to_vec())
}

/// The CPUs this process may run on (`sched_getaffinity`), sorted. Empty if the
/// kernel refuses to say (logged): a placement then finds no CPU allowed and says so.
/// CPUs numbered 1024 and above are not seen (`cpu_set_t` holds 1024).
pub fn allowed_cpus() -> Vec<usize> {
    nnb_sys::affinity::allowed_cpus().unwrap_or_else(|e| {
        tracing::warn!("sched_getaffinity failed: {e}");
        Vec::new()
    })
}

/// Renders a placement as a plain-text table (thread, CPU, core, package, and the
/// CPU's SMT siblings), for `--dry-run` and logs; `-` marks an unpinned thread. The
/// placement's warnings follow the table, one `warning: ` line each.
/// Long placements are printed in full: a user asking where 96 threads land wants
/// all 96 rows.
pub fn render_placement(p: &Placement, topo: &Topology) -> String {
    let dash = || "-".to_string();
    let opt = |v: Option<usize>| v.map_or_else(dash, |v| v.to_string());
    let mut rows = vec![[
        "thread".to_string(),
        "cpu".to_string(),
        "core".to_string(),
        "package".to_string(),
        "siblings".to_string(),
    ]];
    for s in &p.slots {
        let siblings = s
            .cpu
            .and_then(|id| topo.cpu(id))
            .map_or_else(dash, |c| format_list(&c.siblings));
        rows.push([
            s.thread.to_string(),
            opt(s.cpu),
            opt(s.core),
            opt(s.package),
            siblings,
        ]);
    }
    let widths: Vec<usize> = (0..5)
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = format!("placement: {} ({} threads)\n", p.strategy, p.slots.len());
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, &w)| format!("{cell:>w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    for w in &p.warnings {
        out.push_str("warning: ");
        out.push_str(w);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_placement_is_named_as_it_parses() {
        assert_eq!(PinStrategy::DEFAULT.to_string(), PinStrategy::DEFAULT_NAME);
        assert_eq!(
            PinStrategy::DEFAULT_NAME.parse::<PinStrategy>(),
            Ok(PinStrategy::DEFAULT)
        );
    }

    #[test]
    fn parses_strategy_names() {
        assert_eq!("none".parse(), Ok(PinStrategy::None));
        assert_eq!("cores".parse(), Ok(PinStrategy::Cores));
        assert_eq!("smt-sibling".parse(), Ok(PinStrategy::SmtSibling));
        assert_eq!("compact".parse(), Ok(PinStrategy::Compact));
        let err = "spread".parse::<PinStrategy>().unwrap_err();
        assert!(err.to_string().contains("spread"), "{err}");
        for s in ["none", "cores", "smt-sibling", "compact"] {
            assert_eq!(
                s.parse::<PinStrategy>().map(|p| p.to_string()),
                Ok(s.to_string())
            );
        }
        assert_eq!(PinStrategy::List(vec![4, 0]).to_string(), "cpus:4,0");
    }

    #[test]
    fn parses_user_cpu_lists() {
        assert_eq!(parse_cpu_list("0,2,4-7"), Ok(vec![0, 2, 4, 5, 6, 7]));
        assert_eq!(parse_cpu_list("3,1"), Ok(vec![3, 1]));
        assert_eq!(parse_cpu_list(""), Err(PlacementError::EmptyList));
        assert_eq!(
            parse_cpu_list("1,0-2"),
            Err(PlacementError::DuplicateCpu { cpu: 1 })
        );
        let err = parse_cpu_list("0,a").unwrap_err();
        assert!(matches!(err, PlacementError::BadList { .. }));
        assert!(err.to_string().contains("\"a\""), "{err}");
    }

    #[test]
    fn allowed_cpus_includes_the_current_cpu() {
        let now = nnb_sys::affinity::current_cpu().unwrap_or(usize::MAX);
        let allowed = allowed_cpus();
        assert!(!allowed.is_empty());
        assert!(allowed.contains(&now), "{now} not in {allowed:?}");
    }
}
