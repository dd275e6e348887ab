//! The formatters: numbers with SI prefixes, rates, times; and [`DisplayUnit`], the
//! one way a quantity is scaled for display: tables show a column in one fixed prefix
//! ([`DisplayUnit::table`]: bit rates in Mbit/s, bytes in MiB), plot axes and labels in
//! the prefix that fits their values ([`DisplayUnit::fit`]), both with the same
//! prefixes: decimal SI ones, and binary ones for bytes.

use std::time::Duration;

/// The prefixes a unit takes when its values are scaled for display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefixes {
    /// None: percentages, plain counts.
    None,
    /// Decimal SI prefixes, powers of 1000: `n`, `µ`, `m`, `k`, `M`, `G`, `T`.
    Decimal,
    /// Binary prefixes, powers of 1024: `Ki`, `Mi`, `Gi`, `Ti`. Bytes take them, as
    /// memory is sized, in tables and on plot axes alike.
    Binary,
}

impl Prefixes {
    /// The factor between two neighbouring prefixes.
    fn step(self) -> f64 {
        match self {
            Prefixes::Binary => 1024.0,
            Prefixes::None | Prefixes::Decimal => 1000.0,
        }
    }

    /// The lowest power of [`Prefixes::step`] with a prefix: a nano for decimal units,
    /// none below the unit for binary ones (there is no sub-byte).
    fn lowest(self) -> i32 {
        match self {
            Prefixes::Decimal => -3,
            Prefixes::None | Prefixes::Binary => 0,
        }
    }

    /// The prefix of `step^power`: `M` (decimal) or `Mi` (binary) for 2.
    fn name(self, power: i32) -> &'static str {
        match (self, power) {
            (Prefixes::Decimal, -3) => "n",
            (Prefixes::Decimal, -2) => "µ",
            (Prefixes::Decimal, -1) => "m",
            (Prefixes::Decimal, 1) => "k",
            (Prefixes::Decimal, 2) => "M",
            (Prefixes::Decimal, 3) => "G",
            (Prefixes::Decimal, 4) => "T",
            (Prefixes::Binary, 1) => "Ki",
            (Prefixes::Binary, 2) => "Mi",
            (Prefixes::Binary, 3) => "Gi",
            (Prefixes::Binary, 4) => "Ti",
            _ => "",
        }
    }
}

/// How the values of one quantity are shown to people: the symbol of the unit they
/// are shown in, the factor from the values' own unit to it (1e-9 for values in
/// nanoseconds, shown in seconds' prefixes), the prefixes it takes, the highest that
/// reads well (seconds stop at `s`, never `ks`), and the prefix of a table column.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DisplayUnit {
    /// Symbol of the unit without a prefix (`s`, `bit/s`, `B`, `%`), empty for a
    /// plain count.
    symbol: &'static str,
    /// Factor from the values' unit to the unprefixed one.
    scale: f64,
    /// The prefixes it takes.
    prefixes: Prefixes,
    /// Highest power of the prefix step shown.
    highest: i32,
    /// The power of the prefix step a table column shows its values in.
    table: i32,
}

impl DisplayUnit {
    /// A plain number (neighbors, threads, nodes): no unit, no prefix.
    pub const NONE: DisplayUnit = DisplayUnit::unprefixed("");
    /// Values in seconds, shown as `s`, `ms`, `µs` or `ns`; tables in `s`.
    pub const SECONDS: DisplayUnit = DisplayUnit {
        symbol: "s",
        scale: 1.0,
        prefixes: Prefixes::Decimal,
        highest: 0,
        table: 0,
    };
    /// Values in nanoseconds (the latencies of the results format), shown as `ns` ..
    /// `s`; tables in `ns`.
    pub const NANOSECONDS: DisplayUnit = DisplayUnit {
        symbol: "s",
        scale: 1e-9,
        prefixes: Prefixes::Decimal,
        highest: 0,
        table: -3,
    };
    /// Values in bit/s, shown as `bit/s` .. `Tbit/s`; tables in `Mbit/s`.
    pub const BITS_PER_SECOND: DisplayUnit = DisplayUnit {
        symbol: "bit/s",
        scale: 1.0,
        prefixes: Prefixes::Decimal,
        highest: 4,
        table: 2,
    };
    /// Values in operations per second, shown as `ops/s` .. `Gops/s`; tables in
    /// `ops/s`.
    pub const OPS_PER_SECOND: DisplayUnit = DisplayUnit {
        symbol: "ops/s",
        scale: 1.0,
        prefixes: Prefixes::Decimal,
        highest: 3,
        table: 0,
    };
    /// Values in bytes, shown as `B` .. `TiB` (binary prefixes, as memory is sized);
    /// tables in `MiB`.
    pub const BYTES: DisplayUnit = DisplayUnit {
        symbol: "B",
        scale: 1.0,
        prefixes: Prefixes::Binary,
        highest: 4,
        table: 2,
    };
    /// Values in percent.
    pub const PERCENT: DisplayUnit = DisplayUnit::unprefixed("%");
    /// Values in percent of one CPU.
    pub const PERCENT_CPU: DisplayUnit = DisplayUnit::unprefixed("% CPU");

