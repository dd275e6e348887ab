//! The agent: an HTTP/JSON server that runs typed jobs on this machine.
//!
//! Routes (all need `Authorization: Bearer <token>`): `GET /health`, `POST /jobs`
//! (a [`JobRequest`] → `{"id": ..}`), `GET /jobs`, `GET /jobs/{id}`,
//! `POST /jobs/{id}/stop`. Errors are JSON `{"error": "..."}` with a 4xx status; a
//! bad request never stops the agent. Each job runs on a thread of its own
//! calling `nnb_burn` / `nnb_netlat`, which ends when the job is stopped or
//! outlives its deadline; the async side only supervises deadlines and answers
//! requests, it never times anything. Every number a request carries, the jobs
//! running at once, and the connections (their number, header and body time) are
//! bounded ([`crate::jobs::limits`], [`ServeConfig`]).

pub mod auth;
mod command;
mod ena;
mod job_table;
pub mod jobs;
mod runner;
mod server;

use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use nnb_burn::env::Environment;
use nnb_burn::topology::Topology;

use crate::jobs::limits::MAX_RUNNING_JOBS;
use crate::jobs::{ErrorBody, Health, JobRequest, JobSpec, Started};
pub use auth::Token;
use job_table::JobTable;
pub use server::ServeConfig;

/// How long `POST /jobs/{id}/stop` waits for a job to end before answering (a job
/// that cannot be interrupted is then marked stopped and abandoned).
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The CPU topology could not be read.
    #[error("cannot read this machine's CPU topology: {0}")]
    Topology(#[from] nnb_burn::topology::TopologyError),
    /// The HTTP server failed.
    #[error("agent server failed: {0}")]
    Serve(#[from] std::io::Error),
}

/// One agent's state: its token, what it knows of the machine, and its jobs.
#[derive(Debug)]
pub struct Agent {
    token: Token,
    topology: Topology,
    /// The machine as captured at start, reported by every health answer.
    environment: Environment,
    cpus: Vec<usize>,
    bind_ip: IpAddr,
    jobs: JobTable,
    /// Its running UDP loads, which its `load-window` jobs read.
    taps: Arc<nnb_netlat::window::LoadTaps>,
    /// What it was started with.
    config: AgentConfig,
}

/// What an agent is allowed beyond its built-in jobs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentConfig {
    /// Run `command` jobs (`nnb agent --allow-commands`); without it the agent
    /// answers one with 403 and runs no program.
    pub allow_commands: bool,
}

/// The refusal of a `command` job by an agent without the opt-in.
pub const COMMANDS_REFUSED: &str =
    "this agent was started without --allow-commands: it does not run programs";

impl Agent {
    /// An agent accepting `token`, reading this machine's topology; `bind_ip` is the
    /// address its network jobs (serve) listen on, normally the agent's own.
    pub fn new(token: Token, bind_ip: IpAddr) -> Result<Arc<Agent>, AgentError> {
        Agent::with_config(token, bind_ip, AgentConfig::default())
    }

    /// An agent as [`Agent::new`], with what `config` allows (command jobs).
    pub fn with_config(
        token: Token,
        bind_ip: IpAddr,
        config: AgentConfig,
    ) -> Result<Arc<Agent>, AgentError> {
        let topology = Topology::host()?;
        // Calibrated now, before the agent answers: a tenant's first measured job
        // would otherwise carry the calibration's 100 ms of spinning, which its
        // cgroup counts (an isolation matrix's b alone undercommitted, b's first job,
        // read 32 % of a CPU for a 25 % demand).
        runner::clock();
        Ok(Arc::new(Agent {
            token,
            environment: Environment::capture(&topology, env!("CARGO_PKG_VERSION")),
            topology,
            cpus: nnb_burn::placement::allowed_cpus(),
            bind_ip,
            jobs: JobTable::default(),
            taps: Arc::default(),
            config,
        }))
    }
}

/// The agent's routes, authenticated.
pub fn router(agent: Arc<Agent>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/jobs", post(start_job).get(list_jobs))
        .route("/jobs/:id", get(job_status))
        .route("/jobs/:id/stop", post(stop_job))
        .route_layer(axum::middleware::from_fn_with_state(
            Arc::clone(&agent),
            auth::require_token,
        ))
        .fallback(not_found)
        .layer(axum::middleware::map_response(json_errors))
        .with_state(agent)
}

