//! Whether a runtime can run tenants on this host, decided before anything starts
//! (the local provider's preflight: `nnb run`, its `--dry-run` and `--resume`
//! refuse a file naming one that cannot, with the reason, exit 2). Each reason is
//! found by looking at the host, not assumed.

use std::path::Path;

use nnb_format::Runtime;

use crate::provider::TenantSpec;

use super::podman::Podman;
use super::runc::{which, Runc};
use super::sweep::cgroup_mounts;

/// What this nnb launches, for a runtime it does not.
const LAUNCHED: &str =
    "this nnb launches runc and podman containers only: use runtime = \"runc\" or \"podman\"";

/// Where a docker daemon listens.
pub const DOCKER_SOCKET: &str = "/var/run/docker.sock";

/// Why the tenants of `specs` cannot run here: the first tenant whose runtime
/// cannot, with the reason (each runtime looked at once); `None` when all can.
pub fn refusal(specs: &[TenantSpec]) -> Option<String> {
    let mut seen: Vec<Runtime> = Vec::new();
    for s in specs {
        if seen.contains(&s.runtime) {
            continue;
        }
        seen.push(s.runtime);
        if let Some(why) = unavailable(s.runtime) {
            return Some(format!(
                "tenant {} cannot run in {}: {why}",
                s.name, s.runtime
            ));
        }
    }
    None
}

/// Why `runtime` cannot run nnb's tenants here; `None` when it can.
pub fn unavailable(runtime: Runtime) -> Option<String> {
    match runtime {
        Runtime::Process => None,
        Runtime::Runc => runc(),
        Runtime::Crun => crun(cgroup_fstypes()),
        Runtime::Podman => podman(),
        Runtime::Docker => docker(Path::new(DOCKER_SOCKET)),
    }
}

/// runc makes containers as root, and nnb gives it cgroup paths to make.
fn runc() -> Option<String> {
    if !nnb_sys::process::is_root() {
        return Some("runc tenants need root (runc makes their namespaces and cgroups)".into());
    }
    Runc::find().err()
}

/// Whether the host mounts v1 cgroup hierarchies, and a v2 one, from the cgroup
/// mounts' filesystem types.
fn cgroup_fstypes() -> (bool, bool) {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let types: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once(" - ")?.1.split_whitespace().next())
        .collect();
    (types.contains(&"cgroup"), types.contains(&"cgroup2"))
}

/// crun manages cgroups through the unified (v2) hierarchy alone: on a host with
/// v1 controllers mounted (v1 only, or hybrid with a v2 tree beside them) it
/// refuses. Where it could run, nnb does not launch it yet.
fn crun((v1, v2): (bool, bool)) -> Option<String> {
    let mut why = Vec::new();
    if v1 {
        why.push(format!(
            "this host's cgroups are {} ({} cgroup mounts), and crun refuses the v1/hybrid \
             hierarchy: it needs cgroup v2 alone",
            if v2 {
                "hybrid: v1 controllers beside a v2 tree"
            } else {
                "v1"
            },
            cgroup_mounts().len()
        ));
    }
    if which("crun").is_none() {
        why.push("no crun binary in PATH".into());
    }
    if why.is_empty() {
        why.push(LAUNCHED.into());
    }
    Some(format!("crun cannot run tenants here: {}", why.join("; ")))
}

/// podman is probed as nnb launches it ([`super::podman`]): a container of an
/// empty root filesystem (the host's `/usr` and libraries mounted read-only)
/// running `true`, with the host's hard limits as its rlimits (podman's defaults
/// are above them, and runc cannot raise them without CAP_SYS_RESOURCE: "error
/// setting rlimit type 7"), `--cgroup-manager cgroupfs` and a CPU quota and memory
/// limit. Refused with what the probe found when it does not start.
fn podman() -> Option<String> {
    if !nnb_sys::process::is_root() {
        return Some("podman tenants need root (nnb gives podman cgroup parents to make)".into());
    }
    let p = match Podman::find() {
        Ok(p) => p,
        Err(e) => return Some(e),
    };
    let mut flags: Vec<&str> = p.ulimits().iter().map(String::as_str).collect();
    flags.extend([
        "--cgroup-manager",
        "cgroupfs",
        "--cpu-period",
        "100000",
        "--cpu-quota",
        "50000",
        "--memory",
        "268435456",
        "--memory-swap",
        "-1",
    ]);
    probe(p.bin(), &flags).err().map(|e| {
        format!(
            "podman cannot start a container here with `{}`: {e}",
            flags.join(" ")
        )
    })
}

/// How long a podman probe may take.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Runs `true` in a throwaway podman container with `extra` options; its error's
/// last line when it does not start.
fn probe(podman: &Path, extra: &[&str]) -> Result<(), String> {
    let rootfs = tempfile::tempdir().map_err(|e| format!("a probe directory: {e}"))?;
    let t = which("true").ok_or("no `true` binary in PATH to probe with")?;
    let mut cmd = std::process::Command::new(podman);
    cmd.args(["run", "--rm", "--network", "none"]).args(extra);
    for dir in ["/usr", "/lib", "/lib64", "/bin"] {
        if Path::new(dir).exists() {
            cmd.arg("--volume").arg(format!("{dir}:{dir}:ro"));
        }
    }
    let mut child = cmd
        .arg("--rootfs")
        .arg(rootfs.path())
        .arg(&t)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", podman.display()))?;
    let end = std::time::Instant::now() + PROBE_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if std::time::Instant::now() < end => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no answer within {PROBE_TIMEOUT:?}"));
            }
        }
    };
    if status.success() {
        return Ok(());
    }
    let mut err = String::new();
    if let Some(stderr) = child.stderr.take() {
        use std::io::Read;
        let _ = stderr.take(64 << 10).read_to_string(&mut err);
    }
    let last = err
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    Err(format!("{status}: {}", last.trim()))
}

/// docker needs its daemon.
fn docker(socket: &Path) -> Option<String> {
    if !socket.exists() {
        return Some(format!("no docker daemon at {}", socket.display()));
    }
    Some(LAUNCHED.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crun_refuses_a_hybrid_host_with_the_reason() {
        let why = crun((true, true)).unwrap();
        assert!(why.contains("hybrid") && why.contains("v2 alone"), "{why}");
        assert!(crun((true, false)).unwrap().contains("are v1"));
    }

    #[test]
    fn docker_without_its_socket_has_no_daemon() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("docker.sock");
        assert_eq!(
            docker(&sock).unwrap(),
            format!("no docker daemon at {}", sock.display())
        );
        assert_eq!(unavailable(Runtime::Process), None);
    }
}
