//! The EC2 provider: the experiment's tenants as instances on one dedicated host,
//! or with default tenancy (`tenancy = "default"`: no host, any catalog type, an
//! optional placement group the run creates and deletes).
//!
//! With mirrored servers (`servers = "mirrored"`) each client gets a server instance
//! of its own: by default on a second dedicated host of the clients' family (the
//! thesis' two hosts), each the client's type unless `server_instance_type` names
//! another, or with default tenancy when `server_tenancy = "default"`; the servers
//! stay up for the whole run.
//!
//! [`launch_plan`] turns an [`AwsSpec`] and the tenants into an
//! [`nnb_aws::ec2::LaunchPlan`] (cloud-init user data that installs nnb and starts
//! `nnb agent` with the run's random token, tags with the run id and an expiry);
//! [`check_capacity`] refuses a plan that does not fit the host before anything is
//! created; [`preflight`] adds the price, whether the user accepted it and the
//! resources a dry run lists, as the [`Preflight`] the CLI shows. [`AwsProvider`]
//! launches: it provisions (host, security group, test node then neighbors) into a
//! lease it holds, waits until every agent answers its health check, and hands the
//! tenants over as a [`Fleet`] that then owns the lease. Whatever happens after the
//! first resource exists (an error, a health timeout, Ctrl-C dropping the launch),
//! the provider's lease knows it and [`Provider::abandon`] tears it down;
//! [`Fleet::shutdown`] does so after the run. Between steps it stops and starts
//! tenants on the host ([`presence`] says why it stops rather than launching per
//! level).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::future::join_all;
use nnb_aws::ec2::{
    Ec2, HostKind, LaunchPlan, Launched, Lease, Place, PlacementGroupPlan, SecurityGroupPlan, Tags,
    TenantLaunch,
};
use nnb_aws::reap::SweepReport;
use nnb_aws::s3::S3;
use nnb_aws::userdata::{self, Install, UserDataParams};
use nnb_catalog::{Arch, Catalog};
use nnb_experiment::tenant::{server_name, ENDPOINT};
use nnb_experiment::PlacementGroup;
use nnb_format::ProviderKind;

use super::{
    upload, CloudLease, CloudRecord, CloudTeardown, Fleet, HostCpus, HostRecord, InstanceRecord,
    Placement, Preflight, Provider, ProviderContext, ProviderError, Role, Serving, Tenant,
    TenantSpec, UploadReport,
};
use crate::budget::CostCap;
use crate::client::BoxFuture;
use nnb_agent::Token;
use nnb_experiment::plan::Plan;
use nnb_experiment::{AgentInstall, AwsHost, AwsSpec, Experiment, ServerTenancy};

/// A status line for the person watching, on stderr. Never panics: teardown must
/// go on when stderr is closed (a pipe whose reader left, a closed terminal).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

pub mod agents;
mod preflight;
mod presence;

pub use agents::InstanceAgents;
pub use preflight::{estimate_cost, fleet_price, level_changes, preflight, FleetPrice};
use presence::Placed;

/// Time a run spends on launching and tearing down, added to the plan's estimate
/// when pricing it: allocation, boot and install, termination and release.
pub const LAUNCH_OVERHEAD: Duration = Duration::from_secs(10 * 60);
/// Time one change of the tenants present takes, added per change when pricing a run:
/// StopInstances until stopped, or StartInstances until the instance boots and its
/// agent answers (about a minute each on Nitro).
pub const LEVEL_CHANGE: Duration = Duration::from_secs(90);
/// Pause between two health checks of a tenant that did not answer yet.
const HEALTH_POLL: Duration = Duration::from_secs(1);
/// Silent tenants named one by one in a health-timeout error; the rest are counted.
const NAMED_SILENT: usize = 5;

/// An EC2 client and what it created for one run.
#[derive(Debug)]
pub struct AwsLease {
    ec2: Ec2,
    lease: Lease,
    /// The stand-in agents (tests), told of every instance teardown terminated.
    agents: Option<Arc<dyn InstanceAgents>>,
}

impl AwsLease {
    /// Whether nothing is held any more.
    pub fn is_empty(&self) -> bool {
        self.lease.is_empty()
    }

