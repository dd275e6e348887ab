//! Rates: bits per second (`10G`, `8Mbit/s`), bytes per second (`8MB/s`) and
//! packets per second (`100kpps`).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::format::{format_bits_per_sec, format_si};
use crate::number::{si_multiplier, split_number};
use crate::UnitError;

const KIND: &str = "rate";
const EXPECTED: &str = "a bit rate like 500K, 200M, 1.5G, 10Gbit/s, a byte rate like 8MB/s, \
                        or a packet rate like 100kpps";
const PPS_KIND: &str = "packet rate";
const PPS_EXPECTED: &str = "a packet rate like 10000, 50k or 50kpps (packets per second)";

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
        self.with_value(self.value() * factor)
    }

    /// True for a zero rate (no traffic at all).
    pub fn is_zero(&self) -> bool {
        self.value() == 0.0
    }

    /// The number, in this rate's own unit (bit/s or packets/s).
    pub fn value(&self) -> f64 {
        match *self {
            Rate::BitsPerSec(v) | Rate::PacketsPerSec(v) => v,
        }
    }

    /// A rate of the same kind with another number.
    pub fn with_value(&self, v: f64) -> Rate {
        match self {
            Rate::BitsPerSec(_) => Rate::BitsPerSec(v),
            Rate::PacketsPerSec(_) => Rate::PacketsPerSec(v),
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

/// What a rate's unit counts.
#[derive(Clone, Copy)]
enum Counts {
    Bits,
    Bytes,
    Packets,
}

/// Units after the SI prefix. Case matters only between `b` (bit) and `B` (byte);
/// spelled-out words are compared case-insensitively.
fn split_unit(rest: &str) -> (&str, Counts) {
    const EXACT: [(&str, Counts); 6] = [
        ("bps", Counts::Bits),
        ("b/s", Counts::Bits),
        ("b", Counts::Bits),
        ("Bps", Counts::Bytes),
        ("B/s", Counts::Bytes),
        ("B", Counts::Bytes),
    ];
    const WORDS: [(&str, Counts); 9] = [
        ("pps", Counts::Packets),
        ("bit/s", Counts::Bits),
        ("bits/s", Counts::Bits),
        ("bit", Counts::Bits),
        ("bits", Counts::Bits),
        ("byte/s", Counts::Bytes),
        ("bytes/s", Counts::Bytes),
        ("byte", Counts::Bytes),
        ("bytes", Counts::Bytes),
    ];
    let lower = rest.to_ascii_lowercase();
    for (word, counts) in WORDS {
        if lower.ends_with(word) {
            return (&rest[..rest.len() - word.len()], counts);
        }
    }
    for (unit, counts) in EXACT {
        if let Some(prefix) = rest.strip_suffix(unit) {
            return (prefix, counts);
        }
    }
    (rest, Counts::Bits)
}

/// Parses a rate. Decimal SI prefixes (`k`, `M`, `G`, `T`; k = 1000). No unit, `b`,
/// `bit`, `bps`, `b/s`, `bit/s` mean bits per second (`10G`, `8Mbit/s`, `8Mbps`);
/// `B`, `Bps`, `B/s`, `byte/s` bytes per second, stored as bits (`8MB/s` =
/// 64 Mbit/s); `pps` packets per second (`100kpps`). `0` is a zero rate; exponents
/// (`1e9`) and negative values are refused.
pub fn parse_rate(s: &str) -> Result<Rate, UnitError> {
    let (value, rest) = split_number(s, KIND, EXPECTED)?;
    let (prefix, counts) = split_unit(rest);
    let mult = si_multiplier(prefix.trim()).ok_or_else(|| UnitError::UnknownUnit {
        kind: KIND,
        input: s.trim().to_string(),
        suffix: rest.to_string(),
        expected: EXPECTED,
    })?;
    let v = value * mult;
    if !v.is_finite() {
        return Err(UnitError::OutOfRange {
            kind: KIND,
            input: s.trim().to_string(),
            why: "the rate is not a finite number",
        });
    }
    Ok(match counts {
        Counts::Bits => Rate::BitsPerSec(v),
        Counts::Bytes => Rate::BitsPerSec(v * 8.0),
        Counts::Packets => Rate::PacketsPerSec(v),
    })
}

/// Parses a bit (or byte) rate as [`parse_rate`] does and returns bits per second; a
/// packet rate is refused. Zero is allowed.
pub fn parse_bit_rate(s: &str) -> Result<f64, UnitError> {
    match parse_rate(s)? {
        Rate::BitsPerSec(bps) => Ok(bps),
        Rate::PacketsPerSec(_) => Err(UnitError::OutOfRange {
            kind: KIND,
            input: s.trim().to_string(),
            why: "this is a packet rate: give a bit rate like 200M",
        }),
    }
}

/// Parses a bit rate as [`parse_bit_rate`] does and refuses zero.
pub fn parse_positive_bit_rate(s: &str) -> Result<f64, UnitError> {
    let bps = parse_bit_rate(s)?;
    if bps > 0.0 {
        Ok(bps)
    } else {
        Err(UnitError::OutOfRange {
            kind: KIND,
            input: s.trim().to_string(),
            why: "the rate must be above 0",
        })
    }
}

/// Parses a packet rate for the open-loop probe: `10000`, `50k`, `50kpps`, `1.5Mpps`
/// are all packets per second, above zero; a bit rate (`10Mbps`) is refused with an
/// explanation.
pub fn parse_packet_rate(s: &str) -> Result<f64, UnitError> {
    let (value, rest) = split_number(s, PPS_KIND, PPS_EXPECTED)?;
    let prefix = rest
        .strip_suffix("pps")
        .or_else(|| rest.strip_suffix("PPS"))
        .unwrap_or(rest);
    let mult = si_multiplier(prefix.trim()).ok_or_else(|| UnitError::UnknownUnit {
        kind: PPS_KIND,
        input: s.trim().to_string(),
        suffix: rest.to_string(),
        expected: PPS_EXPECTED,
    })?;
    let v = value * mult;
    if !(v.is_finite() && v > 0.0) {
        return Err(UnitError::OutOfRange {
            kind: PPS_KIND,
            input: s.trim().to_string(),
            why: "the packet rate must be above zero",
        });
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_rates() {
        assert_eq!(parse_rate("10G"), Ok(Rate::BitsPerSec(10e9)));
        assert_eq!(parse_rate("1G"), Ok(Rate::BitsPerSec(1e9)));
        assert_eq!(parse_rate("200M"), Ok(Rate::BitsPerSec(200e6)));
        assert_eq!(parse_rate("1.5G"), Ok(Rate::BitsPerSec(1.5e9)));
        assert_eq!(parse_rate("500K"), Ok(Rate::BitsPerSec(500e3)));
        assert_eq!(parse_rate("500k"), Ok(Rate::BitsPerSec(500e3)));
        assert_eq!(parse_rate("10Gbps"), Ok(Rate::BitsPerSec(10e9)));
        assert_eq!(parse_rate("10Gbit/s"), Ok(Rate::BitsPerSec(10e9)));
        assert_eq!(parse_rate("10 Gbit/s"), Ok(Rate::BitsPerSec(10e9)));
        assert_eq!(parse_rate("1_000"), Ok(Rate::BitsPerSec(1000.0)));
        assert_eq!(parse_rate("0"), Ok(Rate::BitsPerSec(0.0)));
        // Every spelling of eight megabits per second.
        for s in ["8Mbit/s", "8Mbps", "8M", "8Mb/s", "8Mb", "8 Mbits/s"] {
            assert_eq!(parse_rate(s), Ok(Rate::BitsPerSec(8e6)), "{s}");
        }
    }

    #[test]
    fn byte_rates_are_eight_times_the_bits() {
        // 8 MB/s = 8e6 bytes/s * 8 bit/byte = 64e6 bit/s.
        assert_eq!(parse_rate("8MB/s"), Ok(Rate::BitsPerSec(64e6)));
        assert_eq!(parse_rate("8MBps"), Ok(Rate::BitsPerSec(64e6)));
        assert_eq!(parse_rate("8MB"), Ok(Rate::BitsPerSec(64e6)));
        assert_eq!(parse_rate("8 Mbytes/s"), Ok(Rate::BitsPerSec(64e6)));
        // 1.25 GB/s = 10 Gbit/s.
        assert_eq!(parse_rate("1.25GB/s"), Ok(Rate::BitsPerSec(10e9)));
        // 100 B/s = 800 bit/s.
        assert_eq!(parse_rate("100B/s"), Ok(Rate::BitsPerSec(800.0)));
    }

    #[test]
    fn packet_rates() {
        assert_eq!(parse_rate("100kpps"), Ok(Rate::PacketsPerSec(100e3)));
        assert_eq!(parse_rate("10kpps"), Ok(Rate::PacketsPerSec(10e3)));
        assert_eq!(parse_rate("1000pps"), Ok(Rate::PacketsPerSec(1000.0)));
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
        assert!(parse_rate("8MiB/s").is_err());
        assert!(parse_rate("1e9").is_err());
    }

    #[test]
    fn bit_rates_only() {
        assert_eq!(parse_bit_rate("8MB/s"), Ok(64e6));
        assert_eq!(parse_bit_rate("0"), Ok(0.0));
        let e = parse_bit_rate("10kpps").unwrap_err();
        assert!(e.to_string().contains("packet rate"), "{e}");
        assert!(parse_positive_bit_rate("0").is_err());
        assert_eq!(parse_positive_bit_rate("1k"), Ok(1000.0));
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
}
