//! Exit codes, decided once in `main` from the error: 2 for bad input (the code clap
//! uses for a malformed flag), 3 for a run that ended with failed steps (its data
//! kept), 130 for an interrupted run (128 + SIGINT, as shells report it), 1 for any
//! other failure, and 0 when the reader of stdout went away.
//!
//! Commands return library errors with `?` (adding context where it helps); which
//! library errors are the user's to fix is said here, in [`is_bad_input`], and
//! nowhere else. A command wraps an error itself only where the same library error
//! is bad input in one place and a failure in another (an unreadable `--sysfs-root`
//! versus an unreadable `/sys`): [`usage`] then marks it.

use std::error::Error;
use std::fmt;
use std::process::ExitCode;

/// An error in the user's input that no library type says: exit code 2.
#[derive(Debug)]
pub(crate) struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for UsageError {}

/// The run was stopped by Ctrl-C or SIGTERM: exit code 130.
#[derive(Debug)]
pub(crate) struct Interrupted(pub String);

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for Interrupted {}

/// A run ended with failed steps (all or some of them; what was measured is kept):
/// exit code 3, so that scripts do not take it for a success.
#[derive(Debug)]
pub(crate) struct FailedSteps(pub String);

impl fmt::Display for FailedSteps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for FailedSteps {}

/// The exit code of a run that ended with failed steps ([`FailedSteps`]).
pub(crate) const FAILED_STEPS: u8 = 3;

/// Builds an `anyhow::Error` that `main` reports with exit code 2.
pub(crate) fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
}

/// The error's message for people: each cause in its chain once, joined by `: `.
/// Library errors often say their source in their own message too (`cannot read
/// X: <why>`), so a cause the text already ends with is not repeated.
pub(crate) fn message(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let part = cause.to_string();
        if text.ends_with(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

/// The exit code for an error that ended a command.
pub(crate) fn code(err: &anyhow::Error) -> ExitCode {
    if crate::out::is_broken_pipe(err) {
        ExitCode::SUCCESS
    } else if err.chain().any(|e| e.is::<Interrupted>()) {
        ExitCode::from(130)
    } else if err.chain().any(|e| e.is::<FailedSteps>()) {
        ExitCode::from(FAILED_STEPS)
    } else if err.chain().any(is_bad_input) {
        ExitCode::from(2)
    } else {
        ExitCode::FAILURE
    }
}

/// Whether an error is the user's to fix: a malformed value, an impossible
/// placement, invalid settings, an unusable experiment file or token. Each library
/// error type says which of its errors are (its `is_bad_input`); error types that
/// are bad input as a whole are listed by type. The binary only lists the types.
fn is_bad_input(e: &(dyn Error + 'static)) -> bool {
    use nnb_agent::auth::TokenError;
    use nnb_burn::{clock, disk, memload, placement, smt_probe, sweep, workload};
    use nnb_netlat::{load, probe, serve};
    use nnb_units::{CpuListError, UnitError};
    /// `e` is a `T` that says it is bad input.
    fn says<T: Error + 'static>(e: &(dyn Error + 'static), is_bad: fn(&T) -> bool) -> bool {
        e.downcast_ref::<T>().is_some_and(is_bad)
    }
    #[cfg(feature = "controller")]
    {
        use nnb_controller::results::ResultsError;
        use nnb_controller::ControllerError;
        // `ControllerError::Results` is transparent: the results error is not a
        // separate link of the chain.
        let in_controller = match e.downcast_ref::<ControllerError>() {
            Some(ControllerError::Results(r)) => r.is_bad_input(),
            // An agent that did not opt in to the file's command jobs.
            Some(ControllerError::CommandsNotAllowed(_)) => true,
            _ => false,
        };
        if e.is::<nnb_experiment::ExperimentError>()
            || says(e, ResultsError::is_bad_input)
            || in_controller
        {
            return true;
        }
    }
    #[cfg(feature = "analysis")]
    if says(e, nnb_analysis::read::ReadError::is_bad_input)
        || says(e, nnb_analysis::tables::AnalysisError::is_bad_input)
        || says(e, nnb_analysis::report::ReportError::is_bad_input)
    {
        return true;
    }
    #[cfg(feature = "aws")]
    if says(e, nnb_aws::s3::S3Error::is_bad_input) {
        return true;
    }
    e.is::<UsageError>()
        || e.is::<placement::PlacementError>()
        || e.is::<CpuListError>()
        || e.is::<sweep::SweepError>()
        || e.is::<workload::UnknownWorkload>()
        || e.is::<clock::ClockError>()
        || e.is::<UnitError>()
        || e.is::<TokenError>()
        || says(e, memload::MemError::is_bad_input)
        || says(e, smt_probe::ProbeError::is_bad_input)
        || says(e, probe::ProbeError::is_bad_input)
        || says(e, load::LoadError::is_bad_input)
        || says(e, disk::DiskError::is_bad_input)
        || says(e, serve::ServeError::is_bad_input)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that says its source in its message and also exposes it, as
    /// `#[error("bad list {input:?}: {source}")]` does.
    #[derive(Debug)]
    struct Wrapping {
        input: &'static str,
        source: std::io::Error,
    }

    impl fmt::Display for Wrapping {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "bad list {:?}: {}", self.input, self.source)
        }
    }

    impl Error for Wrapping {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn each_cause_is_said_once() {
        let inner = std::io::Error::other("CPU 9 does not exist");
        let err = anyhow::Error::new(Wrapping {
            input: "0-9",
            source: inner,
        })
        .context("--cpus");
        assert_eq!(
            message(&err),
            "--cpus: bad list \"0-9\": CPU 9 does not exist"
        );
        let plain = anyhow::anyhow!("disk full").context("cannot write samples.jsonl");
        assert_eq!(message(&plain), "cannot write samples.jsonl: disk full");
    }
}
