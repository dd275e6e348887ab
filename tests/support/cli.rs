//! Running the built `nnb` binary from the root package's end-to-end tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The `nnb` binary cargo built for these tests.
pub(crate) const NNB: &str = env!("CARGO_BIN_EXE_nnb");

/// Runs `nnb ARGS` from the repository root (so relative fixture paths resolve) and
/// returns what it printed and its exit status.
pub(crate) fn nnb(args: &[&str]) -> Output {
    Command::new(NNB)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {NNB}: {e}"))
}

/// Checks that a finished `nnb` succeeded and parses its stdout as one JSON document.
pub(crate) fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "nnb failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Runs `nnb ARGS`, which must succeed, and parses its stdout as JSON.
pub(crate) fn json(args: &[&str]) -> Value {
    json_of(&nnb(args))
}

/// Runs `nnb run EXPERIMENT --quiet --json --results RESULTS`, which must succeed, and
/// returns the run's directory (the outcome's `dir`) and its `samples.jsonl` as text
/// (empty when there is none).
pub(crate) fn run_experiment(experiment: &Path, results: &Path) -> (PathBuf, String) {
    let (run, text, _) = run_experiment_json(experiment, results);
    (run, text)
}

/// [`run_experiment`], with the JSON `nnb run --json` printed (its `outcome` and
/// end-of-run `summary`).
pub(crate) fn run_experiment_json(experiment: &Path, results: &Path) -> (PathBuf, String, Value) {
    let out = Command::new(NNB)
        .arg("run")
        .arg(experiment)
        .args(["--quiet", "--json", "--results"])
        .arg(results)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {NNB}: {e}"));
    let outcome = json_of(&out);
    let run = PathBuf::from(outcome["outcome"]["dir"].as_str().unwrap_or_default());
    let text = std::fs::read_to_string(run.join("samples.jsonl")).unwrap_or_default();
    (run, text, outcome)
}

/// Sends signal `sig` (as `kill` spells it: `INT`, `TERM`, `9`) to process `pid`,
/// failing the test when it could not be delivered.
pub(crate) fn signal(pid: u32, sig: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap_or_else(|e| panic!("kill -{sig} {pid}: {e}"));
    assert!(sent.success(), "kill -{sig} {pid} failed: {sent}");
}
