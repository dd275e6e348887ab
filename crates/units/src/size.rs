//! Sizes in bytes: `64`, `1400B`, `4KiB`, `1MiB`, `1MB`.

use crate::number::split_number;
use crate::UnitError;

const KIND: &str = "size";
const EXPECTED: &str =
    "a size in bytes like 64, 1400B, 4KiB or 4k, 1MiB or 1M (binary: 1024) or 1MB (decimal: 1000)";

/// Parses a size in bytes. A bare number or `B` is bytes; `KiB`, `MiB`, `GiB` are
/// binary (1024, 1024², 1024³); `kB`/`KB`, `MB`, `GB` decimal (1000, 1e6, 1e9), as
/// IEC 80000-13 has it; the one-letter `k`/`K`, `M`, `G` are binary, as fio,
/// stress-ng, dd and free read them (`--vm-bytes 256M`, `--bs=4k`). The result must be a whole number of bytes that fits a `u64`.
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let (value, unit) = split_number(s, KIND, EXPECTED)?;
    let mult: u64 = match unit {
        "" | "B" => 1,
        "kB" | "KB" => 1000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "KiB" | "k" | "K" => 1 << 10,
        "MiB" | "M" => 1 << 20,
        "GiB" | "G" => 1 << 30,
        _ => {
            return Err(UnitError::UnknownUnit {
                kind: KIND,
                input: s.trim().to_string(),
                suffix: unit.to_string(),
                expected: EXPECTED,
            })
        }
    };
    let bytes = value * mult as f64;
    let out_of_range = |why| UnitError::OutOfRange {
        kind: KIND,
        input: s.trim().to_string(),
        why,
    };
    if bytes.fract() != 0.0 {
        return Err(out_of_range("not a whole number of bytes"));
    }
    if bytes >= u64::MAX as f64 {
        return Err(out_of_range("too large"));
    }
    Ok(bytes as u64)
}

/// Parses a size as [`parse_size`] does, for a byte count held in a `usize` (a
/// buffer or datagram length).
pub fn parse_bytes(s: &str) -> Result<usize, UnitError> {
    usize::try_from(parse_size(s)?).map_err(|_| UnitError::OutOfRange {
        kind: KIND,
        input: s.trim().to_string(),
        why: "too large for this machine",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_and_decimal_prefixes() {
        assert_eq!(parse_size("64"), Ok(64));
        assert_eq!(parse_size("1400B"), Ok(1400));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("1MiB"), Ok(1_048_576));
        assert_eq!(parse_size("1GiB"), Ok(1_073_741_824));
        assert_eq!(parse_size("1MB"), Ok(1_000_000));
        assert_eq!(parse_size("4kB"), Ok(4000));
        assert_eq!(parse_size("4KB"), Ok(4000));
        assert_eq!(parse_size("1.5KiB"), Ok(1536));
        assert_eq!(parse_bytes("1400B"), Ok(1400));
        // One letter is binary, as fio's --bs=4k and stress-ng's --vm-bytes 256M.
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
    }

    #[test]
    fn bad_sizes() {
        assert!(matches!(
            parse_size("4kb"),
            Err(UnitError::UnknownUnit { .. })
        ));
        assert!(parse_size("0.5B").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999GiB").is_err());
        assert!(parse_size("").is_err());
    }
}