    /// A unit without prefixes, its values shown as they are.
    const fn unprefixed(symbol: &'static str) -> DisplayUnit {
        DisplayUnit {
            symbol,
            scale: 1.0,
            prefixes: Prefixes::None,
            highest: 0,
            table: 0,
        }
    }

    /// The prefixes the unit takes.
    pub fn prefixes(&self) -> Prefixes {
        self.prefixes
    }

    /// The unit at the prefix of `step^power` (2: `M` or `Mi`, -2: `µ`), whether or
    /// not it reads well.
    pub fn at(self, power: i32) -> Scaled {
        Scaled { unit: self, power }
    }

    /// The unit a table column shows its values in, whatever they are, so that its
    /// rows compare: bit rates in Mbit/s, bytes in MiB, the rest unprefixed (times in
    /// their own unit).
    pub fn table(self) -> Scaled {
        self.at(self.table)
    }

    /// The prefix that shows `magnitude` (in the values' unit) as 1 up to the prefix
    /// step (1000, or 1024 for bytes), within the prefixes that read well.
    pub fn fit(self, magnitude: f64) -> Scaled {
        self.at(self.power_for(magnitude, 0.0))
    }

    /// As [`DisplayUnit::fit`], for `value` shown with `decimals` digits after the
    /// point: a value that would round up to the prefix step takes the next prefix
    /// (`1.0 MiB`, not `1024.0 KiB`).
    fn fit_rounded(self, value: f64, decimals: i32) -> Scaled {
        let slack = 0.5 * 10f64.powi(-decimals) / self.prefixes.step();
        self.at(self.power_for(value, slack))
    }

    /// The highest power p of the prefix step, in the prefixes that read well, with
    /// `|magnitude|` at least `step^p * (1 - slack)` in the unprefixed unit; the
    /// lowest such power for a magnitude below them all, 0 for none or 0.
    fn power_for(&self, magnitude: f64, slack: f64) -> i32 {
        let base = (magnitude * self.scale).abs();
        if self.prefixes == Prefixes::None || base == 0.0 || !base.is_finite() {
            return 0;
        }
        let step = self.prefixes.step();
        let lowest = self.prefixes.lowest();
        (lowest..=self.highest)
            .rev()
            .find(|&p| base >= step.powi(p) * (1.0 - slack))
            .unwrap_or(lowest)
    }

    /// One value with the prefix that fits it, three significant digits and its unit:
    /// `1.25 Gbit/s`, `1.5 µs`, `13.3%`, `256 MiB`, for labels.
    pub fn format(self, value: f64) -> String {
        let shown = self.fit(value);
        let number = format_significant(shown.value(value), 3);
        match shown.symbol().as_str() {
            "" => number,
            "%" => format!("{number}%"),
            symbol => format!("{number} {symbol}"),
        }
    }
}

/// A [`DisplayUnit`] at one prefix: what a table column or a plot axis shows its
/// values in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scaled {
    /// The unit.
    unit: DisplayUnit,
    /// The power of its prefix step.
    power: i32,
}

