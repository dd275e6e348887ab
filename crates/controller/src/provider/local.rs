//! The local provider: tenants are `nnb agent` child processes on this machine.
//!
//! Each tenant's agent is started with `--cpus` set to a CPU set carved from the
//! real topology ([`carve_cpus`]): CPUs are handed out core by core, so a 2-vCPU
//! tenant on a 2-way SMT host gets one core's sibling pair (as EC2 gives a
//! `.large`), and on a host without SMT two distinct cores. When the tenants need
//! more CPUs than the host has, CPUs are shared round-robin and a warning is
//! recorded, so small machines can still run an experiment.
//!
//! Every child gets a random token (in a 0600 file in a private temporary
//! directory, deleted once the agents are up: they read it at start) and `PR_SET_PDEATHSIG = SIGKILL`, so agents die with the controller
//! even when it is killed with `-9`. The parent-death signal fires when the
//! *thread* that spawned the child exits: launch the fleet from a thread that
//! outlives it (a tokio worker thread or the main thread, not a `spawn_blocking`
//! task).
//!
//! With grants (or for an isolation matrix's host-side usage), each tenant's agent
//! runs in a cgroup of its own ([`super::grants`]): whatever the agent starts
//! (burner threads, memory workers, the disk generator) is confined and accounted
//! there, and a `rate` grant shapes the tenant's interface.
//!
//! Two local runs on the same CPUs double each other's runtimes. Each local fleet
//! holds a lock per CPU it carved (`cpuN.lock` in a directory private to its user,
//! `/run/nnb` for root: [`crate::lockfile`]) for its lifetime; a second run of the
//! same user that finds a CPU held warns loudly, naming the other run, and records
//! the warning in its manifest, so its numbers are never taken as clean.

use std::cmp::Reverse;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nnb_burn::topology::{format_list, Topology};

use super::grants::{Placement, TenantCgroups};
use super::netns::NetLab;
use super::runtime::{self, Containers};
use super::usage::{UsageMeter, UsageSource};
use super::{Fleet, HostCpus, Provider, ProviderError, Role, Serving, Tenant, TenantSpec};
use crate::client::BoxFuture;
use crate::lockfile::{cpu_lock_dir, hold_cpus};
use nnb_agent::jobs::Health;
use nnb_agent::Token;
use nnb_experiment::tenant::{base_name, server_name, Network, TenantGrant, ENDPOINT};
use nnb_format::ProviderKind;

/// Pause between two health checks of an agent that did not answer yet.
const HEALTH_POLL: Duration = Duration::from_millis(50);

/// How to launch a local fleet.
#[derive(Clone, Debug)]
pub struct LocalOptions {
    /// The `nnb` binary to run as agent; `None` = this executable.
    pub nnb_bin: Option<PathBuf>,
    /// Loopback or emulated network.
    pub network: Network,
    /// How long each agent may take to print its address and answer `/health`.
    pub start_timeout: Duration,
    /// Whether the tenants run in cgroups of their own.
    pub cgroups: Cgroups,
    /// What each tenant is granted (by name; a tenant not listed, nothing).
    pub grants: Vec<(String, TenantGrant)>,
    /// Where I/O limits apply when a grant names no `io_dir` (a disk isolation
    /// matrix's directory), and where a dead run's disk files are looked for.
    pub io_dir: Option<PathBuf>,
    /// The clients that get a mirrored server of their own ([`Serving::Mirrored`]):
    /// one agent each beside the endpoint (with the emulated network in the
    /// endpoint's namespace, at an address of its own).
    pub servers: Vec<String>,
    /// Start the tenants' agents with `--allow-commands` (the plan runs command
    /// jobs; the endpoint and the servers never run one).
    pub allow_commands: bool,
    /// The run's id, in its containers' names (`nnb-RUNID-TENANT`, [`runtime`]);
    /// `None`: the controller's pid and fleet number instead.
    pub run_id: Option<String>,
    /// How often the host-side usage is read over a measured step.
    pub usage_interval: Duration,
}

/// Whether a local fleet's tenants get cgroups of their own (see
/// [`super::grants`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Cgroups {
    /// No: the agents run in the controller's cgroup.
    #[default]
    Off,
    /// For the host-side usage only: without cgroups (not root) the run goes on,
    /// with a warning, and records no host-side usage.
    Accounting,
    /// Required: the tenants have grants to enforce.
    Grants,
}

impl Cgroups {
    /// What `exp` needs: its tenants' grants enforced, or for an isolation matrix
    /// the host-side usage that its tables are made of.
    pub fn of(exp: &nnb_experiment::Experiment) -> Cgroups {
        if exp.has_grants() {
            Cgroups::Grants
        } else if matches!(exp.scenario, nnb_experiment::Scenario::IsolationMatrix(_)) {
            Cgroups::Accounting
        } else {
            Cgroups::Off
        }
    }
}

impl LocalOptions {
    /// What tenant `name` is granted, if anything.
    fn grant(&self, name: &str) -> Option<&TenantGrant> {
        self.grants.iter().find(|(n, _)| n == name).map(|(_, g)| g)
    }

