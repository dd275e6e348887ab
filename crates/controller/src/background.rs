//! What the background jobs did: every background job (a neighbor's `busy`, `load`
//! or `idle`, and the endpoint's `serve`) ends in one line of `background.jsonl`
//! with its final status, so a step degraded by "2 busy neighbors" says how hard
//! they burned and a load neighbor that reached 20 % of its rate does not pass for
//! one at 100 %.
//!
//! Design: the driver stops **every** neighbor job whenever the set of background
//! jobs a step wants changes (not only the jobs that changed), after a failed
//! attempt, and when the session ends, and records each one's final status then,
//! with the steps attempted while it ran. A job thus spans consecutive steps that
//! want the same background, one level's warm-ups and repetitions, and its final
//! result (a busy burner's ops/s over its life, a load's `LoadReport`) is that
//! level's, which a job kept running into the next level would blur. The agents
//! publish no partial results of a running `busy` or `load` job, so polling them at
//! the end of each step would give nothing; a restart costs nothing extra, as the
//! settle pause that follows any change covers it. The endpoint's `serve` runs the
//! whole session and is recorded when it ends, with its final snapshot (reflector
//! send failures, dropped datagrams, sink totals).
//!
//! A continuous step ([`nnb_experiment::plan::Step::continuous`], a continuous
//! throughput staircase's) is the exception, stated by the plan, not guessed: a job
//! it still wants unchanged (same tenant, same spec) runs on through the change and
//! only the jobs it no longer wants are stopped. Such a job's final result spans
//! every level it ran through (the levels' figures are windows read from the sink
//! while it runs, not this result), and its record lists them all.
//!
//! A record that cannot be written is logged and dropped: `background.jsonl` is its
//! own file, so it can never cost a measured sample. A stop that fails is recorded as
//! a failed job.

use std::time::SystemTime;

use nnb_format::{
    timestamp, Achieved, BackgroundJob, BackgroundRecord, BackgroundResult, Role, SampleStatus,
};
use tokio::time::Instant;

use crate::results::FORMAT_VERSION;
use nnb_agent::jobs::{JobId, JobSpec, JobState, JobStatus};

/// A background job running on a tenant, and the steps attempted while it ran.
#[derive(Debug, Clone)]
pub(super) struct Running {
    /// The tenant.
    pub(super) tenant: String,
    /// Neighbor or endpoint.
    role: Role,
    /// Its kind.
    job: BackgroundJob,
    /// What it runs.
    pub(super) spec: JobSpec,
    /// Its id on the tenant's agent.
    pub(super) id: JobId,
    /// The client a mirrored server's `serve` serves.
    serves: Option<String>,
    started_at: SystemTime,
    begun: Instant,
    steps: Vec<String>,
}

impl Running {
    /// Job `id` of `spec`, a `job` job, just started on `tenant` in `role`.
    pub(super) fn new(
        tenant: &str,
        role: Role,
        job: BackgroundJob,
        spec: JobSpec,
        id: JobId,
    ) -> Running {
        Running {
            tenant: tenant.to_string(),
            role,
            job,
            spec,
            id,
            serves: None,
            started_at: SystemTime::now(),
            begun: Instant::now(),
            steps: Vec::new(),
        }
    }

    /// The job as a mirrored server's `serve`, serving `client` (recorded with it).
    pub(super) fn serving(self, client: &str) -> Running {
        Running {
            serves: Some(client.to_string()),
            ..self
        }
    }

    /// Notes that step `id` is attempted while the job runs (once for retries in a row).
    pub(super) fn spans(&mut self, step: &str) {
        if self.steps.last().map(String::as_str) != Some(step) {
            self.steps.push(step.to_string());
        }
    }

    /// The record of the job's end in run `run_id`, given what its stop answered (the
    /// job's final status, or why stopping it failed). Its final result is read once,
    /// here: one the results format cannot read makes a failed record whose error
    /// names the field.
    pub(super) fn end(self, run_id: &str, stop: Result<JobStatus, String>) -> BackgroundRecord {
        let target_bps = match &self.spec {
            JobSpec::Load { rate_bps, .. } => Some(*rate_bps),
            _ => None,
        };
        let (state, result, mut error) = match stop {
            Ok(st) => {
                let error = match (st.state, st.error) {
                    (JobState::Stopped, None) => None,
                    (_, Some(e)) => Some(e),
                    (state, None) => Some(format!(
                        "it ended {} before it was stopped",
                        state_name(state)
                    )),
                };
                (Some(state_name(st.state)), st.result, error)
            }
            Err(e) => (None, None, Some(format!("stopping it failed: {e}"))),
        };
        // No final result (a failed stop, an abandoned job): nothing achieved is claimed.
        let achieved = match result.as_ref().map(|r| read_achieved(self.job, r)) {
            None => Achieved::default(),
            Some(Ok(a)) => a,
            Some(Err(e)) => {
                error = Some(match error {
                    Some(first) => format!("{first}; {e}"),
                    None => e,
                });
                Achieved::default()
            }
        };
        BackgroundRecord {
            format_version: FORMAT_VERSION,
            run_id: run_id.to_string(),
            tenant: self.tenant,
            role: self.role,
            job: self.job,
            serves: self.serves,
            steps: self.steps,
            status: if error.is_none() {
                SampleStatus::Ok
            } else {
                SampleStatus::Failed
            },
            state,
            error,
            started_at: timestamp(self.started_at),
            stopped_at: timestamp(SystemTime::now()),
            ran_s: self.begun.elapsed().as_secs_f64(),
            target_bps,
            achieved,
            result,
        }
    }
}

