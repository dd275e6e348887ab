//! `nnb run` of a campaign end to end with the local provider: every round recorded
//! once in its lane and its own run directory, and a campaign killed with `kill -9`
//! between rounds that `nnb run --resume` finishes, no agent left behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::agents;
use crate::support::cli::{json as nnb_json, NNB};

/// A staircase of a test tenant and one busy neighbor (2 steps a round, no network:
/// quick, no root), as a spatial campaign of 2 lanes x 2 rounds; `ops` sets how long
/// a round takes.
fn campaign(ops: u64) -> String {
    format!(
        r#"name = "e2e-campaign"
repetitions = 1
settle = "50ms"
step_timeout = "60s"

[[tenants]]
name = "test"
role = "test"
vcpus = 1

[[tenants]]
name = "nb"
role = "neighbor"
vcpus = 1

[scenario]
kind = "neighbor-staircase"
neighbor_state = "busy"

[scenario.test]
workload = "fpadd"
ops = {ops}

[campaign]
kind = "spatial"
zones = ["a", "b"]
rounds = 2
"#
    )
}

/// A scratch directory with `text` as `exp.toml`; the experiment and the results
/// directory (not created).
fn scratch(text: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let exp = dir.path().join("exp.toml");
    std::fs::write(&exp, text).unwrap_or_else(|e| panic!("writing {}: {e}", exp.display()));
    let results = dir.path().join("results");
    (dir, exp, results)
}

/// The JSON lines of `path` (none if it does not exist).
fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l}: {e}")))
        .collect()
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The only campaign directory under `results`, once there is one.
fn campaign_dir(results: &Path) -> Option<PathBuf> {
    std::fs::read_dir(results)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.join("campaign.json").is_file())
}

/// Checks `rounds.jsonl` of the campaign in `dir`: rounds 0..4 each once, completed,
/// lanes a, b, a, b, each in its own run directory (which holds the round's
/// samples) named after the campaign, the round and the lane.
fn assert_every_round_once(dir: &Path) -> Vec<Value> {
    let id = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let mut rounds = lines(&dir.join("rounds.jsonl"));
    rounds.sort_by_key(|r| r["round"].as_u64());
    let indexes: Vec<u64> = rounds.iter().filter_map(|r| r["round"].as_u64()).collect();
    assert_eq!(indexes, [0, 1, 2, 3], "each round once: {rounds:?}");
    for r in &rounds {
        let round = r["round"].as_u64().unwrap_or_default();
        let lane = ["a", "b"][round as usize % 2];
        assert_eq!(r["lane"], lane, "{r}");
        assert_eq!(r["lane_round"], round / 2, "{r}");
        assert_eq!(r["status"], "completed", "{r}");
        let run_id = r["run_id"].as_str().unwrap_or_default();
        assert!(
            run_id.starts_with(&format!("{id}-r{round:05}-{lane}")),
            "{run_id}"
        );
        let samples = lines(&dir.join(run_id).join("samples.jsonl"));
        assert_eq!(samples.len(), 2, "the round's 2 steps in {run_id}");
        assert!(r["instances"]
            .as_array()
            .is_some_and(|i| i.iter().any(|i| i["tenant"] == "test")));
    }
    rounds
}

/// Agent pids recorded by every round's run under the campaign `dir` (finished or
/// not).
fn agent_pids(dir: &Path) -> Vec<u32> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path().join("manifest.json")))
        .filter(|m| m.is_file())
        .flat_map(|m| agents::recorded_pids(&read_json(&m)))
        .collect()
}

fn assert_agents_gone(dir: &Path) {
    agents::assert_gone(&agent_pids(dir));
}

