//! SVG charts drawn with plotters: line charts (series with confidence bands and
//! vertical markers), boxplots per level, HDR percentile plots on a "nines" axis, and
//! trace charts of long series with marks (thinned for drawing).
//!
//! Every chart is 900x560, has a title, axis titles with units (one SI prefix per
//! axis), a legend, and ticks that cover the data. Each function returns the SVG text.
//!
//! Values must be finite: a NaN or infinite value is refused with
//! [`PlotError::NonFinite`] naming the series and position, never silently dropped.
//! The one exception is a confidence band bound, which is undefined for a single
//! repetition: a band is drawn only where both bounds are finite.

mod axis;
mod boxplot;
mod frame;
mod line;
mod percentile;
mod style;
mod trace;

pub use boxplot::{box_chart, BoxChart};
pub use line::{line_chart, LineChart, Series};
pub use nnb_units::DisplayUnit;
pub use percentile::{percentile_chart, PercentileChart};
pub use style::series_color;
pub use trace::{
    decimate, trace_chart, TraceChart, TraceLine, TraceMarks, MAX_LINE_POINTS, MAX_MARKS,
};

/// Why a chart could not be drawn. `chart` is the chart's title.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// No series (or no groups) at all.
    #[error("plot {chart:?}: nothing to plot")]
    Empty {
        /// Title of the chart.
        chart: String,
    },
    /// A series or group without values.
    #[error("plot {chart:?}: series {series:?} has no values")]
    EmptySeries {
        /// Title of the chart.
        chart: String,
        /// Name of the series or group.
        series: String,
    },
    /// A NaN or infinite value.
    #[error("plot {chart:?}: series {series:?} value {index} is {value}; NaN and infinite values are refused")]
    NonFinite {
        /// Title of the chart.
        chart: String,
        /// Name of the series or group.
        series: String,
        /// 0-based position of the value in the series.
        index: usize,
        /// The value as text.
        value: String,
    },
    /// A value that a logarithmic x axis cannot show.
    #[error("plot {chart:?}: series {series:?} point {index} has x = {x}, but a logarithmic x axis needs x > 0")]
    NonPositiveLogX {
        /// Title of the chart.
        chart: String,
        /// Name of the series (or "markers").
        series: String,
        /// 0-based position of the point.
        index: usize,
        /// The offending x.
        x: f64,
    },
    /// A value that a logarithmic y axis cannot show.
    #[error("plot {chart:?}: series {series:?} value {index} is {y}, but a logarithmic y axis needs y > 0")]
    NonPositiveLogY {
        /// Title of the chart.
        chart: String,
        /// Name of the series.
        series: String,
        /// 0-based position of the value.
        index: usize,
        /// The offending y.
        y: f64,
    },
    /// A percentile outside 0..=100.
    #[error("plot {chart:?}: series {series:?} has percentile {percentile}, outside 0..=100")]
    PercentileOutOfRange {
        /// Title of the chart.
        chart: String,
        /// Name of the series.
        series: String,
        /// The offending percentile.
        percentile: f64,
    },
    /// A confidence band whose length differs from its series'.
    #[error("plot {chart:?}: series {series:?} has {band} band bounds for {points} points")]
    BandLength {
        /// Title of the chart.
        chart: String,
        /// Name of the series.
        series: String,
        /// Number of band bounds given.
        band: usize,
        /// Number of points.
        points: usize,
    },
    /// plotters failed to draw (should not happen when writing to a string).
    #[error("plot {chart:?}: drawing failed: {message}")]
    Draw {
        /// Title of the chart.
        chart: String,
        /// plotters' error.
        message: String,
    },
}

/// Checks that every item (a value, or an (x, y) point) is finite.
fn check_finite<T: Copy + std::fmt::Debug>(
    chart: &str,
    series: &str,
    items: &[T],
    finite: impl Fn(T) -> bool,
) -> Result<(), PlotError> {
    match items.iter().enumerate().find(|(_, v)| !finite(**v)) {
        Some((index, value)) => Err(PlotError::NonFinite {
            chart: chart.to_string(),
            series: series.to_string(),
            index,
            value: format!("{value:?}"),
        }),
        None => Ok(()),
    }
}

/// Whether both coordinates of a point are finite.
fn finite_point((x, y): (f64, f64)) -> bool {
    x.is_finite() && y.is_finite()
}

/// Smallest and largest of some values (None when there are none).
fn min_max(values: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    values.into_iter().fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}
