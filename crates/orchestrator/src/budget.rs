//! The cost cap of a cloud run. A dry run cannot price fixed-work steps (their length is
//! what is measured), so `max_cost_usd` is also enforced while a session runs: before each
//! step the controller checks that the host's bill so far, plus the longest step seen and
//! the teardown, stays within the cap, and otherwise stops the run (keeping every step
//! measured, like an abort) and tears down. The provider knows the price
//! ([`Provider::cost_cap`](crate::provider::Provider::cost_cap)).
//!
//! Time is tokio's clock, so tests can run a capped run on paused time.

use std::time::Duration;

use tokio::time::Instant;

/// Time kept in reserve for the teardown (terminate, wait, release) when checking the cap.
pub const TEARDOWN_RESERVE: Duration = Duration::from_secs(5 * 60);

/// A run's spending limit: the host's price, the cap, and when the host was taken.
#[derive(Debug, Clone)]
pub struct CostCap {
    usd_per_hour: f64,
    max_usd: f64,
    since: Instant,
    longest_step: Duration,
}

impl CostCap {
    /// A cap of `max_usd` on a host costing `usd_per_hour`, held since `since`.
    pub fn new(usd_per_hour: f64, max_usd: f64, since: Instant) -> CostCap {
        CostCap {
            usd_per_hour,
            max_usd,
            since,
            longest_step: Duration::ZERO,
        }
    }

    /// Records how long a step took (the next one is assumed to take as long as the
    /// longest so far).
    pub fn step_took(&mut self, took: Duration) {
        self.longest_step = self.longest_step.max(took);
    }

    /// Spent so far, USD.
    pub fn spent_usd(&self) -> f64 {
        self.usd(self.since.elapsed())
    }

    /// `Ok` when one more step and the teardown still fit under the cap; else why not.
    pub fn allows_next_step(&self) -> Result<(), String> {
        let held = self.since.elapsed();
        let projected = self.usd(held + self.longest_step + TEARDOWN_RESERVE);
        if projected <= self.max_usd {
            return Ok(());
        }
        Err(format!(
            "max_cost_usd = {:.2} would be passed: ${:.2} spent in {:.0} min, one more step \
             ({:.0} s) and the teardown would make ${projected:.2}",
            self.max_usd,
            self.usd(held),
            held.as_secs_f64() / 60.0,
            self.longest_step.as_secs_f64(),
        ))
    }

    fn usd(&self, held: Duration) -> f64 {
        self.usd_per_hour * held.as_secs_f64() / 3600.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cap on a host costing $1 per second, held since `ago`.
    fn cap(max_usd: f64, ago: Duration) -> CostCap {
        let since = Instant::now().checked_sub(ago).unwrap_or_else(Instant::now);
        CostCap::new(3600.0, max_usd, since)
    }

    #[test]
    fn the_next_step_and_the_teardown_must_fit_under_the_cap() {
        let reserve = TEARDOWN_RESERVE.as_secs_f64();
        // Held 10 s, longest step 20 s, teardown 300 s: 330 $ projected.
        let mut c = cap(reserve + 60.0, Duration::from_secs(10));
        c.step_took(Duration::from_secs(20));
        c.step_took(Duration::from_secs(5));
        c.allows_next_step().expect("330 $ fits under 360 $");
        // A longer step seen: 10 + 70 + 300 = 380 $ > 360 $.
        c.step_took(Duration::from_secs(70));
        let why = c.allows_next_step().expect_err("380 $ does not fit");
        assert!(why.contains("max_cost_usd = 360.00"), "{why}");
        assert!((c.spent_usd() - 10.0).abs() < 5.0, "{}", c.spent_usd());
    }

    #[test]
    fn a_cap_below_the_teardown_reserve_stops_before_the_first_step() {
        let c = cap(TEARDOWN_RESERVE.as_secs_f64() - 1.0, Duration::ZERO);
        assert!(c.allows_next_step().is_err());
    }
}
