//! What a run reports while it goes, for whoever watches it.
//!
//! The controller calls a [`Progress`] at each event (the run starts, a step starts,
//! a step ends with its records, a note worth saying, the run ends) and draws
//! nothing itself: the binary chooses the renderer (a bar on a terminal, a plain
//! line per step in a file), as criterion's `Report` separates measuring from
//! showing. [`Silent`] shows nothing.

use std::fmt::Debug;
use std::time::Duration;

use crate::results::Sample;
use nnb_experiment::plan::Step;

/// Receives a run's events. Every method has an empty default, so a renderer
/// implements only what it shows.
pub trait Progress: Debug + Send + Sync {
    /// The run starts: `total` steps in the plan, `done` of them already complete
    /// (a resumed run).
    fn start(&self, total: usize, done: usize) {
        let _ = (total, done);
    }

    /// `step` starts being measured.
    fn step(&self, step: &Step) {
        let _ = step;
    }

    /// `step` ended after `elapsed` (all attempts): `records` are what the journal
    /// got, one per measured job, ok or failed.
    fn step_done(&self, step: &Step, records: &[Sample], elapsed: Duration) {
        let _ = (step, records, elapsed);
    }

    /// A line for the operator: a warning, a failed attempt, why the run stops.
    fn note(&self, line: &str) {
        let _ = line;
    }

    /// The run ended (completed or not).
    fn finish(&self) {}
}

/// Shows nothing (notes still go to the log at info level).
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {
    fn note(&self, line: &str) {
        tracing::info!("{line}");
    }
}