impl Scaled {
    /// The factor from the values' unit to this one (1e-6 for bit/s shown in Mbit/s,
    /// 1/2^20 for bytes in MiB).
    pub fn factor(&self) -> f64 {
        self.unit.scale / self.unit.prefixes.step().powi(self.power)
    }

    /// `value` (in the values' unit) in this one.
    pub fn value(&self, value: f64) -> f64 {
        value * self.factor()
    }

    /// The symbol with its prefix: `Mbit/s`, `MiB`, `µs`; empty for a plain count.
    pub fn symbol(&self) -> String {
        format!(
            "{}{}",
            self.unit.prefixes.name(self.power),
            self.unit.symbol
        )
    }

    /// A column header or axis title: `name (Mbit/s)`, or `name` without a unit.
    pub fn title(&self, name: &str) -> String {
        let symbol = self.symbol();
        if symbol.is_empty() {
            name.to_string()
        } else {
            format!("{name} ({symbol})")
        }
    }
}

/// `value` with up to `digits` significant digits, trailing zeros dropped: `1.5`,
/// `2.08`, `1000`.
pub fn format_significant(value: f64, digits: i32) -> String {
    if value == 0.0 || !value.is_finite() {
        return if value.is_finite() {
            "0".into()
        } else {
            value.to_string()
        };
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = (digits - 1 - magnitude).max(0) as usize;
    format_trimmed(value, decimals)
}

/// `value` with `decimals` digits after the point, trailing zeros (and a bare point)
/// dropped: `0.25`, `3`.
pub fn format_trimmed(value: f64, decimals: usize) -> String {
    let s = format!("{value:.decimals$}");
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

/// The decimal SI prefix (`K` to `T`, none below a thousand) of `v` printed with
/// `decimals` decimals, and its factor: picked by the value as it will be printed, so
/// a value that rounds up to 1000 of a prefix takes the next one ("1.00G", not
/// "1000.00M").
fn si_prefix(v: f64, decimals: i32) -> (f64, &'static str) {
    let tolerance = 1.0 - 0.5 * 10f64.powi(-decimals) / 1000.0;
    [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")]
        .into_iter()
        .find(|&(div, _)| v.abs() >= div * tolerance)
        .unwrap_or((1.0, ""))
}

/// Formats a number with a decimal SI prefix and two decimals: 1.5e9 → `1.50G`.
pub fn format_si(v: f64) -> String {
    let (div, p) = si_prefix(v, 2);
    format!("{:.2}{p}", v / div)
}

/// Formats a number with a decimal SI prefix and at most three decimals, trailing
/// zeros dropped, for names and ids: 5e7 → `50M`, 1.5e9 → `1.5G`, 0 → `0`.
pub fn format_si_compact(v: f64) -> String {
    let (div, p) = si_prefix(v, 3);
    format!("{}{p}", format_trimmed(v / div, 3))
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

/// Formats a byte count with a binary prefix and one decimal, as memory is sized
/// ([`DisplayUnit::BYTES`]): `512 B`, `4.0 KiB`, `256.0 MiB`, `1.5 GiB`.
pub fn format_bytes(bytes: f64) -> String {
    let shown = DisplayUnit::BYTES.fit_rounded(bytes, 1);
    if shown.power == 0 {
        format!("{bytes:.0} B")
    } else {
        format!("{:.1} {}", shown.value(bytes), shown.symbol())
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
    fn tables_show_one_prefix_per_quantity() {
        let mbit = DisplayUnit::BITS_PER_SECOND.table();
        assert_eq!((mbit.symbol(), mbit.factor()), ("Mbit/s".to_string(), 1e-6));
        assert_eq!(mbit.value(485.4e6), 485.4);
        assert_eq!(mbit.title("sent"), "sent (Mbit/s)");
        // Bytes in binary MiB: 256 MiB is 268 435 456 bytes.
        let mib = DisplayUnit::BYTES.table();
        assert_eq!(mib.symbol(), "MiB");
        assert_eq!(mib.value(268_435_456.0), 256.0);
        // Times in their own unit, whatever prefix their values' unit has.
        let ns = DisplayUnit::NANOSECONDS.table();
        assert_eq!((ns.symbol(), ns.factor()), ("ns".to_string(), 1.0));
        assert_eq!(DisplayUnit::SECONDS.table().title("runtime"), "runtime (s)");
        assert_eq!(DisplayUnit::NANOSECONDS.at(-2).value(79_500.0), 79.5);
        assert_eq!(DisplayUnit::PERCENT_CPU.table().symbol(), "% CPU");
        assert_eq!(DisplayUnit::NONE.table().title("threads"), "threads");
    }

    #[test]
    fn axes_and_labels_fit_the_prefix_to_the_values() {
        assert_eq!(DisplayUnit::BITS_PER_SECOND.fit(2.5e9).symbol(), "Gbit/s");
        assert_eq!(DisplayUnit::BITS_PER_SECOND.fit(999.0).symbol(), "bit/s");
        assert_eq!(DisplayUnit::BITS_PER_SECOND.fit(1000.0).symbol(), "kbit/s");
        // Seconds stop at s; the smallest prefix is n.
        assert_eq!(DisplayUnit::NANOSECONDS.fit(7200e9).symbol(), "s");
        assert_eq!(DisplayUnit::SECONDS.fit(1e-12).symbol(), "ns");
        assert_eq!(DisplayUnit::SECONDS.fit(0.0).symbol(), "s");
        // Bytes as the tables show them: binary, and nothing below a byte.
        assert_eq!(DisplayUnit::BYTES.fit(1000.0).symbol(), "B");
        assert_eq!(DisplayUnit::BYTES.fit(1024.0).symbol(), "KiB");
        assert_eq!(DisplayUnit::BYTES.fit(3.0 * 1073741824.0).symbol(), "GiB");
        assert_eq!(DisplayUnit::BYTES.fit(0.5).symbol(), "B");
        assert_eq!(DisplayUnit::PERCENT.fit(1e6).symbol(), "%");

        assert_eq!(DisplayUnit::NANOSECONDS.format(1500.0), "1.5 µs");
        assert_eq!(
            DisplayUnit::BITS_PER_SECOND.format(25e9 / 12.0),
            "2.08 Gbit/s"
        );
        assert_eq!(DisplayUnit::SECONDS.format(0.0123), "12.3 ms");
        assert_eq!(DisplayUnit::BYTES.format(268_435_456.0), "256 MiB");
        // 1.5e9 bytes are 1.397 GiB, not 1.5 GB.
        assert_eq!(DisplayUnit::BYTES.format(1.5e9), "1.4 GiB");
        assert_eq!(DisplayUnit::PERCENT.format(13.26), "13.3%");
        assert_eq!(DisplayUnit::PERCENT_CPU.format(250.0), "250 % CPU");
        assert_eq!(DisplayUnit::NONE.format(12.0), "12");
    }

    #[test]
    fn numbers_drop_their_trailing_zeros() {
        assert_eq!(format_significant(1.5, 3), "1.5");
        assert_eq!(format_significant(2.0833, 3), "2.08");
        assert_eq!(format_significant(1234.6, 3), "1235");
        assert_eq!(format_significant(0.0, 3), "0");
        assert_eq!(format_significant(f64::INFINITY, 3), "inf");
        assert_eq!(format_trimmed(0.250, 2), "0.25");
        assert_eq!(format_trimmed(3.0, 2), "3");
        assert_eq!(format_trimmed(-0.001, 2), "0");
    }

    #[test]
    fn si_prefix_follows_the_rounded_value() {
        assert_eq!(format_si(999_999_999.0), "1.00G");
        assert_eq!(format_si(999_990_000.0), "999.99M");
        assert_eq!(format_si(1.5e9), "1.50G");
        assert_eq!(format_si(0.0), "0.00");
        assert_eq!(format_si(-2e6), "-2.00M");
        // The compact form, for ids: at most three decimals, trailing zeros dropped.
        assert_eq!(format_si_compact(0.0), "0");
        assert_eq!(format_si_compact(50e6), "50M");
        assert_eq!(format_si_compact(1.5e9), "1.5G");
        assert_eq!(format_si_compact(1_234_567.0), "1.235M");
        assert_eq!(format_si_compact(999_999_999.0), "1G");
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
