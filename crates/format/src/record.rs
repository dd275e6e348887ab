//! The records of a run directory: one [`Sample`] per line of `samples.jsonl`, one
//! [`BackgroundRecord`] per line of `background.jsonl`, and `manifest.json`
//! ([`Manifest`] with its [`Session`]s and [`TenantRecord`]s).
//!
//! The manifest's agent health and cloud record are typed by the orchestrator that
//! writes them; readers that do not care take the defaults, raw JSON values.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::conditions::{StepConditions, CONDITION_COLUMNS};
use crate::job::{Achieved, BackgroundJob, JobKind, Metrics};
use crate::kind::{Role, Scenario, SessionStatus, StepGroup};
use crate::metric::{Metric, MetricValues};
use crate::tenancy::{Runtime, RuntimeRecord, StepStart};
use crate::time::timestamp;
use crate::FORMAT_VERSION;

/// Whether a sample measured something or records a failed step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SampleStatus {
    /// The job ended with a result.
    Ok,
    /// The step failed (after any retries); `error` says why.
    Failed,
}

impl SampleStatus {
    /// The status's name in the format: `ok` or `failed`.
    pub const fn name(self) -> &'static str {
        match self {
            SampleStatus::Ok => "ok",
            SampleStatus::Failed => "failed",
        }
    }
}

/// One line of `samples.jsonl`: one measured job of one step. `R` is what the
/// job's raw `result` is read as: a JSON value, or [`serde::de::IgnoredAny`] for a
/// reader that skips it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample<R = Value> {
    /// Record format version ([`FORMAT_VERSION`]).
    pub format_version: u32,
    /// The run.
    pub run_id: String,
    /// Stable step id, e.g. `busy/neighbors=2/rep=3`.
    pub step: String,
    /// 0-based position of the step in the plan.
    pub step_index: usize,
    /// 1-based index of this record among the step's records.
    pub part: usize,
    /// How many records the step has (a step is complete when all are written).
    pub parts: usize,
    /// Scenario kind, e.g. `neighbor-staircase`.
    pub scenario: Scenario,
    /// Scenario part, e.g. `busy`.
    pub group: StepGroup,
    /// Numeric level (neighbors, threads, bit/s, Table 1 id).
    pub level: f64,
    /// Level label, e.g. `neighbors=2`.
    pub level_label: String,
    /// Repetition within the level (1-based).
    pub rep: u32,
    /// A warm-up repetition (leave it out of statistics).
    pub warmup: bool,
    /// The tenants present during the step (their agents, or instances, running), in
    /// file order; the endpoint is not a tenant (version 9). Shows, e.g., that a
    /// load-steps baseline with `unused_neighbors = "absent"` had the test tenant
    /// alone. Empty in older records; a list, so not one of the flat [`columns`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub present: Vec<String>,
    /// The technology the step's tenants ran in (version 11): set in an isolation
    /// matrix over `technologies`, whose tenants are named `TENANT@TECHNOLOGY`;
    /// absent elsewhere and in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub technology: Option<Runtime>,
    /// How the step's measured jobs were started (version 11): the order and the
    /// stagger; absent where they start together, and in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<StepStart>,
    /// The tenant the job ran on.
    pub tenant: String,
    /// The tenant's role: `test` or `neighbor`.
    pub role: Role,
    /// Job kind, e.g. `burn`.
    pub job: JobKind,
    /// Ok or failed.
    pub status: SampleStatus,
    /// Why the step failed.
    pub error: Option<String>,
    /// Attempts made (1 = first try succeeded).
    pub attempts: u32,
    /// Wall-clock start of the measured jobs (RFC 3339 UTC).
    pub started_at: String,
    /// Controller-side time of the step, ms: background changes, the settle wait, the
    /// measured jobs and their collection (`docs/results-format.md`).
    pub elapsed_ms: f64,
    /// The primary metric in `value`.
    pub metric: Option<Metric>,
    /// The primary metric's value.
    pub value: Option<f64>,
    /// Whether a higher `value` is better (throughput) or worse (runtime, latency).
    pub higher_is_better: Option<bool>,
    /// One column per metric, named by [`Metric::name`] in [`Metric::ALL`] order:
    /// `runtime_s` and `ops_per_sec` (burn), `rtt_mean_ns` ... `rtt_p999_ns`
    /// (latency), `rate_bps` (load); `null` where the job has none.
    #[serde(flatten)]
    pub metrics: MetricValues,
    /// What the job ran under (version 4): steal on its CPUs before and after, the
    /// time since its machine booted, its CPUs' effective frequency; columns
    /// [`CONDITION_COLUMNS`]. The machine itself (CPU model, kernel, clocksource,
    /// hypervisor) is the `environment` of the manifest's tenant named `tenant`.
    #[serde(flatten)]
    pub conditions: StepConditions,
    /// The host-side sampler that read the `host_*` columns over the step's
    /// measured jobs (version 11): its interval and its own CPU cost. Absent where
    /// nothing was read from the host (no cgroups, cloud tenants) and in older
    /// records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampler: Option<HostSampler>,
    /// Raw HDR log of this job, relative to the run directory.
    pub hdr_log: Option<String>,
    /// The job's raw result as the agent returned it.
    pub result: Option<R>,
}

