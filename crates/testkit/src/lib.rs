//! What nnb's tests share, in one place: the policy for a test that cannot run on
//! this machine (it needs root, a tool, a server or two CPUs). Outside CI such a
//! test prints why and passes without running; when the environment variable `CI`
//! is set it fails, so CI never skips silently.
//!
//! A dev-dependency only: no library or binary of nnb links it.

/// Applies the policy to a test that cannot run: panics with `reason` when `CI` is
/// set, else prints `skipping: {reason}` and returns false (so a test can write
/// `if !cond && !skip_or_fail("...") { return; }` or `return skip_or_fail(..)`).
pub fn skip_or_fail(reason: &str) -> bool {
    assert!(
        !under_ci(),
        "{reason} (CI is set, so this test must run)"
    );
    eprintln!("skipping: {reason}");
    false
}

/// True when `ok`; otherwise applies [`skip_or_fail`] with `reason`. A test goes on
/// only when it returns true: `if !require(cond, "needs X") { return; }`.
pub fn require(ok: bool, reason: &str) -> bool {
    ok || skip_or_fail(reason)
}

/// True when this process runs as root (effective uid 0); otherwise applies
/// [`skip_or_fail`], saying that `what` needs root.
pub fn require_root(what: &str) -> bool {
    require(effective_uid() == Some(0), &format!("{what} needs root"))
}

/// Whether the tests run under CI (the environment variable `CI` is set).
pub fn under_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// This process's effective user id, from `/proc/self/status` (no system call,
/// so no `unsafe`); `None` when it cannot be read.
pub fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_met_condition_never_skips() {
        // Holds whether CI is set or not: nothing to skip, nothing to fail.
        assert!(require(true, "unused"));
    }

    #[test]
    fn the_effective_uid_is_the_one_proc_reports() {
        let uid = effective_uid().expect("/proc/self/status has a Uid line");
        // A file this process makes is owned by its effective uid.
        let dir = std::env::temp_dir().join(format!("nnb-testkit-{}", std::process::id()));
        std::fs::write(&dir, b"").expect("write a temporary file");
        let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&dir).expect("stat"));
        std::fs::remove_file(&dir).expect("remove");
        assert_eq!(uid, owner);
    }

    #[test]
    fn an_unmet_condition_skips_outside_ci_and_fails_under_it() {
        let outcome = std::panic::catch_unwind(|| require(false, "needs a unicorn"));
        match outcome {
            Ok(went_on) => {
                assert!(!under_ci());
                assert!(!went_on, "an unmet condition must not let the test go on");
            }
            Err(panic) => {
                assert!(under_ci());
                let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
                assert!(msg.contains("needs a unicorn") && msg.contains("CI is set"), "{msg}");
            }
        }
    }
}
