//! `nnb run` end to end with the local provider: a real staircase with real agents,
//! the samples it journals, no agent left behind, and a resume after `kill -9`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nnb_format::Metric;
use nnb_testkit::Staircase;
use serde_json::Value;

use crate::support::agents;

use crate::support::cli::{json as nnb_json, nnb, signal, NNB};

/// A staircase of a 1-vCPU test tenant and two 1-vCPU neighbors, busy then idle,
/// small enough for a debug build on a shared 2-core VM.
fn staircase(reps: u32, ops: u64) -> String {
    Staircase {
        name: "e2e-staircase",
        repetitions: reps,
        settle: "100ms",
        step_timeout: Some("60s"),
        on_failure: Some("retry 1"),
        neighbor_state: "both",
        workload: Some("fpadd"),
        ops,
    }
    .toml()
}

/// A scratch directory holding `text` as `exp.toml`, with the experiment's path and
/// the results directory (not created) of a run of it; the directory lives as long
/// as the returned guard.
fn scratch(text: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let exp = dir.path().join("exp.toml");
    std::fs::write(&exp, text).unwrap_or_else(|e| panic!("writing {}: {e}", exp.display()));
    let results = dir.path().join("results");
    (dir, exp, results)
}

/// The only run directory under `results`.
fn run_dir(results: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(results)
        .unwrap_or_else(|e| panic!("{}: {e}", results.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "expected one run in {}", results.display());
    dirs[0].clone()
}

fn samples(run: &Path) -> Vec<Value> {
    lines(&run.join("samples.jsonl"))
}

/// The JSON lines of `path` (none if it does not exist).
fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l}: {e}")))
        .collect()
}

