//! Providers bring up a fleet of agents for an experiment and take it down again.
//!
//! - [`local`]: `nnb agent` child processes on this machine, each pinned to a CPU set
//!   carved from the real topology, optionally each in its own network namespace
//!   behind one shaped uplink ([`netns`]);
//! - [`static_hosts`]: agents a user already runs, named in a hosts file;
//! - `aws` (cargo feature `aws`): EC2 instances on one dedicated host, held in a
//!   [`CloudLease`] from the first resource created.
//!
//! The controller sees them only through the [`Provider`] trait, and [`for_experiment`]
//! is the one place that maps an experiment's provider kind to an implementation.
//!
//! A [`Fleet`] owns what it started: [`Fleet::shutdown`] stops the jobs, kills and
//! reaps every child agent, removes the namespaces and tears the cloud resources
//! down. Dropping a fleet does the local part; cloud teardown needs the async
//! [`Fleet::shutdown`], and a fleet dropped without it logs the `nnb aws sweep`
//! command that removes what it held.

#[cfg(feature = "aws")]
pub mod aws;
pub mod cloud;
pub mod grants;
pub mod local;
pub mod netns;
pub mod preflight;
pub mod runtime;
pub mod static_hosts;
pub mod upload;
pub mod usage;

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::budget::CostCap;
use crate::client::{stop_all_jobs, AgentApi, AgentClient, AgentError, BoxFuture};
use nnb_agent::jobs::limits::SHUTDOWN_GRACE;
use nnb_agent::jobs::Health;
use nnb_experiment::plan::Plan;
pub use nnb_experiment::plan::Serving;
use nnb_experiment::Experiment;
use nnb_format::ProviderKind;

pub use cloud::{CloudLease, CloudRecord, CloudTeardown, HostRecord, InstanceRecord};
pub use local::{launch_local, LocalOptions, LocalProvider};
pub use nnb_experiment::tenant::{Network, Role, TenantSpec};
pub use preflight::{HostCpus, Placement, Preflight, Resource, Resources, Verdict};
pub use static_hosts::{load_static, StaticProvider};
pub use upload::UploadReport;
pub use usage::{HostUsage, UsageMeter, UsageSource};

/// What brings a run's tenants up, reaches their agents, changes which are present
/// between steps, and takes them down. Resources a launch creates are held by the
/// provider until the fleet is handed over, so a launch that fails or is dropped
/// half-way (Ctrl-C) is torn down by [`Provider::abandon`].
pub trait Provider: Send + Sync {
    /// The kind, as written in experiment files (`local`, `static`, `aws`).
    fn kind(&self) -> ProviderKind;

