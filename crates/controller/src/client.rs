//! The HTTP/JSON client of one agent.
//!
//! Every error names the agent's address and says what happened in a way that lets
//! the controller decide: [`AgentError::Unreachable`] means the agent is dead or
//! was never there, [`AgentError::Unauthorized`] a token mismatch, and
//! [`AgentError::Rejected`] a request the agent refused (with its explanation).
//!
//! The controller talks to agents through the [`AgentApi`] trait, which the HTTP
//! [`AgentClient`] implements; unit tests drive the controller with an in-process
//! fake instead (`controller::testing`).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde::de::DeserializeOwned;

use nnb_agent::jobs::{ErrorBody, Health, JobId, JobRequest, JobStatus, Started};

/// Time allowed to open a TCP connection to an agent.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Time allowed for one request (agents answer at once; jobs run in the background).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between two status polls in [`AgentClient::wait`].
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Why a request to an agent failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// No TCP connection could be made: the agent is not running (or not there).
    #[error("agent {addr} is unreachable (dead or not started): {source}")]
    Unreachable {
        /// The agent's address.
        addr: SocketAddr,
        /// The underlying error.
        #[source]
        source: reqwest::Error,
    },
    /// The agent did not answer in time.
    #[error("agent {addr} did not answer {what} within {timeout:?}")]
    Timeout {
        /// The agent's address.
        addr: SocketAddr,
        /// What was asked ("GET /health", "job 3 to end", ...).
        what: String,
        /// How long the client waited.
        timeout: Duration,
    },
    /// The agent refused the token (401).
    #[error("agent {addr} refused the token (401 Unauthorized): check the token file")]
    Unauthorized {
        /// The agent's address.
        addr: SocketAddr,
    },
    /// The agent answered with another error status.
    #[error("agent {addr} rejected {what}: {status}: {message}")]
    Rejected {
        /// The agent's address.
        addr: SocketAddr,
        /// What was asked.
        what: String,
        /// The HTTP status.
        status: u16,
        /// The agent's explanation (its JSON `error`, or the raw body).
        message: String,
    },
    /// The connection broke or the answer could not be read or decoded.
    #[error("agent {addr}: {what} failed: {source}")]
    Protocol {
        /// The agent's address.
        addr: SocketAddr,
        /// What was asked.
        what: String,
        /// The underlying error.
        #[source]
        source: reqwest::Error,
    },
}

impl AgentError {
    /// Whether the error means the agent is gone (unreachable or silent), as opposed
    /// to an agent that is alive but refused the request.
    pub fn agent_is_down(&self) -> bool {
        matches!(
            self,
            AgentError::Unreachable { .. }
                | AgentError::Timeout { .. }
                | AgentError::Protocol { .. }
        )
    }
}

/// A boxed, sendable future: what the object-safe async traits of the controller
/// ([`AgentApi`], [`Provider`](crate::provider::Provider)) return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the controller asks of one agent: the job protocol of [`nnb_agent::jobs`].
/// [`AgentClient`] speaks it over HTTP; a fake speaks it in process for tests.
pub trait AgentApi: Send + Sync + std::fmt::Debug {
    /// The agent's address (named in errors).
    fn addr(&self) -> SocketAddr;

    /// Version, topology and allowed CPUs.
    fn health(&self) -> BoxFuture<'_, Result<Health, AgentError>>;

    /// Starts a job and returns its id.
    fn start<'a>(&'a self, req: &'a JobRequest) -> BoxFuture<'a, Result<JobId, AgentError>>;

    /// A job's state and, once ended, its result.
    fn status<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<JobStatus, AgentError>>;

    /// Stops a job and returns its final status (a job that already ended keeps
    /// its state).
    fn stop<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<JobStatus, AgentError>>;

    /// Every job the agent knows, oldest first.
    fn list(&self) -> BoxFuture<'_, Result<Vec<JobStatus>, AgentError>>;

    /// Polls a job until it is no longer running, for at most `timeout`.
    fn wait<'a>(
        &'a self,
        id: &'a str,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<JobStatus, AgentError>> {
        Box::pin(async move {
            let end = Instant::now() + timeout;
            loop {
                let status = self.status(id).await?;
                if status.state.is_final() {
                    return Ok(status);
                }
                if Instant::now() >= end {
                    return Err(AgentError::Timeout {
                        addr: self.addr(),
                        what: format!("job {id} to end"),
                        timeout,
                    });
                }
                tokio::time::sleep(POLL_INTERVAL).await;
            }
        })
    }
}

