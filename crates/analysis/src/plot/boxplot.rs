//! Boxplots per level (per-node throughput of many nodes at each neighbor count):
//! median, quartiles, whiskers at 1.5 IQR and outliers; the individual values when a
//! level has fewer than five; an optional horizontal reference line (a prediction),
//! named with its value in the legend.

use nnb_format::stats::quantile_of_sorted as quantile;
use nnb_units::DisplayUnit;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::axis::Axis;
use super::frame::{draw_error, render, Body, Chart};
use super::style::{color, REFERENCE, WIDTH};
use super::{check_finite, min_max, PlotError};

/// Levels with fewer values than this are drawn as points, not boxes.
const MIN_BOX_VALUES: usize = 5;
/// Half the width of a box, in slots (one slot per level).
const HALF_BOX: f64 = 0.3;

/// A boxplot chart: one box (or a few points) per group, in the given order.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxChart {
    /// Chart title.
    pub title: String,
    /// Name of the grouping (e.g. `neighbors`).
    pub x_label: String,
    /// Name of the y quantity.
    pub y_label: String,
    /// Unit of the values.
    pub y_unit: DisplayUnit,
    /// (group label, values); at least one group, none empty.
    pub groups: Vec<(String, Vec<f64>)>,
    /// A horizontal dashed line (label, value), e.g. the predicted per-node bandwidth.
    pub reference: Option<(String, f64)>,
    /// Start the y axis at zero (throughputs); false fits it to the data.
    pub y_from_zero: bool,
}

/// Five-number summary of one group (Tukey's boxplot).
struct BoxStats {
    q1: f64,
    median: f64,
    q3: f64,
    /// Lowest value within `q1 - 1.5 IQR`.
    whisker_lo: f64,
    /// Highest value within `q3 + 1.5 IQR`.
    whisker_hi: f64,
    /// Values beyond the whiskers.
    outliers: Vec<f64>,
}

impl BoxStats {
    /// Summary of non-empty, sorted values.
    fn of(sorted: &[f64]) -> BoxStats {
        let (q1, median, q3) = (
            quantile(sorted, 0.25),
            quantile(sorted, 0.5),
            quantile(sorted, 0.75),
        );
        let fence = 1.5 * (q3 - q1);
        let inside = |v: &&f64| **v >= q1 - fence && **v <= q3 + fence;
        BoxStats {
            q1,
            median,
            q3,
            whisker_lo: sorted.iter().find(inside).copied().unwrap_or(q1),
            whisker_hi: sorted.iter().rev().find(inside).copied().unwrap_or(q3),
            outliers: sorted.iter().filter(|v| !inside(v)).copied().collect(),
        }
    }
}

/// Draws a boxplot chart as SVG text.
///
/// Errors: no groups ([`PlotError::Empty`]), an empty group, or a NaN or infinite
/// value (the reference included).
pub fn box_chart(c: &BoxChart) -> Result<String, PlotError> {
    if c.groups.is_empty() {
        return Err(PlotError::Empty {
            chart: c.title.clone(),
        });
    }
    let mut sorted_groups = Vec::with_capacity(c.groups.len());
    for (name, values) in &c.groups {
        if values.is_empty() {
            return Err(PlotError::EmptySeries {
                chart: c.title.clone(),
                series: name.clone(),
            });
        }
        check_finite(&c.title, name, values, f64::is_finite)?;
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        sorted_groups.push(sorted);
    }
    if let Some((name, value)) = &c.reference {
        check_finite(&c.title, name, &[*value], f64::is_finite)?;
    }
    let all = sorted_groups.iter().flatten().copied();
    let reference = c.reference.iter().map(|r| r.1);
    let (y_min, y_max) = min_max(all.chain(reference)).ok_or_else(|| PlotError::Empty {
        chart: c.title.clone(),
    })?;
    let names: Vec<String> = c.groups.iter().map(|g| g.0.clone()).collect();
    let x = Axis::categories(&c.x_label, &names, WIDTH as f64 * 0.8);
    let y = Axis::linear(&c.y_label, c.y_unit, y_min, y_max, c.y_from_zero, true);
    render(
        &c.title,
        &x,
        &y,
        &Sorted {
            chart: c,
            groups: sorted_groups,
        },
    )
}

/// A box chart with each group's values sorted.
struct Sorted<'c> {
    chart: &'c BoxChart,
    groups: Vec<Vec<f64>>,
}

