//! Container runtimes as tenants of the local provider (issue 28): a tenant whose
//! `runtime` is `runc` runs its agent, and everything the agent starts, inside a
//! container runc makes from an OCI bundle nnb prepares ([`oci`], [`rootfs`]), its
//! grant given to runc in OCI terms (`linux.resources`), so that what is measured
//! is runc's enforcement, not nnb's cgroups. The host-side usage reads the cgroup
//! runc made (`cgroupsPath` = `/nnb-runc/run-PID-N/ID`, named by nnb so that
//! accounting and the sweep find it); the tenant's record names the runtime, its
//! version, the container and that cgroup.
//!
//! The agent's address: `runc run --detach` passes its stdio through to the
//! container's process when no terminal is asked for, so the agent's `listening
//! ADDR` line arrives on the pipe nnb gave runc's stdout, exactly as for a process
//! tenant, and runc exits once the container runs. (A file in a bind-mounted
//! directory would need polling and a second format; the pipe is what every
//! agent already writes.)
//!
//! Nothing outlives the controller: a detached container is no child of nnb, so
//! the parent-death signal of process tenants does not reach it. Each container
//! has a watchdog instead, `sh` in a process group of its own, reading a pipe whose
//! only writer is the controller: when the controller dies, even by `kill -9`, the
//! kernel closes the pipe, the read ends and the watchdog deletes the container
//! (`runc delete --force`) and its bundle. What is left then (the run's bundle
//! directory and its cgroup parents) goes at the next local launch, or the
//! resume's ([`sweep::sweep_dead`]). A normal shutdown stops each agent with
//! `SIGTERM` (so it ends its jobs), deletes the container, and removes the bundles
//! and cgroups.
//!
//! Which runtimes run on this host is decided before anything starts
//! ([`check::unavailable`]).
//!
//! A tenant whose `runtime` is `podman` runs the same way in a container `podman
//! run` makes of the same root filesystem, its grant in podman's flags, under the
//! same cgroup parent and with the same watchdog ([`podman`]).

pub mod check;
pub mod oci;
pub mod podman;
mod rootfs;
pub mod runc;
pub mod sweep;

use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nnb_burn::topology::{format_list, Topology};
use nnb_experiment::tenant::TenantGrant;
use nnb_format::{Runtime, RuntimeRecord};
use nnb_sys::cgroup::{block_device_of, Cgroup, Grant, Hierarchy, IoLimit};

use super::{ProviderError, TenantSpec};
use oci::Resources;
use podman::Podman;
use runc::Runc;

/// Where the bundles live: `BUNDLES/run-PID-N/CONTAINER/` (root only, as runc).
pub const BUNDLES: &str = "/run/nnb/bundles";
/// The cgroup directory (in every hierarchy) under which the containers' are made
/// (runc's and podman's).
pub const CGROUP_PREFIX: &str = "nnb-runc";
/// The longest container id nnb makes (a cgroup directory's name is at most 255).
const MAX_ID: usize = 128;
/// How often a stopping container's state is looked at.
const STOP_POLL: Duration = Duration::from_millis(20);

/// The fleets with containers this process has made: the `N` of `run-PID-N`.
static RUNS: AtomicU64 = AtomicU64::new(0);

/// The containers of one local fleet.
#[derive(Debug)]
pub struct Containers {
    runc: Runc,
    /// podman, found when a tenant runs in it.
    podman: Option<Podman>,
    /// The tenants that run in podman (the others in runc).
    in_podman: Vec<String>,
    /// What container ids start with after `nnb-`: the run id, or `PID-N`.
    key: String,
    /// `run-PID-N`: the bundles' directory and the cgroups' parent.
    run: String,
    list: Vec<Container>,
}

#[derive(Debug)]
struct Container {
    tenant: String,
    /// runc or podman.
    runtime: Runtime,
    id: String,
    /// What the tenant is granted, on `cpus`, its I/O limits on `disk`.
    grant: TenantGrant,
    cpus: Vec<usize>,
    disk: Option<(u32, u32)>,
    resources: Resources,
    /// The CPUs of the unrestricted state (the host's online CPUs).
    lifted: bool,
    /// Started and not stopped since.
    running: bool,
    /// The watchdog's stdin: when it closes, the watchdog deletes the container.
    watchdog: Option<(Child, ChildStdin)>,
}

