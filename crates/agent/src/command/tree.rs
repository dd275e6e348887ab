//! A command's process tree: found, stopped and reaped, so that nothing it started
//! is left running once its job ends.
//!
//! A process belongs to the tree when it is in the command's process group (the
//! command is started as the leader of a group of its own), when it carries the
//! job's marker in its environment (every descendant inherits it, also one that
//! left the group with `setsid` and was orphaned), when it was seen in the tree
//! before (by pid and start time, so a reused pid is not taken for it), or when its
//! parent belongs to it (the `/proc/PID/stat` parent links). The agent is a child
//! subreaper ([`nnb_sys::process::set_child_subreaper`]): an orphan of the tree is
//! re-parented to it, not to init, and is reaped here.
//!
//! Limits: a process that both cleared its environment and left the group, after
//! its parent ended, is found only if the tree was scanned while its parent lived;
//! an orphan that left the group and ended before any scan stays a zombie of the
//! agent (it runs nothing).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::time::{Duration, Instant};

use nnb_sys::process::{reap, signal, signal_group, Signal};

/// The environment variable carrying a command job's marker.
pub(super) const MARKER_VAR: &str = "NNB_COMMAND_JOB";

/// How often a stop looks at the tree again.
const POLL: Duration = Duration::from_millis(10);

/// Most rounds of `SIGKILL` a stop sends (a process that forks between a scan and
/// the kill is caught by the next round; each round is one [`POLL`]).
const KILL_ROUNDS: usize = 500;

/// Most bytes of a process's environment read to find the marker.
const MAX_ENVIRON: u64 = 1 << 20;

/// One process as `/proc/PID/stat` describes it.
#[derive(Debug, Clone, Copy)]
struct Stat {
    pid: u32,
    ppid: u32,
    pgrp: u32,
    /// `Z` for a zombie, `X` for a dead one.
    state: char,
    /// Clock ticks after boot at which it started: with the pid, its identity.
    start: u64,
}

impl Stat {
    /// Whether it still runs (anything but a zombie or a dead process).
    fn alive(&self) -> bool {
        !matches!(self.state, 'Z' | 'X')
    }
}