/// The host-side sampler of one step (a sample's `sampler`, version 11): how often
/// it read the tenants' cgroup and interface counters and what that cost, so the
/// acquisition overhead is known beside the figures it produced (Volpert et al.
/// §4.2, §5.3).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HostSampler {
    /// Milliseconds between readings (the experiment's `usage_interval`).
    pub interval_ms: f64,
    /// The sampling thread's CPU time over its wall time (`CLOCK_THREAD_CPUTIME_ID`
    /// over the monotonic clock, from its first reading to its last): a fraction of
    /// one CPU, e.g. 0.002 for 0.2%.
    pub cpu_share: f64,
}

/// The flat columns of a sample before its metric columns, in order.
const LEADING_COLUMNS: [&str; 21] = [
    "step",
    "step_index",
    "part",
    "parts",
    "scenario",
    "group",
    "level",
    "level_label",
    "rep",
    "warmup",
    "tenant",
    "role",
    "job",
    "status",
    "error",
    "attempts",
    "started_at",
    "elapsed_ms",
    "metric",
    "value",
    "higher_is_better",
];

/// The flat columns of a sample, in order: every field but `format_version`,
/// `run_id`, the list `present` and the nested `result` (what a table of a run's
/// samples holds), the metric columns ([`Metric::ALL`]) and the conditions
/// ([`CONDITION_COLUMNS`]) among them.
pub fn columns() -> impl Iterator<Item = &'static str> {
    LEADING_COLUMNS
        .into_iter()
        .chain(Metric::ALL.into_iter().map(Metric::name))
        .chain(CONDITION_COLUMNS)
        .chain(["hdr_log"])
}

/// What a step is, as far as its samples record it (the plan's step implements it).
pub trait StepRecord {
    /// Stable step id, e.g. `busy/neighbors=2/rep=3`.
    fn id(&self) -> &str;
    /// Scenario part, e.g. `busy`.
    fn group(&self) -> StepGroup;
    /// Numeric level.
    fn level(&self) -> f64;
    /// Level label, e.g. `neighbors=2`.
    fn level_label(&self) -> &str;
    /// Repetition within the level (1-based).
    fn rep(&self) -> u32;
    /// Whether it is a warm-up repetition.
    fn warmup(&self) -> bool;
    /// The tenants present during the step, in file order.
    fn present(&self) -> &[String];
    /// The technology the step's tenants run in, where the plan names one.
    fn technology(&self) -> Option<Runtime> {
        None
    }
    /// How the step's measured jobs start, where not together.
    fn start(&self) -> Option<StepStart> {
        None
    }
}

/// What the record of one job of a step is made of, besides the step itself.
#[derive(Debug, Clone)]
pub struct SampleParts {
    /// Tenant name.
    pub tenant: String,
    /// `test` or `neighbor`.
    pub role: Role,
    /// Job kind.
    pub job: JobKind,
    /// Ok or failed.
    pub status: SampleStatus,
    /// Why it failed.
    pub error: Option<String>,
    /// Attempts made.
    pub attempts: u32,
    /// When the measured jobs started.
    pub started_at: SystemTime,
    /// Controller-side elapsed time, ms.
    pub elapsed_ms: f64,
    /// Flat metrics.
    pub metrics: Metrics,
    /// What the job ran under, read from its result with its qualifiers (the
    /// [`StepConditions`] of a [`crate::quality::Quality`]); none for a failed job.
    pub conditions: StepConditions,
    /// The host-side sampler's interval and cost, where the host read the step.
    pub sampler: Option<HostSampler>,
    /// HDR log path relative to the run directory.
    pub hdr_log: Option<String>,
    /// Raw result.
    pub result: Option<Value>,
}

impl Sample {
    /// The record for part `part` (1-based) of `parts` of `step`.
    pub fn new(
        run_id: &str,
        scenario: Scenario,
        step_index: usize,
        step: &impl StepRecord,
        part: usize,
        parts: usize,
        p: SampleParts,
    ) -> Sample {
        let m = p.metrics;
        Sample {
            format_version: FORMAT_VERSION,
            run_id: run_id.to_string(),
            step: step.id().to_string(),
            step_index,
            part,
            parts,
            scenario,
            group: step.group(),
            level: step.level(),
            level_label: step.level_label().to_string(),
            rep: step.rep(),
            warmup: step.warmup(),
            present: step.present().to_vec(),
            technology: step.technology(),
            start: step.start(),
            tenant: p.tenant,
            role: p.role,
            job: p.job,
            status: p.status,
            error: p.error,
            attempts: p.attempts,
            started_at: timestamp(p.started_at),
            elapsed_ms: p.elapsed_ms,
            metric: m.metric,
            value: m.value,
            higher_is_better: m.higher_is_better(),
            metrics: m.values,
            conditions: p.conditions,
            sampler: p.sampler,
            hdr_log: p.hdr_log,
            result: p.result,
        }
    }
}

