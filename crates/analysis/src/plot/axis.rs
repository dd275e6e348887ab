//! Axes: value range, tick positions and tick labels, computed here rather than by
//! plotters so that the ticks always cover the data (the last tick is at or above the
//! largest value), carry one SI prefix per axis, and can be logarithmic or "nines".

use nnb_format::{Metric, Quantity};

/// Physical unit of an axis. Tick labels are plain numbers; the unit, with the SI
/// prefix chosen for the axis (e.g. `Gbit/s`, `µs`), goes into the axis title.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unit {
    /// Symbol of the base unit (`s`, `bit/s`, `%`), empty for a plain count.
    symbol: &'static str,
    /// Factor from the data's unit to the base unit (1e-9 for data in nanoseconds).
    scale: f64,
    /// Whether SI prefixes apply (they do not to `%` or plain counts).
    prefixed: bool,
    /// Largest prefix exponent that reads well (seconds stop at `s`, never `ks`).
    max_exponent: i32,
}

impl Unit {
    /// A plain number (neighbors, threads, nodes): no unit, no prefix.
    pub const NONE: Unit = Unit {
        symbol: "",
        scale: 1.0,
        prefixed: false,
        max_exponent: 0,
    };
    /// Data in seconds, shown as `s`, `ms`, `µs` or `ns`.
    pub const SECONDS: Unit = Unit {
        symbol: "s",
        scale: 1.0,
        prefixed: true,
        max_exponent: 0,
    };
    /// Data in nanoseconds (latencies of the results format), shown as `ns` .. `s`.
    pub const NANOSECONDS: Unit = Unit {
        symbol: "s",
        scale: 1e-9,
        prefixed: true,
        max_exponent: 0,
    };
    /// Data in bit/s, shown as `kbit/s` .. `Tbit/s`.
    pub const BITS_PER_SECOND: Unit = Unit {
        symbol: "bit/s",
        scale: 1.0,
        prefixed: true,
        max_exponent: 12,
    };
    /// Data in operations per second, shown as `ops/s` .. `Gops/s`.
    pub const OPS_PER_SECOND: Unit = Unit {
        symbol: "ops/s",
        scale: 1.0,
        prefixed: true,
        max_exponent: 9,
    };
    /// Data in percent.
    pub const PERCENT: Unit = Unit {
        symbol: "%",
        scale: 1.0,
        prefixed: false,
        max_exponent: 0,
    };
    /// Data in percent of one CPU.
    pub const PERCENT_CPU: Unit = Unit {
        symbol: "% CPU",
        scale: 1.0,
        prefixed: false,
        max_exponent: 0,
    };
    /// Data in bytes, shown as `B` .. `TB` (decimal prefixes, as the axis' other
    /// units).
    pub const BYTES: Unit = Unit {
        symbol: "B",
        scale: 1.0,
        prefixed: true,
        max_exponent: 12,
    };

    /// The unit of a results-format metric's values.
    pub fn of_metric(metric: Metric) -> Unit {
        match metric.quantity() {
            Quantity::Nanoseconds => Unit::NANOSECONDS,
            Quantity::BitsPerSecond => Unit::BITS_PER_SECOND,
            Quantity::Seconds => Unit::SECONDS,
            Quantity::OpsPerSecond => Unit::OPS_PER_SECOND,
            Quantity::PercentCpu => Unit::PERCENT_CPU,
            Quantity::Bytes => Unit::BYTES,
        }
    }

    /// The SI exponent (a multiple of 3) that makes `magnitude` (in data units) read
    /// as 1..1000 in the displayed unit.
    fn exponent_for(&self, magnitude: f64) -> i32 {
        let base = magnitude.abs() * self.scale;
        if !self.prefixed || base == 0.0 || !base.is_finite() {
            return 0;
        }
        let e = (base.log10() / 3.0).floor() as i32 * 3;
        e.clamp(-9, self.max_exponent)
    }

    /// Factor from data units to the displayed unit at SI exponent `e`.
    fn factor(&self, e: i32) -> f64 {
        self.scale / 10f64.powi(e)
    }

    /// The unit's symbol with the prefix of exponent `e` (`µs`, `Gbit/s`).
    fn symbol_at(&self, e: i32) -> String {
        let prefix = match e {
            -9 => "n",
            -6 => "µ",
            -3 => "m",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            _ => "",
        };
        format!("{prefix}{}", self.symbol)
    }

    /// One value with its own prefix and unit, e.g. `1.25 Gbit/s`, for labels.
    pub fn format(&self, value: f64) -> String {
        let e = self.exponent_for(value);
        let shown = significant(value * self.factor(e), 3);
        let symbol = self.symbol_at(e);
        if symbol.is_empty() {
            shown
        } else if symbol == "%" {
            format!("{shown}%")
        } else {
            format!("{shown} {symbol}")
        }
    }

