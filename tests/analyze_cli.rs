//! End-to-end tests of `nnb analyze` on the hand-made runs in
//! `crates/analysis/fixtures`: the numbers it prints in every format, its exit codes
//! and the report files it writes.

#![cfg(feature = "analysis")]

use std::path::{Path, PathBuf};
use std::process::Output;

use nnb_format::Metric;
use serde_json::Value;

use crate::support::cli::{json, nnb};

fn fixture(name: &str) -> String {
    format!("crates/analysis/fixtures/{name}")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn close(got: &Value, want: f64) {
    let g = got
        .as_f64()
        .unwrap_or_else(|| panic!("{got} is not a number"));
    assert!(
        (g - want).abs() <= 1e-9 * want.abs().max(1.0),
        "got {g}, want {want}"
    );
}

/// The table named `name` in `nnb analyze --format json` output.
fn table<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["tables"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == name))
        .unwrap_or_else(|| panic!("no table {name} in {v}"))
}

#[test]
fn terminal_tables_show_the_staircase_numbers() {
    let o = nnb(&["analyze", &fixture("staircase")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with(&format!("Degradation per step: {} (s)", Metric::RuntimeS)),
        "{out}"
    );
    // busy neighbors=2: (12.3 - 10) / 10 = 23%; idle: (10.45 - 10) / 10 = 4.5%
    let row = out
        .lines()
        .find(|l| l.contains("neighbors=2"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.contains("23.00") && row.contains("4.50"), "{row}");
    assert!(
        out.contains("busy: maximum degradation 23.00% at neighbors=2"),
        "{out}"
    );
    assert!(out.contains("1 failed step(s) left out"), "{out}");
}

#[test]
fn json_output_carries_full_precision_numbers() {
    let v = json(&["analyze", &fixture("staircase"), "--format", "json"]);
    assert_eq!(v["runs"][0]["run_id"], "20261122T100000Z-aaaaaa");
    assert_eq!(v["runs"][0]["scenario"], "neighbor-staircase");
    let t = table(&v, "degradation");
    let row = &t["rows"][1];
    assert_eq!(row["level"], "neighbors=1");
    close(&row["busy mean"], 11.0);
    close(&row["busy sd"], 0.4);
    close(&row["busy ±ci95"], 4.303 * 0.4 / 3f64.sqrt());
    close(&row["busy degr %"], 10.0);
    close(&row["idle degr %"], 2.0);
}

#[test]
fn isolation_matrix_json_has_i_plr_and_i_ulr() {
    let v = json(&["analyze", &fixture("isolation-matrix"), "--format", "json"]);
    let t = table(&v, "isolation");
    let row = t["rows"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["id"] == 11))
        .unwrap_or_else(|| panic!("{t}"));
    assert_eq!(row["shortname"], "a_s b_o");
    // a alone saturated: 200 Mops/s; beside b overcommitted: (180 + 176) / 2 = 178;
    // p_max = a unrestricted = 400: I_plr = 22 / 200 = 11%, I_ulr = 22 / 400 = 5.5%.
    close(&row["I_plr %"], 22.0 / 200.0 * 100.0);
    close(&row["I_ulr %"], 22.0 / 400.0 * 100.0);
}

#[test]
fn csv_and_markdown_formats() {
    let o = nnb(&["analyze", &fixture("thread-sweep"), "--format", "csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("# degradation: "), "{out}");
    assert!(out.contains("\n# knees: "), "{out}");
    let knee = out
        .lines()
        .find(|l| l.starts_with("4,5,"))
        .unwrap_or_else(|| panic!("{out}"));
    // (13.0 - 10.2) / 10.2 = 27.45...%, the knee where the test tenant's 4 cores are
    // used up (5 threads)
    let pct: f64 = knee.split(',').nth(4).and_then(|s| s.parse().ok()).unwrap();
    assert!((pct - (13.0 - 10.2) / 10.2 * 100.0).abs() < 1e-9, "{knee}");
    assert!(knee.ends_with(",knee,SMT"), "{knee}");

    let o = nnb(&["analyze", &fixture("load-steps"), "--format", "markdown"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("### Latency vs aggregate neighbor load"),
        "{out}"
    );
    assert!(out.contains("### Throughput per node per level"), "{out}");
    // load=50M: 1201..=1400 ns: mean 1300.5 ns = 1.30 µs, p90 - mean 79.5 ns = 0.08 µs;
    // achieved (24 + 25 + 24.5 + 24.9) / 2 = 49.2 Mbit/s; no probe counters: no loss
    assert!(
        out.contains("| load=50M | 50.0 | 49.2 | 2 | - | 200 | 1.30 |"),
        "{out}"
    );
    // throughput at 50M: mean (24.25 + 24.95) / 2 = 24.60 Mbit/s; prediction of payload
    // 200 * 1400 / 1442 / 2 = 97.09 Mbit/s, of which 24.60 is 25.3%
    assert!(
        out.contains("| load=50M | 2 | 24.60 | 24.25 | 24.95 | 49.20 | 97.09 | 25.3 |"),
        "{out}"
    );
}

#[test]
fn missing_or_foreign_directories_exit_2() {
    let o = nnb(&["analyze", "crates/analysis/fixtures/no-such-run"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no run directory at crates/analysis/fixtures/no-such-run"),
        "{}",
        stderr(&o)
    );

    let o = nnb(&["analyze", "crates/analysis/fixtures"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("is not an nnb run: it has no manifest.json"),
        "{}",
        stderr(&o)
    );

    let o = nnb(&["analyze", &fixture("staircase"), "--compare"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--compare needs at least two runs"));

    let o = nnb(&["analyze"]);
    assert_eq!(o.status.code(), Some(2), "clap: RUN is required");
}

#[test]
fn corrupt_runs_exit_2_naming_file_and_line() {
    // A results file that is not what nnb writes is bad input (reliability review
    // L11): exit 2, like a malformed experiment file.
    let o = nnb(&["analyze", &fixture("corrupt")]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("samples.jsonl:5: "), "{err}");
    let o = nnb(&["analyze", &fixture("wrong-version")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("samples.jsonl:3: format_version 9 is not supported"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn torn_tail_is_analysed_with_a_note() {
    let o = nnb(&["analyze", &fixture("torn-tail")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("samples.jsonl:13: torn last line ignored"),
        "{out}"
    );
    assert!(out.contains("has 1 of 3 records: ignored"), "{out}");
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn out_writes_the_report_and_compare_adds_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let out_s = out.to_string_lossy().into_owned();
    let o = nnb(&[
        "analyze",
        &fixture("staircase"),
        &fixture("throughput-m5"),
        "--compare",
        "--out",
        &out_s,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let printed = stdout(&o);
    assert!(printed.contains("Maximum degradation per run"), "{printed}");
    assert!(stderr(&o).contains("files to"), "{}", stderr(&o));
    let files = files_under(&out);
    let has = |suffix: &str| files.iter().any(|f| f.to_string_lossy().ends_with(suffix));
    assert!(has("index.md") && has("index.html"), "{files:?}");
    assert!(has(".svg"), "{files:?}");
    assert!(has(".csv") && has(".json"), "{files:?}");
    let index = std::fs::read_to_string(out.join("index.md")).unwrap();
    assert!(index.contains("20261122T100000Z-aaaaaa"), "{index}");
}
