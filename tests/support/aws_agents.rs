//! The aws provider against a real moto server with real agents: a real `nnb agent`
//! on 127.0.0.1 per running instance (the provider's test seam,
//! `AwsProvider::with_agents`: moto's instances run nothing), started when its
//! instance starts and killed when it stops; a provider wrapper that calls a hook
//! whenever the test tenant's agent is asked to start a job (the tests look at the
//! cloud then); and the check that nothing is left. Shared by the staircase and the
//! campaign tests.

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nnb_agent::jobs::{Health, JobId, JobRequest, JobStatus};
use nnb_aws::ec2::Ec2;
use nnb_controller::client::{AgentApi, AgentError, BoxFuture};
use nnb_controller::provider::aws::{AwsProvider, InstanceAgents};
use nnb_controller::provider::{
    CloudRecord, Fleet, Provider, ProviderError, Role, Serving, Tenant, TenantSpec,
};

use crate::support::agents::still_alive_after;
use crate::support::cli::NNB;
use crate::support::moto::{Moto, REGION};

/// An EC2 client of the moto server at `endpoint` with test credentials.
pub(crate) async fn ec2_of(endpoint: &str) -> Ec2 {
    let sdk = nnb_aws::config::loader(Some(REGION))
        .endpoint_url(endpoint)
        .test_credentials()
        .load()
        .await;
    Ec2::new(&sdk)
}

/// A loopback address of its own for each agent started (all of 127/8 is this
/// machine's loopback): an endpoint agent serves its reflector and sinks at the
/// provider's fixed ports of its own address, as on its own instance, so two
/// endpoints up at once (two zones' rounds, two tests, the kill test's controller
/// and its resume) must not share one. 127.P.N/250.N%250+1: P from this process's
/// id, N counting the agents it started.
fn loopback_address() -> std::net::Ipv4Addr {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let process = u8::try_from(std::process::id() % 250).unwrap_or(0);
    let high = u8::try_from(n / 250 % 256).unwrap_or(0);
    let low = u8::try_from(n % 250 + 1).unwrap_or(1);
    std::net::Ipv4Addr::new(127, process + 1, high, low)
}

/// The file [`LocalAgents::logging_pids_in`] appends each agent's pid to.
pub(crate) const AGENT_PIDS: &str = "agents.pids";

/// A real `nnb agent` on 127.0.0.1 per running instance: the provider's test seam.
#[derive(Debug)]
pub(crate) struct LocalAgents {
    /// Where the token files are.
    dir: PathBuf,
    /// The temporary directory `dir` is, when this set made it.
    _owned: Option<tempfile::TempDir>,
    /// Running agents: instance id → (tenant, child).
    running: Mutex<HashMap<String, (String, Child)>>,
    /// Every instance started: instance id → tenant.
    instances: Mutex<HashMap<String, String>>,
    /// Every agent process ever started.
    pids: Mutex<Vec<u32>>,
    /// A file each agent's pid is appended to as it starts, for a test that kills
    /// the process holding these agents (its agents outlive it, as instances
    /// outlive a controller killed with SIGKILL).
    pid_log: Option<PathBuf>,
}

impl LocalAgents {
    /// Agents whose token files are in a temporary directory of their own.
    pub(crate) fn new() -> LocalAgents {
        let owned = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        LocalAgents::with(owned.path().to_path_buf(), Some(owned), None)
    }

    /// Agents whose token files are in `dir` (which the caller removes) and whose
    /// pids are appended to `dir/agents.pids` as they start.
    pub(crate) fn logging_pids_in(dir: &Path) -> LocalAgents {
        LocalAgents::with(dir.to_path_buf(), None, Some(dir.join(AGENT_PIDS)))
    }

    fn with(
        dir: PathBuf,
        owned: Option<tempfile::TempDir>,
        pid_log: Option<PathBuf>,
    ) -> LocalAgents {
        LocalAgents {
            dir,
            _owned: owned,
            running: Mutex::default(),
            instances: Mutex::default(),
            pids: Mutex::default(),
            pid_log,
        }
    }

    /// Every agent process this set started.
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.pids.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The tenants whose agents run now.
    pub(crate) fn alive(&self) -> BTreeSet<String> {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        running.values().map(|(t, _)| t.clone()).collect()
    }

    /// Every instance id started so far.
    pub(crate) fn instance_ids(&self) -> Vec<String> {
        let instances = self.instances.lock().unwrap_or_else(|e| e.into_inner());
        instances.keys().cloned().collect()
    }

    /// Kills tenant `tenant`'s agent as if it crashed (its instance keeps running).
    pub(crate) fn crash(&self, tenant: &str) {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        for (_, child) in running.values_mut().filter(|(t, _)| t == tenant) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts `nnb agent` with `token` and reads the address it listens on.
    fn spawn(&self, instance_id: &str, token: &str) -> Result<(Child, SocketAddr), String> {
        let file = self.dir.join(format!("{instance_id}.token"));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&file)
            .map_err(|e| e.to_string())?;
        writeln!(f, "{token}").map_err(|e| e.to_string())?;
        let mut child = Command::new(NNB)
            .arg("agent")
            .arg("--listen")
            .arg(format!("{}:0", loopback_address()))
            .arg("--token-file")
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting {NNB} agent: {e}"))?;
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = BufReader::new(out).read_line(&mut line);
        }
        match line.trim().strip_prefix("listening ").map(str::parse) {
            Some(Ok(addr)) => Ok((child, addr)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("the agent printed {line:?}, not its address"))
            }
        }
    }
}

