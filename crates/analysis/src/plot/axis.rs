//! Axes: value range, tick positions and tick labels, computed here rather than by
//! plotters so that the ticks always cover the data (the last tick is at or above the
//! largest value), carry one prefix per axis (`nnb_units::DisplayUnit`: SI prefixes,
//! binary ones for bytes), and can be logarithmic or "nines".

use nnb_units::{format_significant, format_trimmed, DisplayUnit, Prefixes};

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
        unit: DisplayUnit,
        min: f64,
        max: f64,
        from_zero: bool,
        headroom: bool,
    ) -> Axis {
        Axis::linear_stepped(name, unit, min, max, from_zero, headroom, 0.0)
    }

    /// A linear axis of counts (neighbors, threads): ticks only at whole numbers.
    pub(super) fn counts(name: &str, min: f64, max: f64) -> Axis {
        Axis::linear_stepped(name, DisplayUnit::NONE, min, max, false, false, 1.0)
    }

    fn linear_stepped(
        name: &str,
        unit: DisplayUnit,
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
        // Ticks on a 1-2-5 grid of the unit shown. Decimal prefixes are powers of ten,
        // so the data's grid is every prefix's; a binary one's is not (200 MB is 190.7
        // MiB), so bytes take the prefix that fits the range first, and their grid.
        let binary =
            (unit.prefixes() == Prefixes::Binary).then(|| unit.fit(lo.abs().max(hi.abs())));
        let grid = binary.map_or(1.0, |b| b.factor());
        let (first, step, mut count) = nice_ticks(lo * grid, hi * grid, min_step * grid);
        let (first, step) = (first / grid, step / grid);
        let mut last = first + step * (count - 1) as f64;
        if headroom && last - max < 0.05 * (last - first) {
            count += 1;
            last += step;
        }
        let shown = binary.unwrap_or_else(|| unit.fit(first.abs().max(last.abs())));
        let factor = shown.factor();
        let step_shown = step * factor;
        let decimals = (-step_shown.log10().floor()).max(0.0) as usize;
        let ticks: Vec<f64> = (0..count).map(|i| first + step * i as f64).collect();
        let labels = ticks
            .iter()
            .map(|t| format_trimmed(t * factor, decimals))
            .collect();
        Axis {
            scale: Scale::Linear,
            lo: first,
            hi: last,
            ticks,
            labels,
            title: shown.title(name),
        }
    }

    /// A log10 axis over positive data values `min..=max`: whole decades, with 2 and 5
    /// in between when the data span at most two decades.
    pub(super) fn log10(name: &str, unit: DisplayUnit, min: f64, max: f64) -> Axis {
        let lo = min.log10().floor();
        let mut hi = max.log10().ceil();
        if hi <= lo {
            hi = lo + 1.0;
        }
        let shown = unit.fit(max);
        let factor = shown.factor();
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
                    labels.push(format_significant(value * factor, 3));
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
            title: format!("{} — log scale", shown.title(name)),
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
