//! podman as a tenant's runtime: the agent runs in a container `podman run` makes
//! of the same minimal root filesystem as a runc tenant's ([`super::rootfs`]:
//! `--rootfs`, read-only, the bundle's bind mounts as `--volume`s), named as runc's
//! (`nnb-RUNID-TENANT`), its grant given in podman's own terms (`--cpu-period`,
//! `--cpu-quota`, `--cpuset-cpus`, `--memory`, `--device-{read,write}-{iops,bps}`).
//!
//! Found on the issue-28 machine (podman 4.3.1, root, cgroups v1, no
//! CAP_SYS_RESOURCE): podman's default rlimits (nofile 1048576, nproc) are above
//! the host's hard limits and runc refuses to set them, so each container gets
//! `--ulimit nofile=H:H --ulimit nproc=P:P` with the hard limits this process has
//! (`/proc/self/limits`, read at run time), the process limit no higher than the
//! kernel's `pid_max` (podman runs conmon, and so runc, with that as its hard
//! process limit: 32768 here, where the host's is 96365 and any nproc above
//! 32768 is refused); `--cgroup-manager cgroupfs` (no
//! systemd), `--cgroup-parent /nnb-runc/run-PID-N`, the run's cgroup parent that
//! runc tenants use too, so that the shutdown and the sweep of dead runs find it;
//! podman makes the container's cgroup `libpod-HASH` below it (and conmon's
//! `conmon` beside it), which `podman inspect` names (`.State.CgroupPath`): that
//! is what the host-side meter reads and the tenant record names.
//!
//! The agent's address: `podman run` without `--detach` attaches to the
//! container's stdout, so the agent's `listening ADDR` line arrives on the pipe
//! nnb gave podman's stdout, as for a runc or process tenant; that podman process
//! stays until the container ends (`--rm` removes it then).
//!
//! Lifting and restoring (the matrix's unrestricted state): podman 4.3's `podman
//! update` takes no "unlimited" (`--cpu-quota -1` is ignored, `--memory -1`
//! refused, `--memory 0` ignored), so the lift is written to the container's
//! cgroup files (nnb's own lift, as a process tenant's: no quota, no memory
//! limit, no I/O rule, the parent's CPUs), and the restore is `podman update`
//! with the grant (CPU and memory), the I/O throttles written back to the cgroup
//! as for runc. The memory limit is set with `--memory-swap -1`, so that the
//! lift's unlimited memory is not held by a swap limit.
//!
//! Nothing outlives the controller: conmon keeps a container running after the
//! controller dies, so each has the watchdog runc containers have, which runs
//! `podman rm --force --time 0 NAME`; what a dead run left is removed by the
//! sweep ([`remove_dead`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::oci::{Config, Resources, Throttle};
use super::runc::which;

/// The largest output nnb reads from one podman call.
const MAX_OUTPUT: usize = 1 << 20;
/// How long one short podman call (inspect, update, rm) may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The `podman` binary, its version and the rlimits its containers get.
#[derive(Debug, Clone)]
pub struct Podman {
    bin: PathBuf,
    version: String,
    ulimits: Vec<String>,
}

/// What `podman inspect` says of a container.
#[derive(Debug, Clone, PartialEq)]
pub struct Inspect {
    /// Its init process on the host (0 once stopped).
    pub pid: u32,
    /// Its cgroup, under each hierarchy's root (`/nnb-runc/run-PID-N/libpod-HASH`).
    pub cgroup: String,
    /// Its cgroup parent (`/nnb-runc/run-PID-N`: which run made it).
    pub parent: String,
    /// Whether it runs.
    pub running: bool,
}

impl Podman {
    /// The `podman` in `PATH`, the first line of its `--version`, and the
    /// `--ulimit` flags from this process's hard limits; the reason when there is
    /// none, it does not answer, or the limits cannot be read.
    pub fn find() -> Result<Podman, String> {
        let bin = which("podman").ok_or("no podman binary in PATH")?;
        let out = call(&bin, &["--version".into()])?;
        let version = out.lines().next().unwrap_or("").trim().to_string();
        if version.is_empty() {
            return Err(format!("{} --version said nothing", bin.display()));
        }
        let limits = std::fs::read_to_string("/proc/self/limits")
            .map_err(|e| format!("/proc/self/limits: {e}"))?;
        let pid_max = std::fs::read_to_string(PID_MAX)
            .ok()
            .and_then(|t| t.trim().parse().ok());
        Ok(Podman {
            bin,
            version,
            ulimits: ulimit_args(&limits, pid_max)?,
        })
    }

