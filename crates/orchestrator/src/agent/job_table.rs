//! The agent's table of jobs: their state, stop flags and results.
//!
//! Entries are kept for the agent's lifetime so a controller can collect a result
//! after the job ended; ids are small increasing integers (as strings).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::watch;

use crate::jobs::{JobId, JobState, JobStatus};

/// What a running job shares with the agent: the stop flag it polls and a slot for
/// what it wants to publish while it runs (e.g. a server's bound addresses).
#[derive(Debug, Default)]
pub(super) struct JobShared {
    /// Set when the job must stop (on request or at its deadline).
    pub stop: AtomicBool,
    /// Latest interim result, returned as `result` while the job runs.
    pub interim: Mutex<Option<Value>>,
}

impl JobShared {
    /// Whether the job was asked to stop.
    pub(super) fn should_stop(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Publishes an interim result (replacing the previous one).
    pub(super) fn publish(&self, value: Value) {
        *lock(&self.interim) = Some(value);
    }
}

#[derive(Debug)]
struct Entry {
    kind: &'static str,
    state: JobState,
    result: Option<Value>,
    error: Option<String>,
    stop_requested: bool,
    shared: Arc<JobShared>,
    ended: watch::Sender<bool>,
}

/// All jobs of one agent.
#[derive(Debug, Default)]
pub(super) struct JobTable {
    inner: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    next_id: u64,
    jobs: BTreeMap<u64, Entry>,
}

/// How a job's thread ended.
pub(super) type Outcome = Result<Value, String>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind: keep using it.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn parse_id(id: &str) -> Option<u64> {
    id.parse().ok()
}

impl JobTable {
    /// Registers a new running job and returns its id and shared state.
    pub(super) fn insert(&self, kind: &'static str) -> (JobId, Arc<JobShared>) {
        let mut t = lock(&self.inner);
        t.next_id += 1;
        let id = t.next_id;
        let shared = Arc::new(JobShared::default());
        let (ended, _) = watch::channel(false);
        t.jobs.insert(
            id,
            Entry {
                kind,
                state: JobState::Running,
                result: None,
                error: None,
                stop_requested: false,
                shared: Arc::clone(&shared),
                ended,
            },
        );
        (id.to_string(), shared)
    }

    /// A job's status; `None` for an unknown id.
    pub(super) fn status(&self, id: &str) -> Option<JobStatus> {
        let t = lock(&self.inner);
        let n = parse_id(id)?;
        t.jobs.get(&n).map(|e| status_of(n, e))
    }

    /// Every job's status, oldest first.
    pub(super) fn list(&self) -> Vec<JobStatus> {
        let t = lock(&self.inner);
        t.jobs.iter().map(|(n, e)| status_of(*n, e)).collect()
    }

    /// Jobs still running.
    pub(super) fn running(&self) -> usize {
        let t = lock(&self.inner);
        t.jobs
            .values()
            .filter(|e| e.state == JobState::Running)
            .count()
    }

    /// Raises a job's stop flag and returns a receiver that turns `true` when the job
    /// has ended. `None` for an unknown id.
    pub(super) fn request_stop(&self, id: &str) -> Option<watch::Receiver<bool>> {
        let mut t = lock(&self.inner);
        let e = t.jobs.get_mut(&parse_id(id)?)?;
        if e.state == JobState::Running {
            e.stop_requested = true;
            e.shared.stop.store(true, Ordering::Relaxed);
        }
        Some(e.ended.subscribe())
    }

    /// Raises every running job's stop flag (agent shutdown).
    pub(super) fn stop_all(&self) {
        let mut t = lock(&self.inner);
        for e in t.jobs.values_mut().filter(|e| e.state == JobState::Running) {
            e.stop_requested = true;
            e.shared.stop.store(true, Ordering::Relaxed);
        }
    }

    /// Records how a job's thread ended. A job already ended (timed out or
    /// abandoned) keeps its state but gains the late result.
    pub(super) fn finish(&self, id: &str, outcome: Outcome) {
        let mut t = lock(&self.inner);
        let Some(e) = parse_id(id).and_then(|n| t.jobs.get_mut(&n)) else {
            return;
        };
        let running = e.state == JobState::Running;
        match outcome {
            Ok(v) => {
                if running {
                    e.state = if e.stop_requested {
                        JobState::Stopped
                    } else {
                        JobState::Done
                    };
                }
                e.result = Some(v);
            }
            Err(msg) => {
                if running {
                    e.state = JobState::Failed;
                }
                e.error.get_or_insert(msg);
            }
        }
        e.ended.send_replace(true);
    }

    /// Marks a job that outlived its deadline: raises its stop flag and sets
    /// `TimedOut` (its thread may still deliver a late result through `finish`).
    pub(super) fn time_out(&self, id: &str, deadline_ms: u64) {
        let mut t = lock(&self.inner);
        let Some(e) = parse_id(id).and_then(|n| t.jobs.get_mut(&n)) else {
            return;
        };
        if e.state == JobState::Running {
            e.shared.stop.store(true, Ordering::Relaxed);
            e.state = JobState::TimedOut;
            e.error = Some(format!(
                "job outlived its deadline of {deadline_ms} ms and was stopped"
            ));
            e.ended.send_replace(true);
        }
    }

    /// Marks a stopped job whose thread did not end within the grace period as
    /// `Stopped` and abandoned (it cannot be interrupted; its thread runs to its end).
    pub(super) fn abandon(&self, id: &str, grace_ms: u64) {
        let mut t = lock(&self.inner);
        let Some(e) = parse_id(id).and_then(|n| t.jobs.get_mut(&n)) else {
            return;
        };
        if e.state == JobState::Running {
            e.state = JobState::Stopped;
            e.error = Some(format!(
                "a {} job cannot be interrupted: marked stopped after {grace_ms} ms, its thread runs to its end",
                e.kind
            ));
            e.ended.send_replace(true);
        }
    }
}

fn status_of(n: u64, e: &Entry) -> JobStatus {
    let result = match (&e.result, e.state) {
        (Some(v), _) => Some(v.clone()),
        (None, JobState::Running) => lock(&e.shared.interim).clone(),
        (None, _) => None,
    };
    JobStatus {
        id: n.to_string(),
        kind: e.kind.to_string(),
        state: e.state,
        result,
        error: e.error.clone(),
    }
}