    /// Terminates, waits, releases and deletes what the lease holds, and whatever
    /// else carries the run's tag (a create call still in flight when Ctrl-C
    /// dropped the launch); on failure the error names what is left and how to
    /// sweep it.
    pub async fn teardown(&mut self) -> Result<(), ProviderError> {
        let run_id = self.lease.run_id().to_string();
        if !self.lease.is_empty() {
            say!(
                "tearing down run {run_id}: terminating {} instance(s), then releasing {} host(s)",
                self.lease.instance_ids().len(),
                self.lease.host_ids().len()
            );
        }
        let held = self.lease.instance_ids().to_vec();
        let torn = self.lease.teardown(&self.ec2).await;
        if let Some(agents) = &self.agents {
            let left = self.lease.instance_ids();
            for id in held.iter().filter(|id| !left.contains(id)) {
                agents.stopped(id);
            }
        }
        match torn {
            Ok(report) => {
                let removed = report.terminated.len()
                    + report.released.len()
                    + report.deleted_security_groups.len()
                    + report.deleted_placement_groups.len();
                if removed > 0 {
                    say!(
                        "torn down: {} instance(s) terminated, {} host(s) released, {} security group(s) and {} placement group(s) deleted",
                        report.terminated.len(),
                        report.released.len(),
                        report.deleted_security_groups.len(),
                        report.deleted_placement_groups.len()
                    );
                }
                Ok(())
            }
            Err(e) => {
                tracing::error!(
                    "run {run_id} could not be torn down completely: {e}. Remove what is left \
                     with: nnb aws sweep --run-id {run_id}"
                );
                Err(e.into())
            }
        }
    }
}

impl CloudTeardown for AwsLease {
    fn is_empty(&self) -> bool {
        AwsLease::is_empty(self)
    }

    fn teardown(&mut self) -> BoxFuture<'_, Result<(), ProviderError>> {
        Box::pin(AwsLease::teardown(self))
    }
}

impl Drop for AwsLease {
    fn drop(&mut self) {
        if !self.lease.is_empty() {
            let run_id = self.lease.run_id();
            tracing::error!(
                "run {run_id} still holds {} instance(s) {:?}, {} dedicated host(s) {:?} and {} \
                 security group(s) in AWS, which cost money until removed: run \
                 `nnb aws sweep --run-id {run_id}`",
                self.lease.instance_ids().len(),
                self.lease.instance_ids(),
                self.lease.host_ids().len(),
                self.lease.host_ids(),
                self.lease.security_group_ids().len()
            );
        }
    }
}

/// Where the tenants get nnb from, for user data. Every tenant of a run boots on
/// the host's architecture, so its source serves for both slots of the template
/// (validation made sure the file gives it).
fn install(spec: &AwsSpec) -> Result<Install, ProviderError> {
    let (x86_64, aarch64) = match &spec.install {
        AgentInstall::Preinstalled { path } => {
            return Ok(Install::Preinstalled { path: path.clone() })
        }
        AgentInstall::Download { x86_64, aarch64 } => (x86_64, aarch64),
    };
    let arch = spec.arch();
    let source = match arch {
        Arch::X86_64 => x86_64,
        Arch::Arm64 => aarch64,
    }
    .clone()
    .ok_or_else(|| {
        ProviderError::Invalid(format!(
            "{} is {arch}: `install` names no nnb binary for it",
            spec.instance_type
        ))
    })?;
    Ok(if source.starts_with("s3://") {
        Install::S3 {
            x86_64: source.clone(),
            aarch64: source,
        }
    } else {
        Install::Url {
            x86_64: source.clone(),
            aarch64: source,
        }
    })
}

/// The dedicated host of `spec`'s tenants, as EC2 allocates it; `None` with
/// default tenancy.
fn host_kind(spec: &AwsSpec) -> Option<HostKind> {
    spec.host.as_ref().map(|h| match h {
        AwsHost::Family(f) => HostKind::Family(f.clone()),
        AwsHost::Type(t) => HostKind::Type(t.clone()),
    })
}

