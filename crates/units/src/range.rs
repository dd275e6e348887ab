//! Ranges of levels, one syntax for thread sweeps, neighbor staircases and load
//! steps: `FROM:TO:STEP`, `FROM..TO`, `FROM..TO:STEP` (`..=` reads as `..`; TO is
//! always inclusive).

use serde::{Deserialize, Serialize};

use crate::rate::{parse_rate, Rate};
use crate::UnitError;

/// Most levels one range may expand to: a typo like `0:10G:1` would otherwise plan
/// ten billion steps.
pub const MAX_LEVELS: usize = 10_000;

const EXPECTED: &str =
    "write a range as FROM:TO:STEP or FROM..TO[:STEP], e.g. 0:200M:50M or 1..8:2";

/// A value a range can step through: a count or a rate.
pub trait Level: Copy {
    /// The number the range steps over.
    fn value(&self) -> f64;
    /// A value of the same kind holding `v`.
    fn with_value(&self, v: f64) -> Self;
    /// Whether two values may bound one range (a bit rate and a packet rate may not).
    fn same_kind(&self, _other: &Self) -> bool {
        true
    }
}

impl Level for usize {
    fn value(&self) -> f64 {
        *self as f64
    }
    fn with_value(&self, v: f64) -> Self {
        v.round() as usize
    }
}

impl Level for f64 {
    fn value(&self) -> f64 {
        *self
    }
    fn with_value(&self, v: f64) -> Self {
        v
    }
}

impl Level for Rate {
    fn value(&self) -> f64 {
        Rate::value(self)
    }
    fn with_value(&self, v: f64) -> Self {
        Rate::with_value(self, v)
    }
    fn same_kind(&self, other: &Self) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}

/// Levels from `from` to `to` (inclusive when the steps land on it) by `step`.
/// Built only by the parsers, which check that it has at most [`MAX_LEVELS`] levels.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Steps<T> {
    /// First level.
    pub from: T,
    /// Last level (included when the steps land on it).
    pub to: T,
    /// Increment between levels; zero for a single level.
    pub step: T,
}

/// Stepped rates for the neighbor load of `nnb latency` (`0:10G:1G`, or one rate).
pub type RateSteps = Steps<Rate>;

impl<T: Level> Steps<T> {
    /// A range of one level.
    pub fn single(v: T) -> Self {
        Steps {
            from: v,
            to: v,
            step: v.with_value(0.0),
        }
    }

    /// Number of levels, counting `to` when a step lands on it (within 1e-9 of a
    /// step, so that `0:0.3:0.1` has 4 levels despite binary fractions).
    fn count(&self) -> f64 {
        let (from, to, step) = (self.from.value(), self.to.value(), self.step.value());
        if step <= 0.0 || to <= from {
            return 1.0;
        }
        ((to - from) / step + 1e-9).floor() + 1.0
    }

    /// The levels in order, each computed as `from + i * step` (no accumulated error).
    pub fn levels(&self) -> Vec<T> {
        let (from, step) = (self.from.value(), self.step.value());
        // `count` is at most MAX_LEVELS for a parsed range; the `min` keeps a
        // hand-built one bounded too.
        let n = self.count().min(MAX_LEVELS as f64) as usize;
        (0..n)
            .map(|i| self.from.with_value(from + i as f64 * step))
            .collect()
    }
}

/// Parses a range: `FROM:TO:STEP`, `FROM:TO`, `FROM..TO` or `FROM..TO:STEP` (`..=`
/// is read as `..`), with `parse` reading each of the three values. A missing STEP
/// is `default_step`, or an error when there is none (rates have no natural step).
/// TO below FROM, a step of 0, values of different kinds and more than
/// [`MAX_LEVELS`] levels are errors.
pub fn parse_steps<T: Level>(
    s: &str,
    parse: impl Fn(&str) -> Result<T, UnitError>,
    default_step: Option<T>,
) -> Result<Steps<T>, UnitError> {
    let input = || s.trim().to_string();
    let (from, rest) = match s.split_once("..") {
        Some((a, b)) => (a, b.strip_prefix('=').unwrap_or(b)),
        None => s.split_once(':').ok_or_else(|| UnitError::NotARange {
            input: input(),
            expected: EXPECTED,
        })?,
    };
    let (to, step) = match rest.split_once(':') {
        Some((to, step)) => (to, Some(parse(step.trim())?)),
        None => (rest, default_step),
    };
    let step = step.ok_or_else(|| UnitError::ZeroStep { input: input() })?;
    let steps = Steps {
        from: parse(from.trim())?,
        to: parse(to.trim())?,
        step,
    };
    if !steps.from.same_kind(&steps.to) || !steps.from.same_kind(&steps.step) {
        return Err(UnitError::MixedKinds { input: input() });
    }
    if steps.to.value() < steps.from.value() {
        return Err(UnitError::Reversed { input: input() });
    }
    if steps.step.value() <= 0.0 {
        return Err(UnitError::ZeroStep { input: input() });
    }
    let count = steps.count();
    if count > MAX_LEVELS as f64 {
        return Err(UnitError::TooManyLevels {
            input: input(),
            levels: count as u64,
            max: MAX_LEVELS,
        });
    }
    Ok(steps)
}