    /// The binary.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// The first line of `podman --version`, e.g. `podman version 4.3.1`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The `--ulimit` flags every container gets (the host's hard limits).
    pub fn ulimits(&self) -> &[String] {
        &self.ulimits
    }

    /// Starts `podman run` (attached, `--rm`) with `args` (the options, the
    /// image-less `--rootfs DIR` and the command), its stdout piped: the agent's
    /// `listening ADDR` line is read from it. Its errors and the agent's go to
    /// nnb's stderr.
    pub fn run_attached(&self, args: &[OsString]) -> std::io::Result<Child> {
        Command::new(&self.bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
    }

    /// Container `name` as `podman inspect` describes it; `None` when podman
    /// knows none.
    pub fn inspect(&self, name: &str) -> Option<Inspect> {
        let format = "{{.State.Pid}}|{{.State.CgroupPath}}|{{.HostConfig.CgroupParent}}|\
                      {{.State.Running}}";
        let out = call(
            &self.bin,
            &[
                "container".into(),
                "inspect".into(),
                "--format".into(),
                format.into(),
                name.into(),
            ],
        )
        .ok()?;
        parse_inspect(&out)
    }

    /// `podman update ARGS... NAME`.
    pub fn update(&self, name: &str, args: &[String]) -> Result<(), String> {
        let mut all: Vec<OsString> = vec!["update".into()];
        all.extend(args.iter().map(OsString::from));
        all.push(name.into());
        call(&self.bin, &all).map(drop)
    }

    /// `podman rm --force --time SECONDS NAME`: SIGTERM, then SIGKILL after
    /// `grace` (whole seconds, rounded up), and the container removed. One podman
    /// does not know is gone already.
    pub fn remove(&self, name: &str, grace: Duration) -> Result<(), String> {
        let secs = grace.as_secs() + u64::from(grace.subsec_nanos() > 0);
        match call(
            &self.bin,
            &[
                "rm".into(),
                "--force".into(),
                "--time".into(),
                secs.to_string().into(),
                name.into(),
            ],
        ) {
            Err(e) if e.contains("no such container") => Ok(()),
            r => r.map(drop),
        }
    }
}

/// The kernel's largest pid (and so the most processes there can be).
const PID_MAX: &str = "/proc/sys/kernel/pid_max";

/// `--ulimit nofile=H:H --ulimit nproc=P:P` from a `/proc/PID/limits` text (the
/// hard limits; `unlimited` is podman's `-1`), the process limit at most
/// `pid_max`.
fn ulimit_args(limits: &str, pid_max: Option<u64>) -> Result<Vec<String>, String> {
    let hard = |row: &str| -> Result<Option<u64>, String> {
        let line = limits
            .lines()
            .find(|l| l.starts_with(row))
            .ok_or_else(|| format!("no {row:?} in /proc/self/limits"))?;
        let value = line[row.len()..]
            .split_whitespace()
            .nth(1)
            .ok_or_else(|| format!("no hard limit in {line:?}"))?;
        match value {
            "unlimited" => Ok(None),
            v => v
                .parse()
                .map(Some)
                .map_err(|_| format!("hard limit {v:?} in {line:?}")),
        }
    };
    let nofile = hard("Max open files")?;
    let nproc = match (hard("Max processes")?, pid_max) {
        (Some(h), Some(m)) => Some(h.min(m)),
        (h, m) => h.or(m),
    };
    let mut args = Vec::new();
    for (name, limit) in [("nofile", nofile), ("nproc", nproc)] {
        let h = limit.map_or("-1".to_string(), |l| l.to_string());
        args.extend(["--ulimit".to_string(), format!("{name}={h}:{h}")]);
    }
    Ok(args)
}

/// `PID|CGROUP|PARENT|RUNNING`, as [`Podman::inspect`] formats it.
fn parse_inspect(out: &str) -> Option<Inspect> {
    let mut parts = out.trim().split('|');
    let pid = parts.next()?.trim().parse().ok()?;
    let cgroup = parts.next()?.trim().to_string();
    let parent = parts.next()?.trim().to_string();
    let running = parts.next()?.trim() == "true";
    Some(Inspect {
        pid,
        cgroup,
        parent,
        running,
    })
}

/// The grant `r` as podman's flags (`podman run` and `podman update` take the
/// same names): CFS period and quota, cpuset, memory (with unlimited swap); an
/// unlimited value (-1) is left out, which is podman's default. With `devices`,
/// the I/O throttles too, each on its device node (`podman update` is not given
/// them: see the module's doc).
pub fn grant_args(r: &Resources, devices: bool) -> Result<Vec<String>, String> {
    let mut args = Vec::new();
    if let Some(cpu) = &r.cpu {
        if let Some(period) = cpu.period {
            args.extend(["--cpu-period".to_string(), period.to_string()]);
        }
        if let Some(quota) = cpu.quota.filter(|&q| q > 0) {
            args.extend(["--cpu-quota".to_string(), quota.to_string()]);
        }
        if let Some(cpus) = &cpu.cpus {
            args.extend(["--cpuset-cpus".to_string(), cpus.clone()]);
        }
    }
    if let Some(m) = r.memory.as_ref().filter(|m| m.limit > 0) {
        args.extend([
            "--memory".to_string(),
            m.limit.to_string(),
            "--memory-swap".to_string(),
            "-1".to_string(),
        ]);
    }
    if let Some(io) = r.block_io.as_ref().filter(|_| devices) {
        for (flag, list) in [
            ("--device-read-iops", &io.read_iops),
            ("--device-write-iops", &io.write_iops),
            ("--device-read-bps", &io.read_bps),
            ("--device-write-bps", &io.write_bps),
        ] {
            for t in list {
                let node = device_node(t)?;
                args.extend([flag.to_string(), format!("{}:{}", node.display(), t.rate)]);
            }
        }
    }
    Ok(args)
}

/// The device node of a throttle's `major:minor` (`/sys/dev/block/M:m/uevent`'s
/// `DEVNAME`, under `/dev`): podman names devices by path.
fn device_node(t: &Throttle) -> Result<PathBuf, String> {
    let uevent = format!("/sys/dev/block/{}:{}/uevent", t.major, t.minor);
    let text = std::fs::read_to_string(&uevent).map_err(|e| format!("{uevent}: {e}"))?;
    let name = text
        .lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .ok_or_else(|| format!("{uevent} names no DEVNAME"))?;
    Ok(Path::new("/dev").join(name.trim()))
}

/// What `podman run` is given for one tenant, besides its grant.
pub struct RunSpec<'a> {
    /// The container's name.
    pub name: &'a str,
    /// Its hostname.
    pub hostname: &'a str,
    /// Its cgroup parent.
    pub cgroup_parent: &'a str,
    /// The tenant's network namespace (`None`: the host's network).
    pub netns: Option<&'a Path>,
    /// The bundle's root filesystem (mount points only).
    pub rootfs: &'a Path,
    /// The bundle's config (its bind mounts, its command line).
    pub config: &'a Config,
}