/// The placement group of `spec`, as EC2 creates it.
fn placement_group(spec: &AwsSpec) -> Option<PlacementGroupPlan> {
    spec.placement_group.map(|g| PlacementGroupPlan {
        strategy: g.strategy().to_string(),
        partitions: match g {
            PlacementGroup::Partition { partitions } => Some(partitions),
            PlacementGroup::Cluster | PlacementGroup::Spread => None,
        },
    })
}

/// The cloud side of a run: host, tenants in launch order (test node first, then
/// the neighbors, then who `serving` says receives their probes and loads: the
/// endpoint off the host, or a server per client on the second host or with default
/// tenancy), user data starting `nnb agent` with `token`, tags with `cx`'s run id,
/// its campaign id and the expiry. With default tenancy every instance is
/// [`Place::Default`], in the spec's placement group.
pub fn launch_plan(
    spec: &AwsSpec,
    tenants: &[TenantSpec],
    serving: &Serving,
    cx: &ProviderContext,
    token: &str,
) -> Result<LaunchPlan, ProviderError> {
    let run_id = cx.run_id.as_str();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut ordered: Vec<&TenantSpec> = tenants.iter().filter(|t| t.role == Role::Test).collect();
    ordered.extend(tenants.iter().filter(|t| t.role != Role::Test));
    // One user data for every tenant: the agent needs no name of its own.
    let user_data = userdata::render(&UserDataParams {
        install: install(spec)?,
        agent_port: spec.agent_port,
        token: token.to_string(),
        tenant: "all".to_string(),
        run_id: run_id.to_string(),
    })
    .map_err(|e| ProviderError::Invalid(e.to_string()))?;
    let mut launches: Vec<TenantLaunch> = ordered
        .into_iter()
        .map(|t| TenantLaunch {
            name: t.name.clone(),
            role: t.role,
            instance_type: spec.instance_type.clone(),
            place: if spec.default_tenancy() {
                Place::Default
            } else {
                Place::Host
            },
        })
        .collect();
    let server_place = match (spec.tenancy, spec.server_tenancy) {
        (ServerTenancy::DedicatedHost, ServerTenancy::DedicatedHost) => Place::ServerHost,
        _ => Place::Default,
    };
    match serving {
        Serving::None => {}
        Serving::Shared => launches.push(TenantLaunch {
            name: ENDPOINT.to_string(),
            role: Role::Endpoint,
            instance_type: spec.endpoint_instance_type.clone(),
            place: Place::Default,
        }),
        Serving::Mirrored(clients) => launches.extend(clients.iter().map(|c| TenantLaunch {
            name: server_name(c),
            role: Role::Endpoint,
            instance_type: spec.server_type().to_string(),
            place: server_place,
        })),
    }
    let probe_ports = match serving {
        Serving::None => Vec::new(),
        Serving::Shared | Serving::Mirrored(_) => {
            let (reflector, sink) = spec.serve_ports();
            vec![reflector, sink]
        }
    };
    let servers_on_host = launches.iter().any(|t| t.place == Place::ServerHost);
    Ok(LaunchPlan {
        host: host_kind(spec),
        server_host: host_kind(spec).filter(|_| servers_on_host),
        availability_zone: spec.availability_zone.clone(),
        tenants: launches,
        image_id: spec.image_id.clone(),
        subnet_id: spec.subnet_id.clone(),
        key_name: spec.key_name.clone(),
        iam_instance_profile: spec.iam_instance_profile.clone(),
        security_group: if spec.security_group_ids.is_empty() {
            SecurityGroupPlan::Create {
                vpc_id: None,
                agent_port: spec.agent_port,
                probe_ports,
                cidrs: spec.allowed_cidrs.clone(),
            }
        } else {
            SecurityGroupPlan::Existing(spec.security_group_ids.clone())
        },
        placement_group: placement_group(spec),
        user_data,
        tags: Tags {
            run_id: run_id.to_string(),
            expires_at_unix: now + spec.expires_after.as_secs(),
            campaign_id: cx.campaign_id.clone(),
        },
    })
}

/// Refuses a plan whose tenants do not fit the host (catalog: instances per host,
/// or vCPUs of a family host). Creates nothing.
pub fn check_capacity(plan: &LaunchPlan) -> Result<(), ProviderError> {
    Ok(Ec2::check_capacity(plan, Catalog::builtin())?)
}