    /// Brings up the tenants of `specs`, plus who `serving` says receives their
    /// probes and loads (off the host): an endpoint agent when shared, a server agent
    /// per client when mirrored ([`Fleet::servers`]), and waits until they answer.
    fn launch<'a>(
        &'a mut self,
        specs: &'a [TenantSpec],
        serving: &'a Serving,
    ) -> BoxFuture<'a, Result<Fleet, ProviderError>>;

    /// The job API of `tenant`'s agent (the HTTP client by default).
    fn agent(&self, tenant: &Tenant) -> Arc<dyn AgentApi> {
        Arc::new(tenant.client())
    }

    /// Makes exactly the tenants named in `present` present (their agents run and
    /// answer) and every other tenant of `fleet` absent (its agent, and on aws its
    /// instance, is gone), between two steps: neighbors that come and go per level.
    /// Returns the tenants whose agents were (re)started, whose address or token may
    /// have changed (the caller gets new clients for them from [`Provider::agent`]).
    /// Providers whose tenants are not theirs to start or stop refuse any change.
    fn set_present<'a>(
        &'a mut self,
        fleet: &'a mut Fleet,
        present: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<String>, ProviderError>> {
        let kind = self.kind();
        Box::pin(async move {
            match fleet.tenants.iter().find(|t| !present.contains(&t.name)) {
                None => Ok(Vec::new()),
                Some(t) => Err(ProviderError::Unsupported(format!(
                    "the {kind} provider cannot start or stop tenants between steps \
                     (asked to remove {})",
                    t.name
                ))),
            }
        })
    }

    /// Lifts the grants of the tenants named in `lifted` and enforces every other
    /// tenant's, between two steps (an isolation matrix's unrestricted tenant). A
    /// provider that enforces no grants (its tenants' machines are their grants)
    /// has nothing to lift.
    fn set_lifted<'a>(
        &'a mut self,
        fleet: &'a mut Fleet,
        lifted: &'a [String],
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        let _ = (fleet, lifted);
        Box::pin(async { Ok(()) })
    }

    /// Starts reading what `tenants` use, from the host side (their cgroups and
    /// interfaces), for a step's measured jobs; `None` when the provider cannot see
    /// its tenants from outside.
    fn usage_meter(&self, fleet: &Fleet, tenants: &[String]) -> Option<UsageMeter> {
        let _ = (fleet, tenants);
        None
    }

    /// The spending limit of a run whose resources are held since `since` (before
    /// the launch); `None` when the provider costs nothing or the run sets no cap.
    fn cost_cap(&self, since: Instant) -> Option<CostCap> {
        let _ = since;
        None
    }

    /// Whether fleets of this kind may run at the same time as others of its kind
    /// (a campaign's lanes in parallel): cloud fleets may; local ones would share
    /// this machine's CPUs and emulated network, so they run one after another.
    fn concurrent_fleets(&self) -> bool {
        self.kind() == ProviderKind::Aws
    }

    /// Where the tenants of `specs` would run, for a dry run; nothing is started.
    /// By default the provider picks no CPUs and names no place.
    fn placement(
        &self,
        specs: &[TenantSpec],
        host: &HostCpus<'_>,
    ) -> Result<Placement, ProviderError> {
        let _ = host;
        Ok(Placement::elsewhere(specs.len(), "-"))
    }

    /// What a real run of `exp`'s `plan` would create and cost, and whether it may
    /// start (`yes`: the user accepted the cost up front); nothing is created. By
    /// default the run creates and costs nothing ([`Preflight::free`]).
    fn preflight(
        &self,
        exp: &Experiment,
        plan: &Plan,
        yes: bool,
    ) -> Result<Preflight, ProviderError> {
        let _ = (plan, yes);
        Ok(Preflight::free(exp))
    }

    /// Uploads the run directory `dir` to `dest` (the experiment's `results_s3`),
    /// by default with the standard AWS chain's region.
    fn upload_results<'a>(
        &'a self,
        dir: &'a Path,
        dest: &'a str,
    ) -> BoxFuture<'a, Result<UploadReport, ProviderError>> {
        Box::pin(upload::to_s3(None, dir, dest))
    }

    /// Before a campaign resumes: tears down every resource tagged with campaign
    /// `campaign_id` (rounds a dead controller left running), returning how many it
    /// found. Local agents end with the controller that started them (their parent
    /// death signal), so by default there is nothing to sweep.
    fn sweep_campaign<'a>(
        &'a self,
        campaign_id: &'a str,
    ) -> BoxFuture<'a, Result<usize, ProviderError>> {
        let _ = campaign_id;
        Box::pin(async { Ok(0) })
    }

    /// After a launch that failed or was interrupted: tears down what it created
    /// and returns the record of it (for the manifest), with the teardown's result.
    fn abandon(&mut self) -> BoxFuture<'_, (Option<CloudRecord>, Result<(), ProviderError>)> {
        Box::pin(async { (None, Ok(())) })
    }

    /// Stops every job on every agent of `fleet` (agents that do not answer are
    /// skipped), then takes the fleet down: child agents, namespaces, cloud.
    fn shutdown(&mut self, fleet: Fleet) -> BoxFuture<'_, Result<(), ProviderError>> {
        let agents: Vec<Arc<dyn AgentApi>> = fleet.all().map(|t| self.agent(t)).collect();
        Box::pin(fleet.shutdown_with(agents))
    }
}

/// What a provider needs besides the experiment.
#[derive(Debug, Clone, Default)]
pub struct ProviderContext {
    /// `nnb` binary for local agents (`None` = this executable).
    pub nnb_bin: Option<PathBuf>,
    /// The run id (cloud resources are tagged with it).
    pub run_id: String,
    /// The campaign the run is a round of (cloud resources are tagged with it too,
    /// so a resumed campaign finds what a dead controller left); `None`: a lone run.
    pub campaign_id: Option<String>,
}