impl<R> Sample<R> {
    /// The value of `metric`'s column in this record.
    pub fn get(&self, metric: Metric) -> Option<f64> {
        self.metrics.get(metric)
    }
}

/// One line of `background.jsonl` (version 3): how one background job ended and what
/// it achieved. A busy or idle neighbor's job, a background load, or the endpoint's
/// `serve`. `R` is what its raw `result` is read as, as in [`Sample`].
///
/// The controller stops a neighbor's background jobs whenever the set a step wants
/// changes (and after a failed attempt, and when the session ends), so a job runs
/// over consecutive steps that all want the same background, a level's repetitions,
/// which `steps` lists; the endpoint's `serve` runs over the whole session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackgroundRecord<R = Value> {
    /// Record format version ([`FORMAT_VERSION`]).
    pub format_version: u32,
    /// The run.
    pub run_id: String,
    /// The tenant the job ran on.
    pub tenant: String,
    /// `neighbor`, or `endpoint` for the reflector and sink.
    pub role: Role,
    /// Job kind: `busy`, `load`, `idle`, `serve`.
    pub job: BackgroundJob,
    /// The client tenant a mirrored server's `serve` job served (`servers =
    /// "mirrored"`: each client's own server); absent for the shared endpoint and for
    /// the other jobs (version 9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serves: Option<String>,
    /// The steps attempted while it ran, in order (ids as a sample's `step`).
    pub steps: Vec<String>,
    /// `ok`: it ran until stopped and reported; `failed`: it ended before it was
    /// stopped, or stopping it failed (`error` says which).
    pub status: SampleStatus,
    /// The job's last state as its agent reported it (`stopped`, `failed`,
    /// `timed-out`, `done`); `null` when stopping it failed.
    pub state: Option<String>,
    /// What went wrong.
    pub error: Option<String>,
    /// When the controller started it (RFC 3339 UTC).
    pub started_at: String,
    /// When its stop was answered.
    pub stopped_at: String,
    /// Controller-side time from its start to its stop, s.
    pub ran_s: f64,
    /// A load's target rate, bit/s (from its job); `null` for other kinds.
    pub target_bps: Option<f64>,
    /// What it achieved: `runtime_s`, `ops_per_sec` (busy); `runtime_s`, `sent_bps`,
    /// `rate_bps` (load); `reflected`, `send_failures`, `garbage` (serve).
    #[serde(flatten)]
    pub achieved: Achieved,
    /// The job's final result as the agent returned it.
    pub result: Option<R>,
}

/// Where one tenant ran, as the provider placed it and its agent reported. `H` is
/// the agent's health record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantRecord<H = Value> {
    /// Name.
    pub name: String,
    /// `test` or `neighbor`, or `endpoint` for the reflector and sink off the measured
    /// host.
    pub role: Role,
    /// Agent address.
    pub addr: String,
    /// CPUs the provider pinned it to.
    pub cpus: Vec<usize>,
    /// Network namespace (emulated network).
    pub netns: Option<String>,
    /// IP in the emulated network.
    pub ip: Option<String>,
    /// What the agent said about itself (version, topology, allowed CPUs).
    pub health: Option<H>,
    /// The machine the agent ran on, as it captured it when it started (version 3):
    /// CPU model, kernel, clocksource, governor, hypervisor, topology, steal ticks,
    /// the same fields as the manifest's `controller`. Absent in older manifests and
    /// where the agent did not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Value>,
    /// The runtime (technology) the agent ran inside and its version (version 11);
    /// absent for a plain process and in older manifests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeRecord>,
}

/// One start or resume of a run. `H` is the agents' health record, `C` the cloud
/// record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session<H = Value, C = Value> {
    /// When it started (RFC 3339 UTC).
    pub started_at: String,
    /// When it ended, if it did.
    pub finished_at: Option<String>,
    /// `running`, `completed`, `interrupted`, `aborted` or `failed`; `died` for a
    /// session found still `running` when the run was resumed: its process ended
    /// without closing it (a `kill -9`, a crash, a power loss).
    pub status: SessionStatus,
    /// The controller's command line.
    pub command: Vec<String>,
    /// The tenants of this session's fleet.
    pub tenants: Vec<TenantRecord<H>>,
    /// Provider warnings (e.g. tenants sharing CPUs).
    pub warnings: Vec<String>,
    /// Process ids of the agents this session started (local provider), so anyone
    /// can check that none outlived the run.
    pub agent_pids: Vec<u32>,
    /// Steps measured (ok or failed) in this session.
    pub steps_run: usize,
    /// Cloud resources this session ran on (aws provider: host, instances); absent
    /// for local and static fleets and in manifests written before it existed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud: Option<C>,
}

