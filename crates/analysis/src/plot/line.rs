//! Line charts: one line per series (runtime vs neighbors, busy and idle; latency vs
//! load), each with an optional shaded confidence band, and vertical markers with
//! labels (the measured knee, the expected `n/2 + 1`).

use nnb_units::DisplayUnit;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::Axis;
use super::frame::{draw_error, render, Body, Chart};
use super::style::{color, font, MARKER, NOTE_FONT_PX};
use super::{check_finite, finite_point, min_max, PlotError};

/// Series with at most this many points get a dot on every point.
const MAX_DOTTED_POINTS: usize = 60;

/// One line of a [`LineChart`].
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// (x, y) in data units, drawn in the given order.
    pub points: Vec<(f64, f64)>,
    /// Optional band around the line, e.g. the 95% CI of the mean: (low, high) for
    /// each point, in the same order; non-finite bounds leave a gap in the band.
    pub band: Option<Vec<(f64, f64)>>,
}

/// A line chart: several series over a shared x axis.
#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    /// Chart title.
    pub title: String,
    /// Name of the x quantity (the unit is appended: `aggregate load (Gbit/s)`).
    pub x_label: String,
    /// Unit of the x values.
    pub x_unit: DisplayUnit,
    /// Name of the y quantity.
    pub y_label: String,
    /// Unit of the y values.
    pub y_unit: DisplayUnit,
    /// The lines; at least one, none empty.
    pub series: Vec<Series>,
    /// Vertical dashed lines at x with a label (knees, `n/2 + 1`).
    pub markers: Vec<(f64, String)>,
    /// Logarithmic x axis (all x must then be > 0).
    pub log_x: bool,
    /// Start the y axis at zero (runtimes, latencies); false fits it to the data.
    pub y_from_zero: bool,
}

/// Draws a line chart as SVG text.
///
/// Errors: no series ([`PlotError::Empty`]), an empty series, a NaN or infinite
/// point, a band of the wrong length, or x <= 0 on a logarithmic axis.
pub fn line_chart(c: &LineChart) -> Result<String, PlotError> {
    validate(c)?;
    let xs = c.series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let marker_xs = c.markers.iter().map(|m| m.0);
    let (x_min, x_max) = min_max(xs.chain(marker_xs)).ok_or_else(|| empty(c))?;
    let ys = c.series.iter().flat_map(|s| {
        let bands = s.band.iter().flatten().flat_map(|(lo, hi)| [*lo, *hi]);
        s.points
            .iter()
            .map(|p| p.1)
            .chain(bands.filter(|v| v.is_finite()))
    });
    let (y_min, y_max) = min_max(ys).ok_or_else(|| empty(c))?;
    let whole = |v: f64| v.fract() == 0.0;
    let counts = c.x_unit == DisplayUnit::NONE
        && c.series.iter().flat_map(|s| &s.points).all(|p| whole(p.0))
        && c.markers.iter().all(|m| whole(m.0));
    let x = if c.log_x {
        Axis::log10(&c.x_label, c.x_unit, x_min, x_max)
    } else if counts {
        Axis::counts(&c.x_label, x_min, x_max)
    } else {
        Axis::linear(&c.x_label, c.x_unit, x_min, x_max, false, false)
    };
    let y = Axis::linear(&c.y_label, c.y_unit, y_min, y_max, c.y_from_zero, true);
    render(&c.title, &x, &y, c)
}

impl Body for LineChart {
    fn draw<'a, 'b: 'a>(
        &self,
        chart: &mut Chart<'a, 'b>,
        x: &Axis,
        y: &Axis,
    ) -> Result<Vec<(f64, f64)>, PlotError> {
        let mut data = Vec::new();
        for (i, s) in self.series.iter().enumerate() {
            let points: Vec<(f64, f64)> = s
                .points
                .iter()
                .filter_map(|(px, py)| Some((x.pos(*px)?, *py)))
                .collect();
            if let Some(band) = &s.band {
                draw_band(chart, &self.title, &points, band, color(i))?;
            }
            draw_line(chart, &self.title, &s.name, &points, color(i))?;
            data.extend(points);
        }
        draw_markers(chart, &self.title, x, y, &self.markers)?;
        Ok(data)
    }
}

/// [`PlotError::Empty`] for this chart.
fn empty(c: &LineChart) -> PlotError {
    PlotError::Empty {
        chart: c.title.clone(),
    }
}

