//! Hand-made runs of the second measurement audit (`reviews/measurement-audit.md`
//! T3, T6, T7, T8, T10, T11, T15, T17): each builds its records as plain JSON and
//! checks the figure against arithmetic written out here.

use std::path::Path;

use nnb_analysis::read::{read_run, Run};
use nnb_analysis::table::Cell;
use nnb_analysis::tables::{node_throughput, run_tables, throughput, Analyses};
use serde_json::{json, Value};

/// A run directory holding fixture `name`'s manifest with `manifest` applied, and
/// `records` as its `samples.jsonl`, read.
fn written(
    name: &str,
    manifest: impl Fn(&mut Value),
    records: &[Value],
) -> (tempfile::TempDir, Run) {
    let dir = crate::fixture::copied(name, manifest, |_| {});
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

/// T10 (v1rep): the staircase fixture with repetition 1 alone (and the warm-ups),
/// busy neighbors=2 at 10.3 s. Its 6 levels have one value each: sd and ±ci95 are
/// unknown ("n/a", not 0), and the verdict says that n = 1 allows no noise or
/// significance judgement, instead of calling the run quiet.
#[test]
fn t10_one_repetition_has_no_spread() {
    let records: Vec<Value> = records_of("staircase")
        .into_iter()
        .filter(|r| r["warmup"] == true || r["rep"] == 1)
        .map(|mut r| {
            if r["step"] == "busy/neighbors=2/rep=1" {
                r["value"] = json!(10.3);
                r["runtime_s"] = json!(10.3);
            }
            r
        })
        .collect();
    let (_d, run) = written(
        "staircase",
        |m| m["experiment"]["repetitions"] = json!(1),
        &records,
    );
    let a = Analyses::of(&run).unwrap();
    let t = a.degradation.as_ref().unwrap().table();
    assert_eq!(t.columns[3], "busy sd");
    assert_eq!(t.columns[4], "busy ±ci95");
    assert_eq!(t.rows.len(), 3);
    for row in &t.rows {
        for cell in [&row[3], &row[4], &row[10], &row[11]] {
            assert_eq!(cell, &Cell::text("n/a"), "{row:?}");
        }
    }
    assert!(
        a.verdict.iter().any(|f| f.starts_with(
            "n = 1 at 6 level(s) (busy/neighbors=0 and 5 more): a single repetition shows \
             no spread, so it allows no noise (CV) or significance judgement there"
        )),
        "{:?}",
        a.verdict
    );
    let tables = run_tables(&run).unwrap();
    let v = tables.iter().find(|t| t.name == "verdict").unwrap();
    assert!(!v
        .rows
        .iter()
        .any(|r| matches!(&r[0], Cell::Text(t) if t.starts_with("quiet"))));
}

/// T15: steal counts in 10 ms ticks, so a level is flagged only above the counter's
/// quantisation. On the staircase fixture (burns of about 10 s): every busy record
/// has 1 tick on CPU 0 (0.01 s: the quantum); busy/neighbors=2/rep=1 (12 s) has 5 on
/// CPUs 0 and 1 (above 2 per CPU, but 0.05 of 24 CPU-seconds = 0.2%); only
/// idle/neighbors=1/rep=2 (10.5 s) has real steal, 37 ticks on CPU 0: 0.37 s, 3.5%.
#[test]
fn t15_steal_is_flagged_above_the_quantum() {
    let records: Vec<Value> = records_of("staircase")
        .into_iter()
        .map(|mut r| {
            let steal = |cpus: Value, ticks: u64| json!({"steal": {"cpus": cpus, "ticks": ticks, "user_hz": 100}});
            if r["step"] == "busy/neighbors=2/rep=1" {
                r["result"] = steal(json!([0, 1]), 5);
            } else if r["group"] == "busy" {
                r["result"] = steal(json!([0]), 1);
            } else if r["step"] == "idle/neighbors=1/rep=2" {
                r["result"] = steal(json!([0]), 37);
            }
            r
        })
        .collect();
    let (_d, run) = written("staircase", |_| {}, &records);
    let a = Analyses::of(&run).unwrap();
    let steal: Vec<&String> = a
        .verdict
        .iter()
        .filter(|f| f.starts_with("steal"))
        .collect();
    assert_eq!(steal.len(), 1, "{:?}", a.verdict);
    assert!(
        steal[0]
            .starts_with("steal in 1 record(s), 0.37 s in all, during idle/neighbors=1 (0.37 s): "),
        "{}",
        steal[0]
    );
    let d = a.degradation.unwrap();
    for g in &d.groups {
        for l in &g.levels {
            let stolen = l.flags.iter().any(|f| f.starts_with("steal"));
            assert_eq!(
                stolen,
                g.group.name() == "idle" && l.label == "neighbors=1",
                "{l:?}"
            );
        }
    }
}

/// `result` with a load sender's totals: `skipped` pacer slots, `errors` failed sends.
fn with_skips(mut r: Value, skipped: u64, errors: u64) -> Value {
    r["result"] = json!({"sent": {"elapsed_s": 1.0, "payload_bps": 1e6, "skipped": skipped,
        "send_errors": errors}, "streams": [{}], "sink": {"streams_reported": 1}});
    r
}

/// T17: the pacer's skips are worded by whose load skipped: in an isolation matrix
/// the measured tenants' (a: 7 slots, b: 3 slots and 2 send errors), in a throughput
/// staircase nodes meant to ask twice the link (the 5 other nodes, 1 slot each), in
/// load steps the neighbors' load (4 slots).
#[test]
fn t17_pacer_skips_are_worded_by_the_loads_role() {
    let records: Vec<Value> = records_of("isolation-matrix")
        .into_iter()
        .map(|r| match (r["role"].as_str(), r["step_index"].as_u64()) {
            (Some("test"), Some(0)) => with_skips(r, 7, 0),
            (Some("neighbor"), Some(8)) => with_skips(r, 3, 2),
            _ => r,
        })
        .collect();
    let (_d, run) = written("isolation-matrix", |_| {}, &records);
    let f = Analyses::of(&run).unwrap().verdict;
    let pacer = |f: &[String]| -> Vec<String> {
        f.iter()
            .filter(|x| x.contains("pacer") || x.contains("send error"))
            .cloned()
            .collect()
    };
    assert_eq!(
        pacer(&f),
        [
            "the load pacer dropped 7 datagram slot(s) after stalls in tenant a's load (a \
             measured tenant): it offered less than its state asks there",
            "the load pacer dropped 3 datagram slot(s) after stalls in tenant b's load (a \
             measured tenant): it offered less than its state asks there",
            "2 send error(s) in tenant b's load (a measured tenant)",
        ]
    );
    assert!(!f.iter().any(|x| x.contains("neighbor load")), "{f:?}");

    let (dir, _) = m5_staircase(Some(5e9));
    let text = std::fs::read_to_string(dir.path().join("samples.jsonl")).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|r| {
            if r["role"] == "neighbor" {
                with_skips(r, 1, 0)
            } else {
                r
            }
        })
        .collect();
    let (_d, run) = written(
        "throughput-m5",
        |m| {
            let staircase: Value = serde_json::from_str(
                &std::fs::read_to_string(dir.path().join("manifest.json")).unwrap(),
            )
            .unwrap();
            *m = staircase;
        },
        &records,
    );
    assert_eq!(
        pacer(&Analyses::of(&run).unwrap().verdict),
        [
            "the load pacer dropped 5 datagram slot(s) after stalls in the other nodes' full-rate \
          loads: they sent below their full rate (twice the link) there, which may still have \
          filled the link"
        ]
    );

    // the load-steps fixture with its HDR logs, which the latency table reads
    let dir = crate::fixture::copied(
        "load-steps",
        |_| {},
        |r| {
            if r["job"] == "load" && r["step_index"] == 2 {
                *r = with_skips(r.clone(), 2, 0);
            }
        },
    );
    let run = read_run(dir.path()).unwrap();
    assert_eq!(
        pacer(&Analyses::of(&run).unwrap().verdict),
        [
            "the load pacer dropped 4 datagram slot(s) after stalls in the neighbor load: it was \
          below its target there"
        ]
    );
}
