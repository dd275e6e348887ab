//! The endpoint: the agent standing for the world outside the host. Its `serve` job
//! (a UDP reflector and sink) is started once per session and kept, so its final
//! snapshot is recorded when the session ends; the measured and background jobs'
//! `@reflector` / `@sink` / `@tcp-sink` targets resolve to its bound addresses.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::background::Running;
use super::{ControllerError, BACKGROUND_DEADLINE};
use crate::client::AgentApi;
use crate::provider::Tenant;
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
    pub(super) job: Running,
}

impl Endpoint {
    /// Starts `serve` on the endpoint agent `c` (of tenant `ep`) with
    /// `(reflector, sink)` ports (0 = any; the TCP sink's is the UDP sink's) and waits
    /// for its bound addresses. An
    /// address bound to all interfaces (`0.0.0.0:PORT`, an agent on a cloud
    /// instance) is published with the endpoint's own IP, which the tenants can reach.
    pub(crate) async fn start(
        ep: &Tenant,
        c: &dyn AgentApi,
        (reflector_port, sink_port): (u16, u16),
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
                // One socket per CPU of the endpoint (the serve job's default).
                sink_threads: None,
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
    pub(crate) fn resolve(this: Option<&Endpoint>, spec: &JobSpec) -> JobSpec {
        let mut spec = spec.clone();
        if let (
            Some(ep),
            JobSpec::Latency { target, .. }
            | JobSpec::Load { target, .. }
            | JobSpec::Rtt { target, .. }
            | JobSpec::Badabing { target, .. },
        ) = (this, &mut spec)
        {
            if target == SINK {
                *target = ep.sink.clone();
            } else if target == REFLECTOR {
                *target = ep.reflector.clone();
            } else if let (true, Some(tcp)) = (target == TCP_SINK, &ep.tcp_sink) {
                *target = tcp.clone();
            }
        }
        spec
    }
}