/// Refuses what the chart cannot show (see [`line_chart`]).
fn validate(c: &LineChart) -> Result<(), PlotError> {
    if c.series.is_empty() {
        return Err(empty(c));
    }
    for s in &c.series {
        if s.points.is_empty() {
            return Err(PlotError::EmptySeries {
                chart: c.title.clone(),
                series: s.name.clone(),
            });
        }
        check_finite(&c.title, &s.name, &s.points, finite_point)?;
        if let Some(band) = &s.band {
            if band.len() != s.points.len() {
                return Err(PlotError::BandLength {
                    chart: c.title.clone(),
                    series: s.name.clone(),
                    band: band.len(),
                    points: s.points.len(),
                });
            }
        }
    }
    let markers: Vec<f64> = c.markers.iter().map(|m| m.0).collect();
    check_finite(&c.title, "markers", &markers, f64::is_finite)?;
    if c.log_x {
        let all = c
            .series
            .iter()
            .map(|s| (s.name.as_str(), s.points.iter().map(|p| p.0).collect()));
        for (name, xs) in all.chain([("markers", markers)]) {
            let xs: Vec<f64> = xs;
            if let Some((index, x)) = xs.iter().enumerate().find(|(_, x)| **x <= 0.0) {
                return Err(PlotError::NonPositiveLogX {
                    chart: c.title.clone(),
                    series: name.to_string(),
                    index,
                    x: *x,
                });
            }
        }
    }
    Ok(())
}

/// The series' line (with a dot per point when there are few) and its legend entry.
fn draw_line<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    title: &str,
    name: &str,
    points: &[(f64, f64)],
    color: RGBColor,
) -> Result<(), PlotError> {
    let err = draw_error(title);
    let dotted = points.len() <= MAX_DOTTED_POINTS;
    chart
        .draw_series(LineSeries::new(
            points.iter().copied(),
            color.stroke_width(2),
        ))
        .map_err(&err)?
        .label(name)
        .legend(move |(lx, ly)| {
            let dot_radius = if dotted { 3 } else { 0 };
            EmptyElement::at((lx, ly))
                + PathElement::new(vec![(0, 0), (22, 0)], color.stroke_width(2))
                + Circle::new((11, 0), dot_radius, color.filled())
        });
    if dotted {
        chart
            .draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .map_err(&err)?;
    }
    Ok(())
}

/// The shaded band: one polygon per run of consecutive points with finite bounds,
/// and a short vertical bar for a run of one.
fn draw_band<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    title: &str,
    points: &[(f64, f64)],
    band: &[(f64, f64)],
    color: RGBColor,
) -> Result<(), PlotError> {
    let err = draw_error(title);
    let finite = |i: usize| band[i].0.is_finite() && band[i].1.is_finite();
    let mut start = 0;
    while start < points.len() {
        if !finite(start) {
            start += 1;
            continue;
        }
        let end = (start..points.len())
            .find(|i| !finite(*i))
            .unwrap_or(points.len());
        let run = start..end;
        if run.len() == 1 {
            let (px, _) = points[start];
            let (lo, hi) = band[start];
            chart
                .draw_series([PathElement::new(
                    vec![(px, lo), (px, hi)],
                    color.mix(0.45).stroke_width(6),
                )])
                .map_err(&err)?;
        } else {
            let upper = run.clone().map(|i| (points[i].0, band[i].1));
            let lower = run.clone().rev().map(|i| (points[i].0, band[i].0));
            let outline: Vec<(f64, f64)> = upper.chain(lower).collect();
            chart
                .draw_series([Polygon::new(outline, color.mix(0.2).filled())])
                .map_err(&err)?;
        }
        start = end;
    }
    Ok(())
}

/// Vertical dashed lines with their labels at the bottom of the plot (runtimes and
/// latencies start well above a zero axis, and the legend holds the top), labels of
/// nearby markers stacked in rows so they do not overlap, and placed left of the line when
/// they would run past the right edge.
fn draw_markers<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    title: &str,
    x: &Axis,
    y: &Axis,
    markers: &[(f64, String)],
) -> Result<(), PlotError> {
    let err = draw_error(title);
    let mut placed: Vec<(f64, &String)> = markers
        .iter()
        .filter_map(|(mx, label)| Some((x.pos(*mx)?, label)))
        .collect();
    placed.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (plot_x, _) = chart.plotting_area().get_pixel_range();
    let mut row_ends: Vec<i32> = Vec::new();
    for (p, label) in placed {
        chart
            .draw_series([DashedPathElement::new(
                vec![(p, y.lo), (p, y.hi)],
                7,
                5,
                MARKER.stroke_width(2),
            )])
            .map_err(&err)?;
        let (px, _) = chart.backend_coord(&(p, y.hi));
        let width = (label.chars().count() as f64 * NOTE_FONT_PX * 0.6).ceil() as i32;
        let right_of_line = px + 5 + width <= plot_x.end;
        let (left, right) = if right_of_line {
            (px, px + 5 + width)
        } else {
            (px - 5 - width, px)
        };
        let row = match row_ends.iter().position(|end| *end + 6 < left) {
            Some(r) => r,
            None => {
                row_ends.push(i32::MIN);
                row_ends.len() - 1
            }
        };
        row_ends[row] = right;
        let (dx, h) = if right_of_line {
            (5, HPos::Left)
        } else {
            (-5, HPos::Right)
        };
        let style = font(NOTE_FONT_PX)
            .color(&MARKER)
            .pos(Pos::new(h, VPos::Bottom));
        let dy = -4 - row as i32 * (NOTE_FONT_PX as i32 + 4);
        chart
            .plotting_area()
            .draw(&(EmptyElement::at((p, y.lo)) + Text::new(label.clone(), (dx, dy), style)))
            .map_err(&err)?;
    }
    Ok(())
}
