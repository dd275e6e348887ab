//! `cpu-burn-o0` is the thesis' `cpu_burn`: the test compiles Listing 5.1
//! (`tests/fixtures/cpu_burn.c`) with `gcc -O0` as the thesis did. It runs that
//! binary and `nnb cpu --workload cpu-burn-o0` for the same ops on the same CPU,
//! interleaved (C, nnb, C, nnb, ...) so that a change of load on this shared machine
//! hits both alike, and compares the fastest run of each: per op within 10%. Both
//! must end with the same `x`, bit for bit. `fpadd`, the optimised loop, must be
//! clearly faster than the -O0 binary; the ratio is printed, and only a loose bound
//! is checked.
//!
//! Without gcc, or in a debug build (where nnb's loops are not optimised and their
//! times mean nothing), the test fails when `CI` is set and skips with the reason
//! otherwise.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::cli::{json, nnb};
use crate::support::netns::skip_or_fail;

/// Ops per run: about 0.25 s of the -O0 loop at 4 ns per op.
const OPS: u64 = 60_000_000;
/// Interleaved runs of each program per attempt; the fastest of each is compared.
const RUNS: usize = 4;
/// Attempts before a ratio outside [`TOLERANCE`] fails: a burst of other work on the
/// CPU can still hit every run of one side in an attempt.
const ATTEMPTS: usize = 2;
/// Largest relative difference of nnb's per-op time from the -O0 binary's.
const TOLERANCE: f64 = 0.10;
/// `fpadd` must take at most this share of the -O0 binary's time per op (about 0.25
/// measured on Zen 3; the point is only that it is the optimised loop).
const FPADD_AT_MOST: f64 = 0.6;

