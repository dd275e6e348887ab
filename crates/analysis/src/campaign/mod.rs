//! Distributions across the rounds of a campaign (issue 26): a campaign directory
//! (`campaign.json`, `rounds.jsonl` and one run directory per round, see
//! [`nnb_format::campaign`]), or many ordinary runs given together as the rounds of
//! one ad-hoc spatial campaign.
//!
//! Each round gives one value per measure: for a round of Wang & Ng's pair suite the
//! seed's numbers of its pair (CPU share, longest gap, RTT statistics, TCP and UDP
//! throughput, loss), for any other scenario every metric of the test tenant per group
//! and level; in both the mean over the round's measured repetitions. From them:
//! the per-round table, the per-pair table (a pair = a lane's set of instances, its
//! `generation`: one round in a spatial campaign, many in a temporal one), the spread
//! of each measure across the rounds, an empirical CDF per measure (one line per
//! lane, Wang & Ng's Figs 2, 3, 4, 8, 10) and, for a temporal campaign, each measure
//! over time.
//!
//! Only rounds recorded in `rounds.jsonl` count: a run directory without a record is
//! a round whose controller died before it ended, and is left out with a note. A
//! piece that cannot be read (a line of the journal, a round's run directory) is left
//! out with a note naming it; the rest is still analysed.

mod charts;
mod read;
mod tables;
mod values;

use nnb_format::campaign::{CampaignKind, RoundStatus};
use nnb_units::{DisplayUnit, Scaled};

pub use charts::{cdf_chart, cdf_steps, series_chart, Figure, MAX_FIGURES};
pub use read::{across, is_campaign, read_campaign, CampaignError, MAX_ROUNDS};
pub use tables::{ecdf, Spread};

/// What a campaign's rounds measured, read.
#[derive(Debug, Clone)]
pub struct Campaign {
    /// The campaign id (`adhoc` for runs given together).
    pub id: String,
    /// Spatial or temporal.
    pub kind: CampaignKind,
    /// Whether it is runs given together rather than a campaign directory.
    pub adhoc: bool,
    /// The lanes, in order.
    pub lanes: Vec<String>,
    /// The measures the rounds have values of, in order of first appearance.
    pub measures: Vec<Measure>,
    /// The recorded rounds, in round order.
    pub rounds: Vec<Round>,
    /// What was left out and why (unfinished rounds, unreadable pieces).
    pub notes: Vec<String>,
}

/// One quantity a round has a value of: a seed's number of the pair suite, or a
/// metric of the test tenant at one group and level.
#[derive(Debug, Clone, PartialEq)]
pub struct Measure {
    /// Its name in tables and file names, without the unit.
    pub name: String,
    /// The unit of its values.
    pub unit: DisplayUnit,
    /// The unit a table column shows it in.
    pub table: Scaled,
    /// Digits after the point in a table column.
    pub decimals: usize,
    /// Whether the seed draws its CDF on a logarithmic x axis (RTT, loss).
    pub log_x: bool,
    /// Whether the per-round table shows it (the seed's numbers; a scenario's
    /// primary metric).
    pub key: bool,
}

impl Measure {
    /// The column header: the name with the table unit.
    pub fn title(&self) -> String {
        self.table.title(&self.name)
    }
}

/// Where a round's instances ran, as far as it is known (blank on the local
/// provider where the cloud says nothing).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Placement {
    /// Instance type of the test instance.
    pub instance_type: Option<String>,
    /// Availability zone of the test instance.
    pub zone: Option<String>,
    /// The physical host, where the cloud says.
    pub host_id: Option<String>,
    /// The CPU model the test instance's agent saw.
    pub cpu_model: Option<String>,
    /// Private addresses of the round's instances, test first.
    pub private_ips: Vec<String>,
    /// Hops between the pair (the RTT series' network-location check), mean over
    /// the round's repetitions.
    pub hops: Option<f64>,
}

/// One recorded round.
#[derive(Debug, Clone)]
pub struct Round {
    /// Its index in the campaign.
    pub round: u32,
    /// Its lane.
    pub lane: String,
    /// Its number within the lane.
    pub lane_round: u32,
    /// Which set of instances measured it (the pair).
    pub generation: u32,
    /// Its run id (the run directory's name).
    pub run_id: String,
    /// How it ended (`None` for a run given with `--across`).
    pub status: Option<RoundStatus>,
    /// When it started (RFC 3339), as recorded.
    pub started_at: Option<String>,
    /// The same, seconds since the Unix epoch.
    pub start_s: Option<f64>,
    /// Where it ran.
    pub placement: Placement,
    /// Per measure (an index into [`Campaign::measures`]), the value of each measured
    /// repetition.
    pub values: Vec<(usize, Vec<f64>)>,
    /// Its run as the report lists it; `None` when it could not be read.
    pub run: Option<crate::report::RunInfo>,
}

impl Round {
    /// Its value of measure `m`: the mean over its measured repetitions.
    pub fn value(&self, m: usize) -> Option<f64> {
        let reps = &self.values.iter().find(|(i, _)| *i == m)?.1;
        nnb_format::stats::Summary::of(reps).map(|s| s.mean)
    }

    /// Its repetitions' values of measure `m`.
    pub fn reps(&self, m: usize) -> &[f64] {
        self.values
            .iter()
            .find(|(i, _)| *i == m)
            .map_or(&[], |(_, v)| v.as_slice())
    }
}

impl Campaign {
    /// The values of measure `m` across the rounds, one per round that has it, in
    /// round order, with each round's lane.
    pub fn values(&self, m: usize) -> Vec<(&str, f64)> {
        self.rounds
            .iter()
            .filter_map(|r| Some((r.lane.as_str(), r.value(m)?)))
            .collect()
    }

    /// The tables: per round, per pair, the spread across rounds.
    pub fn tables(&self) -> Vec<crate::table::Table> {
        vec![
            tables::per_round(self),
            tables::per_pair(self),
            tables::spread(self),
        ]
    }

    /// The long form: one row per round and measure.
    pub fn tidy(&self) -> crate::table::Table {
        tables::tidy(self)
    }

    /// The figures: a CDF per measure, and for a temporal campaign a time series per
    /// measure; with notes on what they leave out.
    pub fn figures(&self) -> (Vec<Figure>, Vec<String>) {
        charts::all(self)
    }
}
