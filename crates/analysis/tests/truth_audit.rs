//! Hand-made runs of the second measurement audit (`reviews/measurement-audit.md`
//! T3, T6, T7, T8, T10, T11, T15, T17): each builds its records as plain JSON and
//! checks the figure against arithmetic written out here.

use std::path::Path;

use nnb_analysis::read::{read_run, Run};
use nnb_analysis::table::Cell;
use nnb_analysis::tables::{node_throughput, throughput};
use serde_json::{json, Value};

/// A run directory holding fixture `name`'s manifest with `manifest` applied, and
/// `records` as its `samples.jsonl`, read.
fn written(
    name: &str,
    manifest: impl Fn(&mut Value),
    records: &[Value],
) -> (tempfile::TempDir, Run) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    let dir = tempfile::tempdir().unwrap();
    let mut m: Value =
        serde_json::from_str(&std::fs::read_to_string(from.join("manifest.json")).unwrap())
            .unwrap();
    manifest(&mut m);
    std::fs::write(dir.path().join("manifest.json"), m.to_string()).unwrap();
    let lines: String = records.iter().map(|r| r.to_string() + "\n").collect();
    std::fs::write(dir.path().join("samples.jsonl"), lines).unwrap();
    let run = read_run(dir.path()).unwrap();
    (dir, run)
}

/// Fixture `name`'s records, as JSON.
fn records_of(name: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
        .join("samples.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn close(got: f64, want: f64, tolerance: f64) {
    assert!((got - want).abs() <= tolerance, "got {got}, want {want}");
}

/// A throughput-staircase load record of `tenant` at `level` (neighbors), repetition
/// `rep`, that received `bps` of payload.
fn staircase_record(step_index: usize, tenant: &str, level: usize, rep: usize, bps: f64) -> Value {
    let mut r = records_of("throughput-m5")[3].clone();
    let label = format!("neighbors={level}");
    r["run_id"] = json!("20261122T100400Z-eeeeee");
    r["scenario"] = json!("throughput-staircase");
    r["group"] = json!("throughput");
    r["step"] = json!(format!("throughput/{label}/rep={rep}"));
    r["step_index"] = json!(step_index);
    r["level"] = json!(level as f64);
    r["level_label"] = json!(label);
    r["rep"] = json!(rep);
    r["part"] = json!(1);
    r["parts"] = json!(1);
    r["tenant"] = json!(tenant);
    r["role"] = json!(if tenant == "test" { "test" } else { "neighbor" });
    r["value"] = json!(bps);
    r["rate_bps"] = json!(bps);
    r
}

/// n4 / n4b: an m5.4xlarge staircase on the m5 host (25 Gbit/s line rate), levels 0
/// and 5. Alone the test node gets its 5 Gbit/s line-rate baseline, as 1400-byte UDP
/// payload 5e9 x 1400 / 1466; at level 5 the 6 nodes share the 25 Gbit/s exactly
/// fairly: 25e9 / 6 x 1400 / 1466 each. `baseline`: the experiment's baseline.
fn m5_staircase(baseline: Option<f64>) -> (tempfile::TempDir, Run) {
    let payload = 1400.0 / 1466.0;
    let mut records = vec![staircase_record(0, "test", 0, 1, 5e9 * payload)];
    let share = 25e9 / 6.0 * payload;
    let mut test = staircase_record(1, "test", 5, 1, share);
    test["parts"] = json!(6);
    records.push(test);
    for n in 1..=5 {
        let mut r = staircase_record(1, &format!("node-{n}"), 5, 1, share);
        r["part"] = json!(n + 1);
        r["parts"] = json!(6);
        records.push(r);
    }
    written(
        "throughput-m5",
        |m| {
            m["experiment"]["provider"]["instance_type"] = json!("m5.4xlarge");
            m["experiment"]["scenario"] = json!({"kind": "throughput-staircase",
                "step": 5, "levels": [0, 5], "msg_size": 1400, "baseline_bps": baseline});
        },
        &records,
    )
}

/// T3 / T6: a host that shares its bandwidth exactly fairly degrades each node by
/// 100 - (25 / 6) / 5 x 100 = 16.67%, measured and predicted alike, whether the
/// baseline is configured (a line rate: n4) or measured alone (payload: n4b).
#[test]
fn t3_t6_a_fairly_shared_m5_host_reads_as_predicted() {
    for baseline in [Some(5e9), None] {
        let (_d, run) = m5_staircase(baseline);
        let n = node_throughput(&run).unwrap().unwrap();
        let d = n.degradation.clone().unwrap();
        assert_eq!(d.nodes, 6);
        let want = 100.0 - 25.0 / 6.0 / 5.0 * 100.0;
        close(d.measured_pct, want, 1e-9);
        close(d.predicted_pct.unwrap(), want, 1e-9);
        // baseline and host both as payload: 5 and 25 Gbit/s x 1400 / 1466
        close(d.baseline_bps, 5e9 * 1400.0 / 1466.0, 1e-3);
        close(d.host_bw_bps.unwrap(), 25e9 * 1400.0 / 1466.0, 1e-3);
        let t = &n.tables()[1];
        let (Cell::Num { value: m, .. }, Cell::Num { value: p, .. }) =
            (&t.rows[0][3], &t.rows[0][5])
        else {
            panic!("{:?}", t.rows[0]);
        };
        close(*m, want, 1e-9);
        close(*p, want, 1e-9);
    }
}

/// The "mean vs predicted %" of each row of a load-steps throughput table.
fn vs_predicted(run: &Run) -> Vec<f64> {
    throughput(run)
        .unwrap()
        .unwrap()
        .table()
        .rows
        .iter()
        .map(|row| match row[7] {
            Cell::Num { value, .. } => value,
            ref other => panic!("{other:?}"),
        })
        .collect()
}

/// T8: a node is predicted what it asked for unless the host cannot carry that. On
/// the load-steps fixture (emulated 200 Mbit/s, 2 neighbors, 97.09 Mbit/s each when
/// saturated), load=50M asks 25 Mbit/s of each, which received (24 + 24.5) / 2 and
/// (25 + 24.9) / 2, mean 24.6: 98.4%; load=100M asks 50 each, mean 48.75: 97.5%. On
/// the m5.large fixture (3 neighbors, a 25 Gbit/s host shared by 48), load=100M asks
/// 33.33 of each, which received 31, 33 and 35: 99.0%.
#[test]
fn t8_nodes_are_predicted_what_they_asked_for_below_saturation() {
    let (_d, run) = written("load-steps", |_| {}, &records_of("load-steps"));
    let pct = vs_predicted(&run);
    close(pct[0], 24.6 / 25.0 * 100.0, 1e-9);
    close(pct[1], 48.75 / 50.0 * 100.0, 1e-9);
    let (_d, run) = written("throughput-m5", |_| {}, &records_of("throughput-m5"));
    close(vs_predicted(&run)[1], 33.0 / (100.0 / 3.0) * 100.0, 1e-9);
}