    /// The `nnb` binary to run as agent.
    fn binary(&self) -> Result<PathBuf, ProviderError> {
        match &self.nnb_bin {
            Some(p) => Ok(p.clone()),
            None => {
                std::env::current_exe().map_err(ProviderError::io("finding the nnb executable"))
            }
        }
    }
}

impl Default for LocalOptions {
    /// This executable, loopback, 10 s to start.
    fn default() -> Self {
        LocalOptions {
            nnb_bin: None,
            network: Network::None,
            start_timeout: Duration::from_secs(10),
            cgroups: Cgroups::Off,
            grants: Vec::new(),
            io_dir: None,
            servers: Vec::new(),
            allow_commands: false,
            run_id: None,
            usage_interval: nnb_experiment::DEFAULT_USAGE_INTERVAL,
        }
    }
}

/// Carves one CPU set per tenant from `allowed` CPUs of `topo`, core by core
/// (siblings of a core together). Larger tenants are placed first so they start on
/// a core boundary; among equals the test tenant goes first. Tenants of one base
/// name (`a@process`, `a@runc`: an isolation matrix over technologies, whose steps
/// have one technology's tenants present) share one set, without a warning. Returns
/// the sets in the order of `specs`, and warnings when CPUs had to be shared.
pub fn carve_cpus(
    topo: &Topology,
    allowed: &[usize],
    specs: &[TenantSpec],
) -> Result<(Vec<Vec<usize>>, Vec<String>), ProviderError> {
    let order: Vec<usize> = topo
        .cores()
        .into_iter()
        .flat_map(|core| core.into_iter().filter(|c| allowed.contains(c)))
        .collect();
    if order.is_empty() {
        return Err(ProviderError::Invalid(
            "no usable CPU: the process' affinity excludes every online CPU".into(),
        ));
    }
    if let Some(s) = specs.iter().find(|s| s.vcpus == 0) {
        return Err(ProviderError::Invalid(format!(
            "tenant {} has 0 vCPUs: give it at least 1",
            s.name
        )));
    }
    let mut warnings = Vec::new();
    // Tenants of one base name (an isolation matrix's `a@process` and `a@runc`) are
    // never present together: the first of them is carved a set, the others share it.
    let first_of = |i: usize| {
        let base = base_name(&specs[i].name);
        (0..=i)
            .find(|&j| base_name(&specs[j].name) == base)
            .unwrap_or(i)
    };
    let mut idx: Vec<usize> = (0..specs.len()).filter(|&i| first_of(i) == i).collect();
    let carved = idx.clone();
    idx.sort_by_key(|&i| (Reverse(specs[i].vcpus), specs[i].role != Role::Test));
    let mut sets = vec![Vec::new(); specs.len()];
    let mut cursor = 0;
    for i in idx {
        let want = specs[i].vcpus;
        let take = want.min(order.len());
        if take < want {
            warnings.push(format!(
                "tenant {} has {want} vCPUs but only {} CPUs are usable: it gets all of them",
                specs[i].name,
                order.len()
            ));
        }
        let mut set: Vec<usize> = (0..take)
            .map(|k| order[(cursor + k) % order.len()])
            .collect();
        set.sort_unstable();
        sets[i] = set;
        cursor += take;
    }
    for i in 0..specs.len() {
        sets[i] = sets[first_of(i)].clone();
    }
    let total: usize = carved.iter().map(|&i| specs[i].vcpus).sum();
    if total > order.len() {
        warnings.push(format!(
            "the tenants need {total} vCPUs but only {} CPUs are usable ({}): CPUs are shared \
             round-robin, so tenants also compete where a real host would isolate them",
            order.len(),
            format_list(&order)
        ));
    }
    Ok((sets, warnings))
}