/// An EC2 client from the standard AWS chain (`region` overrides it). Missing
/// credentials or a dead endpoint surface in the first call's error, which names
/// the call and what the chain tried.
pub async fn connect(region: Option<&str>) -> Ec2 {
    Ec2::new(&nnb_aws::config::load(region).await)
}

/// Tears down everything tagged with campaign `campaign_id` (instances, dedicated
/// hosts, security groups, placement groups of any of its rounds; nothing of
/// another campaign or run) in `region` (`None`: the standard chain's), through
/// `ec2` when given (tests) else a client from the standard chain. A resumed
/// campaign calls it before its next round: no instance of a dead controller is
/// left running unowned.
pub async fn sweep_campaign(
    region: Option<&str>,
    ec2: Option<&Ec2>,
    campaign_id: &str,
) -> Result<SweepReport, ProviderError> {
    let owned;
    let ec2 = match ec2 {
        Some(ec2) => ec2,
        None => {
            owned = connect(region).await;
            &owned
        }
    };
    Ok(nnb_aws::reap::sweep_campaign(ec2, campaign_id).await?)
}

/// An S3 client from the standard AWS chain, as [`connect`].
pub async fn connect_s3(region: Option<&str>) -> S3 {
    S3::new(&nnb_aws::config::load(region).await)
}

/// The EC2 provider of one run: its spec, the lease of what its launch created
/// until the fleet takes it over, and the launched instances it stops and starts.
#[derive(Debug)]
pub struct AwsProvider {
    spec: AwsSpec,
    /// The run id and campaign id the resources are tagged with.
    cx: ProviderContext,
    lease: Option<AwsLease>,
    record: Option<CloudRecord>,
    /// The EC2 client to use; `None`: one from the standard chain at launch.
    ec2: Option<Ec2>,
    /// Who serves the instances' agents; `None`: the instances themselves.
    agents: Option<Arc<dyn InstanceAgents>>,
    /// The launched instances, once the launch succeeded.
    placed: Option<Placed>,
    /// Dedicated hosts the run holds: 1, or 2 with mirrored servers on a host of
    /// their own, 0 with default tenancy (known once launched).
    dedicated_hosts: u32,
    /// The instance type of every default-tenancy instance the run launched (once
    /// launched), priced per instance-hour.
    default_instances: Vec<String>,
}

impl AwsProvider {
    /// A provider launching `spec`'s tenants for `cx`'s run (tags, names; its
    /// campaign's tag too when it is a round).
    pub fn new(spec: &AwsSpec, cx: &ProviderContext) -> AwsProvider {
        AwsProvider {
            spec: spec.clone(),
            cx: cx.clone(),
            lease: None,
            record: None,
            ec2: None,
            agents: None,
            placed: None,
            dedicated_hosts: u32::from(spec.host.is_some()),
            default_instances: Vec::new(),
        }
    }

    /// A provider that talks to EC2 through `ec2` and whose instances' agents are
    /// served by `agents`, not by the instances: the test seam that runs the real
    /// provider and controller against moto (whose instances run nothing) with real
    /// agents. Not reachable from an experiment file or the command line.
    pub fn with_agents(
        spec: &AwsSpec,
        cx: &ProviderContext,
        ec2: Ec2,
        agents: Arc<dyn InstanceAgents>,
    ) -> AwsProvider {
        AwsProvider {
            ec2: Some(ec2),
            agents: Some(agents),
            ..AwsProvider::new(spec, cx)
        }
    }

