//! Parsing of the quantities people type on the command line: rates ("10G" bit/s,
//! "100kpps" packets/s) and durations ("10s", "500ms", "2m", "1h").
//!
//! Rate suffixes are decimal (K = 1e3, M = 1e6, G = 1e9, T = 1e12) as network people
//! use them; a trailing "bps", "bit" or "b/s" is accepted and ignored. A rate ending
//! in "pps" is a packet rate. Errors say what was typed and what would have worked.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Why a rate or duration could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum UnitError {
    /// Nothing was typed.
    #[error("empty value: expected {expected}")]
    Empty {
        /// What a valid value looks like.
        expected: &'static str,
    },
    /// The number part is not a number.
    #[error("`{input}` does not start with a number: expected {expected}")]
    NotANumber {
        /// The text as typed.
        input: String,
        /// What a valid value looks like.
        expected: &'static str,
    },
    /// The unit suffix is unknown.
    #[error("`{input}` has an unknown unit `{suffix}`: expected {expected}")]
    UnknownUnit {
        /// The text as typed.
        input: String,
        /// The suffix that was not understood.
        suffix: String,
        /// What a valid value looks like.
        expected: &'static str,
    },
    /// Negative, infinite or not finite values.
    #[error("`{input}` is out of range: {why}")]
    OutOfRange {
        /// The text as typed.
        input: String,
        /// Why the value cannot be used.
        why: &'static str,
    },
}

const RATE_HELP: &str = "a bit rate like 500K, 200M, 1.5G, 10Gbps or a packet rate like 100kpps";
const PPS_HELP: &str = "a packet rate like 10000, 50k or 50kpps (packets per second)";
const DURATION_HELP: &str = "a duration like 500ms, 10s, 2m or 1h (a bare number is seconds)";

/// A target send rate: bits per second of payload, or packets per second.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rate {
    /// Payload bits per second (UDP payload, nnb header included).
    BitsPerSec(f64),
    /// Datagrams per second.
    PacketsPerSec(f64),
}

impl Rate {
    /// Datagrams per second this rate means for messages of `msg_size` payload bytes.
    pub fn packets_per_sec(&self, msg_size: usize) -> f64 {
        match *self {
            Rate::BitsPerSec(bps) => bps / (8.0 * msg_size.max(1) as f64),
            Rate::PacketsPerSec(pps) => pps,
        }
    }

    /// Payload bits per second this rate means for messages of `msg_size` bytes.
    pub fn bits_per_sec(&self, msg_size: usize) -> f64 {
        match *self {
            Rate::BitsPerSec(bps) => bps,
            Rate::PacketsPerSec(pps) => pps * 8.0 * msg_size as f64,
        }
    }

    /// The same kind of rate multiplied by `factor` (used to split a rate over streams).
    pub fn scaled(&self, factor: f64) -> Rate {
        match *self {
            Rate::BitsPerSec(v) => Rate::BitsPerSec(v * factor),
            Rate::PacketsPerSec(v) => Rate::PacketsPerSec(v * factor),
        }
    }

    /// True for a zero rate (no traffic at all).
    pub fn is_zero(&self) -> bool {
        match *self {
            Rate::BitsPerSec(v) | Rate::PacketsPerSec(v) => v == 0.0,
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Rate::BitsPerSec(v) => write!(f, "{}", format_bits_per_sec(v)),
            Rate::PacketsPerSec(v) => write!(f, "{}pps", format_si(v)),
        }
    }
}

impl std::str::FromStr for Rate {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Rate, UnitError> {
        parse_rate(s)
    }
}

/// Splits `s` into its leading number and the rest (trimmed).
fn split_number<'a>(s: &'a str, expected: &'static str) -> Result<(f64, &'a str), UnitError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(UnitError::Empty { expected });
    }
    let end = s
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .map_or(s.len(), |(i, _)| i);
    let digits: String = s[..end].chars().filter(|&c| c != '_').collect();
    let value: f64 = digits.parse().map_err(|_| UnitError::NotANumber {
        input: s.to_string(),
        expected,
    })?;
    Ok((value, s[end..].trim()))
}