/// Starts one `nnb agent` per tenant (plus the endpoint agent, and a server agent
/// per client of `opts.servers`), each tenant pinned to its carved CPU set, and
/// waits until every one answers `/health`. On error everything started so far is
/// torn down.
pub async fn launch_local(
    specs: &[TenantSpec],
    opts: &LocalOptions,
) -> Result<Fleet, ProviderError> {
    check_names(specs)?;
    let bin = opts.binary()?;
    let topo = Topology::host()?;
    let allowed = nnb_burn::placement::allowed_cpus();
    let (sets, mut warnings) = carve_cpus(&topo, &allowed, specs)?;
    let (cpu_locks, shared) = hold_cpus(&cpu_lock_dir(), sets.iter().flatten().copied());
    for w in &shared {
        tracing::warn!("{w}");
    }
    warnings.extend(shared);
    // The fleet carries them to whoever reports the run (`nnb run` says each once).
    for w in &warnings {
        tracing::debug!("{w}");
    }
    sweep_dead_fleet_dirs(&std::env::temp_dir());
    runtime::sweep::sweep_dead();
    let scratch = private_dir()?;
    let mut fleet = Fleet {
        tenants: Vec::with_capacity(specs.len()),
        endpoint: None,
        servers: Vec::new(),
        warnings,
        children: Vec::new(),
        net: None,
        cgroups: None,
        containers: containers(specs, opts)?,
        cloud: Default::default(),
        _cpu_locks: cpu_locks,
    };
    fleet.cgroups = tenant_cgroups(specs, &sets, opts, &mut fleet.warnings)?;
    let net = match opts.network {
        Network::None => None,
        Network::Emulated { host_bw_bps, queue } => {
            let lab = NetLab::create(specs.len(), opts.servers.len(), host_bw_bps, queue)?;
            for (i, spec) in specs.iter().enumerate() {
                if let Some(rate) = opts.grant(&spec.name).and_then(|g| g.rate_bps) {
                    lab.shape_tenant(i, Some(rate))?;
                }
            }
            fleet.net = Some(lab);
            fleet.net.as_ref()
        }
    };
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let mut pending = Vec::new();
    for (i, (spec, cpus)) in specs.iter().zip(&sets).enumerate() {
        let (ns, ip) = match net {
            Some(lab) => (Some(lab.tenant_ns(i)), Some(lab.tenant_ip(i))),
            None => (None, None),
        };
        let agent = AgentLaunch {
            name: &spec.name,
            netns: ns.as_deref(),
            listen: ip.unwrap_or(loopback),
            cpus: Some(cpus),
            allow_commands: opts.allow_commands,
        };
        let contained = !spec.runtime.is_process();
        // Field by field: `net` borrows the fleet's emulated network meanwhile.
        let mut parts = super::LocalParts {
            children: &mut fleet.children,
            cgroups: fleet.cgroups.as_ref(),
            containers: fleet.containers.as_mut(),
        };
        let token = start_tenant(&mut parts, &agent, contained, &bin, scratch.path(), opts)?;
        pending.push((spec.name.clone(), spec.role, token, cpus.clone(), ns, ip));
    }
    let endpoint_ns = net.map(NetLab::endpoint_ns);
    let endpoint_ip = net.map(NetLab::endpoint_ip);
    let endpoint = AgentLaunch {
        name: ENDPOINT,
        netns: endpoint_ns.as_deref(),
        listen: endpoint_ip.unwrap_or(loopback),
        cpus: None,
        allow_commands: false,
    };
    let (child, endpoint_token) = endpoint.spawn(&bin, scratch.path())?;
    fleet.children.push((ENDPOINT.to_string(), child));
    // Mirrored servers: beside the endpoint, each at its own address.
    let mut servers = Vec::with_capacity(opts.servers.len());
    for (j, client) in opts.servers.iter().enumerate() {
        let name = server_name(client);
        let ip = net.map(|lab| lab.server_ip(j));
        let server = AgentLaunch {
            name: &name,
            netns: endpoint_ns.as_deref(),
            listen: ip.unwrap_or(loopback),
            cpus: None,
            allow_commands: false,
        };
        let (child, token) = server.spawn(&bin, scratch.path())?;
        fleet.children.push((name.clone(), child));
        servers.push((name, token, ip));
    }

    // Read every agent's address, then wait for every health in parallel.
    let mut addrs = Vec::with_capacity(fleet.children.len());
    let names: Vec<String> = pending
        .iter()
        .map(|p| p.0.clone())
        .chain([ENDPOINT.to_string()])
        .chain(servers.iter().map(|s| s.0.clone()))
        .collect();
    for (k, name) in names.iter().enumerate() {
        addrs.push(read_address(&mut fleet.children[k].1, name, opts.start_timeout).await?);
    }
    let pending_len = pending.len();
    for ((name, role, token, cpus, ns, ip), addr) in pending.into_iter().zip(&addrs) {
        let runtime = fleet.containers.as_ref().and_then(|c| c.record(&name));
        fleet.tenants.push(Tenant {
            name,
            role,
            addr: *addr,
            token,
            cpus,
            netns: ns,
            ip,
            runtime,
        });
    }
    let endpoint_addr = addrs[pending_len];
    for ((name, token, ip), addr) in servers.into_iter().zip(&addrs[pending_len + 1..]) {
        fleet.servers.push(Tenant {
            name,
            role: Role::Endpoint,
            addr: *addr,
            token,
            cpus: allowed.clone(),
            netns: endpoint_ns.clone(),
            ip,
            runtime: None,
        });
    }
    fleet.endpoint = Some(Tenant {
        name: ENDPOINT.into(),
        role: Role::Endpoint,
        addr: endpoint_addr,
        token: endpoint_token,
        cpus: allowed.clone(),
        netns: endpoint_ns,
        ip: endpoint_ip,
        runtime: None,
    });
    let mut checks = tokio::task::JoinSet::new();
    for t in fleet.all() {
        let (t, timeout) = (t.clone(), opts.start_timeout);
        checks.spawn(async move {
            let health = wait_healthy(&t, timeout).await?;
            // The kernel may narrow an affinity (cpuset cgroups): record it if so.
            Ok::<_, ProviderError>((health.cpus != t.cpus).then(|| {
                format!(
                    "agent {} was given CPUs {} but runs on {}",
                    t.name,
                    format_list(&t.cpus),
                    format_list(&health.cpus)
                )
            }))
        });
    }
    while let Some(joined) = checks.join_next().await {
        let mismatch = joined.map_err(|e| ProviderError::AgentStart {
            tenant: "?".into(),
            message: format!("health check task failed: {e}"),
        })??;
        fleet.warnings.extend(mismatch);
    }
    // Every agent has read its token: the files are no longer needed.
    drop(scratch);
    tracing::info!(agents = fleet.children.len(), "local fleet up");
    Ok(fleet)
}

