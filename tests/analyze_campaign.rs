//! `nnb analyze` of a campaign (issue 26 item 3), end to end: a campaign directory
//! built here from the format's types (`campaign.json`, `rounds.jsonl`) with round
//! run directories of known values, one round unfinished (a run directory without a
//! record), one recorded round whose run directory is gone and one line of the
//! journal torn mid-file. Every expected number is worked out by hand below.

#![cfg(feature = "analysis")]

use std::path::{Path, PathBuf};

use nnb_format::campaign::{
    CampaignKind, CampaignManifest, PlacedInstance, RoundRecord, RoundStatus, CAMPAIGN, ROUNDS,
};
use nnb_format::{Role, FORMAT_VERSION};
use serde_json::{json, Value};

use crate::support::cli::nnb;

/// The campaign id.
const ID: &str = "camp";
/// The measure every round has: the test tenant's runtime at busy, neighbors=0.
const RUNTIME: &str = "busy neighbors=0 runtime_s (s)";
/// Each recorded round's runtime (the mean of its repetitions v - 0.5 and v + 0.5).
const VALUES: [f64; 4] = [3.0, 1.0, 2.0, 2.0];

/// The run id of round `i`.
fn run_id(i: u32) -> String {
    format!("{ID}-r{i:05}-local")
}

/// Writes a run directory for round `i` under `dir` whose test tenant ran for
/// `v - 0.5` and `v + 0.5` s in its two repetitions (and 99 s in its warm-up, which
/// does not count), from the staircase fixture's manifest and records.
fn write_round_run(dir: &Path, i: u32, v: f64) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/analysis/fixtures/staircase");
    let run = dir.join(run_id(i));
    std::fs::create_dir_all(&run).unwrap();
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture.join("manifest.json")).unwrap())
            .unwrap();
    manifest["run_id"] = json!(run_id(i));
    manifest["planned_steps"] = json!(3);
    std::fs::write(run.join("manifest.json"), manifest.to_string()).unwrap();
    let samples = std::fs::read_to_string(fixture.join("samples.jsonl")).unwrap();
    let template: Value = serde_json::from_str(samples.lines().next().unwrap()).unwrap();
    let lines: String = [(0u32, true, 99.0), (1, false, v - 0.5), (2, false, v + 0.5)]
        .iter()
        .enumerate()
        .map(|(index, (rep, warmup, runtime))| {
            let mut r = template.clone();
            let step = if *warmup {
                "busy/neighbors=0/warmup=1".to_string()
            } else {
                format!("busy/neighbors=0/rep={rep}")
            };
            r["run_id"] = json!(run_id(i));
            r["step"] = json!(step);
            r["step_index"] = json!(index);
            r["rep"] = json!(rep.max(&1));
            r["warmup"] = json!(warmup);
            r["value"] = json!(runtime);
            r["runtime_s"] = json!(runtime);
            r["ops_per_sec"] = json!(1e9 / runtime);
            r.to_string() + "\n"
        })
        .collect();
    std::fs::write(run.join("samples.jsonl"), lines).unwrap();
}

/// The record of round `i`, started 10 minutes after the one before.
fn record(i: u32) -> RoundRecord {
    RoundRecord {
        format_version: FORMAT_VERSION,
        round: i,
        lane: "local".into(),
        lane_round: i,
        run_id: run_id(i),
        status: RoundStatus::Completed,
        started_at: format!("2026-11-27T10:{:02}:00.000Z", i * 10),
        finished_at: format!("2026-11-27T10:{:02}:30.000Z", i * 10),
        generation: 0,
        instances: vec![PlacedInstance {
            tenant: "test".into(),
            role: Some(Role::Test),
            private_ip: Some("10.77.0.2".into()),
            ..PlacedInstance::default()
        }],
        error: None,
    }
}

/// A temporal campaign of one lane: rounds 0 to 3 recorded with [`VALUES`], round 4
/// recorded but its run directory gone, round 5's run directory without a record
/// (its controller died), and a torn line between the records.
fn campaign(root: &Path) -> PathBuf {
    let dir = root.join(ID);
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = CampaignManifest {
        format_version: FORMAT_VERSION,
        campaign_id: ID.into(),
        nnb_version: "0.1.0".into(),
        experiment_file: "experiments/local-campaign.toml".into(),
        experiment_text: String::new(),
        experiment: json!({}),
        kind: CampaignKind::Temporal,
        lanes: vec!["local".into()],
        rounds_per_lane: 6,
        interval_ms: Some(600_000),
        sessions: Vec::new(),
    };
    std::fs::write(
        dir.join(CAMPAIGN),
        serde_json::to_string(&manifest).unwrap(),
    )
    .unwrap();
    let mut journal = String::new();
    for i in 0..5 {
        journal.push_str(&serde_json::to_string(&record(i)).unwrap());
        journal.push('\n');
        if i == 2 {
            journal.push_str("{\"round\": 9, \"torn\n");
        }
    }
    std::fs::write(dir.join(ROUNDS), journal).unwrap();
    for (i, v) in VALUES.iter().enumerate() {
        write_round_run(&dir, i as u32, *v);
    }
    write_round_run(&dir, 5, 100.0);
    dir
}

/// The table named `name` of `nnb analyze --format json` output.
fn table<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["tables"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == name))
        .unwrap_or_else(|| panic!("no table {name} in {v}"))
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

/// The number of points of each polyline of an SVG file, longest first.
fn polyline_points(path: &Path) -> Vec<usize> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut n: Vec<usize> = text
        .split("<polyline")
        .skip(1)
        .filter_map(|e| {
            let points = e.split_once("points=\"")?.1.split_once('"')?.0;
            Some(points.split_whitespace().count())
        })
        .collect();
    n.sort_unstable_by(|a, b| b.cmp(a));
    n
}