/// One tenant's container to start.
pub struct Start<'a> {
    /// The tenant.
    pub tenant: &'a str,
    /// The agent's arguments after the binary, the token file being
    /// [`oci::AGENT_TOKEN`].
    pub agent_args: Vec<String>,
    /// nnb's binary on the host.
    pub binary: &'a Path,
    /// The agent's token file on the host.
    pub token_file: &'a Path,
    /// The tenant's network namespace (`None`: the host's network, on loopback).
    pub netns: Option<&'a str>,
    /// The CPUs the tenant was carved.
    pub cpus: &'a [usize],
    /// What it is granted.
    pub grant: &'a TenantGrant,
    /// Where its I/O limits apply when its grant names no `io_dir`, bind-mounted.
    pub io_dir: Option<&'a Path>,
}

/// `s` with every character a runc id does not take (`[A-Za-z0-9_+.-]`) replaced:
/// `@` (of `TENANT@TECHNOLOGY`) by `+`, which no tenant name holds, anything else
/// by `_`.
fn safe(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '@' => '+',
            c if c.is_ascii_alphanumeric() || "_+.-".contains(c) => c,
            _ => '_',
        })
        .collect()
}

impl Containers {
    /// Finds runc (and podman when a tenant of `specs` runs in it), removes what
    /// dead runs left ([`sweep::sweep_dead`]) and makes this fleet's bundle
    /// directory. Containers are named `nnb-RUNID-TENANT` (`nnb-PID-N-TENANT`
    /// without a run id).
    pub fn create(run_id: Option<&str>, specs: &[TenantSpec]) -> Result<Containers, ProviderError> {
        let runc =
            Runc::find().map_err(|e| ProviderError::Invalid(format!("runc tenants: {e}")))?;
        let in_podman: Vec<String> = specs
            .iter()
            .filter(|s| s.runtime == Runtime::Podman)
            .map(|s| s.name.clone())
            .collect();
        let podman = match in_podman.is_empty() {
            true => None,
            false => Some(
                Podman::find()
                    .map_err(|e| ProviderError::Invalid(format!("podman tenants: {e}")))?,
            ),
        };
        sweep::sweep_dead();
        let n = RUNS.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let run = format!("run-{pid}-{n}");
        let key = match run_id.filter(|r| !r.is_empty()) {
            Some(r) => safe(r),
            None => format!("{pid}-{n}"),
        };
        let dir = Path::new(BUNDLES).join(&run);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(ProviderError::io(format!("creating {}", dir.display())))?;
        Ok(Containers {
            runc,
            podman,
            in_podman,
            key,
            run,
            list: Vec::new(),
        })
    }

    fn dir(&self) -> PathBuf {
        Path::new(BUNDLES).join(&self.run)
    }

    fn bundle(&self, c: &Container) -> PathBuf {
        self.dir().join(&c.id)
    }

    fn cgroups_path(&self, c: &Container) -> String {
        format!("/{CGROUP_PREFIX}/{}/{}", self.run, c.id)
    }

    fn find(&self, tenant: &str) -> Option<&Container> {
        self.list.iter().find(|c| c.tenant == tenant)
    }

    /// Whether `tenant` runs in a container of this fleet.
    pub fn has(&self, tenant: &str) -> bool {
        self.find(tenant).is_some()
    }