/// Decimal SI multiplier of a prefix letter (case-insensitive), 1 for none.
fn si_multiplier(prefix: &str) -> Option<f64> {
    match prefix.to_ascii_lowercase().as_str() {
        "" => Some(1.0),
        "k" => Some(1e3),
        "m" => Some(1e6),
        "g" => Some(1e9),
        "t" => Some(1e12),
        _ => None,
    }
}

/// Parses a rate: "10G", "200M", "1.5G", "500K" (exponents like "1e9" are not); "10Gbps",
/// "10Gbit", "10Gb/s" are; "100kpps" and "2Mpps" are packet rates. "0" is a zero rate.
pub fn parse_rate(s: &str) -> Result<Rate, UnitError> {
    let (value, rest) = split_number(s, RATE_HELP)?;
    let lower = rest.to_ascii_lowercase();
    let (prefix, packets) = if let Some(p) = lower.strip_suffix("pps") {
        (p, true)
    } else {
        let p = ["bps", "bit/s", "bits/s", "bit", "b/s", "b"]
            .iter()
            .find_map(|unit| lower.strip_suffix(unit))
            .unwrap_or(&lower);
        (p, false)
    };
    let mult = si_multiplier(prefix).ok_or_else(|| UnitError::UnknownUnit {
        input: s.trim().to_string(),
        suffix: rest.to_string(),
        expected: RATE_HELP,
    })?;
    let v = value * mult;
    if !v.is_finite() {
        return Err(UnitError::OutOfRange {
            input: s.trim().to_string(),
            why: "the rate is not a finite number",
        });
    }
    Ok(if packets {
        Rate::PacketsPerSec(v)
    } else {
        Rate::BitsPerSec(v)
    })
}

/// Parses a packet rate for the open-loop probe: "10000", "50k", "50kpps", "1.5Mpps"
/// are all packets per second; a bit rate ("10Mbps") is refused with an explanation.
pub fn parse_packet_rate(s: &str) -> Result<f64, UnitError> {
    let (value, rest) = split_number(s, PPS_HELP)?;
    let lower = rest.to_ascii_lowercase();
    let prefix = lower.strip_suffix("pps").unwrap_or(&lower);
    let mult = si_multiplier(prefix).ok_or_else(|| UnitError::UnknownUnit {
        input: s.trim().to_string(),
        suffix: rest.to_string(),
        expected: PPS_HELP,
    })?;
    let v = value * mult;
    if !(v.is_finite() && v > 0.0) {
        return Err(UnitError::OutOfRange {
            input: s.trim().to_string(),
            why: "the packet rate must be above zero",
        });
    }
    Ok(v)
}

/// Parses a duration: "500ms", "10s", "2m", "1h", "250us", "100ns"; a bare number is
/// seconds ("1.5" = 1.5 s).
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    let (value, rest) = split_number(s, DURATION_HELP)?;
    let secs_per_unit = match rest.to_ascii_lowercase().as_str() {
        "" | "s" | "sec" | "secs" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        "m" | "min" | "mins" => 60.0,
        "h" | "hr" | "hour" | "hours" => 3600.0,
        _ => {
            return Err(UnitError::UnknownUnit {
                input: s.trim().to_string(),
                suffix: rest.to_string(),
                expected: DURATION_HELP,
            })
        }
    };
    Duration::try_from_secs_f64(value * secs_per_unit).map_err(|_| UnitError::OutOfRange {
        input: s.trim().to_string(),
        why: "the duration is too long",
    })
}

/// A stepped range of rates "FROM:TO:STEP" (e.g. "0:10G:1G"), or a single rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateSteps {
    /// First level.
    pub from: Rate,
    /// Last level (included when the steps land on it).
    pub to: Rate,
    /// Increment between levels; zero for a single level.
    pub step: Rate,
}