/// `podman run`'s arguments for `s` with grant flags `grant`: the same container
/// as runc's bundle describes (read-only root, bind mounts, three capabilities,
/// no new privileges, `PATH=/nnb`), attached and removed when it ends.
pub fn run_args(podman: &Podman, s: &RunSpec<'_>, grant: &[String]) -> Vec<OsString> {
    let mut a: Vec<OsString> = ["run", "--rm", "--name", s.name, "--hostname", s.hostname]
        .into_iter()
        .map(OsString::from)
        .collect();
    a.extend(
        [
            "--cgroup-manager",
            "cgroupfs",
            "--cgroup-parent",
            s.cgroup_parent,
            "--read-only",
            "--cap-drop",
            "all",
            "--cap-add",
            "AUDIT_WRITE,KILL,NET_BIND_SERVICE",
            "--security-opt",
            "no-new-privileges",
            "--env",
            "PATH=/nnb",
            "--network",
        ]
        .map(OsString::from),
    );
    a.push(match s.netns {
        Some(ns) => {
            let mut v = OsString::from("ns:");
            v.push(ns);
            v
        }
        None => "host".into(),
    });
    a.extend(podman.ulimits().iter().map(OsString::from));
    a.extend(grant.iter().map(OsString::from));
    for (source, destination, read_only) in s.config.binds() {
        let mut v = source.as_os_str().to_os_string();
        v.push(":");
        v.push(destination);
        v.push(if read_only { ":ro" } else { ":rw" });
        a.push("--volume".into());
        a.push(v);
    }
    a.push("--rootfs".into());
    a.push(s.rootfs.into());
    a.extend(s.config.args().iter().map(OsString::from));
    a
}

