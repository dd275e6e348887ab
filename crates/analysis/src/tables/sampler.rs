//! What the host-side sampling cost (seeds-coverage N13; Volpert et al. §4.2 and
//! §5.3 ask for an acquisition overhead that is known and low, at a sampling
//! frequency set sensibly): each step's sampler records its interval and its
//! thread's CPU time over its wall time (a sample's `sampler`, version 11), and
//! this is their summary over a run, printed as a line under the isolation tables.

use std::collections::HashSet;

use nnb_format::JobKind;

use crate::read::Run;

use super::AnalysisError;

/// The host-side sampler over a run's measured steps.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerCost {
    /// The intervals the steps were sampled at, ms, ascending, each once (one, the
    /// experiment's `usage_interval`, in a run nnb made).
    pub intervals_ms: Vec<f64>,
    /// Steps whose sampler is recorded.
    pub steps: usize,
    /// The mean over those steps of the sampler thread's CPU share (a fraction of
    /// one CPU).
    pub mean_share: f64,
    /// The largest step's share.
    pub max_share: f64,
}

/// The sampler's interval and cost over `run`'s measured steps (each step's once:
/// its jobs' records carry the same sampler); `None` when no record has one (runs
/// before version 11, tenants the host does not read).
pub fn host_sampler(run: &Run) -> Result<Option<SamplerCost>, AnalysisError> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut shares: Vec<f64> = Vec::new();
    let mut intervals: Vec<f64> = Vec::new();
    run.each_result(&JobKind::ALL, |raw| {
        let Some(s) = raw.sampler else {
            return;
        };
        if seen.insert(raw.step) {
            shares.push(s.cpu_share);
            if !intervals.contains(&s.interval_ms) {
                intervals.push(s.interval_ms);
            }
        }
    })?;
    if shares.is_empty() {
        return Ok(None);
    }
    intervals.sort_by(f64::total_cmp);
    Ok(Some(SamplerCost {
        intervals_ms: intervals,
        steps: shares.len(),
        mean_share: shares.iter().sum::<f64>() / shares.len() as f64,
        max_share: shares.iter().copied().fold(0.0, f64::max),
    }))
}

impl SamplerCost {
    /// The line under the isolation tables, e.g. `host-side sampler: a reading
    /// every 20 ms; its thread used 0.31% of one CPU (mean over 63 steps, at most
    /// 0.52%)`.
    pub fn note(&self) -> String {
        let every = self
            .intervals_ms
            .iter()
            .map(|ms| format!("{ms} ms"))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "host-side sampler: a reading every {every}; its thread used {:.3}% of one CPU \
             (mean over {} step(s), at most {:.3}%)",
            self.mean_share * 100.0,
            self.steps,
            self.max_share * 100.0
        )
    }
}