/// The local provider: [`launch_local`] with the experiment's options, and tenants
/// whose agents it can stop and start again between steps.
#[derive(Debug, Clone)]
pub struct LocalProvider {
    opts: LocalOptions,
}

impl LocalProvider {
    /// A provider launching with `opts`.
    pub fn new(opts: LocalOptions) -> LocalProvider {
        LocalProvider { opts }
    }
}

impl Provider for LocalProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Local
    }

    /// The CPU sets [`launch_local`] carves, on `host`'s CPUs.
    fn placement(
        &self,
        specs: &[TenantSpec],
        host: &HostCpus<'_>,
    ) -> Result<super::Placement, ProviderError> {
        let (sets, warnings) = carve_cpus(host.topology, host.allowed, specs)?;
        // Not `grants::Placement`, a tenant's grant: where the tenant would run.
        Ok(super::Placement {
            cpus: sets.into_iter().map(Some).collect(),
            elsewhere: String::new(),
            warnings,
        })
    }

    /// Free, unless a tenant's runtime cannot run on this host: then refused,
    /// dry run included, with the reason ([`runtime::check`]), before anything is
    /// created.
    fn preflight(
        &self,
        exp: &nnb_experiment::Experiment,
        plan: &nnb_experiment::plan::Plan,
        yes: bool,
    ) -> Result<super::Preflight, ProviderError> {
        let _ = (plan, yes);
        let mut preflight = super::Preflight::free(exp);
        if let Some(why) = runtime::check::refusal(&exp.tenant_specs()) {
            preflight.verdict = super::Verdict::Unfit {
                refusal: why.clone(),
                dry_run_refusal: why,
            };
        }
        Ok(preflight)
    }

    /// Always starts the endpoint agent too (it costs one idle process), and a
    /// server agent per client when `serving` is mirrored.
    fn launch<'a>(
        &'a mut self,
        specs: &'a [TenantSpec],
        serving: &'a Serving,
    ) -> BoxFuture<'a, Result<Fleet, ProviderError>> {
        self.opts.servers = serving.clients().to_vec();
        Box::pin(launch_local(specs, &self.opts))
    }

    /// Absent: the tenant's agent is killed and reaped. Present: an agent that is not
    /// running is started again on the tenant's CPUs, namespace and address, with a
    /// fresh token, and waited for; the tenant's address and token are updated.
    fn set_present<'a>(
        &'a mut self,
        fleet: &'a mut Fleet,
        present: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<String>, ProviderError>> {
        Box::pin(async move {
            fleet.check_present(present)?;
            // Only tenants come and go: the endpoint and the servers stay.
            let tenants: Vec<String> = fleet.tenants.iter().map(|t| t.name.clone()).collect();
            fleet.kill_children(|n| {
                !tenants.iter().any(|t| t == n) || present.iter().any(|p| p == n)
            });
            let mut started = Vec::new();
            for name in present {
                if fleet.children.iter().any(|(n, _)| n == name) {
                    continue;
                }
                self.start_again(fleet, name).await?;
                started.push(name.clone());
            }
            Ok(started)
        })
    }

    /// Lifts or restores the tenants' cgroup grants and their `rate` shaping.
    fn set_lifted<'a>(
        &'a mut self,
        fleet: &'a mut Fleet,
        lifted: &'a [String],
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            if let Some(cg) = &mut fleet.cgroups {
                cg.set_lifted(lifted)?;
            }
            if let Some(c) = &mut fleet.containers {
                c.set_lifted(lifted)?;
            }
            if let Some(lab) = &fleet.net {
                for (i, t) in fleet.tenants.iter().enumerate() {
                    if let Some(rate) = self.opts.grant(&t.name).and_then(|g| g.rate_bps) {
                        lab.shape_tenant(i, (!lifted.contains(&t.name)).then_some(rate))?;
                    }
                }
            }
            Ok(())
        })
    }

    /// Each tenant's cgroup (a container's: the one its runtime made), and its
    /// agent's network namespace when it has its own.
    fn usage_meter(&self, fleet: &Fleet, tenants: &[String]) -> Option<UsageMeter> {
        if fleet.cgroups.is_none() && fleet.containers.is_none() {
            return None;
        }
        let container = |name: &str| fleet.containers.as_ref().filter(|c| c.has(name));
        let sources = tenants
            .iter()
            .map(|name| UsageSource {
                tenant: name.clone(),
                cgroup: match container(name) {
                    Some(c) => c.cgroup(name),
                    None => fleet.cgroups.as_ref().and_then(|c| c.cgroup(name).cloned()),
                },
                netns_pid: fleet
                    .tenants
                    .iter()
                    .find(|t| &t.name == name && t.netns.is_some())
                    .and_then(|_| match container(name) {
                        Some(c) => c.pid(name),
                        None => fleet
                            .children
                            .iter()
                            .find(|(n, _)| n == name)
                            .map(|(_, c)| c.id()),
                    }),
            })
            .collect();
        Some(UsageMeter::start(sources, self.opts.usage_interval))
    }
}

