//! The checks of Volpert et al.'s isolation method: a tenant's `grant` (what the
//! local provider enforces on the host) and the isolation matrix over one resource,
//! whose states are demands against those grants.

use std::path::PathBuf;
use std::time::Duration;

use nnb_agent::jobs::limits::MAX_DISK_FILE;

use nnb_format::Runtime;

use super::file::{ExperimentFile, GrantFile, MatrixFile, ResourceFile, Spanned, TenantFile};
use super::{
    neighbor_count, values, Checker, DiskLoad, ExperimentError, IsolationMatrix, Network, Provider,
    Resource, Scenario, Sizing, TenantDef, TenantGrant, DEFAULT_LOAD_MSG,
};

/// The smallest memory grant: below it the agent alone would not fit.
const MIN_MEMORY_GRANT: u64 = 16 << 20;
/// Where a disk matrix's generator writes by default: persistent storage, unlike
/// `/tmp`, which may be a tmpfs without direct I/O.
const DEFAULT_DISK_DIR: &str = "/var/tmp";

impl Checker<'_> {
    /// A tenant's `grant` table, for a tenant of `vcpus` under `sizing`'s provider.
    pub(super) fn grant(
        &self,
        g: &Spanned<GrantFile>,
        vcpus: usize,
        sizing: &Sizing,
        network: Network,
    ) -> Result<TenantGrant, ExperimentError> {
        if !matches!(sizing, Sizing::FitHost) {
            return Err(self.error(
                g.span(),
                "grants are enforced by the local provider (a cgroup per tenant): on aws \
                 the instance type is the grant, and a static host's agents are not nnb's \
                 to confine",
            ));
        }
        let f = g.get_ref();
        let cpu = match &f.cpu {
            Some(v) => {
                let c = *v.get_ref();
                let max = vcpus as f64;
                if !(c.is_finite() && (0.01..=max).contains(&c)) {
                    return Err(self.error(
                        v.span(),
                        format!(
                            "a CPU grant is 0.01 to the tenant's {vcpus} vCPUs (its cpuset), \
                             got {c}"
                        ),
                    ));
                }
                Some(c)
            }
            None => None,
        };
        let memory_bytes = match &f.memory {
            Some(v) => {
                let b = self.at(v, size(v.get_ref()))?;
                if b < MIN_MEMORY_GRANT {
                    return Err(self.error(
                        v.span(),
                        "a memory grant below 16 MiB leaves no room for the tenant's agent",
                    ));
                }
                self.at(v, self.fits_memory(b))?;
                Some(b)
            }
            None => None,
        };
        let iops = |v: &Option<Spanned<u64>>| match v {
            Some(v) if *v.get_ref() == 0 => Err(self.error(
                v.span(),
                "an IOPS grant of 0 would stop the tenant's I/O: leave it out for no limit",
            )),
            Some(v) => Ok(Some(*v.get_ref())),
            None => Ok(None),
        };
        let bandwidth = |v: &Option<Spanned<String>>| match v {
            Some(v) => match self.at(v, size(v.get_ref()))? {
                0 => Err(self.error(v.span(), "a bandwidth grant must be above 0")),
                b => Ok(Some(b)),
            },
            None => Ok(None),
        };
        let rate_bps = match &f.rate {
            Some(v) if network == Network::None => {
                return Err(self.error(
                    v.span(),
                    "a `rate` grant shapes the tenant's own interface: it needs \
                     [network] mode = \"emulated\" (tenants on loopback share one)",
                ))
            }
            Some(v) => Some(self.at(v, values::shaped_rate(v.get_ref()))?),
            None => None,
        };
        let io_dir = match &f.io_dir {
            Some(d) => Some(self.io_dir(d, "io_dir", true)?),
            None => None,
        };
        Ok(TenantGrant {
            cpu,
            memory_bytes,
            read_iops: iops(&f.read_iops)?,
            write_iops: iops(&f.write_iops)?,
            read_bytes_per_s: bandwidth(&f.read_bw)?,
            write_bytes_per_s: bandwidth(&f.write_bw)?,
            io_dir,
            rate_bps,
        })
    }

    /// A memory size of a local tenant's load is at most this machine's memory
    /// (when known): the agent refuses a larger load.
    fn fits_memory(&self, bytes: u64) -> Result<(), String> {
        match self.host.mem_total {
            Some(total) if bytes > total => Err(format!(
                "{} is more than this machine's memory ({}, MemTotal in /proc/meminfo)",
                nnb_units::format_bytes(bytes as f64),
                nnb_units::format_bytes(total as f64)
            )),
            _ => Ok(()),
        }
    }

    /// A directory for disk I/O (`what` is its key): an absolute path and, on this
    /// machine (when the host's paths are checked), a directory whose files are not
    /// kept in memory, as direct I/O needs (not tmpfs, `/proc` or a missing path),
    /// and with `limited`, on a block device, as I/O limits need.
    fn io_dir(
        &self,
        v: &Spanned<String>,
        what: &str,
        limited: bool,
    ) -> Result<PathBuf, ExperimentError> {
        let dir = PathBuf::from(v.get_ref());
        if !dir.is_absolute() {
            return Err(self.error(
                v.span(),
                format!("{what} must be an absolute path, e.g. \"{DEFAULT_DISK_DIR}\""),
            ));
        }
        if self.host.paths {
            if !dir.is_dir() {
                return Err(self.error(
                    v.span(),
                    format!("{} is not a directory on this machine", dir.display()),
                ));
            }
            let in_memory = match nnb_sys::file::fs_stats(&dir) {
                Ok(fs) => fs.in_memory(),
                Err(e) => return Err(self.error(v.span(), format!("{}: {e}", dir.display()))),
            };
            if in_memory {
                return Err(self.error(
                    v.span(),
                    format!(
                        "{} keeps its files in memory (tmpfs): direct I/O there reaches no \
                         disk; pick a directory on a disk",
                        dir.display()
                    ),
                ));
            }
            if limited {
                if let Err(e) = nnb_sys::cgroup::block_device_of(&dir) {
                    return Err(self.error(v.span(), e.to_string()));
                }
            }
        }
        Ok(dir)
    }

    /// I/O limits apply to one disk: the grant's `io_dir`, or a disk matrix's `dir`.
    pub(super) fn check_io_dirs(
        &self,
        files: &Spanned<Vec<TenantFile>>,
        scenario: &Scenario,
    ) -> Result<(), ExperimentError> {
        let disk_matrix = matches!(
            scenario,
            Scenario::IsolationMatrix(IsolationMatrix {
                resource: Resource::Disk,
                ..
            })
        );
        for g in files.get_ref().iter().filter_map(|t| t.grant.as_ref()) {
            let f = g.get_ref();
            let limits = f.read_iops.is_some()
                || f.write_iops.is_some()
                || f.read_bw.is_some()
                || f.write_bw.is_some();
            if limits && f.io_dir.is_none() && !disk_matrix {
                return Err(self.error(
                    g.span(),
                    "I/O limits apply to one disk: add io_dir = \"/var/tmp\" (a directory on \
                     it) to the grant",
                ));
            }
        }
        Ok(())
    }

    /// `kind = "isolation-matrix"`: one neighbor (tenant b), and what each resource's
    /// states are demands against.
    pub(super) fn matrix(
        &self,
        tenants: &[TenantDef],
        s: MatrixFile,
    ) -> Result<IsolationMatrix, ExperimentError> {
        let neighbors = neighbor_count(tenants);
        if neighbors != 1 {
            return Err(self.scenario_error(format!(
                "an isolation matrix needs exactly one neighbor (tenant b), found {neighbors}"
            )));
        }
        let resource = match s.resource {
            ResourceFile::Cpu => Resource::Cpu,
            ResourceFile::Memory => Resource::Memory,
            ResourceFile::Disk => Resource::Disk,
            ResourceFile::Network => Resource::Network,
        };
        let applies = |v: Option<std::ops::Range<usize>>, to: Resource, what: &str| match v {
            Some(span) if resource != to => Err(self.error(
                span,
                format!("`{what}` applies to resource = \"{}\"", name(to)),
            )),
            _ => Ok(()),
        };
        applies(
            s.share.as_ref().map(Spanned::span),
            Resource::Network,
            "share",
        )?;
        applies(
            s.msg_size.as_ref().map(Spanned::span),
            Resource::Network,
            "msg_size",
        )?;
        applies(
            s.workload.as_ref().map(Spanned::span),
            Resource::Cpu,
            "workload",
        )?;
        applies(
            s.unrestricted.as_ref().map(Spanned::span),
            Resource::Memory,
            "unrestricted",
        )?;
        for (v, what) in [
            (s.dir.as_ref().map(Spanned::span), "dir"),
            (s.read_fraction.as_ref().map(Spanned::span), "read_fraction"),
            (s.queue_depth.as_ref().map(Spanned::span), "queue_depth"),
            (s.block_size.as_ref().map(Spanned::span), "block_size"),
            (s.file_size.as_ref().map(Spanned::span), "file_size"),
        ] {
            applies(v, Resource::Disk, what)?;
        }
        let missing = |what: &str| {
            tenants.iter().find(|t| !has(&t.grant, resource)).map(|t| {
                self.scenario_error(format!(
                    "tenant `{}` has no {what} grant: a {} isolation matrix's states are \
                         demands against it (add it to the tenant, e.g. {})",
                    t.name,
                    name(resource),
                    example(resource)
                ))
            })
        };
        let share_bps = match (&s.share, resource) {
            (Some(v), _) => Some(self.at(v, values::positive_rate(v.get_ref()))?),
            (None, Resource::Network) => match missing("rate") {
                None => None,
                Some(_) => {
                    return Err(self.scenario_error(
                        "a network isolation matrix needs `share` in [scenario], e.g. share = \
                         \"100M\", or a `rate` grant on each tenant",
                    ))
                }
            },
            (None, _) => None,
        };
        match resource {
            Resource::Memory => missing("memory").map_or(Ok(()), Err)?,
            Resource::Disk => missing("IOPS").map_or(Ok(()), Err)?,
            Resource::Cpu => {
                if let Some(t) = tenants
                    .iter()
                    .find(|t| t.vcpus < 2 && t.grant.cpu.is_none())
                {
                    return Err(self.scenario_error(format!(
                        "tenant `{}` has {} vCPU and no CPU grant: a CPU isolation matrix needs \
                         at least 2 vCPUs per tenant (undercommitted runs half of them), or a \
                         grant such as grant = {{ cpu = 0.5 }}",
                        t.name, t.vcpus
                    )));
                }
            }
            Resource::Network => {}
        }
        let disk = match resource {
            Resource::Disk => Some(self.disk_load(&s, tenants)?),
            _ => None,
        };
        let unrestricted_bytes = match &s.unrestricted {
            Some(v) => {
                let b = self.at(v, size(v.get_ref()))?;
                self.at(v, self.fits_memory(b))?;
                Some(b)
            }
            None => None,
        };
        let duration = self.nonzero_duration(&s.duration, Duration::from_secs(3), "duration")?;
        Ok(IsolationMatrix {
            resource,
            duration,
            workload: self.workload(&s.workload)?,
            share_bps,
            msg_size: self.msg_size(&s.msg_size, DEFAULT_LOAD_MSG)?,
            disk,
            unrestricted_bytes,
            technologies: self.technologies(&s.technologies, tenants)?,
            start: self.step_start(&s.start_order, &s.stagger, duration)?,
            usage_interval: self.usage_interval(&s.usage_interval, duration)?,
        })
    }

    /// The matrix's `technologies`: known runtimes, each once (so at most
    /// [`Runtime::ALL`]'s five), with no tenant naming a `runtime` of its own (the
    /// list says what every tenant runs in); empty when the key is left out.
    fn technologies(
        &self,
        v: &Option<Spanned<Vec<Spanned<String>>>>,
        tenants: &[TenantDef],
    ) -> Result<Vec<Runtime>, ExperimentError> {
        let Some(list) = v else {
            return Ok(Vec::new());
        };
        if list.get_ref().is_empty() {
            return Err(self.error(
                list.span(),
                "technologies lists at least one technology, e.g. [\"process\", \"runc\"]; \
                 leave it out to run each tenant in its own runtime",
            ));
        }
        let mut out: Vec<Runtime> = Vec::new();
        for t in list.get_ref() {
            let Some(r) = Runtime::from_name(t.get_ref()) else {
                return Err(self.error(
                    t.span(),
                    format!(
                        "unknown technology `{}`: expected one of {}",
                        t.get_ref(),
                        Runtime::ALL.map(Runtime::name).join(", ")
                    ),
                ));
            };
            if out.contains(&r) {
                return Err(self.error(
                    t.span(),
                    format!("technology `{r}` is listed twice: each runs the matrix once"),
                ));
            }
            out.push(r);
        }
        if let Some(t) = tenants.iter().find(|t| !t.runtime.is_process()) {
            return Err(self.error(
                list.span(),
                format!(
                    "tenant `{}` names its own runtime (`{}`), but `technologies` runs every \
                     tenant in each technology listed: leave out one or the other",
                    t.name, t.runtime
                ),
            ));
        }
        Ok(out)
    }

    /// `technologies` runs each tenant once per technology, starting and stopping
    /// their agents between technologies and enforcing grants in each runtime's own
    /// terms: the local provider's, whose tenants nnb launches.
    pub(super) fn technologies_are_local(
        &self,
        f: &ExperimentFile<MatrixFile>,
    ) -> Result<(), ExperimentError> {
        match &f.scenario.technologies {
            Some(v) if !matches!(self.provider(f)?, Provider::Local) => Err(self.error(
                v.span(),
                "technologies run on the local provider (nnb launches each tenant in each \
                 technology): a static host's or an aws instance's agents run as they are",
            )),
            _ => Ok(()),
        }
    }

    /// A disk matrix's generator settings, each checked where it is written.
    fn disk_load(
        &self,
        s: &MatrixFile,
        tenants: &[TenantDef],
    ) -> Result<DiskLoad, ExperimentError> {
        let read_fraction = match &s.read_fraction {
            Some(v) if !(0.0..=1.0).contains(v.get_ref()) => {
                return Err(self.error(v.span(), "read_fraction is a share, 0 to 1"))
            }
            Some(v) => *v.get_ref(),
            None => 0.5,
        };
        if let Some(t) = tenants
            .iter()
            .find(|t| t.grant.sustained_iops(read_fraction).is_none())
        {
            return Err(self.scenario_error(format!(
                "tenant `{}`'s grant limits neither direction of a load with read_fraction = \
                 {read_fraction}: grant read_iops or write_iops for it",
                t.name
            )));
        }
        let queue_depth = match &s.queue_depth {
            Some(v) if !(1..=256).contains(v.get_ref()) => {
                return Err(self.error(v.span(), "queue_depth is 1 to 256"))
            }
            Some(v) => *v.get_ref(),
            None => 4,
        };
        let block_size = match &s.block_size {
            Some(v) => {
                let b = self.at(v, size(v.get_ref()))?;
                if !(b.is_power_of_two() && (512..=16 << 20).contains(&b)) {
                    return Err(self.error(
                        v.span(),
                        "block_size is a power of two from 512 bytes to 16 MiB (direct I/O \
                         needs aligned blocks)",
                    ));
                }
                b as usize
            }
            None => 4096,
        };
        let file_size = match &s.file_size {
            Some(v) => {
                let b = self.at(v, size(v.get_ref()))?;
                if !(block_size as u64..=MAX_DISK_FILE).contains(&b) {
                    return Err(self.error(
                        v.span(),
                        format!("file_size is {block_size} bytes (one block) to 64 GiB"),
                    ));
                }
                b
            }
            None => 64 << 20,
        };
        // The grants without an io_dir of their own limit I/O on this one's disk.
        let limits_here = tenants
            .iter()
            .any(|t| t.grant.limits_io() && t.grant.io_dir.is_none());
        let dir = match &s.dir {
            Some(d) => self.io_dir(d, "dir", limits_here)?,
            None => PathBuf::from(DEFAULT_DISK_DIR),
        };
        Ok(DiskLoad {
            dir,
            read_fraction,
            queue_depth,
            block_size,
            file_size,
        })
    }
}

/// A byte size ("256M", "4k"), as `nnb_units::parse_size` reads it.
fn size(s: &str) -> Result<u64, String> {
    nnb_units::parse_size(s).map_err(|e| e.to_string())
}

/// The resource's name in experiment files.
fn name(r: Resource) -> &'static str {
    match r {
        Resource::Cpu => "cpu",
        Resource::Memory => "memory",
        Resource::Disk => "disk",
        Resource::Network => "network",
    }
}

/// A grant of the resource, as written in a tenant.
fn example(r: Resource) -> &'static str {
    match r {
        Resource::Cpu => "grant = { cpu = 0.5 }",
        Resource::Memory => "grant = { memory = \"256M\" }",
        Resource::Disk => "grant = { write_iops = 200, read_iops = 200 }",
        Resource::Network => "grant = { rate = \"100M\" }",
    }
}

/// Whether `g` grants some of `r`.
fn has(g: &TenantGrant, r: Resource) -> bool {
    match r {
        Resource::Cpu => g.cpu.is_some(),
        Resource::Memory => g.memory_bytes.is_some(),
        Resource::Disk => g.read_iops.is_some() || g.write_iops.is_some(),
        Resource::Network => g.rate_bps.is_some(),
    }
}