/// The provider of `exp`'s kind: the one place provider kinds are registered.
pub fn for_experiment(
    exp: &Experiment,
    cx: ProviderContext,
) -> Result<Box<dyn Provider>, ProviderError> {
    match &exp.provider {
        nnb_experiment::Provider::Local => Ok(Box::new(LocalProvider::new(LocalOptions {
            nnb_bin: cx.nnb_bin,
            network: exp.network,
            cgroups: local::Cgroups::of(exp),
            grants: exp
                .launched_tenants()
                .iter()
                .filter(|t| !t.grant.is_empty())
                .map(|t| (t.name.clone(), t.grant.clone()))
                .collect(),
            io_dir: exp.disk_dir().map(Path::to_path_buf),
            allow_commands: exp.runs_commands(),
            run_id: Some(cx.run_id),
            usage_interval: exp.usage_interval(),
            ..LocalOptions::default()
        }))),
        nnb_experiment::Provider::Static { hosts, token_file } => {
            Ok(Box::new(StaticProvider::new(hosts, token_file)))
        }
        #[cfg(feature = "aws")]
        nnb_experiment::Provider::Aws(spec) => Ok(Box::new(aws::AwsProvider::new(spec, &cx))),
        #[cfg(not(feature = "aws"))]
        nnb_experiment::Provider::Aws(_) => Err(ProviderError::NoAwsFeature),
    }
}

/// A running agent the controller can talk to.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Tenant {
    /// Name (from its [`TenantSpec`] or the hosts file).
    pub name: String,
    /// Test or neighbor.
    pub role: Role,
    /// The agent's HTTP address.
    pub addr: SocketAddr,
    /// The agent's bearer token.
    #[serde(skip_serializing, default)]
    pub token: String,
    /// CPUs the agent is pinned to (empty when unknown, e.g. a static host before
    /// its health was asked).
    pub cpus: Vec<usize>,
    /// The tenant's network namespace (emulated network only).
    pub netns: Option<String>,
    /// The tenant's own IP in the emulated network (what its traffic comes from).
    pub ip: Option<IpAddr>,
    /// The container runtime its agent runs inside, its version, container and
    /// cgroup (local tenants in a runtime other than a plain process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<nnb_format::RuntimeRecord>,
}

impl Tenant {
    /// A client of this tenant's agent.
    pub fn client(&self) -> AgentClient {
        AgentClient::new(self.addr, self.token.clone())
    }

    /// Asks the agent's `/health` every `poll` until it answers (returning what it
    /// says) or `deadline` passes (returning its last error, or `no answer`): how
    /// every provider waits for the agents it started.
    pub async fn wait_healthy(&self, deadline: Instant, poll: Duration) -> Result<Health, String> {
        let client = self.client();
        let mut last = "no answer".to_string();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(last);
            }
            match tokio::time::timeout(left, client.health()).await {
                Ok(Ok(health)) => return Ok(health),
                Ok(Err(e)) => last = e.to_string(),
                Err(_) => last = "no answer".to_string(),
            }
            let left = deadline.saturating_duration_since(Instant::now());
            tokio::time::sleep(poll.min(left)).await;
        }
    }
}

/// Why a fleet could not be provided.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The experiment asks for something this provider cannot give.
    #[error("{0}")]
    Invalid(String),
    /// The provider cannot do what was asked of it (e.g. stop a static host).
    #[error("{0}")]
    Unsupported(String),
    /// Emulated networking needs root.
    #[error("emulated network needs root: run as root or set network = \"none\"")]
    NeedRoot,
    /// The CPU topology could not be read.
    #[error("cannot read the CPU topology: {0}")]
    Topology(#[from] nnb_burn::topology::TopologyError),
    /// A file could not be read or written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A hosts file line is wrong.
    #[error("{file}:{line}: {message}")]
    HostsFile {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// An agent did not start or did not become healthy.
    #[error("agent for tenant {tenant} did not start: {message}")]
    AgentStart {
        /// The tenant.
        tenant: String,
        /// What happened.
        message: String,
    },
    /// A network setup command failed.
    #[error("network setup failed: `{command}`: {message}")]
    Net {
        /// The command line.
        command: String,
        /// Its error output or exit status.
        message: String,
    },
    /// An agent request failed.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// The experiment needs the EC2 provider, which this build lacks.
    #[error(
        "this nnb was built without the aws feature: build the operator's nnb with default \
         features (`cargo build --release`) to run kind = \"aws\" experiments"
    )]
    NoAwsFeature,
    /// The cloud refused or failed.
    #[cfg(feature = "aws")]
    #[error(transparent)]
    Aws(#[from] nnb_aws::ec2::AwsError),
    /// The results could not be uploaded to `results_s3`.
    #[cfg(feature = "aws")]
    #[error("{what}")]
    Upload {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: nnb_aws::s3::S3Error,
    },
    /// Cloud instances did not reach the state a launch or a level change waits for
    /// (running, or stopped) in time.
    #[error(
        "instances did not become {state} within {timeout:?} (`health_timeout` in \
         [provider]): {detail}"
    )]
    InstanceState {
        /// The state waited for.
        state: &'static str,
        /// The timeout.
        timeout: Duration,
        /// Each instance still waited for, with its state.
        detail: String,
    },
    /// The cloud tenants' agents did not answer their health check in time.
    #[error(
        "the agents did not answer their health check within {timeout:?} \
         (`health_timeout` in [provider]): {detail}"
    )]
    Unhealthy {
        /// The timeout.
        timeout: Duration,
        /// Each silent tenant and its last error.
        detail: String,
    },
}

