//! Wang & Ng (seed 003): the pair suite (issue 25 item 8, §III.C). The two pair
//! files dry-run (the aws one with a cost), and a short version of the local file
//! runs for real (root): one sample per measurement, one after another, CPUTest on
//! both sides of the pair.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{cli, netns};
use serde_json::Value;

const NNB: &str = env!("CARGO_BIN_EXE_nnb");

fn file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("experiments")
        .join(name)
}

/// `nnb run FILE --dry-run [extra]`, which must succeed: its stdout.
fn dry_run(path: &Path, extra: &[&str]) -> String {
    let out = Command::new(NNB)
        .arg("run")
        .arg(path)
        .arg("--dry-run")
        .args(extra)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {NNB}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}: {}{stdout}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The ids of one round, in order, for test tenant `t`.
fn round(t: &str, rep: &str) -> Vec<String> {
    let pair = format!("pair={t},endpoint");
    vec![
        format!("cputest/on={t}/{rep}"),
        format!("cputest/on=endpoint/{rep}"),
        format!("rtt/{pair}/{rep}"),
        format!("tcp/{pair}/{rep}"),
        format!("udp/{pair}/{rep}"),
        format!("badabing/{pair}/{rep}"),
    ]
}

/// Both files plan the suite in the seed's order with stable ids; the local plan
/// puts the second CPUTest on the endpoint (the pair's other side) and every
/// network measurement on the test tenant towards the endpoint's placeholders; the
/// aws file prints what a real run would create and its cost.
#[test]
fn wang_ng_pair_files_dry_run_with_their_steps() {
    let local = file("local-wang-ng-pair.toml");
    let v: Value = serde_json::from_str(&dry_run(&local, &["--json"]))
        .unwrap_or_else(|e| panic!("dry-run JSON: {e}"));
    assert_eq!(v["experiment"]["scenario"]["kind"], "pair-suite");
    let steps = v["steps"].as_array().cloned().unwrap_or_default();
    let ids: Vec<&str> = steps.iter().filter_map(|s| s["id"].as_str()).collect();
    assert_eq!(ids, round("test", "rep=1"));
    let measured: Vec<(String, String, String)> = steps
        .iter()
        .map(|s| {
            let m = &s["measure"][0];
            let target = m["job"]["target"].as_str().unwrap_or("-").to_string();
            (
                m["tenant"].as_str().unwrap_or_default().to_string(),
                m["job"]["kind"].as_str().unwrap_or_default().to_string(),
                target,
            )
        })
        .collect();
    let want = [
        ("test", "steal", "-"),
        ("endpoint", "steal", "-"),
        ("test", "rtt", "@reflector"),
        ("test", "load", "@tcp-sink"),
        ("test", "load", "@sink"),
        ("test", "badabing", "@reflector"),
    ]
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()));
    assert_eq!(measured, want);
    assert!(steps
        .iter()
        .all(|s| s["measure"].as_array().map(Vec::len) == Some(1)));
    // The TCP load asks for the seed's windows, the UDP one for its pacing chunk.
    assert_eq!(steps[3]["measure"][0]["job"]["options"]["tcp"], true);
    assert_eq!(
        steps[3]["measure"][0]["job"]["options"]["send_buffer"],
        256 * 1024
    );
    assert_eq!(
        steps[4]["measure"][0]["job"]["options"]["pacing_chunk"],
        128 * 1024
    );
    // The same file, the same ids (what --resume relies on).
    let again: Value = serde_json::from_str(&dry_run(&local, &["--json"]))
        .unwrap_or_else(|e| panic!("dry-run JSON: {e}"));
    assert_eq!(again["steps"], v["steps"]);

    let aws = dry_run(&file("aws/wang-ng-pair.toml"), &[]);
    for id in round("test", "rep=1") {
        assert!(aws.contains(&id), "no step {id} in:\n{aws}");
    }
    assert!(aws.contains("capacity: ok"), "{aws}");
    assert!(aws.contains("endpoint"), "{aws}");
    let usd: f64 = aws
        .split_once("estimated cost: ")
        // The total follows the line's last ` = $` (the hourly rate comes first).
        .and_then(|(_, cost)| cost.lines().next()?.rsplit_once(" = $"))
        .and_then(|(_, usd)| usd.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no estimated cost in {aws}"));
    assert!(usd > 0.0, "estimated cost ${usd}");
}