impl InstanceAgents for LocalAgents {
    fn started<'a>(
        &'a self,
        tenant: &'a str,
        instance_id: &'a str,
        token: &'a str,
    ) -> BoxFuture<'a, Result<SocketAddr, String>> {
        Box::pin(async move {
            self.stopped(instance_id);
            let (child, addr) = self.spawn(instance_id, token)?;
            if let Some(log) = &self.pid_log {
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(log)
                    .map_err(|e| format!("{}: {e}", log.display()))?;
                writeln!(f, "{}", child.id()).map_err(|e| format!("{}: {e}", log.display()))?;
            }
            self.pids
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(child.id());
            self.instances
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(instance_id.to_string(), tenant.to_string());
            self.running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(instance_id.to_string(), (tenant.to_string(), child));
            Ok(addr)
        })
    }

    fn stopped(&self, instance_id: &str) {
        let gone = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(instance_id);
        if let Some((_, mut child)) = gone {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for LocalAgents {
    fn drop(&mut self) {
        let running = self.running.get_mut().unwrap_or_else(|e| e.into_inner());
        for (_, (_, child)) in running.iter_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What a test does when the test tenant's agent is asked to start a job (in the
/// scenarios these tests run, the test tenant runs only measured jobs).
pub(crate) trait OnTestJob: std::fmt::Debug + Send + Sync {
    /// Called before the job is started.
    fn starting(&self) -> BoxFuture<'_, ()>;
}

/// The test tenant's agent, calling its hook before each job starts.
#[derive(Debug)]
struct Measured {
    inner: Arc<dyn AgentApi>,
    hook: Arc<dyn OnTestJob>,
}

impl AgentApi for Measured {
    fn addr(&self) -> SocketAddr {
        self.inner.addr()
    }

    fn health(&self) -> BoxFuture<'_, Result<Health, AgentError>> {
        self.inner.health()
    }

    fn start<'a>(&'a self, req: &'a JobRequest) -> BoxFuture<'a, Result<JobId, AgentError>> {
        Box::pin(async move {
            self.hook.starting().await;
            self.inner.start(req).await
        })
    }

    fn status<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<JobStatus, AgentError>> {
        self.inner.status(id)
    }

    fn stop<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<JobStatus, AgentError>> {
        self.inner.stop(id)
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<JobStatus>, AgentError>> {
        self.inner.list()
    }
}

/// The aws provider, with the test tenant's agent watched by `hook`.
pub(crate) struct Watched {
    pub(crate) inner: AwsProvider,
    pub(crate) hook: Arc<dyn OnTestJob>,
}

impl Provider for Watched {
    fn kind(&self) -> nnb_format::ProviderKind {
        self.inner.kind()
    }

    fn launch<'a>(
        &'a mut self,
        specs: &'a [TenantSpec],
        serving: &'a Serving,
    ) -> BoxFuture<'a, Result<Fleet, ProviderError>> {
        self.inner.launch(specs, serving)
    }

    fn agent(&self, tenant: &Tenant) -> Arc<dyn AgentApi> {
        let inner = self.inner.agent(tenant);
        if tenant.role != Role::Test {
            return inner;
        }
        Arc::new(Measured {
            inner,
            hook: Arc::clone(&self.hook),
        })
    }

    fn set_present<'a>(
        &'a mut self,
        fleet: &'a mut Fleet,
        present: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<String>, ProviderError>> {
        self.inner.set_present(fleet, present)
    }

    fn cost_cap(&self, since: tokio::time::Instant) -> Option<nnb_controller::budget::CostCap> {
        self.inner.cost_cap(since)
    }

    fn sweep_campaign<'a>(
        &'a self,
        campaign_id: &'a str,
    ) -> BoxFuture<'a, Result<usize, ProviderError>> {
        self.inner.sweep_campaign(campaign_id)
    }

    fn abandon(&mut self) -> BoxFuture<'_, (Option<CloudRecord>, Result<(), ProviderError>)> {
        self.inner.abandon()
    }

    fn shutdown(&mut self, fleet: Fleet) -> BoxFuture<'_, Result<(), ProviderError>> {
        self.inner.shutdown(fleet)
    }
}

/// Nothing is left: no instance, no host, no group in moto, no agent process.
pub(crate) fn assert_all_gone(moto: &Moto, agents: &LocalAgents) {
    let left = moto.leftovers();
    assert!(left.is_empty(), "left in moto: {left:?}");
    assert!(agents.alive().is_empty(), "{:?}", agents.alive());
    let alive = still_alive_after(&agents.pids(), Duration::from_secs(5));
    assert!(alive.is_empty(), "agent processes still alive: {alive:?}");
}
