//! The frame every chart shares: white canvas, title, axes with computed ticks, grid,
//! axis titles, and the legend drawn after the chart's own elements.

use std::ops::Range;

use nnb_units::format_significant;
use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::prelude::*;

use super::axis::Axis;
use super::style::{
    font, AXIS_FONT_PX, GRID, HEIGHT, LEGEND_FONT_PX, TICK_FONT_PX, TITLE_FONT_PX, WIDTH,
};
use super::PlotError;

/// The chart context the chart kinds draw into: both axes are `f64` positions laid
/// out by their [`Axis`].
pub(crate) type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<Axis, Axis>>;

/// An [`Axis`] is a plotters coordinate: linear in position space, grid lines and
/// labels at its own ticks only.
impl Ranged for Axis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let fraction = (value - self.lo) / (self.hi - self.lo);
        let length = f64::from(limit.1 - limit.0);
        limit.0 + (length * fraction).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

/// Tick labels come from the axis (plotters asks for one per tick).
impl ValueFormatter<f64> for Axis {
    fn format(value: &f64) -> String {
        format_significant(*value, 3)
    }

    fn format_ext(&self, value: &f64) -> String {
        self.label_at(*value)
    }
}

/// Wraps a plotters error as a [`PlotError::Draw`] of chart `title`.
pub(crate) fn draw_error<E: std::fmt::Display>(title: &str) -> impl Fn(E) -> PlotError + '_ {
    move |e| PlotError::Draw {
        chart: title.to_string(),
        message: e.to_string(),
    }
}

/// What a chart kind draws inside the frame.
pub(crate) trait Body {
    /// Draws the chart's elements and returns the positions of its data, which decide
    /// where the legend goes.
    fn draw<'a, 'b: 'a>(
        &self,
        chart: &mut Chart<'a, 'b>,
        x: &Axis,
        y: &Axis,
    ) -> Result<Vec<(f64, f64)>, PlotError>;
}

/// Draws the frame, then `body`, then the legend, and returns the SVG text.
pub(crate) fn render(
    title: &str,
    x: &Axis,
    y: &Axis,
    body: &impl Body,
) -> Result<String, PlotError> {
    let err = draw_error(title);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(&err)?;
        let y_area = y.longest_label() as f64 * TICK_FONT_PX * 0.62 + 14.0 + AXIS_FONT_PX * 2.0;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, font(TITLE_FONT_PX))
            .margin(14)
            .margin_right(30)
            .x_label_area_size(56)
            .y_label_area_size(y_area.round() as u32)
            .build_cartesian_2d(x.clone(), y.clone())
            .map_err(&err)?;
        chart
            .configure_mesh()
            .bold_line_style(GRID)
            .light_line_style(TRANSPARENT)
            .x_desc(x.title.as_str())
            .y_desc(y.title.as_str())
            .label_style(font(TICK_FONT_PX))
            .axis_desc_style(font(AXIS_FONT_PX))
            .draw()
            .map_err(&err)?;
        let data = body.draw(&mut chart, x, y)?;
        chart
            .configure_series_labels()
            .position(legend_corner(x, y, &data))
            .margin(12)
            .label_font(font(LEGEND_FONT_PX))
            .background_style(WHITE.mix(0.9))
            .border_style(RGBColor(180, 180, 180))
            .draw()
            .map_err(&err)?;
        root.present().map_err(&err)?;
    }
    Ok(svg)
}

/// The upper corner whose area (the left or right 45% of the top 35%) holds fewer
/// data points, so that the legend hides as little as possible; left on a tie.
fn legend_corner(x: &Axis, y: &Axis, data: &[(f64, f64)]) -> SeriesLabelPosition {
    let top = y.hi - 0.35 * (y.hi - y.lo);
    let left_edge = x.lo + 0.45 * (x.hi - x.lo);
    let right_edge = x.hi - 0.45 * (x.hi - x.lo);
    let in_top = data.iter().filter(|(_, py)| *py >= top);
    let (left, right) = in_top.fold((0, 0), |(l, r), (px, _)| {
        (
            l + usize::from(*px <= left_edge),
            r + usize::from(*px >= right_edge),
        )
    });
    if right < left {
        SeriesLabelPosition::UpperRight
    } else {
        SeriesLabelPosition::UpperLeft
    }
}
