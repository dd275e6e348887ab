//! Every subcommand that prints ends quietly when its reader goes away
//! (`nnb ... | head -1`): exit 0, no panic, no error message.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::support::cli::NNB;

/// When the test closes nnb's stdout.
#[derive(Debug, Clone, Copy)]
enum Close {
    /// Before nnb writes anything: its first write meets a closed pipe.
    AtOnce,
    /// After the first line (`head -1`), for a command that goes on printing.
    AfterOneLine,
}

/// Runs `nnb ARGS` with stdout a pipe that the test closes as `close` says, and
/// checks that nnb exits 0 without a panic or an error.
fn closed_early(args: &[&str], close: Close) {
    let mut child = Command::new(NNB)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {NNB}: {e}"));
    let stdout = child.stdout.take().expect("piped stdout");
    if let Close::AfterOneLine = close {
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the first line");
        assert!(!line.is_empty(), "nnb {args:?} printed nothing");
    } else {
        drop(stdout);
    }
    let out = child.wait_with_output().expect("wait for nnb");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked"),
        "nnb {args:?} panicked: {stderr}"
    );
    assert!(
        !stderr.contains("error:"),
        "nnb {args:?} reported an error: {stderr}"
    );
    assert_eq!(out.status.code(), Some(0), "nnb {args:?}: {stderr}");
}

#[test]
fn topo_into_a_closed_pipe() {
    closed_early(&["topo"], Close::AtOnce);
    closed_early(&["topo", "--json"], Close::AtOnce);
}

#[test]
fn cpu_into_a_closed_pipe() {
    let short = ["cpu", "--threads", "1", "--ops", "1000", "--reps", "1"];
    closed_early(&short, Close::AtOnce);
    closed_early(&[&short[..], &["--json"]].concat(), Close::AtOnce);
    closed_early(&[&short[..], &["--csv"]].concat(), Close::AtOnce);
    closed_early(&["cpu", "--threads", "1", "--dry-run"], Close::AtOnce);
}

#[test]
fn steal_into_a_closed_pipe() {
    closed_early(
        &["steal", "--cpus", "0", "--duration", "50ms"],
        Close::AtOnce,
    );
}

#[test]
fn latency_and_load_into_a_closed_pipe() {
    closed_early(
        &["latency", "--count", "100", "--warmup", "10ms"],
        Close::AtOnce,
    );
    closed_early(
        &[
            "latency",
            "--duration",
            "600ms",
            "--warmup",
            "10ms",
            "--interval",
            "100ms",
        ],
        Close::AfterOneLine,
    );
    closed_early(
        &["load", "--rate", "5M", "--duration", "300ms"],
        Close::AfterOneLine,
    );
}

#[test]
fn serve_into_a_closed_pipe() {
    let ports = [
        "--reflector-port",
        "0",
        "--sink-port",
        "0",
        "--tcp-port",
        "0",
    ];
    closed_early(
        &[&["serve", "--duration", "300ms"], &ports[..]].concat(),
        Close::AfterOneLine,
    );
    closed_early(
        &[&["serve", "--duration", "300ms", "--json"], &ports[..]].concat(),
        Close::AfterOneLine,
    );
}

#[test]
fn run_dry_run_schema_and_analyze_into_a_closed_pipe() {
    closed_early(
        &["run", "--dry-run", "experiments/local-cpu-staircase.toml"],
        Close::AtOnce,
    );
    closed_early(&["schema"], Close::AtOnce);
    #[cfg(feature = "analysis")]
    closed_early(
        &["analyze", "crates/analysis/fixtures/staircase"],
        Close::AtOnce,
    );
}

#[cfg(feature = "aws")]
#[test]
fn aws_dry_run_into_a_closed_pipe() {
    closed_early(
        &[
            "run",
            "--dry-run",
            "experiments/aws/m5-staircase-large.toml",
        ],
        Close::AtOnce,
    );
}
