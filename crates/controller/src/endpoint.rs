//! The endpoint: the agent standing for the world outside the host. Its `serve` job
//! (a UDP reflector and sink) is started once per session and kept, so its final
//! snapshot is recorded when the session ends; the measured and background jobs'
//! `@reflector` / `@sink` / `@tcp-sink` targets resolve to its bound addresses.
//! With mirrored servers ([`Serving::Mirrored`]) every client has a server agent of
//! its own running the same `serve`, and a job's targets resolve to the addresses of
//! its own tenant's server ([`Endpoints`]).

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::Value;
use tokio::time::Instant;

use super::background::Running;
use super::{ControllerError, BACKGROUND_DEADLINE};
use crate::client::AgentApi;
use crate::provider::{Fleet, Serving, Tenant};
use nnb_agent::jobs::{JobRequest, JobSpec};
use nnb_experiment::plan::{REFLECTOR, SINK, TCP_SINK};
use nnb_format::{BackgroundJob, Role};

/// How long the endpoint's `serve` job may take to publish its addresses.
const SERVE_START: Duration = Duration::from_secs(10);

/// The endpoint's bound addresses and its `serve` job.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    reflector: String,
    sink: String,
    /// The TCP sink, when the serve job published one (an agent older than the
    /// `tcp_port` field publishes none).
    tcp_sink: Option<String>,
    /// The `serve` job, stopped and recorded when the session ends.
    job: Running,
}