    /// Provisions `tenants` (and who `serving` says serves them: an endpoint off
    /// the host, or mirrored servers) into the provider's lease, waits for every
    /// agent's health check, and returns the fleet, which then owns the lease.
    async fn launch_aws(
        &mut self,
        tenants: &[TenantSpec],
        serving: &Serving,
    ) -> Result<Fleet, ProviderError> {
        let (spec, run_id) = (&self.spec, self.cx.run_id.as_str());
        let token = Token::generate().secret().to_string();
        let plan = launch_plan(spec, tenants, serving, &self.cx, &token)?;
        check_capacity(&plan)?;
        let ec2 = match &self.ec2 {
            Some(ec2) => ec2.clone(),
            None => connect(spec.region.as_deref()).await,
        };
        let held = self.lease.insert(AwsLease {
            ec2: ec2.clone(),
            lease: Lease::new(run_id),
            agents: self.agents.clone(),
        });
        match &spec.host {
            Some(host) => say!(
                "run {run_id}: allocating {} {} dedicated host(s) in {} and launching {} \
                 instance(s) ({} x {})",
                1 + usize::from(plan.server_host.is_some()),
                host.name(),
                spec.availability_zone,
                plan.tenants.len(),
                tenants.len(),
                spec.instance_type
            ),
            None => say!(
                "run {run_id}: launching {} default-tenancy instance(s) in {} ({} x {}{})",
                plan.tenants.len(),
                spec.availability_zone,
                tenants.len(),
                spec.instance_type,
                match spec.placement_group {
                    Some(g) => format!(", {} placement group", g.strategy()),
                    None => String::new(),
                }
            ),
        }
        let launched = held.ec2.provision(&plan, &mut held.lease).await?;
        let host_id = held.lease.host_ids().first().cloned();
        let deadline = Instant::now() + spec.health_timeout;
        let ids: Vec<String> = launched.iter().map(|l| l.instance_id.clone()).collect();
        let launched = wait_state(
            &held.ec2,
            &ids,
            State::Running,
            deadline,
            spec.health_timeout,
        )
        .await?;
        let groups = match &plan.security_group {
            SecurityGroupPlan::Existing(ids) => ids.clone(),
            SecurityGroupPlan::Create { .. } => held.lease.security_group_ids().to_vec(),
        };
        let hosts = (held.lease.host(), held.lease.server_host());
        self.record = Some(record(spec, &plan, hosts, &launched, groups));
        self.dedicated_hosts =
            u32::from(plan.host.is_some()) + u32::from(plan.server_host.is_some());
        self.default_instances = plan
            .tenants
            .iter()
            .filter(|t| t.place == Place::Default)
            .map(|t| t.instance_type.clone())
            .collect();
        let addrs = agent_addrs(spec, self.agents.as_ref(), &launched, &token).await?;
        let fleet_tenants = to_tenants(tenants, &launched, &addrs, &token)?;
        let off_host = |name: String| TenantSpec {
            name,
            role: Role::Endpoint,
            vcpus: 1,
            runtime: Default::default(),
        };
        let endpoint = match serving {
            Serving::Shared => {
                to_tenants(&[off_host(ENDPOINT.to_string())], &launched, &addrs, &token)?.pop()
            }
            Serving::None | Serving::Mirrored(_) => None,
        };
        let server_specs: Vec<TenantSpec> = serving
            .clients()
            .iter()
            .map(|c| off_host(server_name(c)))
            .collect();
        let servers = to_tenants(&server_specs, &launched, &addrs, &token)?;
        say!(
            "run {run_id}: {} instance(s) launched; waiting up to {:?} for their agents on port {}",
            launched.len(),
            spec.health_timeout,
            spec.agent_port
        );
        let all: Vec<Tenant> = fleet_tenants
            .iter()
            .chain(&endpoint)
            .chain(&servers)
            .cloned()
            .collect();
        wait_healthy(&all, deadline, spec.health_timeout).await?;
        self.placed = Some(Placed {
            ec2,
            host_id,
            token,
            instances: launched
                .iter()
                .filter(|l| l.role != Some(Role::Endpoint))
                .map(|l| (l.tenant.clone(), l.instance_id.clone()))
                .collect(),
            unconfirmed: BTreeSet::new(),
        });
        let mut fleet = Fleet::of(fleet_tenants, endpoint);
        fleet.servers = servers;
        fleet.cloud = CloudLease {
            held: self
                .lease
                .take()
                .map(|l| Box::new(l) as Box<dyn CloudTeardown>),
            record: self.record.take(),
        };
        Ok(fleet)
    }
}

