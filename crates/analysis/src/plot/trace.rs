//! Trace charts: long measured series over time or sequence number (a CPUTest
//! timestamp trace, an RTT series, a fine-grained throughput series, one-way delays),
//! each drawn as a line, with point marks (lost probes, lossy slots), an optional
//! horizontal reference (the link rate) and an optional logarithmic y axis.
//!
//! A trace may hold far more points than a chart can show: each line is thinned to at
//! most [`MAX_LINE_POINTS`] points by keeping the smallest and largest of each run of
//! neighbours ([`decimate`]), so spikes and gaps stay visible, and each set of marks
//! to at most [`MAX_MARKS`], evenly spread. What the chart shows is said in the
//! legend; the tables keep every value.

use nnb_units::DisplayUnit;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::Axis;
use super::frame::{draw_error, render, Body, Chart};
use super::style::{color, font, NOTE_FONT_PX, REFERENCE};
use super::{check_finite, finite_point, min_max, PlotError};

/// Most points a line of a trace chart is drawn with.
pub const MAX_LINE_POINTS: usize = 2000;
/// Most marks of one set a trace chart draws.
pub const MAX_MARKS: usize = 500;

/// One line of a [`TraceChart`].
#[derive(Debug, Clone, PartialEq)]
pub struct TraceLine {
    /// Legend label.
    pub name: String,
    /// (x, y) in data units, drawn in the given order.
    pub points: Vec<(f64, f64)>,
    /// Draw as a step function (each value held until the next point), e.g. an
    /// estimate that changes only at events.
    pub steps: bool,
}

/// A set of point marks of a [`TraceChart`]: each at (x, y), or at the top of the
/// plot where it has no y (a lost probe).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceMarks {
    /// Legend label.
    pub name: String,
    /// (x, y) in data units; y `None` puts the mark at the top edge.
    pub points: Vec<(f64, Option<f64>)>,
}

/// A chart of long series with marks: see the module documentation.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceChart {
    /// Chart title.
    pub title: String,
    /// Name of the x quantity.
    pub x_label: String,
    /// Unit of the x values.
    pub x_unit: DisplayUnit,
    /// Name of the y quantity.
    pub y_label: String,
    /// Unit of the y values.
    pub y_unit: DisplayUnit,
    /// Logarithmic y axis (every y must then be > 0).
    pub log_y: bool,
    /// The lines; at least one, none empty.
    pub lines: Vec<TraceLine>,
    /// Point marks, each set in a colour after the lines'; empty sets are left out.
    pub marks: Vec<TraceMarks>,
    /// A horizontal line at y with a label (the full link rate).
    pub reference: Option<(String, f64)>,
}

/// At most `most` of `points`, in order: the points are cut into runs of neighbours
/// and each run keeps its smallest and its largest y (first the one that comes
/// first), so the drawn line keeps every spike and gap a run holds; the first and
/// last points are always kept. `points` with at most `most` points are returned
/// whole.
pub fn decimate(points: &[(f64, f64)], most: usize) -> Vec<(f64, f64)> {
    let most = most.max(4);
    if points.len() <= most {
        return points.to_vec();
    }
    let inner = &points[1..points.len() - 1];
    let runs = (most - 2) / 2;
    let per_run = inner.len().div_ceil(runs);
    let mut out = Vec::with_capacity(most);
    out.push(points[0]);
    for run in inner.chunks(per_run) {
        let (mut lo, mut hi) = (0, 0);
        for (i, p) in run.iter().enumerate() {
            if p.1 < run[lo].1 {
                lo = i;
            }
            if p.1 > run[hi].1 {
                hi = i;
            }
        }
        let (a, b) = if lo <= hi { (lo, hi) } else { (hi, lo) };
        out.push(run[a]);
        if b != a {
            out.push(run[b]);
        }
    }
    out.push(points[points.len() - 1]);
    out
}