    /// `name (unit)`, or just `name` when there is no unit.
    fn title(&self, name: &str, e: i32) -> String {
        let symbol = self.symbol_at(e);
        if symbol.is_empty() {
            name.to_string()
        } else {
            format!("{name} ({symbol})")
        }
    }
}

/// `value` with up to `digits` significant digits, trailing zeros dropped.
pub(crate) fn significant(value: f64, digits: i32) -> String {
    if value == 0.0 || !value.is_finite() {
        return if value.is_finite() {
            "0".into()
        } else {
            value.to_string()
        };
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = (digits - 1 - magnitude).max(0) as usize;
    trim_zeros(format!("{value:.decimals$}"))
}

/// Drops trailing zeros after a decimal point, and the point itself if bare.
fn trim_zeros(s: String) -> String {
    if !s.contains('.') {
        return s;
    }
    let t = s.trim_end_matches('0').trim_end_matches('.');
    if t == "-0" {
        "0".into()
    } else {
        t.to_string()
    }
}

/// How data values map to positions along an axis.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scale {
    Linear,
    Log10,
    /// `-log10(1 - p/100)` of a percentile `p`; 100 maps to the axis end.
    Nines,
}

/// A computed axis: range and ticks in *position* space (log10 of the value for a
/// log axis), tick labels, and the title with its unit.
#[derive(Debug, Clone)]
pub(crate) struct Axis {
    scale: Scale,
    /// Lowest position shown.
    pub lo: f64,
    /// Highest position shown.
    pub hi: f64,
    /// Positions of the labelled ticks, ascending.
    pub ticks: Vec<f64>,
    labels: Vec<String>,
    /// Axis title with unit, e.g. `round-trip time (µs)`.
    pub title: String,
}

/// Most intervals between the first and last tick of a linear axis.
const MAX_INTERVALS: f64 = 8.0;

/// Ticks on a 1-2-5 grid covering `lo..=hi` with the smallest step of at least
/// `min_step` that needs at most [`MAX_INTERVALS`] intervals: (first tick, step, count).
fn nice_ticks(lo: f64, hi: f64, min_step: f64) -> (f64, f64, usize) {
    let magnitude = 10f64.powf(((hi - lo) / MAX_INTERVALS).log10().floor());
    let ticks_with = |step: f64| {
        let first = (lo / step + 1e-9).floor() * step;
        let last = (hi / step - 1e-9).ceil() * step;
        (first, step, ((last - first) / step).round() as usize + 1)
    };
    [1.0, 2.0, 5.0, 10.0, 20.0]
        .iter()
        .map(|m| m * magnitude)
        .filter(|step| *step >= min_step)
        .map(ticks_with)
        .find(|(_, _, count)| (*count - 1) as f64 <= MAX_INTERVALS)
        .unwrap_or_else(|| ticks_with((50.0 * magnitude).max(min_step)))
}

impl Axis {
    /// A linear axis over data values `min..=max` (data units), starting at zero when
    /// `from_zero` and all data are positive, with `headroom` leaving a gap of at least
    /// 5% above the largest value (room for a legend).
    pub(super) fn linear(
        name: &str,
        unit: Unit,
        min: f64,
        max: f64,
        from_zero: bool,
        headroom: bool,
    ) -> Axis {
        Axis::linear_stepped(name, unit, min, max, from_zero, headroom, 0.0)
    }

    /// A linear axis of counts (neighbors, threads): ticks only at whole numbers.
    pub(super) fn counts(name: &str, min: f64, max: f64) -> Axis {
        Axis::linear_stepped(name, Unit::NONE, min, max, false, false, 1.0)
    }

    fn linear_stepped(
        name: &str,
        unit: Unit,
        min: f64,
        max: f64,
        from_zero: bool,
        headroom: bool,
        min_step: f64,
    ) -> Axis {
        let (mut lo, mut hi) = (min, max);
        if from_zero {
            lo = lo.min(0.0);
            hi = hi.max(0.0);
        }
        if hi - lo <= 0.0 {
            let pad = if hi != 0.0 { hi.abs() * 0.1 } else { 1.0 };
            lo = if from_zero && lo >= 0.0 {
                lo.min(0.0)
            } else {
                lo - pad
            };
            hi += pad;
        }
        let (first, step, mut count) = nice_ticks(lo, hi, min_step);
        let mut last = first + step * (count - 1) as f64;
        if headroom && last - max < 0.05 * (last - first) {
            count += 1;
            last += step;
        }
        let e = unit.exponent_for(first.abs().max(last.abs()));
        let factor = unit.factor(e);
        let step_shown = step * factor;
        let decimals = (-step_shown.log10().floor()).max(0.0) as usize;
        let ticks: Vec<f64> = (0..count).map(|i| first + step * i as f64).collect();
        let labels = ticks
            .iter()
            .map(|t| trim_zeros(format!("{:.decimals$}", t * factor)))
            .collect();
        Axis {
            scale: Scale::Linear,
            lo: first,
            hi: last,
            ticks,
            labels,
            title: unit.title(name, e),
        }
    }