/// Stops every job of `agent` that still runs (best effort: an agent that does not
/// answer is skipped, a job that fails to stop is logged).
pub async fn stop_all_jobs(agent: &dyn AgentApi) {
    let Ok(jobs) = agent.list().await else {
        return;
    };
    for job in jobs.iter().filter(|j| !j.state.is_final()) {
        if let Err(e) = agent.stop(&job.id).await {
            tracing::warn!("stopping job {} on {}: {e}", job.id, agent.addr());
        }
    }
}

/// A client of one agent: its address and bearer token.
#[derive(Clone, Debug)]
pub struct AgentClient {
    addr: SocketAddr,
    token: String,
    http: reqwest::Client,
}

impl AgentClient {
    /// A client of the agent at `base`, sending `token` as the bearer token.
    pub fn new(base: SocketAddr, token: String) -> Self {
        // Building a client only fails when the TLS backend cannot start; this
        // client has none, so the default client (same settings minus timeouts)
        // is the fallback rather than a panic.
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .no_proxy()
            .build()
            .unwrap_or_default();
        AgentClient {
            addr: base,
            token,
            http,
        }
    }

    /// The agent's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `GET /health`: version, topology and allowed CPUs.
    pub async fn health(&self) -> Result<Health, AgentError> {
        self.call(reqwest::Method::GET, "/health", None::<&()>)
            .await
    }

    /// `POST /jobs`: starts a job and returns its id.
    pub async fn start(&self, req: &JobRequest) -> Result<JobId, AgentError> {
        let started: Started = self.call(reqwest::Method::POST, "/jobs", Some(req)).await?;
        Ok(started.id)
    }

    /// `GET /jobs/{id}`: a job's state and, once ended, its result.
    pub async fn status(&self, id: &str) -> Result<JobStatus, AgentError> {
        self.call(reqwest::Method::GET, &format!("/jobs/{id}"), None::<&()>)
            .await
    }

    /// `POST /jobs/{id}/stop`: stops a job and returns its final status (a job that
    /// already ended keeps its state).
    pub async fn stop(&self, id: &str) -> Result<JobStatus, AgentError> {
        self.call(
            reqwest::Method::POST,
            &format!("/jobs/{id}/stop"),
            None::<&()>,
        )
        .await
    }

    /// `GET /jobs`: every job the agent knows, oldest first.
    pub async fn list(&self) -> Result<Vec<JobStatus>, AgentError> {
        self.call(reqwest::Method::GET, "/jobs", None::<&()>).await
    }

    /// Polls a job until it is no longer running, for at most `timeout`.
    pub async fn wait(&self, id: &str, timeout: Duration) -> Result<JobStatus, AgentError> {
        AgentApi::wait(self, id, timeout).await
    }

    async fn call<B: serde::Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, AgentError> {
        let what = format!("{method} {path}");
        let mut req = self
            .http
            .request(method, format!("http://{}{}", self.addr, path))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            req = req.json(body);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| self.transport_error(&what, e))?;
        let status = resp.status();
        if status == StatusCode::UNAUTHORIZED {
            return Err(AgentError::Unauthorized { addr: self.addr });
        }
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            let message = serde_json::from_str::<ErrorBody>(&text)
                .map(|b| b.error)
                .unwrap_or(text);
            return Err(AgentError::Rejected {
                addr: self.addr,
                what,
                status: status.as_u16(),
                message,
            });
        }
        resp.json::<T>()
            .await
            .map_err(|e| self.transport_error(&what, e))
    }

    fn transport_error(&self, what: &str, source: reqwest::Error) -> AgentError {
        if source.is_timeout() {
            AgentError::Timeout {
                addr: self.addr,
                what: what.to_string(),
                timeout: REQUEST_TIMEOUT,
            }
        } else if source.is_connect() {
            AgentError::Unreachable {
                addr: self.addr,
                source,
            }
        } else {
            AgentError::Protocol {
                addr: self.addr,
                what: what.to_string(),
                source,
            }
        }
    }
}

impl AgentApi for AgentClient {
    fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn health(&self) -> BoxFuture<'_, Result<Health, AgentError>> {
        Box::pin(AgentClient::health(self))
    }

    fn start<'a>(&'a self, req: &'a JobRequest) -> BoxFuture<'a, Result<JobId, AgentError>> {
        Box::pin(AgentClient::start(self, req))
    }

    fn status<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<JobStatus, AgentError>> {
        Box::pin(AgentClient::status(self, id))
    }

    fn stop<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<JobStatus, AgentError>> {
        Box::pin(AgentClient::stop(self, id))
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<JobStatus>, AgentError>> {
        Box::pin(AgentClient::list(self))
    }
}
