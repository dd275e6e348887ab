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

/// Review item 21: a staircase beside a metal sweep prints the gap at equal busy
/// threads. The fixtures' test node and neighbors have 1 vCPU each, so levels 0-2 are
/// 1-3 busy threads; the staircase's busy means are 10.0, 11.0 and 12.3 s, the sweep's
/// 10.0, 10.1 and 10.1 s at 1-3 threads: gaps 0%, 11 / 10.1 - 1 = 8.91% and
/// 12.3 / 10.1 - 1 = 21.78% at the full host, whose interval (12.76..30.80 by the delta
/// method, df 2) excludes 0, so the gap has not converged.
#[test]
fn a_staircase_beside_a_metal_sweep_prints_the_gap_table() {
    let args = [
        "analyze",
        &fixture("staircase"),
        &fixture("thread-sweep"),
        "--compare",
    ];
    let o = nnb(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("Test node vs metal: fixture-staircase beside"),
        "{out}"
    );
    assert!(out.contains("gap at level 0: 0.00%"), "{out}");
    assert!(out.contains("gap at the full host: 21.78%"), "{out}");
    assert!(out.contains("not converged"), "{out}");
    let mut with_json = args.to_vec();
    with_json.extend(["--format", "json"]);
    let v = json(&with_json);
    let t = table(&v, "metal_gap");
    let rows = t["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{t}");
    close(&rows[0]["busy threads"], 1.0);
    close(&rows[0]["gap %"], 0.0);
    close(&rows[1]["gap %"], (11.0 / 10.1 - 1.0) * 100.0);
    close(&rows[2]["busy threads"], 3.0);
    close(&rows[2]["gap %"], (12.3 / 10.1 - 1.0) * 100.0);
    assert_eq!(rows[2]["at"], "full host");
    assert_eq!(rows[2]["gap 95% CI"], "12.76..30.80");
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
    // throughput at 50M: mean (24.25 + 24.95) / 2 = 24.60 Mbit/s; each node asked for
    // 50 / 2 = 25 Mbit/s, below its 200 * 1400 / 1442 / 2 = 97.09 share: 24.60 is 98.4%
    assert!(
        out.contains("| load=50M | 2 | 24.60 | 24.25 | 24.95 | 49.20 | 25.00 | 98.4 |"),
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
        stderr(&o).contains("samples.jsonl:3: format_version 99 is not supported"),
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

/// A copy of fixture `name` in a new temporary directory (under `run/`), with `manifest`
/// applied to its manifest and `record` to each record of its `samples.jsonl`.
fn copied(
    name: &str,
    manifest: impl Fn(&mut Value),
    record: impl Fn(&mut Value),
) -> (tempfile::TempDir, PathBuf) {
    let from = Path::new(&fixture(name)).to_path_buf();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("run");
    std::fs::create_dir(&dir).unwrap();
    let edit = |file: &str, f: &dyn Fn(&mut Value)| {
        let text = std::fs::read_to_string(from.join(file)).unwrap();
        let lines: String = text
            .lines()
            .map(|l| {
                let mut v: Value = serde_json::from_str(l).unwrap();
                f(&mut v);
                v.to_string() + "\n"
            })
            .collect();
        std::fs::write(dir.join(file), lines).unwrap();
    };
    let whole: String = std::fs::read_to_string(from.join("manifest.json")).unwrap();
    let mut m: Value = serde_json::from_str(&whole).unwrap();
    manifest(&mut m);
    std::fs::write(dir.join("manifest.json"), m.to_string()).unwrap();
    edit("samples.jsonl", &record);
    if from.join("hdr").is_dir() {
        std::fs::create_dir(dir.join("hdr")).unwrap();
        for e in std::fs::read_dir(from.join("hdr")).unwrap().flatten() {
            std::fs::copy(e.path(), dir.join("hdr").join(e.file_name())).unwrap();
        }
    }
    (root, dir)
}

/// A copy of fixture `name` whose manifest says run id `run_id`.
fn with_run_id(name: &str, run_id: &str) -> (tempfile::TempDir, PathBuf) {
    copied(name, |m| m["run_id"] = Value::from(run_id), |_| {})
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Reliability review NL6 (attack N4): a FIFO `manifest.json` was reported as "it has
/// no manifest.json"; it is refused as not a regular file (exit 2), without hanging.
#[test]
fn nl6_a_fifo_manifest_is_refused_as_not_a_regular_file() {
    let (_root, run) = with_run_id("staircase", "fifo");
    std::fs::remove_file(run.join("manifest.json")).unwrap();
    mkfifo(&run.join("manifest.json"));
    let o = nnb(&["analyze", path_str(&run)]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("manifest.json: refused: a FIFO, not a regular file"),
        "{err}"
    );
    assert!(!err.contains("has no manifest.json"), "{err}");
}

/// Reliability review NL18: a hostile run directory is bad input (exit 2) whichever
/// file carries it: an `hdr_log` leading out of the run exited 1, the same kind of
/// refusal in `samples.jsonl` (here a FIFO) exits 2. With `--out` too.
#[test]
fn nl18_hdr_log_refusals_exit_2_like_samples_refusals() {
    let (root, run) = copied(
        "load-steps",
        |_| {},
        |r| r["hdr_log"] = Value::from("/etc/passwd"),
    );
    let out = root.path().join("report");
    for args in [
        vec!["analyze", path_str(&run)],
        vec!["analyze", path_str(&run), "--out", path_str(&out)],
    ] {
        let o = nnb(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("is not a relative path inside the run directory"),
            "{err}"
        );
    }
    let (_root, run) = with_run_id("load-steps", "fifo-samples");
    std::fs::remove_file(run.join("samples.jsonl")).unwrap();
    mkfifo(&run.join("samples.jsonl"));
    let o = nnb(&["analyze", path_str(&run)]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("samples.jsonl: refused: a FIFO"), "{err}");
}

/// Reliability review NL5 (attacks N2, N3): a run whose id is `compare` wrote its
/// tables into the comparison's `compare/`, and a 5,000-character run id failed with
/// "File name too long" after part of the report was written. `compare` is reserved
/// (the run gets `compare-run/`), and a long id is cut to a bounded name with a hash
/// of the whole id, so two long ids alike in their first characters stay apart.
#[test]
fn nl5_run_ids_compare_and_very_long_get_their_own_directories() {
    let long_a = format!("{}a", "x".repeat(4999));
    let long_b = format!("{}b", "x".repeat(4999));
    let runs = [
        with_run_id("staircase", "compare"),
        with_run_id("staircase", &long_a),
        with_run_id("staircase", &long_b),
    ];
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("report");
    let mut args = vec!["analyze", "--compare", "--format", "csv"];
    args.extend(runs.iter().map(|(_, r)| path_str(r)));
    args.extend(["--out", path_str(&out)]);
    let o = nnb(&args);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.len() < 2000, "the long id is not repeated: {err}");
    let names = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    // The comparison alone in compare/; the run's own tables in compare-run/.
    let compare = names(&out.join("compare"));
    assert!(compare.contains(&"degradation_summary.md".to_string()));
    assert!(
        !compare.contains(&"degradation.md".to_string()),
        "{compare:?}"
    );
    assert!(out.join("compare-run").join("degradation.md").is_file());
    let top = names(&out);
    let long: Vec<&String> = top.iter().filter(|n| n.starts_with("xxxx")).collect();
    assert_eq!(long.len(), 2, "{top:?}");
    for name in long {
        assert!(name.len() <= 100, "{name}");
        assert!(out.join(name).join("degradation.md").is_file(), "{name}");
    }
}

/// A throwaway system user without a home (`useradd -M -r`), removed when dropped:
/// the other local user of the attacks on `--out`.
struct ThrowawayUser(String);

impl ThrowawayUser {
    /// Creates `nnbtest-<tag>-<pid>`; None (the test is skipped or fails by the
    /// testkit's policy) when `useradd` is missing or fails.
    fn new(tag: &str) -> Option<ThrowawayUser> {
        let name = format!("nnbtest-{tag}-{}", std::process::id());
        let made = std::process::Command::new("useradd")
            .args(["-M", "-r", "-s", "/usr/sbin/nologin", &name])
            .status()
            .is_ok_and(|s| s.success());
        nnb_testkit::require(made, &format!("useradd {name}")).then_some(ThrowawayUser(name))
    }

    /// Runs `sh -c script` as this user, which must succeed.
    fn sh(&self, script: &str) {
        let o = std::process::Command::new("runuser")
            .args(["-u", &self.0, "--", "sh", "-c", script])
            .output()
            .unwrap();
        assert!(o.status.success(), "{script}: {}", stderr(&o));
    }
}

impl Drop for ThrowawayUser {
    fn drop(&mut self) {
        let _ = std::process::Command::new("userdel").arg(&self.0).status();
    }
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Reliability review NM6 (attack N10): another local user creates the directory
/// root's `--out` names, in a sticky scratch directory, with `index.html` a symlink to
/// a root-only file; root's report overwrote that file. Now the foreign directory is
/// refused (exit 2, naming its owner) and the file is untouched; so is a directory
/// made beside the attacker's, inside their directory, or through their symlink to a
/// directory of root's.
#[test]
fn nm6_an_out_directory_another_user_controls_is_refused() {
    if !nnb_testkit::require_root("making files as another user") {
        return;
    }
    let Some(user) = ThrowawayUser::new("an") else {
        return;
    };
    let base = tempfile::tempdir().unwrap();
    chmod(base.path(), 0o755);
    let scratch = base.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    chmod(&scratch, 0o1777);
    let victim = base.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    chmod(&victim, 0o700);
    let secret = victim.join("secret.conf");
    std::fs::write(&secret, "root only\n").unwrap();
    chmod(&secret, 0o600);
    let roots = base.path().join("roots");
    std::fs::create_dir(&roots).unwrap();
    let s = path_str(&scratch);
    user.sh(&format!(
        "mkdir {s}/report && ln -s {} {s}/report/index.html && mkdir {s}/wtmp \
         && ln -s {} {s}/link",
        path_str(&secret),
        path_str(&roots)
    ));
    for (out, why) in [
        ("report", "belongs to uid"),
        ("wtmp/report", "wtmp above it belongs to uid"),
        ("link", "link is a symbolic link of uid"),
    ] {
        let o = nnb(&[
            "analyze",
            &fixture("staircase"),
            "--out",
            &format!("{s}/{out}"),
        ]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "--out {out}: {err}");
        assert!(err.contains("refusing to write the report into"), "{err}");
        assert!(err.contains(why), "--out {out}: {err}");
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root only\n");
    assert_eq!(std::fs::read_dir(&roots).unwrap().count(), 0);
}

/// NM6, the caller's own directory: a symbolic link (or a second hard link) already in
/// it is replaced by the report's file, never followed; a directory others may write
/// is refused.
#[test]
fn nm6_links_in_the_out_directory_are_replaced_not_followed() {
    let base = tempfile::tempdir().unwrap();
    let target = base.path().join("target.conf");
    std::fs::write(&target, "keep\n").unwrap();
    let out = base.path().join("report");
    std::fs::create_dir(&out).unwrap();
    chmod(&out, 0o755);
    std::os::unix::fs::symlink(&target, out.join("index.html")).unwrap();
    std::fs::hard_link(&target, out.join("index.md")).unwrap();
    let o = nnb(&["analyze", &fixture("staircase"), "--out", path_str(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep\n");
    for name in ["index.html", "index.md"] {
        let meta = std::fs::symlink_metadata(out.join(name)).unwrap();
        assert!(meta.is_file(), "{name} is a regular file of its own");
    }
    assert!(std::fs::read_to_string(out.join("index.md"))
        .unwrap()
        .contains("20261122T100000Z-aaaaaa"));

    chmod(&out, 0o775);
    let o = nnb(&["analyze", &fixture("staircase"), "--out", path_str(&out)]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("other users can write it (mode 775)"), "{err}");
}
