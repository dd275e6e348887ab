//! A measuring session: warm-ups and repetitions of one burn for each thread count,
//! and the statistics of the repetitions.
//!
//! `nnb cpu` runs one session (one step per thread count of a sweep); the warm-ups
//! are run and discarded, the repetitions kept with their summaries, so every user
//! of the burner gets the same loop.

use serde::Serialize;

use crate::burner::{burn, burn_duty, BurnError, BurnResult, Duty, EventPool, Work};
use crate::clock::Clock;
use crate::placement::Placement;
use crate::workload::Workload;
use nnb_format::stats::Summary;

/// What to run and how often, for every thread count.
#[derive(Debug, Clone, Copy)]
pub struct Session<'a> {
    /// The clock the burns are timed by.
    pub clock: &'a Clock,
    /// The workload each thread runs.
    pub workload: &'a Workload,
    /// Fixed work or fixed time per run.
    pub work: Work,
    /// Where a fixed-work run's threads take their ops (see [`EventPool`]).
    pub pool: EventPool,
    /// Runs per thread count before the measured ones, discarded.
    pub warmup: usize,
    /// Measured repetitions per thread count (at least 1).
    pub reps: usize,
    /// Busy only this share of the time ([`burn_duty`]); fixed-time work only.
    pub duty: Option<Duty>,
}

/// A run about to start, for a progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunStart {
    /// Threads of this step.
    pub threads: usize,
    /// 1-based number among the step's warm-ups, or among its repetitions.
    pub number: usize,
    /// A warm-up run (discarded).
    pub warmup: bool,
    /// Runs of the whole session finished before this one.
    pub done: usize,
}

/// One thread count's measurements.
#[derive(Debug, Serialize)]
pub struct Step {
    /// Threads burning together.
    pub threads: usize,
    /// Where they were put.
    pub placement: Placement,
    /// Repetitions (warm-ups excluded).
    pub runs: Vec<BurnResult>,
    /// Wall time per repetition, seconds.
    pub runtime_s: Summary,
    /// Total ops/s per repetition.
    pub ops_per_sec: Summary,
    /// Largest estimated timing overhead share among the repetitions.
    pub timing_overhead_share_max: f64,
}

/// Why a session stopped.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// No measured repetition was asked for.
    #[error("at least one repetition is needed")]
    NoReps,
    /// A duty cycle was asked for with fixed work: only fixed-time burns pace.
    #[error("a duty-cycled burn runs for a fixed time, not a fixed number of ops")]
    DutyNeedsFixedTime,
    /// The repetitions gave no statistics (a NaN among them).
    #[error("the repetitions with {0} threads gave no statistics")]
    NoStatistics(usize),
    /// A burn failed.
    #[error("burn with {threads} threads")]
    Burn {
        /// Threads of the failed step.
        threads: usize,
        /// What went wrong.
        #[source]
        source: BurnError,
    },
}

impl Session<'_> {
    /// Runs every placement's warm-ups and repetitions in turn, telling `on_run`
    /// before each run starts.
    pub fn run(
        &self,
        placements: Vec<Placement>,
        on_run: &mut dyn FnMut(RunStart),
    ) -> Result<Vec<Step>, SessionError> {
        if self.reps == 0 {
            return Err(SessionError::NoReps);
        }
        if self.duty.is_some() && matches!(self.work, Work::Ops(_)) {
            return Err(SessionError::DutyNeedsFixedTime);
        }
        let mut done = 0;
        let mut steps = Vec::with_capacity(placements.len());
        for placement in placements {
            let threads = placement.slots.len();
            let mut runs = Vec::with_capacity(self.reps);
            for i in 0..self.warmup + self.reps {
                let warmup = i < self.warmup;
                let number = if warmup { i + 1 } else { i - self.warmup + 1 };
                on_run(RunStart {
                    threads,
                    number,
                    warmup,
                    done,
                });
                let slots = &placement.slots;
                let r = match (self.work, self.duty) {
                    (Work::Duration(d), Some(duty)) => {
                        burn_duty(self.clock, self.workload, d, duty, slots, None)
                    }
                    (work, _) => burn(self.clock, self.workload, work, self.pool, slots),
                }
                .map_err(|source| SessionError::Burn { threads, source })?;
                tracing::debug!(threads, rep = i, wall_ns = r.wall_ns, "burn done");
                if !warmup {
                    runs.push(r);
                }
                done += 1;
            }
            steps.push(Step::of(threads, placement, runs)?);
        }
        Ok(steps)
    }
}

impl Step {
    /// The step's statistics from its repetitions.
    fn of(
        threads: usize,
        placement: Placement,
        runs: Vec<BurnResult>,
    ) -> Result<Step, SessionError> {
        let runtimes: Vec<f64> = runs.iter().map(|r| r.wall_ns / 1e9).collect();
        let rates: Vec<f64> = runs.iter().map(|r| r.ops_per_sec).collect();
        let none = || SessionError::NoStatistics(threads);
        Ok(Step {
            threads,
            placement,
            runtime_s: Summary::of(&runtimes).ok_or_else(none)?,
            ops_per_sec: Summary::of(&rates).ok_or_else(none)?,
            timing_overhead_share_max: runs
                .iter()
                .map(|r| r.timing_overhead_share)
                .fold(0.0, f64::max),
            runs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::burner::Work;
    use crate::placement::{plan, PinStrategy};
    use crate::topology::Topology;

    #[test]
    fn warmups_are_run_and_discarded_and_each_run_is_announced() {
        let topo = Topology::host().expect("topology");
        let allowed: Vec<usize> = topo.online().map(|c| c.id).take(1).collect();
        let placement = plan(&topo, &PinStrategy::None, 1, &allowed, false).expect("plan");
        let clock = Clock::calibrate();
        let session = Session {
            clock: &clock,
            workload: &Workload::FpAdd,
            work: Work::Ops(1000),
            pool: EventPool::PerThread,
            warmup: 2,
            reps: 3,
            duty: None,
        };
        let mut seen = Vec::new();
        let steps = session
            .run(vec![placement], &mut |r| {
                seen.push((r.number, r.warmup, r.done))
            })
            .expect("session");
        assert_eq!(
            seen,
            [
                (1, true, 0),
                (2, true, 1),
                (1, false, 2),
                (2, false, 3),
                (3, false, 4)
            ]
        );
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0].threads, 1);
        assert_eq!(steps[0].runs.len(), 3);
        assert_eq!(steps[0].runtime_s.n, 3);
    }

    #[test]
    fn zero_repetitions_and_paced_fixed_work_are_refused() {
        let clock = Clock::calibrate();
        let session = Session {
            clock: &clock,
            workload: &Workload::FpAdd,
            work: Work::Ops(1),
            pool: EventPool::PerThread,
            warmup: 0,
            reps: 0,
            duty: None,
        };
        assert!(matches!(
            session.run(Vec::new(), &mut |_| {}),
            Err(SessionError::NoReps)
        ));
        let fixed_work_at_half_load = Session {
            reps: 1,
            duty: Duty::new(0.5),
            ..session
        };
        assert!(matches!(
            fixed_work_at_half_load.run(Vec::new(), &mut |_| {}),
            Err(SessionError::DutyNeedsFixedTime)
        ));
    }
}