/// A local campaign of 2 lanes x 2 rounds records 4 rounds, in round index order
/// (local lanes take turns), each once, in its lane and its own run directory; the
/// outcome says so, and no agent outlives the run.
#[test]
fn a_local_campaign_records_every_round_in_its_lane() {
    let (_guard, exp, results) = scratch(&campaign(20_000));
    let out = nnb_json(&[
        "run",
        exp.to_str().unwrap_or_default(),
        "--results",
        results.to_str().unwrap_or_default(),
        "--quiet",
        "--json",
    ]);
    let o = &out["campaign"];
    assert_eq!(o["status"], "completed", "{out}");
    assert_eq!(
        (o["recorded"].as_u64(), o["total_rounds"].as_u64()),
        (Some(4), Some(4))
    );
    let dir = campaign_dir(&results).expect("a campaign directory");
    assert_eq!(o["dir"].as_str(), dir.to_str());
    let rounds = assert_every_round_once(&dir);
    let mut by_time = rounds.clone();
    by_time.sort_by(|a, b| a["started_at"].as_str().cmp(&b["started_at"].as_str()));
    let order: Vec<&str> = by_time
        .iter()
        .map(|r| r["lane"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(order, ["a", "b", "a", "b"]);
    let m = read_json(&dir.join("campaign.json"));
    assert_eq!(m["kind"], "spatial");
    assert_eq!(m["lanes"], serde_json::json!(["a", "b"]));
    assert_eq!(m["sessions"][0]["status"], "completed");
    assert_eq!(m["sessions"][0]["rounds_run"], 4);
    assert_agents_gone(&dir);
}

/// `kill -9` of `nnb run` once the first round is recorded (the others to come, one
/// perhaps half-measured), then `nnb run --resume ID`: every round recorded exactly
/// once, the killed session marked died, and no `nnb agent` of either session left.
#[test]
fn a_campaign_killed_between_rounds_resumes_with_every_round_once() {
    // Rounds of about a second each, so the kill lands with rounds still to come.
    let (_guard, exp, results) = scratch(&campaign(2_000_000));
    let mut child = Command::new(NNB)
        .args(["run", exp.to_str().unwrap_or_default(), "--results"])
        .arg(&results)
        .arg("--quiet")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning nnb run: {e}"));
    let end = Instant::now() + Duration::from_secs(120);
    let dir = loop {
        assert!(Instant::now() < end, "no round recorded in time");
        if let Ok(Some(st)) = child.try_wait() {
            panic!("nnb run ended before it was killed: {st}");
        }
        if let Some(dir) = campaign_dir(&results) {
            if !lines(&dir.join("rounds.jsonl")).is_empty() {
                break dir;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    child.kill().unwrap_or_else(|e| panic!("kill -9: {e}"));
    let _ = child.wait();
    let before = lines(&dir.join("rounds.jsonl")).len();
    assert!(before < 4, "the campaign finished before the kill");
    assert_agents_gone(&dir);

    let id = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let out = nnb_json(&[
        "run",
        "--results",
        results.to_str().unwrap_or_default(),
        "--resume",
        id,
        "--quiet",
        "--json",
    ]);
    assert_eq!(out["campaign"]["status"], "completed", "{out}");
    assert_every_round_once(&dir);
    let m = read_json(&dir.join("campaign.json"));
    let sessions: Vec<(&str, u64)> = m["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            (
                s["status"].as_str().unwrap_or_default(),
                s["rounds_run"].as_u64().unwrap_or(99),
            )
        })
        .collect();
    assert_eq!(
        sessions,
        [("died", before as u64), ("completed", 4 - before as u64)]
    );
    assert_agents_gone(&dir);
}

/// The dry run of a local campaign adds the campaign's numbers to the one-round plan:
/// 2 zones x 2 rounds, one after another (local lanes take turns), each round its
/// plan's estimate plus the 2 s local launch, and no price.
#[test]
fn the_dry_run_of_a_campaign_counts_every_round() {
    let (_guard, exp, _) = scratch(&campaign(20_000));
    let out = nnb_json(&[
        "run",
        exp.to_str().unwrap_or_default(),
        "--dry-run",
        "--json",
    ]);
    let c = &out["campaign"];
    assert_eq!(c["kind"], "spatial", "{out}");
    assert_eq!(c["zones"], serde_json::json!(["a", "b"]));
    assert_eq!(
        (c["rounds_per_zone"].as_u64(), c["total_rounds"].as_u64()),
        (Some(2), Some(4))
    );
    assert_eq!(c["lanes_in_parallel"], false);
    let round = out["estimate_ms"].as_u64().expect("the plan's estimate");
    assert_eq!(c["round_ms"].as_u64(), Some(round));
    assert_eq!(c["launch_ms"].as_u64(), Some(2_000));
    assert_eq!(c["wall_ms"].as_u64(), Some(4 * (round + 2_000)));
    assert_eq!(c["usd"], Value::Null);
    let text = crate::support::cli::nnb(&["run", exp.to_str().unwrap_or_default(), "--dry-run"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("campaign: 4 rounds (2 per zone x 2 zones)"),
        "{text}"
    );
}
