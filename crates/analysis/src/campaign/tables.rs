//! The campaign's tables: per round, per pair, the spread across rounds, and the long
//! form; and the statistics they are made of (the empirical CDF, the spread's
//! percentiles).

use nnb_format::campaign::CampaignKind;
use nnb_format::stats::{quantile_of_sorted, Summary};

use super::{Campaign, Measure, Round};
use crate::table::{Cell, Table};

/// The empirical CDF of `values` (non-finite ones left out): one step per distinct
/// value `x`, in increasing order, to `y = i / n`, `i` the number of values at most
/// `x` and `n` the number of values. Values [3, 1, 2, 2] give (1, 0.25), (2, 0.75),
/// (3, 1.0).
pub fn ecdf(values: &[f64]) -> Vec<(f64, f64)> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    let mut steps: Vec<(f64, f64)> = Vec::new();
    for (i, v) in sorted.iter().enumerate() {
        let y = (i + 1) as f64 / n;
        match steps.last_mut() {
            Some(last) if last.0 == *v => last.1 = y,
            _ => steps.push((*v, y)),
        }
    }
    steps
}

/// The spread of a measure across rounds. The percentiles are
/// [`quantile_of_sorted`]'s: linear interpolation between the closest ranks
/// (Hyndman and Fan's type 7, numpy's default), the p-th percentile of n sorted
/// values at position `p/100 (n - 1)` from 0; of [1, 2, 3, 4]: p5 = 1.15, p25 = 1.75,
/// p50 = 2.5, p75 = 3.25, p95 = 3.85. The standard deviation is the sample's (n - 1),
/// as [`Summary`] gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Values.
    pub n: usize,
    /// Smallest.
    pub min: f64,
    /// 5th percentile.
    pub p5: f64,
    /// 25th percentile.
    pub p25: f64,
    /// Median.
    pub p50: f64,
    /// 75th percentile.
    pub p75: f64,
    /// 95th percentile.
    pub p95: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation (0 for one value).
    pub sd: f64,
}

impl Spread {
    /// The spread of `values`; `None` when there is none or one is not finite.
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let s = Summary::of(values)?;
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let q = |p: f64| quantile_of_sorted(&sorted, p);
        Some(Spread {
            n: s.n,
            min: s.min,
            p5: q(0.05),
            p25: q(0.25),
            p50: s.median,
            p75: q(0.75),
            p95: q(0.95),
            max: s.max,
            mean: s.mean,
            sd: s.stddev,
        })
    }

    /// p95 / p5: how far apart the good and the bad rounds are; `None` unless p5 > 0.
    pub fn ratio(&self) -> Option<f64> {
        (self.p5 > 0.0).then(|| self.p95 / self.p5)
    }
}

/// A value of `m` as its table column shows it.
fn cell(m: &Measure, v: Option<f64>) -> Cell {
    Cell::opt(v.map(|v| m.table.value(v)), m.decimals)
}

/// An optional text.
fn text(v: Option<&str>) -> Cell {
    v.map_or(Cell::Empty, Cell::text)
}

/// The measures the per-round and per-pair tables show, with their index.
fn keys(c: &Campaign) -> impl Iterator<Item = (usize, &Measure)> {
    c.measures.iter().enumerate().filter(|(_, m)| m.key)
}

/// How a round ended, as the journal spells it.
fn status(r: &Round) -> Cell {
    r.status.map_or(Cell::Empty, |s| {
        serde_json::to_value(s)
            .ok()
            .and_then(|v| v.as_str().map(Cell::text))
            .unwrap_or(Cell::Empty)
    })
}

/// The per-round table's columns from `status` to `hops`: each left out where no
/// round has a value (a local campaign's zone, host ...).
const PLACEMENT: std::ops::Range<usize> = 5..13;

