//! The formatters: numbers with SI prefixes, rates, times.

use std::time::Duration;

/// Formats a number with a decimal SI prefix and two decimals: 1.5e9 → `1.50G`.
pub fn format_si(v: f64) -> String {
    // Pick the prefix by the value as it will be printed with two decimals: a value
    // that rounds up to 1000 of a prefix takes the next one ("1.00G", not "1000.00M").
    let (div, p) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")]
        .into_iter()
        .find(|&(div, _)| v.abs() >= div * 0.999_995)
        .unwrap_or((1.0, ""));
    format!("{:.2}{p}", v / div)
}

/// Formats a rate of `unit` per second: `format_per_sec(2.5e6, "ops")` → `2.50 Mops/s`.
pub fn format_per_sec(v: f64, unit: &str) -> String {
    let s = format_si(v);
    let split = s.trim_end_matches(char::is_alphabetic).len();
    format!("{} {}{unit}/s", &s[..split], &s[split..])
}

/// Formats bits per second the way network tools do: `9.41 Gbit/s`.
pub fn format_bits_per_sec(bps: f64) -> String {
    format_per_sec(bps, "bit")
}

/// Formats a byte count with a binary prefix and one decimal, as memory is sized:
/// `512 B`, `4.0 KiB`, `256.0 MiB`, `1.5 GiB`.
pub fn format_bytes(bytes: f64) -> String {
    let (div, unit) = [
        (1u64 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ]
    .into_iter()
    .map(|(d, u)| (d as f64, u))
    .find(|&(d, _)| bytes.abs() >= d * 0.999_95)
    .unwrap_or((1.0, "B"));
    if unit == "B" {
        format!("{bytes:.0} B")
    } else {
        format!("{:.1} {unit}", bytes / div)
    }
}

/// Formats nanoseconds for people with four significant digits: `850 ns`,
/// `41.20 µs`, `3.050 ms`, `1.235 s` (whole nanoseconds below a microsecond).
pub fn format_ns(ns: f64) -> String {
    if ns.abs() < 999.5 {
        return format!("{ns:.0} ns");
    }
    let mut scaled = ns / 1e3;
    for unit in ["µs", "ms", "s"] {
        let decimals = match scaled.abs() {
            a if a < 9.9995 => 3,
            a if a < 99.995 => 2,
            _ => 1,
        };
        if scaled.abs() < 999.95 || unit == "s" {
            return format!("{scaled:.decimals$} {unit}");
        }
        scaled /= 1e3;
    }
    unreachable!("the loop returns at its last unit")
}

/// Formats seconds as [`format_ns`] does.
pub fn format_secs(s: f64) -> String {
    format_ns(s * 1e9)
}

/// Formats a planned or estimated length: `500 ms` below a second, `12.5 s` below ten
/// minutes, `15.0 min` above.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else if s < 600.0 {
        format!("{s:.1} s")
    } else {
        format!("{:.1} min", s / 60.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_take_a_binary_prefix() {
        assert_eq!(format_bytes(512.0), "512 B");
        assert_eq!(format_bytes(4096.0), "4.0 KiB");
        assert_eq!(format_bytes(256.0 * 1048576.0), "256.0 MiB");
        assert_eq!(format_bytes(1.5 * 1073741824.0), "1.5 GiB");
        // Just under a MiB prints as one, not as 1024.0 KiB.
        assert_eq!(format_bytes(1048575.9), "1.0 MiB");
    }

    #[test]
    fn si_prefix_follows_the_rounded_value() {
        assert_eq!(format_si(999_999_999.0), "1.00G");
        assert_eq!(format_si(999_990_000.0), "999.99M");
        assert_eq!(format_si(1.5e9), "1.50G");
        assert_eq!(format_si(0.0), "0.00");
        assert_eq!(format_si(-2e6), "-2.00M");
        assert_eq!(format_bits_per_sec(1_000_001_427.0), "1.00 Gbit/s");
        assert_eq!(format_bits_per_sec(64e6), "64.00 Mbit/s");
        assert_eq!(format_per_sec(2.5e6, "ops"), "2.50 Mops/s");
        assert_eq!(format_per_sec(12.0, "ops"), "12.00 ops/s");
    }

    #[test]
    fn times_have_four_significant_digits() {
        assert_eq!(format_ns(850.0), "850 ns");
        assert_eq!(format_ns(41_200.0), "41.20 µs");
        assert_eq!(format_ns(1_300.5), "1.300 µs");
        assert_eq!(format_ns(3_050_000.0), "3.050 ms");
        assert_eq!(format_ns(123_456_789.0), "123.5 ms");
        assert_eq!(format_ns(1_234_500_001.0), "1.235 s");
        assert_eq!(format_ns(7200e9), "7200.0 s");
        // 999.96 µs rounds to 1000.0 µs: printed as 1.000 ms.
        assert_eq!(format_ns(999_960.0), "1.000 ms");
        assert_eq!(format_ns(999.7), "1.000 µs");
        assert_eq!(format_secs(0.5), "500.0 ms");
        assert_eq!(format_secs(2e-9), "2 ns");
    }

    #[test]
    fn plan_lengths() {
        assert_eq!(format_duration(Duration::from_millis(500)), "500 ms");
        assert_eq!(format_duration(Duration::from_millis(12_500)), "12.5 s");
        assert_eq!(format_duration(Duration::from_secs(900)), "15.0 min");
    }
}