impl Provider for AwsProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Aws
    }

    /// One instance of `instance_type` per tenant (mirrored servers are listed by
    /// [`preflight`]).
    fn placement(
        &self,
        specs: &[TenantSpec],
        _host: &HostCpus<'_>,
    ) -> Result<Placement, ProviderError> {
        Ok(Placement::elsewhere(
            specs.len(),
            format!("({})", self.spec.instance_type),
        ))
    }

    /// The capacity check, the price and the consent to it ([`preflight`]).
    fn preflight(
        &self,
        exp: &Experiment,
        plan: &Plan,
        yes: bool,
    ) -> Result<Preflight, ProviderError> {
        preflight(&self.spec, exp, plan, yes)
    }

    /// With a client of the experiment's region.
    fn upload_results<'a>(
        &'a self,
        dir: &'a Path,
        dest: &'a str,
    ) -> BoxFuture<'a, Result<UploadReport, ProviderError>> {
        Box::pin(upload::to_s3(self.spec.region.as_deref(), dir, dest))
    }

    fn launch<'a>(
        &'a mut self,
        specs: &'a [TenantSpec],
        serving: &'a Serving,
    ) -> BoxFuture<'a, Result<Fleet, ProviderError>> {
        Box::pin(self.launch_aws(specs, serving))
    }

    /// Stops the tenants `present` leaves out and starts the stopped ones it names, on
    /// the run's host (see [`presence`]).
    fn set_present<'a>(
        &'a mut self,
        fleet: &'a mut Fleet,
        present: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<String>, ProviderError>> {
        Box::pin(self.change_present(fleet, present))
    }

    /// `max_cost_usd` at the catalog price of what the run holds: the dedicated
    /// hosts (the tenants', and the servers' when they have one of their own) and
    /// every default-tenancy instance (the tenants with default tenancy, the
    /// endpoint, default-tenancy servers) at its on-demand price, per hour.
    fn cost_cap(&self, since: tokio::time::Instant) -> Option<CostCap> {
        let max_usd = self.spec.max_cost_usd?;
        let price = fleet_price(&self.spec, self.dedicated_hosts, &self.default_instances);
        Some(CostCap::new(price.usd_per_hour, max_usd, since))
    }

    /// Tears down everything tagged with the campaign ([`sweep_campaign`]): the
    /// rounds a dead controller left running; the stand-in agents of what it
    /// terminated go too.
    fn sweep_campaign<'a>(
        &'a self,
        campaign_id: &'a str,
    ) -> BoxFuture<'a, Result<usize, ProviderError>> {
        Box::pin(async move {
            let report =
                sweep_campaign(self.spec.region.as_deref(), self.ec2.as_ref(), campaign_id).await?;
            if let (Some(agents), Some(torn)) = (&self.agents, &report.teardown) {
                for id in &torn.terminated {
                    agents.stopped(id);
                }
            }
            Ok(report.found.len())
        })
    }

    fn abandon(&mut self) -> BoxFuture<'_, (Option<CloudRecord>, Result<(), ProviderError>)> {
        Box::pin(async move {
            let released = match self.lease.as_mut() {
                Some(lease) => lease.teardown().await,
                None => Ok(()),
            };
            (self.record.clone(), released)
        })
    }
}

/// A state [`wait_state`] waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Booted: a public address is assigned only now.
    Running,
    /// Shut down: no VM on the host any more.
    Stopped,
}

impl State {
    /// EC2's name of it.
    fn name(self) -> &'static str {
        match self {
            State::Running => "running",
            State::Stopped => "stopped",
        }
    }
}

