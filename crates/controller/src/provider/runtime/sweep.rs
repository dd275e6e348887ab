//! What a fleet of containers leaves on the host, found by name and taken down: its
//! bundles under [`BUNDLES`]`/run-PID-N/`, its containers (runc knows them by the
//! bundle) and its cgroups `nnb-runc/run-PID-N` in every cgroup mount (runc makes
//! the container's cgroup in each hierarchy the host mounts, not only in the five
//! nnb uses). A fleet removes its own at shutdown; those of a controller killed
//! with `-9` (PID dead) are removed by the next local launch, as the process
//! tenants' cgroups are (`Hierarchy::sweep_dead`); a podman container of a dead
//! run (named as its bundle, its cgroup parent the run's) goes with them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::podman::{self, Podman};
use super::runc::Runc;
use super::{BUNDLES, CGROUP_PREFIX};

/// The largest `/proc/self/mountinfo` read.
const MAX_MOUNTINFO: usize = 1 << 20;
/// The deepest cgroup nesting a sweep walks below a run's cgroup.
const MAX_DEPTH: usize = 8;
/// How long killed processes get to leave a cgroup before it is left for later.
const WAIT: Duration = Duration::from_secs(1);

/// The pid in a run's name, `run-<pid>-<n>`; None for any other name.
pub fn run_pid(name: &str) -> Option<u32> {
    let (pid, n) = name.strip_prefix("run-")?.split_once('-')?;
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !number(pid) || !number(n) {
        return None;
    }
    pid.parse().ok().filter(|&p| p > 0)
}

/// Whether the controller that named a run `name` is dead (and not this one).
fn dead(name: &str) -> bool {
    run_pid(name)
        .is_some_and(|pid| pid != std::process::id() && !nnb_sys::process::process_exists(pid))
}

/// Every cgroup mount point of this host (v1 controllers, named hierarchies and
/// the v2 tree), from `/proc/self/mountinfo`.
pub fn cgroup_mounts() -> Vec<PathBuf> {
    let text = std::fs::read("/proc/self/mountinfo").unwrap_or_default();
    let text = String::from_utf8_lossy(&text[..text.len().min(MAX_MOUNTINFO)]).into_owned();
    parse_cgroup_mounts(&text)
}

/// The mount points of `cgroup` and `cgroup2` filesystems in a mountinfo text.
fn parse_cgroup_mounts(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let fstype = right.split_whitespace().next()?;
            let mount = left.split_whitespace().nth(4)?;
            matches!(fstype, "cgroup" | "cgroup2").then(|| PathBuf::from(mount))
        })
        .collect()
}

/// Removes the dead runs' containers, bundles and cgroups; returns how many runs
/// it found. runc is looked for only when a dead run's bundles are there (where it
/// is not installed nothing runs, but directories may still be left).
pub fn sweep_dead() -> usize {
    let mut runs = 0;
    let mut runc: Option<Option<Runc>> = None;
    let mut podman: Option<Option<Podman>> = None;
    for entry in std::fs::read_dir(BUNDLES).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !dead(&name) {
            continue;
        }
        runs += 1;
        let dir = entry.path();
        let runc = runc.get_or_insert_with(|| Runc::find().ok());
        let podman = podman.get_or_insert_with(|| Podman::find().ok());
        for c in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let id = c.file_name().to_string_lossy().into_owned();
            if let Some(p) = podman.as_ref() {
                podman::remove_dead(p, &id, &name);
            }
            let Some(runc) = runc.as_ref() else { continue };
            // Only the container made from this very bundle (an id can be reused).
            if runc.state(&id).is_some_and(|s| s.bundle == c.path()) {
                if let Err(e) = runc.delete(&id) {
                    tracing::warn!("removing a dead run's container {id}: {e}");
                }
            }
        }
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            tracing::warn!("removing a dead run's bundles {}: {e}", dir.display());
        }
    }
    for mount in cgroup_mounts() {
        let prefix = mount.join(CGROUP_PREFIX);
        for entry in std::fs::read_dir(&prefix).into_iter().flatten().flatten() {
            if dead(&entry.file_name().to_string_lossy()) {
                remove_cgroup_tree(&entry.path(), 0);
            }
        }
        let _ = std::fs::remove_dir(&prefix);
    }
    if runs > 0 {
        tracing::info!("removed the containers, bundles and cgroups of {runs} dead runs");
    }
    runs
}

/// Removes the cgroup `dir` of one mount with everything below it, deepest first,
/// asking what still runs in it to end (SIGTERM); what cannot go is logged and left.
pub fn remove_cgroup_tree(dir: &Path, depth: usize) {
    if depth > MAX_DEPTH || !dir.is_dir() {
        return;
    }
    for sub in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if sub.file_type().is_ok_and(|t| t.is_dir()) {
            remove_cgroup_tree(&sub.path(), depth + 1);
        }
    }
    let start = Instant::now();
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) if start.elapsed() < WAIT => {
                let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
                for pid in procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()) {
                    if pid != std::process::id() {
                        let _ = nnb_sys::process::terminate(pid);
                    }
                }
                tracing::debug!("{}: {e}", dir.display());
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => {
                tracing::warn!("cannot remove the cgroup {}: {e}", dir.display());
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_names() {
        assert_eq!(run_pid("run-12-0"), Some(12));
        for other in ["run-12", "run-0-1", "run--1", "run-1-", "run-a-1", "x-1-2"] {
            assert_eq!(run_pid(other), None, "{other}");
        }
        // Above the kernel's largest pid_max: never a live process.
        assert!(dead("run-4194304-0"));
        assert!(!dead(&format!("run-{}-0", std::process::id())));
        assert!(!dead("other"));
    }

    #[test]
    fn cgroup_mounts_of_a_hybrid_host() {
        let text = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
            32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
            40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n\
            41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(
            parse_cgroup_mounts(text),
            [
                "/sys/fs/cgroup/cpu",
                "/sys/fs/cgroup/systemd",
                "/sys/fs/cgroup/unified"
            ]
            .map(PathBuf::from)
        );
    }
}
