//! What a cloud run costs: the estimate before it starts ([`CostEstimate`], whether
//! the user consented to it: [`Consent`]) and the cap while it runs ([`CostCap`]).
//! A provider that rents resources prices them; the rules here are every such
//! provider's.
//!
//! The cost cap of a cloud run. A dry run cannot price fixed-work steps (their length is
//! what is measured), so `max_cost_usd` is also enforced while a session runs: before each
//! step the controller checks that the host's bill so far, plus the longest step seen and
//! the teardown, stays within the cap, and otherwise stops the run (keeping every step
//! measured, like an abort) and tears down. The provider knows the price
//! ([`Provider::cost_cap`](crate::provider::Provider::cost_cap)).
//!
//! Time is tokio's clock, so tests can run a capped run on paused time.

use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

/// What a run will cost: the rented hosts' and default-tenancy instances' price
/// times the expected time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostEstimate {
    /// What is priced (the dedicated host's family; the tenants' family with
    /// default tenancy).
    pub family: String,
    /// The host's on-demand price, USD per hour (catalog), per host.
    pub usd_per_hour: f64,
    /// Dedicated hosts held: 1, or 2 with mirrored servers on a host of their own;
    /// 0 with default tenancy.
    pub hosts: u32,
    /// The default-tenancy instances (the tenants with default tenancy, the
    /// endpoint, default-tenancy servers) together, USD per hour at their catalog
    /// on-demand prices (issue 26).
    pub instances_usd_per_hour: f64,
    /// Region the price is for.
    pub price_region: String,
    /// When the price was read.
    pub price_as_of: String,
    /// Changes of the tenants present between steps, each priced at the provider's
    /// time for one.
    pub level_changes: usize,
    /// Expected time the host is held: the plan's estimate, the level changes and
    /// the launch and teardown.
    pub hours: f64,
    /// The estimate, USD.
    pub usd: f64,
}

/// Whether the estimated cost of a run may be spent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Consent {
    /// Yes: `--yes`, or a `max_cost_usd` at or above the estimate.
    Given,
    /// No: the estimate is above `max_cost_usd` (refused even with `--yes`).
    OverCap {
        /// The file's `max_cost_usd`.
        max_usd: f64,
    },
    /// Not yet: no `--yes` and no `max_cost_usd`.
    Missing,
}

impl Consent {
    /// Whether a run estimated at `usd` may spend it: a cap (`max_usd`) decides when
    /// the file sets one, else the user's `yes`.
    pub fn of(usd: f64, max_usd: Option<f64>, yes: bool) -> Consent {
        match max_usd {
            Some(max_usd) if usd > max_usd => Consent::OverCap { max_usd },
            Some(_) => Consent::Given,
            None if yes => Consent::Given,
            None => Consent::Missing,
        }
    }
}

/// An amount of USD for people: `$1.23`.
pub fn usd(amount: f64) -> String {
    format!("${amount:.2}")
}

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
    fn a_cap_decides_the_consent_and_without_one_the_user_does() {
        assert_eq!(Consent::of(5.0, Some(5.0), false), Consent::Given);
        assert_eq!(
            Consent::of(5.01, Some(5.0), true),
            Consent::OverCap { max_usd: 5.0 },
            "a cap below the estimate refuses even with --yes"
        );
        assert_eq!(Consent::of(5.0, None, true), Consent::Given);
        assert_eq!(Consent::of(0.0, None, false), Consent::Missing);
        assert_eq!(usd(1.004), "$1.00");
        assert_eq!(usd(12.5), "$12.50");
    }

    #[test]
    fn a_cap_below_the_teardown_reserve_stops_before_the_first_step() {
        let c = cap(TEARDOWN_RESERVE.as_secs_f64() - 1.0, Duration::ZERO);
        assert!(c.allows_next_step().is_err());
    }
}
