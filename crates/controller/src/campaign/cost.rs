//! What a campaign will take and cost before it starts ([`CampaignEstimate`], the
//! dry run's table and the consent to the whole campaign's cost), and what it has
//! spent while it runs ([`CampaignBudget`]: `max_cost_usd` caps every round's
//! instance-hours together, not one round's).

use std::time::{Duration, SystemTime};

use serde::Serialize;

use nnb_experiment::campaign::{Campaign, CampaignKind};
use nnb_experiment::{Experiment, Provider};
use nnb_format::campaign::RoundRecord;
use nnb_format::parse_timestamp;

/// The launch (start the agents, wait for their health) a local round adds to its
/// plan's estimate: a second or two on this machine.
pub const LOCAL_LAUNCH: Duration = Duration::from_secs(2);

/// The launch time a round (spatial) or a lane's fleet (temporal) adds to the plan's
/// estimate: on aws half the spec's `health_timeout` (instances boot and the agents
/// start within it, most of them in well under it); locally [`LOCAL_LAUNCH`].
pub fn launch_allowance(exp: &Experiment) -> Duration {
    match &exp.provider {
        Provider::Aws(a) => a.health_timeout / 2,
        Provider::Local | Provider::Static { .. } => LOCAL_LAUNCH,
    }
}

/// What a round's fleet costs: its price per hour (all its instances) and how many
/// instances it has, as the provider's preflight prices one round.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FleetPrice {
    /// USD per hour the fleet is held.
    pub hourly_usd: f64,
    /// Instances in the fleet.
    pub instances: usize,
}

/// A campaign's plan in numbers: rounds, time and (priced providers) cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CampaignEstimate {
    /// Spatial or temporal.
    pub kind: CampaignKind,
    /// The lanes (zones).
    pub zones: Vec<String>,
    /// Rounds per lane.
    pub rounds_per_zone: u32,
    /// Rounds in all.
    pub total_rounds: usize,
    /// One round's plan estimate, ms.
    pub round_ms: u64,
    /// The launch a spatial round (a temporal lane, once) adds, ms.
    pub launch_ms: u64,
    /// Temporal: from one round's start to the next, ms.
    pub interval_ms: Option<u64>,
    /// Whether the lanes run at the same time (cloud) or one after another (local).
    pub lanes_in_parallel: bool,
    /// From the first round's start to the last one's end, ms.
    pub wall_ms: u64,
    /// Hours fleets are held, all lanes together.
    pub fleet_hours: f64,
    /// Instances per fleet, when priced.
    pub instances: Option<usize>,
    /// Instance-hours, when priced.
    pub instance_hours: Option<f64>,
    /// A fleet's price, USD per hour, when priced.
    pub hourly_usd: Option<f64>,
    /// The estimated cost of the whole campaign, USD, when priced.
    pub usd: Option<f64>,
}