/// Removes container `name` of the dead run `run` (`run-PID-N`) when podman knows
/// it as that run's (its cgroup parent is the run's: a live run may reuse the
/// name, e.g. a `--resume` of the same run id).
pub fn remove_dead(podman: &Podman, name: &str, run: &str) {
    let Some(c) = podman.inspect(name) else {
        return;
    };
    if c.parent == format!("/{}/{run}", super::CGROUP_PREFIX) {
        if let Err(e) = podman.remove(name, Duration::ZERO) {
            tracing::warn!("removing a dead run's podman container {name}: {e}");
        }
    }
}

/// Runs `bin ARGS` for at most [`CALL_TIMEOUT`], returning its stdout, or its
/// stderr's last line (or its exit status) when it fails.
fn call(bin: &Path, args: &[OsString]) -> Result<String, String> {
    use std::io::Read;
    let mut child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    // Both pipes are read to their end (podman's outputs are short; the stderr
    // thread keeps a chatty one from blocking).
    let errs = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stderr {
            let _ = s.take(MAX_OUTPUT as u64).read_to_end(&mut buf);
        }
        buf
    });
    if let Some(s) = stdout {
        let _ = s.take(MAX_OUTPUT as u64).read_to_end(&mut out);
    }
    err.extend(errs.join().unwrap_or_default());
    let end = std::time::Instant::now() + CALL_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if std::time::Instant::now() < end => {
                std::thread::sleep(Duration::from_millis(10))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{} gave no answer", bin.display()));
            }
        }
    };
    if status.success() {
        return Ok(String::from_utf8_lossy(&out).into_owned());
    }
    let err = String::from_utf8_lossy(&err);
    let last = err
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    Err(format!("{} {status} ({})", bin.display(), last.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nnb_experiment::tenant::TenantGrant;

    #[test]
    fn ulimits_are_the_hard_limits() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
            Max processes             96365                96365                processes\n\
            Max open files            1024                 20000                files\n";
        assert_eq!(
            ulimit_args(limits, Some(32768)).unwrap(),
            [
                "--ulimit",
                "nofile=20000:20000",
                "--ulimit",
                "nproc=32768:32768"
            ]
        );
        assert_eq!(ulimit_args(limits, None).unwrap()[3], "nproc=96365:96365");
        let unlimited = limits.replace("96365                processes", "unlimited processes");
        assert_eq!(ulimit_args(&unlimited, None).unwrap()[3], "nproc=-1:-1");
        assert_eq!(
            ulimit_args(&unlimited, Some(32768)).unwrap()[3],
            "nproc=32768:32768"
        );
        assert!(ulimit_args("", None).is_err());
    }

    #[test]
    fn inspect_output() {
        assert_eq!(
            parse_inspect("17212|/nnb-runc/run-1-0/libpod-2b4e|/nnb-runc/run-1-0|true\n"),
            Some(Inspect {
                pid: 17212,
                cgroup: "/nnb-runc/run-1-0/libpod-2b4e".into(),
                parent: "/nnb-runc/run-1-0".into(),
                running: true,
            })
        );
        assert_eq!(parse_inspect("Error"), None);
    }

    /// A grant of 0.5 CPU and 256 MiB on CPU 1 in podman's flags; its lift leaves
    /// quota and memory out (podman's "none").
    #[test]
    fn grant_flags_of_a_grant_and_its_lift() {
        let grant = TenantGrant {
            cpu: Some(0.5),
            memory_bytes: Some(256 << 20),
            ..TenantGrant::default()
        };
        let r = Resources::of(&grant, &[1], None);
        assert_eq!(
            grant_args(&r, true).unwrap(),
            [
                "--cpu-period",
                "100000",
                "--cpu-quota",
                "50000",
                "--cpuset-cpus",
                "1",
                "--memory",
                "268435456",
                "--memory-swap",
                "-1"
            ]
        );
        let lifted = grant_args(&super::super::lifted_resources(&r), true).unwrap();
        assert_eq!(lifted[..2], ["--cpu-period", "100000"]);
        assert!(!lifted.iter().any(|a| a == "--cpu-quota" || a == "--memory"));
    }
}