fn manifest(run: &Path) -> Value {
    let text = std::fs::read_to_string(run.join("manifest.json"))
        .unwrap_or_else(|e| panic!("manifest: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("manifest: {e}"))
}

fn assert_agents_gone(m: &Value) {
    agents::assert_gone(&agents::recorded_pids(m));
}

/// Step ids in the order the plan has them.
fn expected_ids(reps: u32) -> Vec<String> {
    let mut ids = Vec::new();
    for state in ["busy", "idle"] {
        for n in 0..=2 {
            for r in 1..=reps {
                ids.push(format!("{state}/neighbors={n}/rep={r}"));
            }
        }
    }
    ids
}

/// Starts `nnb run EXP --results RESULTS --quiet` (plus `--json` if `json`) in the
/// background, its output piped.
fn spawn_run(exp: &Path, results: &Path, json: bool) -> Child {
    let mut args = vec![
        "run",
        exp.to_str().unwrap_or_default(),
        "--results",
        results.to_str().unwrap_or_default(),
        "--quiet",
    ];
    if json {
        args.push("--json");
    }
    Command::new(NNB)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning nnb run: {e}"))
}

/// Waits (at most two minutes, polling every `poll`) until the run `child` writes
/// under `results` has journaled at least `n` samples; returns its run directory.
fn wait_for_samples(child: &mut Child, results: &Path, n: usize, poll: Duration) -> PathBuf {
    let end = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(Instant::now() < end, "{n} steps not journaled in time");
        if let Ok(Some(st)) = child.try_wait() {
            panic!("nnb run ended early: {st}");
        }
        let found = std::fs::read_dir(results)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
            .map(|e| e.path());
        if let Some(run) = found.filter(|r| samples(r).len() >= n) {
            return run;
        }
        std::thread::sleep(poll);
    }
}

/// Seconds since this machine booted, from /proc/uptime.
fn uptime_now() -> f64 {
    let text = std::fs::read_to_string("/proc/uptime").unwrap_or_default();
    let first = text.split_whitespace().next().unwrap_or_default();
    first
        .parse()
        .unwrap_or_else(|e| panic!("/proc/uptime {text:?}: {e}"))
}

/// A sample records the steal counters of `cpus` before and after its job (after not
/// below before, `steal_s` their difference at the result's tick rate), the uptime
/// at its start (the agents share this machine's kernel: positive and not past the
/// uptime now), and the effective frequency wherever this machine has a source.
fn assert_ran_under(r: &Value, cpus: &Value) {
    let steal = &r["result"]["steal"];
    assert_eq!(&steal["cpus"], cpus, "{r}");
    let before = r["steal_ticks_before"].as_u64();
    let after = r["steal_ticks_after"].as_u64();
    let (before, after) = before.zip(after).unwrap_or_else(|| panic!("{r}"));
    assert!(after >= before, "{r}");
    let hz = steal["user_hz"].as_u64().unwrap_or(0) as f64;
    assert_eq!(
        r["steal_s"].as_f64(),
        Some((after - before) as f64 / hz),
        "{r}"
    );
    let uptime = r["uptime_s"].as_f64().unwrap_or(0.0);
    assert!(uptime > 0.0 && uptime <= uptime_now(), "{r}");
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    if cpuinfo.lines().any(|l| l.starts_with("cpu MHz")) {
        assert!(r["effective_mhz"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
        let source = r["freq_source"].as_str().unwrap_or_default();
        assert!(
            ["aperf-mperf", "scaling-cur-freq", "cpuinfo"].contains(&source),
            "{r}"
        );
    }
}

#[test]
fn local_staircase_records_every_step_and_leaves_no_agent() {
    let (_dir, exp, results) = scratch(&staircase(2, 2_000_000));
    let outcome = nnb_json(&[
        "run",
        exp.to_str().unwrap_or_default(),
        "--results",
        results.to_str().unwrap_or_default(),
        "--quiet",
        "--json",
    ]);
    assert_eq!(outcome["outcome"]["status"], "completed");
    assert_eq!(outcome["outcome"]["measured"], 12);
    let run = run_dir(&results);
    let records = samples(&run);
    let ids: Vec<String> = records
        .iter()
        .map(|r| r["step"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(ids, expected_ids(2));
    for r in &records {
        assert_eq!(r["format_version"], nnb_format::FORMAT_VERSION);
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["tenant"], "test");
        assert_eq!(r["metric"], Metric::RuntimeS.name());
        let runtime = r[Metric::RuntimeS.name()].as_f64().unwrap_or(0.0);
        assert!(runtime > 0.0, "no runtime in {r}");
        assert_eq!(r["result"]["burn"]["total_ops"], 2_000_000);
    }
    // The summary is the analysis's degradation table: one row per level, busy and
    // idle side by side (the 6 levels), each against its neighbors=0.
    let summary = &outcome["summary"];
    assert_eq!(summary["name"], "degradation", "{summary}");
    let rows = summary["rows"].as_array().cloned().unwrap_or_default();
    let levels: Vec<&str> = rows.iter().filter_map(|r| r["level"].as_str()).collect();
    assert_eq!(
        levels,
        ["neighbors=0", "neighbors=1", "neighbors=2"],
        "{summary}"
    );
    for group in ["busy", "idle"] {
        assert_eq!(rows[0][format!("{group} degr %")], 0.0, "{summary}");
        for r in &rows {
            assert_eq!(r[format!("{group} n")], 2, "{summary}");
            assert!(r[format!("{group} degr %")].is_f64(), "{summary}");
        }
    }
    let m = manifest(&run);
    assert_eq!(m["sessions"][0]["status"], "completed");
    assert_eq!(m["planned_steps"], 12);
    let tenants = m["sessions"][0]["tenants"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(tenants.len(), 4, "3 tenants and the endpoint");
    assert!(tenants.iter().all(|t| t["health"]["version"].is_string()));
    // Each agent's machine is recorded with its tenant (M7).
    for t in &tenants {
        let kernel = t["environment"]["kernel"].as_str().unwrap_or_default();
        let clocksource = t["environment"]["clocksource"].as_str().unwrap_or_default();
        assert!(!kernel.is_empty() && !clocksource.is_empty(), "{t}");
    }
    // Every sample says what its job ran under, on the test tenant's CPU (version 4).
    let test_cpus = &tenants
        .iter()
        .find(|t| t["name"] == "test")
        .unwrap_or_else(|| panic!("no test tenant in {tenants:?}"))["cpus"];
    for r in &records {
        assert_ran_under(r, test_cpus);
    }
    // Each neighbor job's end is recorded with the steps of its level (M8): one job
    // per neighbor and level, busy ones with what they burned.
    let mut jobs: Vec<(String, String, Vec<String>)> = lines(&run.join("background.jsonl"))
        .iter()
        .map(|b| {
            assert_eq!(b["status"], "ok", "{b}");
            if b["job"] == "busy" {
                assert!(b["ops_per_sec"].as_f64().unwrap_or(0.0) > 0.0, "{b}");
                assert!(b["runtime_s"].as_f64().unwrap_or(0.0) > 0.0, "{b}");
            }
            let steps = b["steps"].as_array().cloned().unwrap_or_default();
            (
                b["tenant"].as_str().unwrap_or_default().to_string(),
                b["job"].as_str().unwrap_or_default().to_string(),
                steps
                    .iter()
                    .map(|s| s.as_str().unwrap_or_default().to_string())
                    .collect(),
            )
        })
        .collect();
    jobs.sort();
    let level = |state: &str, n: usize| -> Vec<String> {
        (1..=2)
            .map(|r| format!("{state}/neighbors={n}/rep={r}"))
            .collect()
    };
    let job = |tenant: &str, kind: &str, state: &str, n: usize| {
        (tenant.to_string(), kind.to_string(), level(state, n))
    };
    assert_eq!(
        jobs,
        [
            job("nb-1", "busy", "busy", 1),
            job("nb-1", "busy", "busy", 2),
            job("nb-1", "idle", "idle", 1),
            job("nb-1", "idle", "idle", 2),
            job("nb-2", "busy", "busy", 2),
            job("nb-2", "idle", "idle", 2),
        ]
    );
    assert_agents_gone(&m);
}

#[test]
fn kill_9_mid_run_then_resume_measures_every_step_exactly_once() {
    let (_dir, exp, results) = scratch(&staircase(3, 3_000_000));
    let results_arg = results.to_str().unwrap_or_default().to_string();
    let mut child = spawn_run(&exp, &results, false);
    // Wait until a few steps are journaled, then kill the controller outright.
    let run = wait_for_samples(&mut child, &results, 4, Duration::from_millis(20));
    child.kill().unwrap_or_else(|e| panic!("kill -9: {e}"));
    let _ = child.wait();
    let before = samples(&run).len();
    assert!(before < 18, "the run finished before the kill");
    // The agents die with their controller (parent-death signal).
    let m = manifest(&run);
    assert_eq!(
        m["sessions"][0]["status"], "running",
        "killed, so never finalized"
    );
    assert_agents_gone(&m);

    let run_id = run
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let outcome = nnb_json(&[
        "run",
        "--results",
        &results_arg,
        "--resume",
        &run_id,
        "--quiet",
        "--json",
    ]);
    let skipped = outcome["outcome"]["skipped"].as_u64().unwrap_or(0);
    assert!(skipped >= 4, "resume skipped only {skipped} steps");
    assert_eq!(
        skipped + outcome["outcome"]["measured"].as_u64().unwrap_or(0),
        18
    );
    let records = samples(&run);
    let mut seen: HashMap<String, usize> = HashMap::new();
    for r in &records {
        *seen
            .entry(r["step"].as_str().unwrap_or_default().to_string())
            .or_insert(0) += 1;
    }
    let expected = expected_ids(3);
    assert_eq!(seen.len(), expected.len());
    for id in &expected {
        assert_eq!(
            seen.get(id),
            Some(&1),
            "step {id} recorded {:?} times",
            seen.get(id)
        );
    }
    // Plan order is kept across the resume.
    let ids: Vec<&str> = records
        .iter()
        .map(|r| r["step"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(ids, expected.iter().map(String::as_str).collect::<Vec<_>>());
    let m = manifest(&run);
    assert_eq!(m["sessions"].as_array().map(Vec::len), Some(2));
    assert_eq!(m["sessions"][1]["status"], "completed");
    assert_agents_gone(&m);
}

#[test]
fn an_invalid_file_exits_2_and_names_the_line() {
    let (_dir, exp, _) =
        scratch(&staircase(2, 1000).replace("settle = \"100ms\"", "settle = \"100 parsecs\""));
    let out = nnb(&["run", exp.to_str().unwrap_or_default(), "--dry-run"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("exp.toml:3:10: error: "), "{err}");
    assert!(err.contains("3 | settle = \"100 parsecs\""), "{err}");
}

/// Reliability review E2, E4, E5, E8 and R15: files the checker used to pass, then
/// ran out of memory or CPU, or failed at launch or in every step, exit 2 at once
/// with the line and column, and create nothing.
#[test]
fn files_that_used_to_fail_later_exit_2_and_create_nothing() {
    let cases = [
        (
            "repetitions = 2",
            "repetitions = 2\nwarmup = 1000000000",
            "exp.toml:3:10: error: the plan would have",
        ),
        (
            "count = 2",
            "count = 1000000",
            "error: this makes more than 1024 tenants",
        ),
        (
            "step_timeout = \"60s\"",
            "step_timeout = \"1ns\"",
            "error: step_timeout must be at least 1ms",
        ),
        ("name = \"test\"", "name = \"..\"", "may not start with `.`"),
    ];
    for (from, to, said) in cases {
        let text = staircase(2, 1000);
        assert!(text.contains(from), "fixture lacks {from}");
        let (_dir, exp, results) = scratch(&text.replacen(from, to, 1));
        for dry in [true, false] {
            let mut args = vec![
                "run",
                exp.to_str().unwrap_or_default(),
                "--results",
                results.to_str().unwrap_or_default(),
            ];
            if dry {
                args.push("--dry-run");
            }
            let out = nnb(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{to}: {err}");
            assert!(err.contains(said), "{to}: {err}");
            assert!(!results.exists(), "{to}: a results directory was created");
        }
    }
    // A 2 MiB comment: refused before it is parsed.
    let big = format!("{}#{}\n", staircase(2, 1000), "x".repeat(2 << 20));
    let (_dir, exp, results) = scratch(&big);
    let out = nnb(&[
        "run",
        exp.to_str().unwrap_or_default(),
        "--results",
        results.to_str().unwrap_or_default(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("larger than 1024 KiB"), "{err}");
    assert!(!results.exists());
}

/// Reliability review NL12: with stdout closed (`>&-`), a command whose output is
/// its result says on stderr that its output is lost, instead of losing it silently
/// (a warning: a read-write /dev/null handed over on purpose looks the same).
#[test]
fn a_closed_stdout_is_said_not_silent() {
    let out = Command::new("sh")
        .args(["-c", "exec \"$0\" schema >&-", NNB])
        .output()
        .unwrap_or_else(|e| panic!("sh: {e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stdout is closed"), "{err}");
    // Discarding the output on purpose is fine, and says nothing.
    let out = Command::new("sh")
        .args(["-c", "exec \"$0\" schema >/dev/null", NNB])
        .output()
        .unwrap_or_else(|e| panic!("sh: {e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("stdout is closed"), "{err}");
}

/// Reliability review L11: resuming a run that is not there is bad input, exit 2.
#[test]
fn resuming_a_run_that_is_not_there_exits_2() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let results = dir.path().join("results");
    std::fs::create_dir_all(&results).unwrap();
    let out = nnb(&[
        "run",
        "--results",
        results.to_str().unwrap_or_default(),
        "--resume",
        "nope",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no run `nope` here"), "{err}");
}

#[test]
fn dry_run_prints_the_plan_without_starting_agents() {
    let (_dir, exp, results) = scratch(&staircase(2, 1000));
    let plan = nnb_json(&[
        "run",
        exp.to_str().unwrap_or_default(),
        "--dry-run",
        "--json",
        "--results",
        results.to_str().unwrap_or_default(),
    ]);
    assert_eq!(plan["steps"].as_array().map(Vec::len), Some(12));
    assert_eq!(plan["tenants"].as_array().map(Vec::len), Some(3));
    assert!(plan["tenants"][0]["cpus"].is_array());
    // Each step carries its level and the tenants present: the test node and the
    // level's neighbors, busy and idle passes alike (2 repetitions per level).
    for (i, step) in plan["steps"].as_array().into_iter().flatten().enumerate() {
        let level = (i / 2) % 3;
        assert_eq!(step["level"], level as f64, "{step}");
        let want: Vec<String> = std::iter::once("test".to_string())
            .chain((1..=level).map(|k| format!("nb-{k}")))
            .collect();
        assert_eq!(step["present"], serde_json::json!(want), "{step}");
    }
    let text = nnb(&["run", exp.to_str().unwrap_or_default(), "--dry-run"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("1 of 3"), "{text}");
    assert!(!results.exists(), "a dry run wrote results");
}

/// The isolation matrix's dry run: the capacity step first (1 + 4 + 4 + 12 levels:
/// a's and b's baselines, then the pairs; 3 repetitions each), tenant a burning on every host CPU; the unrestricted baseline
/// runs over the host's CPUs too, and the table says so.
#[test]
fn the_isolation_matrix_dry_run_measures_the_capacity_first() {
    let exp = "experiments/isolation-matrix-cpu.toml";
    let plan = nnb_json(&["run", exp, "--dry-run", "--json"]);
    let steps = plan["steps"].as_array().cloned().unwrap_or_default();
    assert_eq!(steps.len(), (1 + 4 + 4 + 12) * 3);
    let cap = &steps[0];
    assert_eq!(cap["id"], "capacity/capacity/rep=1");
    assert_eq!(cap["group"], "capacity");
    let job = &cap["measure"][0]["job"];
    assert_eq!(cap["measure"][0]["tenant"], "a");
    assert_eq!(job["kind"], "burn");
    assert_eq!(job["pin"], "compact");
    assert_eq!(job["scope"], "host", "{job}");
    let unrestricted = steps
        .iter()
        .find(|s| s["id"] == "baseline/a=unrestricted/rep=1")
        .unwrap_or_else(|| panic!("no unrestricted baseline"));
    assert_eq!(unrestricted["measure"][0]["job"]["scope"], "host");
    // A tenant-scope burn leaves the field out, as older agents expect.
    assert!(steps[3]["measure"][0]["job"].get("scope").is_none());
    let out = nnb(&["run", exp, "--dry-run"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("pin=compact over the host's CPUs"), "{text}");
}

#[test]
fn schema_is_json_for_editors() {
    let schema = nnb_json(&["schema"]);
    assert!(schema["properties"]["tenants"].is_object(), "{schema}");
    assert!(schema["properties"]["scenario"].is_object());
}

#[test]
fn a_neighbor_agent_killed_mid_run_fails_its_steps_and_the_run_goes_on() {
    // Every agent stays up (unused neighbors idle, not absent), so nb-2's agent is
    // the one launched first, and nothing starts it again.
    let text = staircase(2, 2_000_000)
        .replace("settle = \"100ms\"", "settle = \"300ms\"")
        .replace(
            "neighbor_state = \"both\"",
            "neighbor_state = \"both\"\nunused_neighbors = \"idle\"",
        );
    let (_dir, exp, results) = scratch(&text);
    let mut child = spawn_run(&exp, &results, true);
    // Once the first step is in, kill neighbor nb-2's agent (children are started in
    // tenant order: test, nb-1, nb-2, then the endpoint).
    let run = wait_for_samples(&mut child, &results, 1, Duration::from_millis(10));
    let pids = agents::recorded_pids(&manifest(&run));
    assert_eq!(pids.len(), 4);
    signal(pids[2], "9");
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("waiting for nnb run: {e}"));
    // The run goes on to the end, and then says that steps failed: exit 3, not 0
    // (reliability review NM5), the data kept.
    assert_eq!(
        out.status.code(),
        Some(3),
        "the run should go on and end with 3: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("4 of 12 steps failed"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records = samples(&run);
    assert_eq!(records.len(), 12, "every step recorded once, failed or not");
    for r in &records {
        let label = r["level_label"].as_str().unwrap_or_default();
        if label == "neighbors=2" {
            assert_eq!(r["status"], "failed", "{r}");
            assert_eq!(r["attempts"], 2, "retried once: {r}");
            let error = r["error"].as_str().unwrap_or_default();
            assert!(
                error.contains("nb-2"),
                "error names the dead tenant: {error}"
            );
        } else {
            assert_eq!(r["status"], "ok", "{r}");
        }
    }
    let outcome: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(outcome["outcome"]["failed"], 4);
    assert_agents_gone(&manifest(&run));
}

#[test]
fn ctrl_c_stops_cleanly_keeps_the_samples_and_resume_finishes() {
    let (_dir, exp, results) = scratch(&staircase(3, 3_000_000));
    let results_arg = results.to_str().unwrap_or_default().to_string();
    let mut child = spawn_run(&exp, &results, false);
    let run = wait_for_samples(&mut child, &results, 2, Duration::from_millis(20));
    signal(child.id(), "INT");
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("waiting for nnb run: {e}"));
    assert_eq!(out.status.code(), Some(130), "an interrupted run exits 130");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--resume"), "says how to continue: {err}");
    let m = manifest(&run);
    assert_eq!(m["sessions"][0]["status"], "interrupted");
    assert_agents_gone(&m);
    let kept = samples(&run);
    assert!(kept.len() >= 2 && kept.len() < 18);
    assert!(
        kept.iter().all(|r| r["status"] == "ok"),
        "nothing recorded as failed"
    );

    let run_id = run.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let out = nnb(&[
        "run",
        "--results",
        &results_arg,
        "--resume",
        run_id,
        "--quiet",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ids: Vec<String> = samples(&run)
        .iter()
        .map(|r| r["step"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(ids, expected_ids(3));
}

#[test]
fn off_a_terminal_a_run_prints_one_plain_line_per_step() {
    let (dir, exp, results) = scratch(&staircase(1, 1_000_000));
    let log = dir.path().join("run.log");
    let file = std::fs::File::create(&log).unwrap_or_else(|e| panic!("{e}"));
    let err = file.try_clone().unwrap_or_else(|e| panic!("{e}"));
    let status = Command::new(NNB)
        .args([
            "run",
            exp.to_str().unwrap_or_default(),
            "--results",
            results.to_str().unwrap_or_default(),
        ])
        .env_remove("NO_COLOR")
        .stdout(file)
        .stderr(err)
        .status()
        .unwrap_or_else(|e| panic!("running nnb run: {e}"));
    let text = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success(), "{text}");
    assert!(!text.contains('\x1b'), "escape codes in a file: {text:?}");
    let ids = expected_ids(1);
    let steps: Vec<&str> = text.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(steps.len(), ids.len(), "one line per step: {text}");
    for (i, (line, id)) in steps.iter().zip(&ids).enumerate() {
        let head = format!("[{}/{}] {id} level ", i + 1, ids.len());
        assert!(line.starts_with(&head), "{line:?} should start {head:?}");
        assert!(line.contains(" rep 1: runtime_s "), "{line}");
        assert!(line.ends_with(" s)"), "{line}");
    }
}

/// The tenants whose `nnb agent` processes are children of `parent` now, by the
/// token file each was started with (`<dir>/<tenant>.token`); the endpoint is left out.
fn agents_of(parent: u32) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return names;
    };
    for p in procs.flatten() {
        let dir = p.path();
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so split after its ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid != Some(parent) {
            continue;
        }
        let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if !args.iter().any(|a| a == "agent") {
            continue;
        }
        let token = args
            .iter()
            .skip_while(|a| *a != "--token-file")
            .nth(1)
            .map(Path::new)
            .and_then(Path::file_stem)
            .map(|s| s.to_string_lossy().into_owned());
        if let Some(name) = token.filter(|n| n != "endpoint") {
            names.insert(name);
        }
    }
    names
}

/// Neighbors come and go (issue 13): while each step of a busy-then-idle staircase
/// is measured, the agent processes running are exactly the test tenant's and the
/// level's neighbors', as a watcher of the run's child processes sees them.
/// A snapshot of the run's agents: when (as a time and as a record's timestamp) and
/// which tenants' agents ran.
type Snapshot = (
    std::time::SystemTime,
    String,
    std::collections::BTreeSet<String>,
);

/// Runs `nnb run EXP --results RESULTS --quiet` to its end (it must succeed) while a
/// watcher takes a [`Snapshot`] of its agent processes every 5 ms; returns them.
fn run_watched(exp: &Path, results: &Path) -> Vec<Snapshot> {
    let mut child = spawn_run(exp, results, false);
    let pid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let done = std::sync::Arc::clone(&done);
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let at = std::time::SystemTime::now();
                seen.push((at, nnb_format::timestamp(at), agents_of(pid)));
                std::thread::sleep(Duration::from_millis(5));
            }
            seen
        })
    };
    let status = child
        .wait()
        .unwrap_or_else(|e| panic!("waiting for nnb run: {e}"));
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = watcher
        .join()
        .unwrap_or_else(|_| panic!("watcher panicked"));
    assert!(status.success(), "nnb run: {status}");
    seen
}

/// Asserts that while record `r`'s jobs ran (from the first snapshot at or after
/// its start, timestamps comparing as text, for `span` less a margin) the agents
/// running were exactly `want`'s.
fn assert_ran_beside(
    seen: &[Snapshot],
    r: &Value,
    span: Duration,
    want: &std::collections::BTreeSet<String>,
) {
    let step = r["step"].as_str().unwrap_or_default();
    let started = r["started_at"].as_str().unwrap_or_default();
    let first = seen
        .iter()
        .find(|(_, ts, _)| ts.as_str() >= started)
        .map(|(at, _, _)| *at)
        .unwrap_or_else(|| panic!("no snapshot after {step} started"));
    let window: Vec<_> = seen
        .iter()
        .filter(|(at, _, _)| {
            *at >= first
                && at.duration_since(first).unwrap_or_default() + Duration::from_millis(50) < span
        })
        .collect();
    assert!(window.len() >= 5, "{step}: only {} snapshots", window.len());
    for (_, ts, agents) in window {
        assert_eq!(agents, want, "{step} at {ts}");
    }
}

#[test]
fn during_each_step_exactly_the_levels_tenants_run() {
    let text = staircase(1, 1).replace("ops = 1", "duration = \"400ms\"");
    let (_dir, exp, results) = scratch(&text);
    let seen = run_watched(&exp, &results);
    let records = samples(&run_dir(&results));
    assert_eq!(records.len(), 6);
    for r in &records {
        let step = r["step"].as_str().unwrap_or_default();
        let level: usize = step
            .split("neighbors=")
            .nth(1)
            .and_then(|s| s.split('/').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no level in {step}"));
        let want: std::collections::BTreeSet<String> = std::iter::once("test".to_string())
            .chain((1..=level).map(|k| format!("nb-{k}")))
            .collect();
        // The burn's runtime is its measured window.
        let runtime = Duration::from_secs_f64(r[Metric::RuntimeS.name()].as_f64().unwrap_or(0.0));
        assert_ran_beside(&seen, r, runtime, &want);
    }
}

/// Issue 27 item 4 (thesis §6.2.1 l.481: the 41 us baseline had only the test
/// client and its server): a load-steps run with `unused_neighbors = "absent"`
/// measures its zero level with the test tenant's agent alone, and says so in the
/// level's records (`present`); at the loaded level both neighbors are there and
/// send.
#[test]
fn load_steps_measure_the_baseline_with_the_test_tenant_alone() {
    let text = r#"name = "e2e-baseline-alone"
repetitions = 2
settle = "100ms"
step_timeout = "60s"
on_failure = "abort"

[[tenants]]
name = "test"
role = "test"

[[tenants]]
name = "nb"
count = 2
role = "neighbor"

[scenario]
kind = "load-steps"
levels = ["0", "20M"]
unused_neighbors = "absent"

[scenario.probe]
duration = "600ms"
warmup = "100ms"
"#;
    let (_dir, exp, results) = scratch(text);
    let seen = run_watched(&exp, &results);
    let records = samples(&run_dir(&results));
    // Per repetition: the probe at load=0; the probe and 2 loads at load=20M.
    assert_eq!(records.len(), 2 + 2 * 3, "{records:?}");
    let all = ["test", "nb-1", "nb-2"];
    for r in &records {
        assert_eq!(r["status"], "ok", "{r}");
        let alone = r["level"] == 0.0;
        let want: Vec<&str> = if alone {
            all[..1].to_vec()
        } else {
            all.to_vec()
        };
        assert_eq!(r["present"], serde_json::json!(want), "{r}");
        if r["role"] == "neighbor" {
            assert!(
                r[Metric::RateBps.name()].as_f64().unwrap_or(0.0) > 0.0,
                "{r}"
            );
        }
        if r["role"] == "test" {
            let want = want.iter().map(|t| t.to_string()).collect();
            assert_ran_beside(&seen, r, Duration::from_millis(600), &want);
        }
    }
}
