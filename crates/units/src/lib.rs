//! The one grammar for the values people type and read: durations, rates, sizes,
//! CPU lists and ranges of levels, with the formatters that print them back.
//!
//! Every command-line flag and every experiment-file key of nnb goes through this
//! crate, so `10m`, `8MB/s` or `0-3,8` mean the same everywhere. The rules:
//!
//! - **Durations** ([`parse_duration`]): a number and a unit, `ns`, `us`/`µs`, `ms`,
//!   `s`, `m`/`min`, `h` (`1.5s`, `250us`, `10min`, `1h`). A bare number is an error
//!   that names the units to add (only a bare `0` is accepted: zero needs no unit).
//!   Negative, not-a-number and too-long values are refused. Zero is allowed by
//!   [`parse_duration`]; [`parse_positive_duration`] is for uses that need more.
//! - **Rates** ([`parse_rate`]): decimal SI prefixes (k = 1000, M = 1e6, G = 1e9,
//!   T = 1e12, case-insensitive) and a unit that tells bits from bytes: no unit,
//!   `b`, `bit`, `bps`, `b/s`, `bit/s` are bits per second; `B`, `Bps`, `B/s`,
//!   `byte/s` are bytes per second (`8MB/s` = 64 Mbit/s); `pps` is packets per second.
//! - **Sizes** ([`parse_size`]): bytes; `KiB`, `MiB`, `GiB` are binary (1024),
//!   `kB`/`KB`, `MB`, `GB` decimal (1000); a bare number is bytes.
//! - **CPU lists** ([`parse_cpu_list`]): the kernel's `0-3,8` syntax, checked against
//!   a bound on CPU numbers before anything is expanded.
//! - **Ranges** ([`parse_steps`]): `FROM:TO:STEP` or `FROM..TO[:STEP]` (`..=` too)
//!   over counts or rates, at most [`MAX_LEVELS`] levels.
//!
//! [`wire`] holds the header bytes that turn a UDP payload rate into a link's rate.

mod cpulist;
mod duration;
mod format;
mod number;
mod range;
mod rate;
mod size;
pub mod wire;

pub use cpulist::{cpu_list_arg, format_cpu_list, parse_cpu_list, CpuList, CpuListError, MAX_CPUS};
pub use duration::{millis, parse_duration, parse_positive_duration, MAX_DURATION};
pub use format::{
    format_bits_per_sec, format_bytes, format_duration, format_ns, format_per_sec, format_secs,
    format_si, format_si_compact, format_significant, format_trimmed, DisplayUnit, Prefixes,
    Scaled,
};
pub use range::{
    parse_count_steps, parse_rate_steps, parse_steps, Level, RateSteps, Steps, MAX_LEVELS,
};
pub use rate::{parse_bit_rate, parse_packet_rate, parse_positive_bit_rate, parse_rate, Rate};
pub use size::{parse_bytes, parse_size};

use thiserror::Error;

/// Why a typed value could not be read. Every message starts with `bad KIND` and
/// quotes the input, then says what would have worked.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum UnitError {
    /// Nothing was typed.
    #[error("bad {kind}: empty value; expected {expected}")]
    Empty {
        /// What was being read ("duration", "rate", ...).
        kind: &'static str,
        /// What a valid value looks like.
        expected: &'static str,
    },
    /// The number part is not a number.
    #[error("bad {kind} `{input}`: it does not start with a number; expected {expected}")]
    NotANumber {
        /// What was being read.
        kind: &'static str,
        /// The text as typed.
        input: String,
        /// What a valid value looks like.
        expected: &'static str,
    },
    /// The unit suffix is unknown.
    #[error("bad {kind} `{input}`: unknown unit `{suffix}`; expected {expected}")]
    UnknownUnit {
        /// What was being read.
        kind: &'static str,
        /// The text as typed.
        input: String,
        /// The suffix that was not understood.
        suffix: String,
        /// What a valid value looks like.
        expected: &'static str,
    },
    /// A number without the unit the value needs (`settle = "500"`).
    #[error("bad {kind} `{input}`: a bare number has no unit; add one, e.g. {hint}")]
    MissingUnit {
        /// What was being read.
        kind: &'static str,
        /// The text as typed.
        input: String,
        /// The input with units added, as examples.
        hint: String,
    },
    /// Negative, not finite, too large, or zero where zero makes no sense.
    #[error("bad {kind} `{input}`: {why}")]
    OutOfRange {
        /// What was being read.
        kind: &'static str,
        /// The text as typed.
        input: String,
        /// Why the value cannot be used.
        why: &'static str,
    },
    /// Not of a range's form.
    #[error("bad range `{input}`: {expected}")]
    NotARange {
        /// The text as typed.
        input: String,
        /// What a valid range looks like.
        expected: &'static str,
    },
    /// A range whose end is below its start.
    #[error("bad range `{input}`: TO is below FROM: the range ends before it starts")]
    Reversed {
        /// The text as typed.
        input: String,
    },
    /// A range with a step of 0 (or a missing step where there is no default).
    #[error("bad range `{input}`: the step is 0 or missing; the step must be above 0")]
    ZeroStep {
        /// The text as typed.
        input: String,
    },
    /// A range whose bounds and step are different kinds of rate.
    #[error("bad range `{input}`: FROM, TO and STEP must all be bit rates or all packet rates")]
    MixedKinds {
        /// The text as typed.
        input: String,
    },
    /// A range with more levels than [`MAX_LEVELS`].
    #[error("bad range `{input}`: it expands to {levels} values, more than {max}")]
    TooManyLevels {
        /// The text as typed.
        input: String,
        /// How many levels it would have (saturating at `u64::MAX`).
        levels: u64,
        /// The most allowed.
        max: usize,
    },
}