    /// A log10 axis over positive data values `min..=max`: whole decades, with 2 and 5
    /// in between when the data span at most two decades.
    pub(super) fn log10(name: &str, unit: Unit, min: f64, max: f64) -> Axis {
        let lo = min.log10().floor();
        let mut hi = max.log10().ceil();
        if hi <= lo {
            hi = lo + 1.0;
        }
        let e = unit.exponent_for(max);
        let factor = unit.factor(e);
        let mults: &[f64] = if hi - lo <= 2.0 {
            &[1.0, 2.0, 5.0]
        } else {
            &[1.0]
        };
        let mut ticks = Vec::new();
        let mut labels = Vec::new();
        let mut decade = lo;
        while decade <= hi {
            for m in mults {
                let value = m * 10f64.powf(decade);
                let pos = value.log10();
                if pos <= hi + 1e-9 {
                    ticks.push(pos);
                    labels.push(significant(value * factor, 3));
                }
            }
            decade += 1.0;
        }
        Axis {
            scale: Scale::Log10,
            lo,
            hi,
            ticks,
            labels,
            title: format!("{} — log scale", unit.title(name, e)),
        }
    }

    /// The "nines" percentile axis from 0% to `99.9…%` with at least four nines, or
    /// as many as needed to reach `max_percentile` (below 100).
    pub(super) fn nines(max_percentile: f64) -> Axis {
        let needed = (nines_position(max_percentile) - 1e-9).ceil();
        let hi = needed.max(4.0);
        let ticks: Vec<f64> = (0..=hi as usize).map(|i| i as f64).collect();
        let labels = ticks.iter().map(|t| nines_label(*t as usize)).collect();
        Axis {
            scale: Scale::Nines,
            lo: 0.0,
            hi,
            ticks,
            labels,
            title: "percentile".into(),
        }
    }

    /// A categorical axis: one slot per name at positions 0, 1, …; when names would
    /// collide at `width_px`, only every k-th is labelled.
    pub(super) fn categories(name: &str, names: &[String], width_px: f64) -> Axis {
        let n = names.len();
        let longest = names.iter().map(|s| s.chars().count()).max().unwrap_or(1) as f64;
        let per_label = longest * style_char_width() + 12.0;
        let fit = ((width_px / per_label).floor() as usize).max(1);
        let every = n.div_ceil(fit).max(1);
        let shown: Vec<usize> = (0..n).step_by(every).collect();
        Axis {
            scale: Scale::Linear,
            lo: -0.5,
            hi: n as f64 - 0.5,
            ticks: shown.iter().map(|i| *i as f64).collect(),
            labels: shown.iter().map(|i| names[*i].clone()).collect(),
            title: name.to_string(),
        }
    }

    /// Position of a data value on this axis (None: not representable, e.g. x <= 0 on
    /// a log axis).
    pub(super) fn pos(&self, value: f64) -> Option<f64> {
        match self.scale {
            Scale::Linear => Some(value),
            Scale::Log10 => (value > 0.0).then(|| value.log10()),
            Scale::Nines => (0.0..=100.0)
                .contains(&value)
                .then(|| nines_position(value).min(self.hi)),
        }
    }

    /// Label of the tick nearest to position `pos` (plotters asks with tick positions).
    pub(super) fn label_at(&self, pos: f64) -> String {
        self.ticks
            .iter()
            .zip(&self.labels)
            .min_by(|a, b| (a.0 - pos).abs().total_cmp(&(b.0 - pos).abs()))
            .map(|(_, l)| l.clone())
            .unwrap_or_default()
    }

    /// Characters of the longest tick label (sizes the label area).
    pub(super) fn longest_label(&self) -> usize {
        self.labels
            .iter()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(1)
    }
}

/// Approximate width of one tick-label character in pixels.
fn style_char_width() -> f64 {
    super::style::TICK_FONT_PX * 0.6
}

/// `-log10(1 - p/100)`: 0 at 0%, 1 at 90%, 2 at 99%, infinite at 100%.
fn nines_position(percentile: f64) -> f64 {
    -(1.0 - percentile / 100.0).log10()
}

/// Label of the `k`-th nines tick: 0%, 90%, 99%, 99.9%, 99.99%, …
fn nines_label(k: usize) -> String {
    match k {
        0 => "0%".into(),
        1 => "90%".into(),
        2 => "99%".into(),
        _ => format!("99.{}%", "9".repeat(k - 2)),
    }
}