/// The fixture built with `gcc -O0 -pthread` into `dir`, or why it could not be.
fn build_cpu_burn(dir: &Path) -> Result<std::path::PathBuf, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cpu_burn.c");
    let bin = dir.join("cpu_burn");
    let out = Command::new("gcc")
        .args(["-O0", "-pthread", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .map_err(|e| format!("needs gcc to build Listing 5.1 with -O0 ({e})"))?;
    if !out.status.success() {
        panic!(
            "gcc -O0 {} failed: {}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(bin)
}

/// One run of the -O0 binary on `cpu`: its runtime in seconds and the bits of its x.
fn run_c(bin: &Path, cpu: usize) -> (f64, u64) {
    let out = Command::new(bin)
        .args([OPS.to_string(), "1".into(), cpu.to_string()])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "cpu_burn failed: {out:?}");
    let mut lines = text.lines();
    let secs = lines.next().and_then(|l| l.trim().parse().ok());
    let bits = lines.next().and_then(|l| l.trim().parse().ok());
    match (secs, bits) {
        (Some(s), Some(b)) => (s, b),
        _ => panic!("cpu_burn printed {text:?}"),
    }
}

/// One fixed-work run of `workload` on `cpu` through the CLI: runtime in seconds and
/// the thread's checksum.
fn run_nnb(workload: &str, cpu: usize) -> (f64, u64) {
    let ops = OPS.to_string();
    let cpu = cpu.to_string();
    let v: Value = json(&[
        "cpu",
        "--workload",
        workload,
        "--cpus",
        &cpu,
        "--ops",
        &ops,
        "--reps",
        "1",
        "--warmup",
        "0",
        "--json",
    ]);
    let step = &v["steps"][0];
    let secs = step["runtime_s"]["min"].as_f64();
    let checksum = step["runs"][0]["threads"][0]["checksum"].as_u64();
    match (secs, checksum) {
        (Some(s), Some(c)) => (s, c),
        _ => panic!("no runtime or checksum: {v}"),
    }
}

fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

#[test]
fn cpu_burn_o0_matches_gcc_o0_listing_5_1() {
    if cfg!(debug_assertions) {
        skip_or_fail("times an optimised nnb: run it with cargo test --release");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = match build_cpu_burn(dir.path()) {
        Ok(bin) => bin,
        Err(reason) => {
            skip_or_fail(&reason);
            return;
        }
    };
    // The last CPU this process may use: away from CPU 0, where other tests pin their
    // spinners.
    let cpu = *nnb_burn::placement::allowed_cpus()
        .last()
        .expect("no allowed CPU");
    let ns = |secs: f64| secs * 1e9 / OPS as f64;
    let (mut c_ns, mut o0_ns, mut fpadd_ns) = (0.0, 0.0, 0.0);
    for attempt in 1..=ATTEMPTS {
        let (mut c, mut o0, mut fpadd) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..RUNS {
            let (secs, x_bits) = run_c(&bin, cpu);
            c.push(secs);
            let (secs, checksum) = run_nnb("cpu-burn-o0", cpu);
            o0.push(secs);
            assert_eq!(
                checksum, x_bits,
                "cpu-burn-o0 and the -O0 binary end with different x after {OPS} ops"
            );
            fpadd.push(run_nnb("fpadd", cpu).0);
        }
        (c_ns, o0_ns, fpadd_ns) = (ns(min(&c)), ns(min(&o0)), ns(min(&fpadd)));
        eprintln!(
            "attempt {attempt}, {OPS} ops on CPU {cpu}, fastest of {RUNS} interleaved runs: \
             gcc -O0 cpu_burn {c_ns:.3} ns/op, nnb cpu-burn-o0 {o0_ns:.3} ns/op ({:.3}x), \
             nnb fpadd {fpadd_ns:.3} ns/op (the -O0 binary takes {:.2}x as long); \
             runtimes (s): cpu_burn {c:?}, cpu-burn-o0 {o0:?}, fpadd {fpadd:?}",
            o0_ns / c_ns,
            c_ns / fpadd_ns,
        );
        if (o0_ns / c_ns - 1.0).abs() <= TOLERANCE {
            break;
        }
    }
    assert!(
        (o0_ns / c_ns - 1.0).abs() <= TOLERANCE,
        "cpu-burn-o0 takes {o0_ns:.3} ns/op, gcc -O0's cpu_burn {c_ns:.3} ns/op: \
         more than {:.0}% apart",
        TOLERANCE * 100.0
    );
    assert!(
        fpadd_ns <= FPADD_AT_MOST * c_ns,
        "fpadd ({fpadd_ns:.3} ns/op) should be the optimised loop, clearly faster than \
         gcc -O0's cpu_burn ({c_ns:.3} ns/op)"
    );
}

/// A staircase whose test node and busy neighbors both run cpu-burn-o0.
const EXPERIMENT: &str = r#"
name = "cpu-burn-o0-staircase"
description = "The thesis' cpu_burn, as built with gcc -O0, on the test node and the neighbors"
repetitions = 1
warmup = 0

[provider]
kind = "local"

[[tenants]]
name = "test"
role = "test"
vcpus = 1

[[tenants]]
name = "neighbor"
count = 1
role = "neighbor"
vcpus = 1

[scenario]
kind = "neighbor-staircase"
max_neighbors = 1

[scenario.busy]
kind = "burner"
workload = "cpu-burn-o0"

[scenario.test]
workload = "cpu-burn-o0"
ops = 250_000_000
"#;

/// Experiment files name the workload as the command line does, and it reaches the
/// jobs; a misspelt name is refused (exit 2) with a message that lists it.
#[test]
fn cpu_burn_o0_is_named_in_experiment_files_and_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cpu-burn-o0.toml");
    std::fs::write(&file, EXPERIMENT).unwrap();
    let v = json(&["run", file.to_str().unwrap(), "--dry-run", "--json"]);
    let scenario = &v["experiment"]["scenario"];
    assert_eq!(scenario["test"]["workload"], "cpu-burn-o0", "{v}");
    assert_eq!(scenario["busy"]["workload"], "cpu-burn-o0", "{v}");
    let jobs: Vec<&Value> = v["steps"]
        .as_array()
        .expect("no steps")
        .iter()
        .flat_map(|s| s["measure"].as_array().into_iter().flatten())
        .collect();
    assert!(!jobs.is_empty(), "{v}");
    for job in jobs {
        assert_eq!(job["job"]["workload"], "cpu-burn-o0", "{job}");
    }

    let out = nnb(&["cpu", "--workload", "cpu-burn-0", "--ops", "1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("expected fpadd, cpu-burn-o0, primes, fma, int or mem"),
        "{stderr}"
    );
}