/// `manifest.json`: what was run, where and with what. `H` and `C` as in [`Session`];
/// `E` is what the experiment is read as: its writer's JSON, or what readers need of
/// it ([`crate::ExperimentView`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest<H = Value, C = Value, E = Value> {
    /// Format version ([`FORMAT_VERSION`]).
    pub format_version: u32,
    /// The run id (the directory name).
    pub run_id: String,
    /// nnb version of the controller.
    pub nnb_version: String,
    /// The experiment file as named on the command line.
    pub experiment_file: String,
    /// The experiment file's text (a resume re-reads this, not the file).
    pub experiment_text: String,
    /// The checked experiment.
    pub experiment: E,
    /// Steps in the plan.
    pub planned_steps: usize,
    /// The controller host's environment (CPU model, kernel, clocksource, ...).
    pub controller: Value,
    /// Start and resumes, in order.
    pub sessions: Vec<Session<H, C>>,
}

/// Why a line of `samples.jsonl` is not a record this crate reads.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LineError {
    /// The line carries another format version.
    #[error("format_version {0} is not supported (this nnb reads versions 1 to {FORMAT_VERSION})")]
    Version(u64),
    /// The line is not a record (not JSON, a field missing or of the wrong type).
    #[error("{0}")]
    Invalid(String),
}

/// Only the version of a line that did not parse as a record.
#[derive(Deserialize)]
struct VersionOnly {
    format_version: u64,
}

/// Parses one line of `samples.jsonl` of a readable format version
/// ([`crate::READABLE_VERSIONS`]); a line of another version is [`LineError::Version`]
/// even when its fields differ.
pub fn parse_sample<R: serde::de::DeserializeOwned>(line: &str) -> Result<Sample<R>, LineError> {
    parse_versioned(line, |s: &Sample<R>| s.format_version)
}

/// Parses one line of `background.jsonl`, as [`parse_sample`] does a sample.
pub fn parse_background<R: serde::de::DeserializeOwned>(
    line: &str,
) -> Result<BackgroundRecord<R>, LineError> {
    parse_versioned(line, |b: &BackgroundRecord<R>| b.format_version)
}

/// Parses one line as a `T` of a readable version (`version` reads it).
fn parse_versioned<T: serde::de::DeserializeOwned>(
    line: &str,
    version: impl Fn(&T) -> u32,
) -> Result<T, LineError> {
    match serde_json::from_str::<T>(line) {
        Ok(t) if crate::readable(u64::from(version(&t))) => Ok(t),
        Ok(t) => Err(LineError::Version(u64::from(version(&t)))),
        Err(e) => match serde_json::from_str::<VersionOnly>(line) {
            Ok(v) if !crate::readable(v.format_version) => {
                Err(LineError::Version(v.format_version))
            }
            _ => Err(LineError::Invalid(e.to_string())),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_background_record_reads_back_with_every_field() {
        let written = json!({"format_version": 3, "run_id": "r", "tenant": "nb-1",
            "role": "neighbor", "job": "busy",
            "steps": ["busy/neighbors=1/warmup=1", "busy/neighbors=1/rep=1"],
            "status": "ok", "state": "stopped", "error": null,
            "started_at": "2026-11-22T10:00:00.000Z", "stopped_at": "2026-11-22T10:00:30.000Z",
            "ran_s": 30.0, "target_bps": null, "runtime_s": 29.5, "ops_per_sec": 4e8,
            "sent_bps": null, "rate_bps": null, "reflected": null, "send_failures": null,
            "garbage": null, "result": {"total_ops": 1.18e10, "ops_per_sec": 4e8}});
        let b: BackgroundRecord = parse_background(&written.to_string()).unwrap();
        assert_eq!(b.steps.len(), 2);
        assert_eq!(b.achieved.ops_per_sec, Some(4e8));
        assert_eq!(serde_json::to_value(&b).unwrap(), written);
        let mut later = written.clone();
        later["format_version"] = json!(crate::FORMAT_VERSION + 1);
        assert_eq!(
            parse_background::<Value>(&later.to_string()).unwrap_err(),
            LineError::Version(u64::from(crate::FORMAT_VERSION + 1))
        );
        let mut sample_like = written;
        sample_like
            .as_object_mut()
            .map(|o| o.remove("steps"))
            .unwrap();
        assert!(matches!(
            parse_background::<Value>(&sample_like.to_string()),
            Err(LineError::Invalid(_))
        ));
    }
}