impl Endpoint {
    /// Starts `serve` on the endpoint agent `c` (of tenant `ep`) with
    /// `(reflector, sink)` ports (0 = any; the TCP sink's is the UDP sink's) and
    /// `sink_threads` UDP sink sockets (`None`: one per CPU there), and waits
    /// for its bound addresses. An
    /// address bound to all interfaces (`0.0.0.0:PORT`, an agent on a cloud
    /// instance) is published with the endpoint's own IP, which the tenants can reach.
    pub(crate) async fn start(
        ep: &Tenant,
        c: &dyn AgentApi,
        (reflector_port, sink_port): (u16, u16),
        sink_threads: Option<usize>,
    ) -> Result<Endpoint, ControllerError> {
        let fail = |m: String| ControllerError::Fleet(format!("endpoint {}: {m}", c.addr()));
        let reachable = |published: String| match published.parse::<std::net::SocketAddr>() {
            Ok(a) if a.ip().is_unspecified() => {
                std::net::SocketAddr::new(ep.ip.unwrap_or(ep.addr.ip()), a.port()).to_string()
            }
            _ => published,
        };
        let req = JobRequest {
            spec: JobSpec::Serve {
                reflector_port,
                sink_port,
                // The TCP sink takes the UDP sink's port number (TCP's port space is
                // apart): a cloud security group opens the probe ports for both.
                tcp_port: Some(sink_port),
                sink_threads,
            },
            deadline_ms: nnb_units::millis(BACKGROUND_DEADLINE),
        };
        let id = c.start(&req).await.map_err(|e| fail(e.to_string()))?;
        let job = Running::new(
            &ep.name,
            Role::Endpoint,
            BackgroundJob::Serve,
            req.spec,
            id.clone(),
        );
        let end = Instant::now() + SERVE_START;
        loop {
            let st = c.status(&id).await.map_err(|e| fail(e.to_string()))?;
            if st.state.is_final() {
                return Err(fail(format!(
                    "serve job ended: {}",
                    st.error.unwrap_or_default()
                )));
            }
            let addr = |k: &str| {
                st.result
                    .as_ref()
                    .and_then(|r| r.get(k))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            };
            if let (Some(reflector), Some(sink)) = (addr("reflector"), addr("sink")) {
                return Ok(Endpoint {
                    reflector: reachable(reflector),
                    sink: reachable(sink),
                    tcp_sink: addr("tcp").map(reachable),
                    job,
                });
            }
            if Instant::now() >= end {
                return Err(fail(format!(
                    "serve published no addresses within {SERVE_START:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `spec` with the target placeholders replaced by the bound addresses.
    fn resolve(&self, spec: &JobSpec) -> JobSpec {
        let mut spec = spec.clone();
        if let JobSpec::Latency { target, .. }
        | JobSpec::Load { target, .. }
        | JobSpec::Rtt { target, .. }
        | JobSpec::Badabing { target, .. } = &mut spec
        {
            if target == SINK {
                *target = self.sink.clone();
            } else if target == REFLECTOR {
                *target = self.reflector.clone();
            } else if let (true, Some(tcp)) = (target == TCP_SINK, &self.tcp_sink) {
                *target = tcp.clone();
            }
        }
        spec
    }
}

/// The session's `serve` jobs: the endpoint's for every tenant, or with mirrored
/// servers each client's own server's.
#[derive(Debug, Default)]
pub(crate) struct Endpoints {
    /// The shared endpoint, when the plan sends to it.
    shared: Option<Endpoint>,
    /// Each client with its own server (mirrored servers).
    mirrored: Vec<(String, Endpoint)>,
}

impl Endpoints {
    /// Starts the `serve` jobs `serving` asks for on `fleet`'s agents, reached
    /// through `agent`, with `ports` (the endpoint's reflector and sink ports; each
    /// server takes the same on its own machine) and `sink_threads` sink sockets
    /// each (`None`: the serve job's default). Returns them and the agents they
    /// run on, by name, for the driver's clients.
    pub(crate) async fn start(
        fleet: &Fleet,
        serving: &Serving,
        agent: impl Fn(&Tenant) -> Arc<dyn AgentApi>,
        ports: (u16, u16),
        sink_threads: Option<usize>,
    ) -> Result<(Endpoints, Vec<(String, Arc<dyn AgentApi>)>), ControllerError> {
        let mut agents = Vec::new();
        let mut started = Endpoints::default();
        match serving {
            Serving::None => {}
            Serving::Shared => {
                let Some(ep) = &fleet.endpoint else {
                    return Err(ControllerError::Fleet(
                        "this experiment sends probes or load to an endpoint, but the fleet has \
                         none (static provider: add an `endpoint` line to the hosts file)"
                            .to_string(),
                    ));
                };
                let a = agent(ep);
                started.shared = Some(Endpoint::start(ep, a.as_ref(), ports, sink_threads).await?);
                agents.push((ep.name.clone(), a));
            }
            Serving::Mirrored(clients) => {
                let mut pairs = Vec::with_capacity(clients.len());
                for client in clients {
                    let name = nnb_experiment::tenant::server_name(client);
                    let server =
                        fleet
                            .servers
                            .iter()
                            .find(|s| s.name == name)
                            .ok_or_else(|| {
                                ControllerError::Fleet(format!(
                            "the fleet has no server {name} for client {client} (mirrored servers)"
                        ))
                            })?;
                    pairs.push((client, server, agent(server)));
                }
                let starts = pairs
                    .iter()
                    .map(|(_, server, a)| Endpoint::start(server, a.as_ref(), ports, sink_threads));
                for ((client, server, a), ep) in pairs.iter().zip(join_all(starts).await) {
                    let mut ep = ep?;
                    ep.job = ep.job.serving(client);
                    started.mirrored.push(((*client).clone(), ep));
                    agents.push((server.name.clone(), Arc::clone(a)));
                }
            }
        }
        Ok((started, agents))
    }

    /// `tenant`'s `spec` with its target placeholders replaced by its server's bound
    /// addresses: its own server's when mirrored, the endpoint's when shared.
    pub(crate) fn resolve(&self, tenant: &str, spec: &JobSpec) -> JobSpec {
        let own = self
            .mirrored
            .iter()
            .find(|(c, _)| c == tenant)
            .map(|(_, ep)| ep);
        match own.or(self.shared.as_ref()) {
            Some(ep) => ep.resolve(spec),
            None => spec.clone(),
        }
    }

    /// Notes that step `step` is attempted while the `serve` jobs run.
    pub(crate) fn spans(&mut self, step: &str) {
        for ep in self.all_mut() {
            ep.job.spans(step);
        }
    }

    /// The `serve` jobs, handed over to be stopped and recorded (the session ends).
    pub(crate) fn take_jobs(&mut self) -> Vec<Running> {
        let shared = self.shared.take().into_iter();
        let mirrored = std::mem::take(&mut self.mirrored)
            .into_iter()
            .map(|(_, ep)| ep);
        shared.chain(mirrored).map(|ep| ep.job).collect()
    }

    fn all_mut(&mut self) -> impl Iterator<Item = &mut Endpoint> {
        self.shared
            .iter_mut()
            .chain(self.mirrored.iter_mut().map(|(_, ep)| ep))
    }
}