    /// Writes `s`'s bundle and starts its container with `runc run --detach`;
    /// returns runc's process, whose stdout is the agent's (read its address from
    /// it, then reap it). A tenant started before is started again in a fresh
    /// container of the same id, with its grant (or lifted state) as it was.
    pub fn start(&mut self, s: &Start<'_>) -> Result<Child, ProviderError> {
        let index = match self.list.iter().position(|c| c.tenant == s.tenant) {
            Some(i) => i,
            None => {
                let disk = if s.grant.limits_io() {
                    let dir = s.grant.io_dir.as_deref().or(s.io_dir).ok_or_else(|| {
                        ProviderError::Invalid(format!(
                            "tenant {}'s I/O limits name no disk: add io_dir to its grant",
                            s.tenant
                        ))
                    })?;
                    Some(block_device_of(dir).map_err(|e| {
                        ProviderError::Invalid(format!(
                            "tenant {}'s I/O limits on {}: {e}",
                            s.tenant,
                            dir.display()
                        ))
                    })?)
                } else {
                    None
                };
                let mut id = format!("nnb-{}-{}", self.key, safe(s.tenant));
                id.truncate(MAX_ID);
                let runtime = match self.in_podman.iter().any(|t| t == s.tenant) {
                    true => Runtime::Podman,
                    false => Runtime::Runc,
                };
                self.list.push(Container {
                    tenant: s.tenant.to_string(),
                    runtime,
                    id,
                    grant: s.grant.clone(),
                    cpus: s.cpus.to_vec(),
                    disk,
                    resources: Resources::of(s.grant, s.cpus, disk),
                    lifted: false,
                    running: false,
                    watchdog: None,
                });
                self.list.len() - 1
            }
        };
        let c = &self.list[index];
        let bundle = self.bundle(c);
        let io_dir = s.grant.io_dir.as_deref().or(s.io_dir);
        let hostname: String = safe(s.tenant).replace('+', "-").chars().take(63).collect();
        let spec = oci::Spec {
            hostname: &hostname,
            agent_args: s.agent_args.clone(),
            binary: s.binary,
            token_file: s.token_file,
            io_dir,
            netns: s.netns.map(|ns| Path::new("/var/run/netns").join(ns)),
            cgroups_path: self.cgroups_path(c),
            resources: if c.lifted {
                lifted_resources(&c.resources)
            } else {
                c.resources.clone()
            },
        };
        let config = spec.config();
        rootfs::write_bundle(&bundle, &config)?;
        let (launcher, watchdog) = match (c.runtime, &self.podman) {
            (Runtime::Podman, Some(p)) => {
                let grant = podman::grant_args(&spec.resources, true).map_err(|e| {
                    ProviderError::Invalid(format!("tenant {}'s I/O limits: {e}", s.tenant))
                })?;
                let parent = format!("/{CGROUP_PREFIX}/{}", self.run);
                let run = podman::RunSpec {
                    name: &c.id,
                    hostname: &hostname,
                    cgroup_parent: &parent,
                    netns: spec.netns.as_deref(),
                    rootfs: &bundle.join("rootfs"),
                    config: &config,
                };
                let remove = [p.bin().as_os_str(), "rm".as_ref(), "--force".as_ref()];
                let watchdog = watchdog(&remove, &["--time", "0", &c.id], &bundle)?;
                let launcher = p
                    .run_attached(&podman::run_args(p, &run, &grant))
                    .map_err(|e| ProviderError::AgentStart {
                        tenant: s.tenant.to_string(),
                        message: format!("cannot run {}: {e}", p.bin().display()),
                    })?;
                (launcher, watchdog)
            }
            _ => {
                let delete = [self.runc.bin().as_os_str(), "delete".as_ref()];
                let watchdog = watchdog(&delete, &["--force", &c.id], &bundle)?;
                let launcher = self.runc.run_detached(&bundle, &c.id).map_err(|e| {
                    ProviderError::AgentStart {
                        tenant: s.tenant.to_string(),
                        message: format!("cannot run {}: {e}", self.runc.bin().display()),
                    }
                })?;
                (launcher, watchdog)
            }
        };
        tracing::debug!(tenant = s.tenant, container = %c.id, "container started");
        let c = &mut self.list[index];
        c.running = true;
        c.watchdog = Some(watchdog);
        Ok(launcher)
    }

    /// `c`'s podman container as podman describes it (`None` for a runc one).
    fn inspect(&self, c: &Container) -> Option<podman::Inspect> {
        let p = self
            .podman
            .as_ref()
            .filter(|_| c.runtime == Runtime::Podman)?;
        p.inspect(&c.id)
    }