impl ProviderError {
    /// An I/O error with what was being done.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ProviderError {
        let what = what.into();
        move |source| ProviderError::Io { what, source }
    }
}

/// The agents of one experiment, and what must be torn down after it.
#[derive(Debug)]
pub struct Fleet {
    /// The tenants, in the order of their specs (or of the hosts file).
    pub tenants: Vec<Tenant>,
    /// The agent standing for the world outside the host, where the test node's
    /// probes and the neighbors' load go: on the far side of the shaped uplink with
    /// the emulated network, a plain loopback agent otherwise. Run the `serve` job
    /// there. `None` for a static fleet without an `endpoint` line.
    pub endpoint: Option<Tenant>,
    /// Mirrored servers ([`Serving::Mirrored`]): one agent per client, named
    /// [`nnb_experiment::tenant::server_name`] of it, in the order of the clients.
    /// Each runs the `serve` job only its client sends to; they stay up for the whole
    /// run, whichever tenants are present.
    pub servers: Vec<Tenant>,
    /// Things the experiment should record (e.g. tenants sharing CPUs).
    pub warnings: Vec<String>,
    /// Child agents, with the name of the tenant each serves.
    children: Vec<(String, Child)>,
    net: Option<netns::NetLab>,
    /// A local fleet's tenant cgroups (grants and host-side accounting).
    cgroups: Option<grants::TenantCgroups>,
    /// A local fleet's containers (tenants whose runtime is not a process).
    containers: Option<runtime::Containers>,
    cloud: CloudLease,
    /// A local fleet's per-CPU locks, held while it lives (see [`local`]).
    _cpu_locks: Vec<std::fs::File>,
}

/// The parts of a [`Fleet`] a local launch starts an agent into.
struct LocalParts<'a> {
    children: &'a mut Vec<(String, Child)>,
    cgroups: Option<&'a grants::TenantCgroups>,
    containers: Option<&'a mut runtime::Containers>,
}

/// Time given to the agents' jobs to stop during [`Fleet::shutdown`].
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a child agent gets to exit after `SIGTERM` before it is killed. An
/// agent told to shut down lets the requests in flight finish, waits for its jobs'
/// threads to end (a disk job removes its scratch file as it ends) and then for its
/// runtime, each for at most [`SHUTDOWN_GRACE`]; one more is the slack of its exit.
const AGENT_EXIT_GRACE: Duration = Duration::from_secs(4 * SHUTDOWN_GRACE.as_secs());

/// Pause between two checks of whether the child agents told to exit have.
const AGENT_EXIT_POLL: Duration = Duration::from_millis(10);

/// Ends child agents `(tenant, child)` the way a user's `kill` would, so that each
/// stops its jobs and removes what they made (reliability review NM2: `SIGKILL`
/// left a disk job's scratch file, gigabytes of it): `SIGTERM` to all at once,
/// then up to [`AGENT_EXIT_GRACE`] for them to exit, then `SIGKILL` for any still
/// there. Every one is reaped.
fn end_agents(mut children: Vec<(String, Child)>) {
    let running = |c: &mut Child| matches!(c.try_wait(), Ok(None));
    for (name, child) in &mut children {
        if running(child) {
            if let Err(e) = nnb_sys::process::terminate(child.id()) {
                tracing::debug!("SIGTERM to the agent of {name}: {e}");
            }
        }
    }
    let deadline = std::time::Instant::now() + AGENT_EXIT_GRACE;
    while children.iter_mut().any(|(_, c)| running(c)) && std::time::Instant::now() < deadline {
        std::thread::sleep(AGENT_EXIT_POLL);
    }
    for (name, child) in &mut children {
        if running(child) {
            tracing::warn!(
                "the agent of {name} (pid {}) did not exit within {AGENT_EXIT_GRACE:?} of \
                 SIGTERM: killing it",
                child.id()
            );
            let _ = child.kill();
        }
        let _ = child.wait();
    }
}

