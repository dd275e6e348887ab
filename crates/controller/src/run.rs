//! A run on disk: its directory, manifest, experiment and plan ([`Run::create`] for a
//! new run, [`Run::open`] to resume one).

use std::path::Path;

use serde_json::Value;

use super::ControllerError;
use crate::results::{self, Manifest, RunDir, FORMAT_VERSION};
use nnb_experiment::plan::{self, Plan};
use nnb_experiment::Experiment;
use nnb_format::SessionStatus;

/// A run: its directory, manifest, experiment and plan.
#[derive(Debug)]
pub struct Run {
    /// Where its files are.
    pub dir: RunDir,
    /// Its manifest (kept in step with the file).
    pub manifest: Manifest,
    /// The experiment.
    pub experiment: Experiment,
    /// The plan.
    pub plan: Plan,
}

impl Run {
    /// Creates a new run of `experiment` (read from `file` with text `text`) under
    /// `results`, writing its manifest.
    pub fn create(
        results: &Path,
        file: &str,
        text: &str,
        experiment: Experiment,
        plan: Plan,
    ) -> Result<Run, ControllerError> {
        let run_id = results::new_run_id();
        let dir = RunDir::create(results, &run_id)?;
        let controller = nnb_burn::topology::Topology::host()
            .ok()
            .map(|t| nnb_burn::env::Environment::capture(&t, env!("CARGO_PKG_VERSION")))
            .and_then(|e| serde_json::to_value(e).ok())
            .unwrap_or(Value::Null);
        let manifest = Manifest {
            format_version: FORMAT_VERSION,
            run_id,
            nnb_version: env!("CARGO_PKG_VERSION").to_string(),
            experiment_file: file.to_string(),
            experiment_text: text.to_string(),
            experiment: serde_json::to_value(&experiment).unwrap_or(Value::Null),
            planned_steps: plan.steps.len(),
            controller,
            sessions: Vec::new(),
        };
        dir.write_manifest(&manifest)?;
        Ok(Run {
            dir,
            manifest,
            experiment,
            plan,
        })
    }

    /// Opens run `run_id` under `results` to resume it: the experiment is re-read
    /// from the text stored in its manifest, so the plan (and its step ids) is the
    /// one the run started with. The directory is locked ([`RunDir::open`]), so a
    /// session still marked `running` has no living writer: it is marked `died`.
    pub fn open(results: &Path, run_id: &str, host_cpus: usize) -> Result<Run, ControllerError> {
        let dir = RunDir::open(results, run_id)?;
        let mut manifest = dir.read_manifest()?;
        for s in manifest
            .sessions
            .iter_mut()
            .filter(|s| s.status == SessionStatus::Running)
        {
            tracing::warn!(
                "run {run_id}: the session started at {} ended without closing (killed?); \
                 marking it `{}`",
                s.started_at,
                SessionStatus::Died
            );
            s.status = SessionStatus::Died;
        }
        let experiment = nnb_experiment::parse(
            &manifest.experiment_file,
            &manifest.experiment_text,
            Some(host_cpus),
        )?;
        let plan = plan::expand(
            &experiment,
            experiment.provider.host_vcpus().unwrap_or(host_cpus),
        );
        if plan.steps.len() != manifest.planned_steps {
            return Err(ControllerError::Fleet(format!(
                "run {run_id} planned {} steps but its experiment now expands to {}: \
                 it was made by another nnb version",
                manifest.planned_steps,
                plan.steps.len()
            )));
        }
        Ok(Run {
            dir,
            manifest,
            experiment,
            plan,
        })
    }
}