    /// The tenant record's runtime: runc or podman, its version, the container and
    /// cgroup.
    pub fn record(&self, tenant: &str) -> Option<RuntimeRecord> {
        let c = self.find(tenant)?;
        if let (Runtime::Podman, Some(p)) = (c.runtime, &self.podman) {
            return Some(RuntimeRecord {
                runtime: Runtime::Podman,
                version: Some(p.version().to_string()),
                container: Some(c.id.clone()),
                cgroup: self.inspect(c).map(|i| i.cgroup).filter(|g| !g.is_empty()),
            });
        }
        Some(RuntimeRecord {
            runtime: Runtime::Runc,
            version: Some(self.runc.version().to_string()),
            container: Some(c.id.clone()),
            cgroup: Some(self.cgroups_path(c)),
        })
    }

    /// The host pid of `tenant`'s agent (its container's init) while it runs.
    pub fn pid(&self, tenant: &str) -> Option<u32> {
        let c = self.find(tenant).filter(|c| c.running)?;
        if c.runtime == Runtime::Podman {
            return self
                .inspect(c)
                .filter(|i| i.running)
                .map(|i| i.pid)
                .filter(|&p| p > 0);
        }
        self.runc.state(&c.id).map(|s| s.pid).filter(|&p| p > 0)
    }

    /// The host pids of the running containers' agents.
    pub fn pids(&self) -> Vec<u32> {
        self.list
            .iter()
            .filter_map(|c| self.pid(&c.tenant))
            .collect()
    }

    /// The cgroup runc (or podman) made for `tenant`'s running container (what
    /// the host-side usage reads).
    pub fn cgroup(&self, tenant: &str) -> Option<Cgroup> {
        let c = self.find(tenant).filter(|c| c.running)?;
        let rel = match c.runtime {
            Runtime::Podman => {
                self.inspect(c)
                    .filter(|i| i.running && !i.cgroup.is_empty())?
                    .cgroup
            }
            _ => {
                self.pid(tenant)?;
                self.cgroups_path(c)
            }
        };
        // It exists (the container runs): `create` only opens it.
        Hierarchy::detect()
            .and_then(|h| h.create(Path::new(rel.trim_start_matches('/'))))
            .map_err(|e| tracing::warn!("tenant {tenant}'s container cgroup {rel}: {e}"))
            .ok()
    }

    /// Lifts the grants of the tenants in `lifted` and restores everyone else's,
    /// through `runc update` (a stopped container takes its state at its next
    /// start). `runc update` has no flag for I/O throttles (and writes back the ones
    /// its container started with): a container with I/O limits has them written
    /// to its cgroup after it (the files runc wrote them to at its start, with the
    /// grant's other values as `runc update` just set them). A podman container's
    /// lift is written to its cgroup, its restore is `podman update` ([`podman`]).
    pub fn set_lifted(&mut self, lifted: &[String]) -> Result<(), ProviderError> {
        let run = self.run.clone();
        let cgroups: Vec<Option<String>> = self
            .list
            .iter()
            .map(|c| {
                let changes = lifted.contains(&c.tenant) != c.lifted;
                changes.then(|| self.inspect(c)).flatten().map(|i| i.cgroup)
            })
            .collect();
        for (c, cgroup) in self.list.iter_mut().zip(cgroups) {
            let lift = lifted.contains(&c.tenant);
            if lift == c.lifted {
                continue;
            }
            let in_podman = c.runtime == Runtime::Podman;
            if c.running && in_podman && !lift {
                let p = self.podman.as_ref().ok_or_else(|| {
                    ProviderError::Invalid(format!("tenant {} has no podman", c.tenant))
                })?;
                podman::grant_args(&c.resources, false)
                    .and_then(|args| p.update(&c.id, &args))
                    .map_err(|e| {
                        ProviderError::Invalid(format!(
                            "restoring tenant {}'s grant: {e}",
                            c.tenant
                        ))
                    })?;
            } else if c.running && !in_podman {
                let target = if lift {
                    lifted_resources(&c.resources)
                } else {
                    c.resources.clone()
                };
                self.runc
                    .update(&c.id, &update_args(&target))
                    .map_err(|e| {
                        ProviderError::Invalid(format!(
                            "{} tenant {}'s grant: {e}",
                            if lift { "lifting" } else { "restoring" },
                            c.tenant
                        ))
                    })?;
            }
            if c.running && (c.resources.block_io.is_some() || (in_podman && lift)) {
                let rel = match (in_podman, cgroup) {
                    (true, Some(g)) => g.trim_start_matches('/').to_string(),
                    (true, None) => {
                        return Err(ProviderError::Invalid(format!(
                            "tenant {}'s podman container has no cgroup",
                            c.tenant
                        )))
                    }
                    (false, _) => format!("{CGROUP_PREFIX}/{run}/{}", c.id),
                };
                let grant = if lift {
                    Grant::default()
                } else {
                    cgroup_grant(c)
                };
                Hierarchy::detect()
                    .and_then(|h| h.create(Path::new(&rel)))
                    .and_then(|cg| cg.apply(&grant))
                    .map_err(|e| {
                        ProviderError::Invalid(format!(
                            "{} tenant {}'s I/O limits: {e}",
                            if lift { "lifting" } else { "restoring" },
                            c.tenant
                        ))
                    })?;
            }
            c.lifted = lift;
        }
        Ok(())
    }

