//! What the root tests of runc tenants share: whether runc can be used here, the
//! containers runc knows, and what a controller's runs left behind (their process
//! tenants' cgroups `nnb/run-PID...`, their containers' cgroups
//! `nnb-runc/run-PID-N` and their bundles).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nnb_controller::provider::runtime::{BUNDLES, CGROUP_PREFIX};
use nnb_testkit::{require, require_root};

/// Where the cgroup hierarchies are mounted (v1: one per controller; v2: the root).
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// Root and runc, or skip (fail under CI); `what` names the test's need.
pub(crate) fn runc_or_skip(what: &str) -> bool {
    let runc = Command::new("runc")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    require_root(what) && require(runc, "runc is not installed")
}

/// The ids of the containers runc knows (`runc list --quiet`).
pub(crate) fn runc_containers() -> Vec<String> {
    let out = Command::new("runc")
        .args(["list", "--quiet"])
        .output()
        .unwrap_or_else(|e| panic!("runc list: {e}"));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Whether `name` is `run-PID` or `run-PID-N`.
fn is_run_of(name: &str, pid: u32) -> bool {
    let Some(rest) = name.strip_prefix(&format!("run-{pid}")) else {
        return false;
    };
    rest.is_empty()
        || rest
            .strip_prefix('-')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// What controller `pid`'s runs left: their cgroups under `nnb/` (process tenants)
/// and `nnb-runc/` (containers) in every hierarchy, and their bundle directories.
pub(crate) fn leftovers(pid: u32) -> Vec<PathBuf> {
    let root = Path::new(CGROUP_ROOT);
    let mounts: Vec<PathBuf> = std::iter::once(root.to_path_buf())
        .chain(
            std::fs::read_dir(root)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path()),
        )
        .collect();
    let parents = mounts
        .iter()
        .flat_map(|m| [m.join("nnb"), m.join(CGROUP_PREFIX)])
        .chain([PathBuf::from(BUNDLES)]);
    parents
        .flat_map(|dir| std::fs::read_dir(dir).into_iter().flatten().flatten())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| is_run_of(n, pid))
        })
        .collect()
}