/// What a background `job` achieved, read from its final `result`; why the results
/// format cannot read it.
fn read_achieved(job: BackgroundJob, result: &serde_json::Value) -> Result<Achieved, String> {
    let read = BackgroundResult::parse(job, result).map_err(|e| e.to_string())?;
    Ok(Achieved::of(&read))
}

/// A job state's name as the agents' JSON spells it (`stopped`, `timed-out`, ...).
fn state_name(state: JobState) -> String {
    serde_json::to_value(state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{state:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn load() -> Running {
        let spec = JobSpec::Load {
            target: "10.0.0.9:4002".to_string(),
            rate_bps: 1e8,
            streams: 1,
            msg_size: 1400,
            duration_ms: None,
            sampling: None,
            options: Default::default(),
        };
        let mut r = Running::new(
            "nb-1",
            Role::Neighbor,
            BackgroundJob::Load,
            spec,
            "7".to_string(),
        );
        for step in [
            "busy/neighbors=1/rep=1",
            "busy/neighbors=1/rep=1",
            "busy/neighbors=1/rep=2",
        ] {
            r.spans(step);
        }
        r
    }

    fn status(state: JobState, error: Option<&str>) -> JobStatus {
        JobStatus {
            id: "7".to_string(),
            kind: nnb_format::AgentJob::Load,
            state,
            result: Some(json!({"sent": {"elapsed_s": 9.5, "payload_bps": 9e7},
                "sink": {"rate_bps": 2e7, "streams_reported": 1}, "streams": [{}]})),
            error: error.map(str::to_string),
        }
    }

    #[test]
    fn a_stopped_load_is_recorded_with_what_it_sent_and_what_arrived() {
        let b = load().end("run", Ok(status(JobState::Stopped, None)));
        assert_eq!(b.status, SampleStatus::Ok);
        assert_eq!(
            b.steps,
            ["busy/neighbors=1/rep=1", "busy/neighbors=1/rep=2"]
        );
        assert_eq!((b.job, b.role), (BackgroundJob::Load, Role::Neighbor));
        assert_eq!(b.state.as_deref(), Some("stopped"));
        assert_eq!(b.target_bps, Some(1e8));
        assert_eq!(
            (
                b.achieved.sent_bps,
                b.achieved.rate_bps,
                b.achieved.runtime_s
            ),
            (Some(9e7), Some(2e7), Some(9.5))
        );
    }

    /// A final result the results format cannot read (a load's `sent` without
    /// `payload_bps`, as after a field renamed on the agent's side only) is a failed
    /// record naming the kind and the field, not one with empty columns.
    #[test]
    fn an_unreadable_final_result_is_a_failed_record_naming_the_field() {
        let mut st = status(JobState::Stopped, None);
        st.result = Some(json!({"sent": {"elapsed_s": 9.5, "payload_bits": 9e7},
            "sink": null, "streams": [{}]}));
        let b = load().end("run", Ok(st));
        assert_eq!(b.status, SampleStatus::Failed);
        assert_eq!(b.achieved, Achieved::default());
        let error = b.error.unwrap_or_default();
        assert!(
            error.contains("the load job's result") && error.contains("`payload_bps`"),
            "{error}"
        );
        // The raw result is kept for whoever wants to read it by hand.
        assert!(b.result.is_some());
    }

    #[test]
    fn an_early_end_or_a_failed_stop_is_a_failed_record() {
        let early = load().end("run", Ok(status(JobState::Done, None)));
        assert_eq!(early.status, SampleStatus::Failed);
        assert_eq!(
            early.error.as_deref(),
            Some("it ended done before it was stopped")
        );
        // What it measured until then is kept.
        assert_eq!(early.achieved.sent_bps, Some(9e7));
        let timed_out = load().end("run", Ok(status(JobState::TimedOut, Some("deadline"))));
        assert_eq!(
            (timed_out.status, timed_out.error.as_deref()),
            (SampleStatus::Failed, Some("deadline"))
        );
        assert_eq!(timed_out.state.as_deref(), Some("timed-out"));
        let lost = load().end("run", Err("agent 10.0.0.3:7000 unreachable".to_string()));
        assert_eq!(lost.status, SampleStatus::Failed);
        assert_eq!(lost.state, None);
        assert_eq!(lost.result, None);
        assert_eq!(lost.target_bps, Some(1e8));
        assert!(lost
            .error
            .is_some_and(|e| e.contains("stopping it failed") && e.contains("unreachable")));
    }
}