    /// Stops the containers of the tenants `going` says yes to: `SIGTERM` to their
    /// agents (so each ends its jobs), up to `grace` for them to exit, then `runc
    /// delete --force` (`podman rm --force --time GRACE`, which does both), the
    /// bundle and the watchdog.
    pub fn stop(&mut self, going: impl Fn(&str) -> bool, grace: Duration) {
        let stopping: Vec<usize> = (0..self.list.len())
            .filter(|&i| self.list[i].running && going(&self.list[i].tenant))
            .collect();
        for &i in stopping
            .iter()
            .filter(|&&i| self.list[i].runtime != Runtime::Podman)
        {
            if let Err(e) = self.runc.kill(&self.list[i].id, "TERM") {
                tracing::debug!("SIGTERM to container {}: {e}", self.list[i].id);
            }
        }
        let deadline = Instant::now() + grace;
        let stopped = |c: &Container| {
            c.runtime == Runtime::Podman
                || self
                    .runc
                    .state(&c.id)
                    .map_or(true, |s| s.status == "stopped")
        };
        while Instant::now() < deadline && !stopping.iter().all(|&i| stopped(&self.list[i])) {
            std::thread::sleep(STOP_POLL);
        }
        for &i in &stopping {
            let bundle = self.bundle(&self.list[i]);
            let c = &mut self.list[i];
            let removed = match (c.runtime, &self.podman) {
                (Runtime::Podman, Some(p)) => p.remove(&c.id, grace),
                _ => self.runc.delete(&c.id),
            };
            if let Err(e) = removed {
                tracing::warn!("removing container {}: {e}", c.id);
            }
            if let Err(e) = std::fs::remove_dir_all(&bundle) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!("removing bundle {}: {e}", bundle.display());
                }
            }
            if let Some((mut child, stdin)) = c.watchdog.take() {
                let _ = child.kill();
                drop(stdin);
                let _ = child.wait();
            }
            c.running = false;
        }
    }

    /// Stops every container (with `grace`), then removes the run's cgroup parents
    /// in every cgroup mount and its bundle directory.
    pub fn remove(mut self, grace: Duration) {
        self.remove_all(grace);
    }

    fn remove_all(&mut self, grace: Duration) {
        self.stop(|_| true, grace);
        for mount in sweep::cgroup_mounts() {
            let prefix = mount.join(CGROUP_PREFIX);
            sweep::remove_cgroup_tree(&prefix.join(&self.run), 0);
            // Another run's cgroups keep it.
            let _ = std::fs::remove_dir(&prefix);
        }
        let dir = self.dir();
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!("removing {}: {e}", dir.display());
            }
        }
        self.list.clear();
    }
}

impl Drop for Containers {
    fn drop(&mut self) {
        if !self.list.is_empty() {
            self.remove_all(Duration::ZERO);
        }
    }
}

