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

/// The time a [`timestamp`] names (`2026-11-22T10:44:09.123Z`; the milliseconds may
/// be left out); `None` for any other text. A campaign reads its rounds' times back
/// with it (their held time, a temporal lane's schedule).
pub fn parse_timestamp(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        (!t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()))
            .then(|| t.parse().ok())
            .flatten()
    };
    let seps = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if b.len() < 20 || b[b.len() - 1] != b'Z' || seps.iter().any(|&(i, c)| b[i] != c) {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let ms = match &s[19..s.len() - 1] {
        "" => 0,
        frac if frac.len() == 4 && frac.starts_with('.') => num(20..23)?,
        _ => return None,
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    // Days from civil (Howard Hinnant), the inverse of `civil`.
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let ms = ((days * 86_400 + h * 3600 + mi * 60 + sec) * 1000 + ms).max(0);
    Some(UNIX_EPOCH + std::time::Duration::from_millis(ms as u64))
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
        assert_eq!(parse_timestamp("2026-11-22T10:44:09.123Z"), Some(t));
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Some(UNIX_EPOCH));
        assert_eq!(
            parse_timestamp("2024-02-29T23:59:59.999Z"),
            Some(UNIX_EPOCH + Duration::from_millis(1_709_251_199_999))
        );
        for bad in [
            "",
            "2026-11-22 10:44:09Z",
            "2026-13-01T00:00:00Z",
            "2026-11-22T10:44:09.1Z",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
    }
}
