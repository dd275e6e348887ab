//! The results format of nnb, defined once: what `nnb run` writes into a run
//! directory and what `nnb analyze` reads back (`docs/results-format.md` describes
//! it for people and other tools).
//!
//! - [`Sample`], [`Manifest`], [`Session`], [`TenantRecord`], [`BackgroundRecord`]:
//!   the records, and [`parse_sample`] and [`parse_background`], the readers of one
//!   line of `samples.jsonl` and of `background.jsonl`;
//! - [`MANIFEST`], [`SAMPLES`], [`BACKGROUND`], [`hdr_log_path`]: the file names;
//!   [`FORMAT_VERSION`];
//! - [`Metric`]: every metric column with its unit, direction and label, so no code
//!   compares metric names as strings; the names of the records, each an enum:
//!   [`Scenario`], [`Role`], [`JobKind`], [`BackgroundJob`] and every [`AgentJob`],
//!   [`StepGroup`], the isolation matrix's [`TenantState`] and [`MatrixLevel`] (its
//!   level labels), [`SessionStatus`], [`ProviderKind`];
//! - [`campaign`]: a campaign's manifest and its journal of rounds (version 10);
//! - [`ExperimentView`]: what readers need of the experiment a manifest records;
//! - [`StepConditions`]: what a measured job ran under (steal, uptime, effective
//!   frequency), a sample's columns from version 4;
//! - [`job`]: the typed fields of the agents' job results the format is made from;
//! - [`stats`]: summary, median, Student-t and Welch intervals, degradation;
//! - [`knee`]: knees of a thread sweep and where the SMT knee is expected;
//! - [`quality`]: the qualifiers of a number (loss, clock fallback, partial sink
//!   reports, ...) read from a job's raw result.
//!
//! Plain data and arithmetic: no I/O beyond what callers pass in, no async.

/// The `Display` of each named enum: its `name()`, the name the format writes.
macro_rules! display_name {
    ($($t:ty),* $(,)?) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    )*};
}

pub mod campaign;
mod conditions;
mod experiment;
pub mod job;
mod kind;
pub mod knee;
mod metric;
pub mod quality;
mod record;
pub mod stats;
mod tenancy;
mod time;

pub use conditions::{StepConditions, CONDITION_COLUMNS};
pub use experiment::{
    BurnView, BusyView, ExperimentView, NetworkView, ProviderView, ScenarioView, TenantView,
};
pub use job::{
    Achieved, AgentJob, BackgroundJob, BackgroundResult, CommandJobResult, CommandTool,
    CommandValueSource, EventPool, JobKind, JobOutcome, JobResult, Metrics, ResultError,
};
pub use kind::{
    MatrixLevel, MatrixLevelError, ProviderKind, Role, Scenario, SessionStatus, StepGroup,
    TenantState,
};
pub use metric::{Direction, Metric, MetricValues, Quantity};
pub use record::{
    columns, parse_background, parse_sample, BackgroundRecord, HostSampler, LineError, Manifest,
    Sample, SampleParts, SampleStatus, Session, StepRecord, TenantRecord,
};
pub use tenancy::{Runtime, RuntimeRecord, StartOrder, StepStart};
pub use time::{parse_timestamp, run_id_stamp, timestamp};

/// Version of the manifest and sample record format this nnb writes (their
/// `format_version` field). A change of fields or of a field's meaning bumps it;
/// `docs/results-format.md` lists what each version changed.
pub const FORMAT_VERSION: u32 = 11;
/// Every version this nnb reads: runs of older versions stay readable.
pub const READABLE_VERSIONS: [u32; 11] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];

/// Whether this nnb reads records and manifests of `version`.
pub fn readable(version: u64) -> bool {
    READABLE_VERSIONS.iter().any(|&v| u64::from(v) == version)
}
/// Name of the manifest file in a run directory.
pub const MANIFEST: &str = "manifest.json";
/// Name of the samples journal in a run directory.
pub const SAMPLES: &str = "samples.jsonl";
/// Name of the file of background jobs' ends in a run directory (version 3; one
/// [`BackgroundRecord`] per line, absent when a run had no background job).
pub const BACKGROUND: &str = "background.jsonl";
/// Directory of a run's raw HDR interval logs.
pub const HDR_DIR: &str = "hdr";

/// Path, relative to the run directory, of the raw HDR log of `tenant` at step
/// `step_id`: `hdr/<step>.<tenant>.hlog`, with every character of the step id other
/// than ASCII letters, digits, `-` and `.` made `_` (`/` and `=` are not safe).
pub fn hdr_log_path(step_id: &str, tenant: &str) -> String {
    let safe: String = step_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{HDR_DIR}/{safe}.{tenant}.hlog")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hdr_paths_are_safe() {
        assert_eq!(
            hdr_log_path("load/load=50M/rep=1", "test"),
            "hdr/load_load_50M_rep_1.test.hlog"
        );
    }
}