impl CampaignEstimate {
    /// The estimate of `campaign` of `exp`, one round of which its plan estimates at
    /// `round`; `parallel`: lanes run at the same time; `price`: a round's fleet.
    ///
    /// Spatial: each round holds its fleet for its launch and its plan; a lane's
    /// rounds follow one another. Temporal: a lane holds one fleet from its launch
    /// to its last round's end, `(rounds - 1) x interval + round`.
    pub fn new(
        exp: &Experiment,
        campaign: &Campaign,
        round: Duration,
        parallel: bool,
        price: Option<FleetPrice>,
    ) -> CampaignEstimate {
        let launch = launch_allowance(exp);
        let rounds = campaign.rounds;
        let lanes = campaign.zones.len() as u32;
        let per_lane = match (campaign.kind, campaign.interval) {
            (CampaignKind::Temporal, Some(every)) => {
                launch + every.saturating_mul(rounds.saturating_sub(1)) + round
            }
            _ => (launch + round).saturating_mul(rounds),
        };
        let held = per_lane.saturating_mul(lanes);
        let wall = if parallel { per_lane } else { held };
        let fleet_hours = held.as_secs_f64() / 3600.0;
        CampaignEstimate {
            kind: campaign.kind,
            zones: campaign.zones.clone(),
            rounds_per_zone: rounds,
            total_rounds: campaign.total_rounds(),
            round_ms: millis(round),
            launch_ms: millis(launch),
            interval_ms: campaign.interval.map(millis),
            lanes_in_parallel: parallel,
            wall_ms: millis(wall),
            fleet_hours,
            instances: price.map(|p| p.instances),
            instance_hours: price.map(|p| fleet_hours * p.instances as f64),
            hourly_usd: price.map(|p| p.hourly_usd),
            usd: price.map(|p| fleet_hours * p.hourly_usd),
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The campaign's spending limit while it runs: a fleet's price and the cap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CampaignBudget {
    /// USD per hour a round's fleet costs.
    pub usd_per_hour: f64,
    /// The cap on the whole campaign (the spec's `max_cost_usd`).
    pub max_usd: f64,
}

impl CampaignBudget {
    /// `Ok` when the rounds recorded (`spent`), the rounds in flight and the next
    /// one (each held for `next`) stay within the cap; else why not.
    pub fn allows_next(
        &self,
        spent: Duration,
        in_flight: usize,
        next: Duration,
    ) -> Result<(), String> {
        let usd = |d: Duration| self.usd_per_hour * d.as_secs_f64() / 3600.0;
        let coming = next.saturating_mul(u32::try_from(in_flight + 1).unwrap_or(u32::MAX));
        let projected = usd(spent) + usd(coming);
        if projected <= self.max_usd {
            return Ok(());
        }
        Err(format!(
            "max_cost_usd = {:.2} would be passed: the rounds so far held their fleets for \
             {:.2} h (${:.2}), and the next round{} would make ${projected:.2}",
            self.max_usd,
            spent.as_secs_f64() / 3600.0,
            usd(spent),
            if in_flight > 0 {
                format!(" with the {in_flight} in flight")
            } else {
                String::new()
            },
        ))
    }
}

/// How long the recorded `rounds` held fleets, all lanes together. A spatial round
/// held its own from its start to its end; a temporal lane held one fleet per
/// generation from its first round's start to its last one's end (the waits
/// between rounds included). Records whose times cannot be read count nothing.
pub(super) fn held(kind: CampaignKind, rounds: &[&RoundRecord]) -> Duration {
    let span = |a: &str, b: &str| match (parse_timestamp(a), parse_timestamp(b)) {
        (Some(a), Some(b)) => b.duration_since(a).unwrap_or_default(),
        _ => Duration::ZERO,
    };
    match kind {
        CampaignKind::Spatial => rounds
            .iter()
            .map(|r| span(&r.started_at, &r.finished_at))
            .sum(),
        CampaignKind::Temporal => {
            let mut fleets: std::collections::BTreeMap<(&str, u32), (SystemTime, SystemTime)> =
                Default::default();
            for r in rounds {
                let (Some(a), Some(b)) = (
                    parse_timestamp(&r.started_at),
                    parse_timestamp(&r.finished_at),
                ) else {
                    continue;
                };
                let e = fleets.entry((&r.lane, r.generation)).or_insert((a, b));
                e.0 = e.0.min(a);
                e.1 = e.1.max(b);
            }
            fleets
                .values()
                .map(|(a, b)| b.duration_since(*a).unwrap_or_default())
                .sum()
        }
    }
}

/// How long the next round will hold a fleet, for the cap: spatial, its launch and
/// plan estimate (`round_with_launch`) or the longest recorded round if longer;
/// temporal, one interval more of the lane's fleet.
pub(super) fn next_held(
    campaign: &Campaign,
    round_with_launch: Duration,
    rounds: &[&RoundRecord],
) -> Duration {
    match (campaign.kind, campaign.interval) {
        (CampaignKind::Temporal, Some(every)) => every,
        _ => rounds
            .iter()
            .map(|r| held(CampaignKind::Spatial, &[r]))
            .fold(round_with_launch, Duration::max),
    }
}