/// At most `most` items of `items`, evenly spread, first and last included.
fn spread<T: Clone>(items: &[T], most: usize) -> Vec<T> {
    let n = items.len();
    if n <= most {
        return items.to_vec();
    }
    let most = most.max(2);
    (0..most)
        .map(|i| items[i * (n - 1) / (most - 1)].clone())
        .collect()
}

/// The legend label of a series thinned from `all` to `shown` points.
fn shown_label(name: &str, shown: usize, all: usize) -> String {
    if shown < all {
        format!("{name} ({shown} of {all} points drawn)")
    } else {
        name.to_string()
    }
}

/// Draws a trace chart as SVG text.
///
/// Errors: no lines ([`PlotError::Empty`]), an empty line, a NaN or infinite value,
/// or y <= 0 on a logarithmic axis.
pub fn trace_chart(c: &TraceChart) -> Result<String, PlotError> {
    validate(c)?;
    let lines: Vec<TraceLine> = c
        .lines
        .iter()
        .map(|l| {
            let points = decimate(&l.points, MAX_LINE_POINTS);
            TraceLine {
                name: shown_label(&l.name, points.len(), l.points.len()),
                points,
                steps: l.steps,
            }
        })
        .collect();
    let marks: Vec<TraceMarks> = c
        .marks
        .iter()
        .filter(|m| !m.points.is_empty())
        .map(|m| {
            let points = spread(&m.points, MAX_MARKS);
            TraceMarks {
                name: shown_label(&m.name, points.len(), m.points.len()),
                points,
            }
        })
        .collect();
    let xs = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .chain(marks.iter().flat_map(|m| m.points.iter().map(|p| p.0)));
    let (x_min, x_max) = min_max(xs).ok_or_else(|| empty(c))?;
    let ys = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .chain(
            marks
                .iter()
                .flat_map(|m| m.points.iter().filter_map(|p| p.1)),
        )
        .chain(c.reference.iter().map(|r| r.1));
    let (y_min, y_max) = min_max(ys).ok_or_else(|| empty(c))?;
    let x = Axis::linear(&c.x_label, c.x_unit, x_min, x_max, false, false);
    let y = if c.log_y {
        Axis::log10(&c.y_label, c.y_unit, y_min, y_max)
    } else {
        Axis::linear(&c.y_label, c.y_unit, y_min, y_max, true, true)
    };
    let drawn = TraceChart {
        lines,
        marks,
        ..c.clone()
    };
    render(&c.title, &x, &y, &drawn)
}

/// [`PlotError::Empty`] for this chart.
fn empty(c: &TraceChart) -> PlotError {
    PlotError::Empty {
        chart: c.title.clone(),
    }
}

/// Refuses what the chart cannot show (see [`trace_chart`]).
fn validate(c: &TraceChart) -> Result<(), PlotError> {
    if c.lines.is_empty() {
        return Err(empty(c));
    }
    for l in &c.lines {
        if l.points.is_empty() {
            return Err(PlotError::EmptySeries {
                chart: c.title.clone(),
                series: l.name.clone(),
            });
        }
        check_finite(&c.title, &l.name, &l.points, finite_point)?;
    }
    for m in &c.marks {
        check_finite(&c.title, &m.name, &m.points, |(x, y)| {
            x.is_finite() && y.map_or(true, f64::is_finite)
        })?;
    }
    if let Some((name, v)) = &c.reference {
        check_finite(&c.title, name, &[*v], f64::is_finite)?;
    }
    if c.log_y {
        let lines = c
            .lines
            .iter()
            .map(|l| (l.name.as_str(), l.points.iter().map(|p| p.1).collect()));
        let marks = c.marks.iter().map(|m| {
            (
                m.name.as_str(),
                m.points.iter().filter_map(|p| p.1).collect::<Vec<f64>>(),
            )
        });
        let reference = c.reference.iter().map(|(n, v)| (n.as_str(), vec![*v]));
        for (name, ys) in lines.chain(marks).chain(reference) {
            let ys: Vec<f64> = ys;
            if let Some((index, y)) = ys.iter().enumerate().find(|(_, y)| **y <= 0.0) {
                return Err(PlotError::NonPositiveLogY {
                    chart: c.title.clone(),
                    series: name.to_string(),
                    index,
                    y: *y,
                });
            }
        }
    }
    Ok(())
}