#[test]
fn a_campaign_has_its_recorded_rounds_their_spread_and_cdf_plots() {
    let root = tempfile::tempdir().unwrap();
    let dir = campaign(root.path());
    let out = root.path().join("report");
    let o = nnb(&[
        "analyze",
        dir.to_str().unwrap(),
        "--format",
        "json",
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "run directory {} has no record in {ROUNDS}",
            run_id(5)
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("{ROUNDS}:4: not a round record")),
        "{err}"
    );
    assert!(err.contains(&format!("round 4 ({})", run_id(4))), "{err}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();

    // Exactly the recorded rounds, each with its mean; round 4's run is gone.
    let rows = table(&v, "campaign_rounds")["rows"]
        .as_array()
        .unwrap()
        .clone();
    let rounds: Vec<u64> = rows.iter().map(|r| r["round"].as_u64().unwrap()).collect();
    assert_eq!(rounds, [0, 1, 2, 3, 4]);
    for (row, want) in rows.iter().zip(VALUES) {
        close(&row[RUNTIME], want);
        assert_eq!(row["private IPs"], "10.77.0.2");
        assert_eq!(row["zone"], Value::Null, "no cloud fields locally");
    }
    assert_eq!(rows[4][RUNTIME], Value::Null);

    // Spread of [3, 1, 2, 2], sorted [1, 2, 2, 3]: the p-th percentile at
    // p/100 x 3: p5 at 0.15 -> 1.15, p25 at 0.75 -> 1.75, p50 = 2, p75 at 2.25 ->
    // 2.25, p95 at 2.85 -> 2.85; mean 2, sd sqrt((1 + 1) / 3).
    let spread = table(&v, "campaign_spread")["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["measure"] == RUNTIME)
        .unwrap()
        .clone();
    assert_eq!(spread["n"], 4);
    for (column, want) in [
        ("min", 1.0),
        ("p5", 1.15),
        ("p25", 1.75),
        ("p50", 2.0),
        ("p75", 2.25),
        ("p95", 2.85),
        ("max", 3.0),
        ("mean", 2.0),
        ("sd", (2.0f64 / 3.0).sqrt()),
        ("p95/p5", 2.85 / 1.15),
    ] {
        close(&spread[column], want);
    }

    // The pair (the temporal lane's one generation) over its repetitions: sorted
    // [0.5, 1.5, 1.5, 1.5, 2.5, 2.5, 2.5, 3.5]: median 2, p5 at 0.35 -> 0.85,
    // p95 at 6.65 -> 3.15.
    let pairs = table(&v, "campaign_pairs")["rows"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(pairs.len(), 1, "{pairs:?}");
    assert_eq!(pairs[0]["n"], 8);
    close(&pairs[0]["median"], 2.0);
    close(&pairs[0]["p5"], 0.85);
    close(&pairs[0]["p95"], 3.15);

    // The CDF steps at 1, 2 and 3 (a staircase of 6 points); the time series has a
    // point per round with a value.
    assert_eq!(
        polyline_points(&out.join("cdf_busy_neighbors_0_runtime_s.svg")).first(),
        Some(&6)
    );
    assert_eq!(
        polyline_points(&out.join("series_busy_neighbors_0_runtime_s.svg")).first(),
        Some(&4)
    );
    let index = std::fs::read_to_string(out.join("index.md")).unwrap();
    assert!(
        index.contains("cdf_busy_neighbors_0_runtime_s.svg"),
        "{index}"
    );
    assert!(
        index.contains("series_busy_neighbors_0_runtime_s.svg"),
        "{index}"
    );

    // A torn manifest: said, and the recorded rounds are still analysed (as spatial).
    std::fs::write(dir.join(CAMPAIGN), "{\"campaign_id\": ").unwrap();
    let o = nnb(&["analyze", dir.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("{CAMPAIGN} is not a campaign manifest")),
        "{err}"
    );
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        text.contains(&format!("Per round: campaign {ID} (spatial)")),
        "{text}"
    );
    // The recorded rounds' rows (not the unfinished round's), the notes under them.
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with(char::is_numeric))
        .collect();
    assert_eq!(rows.len(), 5, "{text}");
    assert!(rows[3].contains(&run_id(3)), "{text}");
}

#[test]
fn runs_given_across_are_the_rounds_of_one_spatial_campaign() {
    let root = tempfile::tempdir().unwrap();
    let dir = campaign(root.path());
    let mut args: Vec<String> = ["analyze", "--across", "--format", "json"]
        .map(String::from)
        .to_vec();
    args.extend((0..4).map(|i| dir.join(run_id(i)).to_string_lossy().into_owned()));
    args.push(root.path().join("nowhere").to_string_lossy().into_owned());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = nnb(&refs);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    assert!(err.contains("nowhere") && err.contains("left out"), "{err}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["campaign"]["kind"], "spatial");
    let rows = table(&v, "campaign_rounds")["rows"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(rows.len(), 4);
    for (row, want) in rows.iter().zip(VALUES) {
        close(&row[RUNTIME], want);
        assert_eq!(row["lane"], "-");
    }
    // Spatial: each run is a pair of its own.
    assert_eq!(
        table(&v, "campaign_pairs")["rows"]
            .as_array()
            .unwrap()
            .len(),
        4
    );

    // A campaign directory is analysed alone.
    let o = nnb(&["analyze", dir.to_str().unwrap(), refs[4]]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