/// The tenants' cgroups, as `opts` wants them: none, for accounting (a warning
/// where they cannot be made), or with grants (an error where they cannot). A dead
/// run's disk files in the I/O directory go first.
fn tenant_cgroups(
    specs: &[TenantSpec],
    sets: &[Vec<usize>],
    opts: &LocalOptions,
    warnings: &mut Vec<String>,
) -> Result<Option<TenantCgroups>, ProviderError> {
    if opts.cgroups == Cgroups::Off {
        return Ok(None);
    }
    if let Some(dir) = &opts.io_dir {
        match nnb_burn::disk::sweep_stale(dir) {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                "removed {n} disk load files of dead runs in {}",
                dir.display()
            ),
            Err(e) => tracing::debug!(
                "looking for dead runs' disk files in {}: {e}",
                dir.display()
            ),
        }
    }
    let none = TenantGrant::default();
    // A container's grant is its runtime's to enforce (see [`runtime`]).
    let placements: Vec<Placement<'_>> = specs
        .iter()
        .zip(sets)
        .filter(|(s, _)| s.runtime.is_process())
        .map(|(s, cpus)| Placement {
            name: &s.name,
            cpus,
            grant: opts.grant(&s.name).unwrap_or(&none),
        })
        .collect();
    match TenantCgroups::create(&placements, opts.io_dir.as_deref()) {
        Ok(c) => Ok(Some(c)),
        Err(e) if opts.cgroups == Cgroups::Accounting => {
            let w = format!("no host-side usage is recorded: {e}");
            tracing::warn!("{w}");
            warnings.push(w);
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

impl LocalProvider {
    /// Starts tenant `name`'s agent again where it ran before, and waits for it.
    async fn start_again(&self, fleet: &mut Fleet, name: &str) -> Result<(), ProviderError> {
        let Some(index) = fleet.tenants.iter().position(|t| t.name == name) else {
            return Err(ProviderError::Invalid(format!(
                "no tenant {name} in the fleet"
            )));
        };
        let t = &fleet.tenants[index];
        let bin = self.opts.binary()?;
        let scratch = private_dir()?;
        let (netns, listen, cpus) = (
            t.netns.clone(),
            t.ip.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            t.cpus.clone(),
        );
        let launch = AgentLaunch {
            name,
            netns: netns.as_deref(),
            listen,
            cpus: Some(&cpus),
            allow_commands: self.opts.allow_commands,
        };
        let contained = fleet.containers.as_ref().is_some_and(|c| c.has(name));
        let token = start_tenant(
            &mut fleet.parts(),
            &launch,
            contained,
            &bin,
            scratch.path(),
            &self.opts,
        )?;
        let last = fleet.children.len() - 1;
        let timeout = self.opts.start_timeout;
        let addr = read_address(&mut fleet.children[last].1, name, timeout).await?;
        let t = &mut fleet.tenants[index];
        t.addr = addr;
        t.token = token;
        wait_healthy(t, timeout).await.map(drop)
    }
}

/// Token directories are named `nnb-fleet-<pid>-<random>`, `pid` the controller's.
const FLEET_DIR_PREFIX: &str = "nnb-fleet-";

/// A private temporary directory for agent token files (deleted when dropped),
/// named for this process so that a later launch knows it for a dead controller's
/// once this one is killed with `-9` ([`sweep_dead_fleet_dirs`]).
fn private_dir() -> Result<tempfile::TempDir, ProviderError> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("{FLEET_DIR_PREFIX}{}-", std::process::id()))
        .tempdir()
        .map_err(ProviderError::io("creating a directory for agent tokens"))?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).map_err(
        ProviderError::io("making the agent token directory private"),
    )?;
    Ok(dir)
}

/// Removes from `tmp` the token directories that controllers killed with `-9` left
/// (reliability review NL8): directories (not links) named `nnb-fleet-<pid>-...`,
/// owned by this user, whose pid is not a live process, as the launch removes dead
/// runs' cgroups. A directory of a controller in another pid namespace looks dead:
/// its agents have read their tokens by the time it is up, so removing it costs a
/// run that is still starting its agents at most a failed start. Returns how many
/// it removed.
fn sweep_dead_fleet_dirs(tmp: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return 0;
    };
    let me = nnb_sys::process::effective_uid();
    let mut removed = 0;
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(fleet_dir_pid) else {
            continue;
        };
        if pid == std::process::id() || nnb_sys::process::process_exists(pid) {
            continue;
        }
        let path = entry.path();
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() && m.uid() == me => {}
            _ => continue,
        }
        match std::fs::remove_dir_all(&path) {
            Ok(()) => removed += 1,
            Err(e) => tracing::debug!("cannot remove {}: {e}", path.display()),
        }
    }
    if removed > 0 {
        tracing::info!(
            "removed {removed} agent token directories of dead runs in {}",
            tmp.display()
        );
    }
    removed
}

