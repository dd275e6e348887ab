//! Providers bring up a fleet of agents for an experiment and take it down again.
//!
//! - [`local`]: `nnb agent` child processes on this machine, each pinned to a CPU set
//!   carved from the real topology, optionally each in its own network namespace
//!   behind one shaped uplink ([`netns`]);
//! - [`static_hosts`]: agents a user already runs, named in a hosts file;
//! - `aws` (cargo feature `aws`): EC2 instances on one dedicated host, held in a
//!   [`CloudLease`] from the first resource created.
//!
//! A [`Fleet`] owns what it started: [`Fleet::shutdown`] stops the jobs, kills and
//! reaps every child agent, removes the namespaces and tears the cloud resources
//! down. Dropping a fleet does the local part; cloud teardown needs the async
//! [`Fleet::shutdown`], and a fleet dropped without it logs the `nnb aws sweep`
//! command that removes what it held.

#[cfg(feature = "aws")]
pub mod aws;
pub mod cloud;
pub mod local;
pub mod netns;
pub mod static_hosts;

use std::net::{IpAddr, SocketAddr};
use std::process::Child;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::client::{AgentClient, AgentError};

pub use cloud::{CloudLease, CloudRecord, HostRecord, InstanceRecord};
pub use local::{launch_local, LocalOptions, Network};
pub use static_hosts::load_static;

/// What a tenant is for in an experiment (defined by the results format).
pub use nnb_format::Role;

/// A tenant to provide: its name, role and size.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TenantSpec {
    /// Unique name (appears in logs, namespaces and results).
    pub name: String,
    /// Test or neighbor.
    pub role: Role,
    /// vCPUs (logical CPUs) the tenant gets.
    pub vcpus: usize,
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
}

impl Tenant {
    /// A client of this tenant's agent.
    pub fn client(&self) -> AgentClient {
        AgentClient::new(self.addr, self.token.clone())
    }
}

/// Why a fleet could not be provided.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The experiment asks for something this provider cannot give.
    #[error("{0}")]
    Invalid(String),
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
    /// Things the experiment should record (e.g. tenants sharing CPUs).
    pub warnings: Vec<String>,
    children: Vec<Child>,
    net: Option<netns::NetLab>,
    cloud: CloudLease,
}

/// Time given to the agents' jobs to stop during [`Fleet::shutdown`].
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

impl Fleet {
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

    /// Process ids of the child agents this fleet started (empty for a static fleet).
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// Stops every running job on every agent, then kills and reaps the child
    /// agents, removes the emulated network and tears the cloud resources down
    /// (whatever failed before). Agents that do not answer are skipped (they are
    /// killed anyway when local, terminated when in the cloud).
    pub async fn shutdown(mut self) -> Result<(), ProviderError> {
        let mut stops = tokio::task::JoinSet::new();
        for c in self
            .tenants
            .iter()
            .chain(self.endpoint.as_ref())
            .map(Tenant::client)
        {
            stops.spawn(async move {
                let _ = tokio::time::timeout(STOP_TIMEOUT, stop_all_jobs(&c)).await;
            });
        }
        while stops.join_next().await.is_some() {}
        let local = self.teardown();
        let cloud = self.cloud.release().await;
        local.and(cloud)
    }

    fn teardown(&mut self) -> Result<(), ProviderError> {
        for child in &mut self.children {
            // Already gone is fine: kill fails with InvalidInput for a reaped child.
            let _ = child.kill();
            let _ = child.wait();
        }
        self.children.clear();
        match self.net.take() {
            Some(net) => net.remove(),
            None => Ok(()),
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            tracing::warn!("tearing down the fleet: {e}");
        }
    }
}

async fn stop_all_jobs(c: &AgentClient) {
    let Ok(jobs) = c.list().await else {
        return;
    };
    for job in jobs.iter().filter(|j| !j.state.is_final()) {
        if let Err(e) = c.stop(&job.id).await {
            tracing::warn!("stopping job {} on {}: {e}", job.id, c.addr());
        }
    }
}
