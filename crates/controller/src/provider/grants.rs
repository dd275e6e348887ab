//! A local fleet's tenants in cgroups: each tenant's agent (and every process and
//! thread it starts) runs in `nnb/run-PID-N/TENANT`, where PID is the controller's
//! and N counts the fleets it made (two fleets of one process, such as tests in
//! parallel threads, never share a run's cgroups nor remove each other's),
//! with the tenant's grant enforced (its cpuset, CPU quota, memory limit, I/O
//! limits), lifted for the steps that want the tenant unrestricted, and read by the
//! host-side usage meter.
//!
//! Nothing is left behind: the fleet removes its cgroups after killing its agents,
//! and a fleet that died with its controller (`kill -9`) leaves a `run-PID-N` whose
//! PID is dead, which the next local launch (a resume, or any run) removes first.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use nnb_sys::cgroup::{block_device_of, Cgroup, CgroupError, Grant, Hierarchy, IoLimit};

use super::ProviderError;
use nnb_experiment::tenant::TenantGrant;

/// Where nnb's cgroups live in each controller's hierarchy.
const PREFIX: &str = "nnb";

/// The fleets this process has given cgroups so far: the `N` of `run-PID-N`.
static RUNS: AtomicU64 = AtomicU64::new(0);

/// One tenant's cgroup and what it is granted there.
#[derive(Debug)]
struct TenantCgroup {
    name: String,
    cgroup: Cgroup,
    grant: Grant,
    lifted: bool,
}

/// The cgroups of a local fleet's tenants, created with their grants and removed
/// by [`TenantCgroups::remove`] (or on drop).
#[derive(Debug)]
pub struct TenantCgroups {
    /// `nnb` itself: removed at the end when no other run is in it.
    prefix: Option<Cgroup>,
    run: Option<Cgroup>,
    tenants: Vec<TenantCgroup>,
}

/// A tenant to place in a cgroup: its name, CPUs and grant.
pub struct Placement<'a> {
    /// The tenant.
    pub name: &'a str,
    /// The CPUs it was carved (its cpuset when its grant limits anything).
    pub cpus: &'a [usize],
    /// What it is granted.
    pub grant: &'a TenantGrant,
}

fn cgroup_error(what: &str) -> impl FnOnce(CgroupError) -> ProviderError + '_ {
    move |e| ProviderError::Invalid(format!("{what}: {e}"))
}

