//! HDR percentile plots: latency against percentile on a logarithmic "nines" axis
//! (x = -log10(1 - p/100), ticks 0%, 90%, 99%, 99.9%, 99.99%, ...), one line per
//! series (e.g. per neighbor load level), the way HdrHistogram's plotter shows tails.

use nnb_units::DisplayUnit;
use plotters::prelude::*;

use super::axis::Axis;
use super::frame::{draw_error, render, Body, Chart};
use super::style::{color, MARKER};
use super::{check_finite, finite_point, min_max, PlotError};

/// A percentile chart. The axis reaches at least 99.99%, and far enough for every
/// point below 100. A point at percentile 100 (the maximum), which a nines axis cannot
/// place, is drawn as a ring at the right end of the axis, not joined to the line.
#[derive(Debug, Clone, PartialEq)]
pub struct PercentileChart {
    /// Chart title.
    pub title: String,
    /// Name of the y quantity (e.g. `round-trip time`).
    pub y_label: String,
    /// Unit of the y values (e.g. [`DisplayUnit::NANOSECONDS`]).
    pub y_unit: DisplayUnit,
    /// (legend label, [(percentile 0..=100, value)]); at least one, none empty.
    pub series: Vec<(String, Vec<(f64, f64)>)>,
}

/// Draws a percentile chart as SVG text.
///
/// Errors: no series ([`PlotError::Empty`]), an empty series, a NaN or infinite
/// point, or a percentile outside 0..=100.
pub fn percentile_chart(c: &PercentileChart) -> Result<String, PlotError> {
    if c.series.is_empty() {
        return Err(PlotError::Empty {
            chart: c.title.clone(),
        });
    }
    for (name, points) in &c.series {
        if points.is_empty() {
            return Err(PlotError::EmptySeries {
                chart: c.title.clone(),
                series: name.clone(),
            });
        }
        check_finite(&c.title, name, points, finite_point)?;
        if let Some((p, _)) = points.iter().find(|(p, _)| !(0.0..=100.0).contains(p)) {
            return Err(PlotError::PercentileOutOfRange {
                chart: c.title.clone(),
                series: name.clone(),
                percentile: *p,
            });
        }
    }
    let below_max = c
        .series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0).filter(|p| *p < 100.0));
    let max_percentile = below_max.fold(0.0, f64::max);
    let values = c.series.iter().flat_map(|s| s.1.iter().map(|p| p.1));
    let (y_min, y_max) = min_max(values).ok_or_else(|| PlotError::Empty {
        chart: c.title.clone(),
    })?;
    let x = Axis::nines(max_percentile);
    let y = Axis::linear(&c.y_label, c.y_unit, y_min, y_max, true, true);
    render(&c.title, &x, &y, c)
}

impl Body for PercentileChart {
    fn draw<'a, 'b: 'a>(
        &self,
        chart: &mut Chart<'a, 'b>,
        x: &Axis,
        _y: &Axis,
    ) -> Result<Vec<(f64, f64)>, PlotError> {
        let err = draw_error(&self.title);
        let mut data = Vec::new();
        for (i, (name, points)) in self.series.iter().enumerate() {
            let mut line: Vec<(f64, f64)> = points
                .iter()
                .filter(|(p, _)| *p < 100.0)
                .filter_map(|(p, v)| Some((x.pos(*p)?, *v)))
                .collect();
            line.sort_by(|a, b| a.0.total_cmp(&b.0));
            let style = color(i).stroke_width(2);
            chart
                .draw_series(LineSeries::new(line.iter().copied(), style))
                .map_err(&err)?
                .label(name.as_str())
                .legend(move |(lx, ly)| PathElement::new(vec![(lx, ly), (lx + 22, ly)], style));
            let maxima = points.iter().filter(|(p, _)| *p >= 100.0);
            let rings = maxima.map(|(_, v)| Circle::new((x.hi, *v), 4, style));
            chart.draw_series(rings).map_err(&err)?;
            data.extend(line);
        }
        if self
            .series
            .iter()
            .any(|(_, points)| points.iter().any(|(p, _)| *p >= 100.0))
        {
            let ring = MARKER.stroke_width(2);
            chart
                .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
                .map_err(&err)?
                .label("maximum (100%)")
                .legend(move |(lx, ly)| Circle::new((lx + 11, ly), 4, ring));
        }
        Ok(data)
    }
}
