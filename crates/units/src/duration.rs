//! Durations: `500ms`, `2s`, `1.5s`, `10min`, `1h`, `250us`, `100ns`.

use std::time::Duration;

use crate::number::split_number;
use crate::UnitError;

const KIND: &str = "duration";

/// The longest duration any flag or experiment key accepts: 7 days. Longer is no
/// benchmark anyone waits for, and a bound keeps every deadline's arithmetic (start
/// plus duration, in nanoseconds or clock ticks) far from overflow, so a typo like
/// `10000000h` is refused instead of wrapping into an empty run reported as done.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// A duration as whole milliseconds, as nnb's job requests and records carry them
/// (saturating at `u64::MAX`, which no duration within [`MAX_DURATION`] reaches).
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
const EXPECTED: &str = "a duration like 100ns, 250us, 500ms, 1.5s, 10m (or 10min) or 1h";

/// Parses a duration: a number and one of the units `ns`, `us`/`µs`, `ms`,
/// `s`/`sec`, `m`/`min`, `h`/`hour` (plural forms too). Zero is allowed.
///
/// A bare number is refused with a message naming the units to add: it used to mean
/// seconds in some places, and `settle = "500"` is more likely a typo for `500ms`.
/// Only a bare `0` is accepted, being zero in every unit. Negative values, values
/// that are not numbers and durations beyond [`MAX_DURATION`] are refused.
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    let (value, unit) = split_number(s, KIND, EXPECTED)?;
    let input = || s.trim().to_string();
    let secs_per_unit = match unit {
        "" if value == 0.0 => 1.0,
        "" => {
            return Err(UnitError::MissingUnit {
                kind: KIND,
                input: input(),
                hint: format!("`{0}s` or `{0}ms`", s.trim()),
            })
        }
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" | "sec" | "secs" => 1.0,
        "m" | "min" | "mins" => 60.0,
        "h" | "hour" | "hours" => 3600.0,
        _ => {
            return Err(UnitError::UnknownUnit {
                kind: KIND,
                input: input(),
                suffix: unit.to_string(),
                expected: EXPECTED,
            })
        }
    };
    let too_long = || UnitError::OutOfRange {
        kind: KIND,
        input: input(),
        why: "the duration is longer than the 7 days (168h) nnb accepts",
    };
    let d = Duration::try_from_secs_f64(value * secs_per_unit).map_err(|_| too_long())?;
    if d > MAX_DURATION {
        return Err(too_long());
    }
    Ok(d)
}

/// Parses a duration as [`parse_duration`] does and refuses zero: for run lengths,
/// intervals and thresholds, where zero would mean "nothing" or "forever".
pub fn parse_positive_duration(s: &str) -> Result<Duration, UnitError> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err(UnitError::OutOfRange {
            kind: KIND,
            input: s.trim().to_string(),
            why: "the duration must be above zero",
        });
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_are_whole_and_saturate() {
        assert_eq!(millis(Duration::from_micros(2_999)), 2);
        assert_eq!(millis(MAX_DURATION), 7 * 24 * 3600 * 1000);
        assert_eq!(millis(Duration::MAX), u64::MAX);
    }

    #[test]
    fn every_unit() {
        assert_eq!(parse_duration("100ns"), Ok(Duration::from_nanos(100)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("250µs"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        // 10 min = 600 s, however spelled.
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("10min"), Ok(Duration::from_secs(600)));
        // 1 h = 60 * 60 s.
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("2 hours"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration(" 1_000 ms "), Ok(Duration::from_secs(1)));
    }

    #[test]
    fn zero_is_a_duration_but_not_a_positive_one() {
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        let e = parse_positive_duration("0s").unwrap_err();
        assert!(e.to_string().starts_with("bad duration `0s`"), "{e}");
        assert!(e.to_string().contains("above zero"), "{e}");
        assert_eq!(parse_positive_duration("1ms"), Ok(Duration::from_millis(1)));
    }

    #[test]
    fn a_bare_number_names_the_units_to_add() {
        let e = parse_duration("500").unwrap_err();
        assert!(matches!(e, UnitError::MissingUnit { .. }), "{e}");
        assert!(e.to_string().contains("`500s` or `500ms`"), "{e}");
        assert!(parse_duration("1.5").is_err());
    }

    #[test]
    fn nonsense_is_refused_with_the_grammar() {
        let e = parse_duration("10 parsecs").unwrap_err();
        assert!(e.to_string().contains("500ms"), "{e}");
        assert!(e.to_string().contains("unknown unit `parsecs`"), "{e}");
        assert!(matches!(
            parse_duration("1e400"),
            Err(UnitError::UnknownUnit { .. })
        ));
        for bad in ["", "-1s", "s", "nan", "inf", "1.2.3s", "abc"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        // 1e30 hours does not fit a Duration (u64 seconds).
        let huge = format!("{}h", "1".repeat(31));
        assert!(matches!(
            parse_duration(&huge),
            Err(UnitError::OutOfRange { .. })
        ));
        // Reliability review M10/L18: a week is the longest; beyond it the message
        // says "too long", never "expected a number".
        assert_eq!(parse_duration("168h"), Ok(MAX_DURATION));
        assert!(parse_duration("7d").is_err());
        for long in ["169h", "100000h", "10000000h", "604801s"] {
            let err = parse_duration(long).unwrap_err().to_string();
            assert!(err.contains("longer than the 7 days"), "{long}: {err}");
        }
    }
}