/// Serves `agent` on `listener` until `shutdown` completes, then stops every job,
/// within the bounds [`ServeConfig::for_this_process`] gives.
pub async fn serve(
    listener: tokio::net::TcpListener,
    agent: Arc<Agent>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), AgentError> {
    serve_with(listener, agent, ServeConfig::for_this_process(), shutdown).await
}

/// Serves `agent` on `listener` until `shutdown` completes, then stops every job.
/// Connections are bounded in number, header and body time by `config`
/// ([`server`]); at shutdown the jobs' stop flags are raised at once, requests in
/// flight get [`SHUTDOWN_GRACE`](crate::jobs::limits::SHUTDOWN_GRACE) to finish
/// before their connections are closed, and job threads as long again to end.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    agent: Arc<Agent>,
    config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), AgentError> {
    let app = router(Arc::clone(&agent));
    let stopping = Arc::clone(&agent);
    server::serve(listener, app, config, async move {
        shutdown.await;
        stopping.jobs.stop_all();
    })
    .await;
    let grace = tokio::time::Instant::now() + crate::jobs::limits::SHUTDOWN_GRACE;
    while agent.jobs.running() > 0 && tokio::time::Instant::now() < grace {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// A JSON error answer `{"error": message}` with `status`.
pub(crate) fn error_response(status: StatusCode, message: &str) -> Response {
    (
        status,
        Json(ErrorBody {
            error: message.to_string(),
        }),
    )
        .into_response()
}

/// The message of an error answer that has no text of its own: its status's
/// reason, e.g. "request header fields too large".
pub(crate) fn reason_message(status: StatusCode) -> String {
    status.canonical_reason().unwrap_or("error").to_lowercase()
}

async fn not_found() -> Response {
    error_response(StatusCode::NOT_FOUND, "no such endpoint")
}

/// Makes every error answer the documented `{"error": ...}` JSON, also those axum
/// writes itself (413 body too large, 405 wrong method): their text, or the
/// status's reason when they have none, becomes the message. A 413 also says
/// `Connection: close`: the body it refused is left unread, so the server drops the
/// connection, and a client that pooled it would send its next request into a closed
/// socket.
async fn json_errors(resp: Response) -> Response {
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let message = match String::from_utf8_lossy(&text).trim() {
        "" => reason_message(status),
        t => t.to_string(),
    };
    let mut json = error_response(status, &message);
    if let Some(allow) = parts.headers.get(header::ALLOW) {
        json.headers_mut().insert(header::ALLOW, allow.clone());
    }
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        json.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
    }
    json
}

async fn health(State(agent): State<Arc<Agent>>) -> Json<Health> {
    Json(Health {
        version: env!("CARGO_PKG_VERSION").to_string(),
        topology: agent.topology.summary(),
        cpus: agent.cpus.clone(),
        running_jobs: agent.jobs.running(),
        environment: Some(agent.environment.clone()),
        commands: agent.config.allow_commands,
    })
}

/// The answer to a request whose body could not be read: 408 (and the connection
/// closed) when it did not arrive in time, axum's own answer otherwise (413 for a
/// body over its limit).
fn unread_body(rejection: BytesRejection) -> Response {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&rejection);
    while let Some(e) = cause {
        if let Some(late) = e.downcast_ref::<server::BodyTimedOut>() {
            let mut resp = error_response(StatusCode::REQUEST_TIMEOUT, &late.to_string());
            resp.headers_mut().insert(
                header::CONNECTION,
                header::HeaderValue::from_static("close"),
            );
            return resp;
        }
        cause = e.source();
    }
    rejection.into_response()
}