/// One row per recorded round: where it ran (as far as known) and its key values.
pub(super) fn per_round(c: &Campaign) -> Table {
    let mut columns: Vec<String> = [
        "round",
        "lane",
        "lane round",
        "generation",
        "run",
        "status",
        "started",
        "instance type",
        "zone",
        "host",
        "CPU model",
        "private IPs",
        "hops",
    ]
    .map(String::from)
    .to_vec();
    columns.extend(keys(c).map(|(_, m)| m.title()));
    let rows: Vec<Vec<Cell>> = c
        .rounds
        .iter()
        .map(|r| {
            let p = &r.placement;
            let mut row = vec![
                Cell::Int(i64::from(r.round)),
                Cell::text(&r.lane),
                Cell::Int(i64::from(r.lane_round)),
                Cell::Int(i64::from(r.generation)),
                Cell::text(&r.run_id),
                status(r),
                text(r.started_at.as_deref()),
                text(p.instance_type.as_deref()),
                text(p.zone.as_deref()),
                text(p.host_id.as_deref()),
                text(p.cpu_model.as_deref()),
                if p.private_ips.is_empty() {
                    Cell::Empty
                } else {
                    Cell::text(p.private_ips.join(" ↔ "))
                },
                Cell::opt(p.hops, 1),
            ];
            row.extend(keys(c).map(|(i, m)| cell(m, r.value(i))));
            row
        })
        .collect();
    let empty: Vec<usize> = PLACEMENT
        .filter(|c| rows.iter().all(|r: &Vec<Cell>| r[*c] == Cell::Empty))
        .collect();
    let keep = |i: &usize| !empty.contains(i);
    let columns: Vec<String> = columns
        .into_iter()
        .enumerate()
        .filter(|(i, _)| keep(i))
        .map(|(_, c)| c)
        .collect();
    let rows: Vec<Vec<Cell>> = rows
        .into_iter()
        .map(|r| {
            r.into_iter()
                .enumerate()
                .filter(|(i, _)| keep(i))
                .map(|(_, c)| c)
                .collect()
        })
        .collect();
    let mut notes = vec![format!(
        "{} {} campaign `{}`: {} recorded round(s) in {} lane(s); a value is the mean over \
         the round's measured repetitions",
        if c.adhoc { "ad-hoc" } else { "the" },
        c.kind.name(),
        c.id,
        c.rounds.len(),
        c.lanes.len()
    )];
    notes.extend(c.notes.iter().cloned());
    Table {
        name: "campaign_rounds".into(),
        title: format!("Per round: campaign {} ({})", c.id, c.kind.name()),
        columns,
        rows,
        notes,
    }
}