impl Body for TraceChart {
    fn draw<'a, 'b: 'a>(
        &self,
        chart: &mut Chart<'a, 'b>,
        x: &Axis,
        y: &Axis,
    ) -> Result<Vec<(f64, f64)>, PlotError> {
        let err = draw_error(&self.title);
        let mut data = Vec::new();
        for (i, l) in self.lines.iter().enumerate() {
            let mut points: Vec<(f64, f64)> = l
                .points
                .iter()
                .filter_map(|(px, py)| Some((x.pos(*px)?, y.pos(*py)?)))
                .collect();
            if l.steps {
                points = steps(&points);
            }
            let c = color(i);
            chart
                .draw_series(LineSeries::new(points.iter().copied(), c.stroke_width(2)))
                .map_err(&err)?
                .label(l.name.as_str())
                .legend(move |(lx, ly)| {
                    PathElement::new(vec![(lx, ly), (lx + 22, ly)], c.stroke_width(2))
                });
            data.extend(points);
        }
        for (j, m) in self.marks.iter().enumerate() {
            let c = color(self.lines.len() + j);
            let at: Vec<(f64, f64)> = m
                .points
                .iter()
                .filter_map(|(px, py)| {
                    let py = match py {
                        Some(v) => y.pos(*v)?,
                        None => y.hi,
                    };
                    Some((x.pos(*px)?, py))
                })
                .collect();
            chart
                .draw_series(at.iter().map(|p| Circle::new(*p, 3, c.filled())))
                .map_err(&err)?
                .label(m.name.as_str())
                .legend(move |(lx, ly)| Circle::new((lx + 11, ly), 3, c.filled()));
            data.extend(at);
        }
        if let Some((label, v)) = &self.reference {
            if let Some(ry) = y.pos(*v) {
                chart
                    .draw_series([PathElement::new(
                        vec![(x.lo, ry), (x.hi, ry)],
                        REFERENCE.stroke_width(1),
                    )])
                    .map_err(&err)?;
                let style = font(NOTE_FONT_PX)
                    .color(&REFERENCE)
                    .pos(Pos::new(HPos::Right, VPos::Bottom));
                chart
                    .plotting_area()
                    .draw(
                        &(EmptyElement::at((x.hi, ry)) + Text::new(label.clone(), (-6, -4), style)),
                    )
                    .map_err(&err)?;
            }
        }
        Ok(data)
    }
}

/// A step function through `points`: each y held until the next point's x.
fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for (i, p) in points.iter().enumerate() {
        if i > 0 {
            out.push((p.0, points[i - 1].1));
        }
        out.push(*p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimation_keeps_the_ends_and_every_run_extreme() {
        let mut points: Vec<(f64, f64)> = (0..10_000).map(|i| (f64::from(i), 1.0)).collect();
        points[5_000].1 = 100.0;
        points[7_000].1 = 0.01;
        let kept = decimate(&points, 100);
        assert!(kept.len() <= 100, "{}", kept.len());
        assert_eq!(kept.first(), points.first());
        assert_eq!(kept.last(), points.last());
        assert!(kept.contains(&(5_000.0, 100.0)));
        assert!(kept.contains(&(7_000.0, 0.01)));
        assert!(kept.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(decimate(&points[..50], 100).len(), 50);
    }

    #[test]
    fn steps_hold_each_value_until_the_next_point() {
        assert_eq!(
            steps(&[(0.0, 1.0), (2.0, 3.0), (5.0, 4.0)]),
            vec![(0.0, 1.0), (2.0, 1.0), (2.0, 3.0), (5.0, 3.0), (5.0, 4.0)]
        );
    }
}
