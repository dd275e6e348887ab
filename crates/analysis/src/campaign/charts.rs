//! The campaign's figures: the empirical CDF of each measure across rounds (one line
//! per lane, as Wang & Ng overlay small and medium instances in Figs 2, 3, 4, 8 and
//! 10), and for a temporal campaign each measure over time (one line per lane).

use std::collections::HashSet;

use nnb_format::campaign::CampaignKind;
use nnb_units::DisplayUnit;

use super::tables::ecdf;
use super::{Campaign, Measure};
use crate::plot::{LineChart, Series};

/// The most figures of each kind (CDFs, time series) a campaign draws; the measures
/// beyond are left out with a note (their values are in the tables).
pub const MAX_FIGURES: usize = 120;

/// Above this ratio of the largest to the smallest value a CDF's x axis is
/// logarithmic even where the seed's is not.
const LOG_RATIO: f64 = 100.0;

/// A figure: its file stem and chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// File stem (`cdf_rtt_mean`).
    pub stem: String,
    /// The chart.
    pub chart: LineChart,
}

/// The staircase an empirical CDF is drawn as: from `(x1, y0)` up to each step
/// `(x, y)` and across to the next value, `y0` the CDF just left of the first step
/// drawn (0 unless steps left of the axis were left out).
pub fn cdf_steps(steps: &[(f64, f64)], y0: f64) -> Vec<(f64, f64)> {
    let mut points = Vec::with_capacity(steps.len() * 2);
    let mut below = y0;
    for &(x, y) in steps {
        points.push((x, below));
        points.push((x, y));
        below = y;
    }
    points
}

/// The CDF chart of measure `m` with one line per `(name, values)`: log x where the
/// seed draws it so, or where the values span more than [`LOG_RATIO`] and are all
/// positive. On a log axis, values at or below 0 cannot be drawn: each line starts at
/// their share, and the note says how many. `None` when no line has a value to draw.
pub fn cdf_chart(
    title: &str,
    m: &Measure,
    lines: &[(String, Vec<f64>)],
) -> Option<(LineChart, Option<String>)> {
    let all: Vec<f64> = lines
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .filter(|v| v.is_finite())
        .collect();
    let positive = all.iter().copied().filter(|v| *v > 0.0);
    let min_pos = positive.clone().reduce(f64::min);
    let max = all.iter().copied().reduce(f64::max)?;
    let min = all.iter().copied().reduce(f64::min)?;
    let wide = min > 0.0 && max / min > LOG_RATIO;
    let log_x = min_pos.is_some() && (m.log_x || wide);
    let mut hidden = 0;
    let series: Vec<Series> = lines
        .iter()
        .filter_map(|(name, values)| {
            let steps = ecdf(values);
            let (left, drawn): (Vec<_>, Vec<_>) =
                steps.into_iter().partition(|(x, _)| log_x && *x <= 0.0);
            let y0 = left.last().map_or(0.0, |s| s.1);
            hidden += values.iter().filter(|v| log_x && **v <= 0.0).count();
            (!drawn.is_empty()).then(|| Series {
                name: format!("{name} (n = {})", values.len()),
                points: cdf_steps(&drawn, y0),
                band: None,
            })
        })
        .collect();
    if series.is_empty() {
        return None;
    }
    let note = (hidden > 0).then(|| {
        format!(
            "{title}: {hidden} value(s) at or below 0 lie left of the logarithmic axis; \
             the lines start at their share"
        )
    });
    Some((
        LineChart {
            title: title.to_string(),
            x_label: m.name.clone(),
            x_unit: m.unit,
            y_label: "fraction of rounds".into(),
            y_unit: DisplayUnit::NONE,
            series,
            markers: Vec::new(),
            log_x,
            y_from_zero: true,
        },
        note,
    ))
}

/// Measure `m` over time: one line per `(name, [(start s, value)])`, x in hours
/// since `t0` (seconds since the epoch). `None` when no line has a point.
pub fn series_chart(
    title: &str,
    m: &Measure,
    t0: f64,
    lines: &[(String, Vec<(f64, f64)>)],
) -> Option<LineChart> {
    let series: Vec<Series> = lines
        .iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(name, points)| {
            let mut points: Vec<(f64, f64)> = points
                .iter()
                .map(|(t, v)| ((t - t0) / 3600.0, *v))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                name: name.clone(),
                points,
                band: None,
            }
        })
        .collect();
    (!series.is_empty()).then(|| LineChart {
        title: title.to_string(),
        x_label: "time since the first round (h)".into(),
        x_unit: DisplayUnit::NONE,
        y_label: m.name.clone(),
        y_unit: m.unit,
        series,
        markers: Vec::new(),
        log_x: false,
        y_from_zero: false,
    })
}

/// A file stem for `prefix` and `name`: lower case, every run of other characters
/// than `[a-z0-9]` one `_`, and `_N` when taken.
fn stem(prefix: &str, name: &str, taken: &mut HashSet<String>) -> String {
    let mut s = String::from(prefix);
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            s.push(c);
        } else if !s.ends_with('_') {
            s.push('_');
        }
    }
    let base = s.trim_end_matches('_').to_string();
    let mut s = base.clone();
    let mut n = 2;
    while !taken.insert(s.clone()) {
        s = format!("{base}_{n}");
        n += 1;
    }
    s
}

/// Every figure of the campaign, and notes on what they leave out.
pub(super) fn all(c: &Campaign) -> (Vec<Figure>, Vec<String>) {
    let mut figures = Vec::new();
    let mut notes = Vec::new();
    let mut taken = HashSet::new();
    let several = c.lanes.len() > 1;
    if c.measures.len() > MAX_FIGURES {
        notes.push(format!(
            "{} measures: figures of the first {MAX_FIGURES} only (every value is in the tables)",
            c.measures.len()
        ));
    }
    for (i, m) in c.measures.iter().enumerate().take(MAX_FIGURES) {
        let values = c.values(i);
        let mut lines: Vec<(String, Vec<f64>)> = c
            .lanes
            .iter()
            .map(|lane| {
                let v = values.iter().filter(|(l, _)| l == lane).map(|(_, v)| *v);
                (lane.clone(), v.collect::<Vec<f64>>())
            })
            .filter(|(_, v)| !v.is_empty())
            .collect();
        if several && lines.len() > 1 {
            lines.push(("all".into(), values.iter().map(|(_, v)| *v).collect()));
        }
        let title = format!("CDF across rounds: {}", m.title());
        if let Some((chart, note)) = cdf_chart(&title, m, &lines) {
            figures.push(Figure {
                stem: stem("cdf_", &m.name, &mut taken),
                chart,
            });
            notes.extend(note);
        }
        if c.kind != CampaignKind::Temporal {
            continue;
        }
        let timed: Vec<(String, Vec<(f64, f64)>)> = c
            .lanes
            .iter()
            .map(|lane| {
                let points = c
                    .rounds
                    .iter()
                    .filter(|r| &r.lane == lane)
                    .filter_map(|r| Some((r.start_s?, r.value(i)?)))
                    .collect();
                (lane.clone(), points)
            })
            .collect();
        let t0 = c
            .rounds
            .iter()
            .filter_map(|r| r.start_s)
            .reduce(f64::min)
            .unwrap_or(0.0);
        let title = format!("Over time: {}", m.title());
        if let Some(chart) = series_chart(&title, m, t0, &timed) {
            figures.push(Figure {
                stem: stem("series_", &m.name, &mut taken),
                chart,
            });
        }
    }
    (figures, notes)
}