/// Instances `ids` described again once every one is in state `want`, in the order of
/// `ids`: RunInstances and StartInstances answer while they are pending (a public
/// address is assigned only when an instance runs), StopInstances while they are
/// stopping. Waiting counts against the health timeout (`timeout`, ending at
/// `deadline`): an instance that never boots fails the run like an agent that never
/// answers. One that is being terminated fails at once.
async fn wait_state(
    ec2: &Ec2,
    ids: &[String],
    want: State,
    deadline: Instant,
    timeout: Duration,
) -> Result<Vec<Launched>, ProviderError> {
    let want_name = want.name();
    loop {
        let now = ec2.describe(ids).await?;
        let mut waiting = Vec::new();
        for id in ids {
            match now.iter().find(|n| n.instance_id == *id) {
                Some(n) if n.state == want_name => {}
                Some(n) if matches!(n.state.as_str(), "shutting-down" | "terminated") => {
                    return Err(ProviderError::AgentStart {
                        tenant: n.tenant.clone(),
                        message: format!(
                            "its instance {id} is {} while nnb waits for it to be {want_name}",
                            n.state
                        ),
                    });
                }
                Some(n) => waiting.push(format!("{} ({id}, {})", n.tenant, n.state)),
                None => waiting.push(format!("{id} (not listed)")),
            }
        }
        if waiting.is_empty() {
            let mut now = now;
            now.sort_by_key(|n| ids.iter().position(|id| *id == n.instance_id));
            return Ok(now);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ProviderError::InstanceState {
                state: want_name,
                timeout,
                detail: waiting.join(", "),
            });
        }
        tokio::time::sleep(HEALTH_POLL.min(left)).await;
    }
}

/// Where each of `launched` (in order) is reached: the agent `agents` starts for it
/// when given (tests), else the agent port at the instance's public address, or its
/// private one when it has none.
async fn agent_addrs(
    spec: &AwsSpec,
    agents: Option<&Arc<dyn InstanceAgents>>,
    launched: &[Launched],
    token: &str,
) -> Result<Vec<SocketAddr>, ProviderError> {
    let mut addrs = Vec::with_capacity(launched.len());
    for l in launched {
        let fail = |message| ProviderError::AgentStart {
            tenant: l.tenant.clone(),
            message,
        };
        let addr = match agents {
            Some(agents) => agents
                .started(&l.tenant, &l.instance_id, token)
                .await
                .map_err(|e| fail(format!("its stand-in agent: {e}")))?,
            None => {
                let ip = l
                    .public_ip
                    .or(l.private_ip)
                    .ok_or_else(|| fail(format!("instance {} has no IP address", l.instance_id)))?;
                SocketAddr::new(ip, spec.agent_port)
            }
        };
        addrs.push(addr);
    }
    Ok(addrs)
}

/// The launched instances as tenants, in the order of `specs`; each agent is
/// reached at `addrs` (one per instance of `launched`).
fn to_tenants(
    specs: &[TenantSpec],
    launched: &[Launched],
    addrs: &[SocketAddr],
    token: &str,
) -> Result<Vec<Tenant>, ProviderError> {
    specs
        .iter()
        .map(|s| {
            let (l, addr) = launched
                .iter()
                .zip(addrs)
                .find(|(l, _)| l.tenant == s.name)
                .ok_or_else(|| ProviderError::AgentStart {
                    tenant: s.name.clone(),
                    message: "no instance was launched for it".to_string(),
                })?;
            Ok(Tenant {
                name: s.name.clone(),
                role: s.role,
                addr: *addr,
                token: token.to_string(),
                cpus: Vec::new(),
                netns: None,
                ip: l.private_ip,
                runtime: None,
            })
        })
        .collect()
}

/// The manifest's record of a dedicated host.
fn host_record(h: &nnb_aws::ec2::HostInfo) -> HostRecord {
    HostRecord {
        host_id: h.host_id.clone(),
        instance_family: h.instance_family.clone(),
        instance_type: h.instance_type.clone(),
        cores: h.cores,
        sockets: h.sockets,
        total_vcpus: h.total_vcpus,
        available: h.available.clone(),
    }
}

/// The manifest's record of what was provisioned: `(host, server_host)` as
/// DescribeHosts reported them.
fn record(
    spec: &AwsSpec,
    plan: &LaunchPlan,
    (host, server_host): (
        Option<&nnb_aws::ec2::HostInfo>,
        Option<&nnb_aws::ec2::HostInfo>,
    ),
    launched: &[Launched],
    security_groups: Vec<String>,
) -> CloudRecord {
    CloudRecord {
        provider: ProviderKind::Aws,
        region: spec.region.clone(),
        availability_zone: plan.availability_zone.clone(),
        host: host.map(host_record),
        server_host: server_host.map(host_record),
        instances: launched
            .iter()
            .map(|l| InstanceRecord {
                tenant: l.tenant.clone(),
                role: l.role,
                instance_id: l.instance_id.clone(),
                instance_type: plan
                    .tenants
                    .iter()
                    .find(|t| t.name == l.tenant)
                    .map_or_else(|| spec.instance_type.clone(), |t| t.instance_type.clone()),
                private_ip: l.private_ip.map(|ip| ip.to_string()),
                public_ip: l.public_ip.map(|ip| ip.to_string()),
                host_id: l.host_id.clone(),
                availability_zone: l.availability_zone.clone(),
                subnet_id: l.subnet_id.clone(),
            })
            .collect(),
        security_groups,
    }
}

