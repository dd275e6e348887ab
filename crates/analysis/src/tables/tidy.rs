//! The long ("tidy") form of a run: one row per run × role × group × level × metric,
//! with numeric columns only beside the keys, for tools that want data rather than a
//! printed table (pandas, R, a spreadsheet pivot).

use nnb_format::stats::{degradation_ci95, degradation_pct, spread_known, Summary};
use nnb_format::{Metric, Role};

use crate::read::Run;
use crate::table::{Cell, Table};

use super::{by_group, measured, AnalysisError};

/// Every metric with a value, per role, group and level of `run`: n, mean, sample
/// standard deviation, the 95% interval of the mean, and the degradation against the
/// group's lowest level with its Welch interval (in the metric's direction).
pub fn tidy(run: &Run) -> Result<Table, AnalysisError> {
    let mut rows = Vec::new();
    for role in [Role::Test, Role::Neighbor] {
        let records = measured(run, role)?;
        for (group, mut levels) in by_group(&records) {
            levels.sort_by(|a, b| a.level.total_cmp(&b.level));
            for metric in Metric::ALL {
                let stats: Vec<(&super::Level<'_>, Summary)> = levels
                    .iter()
                    .filter_map(|l| {
                        let v: Vec<f64> = l
                            .rows
                            .iter()
                            .filter_map(|r| r.metrics.get(metric))
                            .collect();
                        Some((l, Summary::of(&v)?))
                    })
                    .collect();
                // A printed value's direction is declared per job and recorded in
                // its samples; every other metric's is the metric's own.
                let higher = levels
                    .iter()
                    .flat_map(|l| l.rows.iter())
                    .find(|r| r.metric == Some(metric))
                    .and_then(|r| r.higher_is_better)
                    .unwrap_or_else(|| metric.direction().higher_is_better());
                let base = stats.first().filter(|(l, _)| l.level == levels[0].level);
                for (l, s) in &stats {
                    // A single repetition's spread is unknown: empty, not 0.
                    let spread = |v: f64| {
                        if spread_known(s.n) {
                            Cell::num(v, 6)
                        } else {
                            Cell::Empty
                        }
                    };
                    let (d, ci) = match base {
                        Some((bl, b)) if b.mean != 0.0 => (
                            Some(degradation_pct(b.mean, s.mean, higher)),
                            // none for the reference against itself
                            (bl.level != l.level)
                                .then(|| degradation_ci95(b, s, higher))
                                .flatten(),
                        ),
                        _ => (None, None),
                    };
                    rows.push(vec![
                        Cell::text(&run.run_id),
                        Cell::text(role.name()),
                        Cell::text(group.name()),
                        Cell::num(l.level, 0),
                        Cell::text(&l.label),
                        Cell::text(metric.name()),
                        Cell::Int(s.n as i64),
                        Cell::num(s.mean, 6),
                        spread(s.stddev),
                        spread(s.ci95_low),
                        spread(s.ci95_high),
                        Cell::opt(d, 4),
                        Cell::opt(ci.map(|c| c.0), 4),
                        Cell::opt(ci.map(|c| c.1), 4),
                    ]);
                }
            }
        }
    }
    Ok(Table {
        name: "tidy".to_string(),
        title: "Every metric per role, group and level (long form)".to_string(),
        columns: [
            "run",
            "role",
            "group",
            "level",
            "level_label",
            "metric",
            "n",
            "mean",
            "sd",
            "ci95_low",
            "ci95_high",
            "degradation_pct",
            "degradation_ci95_low",
            "degradation_ci95_high",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes: vec![
            "degradation against the group's lowest level in the metric's direction \
             (positive = worse), with Welch's 95% interval; empty when that level has no value"
                .to_string(),
        ],
    })
}
