//! Taking cgroups down: killing what runs in them, waiting until they are empty,
//! removing the directories bottom-up; and sweeping the leftovers of dead runs.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{fs, stat, CgroupError, Hierarchy};

/// How long killed processes get to leave their cgroup.
const WAIT: Duration = Duration::from_secs(1);
/// How often the wait looks again.
const POLL: Duration = Duration::from_millis(10);
/// The most cgroups one teardown walks (nnb makes a handful per run).
const MAX_CGROUPS: usize = 4096;
/// The deepest nesting one teardown walks.
const MAX_DEPTH: usize = 32;

/// Removes the cgroup at each of `tops` (the same cgroup in each mounted
/// controller) with everything below it: SIGKILLs their processes (v2: through
/// `cgroup.kill` too), waits up to [`WAIT`] until every `cgroup.procs` is empty,
/// then removes the directories deepest first. Directories already gone are fine.
pub(super) fn remove_tree(tops: &[PathBuf]) -> Result<(), CgroupError> {
    let mut dirs = Vec::new();
    for top in tops {
        walk(top, 0, &mut dirs)?;
    }
    if dirs.is_empty() {
        return Ok(());
    }
    let me = std::process::id();
    if let Some((_, dir)) = procs_of(&dirs)?.into_iter().find(|&(pid, _)| pid == me) {
        return Err(CgroupError::HoldsSelf {
            pid: me,
            path: dir.to_path_buf(),
        });
    }
    for top in tops {
        let kill = top.join("cgroup.kill");
        if kill.exists() {
            fs::write(&kill, "1")?;
        }
    }
    let start = Instant::now();
    loop {
        let left = procs_of(&dirs)?;
        if left.is_empty() {
            break;
        }
        if start.elapsed() >= WAIT {
            return Err(CgroupError::Busy {
                path: dirs[0].clone(),
                pids: left.into_iter().map(|(pid, _)| pid).collect(),
                waited_ms: WAIT.as_millis() as u64,
            });
        }
        for (pid, dir) in left {
            kill_in(pid, dir)?;
        }
        std::thread::sleep(POLL);
    }
    // Deepest first: a walk lists parents before their children.
    for dir in dirs.iter().rev() {
        rmdir(dir, start)?;
    }
    Ok(())
}

/// Appends `dir` and the cgroups below it, parents first; nothing when `dir` is gone.
fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<(), CgroupError> {
    if !dir.is_dir() {
        return Ok(());
    }
    if depth > MAX_DEPTH || out.len() >= MAX_CGROUPS {
        return Err(fs::malformed(
            dir,
            format!("more than {MAX_CGROUPS} cgroups or {MAX_DEPTH} levels below"),
        ));
    }
    out.push(dir.to_path_buf());
    for sub in fs::subdirs(dir)? {
        walk(&sub, depth + 1, out)?;
    }
    Ok(())
}

/// The processes in the cgroups `dirs`, each with its cgroup; none in a cgroup
/// that is gone.
fn procs_of(dirs: &[PathBuf]) -> Result<Vec<(u32, &Path)>, CgroupError> {
    let mut out = Vec::new();
    for dir in dirs {
        match fs::parse(&dir.join("cgroup.procs"), stat::pids) {
            Err(CgroupError::Read { source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
            r => out.extend(r?.into_iter().map(|pid| (pid, dir.as_path()))),
        }
    }
    Ok(out)
}

/// SIGKILLs `pid`, found in the cgroup `dir`; one that is gone already is fine, and
/// this very process is refused (should it have joined since the first look).
fn kill_in(pid: u32, dir: &Path) -> Result<(), CgroupError> {
    if pid == std::process::id() {
        return Err(CgroupError::HoldsSelf {
            pid,
            path: dir.to_path_buf(),
        });
    }
    match signal(pid, libc::SIGKILL) {
        Err(e) if e.raw_os_error() != Some(libc::ESRCH) => Err(CgroupError::Kill {
            pid,
            path: dir.to_path_buf(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// Removes the (empty) cgroup `dir`, retrying while the kernel still calls it busy
/// (a killed process's exit can finish after it left `cgroup.procs`) until
/// [`WAIT`] after `start`. Gone already is fine.
fn rmdir(dir: &Path, start: Instant) -> Result<(), CgroupError> {
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && start.elapsed() < WAIT => {
                std::thread::sleep(POLL);
            }
            Err(source) => {
                return Err(CgroupError::Remove {
                    path: dir.to_path_buf(),
                    source,
                })
            }
        }
    }
}

/// Sends `sig` to process `pid` (`kill`); 0 only checks that it exists.
fn signal(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: kill takes a positive pid (one process, never a group) and a signal
    // number; it touches no memory of ours.
    crate::cvt(unsafe { libc::kill(pid, sig) })?;
    Ok(())
}

/// The pid in a run directory's name, `run-<pid>` or `run-<pid>-<n>` (the `n`th
/// run of one process), None for any other name.
fn run_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("run-")?;
    let (digits, nth) = match rest.split_once('-') {
        Some((pid, nth)) => (pid, Some(nth)),
        None => (rest, None),
    };
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !number(digits) || nth.is_some_and(|n| !number(n)) {
        return None;
    }
    digits.parse().ok().filter(|&p| p > 0)
}

/// [`Hierarchy::sweep_dead`]: the `run-<pid>` and `run-<pid>-<n>` cgroups under
/// `prefix` whose pid is not alive, removed with everything below them; their
/// paths relative to the hierarchy, sorted.
pub(super) fn sweep_dead(h: &Hierarchy, prefix: &Path) -> Result<Vec<PathBuf>, CgroupError> {
    let mut dead = BTreeSet::new();
    for mount in h.distinct_mounts() {
        for dir in fs::subdirs(&mount.join(prefix))? {
            let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if run_pid(name).is_some_and(|pid| !crate::process::process_exists(pid)) {
                dead.insert(prefix.join(name));
            }
        }
    }
    for rel in &dead {
        let tops: Vec<PathBuf> = h.distinct_mounts().iter().map(|m| m.join(rel)).collect();
        remove_tree(&tops)?;
    }
    Ok(dead.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_names() {
        assert_eq!(run_pid("run-1234"), Some(1234));
        assert_eq!(run_pid("run-4194304"), Some(4_194_304));
        assert_eq!(run_pid("run-1234-0"), Some(1234));
        assert_eq!(run_pid("run-1234-17"), Some(1234));
        for other in [
            "run-",
            "run-0",
            "run-0-1",
            "run-+5",
            "run-12a",
            "run-12-",
            "run-12-a",
            "run-12-1-2",
            "run--1",
            "rune-12",
            "12",
            "run-99999999999",
        ] {
            assert_eq!(run_pid(other), None, "{other}");
        }
    }

    #[test]
    fn a_gone_cgroup_is_removed_already() {
        let t = crate::cgroup::tests::TempDir::new("gone");
        remove_tree(&[t.path().join("absent")]).expect("nothing to remove");
    }
}