/// One row per pair (a lane's set of instances, its generation) and key measure:
/// the pair's values over its rounds and their repetitions.
pub(super) fn per_pair(c: &Campaign) -> Table {
    let mut pairs: Vec<(&str, u32)> = Vec::new();
    for r in &c.rounds {
        if !pairs.contains(&(r.lane.as_str(), r.generation)) {
            pairs.push((r.lane.as_str(), r.generation));
        }
    }
    let mut rows = Vec::new();
    for (lane, generation) in pairs {
        let rounds: Vec<&Round> = c
            .rounds
            .iter()
            .filter(|r| r.lane == lane && r.generation == generation)
            .collect();
        for (i, m) in keys(c) {
            let values: Vec<f64> = rounds.iter().flat_map(|r| r.reps(i)).copied().collect();
            let Some(s) = Spread::of(&values) else {
                continue;
            };
            rows.push(vec![
                Cell::text(lane),
                Cell::Int(i64::from(generation)),
                Cell::Int(rounds.len() as i64),
                Cell::Int(rounds.first().map_or(0, |r| i64::from(r.round))),
                Cell::text(m.title()),
                Cell::Int(s.n as i64),
                cell(m, Some(s.p50)),
                cell(m, Some(s.p5)),
                cell(m, Some(s.p95)),
            ]);
        }
    }
    let unit = match c.kind {
        CampaignKind::Spatial => "one round each (a spatial campaign's pairs are fresh each round)",
        CampaignKind::Temporal => "a lane's rounds until its instances were replaced",
    };
    Table {
        name: "campaign_pairs".into(),
        title: format!("Per pair: campaign {}", c.id),
        columns: [
            "lane",
            "generation",
            "rounds",
            "first round",
            "measure",
            "n",
            "median",
            "p5",
            "p95",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes: vec![format!(
            "a pair = a lane's set of instances (its generation): {unit}; n = the measured \
             repetitions of its rounds; percentiles interpolated between the closest ranks"
        )],
    }
}

/// Per measure (and per lane, when there are several): the spread of the rounds'
/// values.
pub(super) fn spread(c: &Campaign) -> Table {
    let mut lanes: Vec<Option<&str>> = vec![None];
    if c.lanes.len() > 1 {
        lanes.extend(c.lanes.iter().map(|l| Some(l.as_str())));
    }
    let mut rows = Vec::new();
    for (i, m) in c.measures.iter().enumerate() {
        let all = c.values(i);
        for lane in &lanes {
            let values: Vec<f64> = all
                .iter()
                .filter(|(l, _)| lane.map_or(true, |want| *l == want))
                .map(|(_, v)| *v)
                .collect();
            let Some(s) = Spread::of(&values) else {
                continue;
            };
            let mut row = vec![
                Cell::text(m.title()),
                Cell::text(lane.unwrap_or("all")),
                Cell::Int(s.n as i64),
            ];
            row.extend(
                [s.min, s.p5, s.p25, s.p50, s.p75, s.p95, s.max, s.mean, s.sd]
                    .map(|v| cell(m, Some(v))),
            );
            row.push(Cell::opt(s.ratio(), 2));
            rows.push(row);
        }
    }
    Table {
        name: "campaign_spread".into(),
        title: format!("Spread across rounds: campaign {}", c.id),
        columns: [
            "measure", "lane", "n", "min", "p5", "p25", "p50", "p75", "p95", "max", "mean", "sd",
            "p95/p5",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes: vec![
            "one value per round (the mean over its repetitions); percentiles interpolated \
             between the closest ranks (numpy's default: the p-th at position p/100 x (n - 1) \
             of the sorted values); sd of the sample (n - 1); p95/p5 only where p5 > 0"
                .into(),
        ],
    }
}

/// The long form: one row per round and measure, the value in the measure's table
/// unit.
pub(super) fn tidy(c: &Campaign) -> Table {
    let mut rows = Vec::new();
    for r in &c.rounds {
        for (i, m) in c.measures.iter().enumerate() {
            let Some(v) = r.value(i) else {
                continue;
            };
            rows.push(vec![
                Cell::Int(i64::from(r.round)),
                Cell::text(&r.lane),
                Cell::Int(i64::from(r.generation)),
                Cell::text(&r.run_id),
                text(r.started_at.as_deref()),
                Cell::text(&m.name),
                Cell::text(m.table.symbol()),
                Cell::Int(r.reps(i).len() as i64),
                cell(m, Some(v)),
            ]);
        }
    }
    Table {
        name: "campaign_tidy".into(),
        title: format!("Long form: campaign {}", c.id),
        columns: [
            "round",
            "lane",
            "generation",
            "run",
            "started",
            "measure",
            "unit",
            "reps",
            "value",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ecdf_steps_at_each_distinct_value() {
        assert_eq!(
            ecdf(&[3.0, 1.0, 2.0, 2.0]),
            vec![(1.0, 0.25), (2.0, 0.75), (3.0, 1.0)]
        );
        assert_eq!(ecdf(&[f64::NAN, 5.0]), vec![(5.0, 1.0)]);
        assert!(ecdf(&[]).is_empty());
    }

    #[test]
    fn the_spread_percentiles_are_worked_by_hand() {
        // Sorted [1, 2, 3, 4]: p5 at 0.15 -> 1.15, p25 at 0.75 -> 1.75, p50 = 2.5,
        // p75 at 2.25 -> 3.25, p95 at 2.85 -> 3.85; mean 2.5, sd sqrt(5/3).
        let s = Spread::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert_eq!((s.n, s.min, s.max), (4, 1.0, 4.0));
        for (got, want) in [
            (s.p5, 1.15),
            (s.p25, 1.75),
            (s.p50, 2.5),
            (s.p75, 3.25),
            (s.p95, 3.85),
            (s.mean, 2.5),
            (s.sd, (5.0f64 / 3.0).sqrt()),
            (s.ratio().unwrap(), 3.85 / 1.15),
        ] {
            assert!(close(got, want), "{got} != {want}: {s:?}");
        }
        let zero = Spread::of(&[0.0, 0.0, 1.0]).unwrap();
        assert_eq!(zero.ratio(), None);
        assert_eq!(Spread::of(&[]), None);
    }
}
