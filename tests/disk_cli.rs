//! `nnb disk` end to end: a short paced direct-I/O run's JSON report, and bad input
//! refused with exit code 2 and a message naming the problem, before any file is
//! written.

use crate::support::cli::{json, nnb};

/// A directory on this machine's disk (under /tmp, ext4 on the build machines).
fn disk_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("nnb-disk-cli")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temp dir")
}

#[test]
fn json_report_has_the_run_and_its_environment() {
    let dir = disk_dir();
    let d = dir.path().to_str().expect("utf-8 path");
    let v = json(&[
        "disk",
        "--dir",
        d,
        "--iops",
        "100",
        "--read-fraction",
        "0.25",
        "--block-size",
        "8k",
        "--queue-depth",
        "2",
        "--size",
        "4M",
        "--duration",
        "1s",
        "--json",
    ]);
    assert_eq!(v["target_iops"], 100.0, "{v}");
    assert_eq!(v["block_size"], 8192);
    assert_eq!(v["file_size"], 4 << 20);
    assert_eq!(v["queue_depth"], 2);
    assert_eq!(v["read_fraction"], 0.25);
    assert_eq!(v["direct"], true);
    assert_eq!(v["stopped"], false);
    let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k}: {v}"));
    let f = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k}: {v}"));
    let ops = n("ops");
    assert!(ops > 0 && ops <= 100, "100 ops are scheduled in 1 s: {v}");
    assert_eq!(n("reads") + n("writes"), ops);
    assert_eq!(n("bytes"), ops * 8192);
    assert!(
        (f("iops") - ops as f64 / f("elapsed_s")).abs() < 1e-6,
        "{v}"
    );
    assert!(
        (f("read_iops") + f("write_iops") - f("iops")).abs() < 1e-6,
        "{v}"
    );
    assert!(
        (f("bandwidth_bps") - f("iops") * 8192.0 * 8.0).abs() < 1e-3,
        "{v}"
    );
    // Latencies in whole nanoseconds (format version 6), as every latency of nnb.
    for key in ["latency", "pacing"] {
        for q in ["p50_ns", "p99_ns", "max_ns"] {
            assert!(v[key][q].is_u64(), "{key}.{q}: {v}");
        }
    }
    assert!(v["latency"]["mean_ns"].as_f64().expect("mean") > 0.0);
    assert!(v["pacing"]["late_ops"].is_u64(), "{v}");
    let file = std::path::PathBuf::from(v["file"].as_str().expect("file"));
    assert_eq!(file.parent(), Some(dir.path()));
    let name = file
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert!(
        name.starts_with("nnb-disk-") && name.ends_with(".dat"),
        "{name}"
    );
    assert!(!file.exists(), "the scratch file was left behind");
    assert!(v["environment"]["kernel"].is_string(), "{v}");
}

/// Each bad input exits with code 2 and says what is wrong; none leaves a file.
#[test]
fn bad_input_exits_2_with_a_clear_message() {
    let dir = disk_dir();
    let d = dir.path().to_str().expect("utf-8 path");
    let cases: &[(&[&str], &str)] = &[
        (
            &["--iops", "-3"],
            "bad IOPS `-3`: the target must be a number above zero",
        ),
        (&["--iops", "0"], "above zero"),
        (&["--iops", "lots"], "bad IOPS `lots`: not a number"),
        (
            &["--block-size", "1000"],
            "block size 1000 must be a power of two",
        ),
        (&["--block-size", "4x"], "unknown unit `x`"),
        (&["--read-fraction", "1.5"], "read fraction 1.5"),
        (&["--queue-depth", "0"], "queue depth 0"),
        (
            &["--size", "5000"],
            "not a whole number of 4096-byte blocks",
        ),
        (&["--duration", "0s"], "bad duration"),
        (&["--size", "100000GiB"], "free, less than the"),
    ];
    for (extra, needle) in cases {
        let args = [&["disk", "--dir", d][..], extra].concat();
        let out = nnb(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
    }
    let missing = nnb(&["disk", "--dir", "/nonexistent/nnb", "--duration", "1s"]);
    let err = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(2), "{err}");
    assert!(err.contains("/nonexistent/nnb is not a directory"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
}