async fn start_job(
    State(agent): State<Arc<Agent>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(rejection) => return unread_body(rejection),
    };
    // The body is decoded here rather than by axum's `Json` extractor so that every
    // malformed request (bad JSON, unknown kind, missing field, a number out of
    // bounds) is a 400 with a JSON explanation, whatever the content type.
    let req = match JobRequest::from_json(&body) {
        Ok(r) => r,
        Err(e) => return error_response(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    if matches!(req.spec, JobSpec::Command(_)) && !agent.config.allow_commands {
        return error_response(StatusCode::FORBIDDEN, COMMANDS_REFUSED);
    }
    let job = match runner::prepare(&req.spec, &agent.job_env()) {
        Ok(j) => j,
        Err(e) => return error_response(StatusCode::BAD_REQUEST, &e),
    };
    let Some((id, shared)) = agent.jobs.insert(req.spec.kind()) else {
        return error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!(
                "busy: {MAX_RUNNING_JOBS} jobs already run on this agent (its limit); stop one first"
            ),
        );
    };
    tracing::info!(id = %id, kind = %req.spec.kind(), deadline_ms = req.deadline_ms, "job started");
    tokio::spawn(supervise(
        Arc::clone(&agent),
        id.clone(),
        job,
        shared,
        req.deadline_ms,
    ));
    (StatusCode::CREATED, Json(Started { id })).into_response()
}

impl Agent {
    fn job_env(&self) -> runner::JobEnv {
        runner::JobEnv {
            topology: self.topology.clone(),
            cpus: self.cpus.clone(),
            bind_ip: self.bind_ip,
            taps: Arc::clone(&self.taps),
        }
    }
}

/// Runs a job on a thread of its own and enforces its deadline: past it, the job's
/// stop flag is raised and its thread still counts as running until it has ended.
async fn supervise(
    agent: Arc<Agent>,
    id: String,
    job: runner::Job,
    shared: Arc<job_table::JobShared>,
    deadline_ms: u64,
) {
    let (sender, mut ended) = tokio::sync::oneshot::channel();
    let thread_shared = Arc::clone(&shared);
    let spawned = std::thread::Builder::new()
        .name(format!("job-{id}"))
        .spawn(move || {
            // The receiver is gone only if the supervisor was dropped (runtime end).
            let _ = sender.send(job.run(&thread_shared));
        });
    let outcome = match spawned {
        Err(e) => Err(format!("cannot start the job's thread: {e}")),
        Ok(_) => {
            let deadline = Duration::from_millis(deadline_ms);
            let joined = match tokio::time::timeout(deadline, &mut ended).await {
                Ok(joined) => joined,
                Err(_) => {
                    tracing::warn!(id = %id, deadline_ms, "job outlived its deadline: stopping it");
                    agent.jobs.time_out(&id, deadline_ms);
                    ended.await
                }
            };
            joined.unwrap_or_else(|_| Err("job thread panicked".to_string()))
        }
    };
    if let Err(e) = &outcome {
        tracing::warn!(id = %id, error = %e, "job failed");
    }
    agent.jobs.finish(&id, outcome);
}

async fn list_jobs(State(agent): State<Arc<Agent>>) -> Response {
    Json(agent.jobs.list()).into_response()
}

async fn job_status(State(agent): State<Arc<Agent>>, Path(id): Path<String>) -> Response {
    match agent.jobs.status(&id) {
        Some(s) => Json(s).into_response(),
        None => unknown_job(&id),
    }
}

async fn stop_job(State(agent): State<Arc<Agent>>, Path(id): Path<String>) -> Response {
    let Some(mut ended) = agent.jobs.request_stop(&id) else {
        return unknown_job(&id);
    };
    let waited = tokio::time::timeout(STOP_GRACE, ended.wait_for(|e| *e)).await;
    if waited.is_err() {
        agent.jobs.abandon(&id, nnb_units::millis(STOP_GRACE));
    }
    match agent.jobs.status(&id) {
        Some(s) => Json(s).into_response(),
        None => unknown_job(&id),
    }
}

fn unknown_job(id: &str) -> Response {
    error_response(StatusCode::NOT_FOUND, &format!("no job with id {id:?}"))
}

/// Restricts the calling thread (and every thread it creates afterwards) to `cpus`:
/// call it before starting the runtime so the whole agent and its jobs stay on its
/// tenant's CPUs.
pub use nnb_sys::affinity::restrict_to_cpus;

/// Raises this process's soft limit on open files to its hard limit: call it before
/// [`serve`] (which sizes its connection cap from the limit, see [`ServeConfig`]),
/// since every connection takes a file descriptor.
pub use nnb_sys::rlimit::raise_open_files;
