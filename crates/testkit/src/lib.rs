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
    assert!(!under_ci(), "{reason} (CI is set, so this test must run)");
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

/// The staircase experiment the tests share (a test tenant of one vCPU and two
/// neighbors of one vCPU each, a fixed-work burn measured): each field is a line of
/// the file, and a `None` leaves its line out, so a test that checks line numbers
/// knows where each key is.
#[derive(Debug, Clone)]
pub struct Staircase<'a> {
    /// `name`.
    pub name: &'a str,
    /// `repetitions`.
    pub repetitions: u32,
    /// `settle`, a duration.
    pub settle: &'a str,
    /// `step_timeout`, a duration.
    pub step_timeout: Option<&'a str>,
    /// `on_failure`, a policy.
    pub on_failure: Option<&'a str>,
    /// `scenario.neighbor_state`: `busy`, `idle` or `both`.
    pub neighbor_state: &'a str,
    /// `scenario.test.workload`.
    pub workload: Option<&'a str>,
    /// `scenario.test.ops`.
    pub ops: u64,
}

impl Default for Staircase<'_> {
    fn default() -> Self {
        Staircase {
            name: "t",
            repetitions: 2,
            settle: "1s",
            step_timeout: None,
            on_failure: None,
            neighbor_state: "both",
            workload: None,
            ops: 1000,
        }
    }
}

impl Staircase<'_> {
    /// The experiment file.
    pub fn toml(&self) -> String {
        let line =
            |key: &str, v: Option<&str>| v.map_or(String::new(), |v| format!("{key} = \"{v}\"\n"));
        format!(
            r#"name = "{name}"
repetitions = {reps}
settle = "{settle}"
{timeout}{on_failure}
[[tenants]]
name = "test"
role = "test"
vcpus = 1

[[tenants]]
name = "nb"
count = 2
role = "neighbor"
vcpus = 1

[scenario]
kind = "neighbor-staircase"
neighbor_state = "{state}"

[scenario.test]
{workload}ops = {ops}
"#,
            name = self.name,
            reps = self.repetitions,
            settle = self.settle,
            timeout = line("step_timeout", self.step_timeout),
            on_failure = line("on_failure", self.on_failure),
            state = self.neighbor_state,
            workload = line("workload", self.workload),
            ops = self.ops,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_staircase_leaves_out_what_is_none() {
        let bare = Staircase::default().toml();
        assert!(bare.starts_with("name = \"t\"\nrepetitions = 2\nsettle = \"1s\"\n\n[[tenants]]"));
        assert!(!bare.contains("step_timeout") && !bare.contains("workload"));
        let full = Staircase {
            step_timeout: Some("60s"),
            workload: Some("fpadd"),
            ..Staircase::default()
        }
        .toml();
        assert!(full.contains("settle = \"1s\"\nstep_timeout = \"60s\"\n\n[[tenants]]"));
        assert!(full.ends_with("[scenario.test]\nworkload = \"fpadd\"\nops = 1000\n"));
    }

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
                assert!(
                    msg.contains("needs a unicorn") && msg.contains("CI is set"),
                    "{msg}"
                );
            }
        }
    }
}
