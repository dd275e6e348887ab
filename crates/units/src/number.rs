//! The number at the front of every value.

use crate::UnitError;

/// Splits `s` into its leading decimal number (digits, one `.`, `_` separators) and
/// the rest, both trimmed. `kind` and `expected` go into the error.
pub(crate) fn split_number<'a>(
    s: &'a str,
    kind: &'static str,
    expected: &'static str,
) -> Result<(f64, &'a str), UnitError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(UnitError::Empty { kind, expected });
    }
    let end = s
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .map_or(s.len(), |(i, _)| i);
    let digits: String = s[..end].chars().filter(|&c| c != '_').collect();
    let value: f64 = digits.parse().map_err(|_| UnitError::NotANumber {
        kind,
        input: s.to_string(),
        expected,
    })?;
    Ok((value, s[end..].trim()))
}

/// The decimal SI multiplier of a prefix letter (case-insensitive), 1 for none.
pub(crate) fn si_multiplier(prefix: &str) -> Option<f64> {
    match prefix {
        "" => Some(1.0),
        "k" | "K" => Some(1e3),
        "m" | "M" => Some(1e6),
        "g" | "G" => Some(1e9),
        "t" | "T" => Some(1e12),
        _ => None,
    }
}