/// `text` with `key`'s value in table `[table]` replaced by `value` (the first
/// `key = ` line after the table's header).
fn set(text: &str, table: &str, key: &str, value: &str) -> String {
    let header = format!("[{table}]\n");
    let start = text
        .find(&header)
        .unwrap_or_else(|| panic!("no [{table}] in the file"));
    let rest = &text[start..];
    let prefix = format!("\n{key} = ");
    let at = rest
        .find(&prefix)
        .unwrap_or_else(|| panic!("no {key} in [{table}]"));
    let line_start = start + at + 1;
    let line_end = text[line_start..]
        .find('\n')
        .map_or(text.len(), |e| line_start + e);
    format!(
        "{}{key} = {value}{}",
        &text[..line_start],
        &text[line_end..]
    )
}

/// A short version of the local file runs for real: six samples, one per
/// measurement and all measured, in the plan's order, each of the job kind it
/// measures, CPUTest on both sides of the pair.
#[test]
fn wang_ng_pair_suite_runs_locally_one_sample_per_measurement() {
    if !netns::require_root() {
        return;
    }
    let text =
        std::fs::read_to_string(file("local-wang-ng-pair.toml")).unwrap_or_else(|e| panic!("{e}"));
    let short = [
        ("scenario.cputest", "duration", "\"500ms\""),
        ("scenario.rtt", "probes", "60"),
        ("scenario.rtt", "rate", "20"),
        ("scenario.rtt", "skip", "10"),
        ("scenario.tcp", "bytes", "\"4MB\""),
        ("scenario.tcp", "duration", "\"10s\""),
        ("scenario.udp", "bytes", "\"4MB\""),
        ("scenario.udp", "duration", "\"10s\""),
        ("scenario.badabing", "duration", "\"3s\""),
    ]
    .into_iter()
    .fold(text, |t, (table, key, value)| set(&t, table, key, value));
    let short = short.replace("on_failure = \"retry 1\"", "on_failure = \"skip\"");
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let exp = dir.path().join("pair.toml");
    std::fs::write(&exp, &short).unwrap_or_else(|e| panic!("{e}"));
    let (_run, samples, outcome) = cli::run_experiment_json(&exp, &dir.path().join("results"));
    let records: Vec<Value> = samples
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let failed: Vec<String> = records
        .iter()
        .filter(|r| r["status"] != "ok")
        .map(|r| format!("{}: {}", r["step"], r["error"]))
        .collect();
    assert!(failed.is_empty(), "failed steps: {failed:#?}");
    let seen: Vec<(String, String, String, String)> = records
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (s("step"), s("tenant"), s("role"), s("job"))
        })
        .collect();
    let ids = round("test", "rep=1");
    let want: Vec<(String, String, String, String)> = [
        ("test", "test", "steal"),
        ("endpoint", "endpoint", "steal"),
        ("test", "test", "rtt"),
        ("test", "test", "load"),
        ("test", "test", "load"),
        ("test", "test", "badabing"),
    ]
    .into_iter()
    .zip(ids)
    .map(|((t, r, j), id)| (id, t.to_string(), r.to_string(), j.to_string()))
    .collect();
    assert_eq!(seen, want, "{records:#?}");
    for r in &records {
        assert_eq!(r["scenario"], "pair-suite", "{r}");
        assert!(r["result"].is_object(), "no result in {r}");
    }
    // The RTT series keeps every probe in order, the dropped first ones included.
    let rtt = &records[2]["result"];
    assert_eq!(rtt["probes"], 60, "{rtt}");
    assert_eq!(rtt["log"].as_array().map(Vec::len), Some(60), "{rtt}");
    // CPUTest kept its trace on both sides.
    for r in &records[..2] {
        let cpus = r["result"]["cpus"].as_array().cloned().unwrap_or_default();
        assert!(!cpus.is_empty(), "{r}");
        assert!(cpus.iter().all(|c| c["trace"].is_object()), "{r}");
    }
    // The end-of-run summary is the per-pair table, one row for the one round.
    let summary = &outcome["summary"];
    assert!(
        summary["title"]
            .as_str()
            .is_some_and(|t| t.starts_with("Per pair")),
        "{summary}"
    );
    assert_eq!(
        summary["rows"].as_array().map(Vec::len),
        Some(1),
        "{summary}"
    );
}