/// The controller pid in a token directory's name, `nnb-fleet-<pid>-<random>`;
/// None for any other name (those of older nnb versions carry no pid).
fn fleet_dir_pid(name: &str) -> Option<u32> {
    let (pid, random) = name.strip_prefix(FLEET_DIR_PREFIX)?.split_once('-')?;
    if random.is_empty() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

fn check_names(specs: &[TenantSpec]) -> Result<(), ProviderError> {
    for (i, s) in specs.iter().enumerate() {
        if s.name == ENDPOINT || specs[..i].iter().any(|o| o.name == s.name) {
            return Err(ProviderError::Invalid(format!(
                "tenant name {:?} is used twice or reserved (\"endpoint\")",
                s.name
            )));
        }
    }
    Ok(())
}

/// The fleet's containers when a tenant of `specs` runs in a runtime other than a
/// process: each such runtime must be able to run here ([`runtime::check`]).
fn containers(
    specs: &[TenantSpec],
    opts: &LocalOptions,
) -> Result<Option<Containers>, ProviderError> {
    if specs.iter().all(|s| s.runtime.is_process()) {
        return Ok(None);
    }
    if let Some(why) = runtime::check::refusal(specs) {
        return Err(ProviderError::Invalid(why));
    }
    Containers::create(opts.run_id.as_deref(), specs).map(Some)
}

/// Starts `launch`'s agent with a fresh token (returned): in its container when
/// `contained`, else as a child process in its cgroup. Its child (runc's launcher
/// for a container) joins the fleet's; its stdout is the agent's.
fn start_tenant(
    fleet: &mut super::LocalParts<'_>,
    launch: &AgentLaunch<'_>,
    contained: bool,
    bin: &Path,
    dir: &Path,
    opts: &LocalOptions,
) -> Result<String, ProviderError> {
    if !contained {
        let (child, token) = launch.spawn(bin, dir)?;
        let pid = child.id();
        fleet.children.push((launch.name.to_string(), child));
        if let Some(cg) = &fleet.cgroups {
            cg.add(launch.name, pid)?;
        }
        return Ok(token);
    }
    let containers = fleet.containers.as_deref_mut().ok_or_else(|| {
        ProviderError::Invalid(format!("tenant {} has no container runtime", launch.name))
    })?;
    let (token_file, token) = launch.write_token(dir)?;
    let none = TenantGrant::default();
    let child = containers.start(&runtime::Start {
        tenant: launch.name,
        agent_args: launch.args(Path::new(runtime::oci::AGENT_TOKEN)),
        binary: bin,
        token_file: &token_file,
        netns: launch.netns,
        cpus: launch.cpus.unwrap_or_default(),
        grant: opts.grant(launch.name).unwrap_or(&none),
        io_dir: opts.io_dir.as_deref(),
    })?;
    fleet.children.push((launch.name.to_string(), child));
    Ok(token)
}

/// One agent child to start.
struct AgentLaunch<'a> {
    name: &'a str,
    netns: Option<&'a str>,
    listen: IpAddr,
    cpus: Option<&'a [usize]>,
    /// Pass `--allow-commands`.
    allow_commands: bool,
}

impl AgentLaunch<'_> {
    /// Writes a fresh token file and starts the agent; returns the child and token.
    fn spawn(&self, bin: &Path, dir: &Path) -> Result<(Child, String), ProviderError> {
        let (token_file, token) = self.write_token(dir)?;
        let mut cmd = match self.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        cmd.args(self.args(&token_file));
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        nnb_sys::process::kill_with_parent(&mut cmd);
        let child = cmd.spawn().map_err(|e| ProviderError::AgentStart {
            tenant: self.name.to_string(),
            message: format!("cannot run {}: {e}", bin.display()),
        })?;
        tracing::debug!(tenant = self.name, pid = child.id(), "agent started");
        Ok((child, token))
    }

    /// The agent's command line after the binary, reading its token from
    /// `token_file` (the same for a process and a container).
    fn args(&self, token_file: &Path) -> Vec<String> {
        let mut args = vec![
            "agent".to_string(),
            "--listen".to_string(),
            SocketAddr::new(self.listen, 0).to_string(),
            "--token-file".to_string(),
            token_file.display().to_string(),
        ];
        if let Some(cpus) = self.cpus {
            args.extend(["--cpus".to_string(), format_list(cpus)]);
        }
        if self.allow_commands {
            args.push("--allow-commands".to_string());
        }
        args
    }

    /// Writes a fresh token to a 0600 file in `dir`; returns the file and token.
    fn write_token(&self, dir: &Path) -> Result<(PathBuf, String), ProviderError> {
        let token = Token::generate();
        let token_file = dir.join(format!("{}.token", self.name));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&token_file)
            .map_err(ProviderError::io(format!(
                "writing {}",
                token_file.display()
            )))?;
        writeln!(f, "{}", token.secret()).map_err(ProviderError::io(format!(
            "writing {}",
            token_file.display()
        )))?;
        Ok((token_file, token.secret().to_string()))
    }
}

