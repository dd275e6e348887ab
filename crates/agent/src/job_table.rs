//! The agent's table of jobs: their state, stop flags and results.
//!
//! A job is kept while its thread runs and, once it ended, among the last
//! [`MAX_FINISHED_JOBS`] finished ones so a controller can collect its result; ids
//! are small increasing integers (as strings). At most [`MAX_RUNNING_JOBS`] jobs'
//! threads run at once.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nnb_format::AgentJob;
use serde_json::Value;
use tokio::sync::watch;

use crate::jobs::limits::{MAX_FINISHED_JOBS, MAX_RUNNING_JOBS};
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
    kind: AgentJob,
    state: JobState,
    result: Option<Value>,
    error: Option<String>,
    stop_requested: bool,
    /// Whether the job's thread still runs (a timed-out or abandoned job's may).
    thread_running: bool,
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

/// The job number a path's id names: only its canonical decimal form (the one
/// [`JobTable::insert`] hands out) does, so `+3074` and `03074` name no job.
fn parse_id(id: &str) -> Option<u64> {
    id.parse::<u64>().ok().filter(|n| n.to_string() == id)
}

impl JobTable {
    /// Registers a new running job and returns its id and shared state; `None` when
    /// [`MAX_RUNNING_JOBS`] jobs' threads already run.
    pub(super) fn insert(&self, kind: AgentJob) -> Option<(JobId, Arc<JobShared>)> {
        let mut t = lock(&self.inner);
        if t.running() >= MAX_RUNNING_JOBS {
            return None;
        }
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
                thread_running: true,
                shared: Arc::clone(&shared),
                ended,
            },
        );
        Some((id.to_string(), shared))
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

    /// Jobs whose thread still runs (whatever their state says).
    pub(super) fn running(&self) -> usize {
        lock(&self.inner).running()
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
    /// abandoned) keeps its state but gains the late result, or the failure that
    /// ended it ahead of its deadline note. Forgets the oldest finished jobs beyond
    /// [`MAX_FINISHED_JOBS`].
    pub(super) fn finish(&self, id: &str, outcome: Outcome) {
        let mut t = lock(&self.inner);
        let Some(e) = parse_id(id).and_then(|n| t.jobs.get_mut(&n)) else {
            return;
        };
        e.thread_running = false;
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
                e.error = Some(match e.error.take() {
                    Some(note) => format!("{msg} ({note})"),
                    None => msg,
                });
            }
        }
        e.ended.send_replace(true);
        t.forget_oldest_finished();
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
    /// `Stopped` and abandoned (its thread runs to its end, and counts as running
    /// until then).
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

impl Table {
    fn running(&self) -> usize {
        self.jobs.values().filter(|e| e.thread_running).count()
    }

    /// Drops the oldest finished jobs while more than [`MAX_FINISHED_JOBS`] are kept.
    fn forget_oldest_finished(&mut self) {
        let finished = self.jobs.len() - self.running();
        if finished <= MAX_FINISHED_JOBS {
            return;
        }
        let old: Vec<u64> = self
            .jobs
            .iter()
            .filter(|(_, e)| !e.thread_running)
            .map(|(n, _)| *n)
            .take(finished - MAX_FINISHED_JOBS)
            .collect();
        for n in old {
            self.jobs.remove(&n);
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
        kind: e.kind,
        state: e.state,
        result,
        error: e.error.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// L3: the table keeps the running jobs and the last [`MAX_FINISHED_JOBS`]
    /// finished ones, forgetting the oldest (50,000 one-millisecond jobs grew it
    /// without bound).
    #[test]
    fn finished_jobs_are_forgotten_oldest_first() {
        let table = JobTable::default();
        let (running, _) = table.insert(AgentJob::Idle).expect("a free slot");
        for _ in 0..MAX_FINISHED_JOBS + 10 {
            let (id, _) = table.insert(AgentJob::Idle).expect("a free slot");
            table.finish(&id, Ok(Value::Null));
        }
        let jobs = table.list();
        assert_eq!(jobs.len(), MAX_FINISHED_JOBS + 1);
        assert_eq!(jobs[0].id, running, "the running job is kept");
        assert_eq!(jobs[1].id, "12", "jobs 2 to 11 are forgotten");
        assert!(table.status("2").is_none());
        assert_eq!(table.running(), 1);
    }

    /// NL13 (reliability review A3b): only a job's canonical id names it; `+3074`
    /// and `03074` reached job 3074.
    #[test]
    fn only_the_canonical_id_names_a_job() {
        let table = JobTable::default();
        for _ in 0..3073 {
            let (id, _) = table.insert(AgentJob::Idle).expect("a free slot");
            table.finish(&id, Ok(Value::Null));
        }
        let (id, shared) = table.insert(AgentJob::Idle).expect("a free slot");
        assert_eq!(id, "3074");
        assert!(table.status("3074").is_some());
        for alias in ["+3074", "03074", "003074", " 3074", "3074 "] {
            assert!(table.status(alias).is_none(), "{alias:?} names a job");
            assert!(table.request_stop(alias).is_none(), "{alias:?} stops a job");
        }
        assert!(!shared.should_stop(), "an alias stopped the job");
        assert!(table.request_stop("3074").is_some());
        assert!(shared.should_stop());
    }

    /// M12: at most [`MAX_RUNNING_JOBS`] jobs' threads run; a timed-out job whose
    /// thread has not ended still counts, until it ends.
    #[test]
    fn the_pool_is_bounded_and_counts_threads_still_running() {
        let table = JobTable::default();
        let ids: Vec<JobId> = (0..MAX_RUNNING_JOBS)
            .map(|_| table.insert(AgentJob::Busy).expect("a free slot").0)
            .collect();
        assert!(table.insert(AgentJob::Idle).is_none(), "the pool is full");
        table.time_out(&ids[0], 10);
        assert_eq!(table.running(), MAX_RUNNING_JOBS, "its thread still runs");
        assert!(table.insert(AgentJob::Idle).is_none());
        table.finish(&ids[0], Ok(Value::Null));
        assert_eq!(table.running(), MAX_RUNNING_JOBS - 1);
        assert!(table.insert(AgentJob::Idle).is_some());
    }

    /// L4: a job that fails after its deadline keeps the failure that ended it, and
    /// the deadline note.
    #[test]
    fn a_timed_out_job_keeps_its_real_failure() {
        let table = JobTable::default();
        let (id, _) = table.insert(AgentJob::Burn).expect("a free slot");
        table.time_out(&id, 100);
        table.finish(&id, Err("cannot start a burner thread: EAGAIN".into()));
        let st = table.status(&id).expect("the job");
        assert_eq!(st.state, JobState::TimedOut);
        let error = st.error.expect("an error");
        assert!(error.contains("cannot start a burner thread"), "{error}");
        assert!(error.contains("deadline of 100 ms"), "{error}");
    }
}