/// Reads `/proc/PID/stat` (fields after the command name's closing parenthesis:
/// state 3, ppid 4, pgrp 5, starttime 22).
fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    Some(Stat {
        pid,
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// Every process of this pid namespace.
fn every_process() -> Vec<Stat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(stat)
        .collect()
}

/// Whether process `pid`'s environment has `entry` (`NAME=value`).
fn has_entry(pid: u32, entry: &[u8]) -> bool {
    let Ok(file) = std::fs::File::open(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let mut env = Vec::new();
    if file.take(MAX_ENVIRON).read_to_end(&mut env).is_err() {
        return false;
    }
    env.split(|b| *b == 0).any(|e| e == entry)
}

/// How a stop went.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stopped {
    /// Processes of the tree that were signalled (the command's own included).
    pub signalled: usize,
    /// Of those, the ones still running after the grace, sent `SIGKILL`.
    pub killed: usize,
}

/// A running command's tree.
#[derive(Debug)]
pub(super) struct Tree {
    /// The command's process: its group's id; the job's waiting thread reaps it.
    leader: u32,
    /// `MARKER_VAR=marker`, as it appears in `/proc/PID/environ`.
    entry: Vec<u8>,
    /// The leader's start time: no process of the tree started before it.
    since: Option<u64>,
    /// Every process seen in the tree, by pid, with its start time.
    seen: BTreeMap<u32, u64>,
    /// This agent's pid: the parent of the orphans it adopted.
    agent: u32,
}

impl Tree {
    /// The tree of the command `leader`, started with `MARKER_VAR=marker`.
    pub(super) fn new(leader: u32, marker: &str) -> Tree {
        let since = stat(leader).map(|s| s.start);
        Tree {
            leader,
            entry: format!("{MARKER_VAR}={marker}").into_bytes(),
            since,
            seen: since.map(|s| (leader, s)).into_iter().collect(),
            agent: std::process::id(),
        }
    }

    /// The processes of the tree now, zombies included.
    fn scan(&mut self) -> Vec<Stat> {
        let all = every_process();
        let mut members: BTreeSet<u32> = BTreeSet::new();
        for p in &all {
            let recent = self.since.map_or(true, |s| p.start >= s);
            let known = self.seen.get(&p.pid) == Some(&p.start);
            let grouped = p.pgrp == self.leader && recent;
            if known || grouped || (recent && p.alive() && has_entry(p.pid, &self.entry)) {
                members.insert(p.pid);
            }
        }
        // The descendants of members, through parent links, to a fixed point.
        loop {
            let before = members.len();
            for p in &all {
                if members.contains(&p.ppid) && p.ppid != self.agent {
                    members.insert(p.pid);
                }
            }
            if members.len() == before {
                break;
            }
        }
        let tree: Vec<Stat> = all
            .into_iter()
            .filter(|p| members.contains(&p.pid))
            .collect();
        for p in &tree {
            self.seen.insert(p.pid, p.start);
        }
        tree
    }

    /// Reaps the tree's zombies that are this agent's children (adopted orphans),
    /// never the leader (its own thread waits for it).
    fn reap_adopted(&self, tree: &[Stat]) {
        for p in tree {
            if !p.alive() && p.ppid == self.agent && p.pid != self.leader {
                if let Err(e) = reap(p.pid) {
                    tracing::debug!(pid = p.pid, "cannot reap an adopted process: {e}");
                }
            }
        }
    }

    /// The processes of the tree still running, after reaping its ended orphans.
    fn running(&mut self) -> Vec<Stat> {
        let tree = self.scan();
        self.reap_adopted(&tree);
        tree.into_iter().filter(Stat::alive).collect()
    }

    /// Stops the whole tree: `SIGTERM` to its group and to each of its processes,
    /// then, for whatever still runs after `grace`, `SIGKILL` until nothing runs;
    /// its orphans are reaped. Returns once no process of the tree runs (or after
    /// [`KILL_ROUNDS`] rounds of `SIGKILL`, which only a process the kernel cannot
    /// end, e.g. one in uninterruptible sleep, outlasts).
    pub(super) fn stop(&mut self, grace: Duration) -> Stopped {
        let deadline = Instant::now() + grace;
        let mut termed: BTreeSet<u32> = BTreeSet::new();
        let mut killed: BTreeSet<u32> = BTreeSet::new();
        let mut group_termed = false;
        loop {
            let running = self.running();
            if running.is_empty() {
                return self.stopped(&termed, &killed);
            }
            if !group_termed {
                // ESRCH: the group has no process left; its leavers get their own.
                let _ = signal_group(self.leader, Signal::Term);
                group_termed = true;
            }
            for p in running {
                if termed.insert(p.pid) {
                    let _ = signal(p.pid, Signal::Term);
                }
            }
            if Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(POLL);
        }
        for _ in 0..KILL_ROUNDS {
            let running = self.running();
            if running.is_empty() {
                break;
            }
            let _ = signal_group(self.leader, Signal::Kill);
            for p in running {
                let _ = signal(p.pid, Signal::Kill);
                termed.insert(p.pid);
                killed.insert(p.pid);
            }
            std::thread::sleep(POLL);
        }
        let left = self.running();
        if !left.is_empty() {
            let pids: Vec<u32> = left.iter().map(|p| p.pid).collect();
            tracing::warn!(?pids, "processes of a command survived SIGKILL");
        }
        self.stopped(&termed, &killed)
    }

    fn stopped(&self, termed: &BTreeSet<u32>, killed: &BTreeSet<u32>) -> Stopped {
        Stopped {
            signalled: termed.len(),
            killed: killed.len(),
        }
    }
}