impl RateSteps {
    /// The levels from `from` to `to` inclusive, in the unit of `from`.
    pub fn levels(&self) -> Vec<Rate> {
        let (from, to, step) = (raw(self.from), raw(self.to), raw(self.step));
        if step <= 0.0 || to <= from {
            return vec![self.from];
        }
        let n = ((to - from) / step + 1e-9).floor() as usize;
        (0..=n)
            .map(|i| with_value(self.from, from + i as f64 * step))
            .collect()
    }
}

fn raw(r: Rate) -> f64 {
    match r {
        Rate::BitsPerSec(v) | Rate::PacketsPerSec(v) => v,
    }
}

fn with_value(kind: Rate, v: f64) -> Rate {
    match kind {
        Rate::BitsPerSec(_) => Rate::BitsPerSec(v),
        Rate::PacketsPerSec(_) => Rate::PacketsPerSec(v),
    }
}

/// Parses "FROM:TO:STEP" or a single rate. All three must be the same kind of rate
/// (all bit/s or all pps), TO not below FROM, and STEP above zero.
pub fn parse_rate_steps(s: &str) -> Result<RateSteps, UnitError> {
    let parts: Vec<&str> = s.split(':').collect();
    let bad = |why| UnitError::OutOfRange {
        input: s.trim().to_string(),
        why,
    };
    match parts.as_slice() {
        [one] => {
            let r = parse_rate(one)?;
            Ok(RateSteps {
                from: r,
                to: r,
                step: r.scaled(0.0),
            })
        }
        [a, b, c] => {
            let (from, to, step) = (parse_rate(a)?, parse_rate(b)?, parse_rate(c)?);
            let same = |x: Rate, y: Rate| std::mem::discriminant(&x) == std::mem::discriminant(&y);
            if !same(from, to) || !same(from, step) {
                return Err(bad(
                    "FROM, TO and STEP must all be bit rates or all packet rates",
                ));
            }
            if raw(to) < raw(from) {
                return Err(bad("TO is below FROM"));
            }
            if raw(step) <= 0.0 && raw(to) > raw(from) {
                return Err(bad("STEP must be above zero"));
            }
            if raw(step) > 0.0 && (raw(to) - raw(from)) / raw(step) > 1000.0 {
                return Err(bad("more than 1000 steps"));
            }
            Ok(RateSteps { from, to, step })
        }
        _ => Err(bad("expected a rate or FROM:TO:STEP like 0:10G:1G")),
    }
}

/// Formats a number with a decimal SI prefix: 1.5e9 → "1.50G".
pub fn format_si(v: f64) -> String {
    // Pick the prefix by the value as it will be printed with two decimals: a value
    // that rounds up to 1000 of a prefix takes the next one ("1.00G", not "1000.00M").
    let (div, p) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")]
        .into_iter()
        .find(|&(div, _)| v.abs() >= div * 0.999_995)
        .unwrap_or((1.0, ""));
    format!("{:.2}{p}", v / div)
}

