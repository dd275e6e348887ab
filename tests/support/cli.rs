//! Running the built `nnb` binary from the root package's end-to-end tests.

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
