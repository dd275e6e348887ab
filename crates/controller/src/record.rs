//! What a step leaves in the journal: its samples (measured or failed), the HDR
//! logs beside them, and the controller's own overhead per step.

use std::time::{Duration, SystemTime};

use nnb_format::{JobKind, JobResult, Role, StepConditions};

use super::driver::{Driver, Measured};
use super::{ControllerError, Overhead};
use crate::results::{Metrics, Sample, SampleParts, SampleStatus};
use nnb_agent::jobs::JobSpec;
use nnb_experiment::plan::Step;

impl Driver<'_> {
    /// The role of `tenant` in the format (test, neighbor, or the endpoint).
    pub(super) fn role(&self, tenant: &str) -> Role {
        self.clients.get(tenant).map_or(Role::Neighbor, |(_, r)| *r)
    }

    pub(super) fn record_ok(
        &mut self,
        index: usize,
        step: &Step,
        measured: &[Measured],
        attempts: u32,
        started_at: SystemTime,
        elapsed: Duration,
    ) -> Result<Vec<Sample>, ControllerError> {
        let run = self.run;
        let mut records = Vec::with_capacity(measured.len());
        for (k, m) in measured.iter().enumerate() {
            let a = &m.assignment;
            let o = &m.outcome;
            let hdr_log = match &o.hdr_log {
                Some(log) => Some(run.dir.write_hdr(&step.id, &a.tenant, log)?),
                None => None,
            };
            let fixed_work = matches!(a.job, JobSpec::Burn { ops: Some(_), .. });
            let mut metrics = Metrics::of(&o.result, fixed_work);
            if let Some(host) = &m.host {
                host.write_to(&mut metrics.values);
            }
            records.push(Sample::new(
                &run.dir.run_id,
                run.experiment.scenario.kind(),
                index,
                step,
                k + 1,
                measured.len(),
                SampleParts {
                    tenant: a.tenant.clone(),
                    role: self.role(&a.tenant),
                    job: o.result.kind(),
                    status: SampleStatus::Ok,
                    error: None,
                    attempts,
                    started_at,
                    elapsed_ms: elapsed.as_secs_f64() * 1e3,
                    metrics,
                    conditions: StepConditions::from(&o.quality),
                    sampler: m.sampler,
                    hdr_log,
                    result: Some(o.raw.clone()),
                },
            ));
        }
        self.journal.append_step(&records)?;
        Ok(records)
    }

    pub(super) fn record_failed(
        &mut self,
        index: usize,
        step: &Step,
        attempts: u32,
        error: &str,
    ) -> Result<Vec<Sample>, ControllerError> {
        let run = self.run;
        let now = SystemTime::now();
        let records = step
            .measure
            .iter()
            .enumerate()
            .map(|(k, a)| {
                Ok(Sample::new(
                    &run.dir.run_id,
                    run.experiment.scenario.kind(),
                    index,
                    step,
                    k + 1,
                    step.measure.len(),
                    SampleParts {
                        tenant: a.tenant.clone(),
                        role: self.role(&a.tenant),
                        job: measured_kind(&a.job)?,
                        status: SampleStatus::Failed,
                        error: Some(error.to_string()),
                        attempts,
                        started_at: now,
                        elapsed_ms: 0.0,
                        metrics: Metrics::default(),
                        conditions: StepConditions::default(),
                        sampler: None,
                        hdr_log: None,
                        result: None,
                    },
                ))
            })
            .collect::<Result<Vec<Sample>, ControllerError>>()?;
        self.journal.append_step(&records)?;
        Ok(records)
    }
}

/// The kind of job a step measures with `spec`: a plan measures only jobs whose
/// results the format reads.
fn measured_kind(spec: &JobSpec) -> Result<JobKind, ControllerError> {
    spec.measured().ok_or_else(|| {
        ControllerError::Plan(format!(
            "the plan measures a {} job, whose result the results format does not read",
            spec.kind()
        ))
    })
}

/// Seconds of measured interval the result of a `spec` job reports (a latency
/// probe's warm-up, which its result leaves out, added).
pub(super) fn measured_secs(spec: &JobSpec, result: &JobResult) -> f64 {
    let warmup_s = match spec {
        JobSpec::Latency { warmup_ms, .. } => *warmup_ms as f64 / 1e3,
        _ => 0.0,
    };
    result.measured_secs(warmup_s)
}

/// Mean, median and max of per-step overheads (ms).
pub(super) fn overhead(ms: &[f64]) -> Option<Overhead> {
    if ms.is_empty() {
        return None;
    }
    let mut sorted = ms.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = nnb_format::stats::median(&sorted);
    Some(Overhead {
        steps: n,
        mean_ms: sorted.iter().sum::<f64>() / n as f64,
        median_ms: median,
        max_ms: sorted[n - 1],
    })
}