impl Fleet {
    /// A fleet of `tenants` (and `endpoint`) that holds nothing to tear down: agents
    /// someone else runs.
    pub fn of(tenants: Vec<Tenant>, endpoint: Option<Tenant>) -> Fleet {
        Fleet {
            tenants,
            endpoint,
            servers: Vec::new(),
            warnings: Vec::new(),
            children: Vec::new(),
            net: None,
            cgroups: None,
            containers: None,
            cloud: CloudLease::default(),
            _cpu_locks: Vec::new(),
        }
    }

    /// Every agent: the tenants, then the endpoint, then the mirrored servers.
    pub fn all(&self) -> impl Iterator<Item = &Tenant> {
        self.tenants
            .iter()
            .chain(self.endpoint.as_ref())
            .chain(&self.servers)
    }

    /// The test tenant, if the fleet has one.
    pub fn test(&self) -> Option<&Tenant> {
        self.tenants.iter().find(|t| t.role == Role::Test)
    }

    /// The neighbor tenants, in order.
    pub fn neighbors(&self) -> impl Iterator<Item = &Tenant> {
        self.tenants.iter().filter(|t| t.role == Role::Neighbor)
    }

    /// The emulated network, when the fleet has one (its namespaces and addresses).
    pub fn network(&self) -> Option<&netns::NetLab> {
        self.net.as_ref()
    }

    /// Where a cloud fleet runs (host, instances), for the manifest.
    pub fn cloud_record(&self) -> Option<&CloudRecord> {
        self.cloud.record()
    }

    /// Process ids of the child agents this fleet started (empty for a static fleet),
    /// and of its containers' agents.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self.children.iter().map(|(_, c)| c.id()).collect();
        pids.extend(self.containers.iter().flat_map(runtime::Containers::pids));
        pids
    }

    /// Stops every running job on every agent, then ends and reaps the child
    /// agents (`SIGTERM`, then `SIGKILL` after a grace), removes the emulated
    /// network and tears the cloud resources down (whatever failed before). Agents
    /// that do not answer are skipped (they are ended anyway when local, terminated
    /// when in the cloud).
    pub async fn shutdown(self) -> Result<(), ProviderError> {
        let agents: Vec<Arc<dyn AgentApi>> = self
            .all()
            .map(|t| Arc::new(t.client()) as Arc<dyn AgentApi>)
            .collect();
        self.shutdown_with(agents).await
    }

    /// [`Fleet::shutdown`] reaching the agents through `agents`.
    async fn shutdown_with(mut self, agents: Vec<Arc<dyn AgentApi>>) -> Result<(), ProviderError> {
        let mut stops = tokio::task::JoinSet::new();
        for agent in agents {
            stops.spawn(async move {
                let _ = tokio::time::timeout(STOP_TIMEOUT, stop_all_jobs(agent.as_ref())).await;
            });
        }
        while stops.join_next().await.is_some() {}
        let local = self.teardown();
        let cloud = self.cloud.release().await;
        local.and(cloud)
    }

    /// Refuses a present list that names a tenant this fleet does not have.
    pub fn check_present(&self, present: &[String]) -> Result<(), ProviderError> {
        match present
            .iter()
            .find(|n| !self.tenants.iter().any(|t| &t.name == *n))
        {
            Some(name) => Err(ProviderError::Invalid(format!(
                "no tenant {name} in the fleet"
            ))),
            None => Ok(()),
        }
    }

    /// What a local launch adds an agent to: the child agents, the tenant cgroups
    /// and the containers (borrowed apart from the emulated network).
    fn parts(&mut self) -> LocalParts<'_> {
        LocalParts {
            children: &mut self.children,
            cgroups: self.cgroups.as_ref(),
            containers: self.containers.as_mut(),
        }
    }

    /// Ends and reaps the child agents `keep` says no to ([`end_agents`]), and
    /// stops their containers (a container tenant's child is runc's launcher).
    fn kill_children(&mut self, keep: impl Fn(&str) -> bool) {
        let (going, staying) = std::mem::take(&mut self.children)
            .into_iter()
            .partition(|(n, _)| !keep(n));
        self.children = staying;
        end_agents(going);
        if let Some(c) = &mut self.containers {
            c.stop(|n| !keep(n), AGENT_EXIT_GRACE);
        }
    }

    fn teardown(&mut self) -> Result<(), ProviderError> {
        self.kill_children(|_| false);
        if let Some(c) = self.containers.take() {
            c.remove(AGENT_EXIT_GRACE);
        }
        let cgroups = self
            .cgroups
            .take()
            .map_or(Ok(()), grants::TenantCgroups::remove);
        let net = self.net.take().map_or(Ok(()), netns::NetLab::remove);
        cgroups.and(net)
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            tracing::warn!("tearing down the fleet: {e}");
        }
    }
}
