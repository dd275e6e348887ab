//! Errors caused by what the user typed, as opposed to failures while measuring.
//!
//! A usage error exits with code 2 (the same code clap uses for a malformed flag), so
//! scripts can tell "you asked for something impossible" from "the measurement failed".

use std::fmt;

/// An error in the user's input: reported with exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Builds an `anyhow::Error` that `main` reports with exit code 2.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
}

/// True when any error in the chain is a [`UsageError`].
pub fn is_usage_error(err: &anyhow::Error) -> bool {
    err.chain().any(|e| e.is::<UsageError>())
}