/// `c`'s grant as nnb's cgroup writer takes it (for its I/O limits, which `runc
/// update` cannot restore).
fn cgroup_grant(c: &Container) -> Grant {
    let g = &c.grant;
    Grant {
        cpus: Some(c.cpus.clone()),
        cpu_quota: g.cpu,
        memory_bytes: g.memory_bytes,
        io: c
            .disk
            .map(|device| IoLimit {
                device,
                read_iops: g.read_iops,
                write_iops: g.write_iops,
                read_bytes_per_s: g.read_bytes_per_s,
                write_bytes_per_s: g.write_bytes_per_s,
            })
            .into_iter()
            .collect(),
    }
}

/// The unrestricted state of `granted`: no quota, no memory limit, no I/O limits,
/// the host's online CPUs (as nnb's own lift gives a process tenant its parent's).
fn lifted_resources(granted: &Resources) -> Resources {
    let online = Topology::host()
        .map(|t| t.online().map(|c| c.id).collect::<Vec<_>>())
        .unwrap_or_default();
    Resources {
        cpu: granted.cpu.as_ref().map(|_| oci::Cpu {
            quota: Some(-1),
            period: Some(oci::PERIOD_US),
            cpus: (!online.is_empty()).then(|| format_list(&online)),
        }),
        memory: granted.memory.as_ref().map(|_| oci::Memory { limit: -1 }),
        block_io: None,
    }
}

/// `runc update`'s flags for `r` (CPU and memory; a resource `r` leaves out is
/// left as it is).
fn update_args(r: &Resources) -> Vec<String> {
    let mut args = Vec::new();
    if let Some(cpu) = &r.cpu {
        if let Some(period) = cpu.period {
            args.extend(["--cpu-period".to_string(), period.to_string()]);
        }
        args.extend([
            "--cpu-quota".to_string(),
            cpu.quota.unwrap_or(-1).to_string(),
        ]);
        if let Some(cpus) = &cpu.cpus {
            args.extend(["--cpuset-cpus".to_string(), cpus.clone()]);
        }
    }
    if let Some(m) = &r.memory {
        args.extend(["--memory".to_string(), m.limit.to_string()]);
    }
    args
}

/// Starts a container's watchdog: `sh`, in a process group of its own (a
/// terminal's Ctrl-C is the controller's to handle), waiting on a pipe only this
/// process writes; when the pipe closes (this process is gone), it runs `remove`
/// followed by `args` (`runc delete --force ID`, `podman rm --force --time 0
/// NAME`) and removes the bundle. Returns it with the pipe's end to keep.
fn watchdog(
    remove: &[&std::ffi::OsStr],
    args: &[&str],
    bundle: &Path,
) -> Result<(Child, ChildStdin), ProviderError> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"read _; "$@"; rm -rf -- "$0""#)
        .arg(bundle)
        .args(remove)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(ProviderError::io("starting a container's watchdog (sh)"))?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| ProviderError::Invalid("the watchdog's stdin was not piped".into()))?;
    // Nothing is written before the end; flushing checks the pipe is there.
    stdin
        .flush()
        .map_err(ProviderError::io("starting a container's watchdog (sh)"))?;
    Ok((child, stdin))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_ids_are_what_runc_takes() {
        assert_eq!(safe("a@runc"), "a+runc");
        assert_eq!(safe("20261128-0755 my/run"), "20261128-0755_my_run");
        assert_eq!(safe("nb-1.x_y"), "nb-1.x_y");
    }

    /// Lifting gives `runc update` no quota (-1), no memory limit (-1) and every
    /// online CPU; restoring gives the grant back.
    #[test]
    fn update_flags_of_a_grant_and_its_lift() {
        let grant = TenantGrant {
            cpu: Some(0.5),
            memory_bytes: Some(256 << 20),
            ..TenantGrant::default()
        };
        let r = Resources::of(&grant, &[1], None);
        assert_eq!(
            update_args(&r),
            [
                "--cpu-period",
                "100000",
                "--cpu-quota",
                "50000",
                "--cpuset-cpus",
                "1",
                "--memory",
                "268435456"
            ]
        );
        let lifted = update_args(&lifted_resources(&r));
        assert_eq!(lifted[..4], ["--cpu-period", "100000", "--cpu-quota", "-1"]);
        assert_eq!(lifted[lifted.len() - 2..], ["--memory", "-1"]);
    }
}
