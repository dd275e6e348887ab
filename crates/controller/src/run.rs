//! A run on disk: its directory, manifest, experiment and plan ([`Run::create`] for a
//! new run, [`Run::open`] to resume one).

use std::path::Path;

use serde_json::Value;

use super::ControllerError;
use crate::journal::read_samples;
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
        Run::create_named(
            results,
            &results::new_run_id(),
            file,
            text,
            experiment,
            plan,
        )
    }

    /// [`Run::create`] with the run id `run_id` (a campaign's round: see
    /// [`crate::campaign`]); the directory `<results>/<run_id>` must not exist.
    pub fn create_named(
        results: &Path,
        run_id: &str,
        file: &str,
        text: &str,
        experiment: Experiment,
        plan: Plan,
    ) -> Result<Run, ControllerError> {
        let run_id = run_id.to_string();
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
        mark_died(&mut manifest, &dir.samples_path());
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

/// Marks every session of `manifest` still `running` as `died` (its process ended
/// without closing it) with the steps it recorded in the journal at `samples`: those
/// whose measured jobs started from its start on, before the next session's
/// (reliability review NL10: a session that died never wrote its count, so it read
/// 0). A journal that cannot be read leaves the count at what the session wrote;
/// reopening the journal then reports why.
fn mark_died(manifest: &mut Manifest, samples: &Path) {
    if !manifest
        .sessions
        .iter()
        .any(|s| s.status == SessionStatus::Running)
    {
        return;
    }
    // When each recorded step's measured jobs started; `None` when unreadable.
    let recorded: Option<Vec<String>> = match samples.exists().then(|| read_samples(samples)) {
        None => Some(Vec::new()),
        Some(Ok(records)) => Some(
            records
                .into_iter()
                .filter(|r| r.part == 1)
                .map(|r| r.started_at)
                .collect(),
        ),
        Some(Err(e)) => {
            tracing::debug!("counting the steps of a session that died: {e}");
            None
        }
    };
    // Timestamps are fixed-width RFC 3339 UTC: their order is the strings' order.
    let starts: Vec<String> = manifest
        .sessions
        .iter()
        .map(|s| s.started_at.clone())
        .collect();
    let run_id = &manifest.run_id;
    for (i, s) in manifest.sessions.iter_mut().enumerate() {
        if s.status != SessionStatus::Running {
            continue;
        }
        let next = starts.get(i + 1);
        if let Some(recorded) = &recorded {
            s.steps_run = recorded
                .iter()
                .filter(|at| **at >= s.started_at && next.map_or(true, |n| *at < n))
                .count();
        }
        tracing::warn!(
            "run {run_id}: the session started at {} ended without closing (killed?) after \
             recording {} step(s); marking it `{}`",
            s.started_at,
            s.steps_run,
            SessionStatus::Died
        );
        s.status = SessionStatus::Died;
    }
}