impl Body for Sorted<'_> {
    fn draw<'a, 'b: 'a>(
        &self,
        chart: &mut Chart<'a, 'b>,
        x: &Axis,
        _y: &Axis,
    ) -> Result<Vec<(f64, f64)>, PlotError> {
        let c = self.chart;
        let err = draw_error(&c.title);
        let mut data = Vec::new();
        if let Some((label, value)) = &c.reference {
            draw_reference(chart, &c.title, x, label, *value, c.y_unit)?;
            data.extend([(x.lo, *value), (x.hi, *value)]);
        }
        let (small, big): (Vec<_>, Vec<_>) = self
            .groups
            .iter()
            .enumerate()
            .partition(|(_, values)| values.len() < MIN_BOX_VALUES);
        let stats: Vec<(f64, BoxStats)> = big
            .iter()
            .map(|(i, v)| (*i as f64, BoxStats::of(v)))
            .collect();
        draw_boxes(chart, &c.title, &stats)?;
        for (slot, s) in &stats {
            data.extend([(*slot, s.whisker_hi), (*slot, s.q3)]);
            data.extend(s.outliers.iter().map(|v| (*slot, *v)));
        }
        let points: Vec<(f64, f64)> = small
            .iter()
            .flat_map(|(i, values)| values.iter().map(move |v| (*i as f64, *v)))
            .collect();
        if !points.is_empty() {
            let fill = color(0);
            chart
                .draw_series(points.iter().map(|p| Circle::new(*p, 4, fill.filled())))
                .map_err(&err)?
                .label(format!("value (levels with < {MIN_BOX_VALUES} values)"))
                .legend(move |(lx, ly)| Circle::new((lx + 11, ly), 4, fill.filled()));
        }
        data.extend(points);
        Ok(data)
    }
}

/// Boxes, medians, whiskers and outliers, with legend entries for box and outlier.
fn draw_boxes<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    title: &str,
    stats: &[(f64, BoxStats)],
) -> Result<(), PlotError> {
    if stats.is_empty() {
        return Ok(());
    }
    let err = draw_error(title);
    let c = color(0);
    chart
        .draw_series(stats.iter().map(|(s, b)| {
            Rectangle::new(
                [(s - HALF_BOX, b.q3), (s + HALF_BOX, b.q1)],
                c.mix(0.25).filled(),
            )
        }))
        .map_err(&err)?
        .label("median, quartiles, whiskers at 1.5 IQR")
        .legend(move |(lx, ly)| {
            EmptyElement::at((lx, ly))
                + Rectangle::new([(0, -6), (22, 6)], c.mix(0.25).filled())
                + Rectangle::new([(0, -6), (22, 6)], c.stroke_width(1))
                + PathElement::new(vec![(0, 0), (22, 0)], c.stroke_width(3))
        });
    let lines = stats.iter().flat_map(|(s, b)| {
        let cap = HALF_BOX / 2.0;
        [
            PathElement::new(
                vec![
                    (s - HALF_BOX, b.q3),
                    (s + HALF_BOX, b.q3),
                    (s + HALF_BOX, b.q1),
                    (s - HALF_BOX, b.q1),
                    (s - HALF_BOX, b.q3),
                ],
                c.stroke_width(1),
            ),
            PathElement::new(
                vec![(s - HALF_BOX, b.median), (s + HALF_BOX, b.median)],
                c.stroke_width(3),
            ),
            PathElement::new(vec![(*s, b.q3), (*s, b.whisker_hi)], c.stroke_width(1)),
            PathElement::new(vec![(*s, b.q1), (*s, b.whisker_lo)], c.stroke_width(1)),
            PathElement::new(
                vec![(s - cap, b.whisker_hi), (s + cap, b.whisker_hi)],
                c.stroke_width(1),
            ),
            PathElement::new(
                vec![(s - cap, b.whisker_lo), (s + cap, b.whisker_lo)],
                c.stroke_width(1),
            ),
        ]
    });
    chart.draw_series(lines).map_err(&err)?;
    let outliers: Vec<(f64, f64)> = stats
        .iter()
        .flat_map(|(s, b)| b.outliers.iter().map(move |v| (*s, *v)))
        .collect();
    if !outliers.is_empty() {
        chart
            .draw_series(
                outliers
                    .iter()
                    .map(|p| Circle::new(*p, 3, c.stroke_width(1))),
            )
            .map_err(&err)?
            .label("outlier")
            .legend(move |(lx, ly)| Circle::new((lx + 11, ly), 3, c.stroke_width(1)));
    }
    Ok(())
}

/// The horizontal dashed reference line across the plot, named with its value in the
/// legend (a label at the line itself would cover boxes).
fn draw_reference<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    title: &str,
    x: &Axis,
    label: &str,
    value: f64,
    unit: DisplayUnit,
) -> Result<(), PlotError> {
    chart
        .draw_series([DashedPathElement::new(
            vec![(x.lo, value), (x.hi, value)],
            9,
            5,
            REFERENCE.stroke_width(2),
        )])
        .map_err(draw_error(title))?
        .label(format!("{label}: {}", unit.format(value)))
        .legend(|(lx, ly)| {
            DashedPathElement::new(
                vec![(lx, ly), (lx + 22, ly)],
                6,
                4,
                REFERENCE.stroke_width(2),
            )
        });
    Ok(())
}