/// Polls every tenant's `/health` until all answer or `timeout` passes; the error
/// names the tenants that stayed silent and why.
async fn wait_healthy(
    tenants: &[Tenant],
    deadline: Instant,
    timeout: Duration,
) -> Result<(), ProviderError> {
    let deadline = tokio::time::Instant::from_std(deadline);
    let checks = tenants.iter().map(|t| async move {
        t.wait_healthy(deadline, HEALTH_POLL)
            .await
            .map_err(|last| format!("{} at {}: {last}", t.name, t.addr))
    });
    let silent: Vec<String> = join_all(checks)
        .await
        .into_iter()
        .filter_map(Result::err)
        .collect();
    if silent.is_empty() {
        return Ok(());
    }
    let mut detail = silent
        .iter()
        .take(NAMED_SILENT)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if silent.len() > NAMED_SILENT {
        detail.push_str(&format!("; and {} more", silent.len() - NAMED_SILENT));
    }
    Err(ProviderError::Unhealthy { timeout, detail })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cost cap counts instance-hours with default tenancy: a run of two
    /// m5.large tenants and an m5.large endpoint holds $0.288/h (3 x $0.096), so
    /// an hour of it has spent $0.288; on a dedicated host the same run holds the
    /// host ($5.069/h) and the endpoint ($0.096/h).
    #[test]
    fn the_cost_cap_counts_default_tenancy_instance_hours() {
        let file = |provider: &str| {
            format!(
                "name = \"x\"\n[provider]\nkind = \"aws\"\navailability_zone = \"us-east-1a\"\n\
                 {provider}\nimage_id = \"ami-1\"\nsubnet_id = \"subnet-1\"\n\
                 allowed_cidrs = [\"10.0.0.0/16\"]\npreinstalled = \"/usr/local/bin/nnb\"\n\
                 max_cost_usd = 100.0\n[[tenants]]\nrole = \"test\"\n[[tenants]]\n\
                 role = \"neighbor\"\n[scenario]\nkind = \"neighbor-staircase\"\n\
                 [scenario.test]\nops = 10\n"
            )
        };
        let cases = [
            (
                "tenancy = \"default\"\ninstance_type = \"m5.large\"",
                0,
                3.0 * 0.096,
            ),
            (
                "host = \"m5\"\ninstance_type = \"m5.large\"",
                1,
                5.069 + 0.096,
            ),
        ];
        for (provider, hosts, hourly) in cases {
            let exp = nnb_experiment::parse("e.toml", &file(provider), Some(2))
                .unwrap_or_else(|e| panic!("{e}"));
            let nnb_experiment::Provider::Aws(spec) = &exp.provider else {
                panic!("aws")
            };
            let mut p = AwsProvider::new(spec, &ProviderContext::default());
            // As a launch of the two tenants and the endpoint leaves it.
            p.dedicated_hosts = hosts;
            p.default_instances = match hosts {
                0 => vec!["m5.large".to_string(); 3],
                _ => vec!["m5.large".to_string()],
            };
            let hour = Duration::from_secs(3600);
            let since = tokio::time::Instant::now()
                .checked_sub(hour)
                .expect("an hour of monotonic clock");
            let cap = p.cost_cap(since).expect("max_cost_usd is set");
            let spent = cap.spent_usd();
            // Spent over the hour and the microseconds since `since` was taken.
            assert!(
                spent >= hourly - 1e-9 && spent < hourly * 1.001,
                "{spent} for {hourly}/h ({provider})"
            );
        }
    }
}