impl TenantCgroups {
    /// Creates a cgroup per tenant under `nnb/run-PID-N` with its grant, after
    /// removing dead runs' leftovers. `io_dir` is where I/O limits apply for
    /// grants without their own `io_dir`.
    pub fn create(
        tenants: &[Placement<'_>],
        io_dir: Option<&Path>,
    ) -> Result<TenantCgroups, ProviderError> {
        let hierarchy = Hierarchy::detect().map_err(cgroup_error(
            "tenants with grants (or host-side usage) need cgroups, run as root",
        ))?;
        match hierarchy.sweep_dead(Path::new(PREFIX)) {
            Ok(removed) => {
                for r in removed {
                    tracing::info!("removed a dead run's cgroup {}", r.display());
                }
            }
            Err(e) => tracing::warn!("cannot remove dead runs' cgroups: {e}"),
        }
        let n = RUNS.fetch_add(1, Ordering::Relaxed);
        let rel = PathBuf::from(PREFIX).join(format!("run-{}-{n}", std::process::id()));
        let mut out = TenantCgroups {
            prefix: hierarchy.create(Path::new(PREFIX)).ok(),
            run: Some(
                hierarchy
                    .create(&rel)
                    .map_err(cgroup_error("creating the run's cgroup"))?,
            ),
            tenants: Vec::with_capacity(tenants.len()),
        };
        for t in tenants {
            let grant = grant(t, io_dir)?;
            let cgroup = hierarchy
                .create(&rel.join(t.name))
                .map_err(cgroup_error(&format!(
                    "creating tenant {}'s cgroup",
                    t.name
                )))?;
            // Recorded before applying, so that a failure still removes it.
            out.tenants.push(TenantCgroup {
                name: t.name.to_string(),
                cgroup,
                grant,
                lifted: false,
            });
            let last = &out.tenants[out.tenants.len() - 1];
            last.cgroup
                .apply(&last.grant)
                .map_err(cgroup_error(&format!(
                    "granting tenant {} its resources",
                    t.name
                )))?;
        }
        Ok(out)
    }

    /// Moves process `pid` (a tenant's agent) into `tenant`'s cgroup.
    pub fn add(&self, tenant: &str, pid: u32) -> Result<(), ProviderError> {
        match self.tenants.iter().find(|t| t.name == tenant) {
            Some(t) => t.cgroup.add_process(pid).map_err(cgroup_error(&format!(
                "moving tenant {tenant}'s agent into its cgroup"
            ))),
            None => Ok(()),
        }
    }

    /// Lifts the grants of the tenants in `lifted` and enforces everyone else's.
    pub fn set_lifted(&mut self, lifted: &[String]) -> Result<(), ProviderError> {
        for t in &mut self.tenants {
            let lift = lifted.contains(&t.name);
            if lift == t.lifted {
                continue;
            }
            let done = if lift {
                t.cgroup.lift()
            } else {
                t.cgroup.apply(&t.grant)
            };
            done.map_err(cgroup_error(&format!(
                "{} tenant {}'s grant",
                if lift { "lifting" } else { "restoring" },
                t.name
            )))?;
            t.lifted = lift;
        }
        Ok(())
    }

    /// `tenant`'s cgroup.
    pub fn cgroup(&self, tenant: &str) -> Option<&Cgroup> {
        self.tenants
            .iter()
            .find(|t| t.name == tenant)
            .map(|t| &t.cgroup)
    }

    /// Removes every cgroup (killing what is still inside), the run's last, and
    /// `nnb` when no other run is in it.
    pub fn remove(mut self) -> Result<(), ProviderError> {
        self.remove_all()
    }

    fn remove_all(&mut self) -> Result<(), ProviderError> {
        let mut first = Ok(());
        for t in self.tenants.drain(..) {
            if let Err(e) = t.cgroup.remove() {
                first = first.and(Err(ProviderError::Invalid(format!(
                    "removing tenant {}'s cgroup: {e}",
                    t.name
                ))));
            }
        }
        if let Some(run) = self.run.take() {
            if let Err(e) = run.remove() {
                first = first.and(Err(ProviderError::Invalid(format!(
                    "removing the run's cgroup: {e}"
                ))));
            }
        }
        // Only an empty directory goes: another run's cgroups keep it (and their
        // processes are not this run's to kill).
        for dir in self.prefix.take().iter().flat_map(Cgroup::dirs) {
            let _ = std::fs::remove_dir(dir);
        }
        first
    }
}

impl Drop for TenantCgroups {
    fn drop(&mut self) {
        if let Err(e) = self.remove_all() {
            tracing::warn!("{e}");
        }
    }
}

/// The cgroup grant of a tenant: its cpuset when anything is granted, its quota,
/// memory limit and I/O limits on the disk of its `io_dir` (or `io_dir`).
fn grant(t: &Placement<'_>, io_dir: Option<&Path>) -> Result<Grant, ProviderError> {
    let g = t.grant;
    let io = if g.limits_io() {
        let dir = g.io_dir.as_deref().or(io_dir).ok_or_else(|| {
            ProviderError::Invalid(format!(
                "tenant {}'s I/O limits name no disk: add io_dir to its grant",
                t.name
            ))
        })?;
        let device = block_device_of(dir).map_err(cgroup_error(&format!(
            "tenant {}'s I/O limits on {}",
            t.name,
            dir.display()
        )))?;
        vec![IoLimit {
            device,
            read_iops: g.read_iops,
            write_iops: g.write_iops,
            read_bytes_per_s: g.read_bytes_per_s,
            write_bytes_per_s: g.write_bytes_per_s,
        }]
    } else {
        Vec::new()
    };
    Ok(Grant {
        cpus: (!g.is_empty()).then(|| t.cpus.to_vec()),
        cpu_quota: g.cpu,
        memory_bytes: g.memory_bytes,
        io,
    })
}