/// Reads the agent's `listening ADDR` line (killing it when it is too slow).
async fn read_address(
    child: &mut Child,
    name: &str,
    timeout: Duration,
) -> Result<SocketAddr, ProviderError> {
    let fail = |message: String| ProviderError::AgentStart {
        tenant: name.to_string(),
        message,
    };
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| fail("its stdout was not captured".into()))?;
    let reader = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    });
    let line = match tokio::time::timeout(timeout, reader).await {
        Ok(Ok(Ok(line))) => line,
        Ok(Ok(Err(e))) => return Err(fail(format!("reading its address: {e}"))),
        Ok(Err(e)) => return Err(fail(format!("reading its address: {e}"))),
        Err(_) => {
            let _ = child.kill();
            return Err(fail(format!("it printed no address within {timeout:?}")));
        }
    };
    let addr = line.trim().strip_prefix("listening ").unwrap_or("");
    addr.parse().map_err(|_| {
        let status = child.try_wait().ok().flatten();
        match status {
            Some(s) => fail(format!(
                "it exited ({s}) before listening; see its error above"
            )),
            None => fail(format!("unexpected first line {:?}", line.trim())),
        }
    })
}

/// Waits until `t`'s agent answers `/health` (returning what it says), for at most
/// `timeout`.
async fn wait_healthy(t: &Tenant, timeout: Duration) -> Result<Health, ProviderError> {
    let deadline = tokio::time::Instant::now() + timeout;
    t.wait_healthy(deadline, HEALTH_POLL)
        .await
        .map_err(|e| ProviderError::AgentStart {
            tenant: t.name.clone(),
            message: format!("not healthy within {timeout:?}: {e}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reliability review M13: a second local run on the same CPUs is told, with the
    /// first run named, while a run on other CPUs goes ahead quietly; once the first
    /// ends (its locks closed) the CPUs are free again.
    #[test]
    fn a_second_run_on_the_same_cpus_is_warned() {
        let dir = tempfile::tempdir().unwrap();
        let (first, none) = hold_cpus(dir.path(), [0, 1, 1]);
        assert_eq!((first.len(), none.len()), (2, 0));
        let (second, warned) = hold_cpus(dir.path(), [1, 2]);
        assert_eq!(second.len(), 1, "CPU 2 was free");
        assert_eq!(warned.len(), 1, "{warned:?}");
        let me = format!("pid {}", std::process::id());
        assert!(
            warned[0].starts_with("CPU 1 is in use by another local nnb run")
                && warned[0].contains(&me),
            "{warned:?}"
        );
        drop(first);
        let (third, clear) = hold_cpus(dir.path(), [0, 1]);
        assert_eq!((third.len(), clear.len()), (2, 0));
    }

    fn spec(name: &str, role: Role, vcpus: usize) -> TenantSpec {
        TenantSpec {
            name: name.into(),
            role,
            vcpus,
            runtime: Default::default(),
        }
    }

    /// A topology of `cores` cores with `smt` siblings each, numbered like Linux
    /// does on x86 (sibling k of core c is CPU c + k*cores).
    fn fixture(cores: usize, smt: usize) -> (tempfile::TempDir, Topology) {
        let dir = tempfile::tempdir().unwrap();
        let cpu_root = dir.path().join("sys/devices/system/cpu");
        let n = cores * smt;
        for id in 0..n {
            let core = id % cores;
            let sib: Vec<usize> = (0..smt).map(|k| core + k * cores).collect();
            let t = cpu_root.join(format!("cpu{id}/topology"));
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("core_id"), format!("{core}\n")).unwrap();
            std::fs::write(t.join("physical_package_id"), "0\n").unwrap();
            std::fs::write(
                t.join("thread_siblings_list"),
                format!("{}\n", format_list(&sib)),
            )
            .unwrap();
            std::fs::write(t.join("core_cpus_list"), format!("{}\n", format_list(&sib))).unwrap();
            std::fs::write(cpu_root.join(format!("cpu{id}/online")), "1\n").unwrap();
        }
        std::fs::write(cpu_root.join("online"), format!("0-{}\n", n - 1)).unwrap();
        std::fs::write(cpu_root.join("present"), format!("0-{}\n", n - 1)).unwrap();
        std::fs::write(cpu_root.join("possible"), format!("0-{}\n", n - 1)).unwrap();
        let topo = Topology::read(dir.path()).unwrap();
        (dir, topo)
    }

    #[test]
    fn two_vcpu_tenants_get_a_sibling_pair_on_smt() {
        let (_d, topo) = fixture(4, 2);
        let all: Vec<usize> = (0..8).collect();
        let specs = [
            spec("small", Role::Neighbor, 1),
            spec("test", Role::Test, 2),
            spec("n1", Role::Neighbor, 2),
        ];
        let (sets, warnings) = carve_cpus(&topo, &all, &specs).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            sets[1],
            vec![0, 4],
            "the test tenant gets core 0's siblings"
        );
        assert_eq!(sets[2], vec![1, 5]);
        assert_eq!(sets[0], vec![2]);
    }

    #[test]
    fn without_smt_tenants_get_distinct_cpus() {
        let (_d, topo) = fixture(4, 1);
        let all: Vec<usize> = (0..4).collect();
        let specs = [spec("test", Role::Test, 2), spec("n1", Role::Neighbor, 2)];
        let (sets, warnings) = carve_cpus(&topo, &all, &specs).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(sets, vec![vec![0, 1], vec![2, 3]]);
    }

    #[test]
    fn too_few_cpus_are_shared_with_a_warning() {
        let (_d, topo) = fixture(2, 1);
        let all = [0, 1];
        let specs = [
            spec("test", Role::Test, 2),
            spec("n1", Role::Neighbor, 2),
            spec("n2", Role::Neighbor, 1),
            spec("huge", Role::Neighbor, 3),
        ];
        let (sets, warnings) = carve_cpus(&topo, &all, &specs).unwrap();
        assert!(
            sets.iter()
                .all(|s| !s.is_empty() && s.iter().all(|c| *c < 2)),
            "{sets:?}"
        );
        assert_eq!(
            sets[3],
            vec![0, 1],
            "a tenant larger than the host gets all of it"
        );
        assert!(
            warnings.iter().any(|w| w.contains("shared")),
            "{warnings:?}"
        );
        assert!(warnings.iter().any(|w| w.contains("huge")), "{warnings:?}");
    }

    /// Issue 28: on 2 CPUs, a and b of a matrix over two technologies get CPU 0
    /// and CPU 1, `a@process` and `a@runc` the same one (they are never present
    /// together), with no warning that CPUs are shared; 4 x 1 vCPU on 2 CPUs
    /// otherwise would be.
    #[test]
    fn one_tenant_in_several_technologies_shares_its_set() {
        let (_d, topo) = fixture(2, 1);
        let specs = [
            spec("a@process", Role::Test, 1),
            spec("b@process", Role::Neighbor, 1),
            spec("a@runc", Role::Test, 1),
            spec("b@runc", Role::Neighbor, 1),
        ];
        let (sets, warnings) = carve_cpus(&topo, &[0, 1], &specs).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(sets, vec![vec![0], vec![1], vec![0], vec![1]]);
    }

    #[test]
    fn zero_vcpus_is_an_error() {
        let (_d, topo) = fixture(2, 1);
        let err = carve_cpus(&topo, &[0, 1], &[spec("t", Role::Test, 0)]).unwrap_err();
        assert!(err.to_string().contains("0 vCPUs"));
    }

    /// Reliability review NL8: the token directory a controller killed with `-9`
    /// left (its name carries the dead pid) goes at the next launch, with its token
    /// file; a live controller's, another user's, a link so named (and what it
    /// points at), and an older nnb's directory without a pid stay.
    #[test]
    fn dead_controllers_token_directories_are_swept() {
        let tmp = tempfile::tempdir().unwrap();
        let own = private_dir().unwrap();
        let own_name = own.path().file_name().unwrap().to_str().unwrap();
        assert_eq!(fleet_dir_pid(own_name), Some(std::process::id()));
        // Above the kernel's largest pid_max (2^22): no live process has it.
        let dead = tmp.path().join("nnb-fleet-4194304-a1B2c3");
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join("test.token"), "secret").unwrap();
        let live = tmp
            .path()
            .join(format!("nnb-fleet-{}-x", std::process::id()));
        std::fs::create_dir(&live).unwrap();
        let old_style = tmp.path().join("nnb-fleet-a1B2c3");
        std::fs::create_dir(&old_style).unwrap();
        let target = tmp.path().join("target");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), "x").unwrap();
        let link = tmp.path().join("nnb-fleet-4194305-link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut kept = vec![&live, &old_style, &target, &link];
        let theirs = tmp.path().join("nnb-fleet-4194306-theirs");
        if nnb_testkit::effective_uid() == Some(0) {
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::lchown(&theirs, Some(3_999_999), None).unwrap();
            kept.push(&theirs);
        }
        assert_eq!(sweep_dead_fleet_dirs(tmp.path()), 1);
        assert!(!dead.exists());
        for path in kept {
            assert!(
                path.symlink_metadata().is_ok(),
                "{} was removed",
                path.display()
            );
        }
        assert!(target.join("keep").exists());
        assert_eq!(fleet_dir_pid("nnb-fleet-12-"), None);
        assert_eq!(fleet_dir_pid("nnb-fleet--x"), None);
        assert_eq!(fleet_dir_pid("nnb-fleet-1x-y"), None);
    }
}