/// Parses a whole-number count.
fn count(s: &str) -> Result<usize, UnitError> {
    s.parse::<usize>().map_err(|_| UnitError::NotANumber {
        kind: "count",
        input: s.to_string(),
        expected: "a whole number like 4",
    })
}

/// Parses a range of counts (thread counts): `1..8`, `1..96:4`, `2:8:2`; the step
/// defaults to 1.
pub fn parse_count_steps(s: &str) -> Result<Steps<usize>, UnitError> {
    parse_steps(s, count, Some(1))
}

/// Parses a range of rates `FROM:TO:STEP` (e.g. `0:10G:1G`), or a single rate. All
/// three must be the same kind of rate (bit/byte rates or packet rates).
pub fn parse_rate_steps(s: &str) -> Result<RateSteps, UnitError> {
    if s.contains(':') || s.contains("..") {
        parse_steps(s, parse_rate, None)
    } else {
        parse_rate(s).map(Steps::single)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_range_forms() {
        let r = |s: &str| parse_count_steps(s).map(|st| st.levels());
        assert_eq!(r("1..4"), Ok(vec![1, 2, 3, 4]));
        assert_eq!(r("1..=4"), Ok(vec![1, 2, 3, 4]));
        assert_eq!(r("2:8:2"), Ok(vec![2, 4, 6, 8]));
        assert_eq!(r("1:4"), Ok(vec![1, 2, 3, 4]));
        // 1, 5, 9: the next, 13, is past 10.
        assert_eq!(r("1..10:4"), Ok(vec![1, 5, 9]));
        assert_eq!(r("3..3"), Ok(vec![3]));
        assert!(matches!(r("4..1"), Err(UnitError::Reversed { .. })));
        assert!(matches!(r("1..4:0"), Err(UnitError::ZeroStep { .. })));
        assert!(matches!(r("lots"), Err(UnitError::NotARange { .. })));
        assert!(matches!(r("1..x"), Err(UnitError::NotANumber { .. })));
    }

    #[test]
    fn rate_steps() {
        let s = parse_rate_steps("0:10G:1G").expect("valid steps");
        let levels = s.levels();
        assert_eq!(levels.len(), 11);
        assert_eq!(levels[0], Rate::BitsPerSec(0.0));
        assert_eq!(levels[10], Rate::BitsPerSec(10e9));
        let one = parse_rate_steps("5G").expect("single level");
        assert_eq!(one.levels(), vec![Rate::BitsPerSec(5e9)]);
        // 0, 50, 100, 150, 200 Mbit/s.
        let v: Vec<f64> = parse_rate_steps("0:200M:50M")
            .expect("valid")
            .levels()
            .iter()
            .map(Rate::value)
            .collect();
        assert_eq!(v, vec![0.0, 50e6, 100e6, 150e6, 200e6]);
        // 0 to 8 MB/s (64 Mbit/s) by 32 Mbit/s: 0, 32, 64 Mbit/s.
        let bytes = parse_rate_steps("0:8MB/s:32M").expect("valid").levels();
        assert_eq!(bytes.last(), Some(&Rate::BitsPerSec(64e6)));
        assert_eq!(bytes.len(), 3);
        assert!(parse_rate_steps("10G:0:1G").is_err());
        assert!(matches!(
            parse_rate_steps("0:10G:1kpps"),
            Err(UnitError::MixedKinds { .. })
        ));
        assert!(parse_rate_steps("0:10G:0").is_err());
        assert!(parse_rate_steps("1:2").is_err());
    }

    #[test]
    fn ranges_are_bounded() {
        // 0..10G by 1 bit/s: 1e10 + 1 levels.
        let e = parse_rate_steps("0:10G:1").unwrap_err();
        assert!(matches!(e, UnitError::TooManyLevels { .. }), "{e}");
        assert!(e.to_string().contains("more than 10000"), "{e}");
        // 1..10000 is exactly the bound; 1..10001 is one over.
        assert_eq!(
            parse_count_steps("1..10000").map(|s| s.levels().len()),
            Ok(10_000)
        );
        assert!(parse_count_steps("1..10001").is_err());
    }
}