/// Formats bits per second the way network tools do: "9.41 Gbit/s".
pub fn format_bits_per_sec(bps: f64) -> String {
    let s = format_si(bps);
    let split = s.trim_end_matches(char::is_alphabetic).len();
    format!("{} {}bit/s", &s[..split], &s[split..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn si_prefix_follows_the_rounded_value() {
        assert_eq!(format_si(999_999_999.0), "1.00G");
        assert_eq!(format_si(999_990_000.0), "999.99M");
        assert_eq!(format_si(1.5e9), "1.50G");
        assert_eq!(format_si(0.0), "0.00");
        assert_eq!(format_si(-2e6), "-2.00M");
        assert_eq!(format_bits_per_sec(1_000_001_427.0), "1.00 Gbit/s");
    }

    #[test]
    fn bit_rates() {
        assert_eq!(parse_rate("10G"), Ok(Rate::BitsPerSec(10e9)));
        assert_eq!(parse_rate("200M"), Ok(Rate::BitsPerSec(200e6)));
        assert_eq!(parse_rate("1.5G"), Ok(Rate::BitsPerSec(1.5e9)));
        assert_eq!(parse_rate("500K"), Ok(Rate::BitsPerSec(500e3)));
        assert_eq!(parse_rate("500k"), Ok(Rate::BitsPerSec(500e3)));
        assert_eq!(parse_rate("10Gbps"), Ok(Rate::BitsPerSec(10e9)));
        assert_eq!(parse_rate("10 Gbit/s"), Ok(Rate::BitsPerSec(10e9)));
        assert_eq!(parse_rate("1_000"), Ok(Rate::BitsPerSec(1000.0)));
        assert_eq!(parse_rate("0"), Ok(Rate::BitsPerSec(0.0)));
    }

    #[test]
    fn packet_rates() {
        assert_eq!(parse_rate("100kpps"), Ok(Rate::PacketsPerSec(100e3)));
        assert_eq!(parse_rate("2Mpps"), Ok(Rate::PacketsPerSec(2e6)));
        assert_eq!(parse_rate("50pps"), Ok(Rate::PacketsPerSec(50.0)));
    }

    #[test]
    fn rate_conversions() {
        let r = Rate::BitsPerSec(8e6);
        assert!((r.packets_per_sec(1000) - 1000.0).abs() < 1e-9);
        let p = Rate::PacketsPerSec(1000.0);
        assert!((p.bits_per_sec(1000) - 8e6).abs() < 1e-6);
        assert_eq!(r.scaled(0.5), Rate::BitsPerSec(4e6));
        assert_eq!(r.to_string(), "8.00 Mbit/s");
        assert_eq!(p.to_string(), "1.00Kpps");
    }

    #[test]
    fn rate_errors_are_readable() {
        let e = parse_rate("10X").unwrap_err();
        assert!(matches!(e, UnitError::UnknownUnit { .. }));
        assert!(e.to_string().contains("unknown unit `X`"), "{e}");
        assert!(e.to_string().contains("200M"), "{e}");
        let e = parse_rate("fast").unwrap_err();
        assert!(matches!(e, UnitError::NotANumber { .. }), "{e}");
        assert!(matches!(parse_rate(""), Err(UnitError::Empty { .. })));
        assert!(matches!(
            parse_rate("-5M"),
            Err(UnitError::NotANumber { .. })
        ));
        assert!(matches!(
            parse_rate("1.2.3M"),
            Err(UnitError::NotANumber { .. })
        ));
    }

    #[test]
    fn packet_rates_for_the_probe() {
        assert_eq!(parse_packet_rate("10000"), Ok(10_000.0));
        assert_eq!(parse_packet_rate("50k"), Ok(50_000.0));
        assert_eq!(parse_packet_rate("50kpps"), Ok(50_000.0));
        assert_eq!(parse_packet_rate("1.5Mpps"), Ok(1_500_000.0));
        let e = parse_packet_rate("10Mbps").unwrap_err();
        assert!(e.to_string().contains("packets per second"), "{e}");
        assert!(parse_packet_rate("0").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        let e = parse_duration("10 parsecs").unwrap_err();
        assert!(e.to_string().contains("500ms"), "{e}");
        assert!(matches!(
            parse_duration("1e400"),
            Err(UnitError::UnknownUnit { .. })
        ));
    }

    #[test]
    fn steps() {
        let s = parse_rate_steps("0:10G:1G").expect("valid steps");
        let levels = s.levels();
        assert_eq!(levels.len(), 11);
        assert_eq!(levels[0], Rate::BitsPerSec(0.0));
        assert_eq!(levels[10], Rate::BitsPerSec(10e9));
        let one = parse_rate_steps("5G").expect("single level");
        assert_eq!(one.levels(), vec![Rate::BitsPerSec(5e9)]);
        assert!(parse_rate_steps("10G:0:1G").is_err());
        assert!(parse_rate_steps("0:10G:1kpps").is_err());
        assert!(parse_rate_steps("0:10G:0").is_err());
        assert!(parse_rate_steps("1:2").is_err());
        assert!(parse_rate_steps("0:10G:1").is_err()); // 1e10 steps
    }
}
