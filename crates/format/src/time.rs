//! Times as the format writes them: RFC 3339 UTC with milliseconds (`started_at`,
//! sessions) and the compact stamp that starts a run id.

use std::time::{SystemTime, UNIX_EPOCH};

/// RFC 3339 UTC time with milliseconds, e.g. `2026-11-22T10:44:09.123Z`.
pub fn timestamp(at: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = civil(at);
    let ms = at
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_millis());
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
}

/// The UTC time a run id starts with, e.g. `20261122T104409Z` (a run id is this, a
/// dash and a random suffix, so run ids sort by start time).
pub fn run_id_stamp(at: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = civil(at);
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z")
}

/// (year, month, day, hour, minute, second) in UTC (Howard Hinnant's
/// days-to-civil algorithm).
fn civil(at: SystemTime) -> (i64, u32, u32, u32, u32, u32) {
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        (rem % 3600 / 60) as u32,
        (rem % 60) as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_utc_rfc3339() {
        let t = UNIX_EPOCH + Duration::from_millis(1_795_344_249_123);
        assert_eq!(timestamp(t), "2026-11-22T10:44:09.123Z");
        assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(run_id_stamp(t), "20261122T104409Z");
    }
}
