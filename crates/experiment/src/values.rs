//! Parsing and checking of single values of an experiment file: units, ranges,
//! policies, names. Each returns a message for a person; the caller attaches the
//! value's location.

use std::str::FromStr;
use std::time::Duration;

use serde::Serializer;

use super::file::RangeOrList;
use super::OnFailure;

/// Serializes a duration as whole milliseconds.
pub(super) fn serialize_ms<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(nnb_units::millis(*d))
}

/// Serializes an optional duration as whole milliseconds (or null).
pub(super) fn serialize_opt_ms<S: Serializer>(
    d: &Option<Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => serialize_ms(d, s),
        None => s.serialize_none(),
    }
}

/// A duration with its unit ("10s", "500ms", "2m"; zero allowed), read by
/// [`nnb_units::parse_duration`]: a bare number is an error naming the unit to add.
pub(super) fn duration(s: &str) -> Result<Duration, String> {
    nnb_units::parse_duration(s).map_err(|e| e.to_string())
}

/// A bit rate above zero ("200M", "8MB/s" = 64 Mbit/s), in bit/s.
pub(super) fn positive_rate(s: &str) -> Result<f64, String> {
    nnb_units::parse_positive_bit_rate(s).map_err(|e| e.to_string())
}

/// A rate `tc` shapes an emulated link or a tenant to, in bit/s: between
/// [`MIN_SHAPED_RATE_BPS`](crate::tenant::MIN_SHAPED_RATE_BPS) and
/// [`MAX_SHAPED_RATE_BPS`](crate::tenant::MAX_SHAPED_RATE_BPS).
pub(super) fn shaped_rate(s: &str) -> Result<f64, String> {
    use crate::tenant::{MAX_SHAPED_RATE_BPS as MAX, MIN_SHAPED_RATE_BPS as MIN};
    let bps = positive_rate(s)?;
    if (MIN..=MAX).contains(&bps) {
        Ok(bps)
    } else {
        Err(format!(
            "a shaped rate is {} to {}, got {}",
            nnb_units::format_bits_per_sec(MIN),
            nnb_units::format_bits_per_sec(MAX),
            nnb_units::format_bits_per_sec(bps)
        ))
    }
}

/// "retry", "retry N", "skip" or "abort".
pub(super) fn on_failure(s: &str) -> Result<OnFailure, String> {
    let words: Vec<&str> = s.split_whitespace().collect();
    match words.as_slice() {
        ["skip"] => Ok(OnFailure::Skip),
        ["abort"] => Ok(OnFailure::Abort),
        ["retry"] => Ok(OnFailure::Retry { times: 1 }),
        ["retry", n] => match n.parse::<u32>() {
            Ok(0) => Err("`retry 0` never retries: write \"skip\"".to_string()),
            Ok(times) => Ok(OnFailure::Retry { times }),
            Err(_) => Err(format!(
                "`{n}` is not a retry count: write e.g. \"retry 2\""
            )),
        },
        _ => Err(format!(
            "unknown failure policy `{s}`: expected \"retry N\", \"skip\" or \"abort\""
        )),
    }
}

/// Tenant names appear in step ids, file names and cgroup paths: letters, digits,
/// `-`, `_`, `.`, not starting with `.` (so never `.` or `..`).
pub(super) fn tenant_name(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if s == crate::tenant::ENDPOINT {
        Err("`endpoint` is reserved for the agent that serves probes and load".to_string())
    } else if ok {
        Ok(())
    } else {
        Err(format!(
            "tenant name `{s}` may only hold letters, digits, `-`, `_` and `.`, and may not \
             start with `.`"
        ))
    }
}

/// A workload nnb-burn knows.
pub(super) fn workload(s: &str) -> Result<String, String> {
    nnb_burn::workload::Workload::from_str(s)
        .map(|w| w.name().to_string())
        .map_err(|e| e.to_string())
}

/// A pinning strategy nnb-burn knows.
pub(super) fn pin(s: &str) -> Result<String, String> {
    nnb_burn::placement::PinStrategy::from_str(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// Pinned threads need a CPU each: more threads than the tenant's vCPUs only with
/// `pin = "none"` (then they share its CPUs, as an overcommitted tenant does).
pub(super) fn fits(threads: usize, vcpus: usize, pin: &str) -> Result<(), String> {
    if threads > vcpus && pin != "none" {
        Err(format!(
            "{threads} pinned threads do not fit the test tenant's {vcpus} vCPUs: \
             give it more vCPUs or set pin = \"none\" to share them"
        ))
    } else {
        Ok(())
    }
}

/// A UDP payload that holds nnb's 32-byte header and fits a datagram.
pub(super) fn msg_size(n: usize) -> Result<usize, String> {
    use nnb_netlat::wire::{HEADER_LEN, MAX_UDP_PAYLOAD};
    if (HEADER_LEN..=MAX_UDP_PAYLOAD).contains(&n) {
        Ok(n)
    } else {
        Err(format!(
            "msg_size {n} is out of range: {HEADER_LEN} to {MAX_UDP_PAYLOAD} bytes"
        ))
    }
}

/// Thread counts from a range or a list; each at least 1.
pub(super) fn count_list(v: &RangeOrList<usize>) -> Result<Vec<usize>, String> {
    let list = match v {
        RangeOrList::List(l) => l.clone(),
        RangeOrList::Range(s) => nnb_units::parse_count_steps(s)
            .map_err(|e| e.to_string())?
            .levels(),
    };
    if list.is_empty() {
        return Err("the list is empty".to_string());
    }
    if list.contains(&0) {
        return Err("thread counts must be at least 1".to_string());
    }
    Ok(list)
}

/// Bit rates from a range ("0:200M:50M") or a list (["0", "100M"]).
pub(super) fn rate_list(v: &RangeOrList<String>) -> Result<Vec<f64>, String> {
    let list = match v {
        RangeOrList::List(l) => l
            .iter()
            .map(|s| nnb_units::parse_bit_rate(s))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?,
        RangeOrList::Range(s) => nnb_units::parse_steps(s, nnb_units::parse_bit_rate, None)
            .map_err(|e| e.to_string())?
            .levels(),
    };
    if list.is_empty() {
        return Err("the list is empty".to_string());
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_range_includes_the_end() {
        let v = rate_list(&RangeOrList::Range("0:200M:50M".into())).unwrap_or_default();
        assert_eq!(v, vec![0.0, 50e6, 100e6, 150e6, 200e6]);
    }

    #[test]
    fn count_range_forms() {
        let r = |s: &str| count_list(&RangeOrList::Range(s.into()));
        assert_eq!(r("1..4"), Ok(vec![1, 2, 3, 4]));
        assert_eq!(r("2:8:2"), Ok(vec![2, 4, 6, 8]));
        assert!(r("4..1").is_err());
        assert!(r("0..2").is_err());
        assert!(r("1..x").is_err());
    }

    #[test]
    fn byte_rates_and_bare_durations() {
        // 8 MB/s = 8e6 bytes * 8 bits.
        assert_eq!(positive_rate("8MB/s"), Ok(64e6));
        let e = duration("500").unwrap_err();
        assert!(e.contains("`500s` or `500ms`"), "{e}");
        assert!(rate_list(&RangeOrList::Range("0:10G:1".into())).is_err());
    }

    #[test]
    fn failure_policies() {
        assert_eq!(on_failure("retry 3"), Ok(OnFailure::Retry { times: 3 }));
        assert_eq!(on_failure("skip"), Ok(OnFailure::Skip));
        assert!(on_failure("retry 0").is_err());
        assert!(on_failure("later").is_err());
    }
}
