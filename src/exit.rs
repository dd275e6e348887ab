//! Exit codes, decided once in `main` from the error: 2 for bad input (the code clap
//! uses for a malformed flag), 130 for an interrupted run (128 + SIGINT, as shells
//! report it), 1 for any other failure, and 0 when the reader of stdout went away.
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
    } else if err.chain().any(is_bad_input) {
        ExitCode::from(2)
    } else {
        ExitCode::FAILURE
    }
}

/// Whether an error is the user's to fix: a malformed value, an impossible
/// placement, invalid settings, an unusable experiment file or token.
fn is_bad_input(e: &(dyn Error + 'static)) -> bool {
    use nnb_agent::auth::TokenError;
    use nnb_burn::memload::MemError;
    use nnb_burn::smt_probe as probe;
    use nnb_burn::{clock, placement, sweep, workload};
    use nnb_netlat::{load::LoadError, probe::ProbeError, serve::ServeError};
    use nnb_units::{CpuListError, UnitError};
    #[cfg(feature = "controller")]
    if e.is::<nnb_experiment::ExperimentError>() {
        return true;
    }
    // A results file that is not what nnb writes, or a run that is not there
    // (`--resume nope`): the user's input, not a failure of the machine.
    #[cfg(feature = "controller")]
    {
        use nnb_controller::results::ResultsError;
        use nnb_controller::ControllerError;
        // `ControllerError::Results` is transparent: the results error is not a
        // separate link of the chain.
        let results = e.downcast_ref::<ResultsError>().or_else(|| {
            match e.downcast_ref::<ControllerError>() {
                Some(ControllerError::Results(r)) => Some(r),
                _ => None,
            }
        });
        if matches!(results, Some(ResultsError::Format { .. })) {
            return true;
        }
    }
    #[cfg(feature = "analysis")]
    if matches!(
        e.downcast_ref::<nnb_analysis::read::ReadError>(),
        Some(
            nnb_analysis::read::ReadError::Corrupt { .. }
                | nnb_analysis::read::ReadError::Version { .. }
                | nnb_analysis::read::ReadError::Refused { .. }
                | nnb_analysis::read::ReadError::Hdr { .. }
        )
    ) {
        return true;
    }
    #[cfg(feature = "aws")]
    if matches!(
        e.downcast_ref::<nnb_aws::s3::S3Error>(),
        Some(nnb_aws::s3::S3Error::Url { .. })
    ) {
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
        || matches!(e.downcast_ref::<MemError>(), Some(MemError::Spec(_)))
        || matches!(
            e.downcast_ref::<probe::ProbeError>(),
            Some(
                probe::ProbeError::TooFewCpus(_)
                    | probe::ProbeError::UnusableCpu(_)
                    | probe::ProbeError::DuplicateCpu(_)
                    | probe::ProbeError::ZeroTrials
                    | probe::ProbeError::BadThreshold(_)
                    | probe::ProbeError::ZeroSpin
            )
        )
        || matches!(e.downcast_ref::<ProbeError>(), Some(ProbeError::Invalid(_)))
        || matches!(e.downcast_ref::<LoadError>(), Some(LoadError::Invalid(_)))
        || e.downcast_ref::<nnb_burn::disk::DiskError>()
            .is_some_and(nnb_burn::disk::DiskError::is_bad_input)
        || matches!(e.downcast_ref::<ServeError>(), Some(ServeError::Pin { .. }))
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
