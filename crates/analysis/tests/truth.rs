//! One hand-made run per wrong or misleading number of the measurement audit
//! (`reviews/measurement-audit.md` W1-W4, W6, M3, M5, M6, M8, m10): each copies a
//! fixture, edits its manifest or records with plain JSON (and writes its background
//! records), and checks the figure against arithmetic written out here.

use std::path::Path;

use nnb_analysis::read::{read_run, Run};
use nnb_analysis::table::Cell;
use nnb_analysis::tables::{
    achieved_background, degradation, findings, isolation, knees, latency_vs_load, run_tables,
    throughput, tidy, Analyses, Isolation, IsolationPair, PmaxSource, ThreadBasis,
};
use nnb_format::{Metric, StepGroup, TenantState};
use serde_json::{json, Value};

use crate::fixture::copied;

/// A copy of fixture `name` with `manifest` applied to its manifest and `record` to
/// each record of `samples.jsonl`, read.
fn edited(
    name: &str,
    manifest: impl Fn(&mut Value),
    record: impl Fn(&mut Value),
) -> (tempfile::TempDir, Run) {
    let dir = copied(name, manifest, record);
    let run = read_run(dir.path()).unwrap();
    (dir, run)
}

fn tenant_topology(online: u64, cores: u64, smt: u64) -> impl Fn(&mut Value) {
    move |m: &mut Value| {
        // The controller is the operator's 8-CPU laptop: it must not count.
        m["controller"]["topology"] = json!({"logical": 8, "online": 8, "cores": 4,
            "packages": 1, "numa_nodes": 1, "smt_ways": 2});
        let cpus: Vec<u64> = (0..online).collect();
        m["sessions"][0]["tenants"] = json!([{"name": "test", "role": "test",
            "addr": "10.0.0.2:7000", "cpus": cpus, "netns": null, "ip": null,
            "health": {"version": "0.1.0", "cpus": cpus, "running_jobs": 0,
                "topology": {"logical": online, "online": online, "cores": cores,
                    "packages": 2, "numa_nodes": 2, "smt_ways": smt}}}]);
    }
}

fn close(got: f64, want: f64) {
    assert!(
        (got - want).abs() <= 1e-9 * want.abs().max(1.0),
        "got {got}, want {want}"
    );
}

/// W1: an m5.metal test tenant (96 online, 48 cores, 2-way SMT) analysed from an
/// 8-CPU controller expects the knee at 48 + 1 = 49, not 8 / 2 + 1 = 5; without SMT
/// there is no expected knee.
#[test]
fn w1_the_expected_knee_is_the_test_tenants() {
    let (_d, run) = edited("thread-sweep", tenant_topology(96, 48, 2), |_| {});
    let k = knees(&run).unwrap().unwrap();
    assert_eq!(k.expected_knee, Some(49.0));
    let (_d, run) = edited("thread-sweep", tenant_topology(64, 64, 1), |_| {});
    let k = knees(&run).unwrap().unwrap();
    assert_eq!(k.expected_knee, None);
    assert!(k.table().notes.iter().any(|n| n.contains("no SMT")));
}

/// W1/M4: a recorded placement wins over counts: threads placed sibling first
/// (cpu 0 and 4 on core 0) share a core from the 2nd thread on.
#[test]
fn w1_the_expected_knee_follows_the_recorded_placement() {
    let (_d, run) = edited("thread-sweep", tenant_topology(8, 4, 2), |r| {
        let threads = r["level"].as_f64().unwrap() as usize;
        let order = [
            (0, 0),
            (4, 0),
            (1, 1),
            (5, 1),
            (2, 2),
            (6, 2),
            (3, 3),
            (7, 3),
        ];
        let slots: Vec<Value> = order[..threads]
            .iter()
            .map(|(cpu, core)| json!({"cpu": cpu, "core": core, "package": 0}))
            .collect();
        r["result"] = json!({"placement": {"strategy": "smt-sibling", "slots": slots}});
    });
    assert_eq!(knees(&run).unwrap().unwrap().expected_knee, Some(2.0));
}

/// W2: a fixed-time sweep records total ops/s. Per thread, an op takes 1.0 ns up to 4
/// threads (one per core) and 1.6 ns from 5 on (two threads share a core): total ops/s
/// = threads / time per op. Analysed per thread, 8 threads are (1.6 - 1.0) / 1.0 =
/// 60% worse than 1, and the knee is at 5; on totals it would read -...% "better".
#[test]
fn w2_fixed_time_sweeps_are_compared_per_thread() {
    let (_d, run) = edited("thread-sweep", tenant_topology(8, 4, 2), |r| {
        let threads = r["level"].as_f64().unwrap();
        let rep = r["rep"].as_f64().unwrap();
        let ns = if threads <= 4.0 { 1.0 } else { 1.6 } + (rep - 1.5) * 0.002;
        let total = threads / ns * 1e9;
        r["metric"] = json!("ops_per_sec");
        r["value"] = json!(total);
        r["higher_is_better"] = json!(true);
        r["ops_per_sec"] = json!(total);
        r["runtime_s"] = json!(10.0);
    });
    let d = degradation(&run).unwrap().unwrap();
    assert_eq!(d.metric, Metric::NsPerOpPerThread);
    // no per-thread records: the mean over the threads
    assert_eq!(d.thread_basis, Some(ThreadBasis::Mean));
    assert!(!d.higher_is_better);
    let levels = &d.groups[0].levels;
    close(levels[0].mean, 1.0);
    close(levels[7].mean, 1.6);
    let pct = levels[7].degradation_pct.unwrap();
    assert!((pct - 60.0).abs() < 1e-6, "{pct}");
    let k = knees(&run).unwrap().unwrap();
    let knee_at: Vec<f64> = k.steps.iter().filter(|s| s.is_knee).map(|s| s.to).collect();
    assert_eq!(knee_at, vec![5.0]);
    assert_eq!(k.expected_knee, Some(5.0));
}

/// W3: when every repetition of `busy/neighbors=0` failed, the busy group has no
/// degradation (it does not move the reference to neighbors=1), and a note says why.
#[test]
fn w3_a_missing_reference_level_means_no_degradation() {
    let (_d, run) = edited(
        "staircase",
        |_| {},
        |r| {
            if r["group"] == "busy" && r["level"] == 0.0 && r["warmup"] == false {
                r["status"] = json!("failed");
                r["error"] = json!("agent died");
                r["value"] = Value::Null;
                r["runtime_s"] = Value::Null;
            }
        },
    );
    let d = degradation(&run).unwrap().unwrap();
    let busy = d
        .groups
        .iter()
        .find(|g| g.group == StepGroup::Busy)
        .unwrap();
    assert!(busy.reference_missing);
    assert_eq!(busy.reference, "neighbors=0");
    assert!(busy.levels.iter().all(|l| l.degradation_pct.is_none()));
    assert_eq!(busy.max, None);
    let idle = d
        .groups
        .iter()
        .find(|g| g.group == StepGroup::Idle)
        .unwrap();
    assert!(!idle.reference_missing);
    // idle neighbors=2: (10.45 - 10.0) / 10.0 = 4.5%
    assert!((idle.max.unwrap().1 - 4.5).abs() < 1e-9);
    let t = d.table();
    assert!(t
        .notes
        .iter()
        .any(|n| n.contains("busy: the reference level neighbors=0 has no successful repetition")));
}

/// A load result as the load generator writes it: the sender's totals, one entry per
/// stream, and the sink's view of the streams that reported.
fn load_result(sent_bps: f64, streams: usize, reported: Option<usize>, sink_bps: f64) -> Value {
    let streams: Vec<Value> = (0..streams)
        .map(|_| json!({"gso": {"gso": "off"}}))
        .collect();
    json!({"sent": {"elapsed_s": 1.0, "payload_bps": sent_bps, "skipped": 0, "send_errors": 0},
        "streams": streams,
        "sink": reported.map(|n| json!({"streams_reported": n, "rate_bps": sink_bps}))})
}

/// W4: a load whose sink did not report, or reported for 1 of 2 streams, has no
/// received rate: never the sender's 90 Mbit/s, never half a view. The level's mean
/// is over the complete reports only, and the verdict counts the gaps.
#[test]
fn w4_received_rates_come_only_from_complete_sink_reports() {
    let (_d, run) = edited(
        "load-steps",
        |_| {},
        |r| {
            let step = r["step"].as_str().unwrap().to_string();
            if r["job"] == "load" {
                let rate = r["rate_bps"].as_f64().unwrap();
                r["result"] = match (step.as_str(), r["tenant"].as_str().unwrap()) {
                    ("load/load=50M/rep=1", "neighbor-1") => load_result(90e6, 1, None, 0.0),
                    ("load/load=50M/rep=2", "neighbor-1") => load_result(90e6, 2, Some(1), 12e6),
                    // an unprivileged sender: 208 KiB granted of the 4 MiB asked for
                    ("load/load=50M/rep=1", "neighbor-2") => {
                        let mut v = load_result(rate, 1, Some(1), rate);
                        v["streams"][0]["send_buffer"] =
                            json!({"asked": 4_194_304, "granted": 212_992});
                        v
                    }
                    _ => load_result(rate, 1, Some(1), rate),
                };
            }
        },
    );
    let t = throughput(&run).unwrap().unwrap();
    let l = &t.levels[0];
    // neighbor-1 has no received rate at 50M at all; neighbor-2: (25 + 24.9) / 2
    assert_eq!(l.rates.per_node_bps.len(), 1);
    assert_eq!(l.rates.per_node_bps[0].0, "neighbor-2");
    close(l.rates.per_node_bps[0].1, 24.95e6);
    let a = Analyses::of(&run).unwrap();
    assert!(
        a.verdict
            .iter()
            .any(|f| f.contains("sink reports missing for 2 load record(s)")),
        "{:?}",
        a.verdict
    );
    assert!(
        a.verdict
            .iter()
            .any(|f| f.contains("socket buffer smaller than asked for in 1 record(s)")),
        "{:?}",
        a.verdict
    );
    assert!(run
        .notes
        .iter()
        .any(|n| n.contains("2 load record(s) lack a sink report")));
}

/// W6: on an emulated 40 Mbit/s host, which both levels (25 and 50 Mbit/s asked per
/// node) saturate, two neighbors that share it perfectly each receive 40e6 * 1400 /
/// 1442 / 2 bit/s of payload: the table reads 100%.
#[test]
fn w6_a_fairly_shared_saturated_link_reads_100_percent() {
    let each = 40e6 * 1400.0 / 1442.0 / 2.0;
    let (_d, run) = edited(
        "load-steps",
        |m| m["experiment"]["network"]["host_bw_bps"] = json!(40e6),
        |r| {
            if r["job"] == "load" {
                r["value"] = json!(each);
                r["rate_bps"] = json!(each);
            }
        },
    );
    let t = throughput(&run).unwrap().unwrap();
    let table = t.table();
    for row in &table.rows {
        let Cell::Num { value, .. } = row[7] else {
            panic!("{row:?}");
        };
        assert!((value - 100.0).abs() < 1e-9, "{value}");
    }
}

/// M5/M6: the latency table shows the achieved aggregate load beside the target and
/// the probe's loss; a probe that heard nothing is a failed record, not RTT 0.
#[test]
fn m5_m6_latency_shows_loss_and_the_achieved_load() {
    let (_d, run) = edited(
        "load-steps",
        |_| {},
        |r| {
            let step = r["step"].as_str().unwrap().to_string();
            if r["job"] == "latency" {
                r["result"] = match step.as_str() {
                    "load/load=100M/rep=1" => json!({"counts": {"sent": 1000, "answered": 700,
                    "lost": 300, "late": 5}, "clamped": 0}),
                    "load/load=100M/rep=2" => json!({"counts": {"sent": 1000, "answered": 1000,
                    "lost": 0, "late": 0, "unsent": 40}, "clamped": 2}),
                    "load/load=0/rep=2" => json!({"counts": {"sent": 500, "answered": 0,
                    "lost": 500, "late": 0}}),
                    _ => json!({"counts": {"sent": 1000, "answered": 1000, "lost": 0}}),
                };
            }
        },
    );
    let lat = latency_vs_load(&run).unwrap().unwrap();
    let l0 = &lat.levels[0];
    // the dead probe of load=0 rep 2 is not a measurement: one repetition left
    assert_eq!(l0.n, 1);
    let l50 = &lat.levels[1];
    // achieved at 50M: rep 1 24 + 25 = 49, rep 2 24.5 + 24.9 = 49.4 -> 49.2 Mbit/s
    close(l50.achieved_bps.unwrap(), 49.2e6);
    assert_eq!(l50.achieved_n, 2);
    let l100 = &lat.levels[2];
    // achieved at 100M: (48 + 50 + 49 + 48) / 2 = 97.5 Mbit/s; loss 300 of 2000
    close(l100.achieved_bps.unwrap(), 97.5e6);
    assert_eq!((l100.pings_sent, l100.pings_lost), (2000, 300));
    let t = lat.table();
    assert_eq!(t.columns[2], "achieved (Mbit/s)");
    assert_eq!(t.columns[4], "loss %");
    let Cell::Num { value, .. } = t.rows[2][4] else {
        panic!("{:?}", t.rows[2]);
    };
    close(value, 15.0);
    assert!(t
        .notes
        .iter()
        .any(|n| n.contains("5 pongs came after their timeout") && n.contains("2 RTTs above")));
    assert!(run
        .notes
        .iter()
        .any(|n| n.contains("1 latency record(s) heard no answer")));
    let a = Analyses::of(&run).unwrap();
    // the dead probe's record is failed, so not counted: 5 live records x 1000 pings
    assert!(
        a.verdict.iter().any(|f| f.contains("300 of 5000 pings")),
        "{:?}",
        a.verdict
    );
    assert!(
        a.verdict
            .iter()
            .any(|f| f.contains("2 RTT sample(s) above")),
        "{:?}",
        a.verdict
    );
    assert!(
        a.verdict
            .iter()
            .any(|f| f.contains("40 open-loop ping(s) never sent")),
        "{:?}",
        a.verdict
    );
}

/// The verdict of a quiet run says so; a noisy one names the level and its CV. Busy
/// neighbors=1 made noisy: 11, 14, 12 -> mean 12.333, sd sqrt(7/3) = 1.5275, CV 12.4%.
#[test]
fn verdicts_of_a_quiet_and_a_noisy_run() {
    let (_d, quiet) = edited("thread-sweep", tenant_topology(8, 4, 2), |_| {});
    let a = Analyses::of(&quiet).unwrap();
    assert!(a.verdict.is_empty(), "{:?}", a.verdict);
    let tables = run_tables(&quiet).unwrap();
    let v = tables.iter().find(|t| t.name == "verdict").unwrap();
    assert!(matches!(&v.rows[0][0], Cell::Text(t) if t.starts_with("quiet")));

    let (_d, noisy) = edited(
        "staircase",
        |_| {},
        |r| {
            if r["step"] == "busy/neighbors=1/rep=2" {
                r["value"] = json!(14.0);
                r["runtime_s"] = json!(14.0);
            }
            if r["step"] == "busy/neighbors=1/rep=3" {
                r["value"] = json!(12.0);
                r["runtime_s"] = json!(12.0);
            }
            if r["step"] == "busy/neighbors=0/rep=1" {
                r["result"] = json!({"clock": {"source": "clock_gettime", "warning": null}});
            }
            if r["step"] == "idle/neighbors=1/rep=2" {
                r["result"] = json!({"steal": {"cpus": [0], "ticks": 37, "user_hz": 100}});
            }
        },
    );
    let f = findings(&noisy, &Analyses::of(&noisy).unwrap()).unwrap();
    assert!(
        f.iter().any(|x| x.contains("CV 12.4% at busy/neighbors=1")),
        "{f:?}"
    );
    // the noisy level is now the largest, (12.333 - 10) / 10 = 23.33% (neighbors=2:
    // 23.0%), and its interval includes 0
    assert!(
        f.iter()
            .any(|x| x.contains("busy: the largest degradation (23.33%) is not significant")),
        "{f:?}"
    );
    assert!(
        f.iter()
            .any(|x| x.contains("clock fallback in 1 record(s)")),
        "{f:?}"
    );
    assert!(
        f.iter()
            .any(|x| x.contains("steal in 1 record(s), 0.37 s in all")),
        "{f:?}"
    );
    assert!(f.iter().any(|x| x.contains("1 step(s) failed")), "{f:?}");
    // and each qualifier sits in the row of the level it happened at
    let d = Analyses::of(&noisy).unwrap().degradation.unwrap();
    let flags = |group: &str, label: &str| {
        let g = d.groups.iter().find(|g| g.group.name() == group).unwrap();
        g.levels
            .iter()
            .find(|l| l.label == label)
            .unwrap()
            .flags
            .clone()
    };
    assert_eq!(flags("busy", "neighbors=1"), ["CV 12.4%"]);
    assert_eq!(flags("busy", "neighbors=0"), ["clock fallback"]);
    assert_eq!(flags("idle", "neighbors=1"), ["steal 0.37 s"]);
    assert!(flags("idle", "neighbors=2").is_empty());
}

/// The long form: one row per role × group × level × metric with a value. The
/// staircase's test records carry runtime and ops/s: 2 groups × 3 levels × 2 = 12
/// rows; busy neighbors=2: mean (12 + 12.6 + 12.3) / 3 = 12.3, 23% worse than 10.
#[test]
fn tidy_rows_by_hand() {
    let (_d, run) = edited("staircase", |_| {}, |_| {});
    let t = tidy(&run).unwrap();
    assert_eq!(t.rows.len(), 12, "{:?}", t.rows);
    let row = t
        .rows
        .iter()
        .find(|r| {
            r[2] == Cell::text("busy")
                && r[4] == Cell::text("neighbors=2")
                && r[5] == Cell::text("runtime_s")
        })
        .unwrap();
    assert_eq!(row[5], Cell::text("runtime_s"));
    assert_eq!(row[6], Cell::Int(3));
    let num = |c: &Cell| match c {
        Cell::Num { value, .. } => *value,
        other => panic!("{other:?}"),
    };
    close(num(&row[7]), 12.3);
    assert!((num(&row[11]) - 23.0).abs() < 1e-9);
}

/// Tenant a's values in Volpert et al.'s Table 2 (CPU, % of one CPU), by level label:
/// the baselines (column a) and a beside b (column a').
fn table2(label: &str) -> f64 {
    match label {
        "a=undercommitted" => 12.47,
        "a=saturated" | "a=overcommitted" => 25.00,
        "a=unrestricted" => 98.92,
        "a=undercommitted,b=undercommitted" => 12.48,
        "a=undercommitted,b=saturated" => 12.36,
        "a=undercommitted,b=overcommitted" => 12.35,
        "a=undercommitted,b=unrestricted" => 12.20,
        "a=saturated,b=undercommitted" => 24.91,
        "a=saturated,b=saturated" => 24.06,
        "a=saturated,b=overcommitted" => 23.48,
        "a=saturated,b=unrestricted" => 24.71,
        "a=overcommitted,b=undercommitted" => 25.00,
        "a=overcommitted,b=saturated" => 25.13,
        "a=overcommitted,b=overcommitted" => 25.08,
        "a=overcommitted,b=unrestricted" => 25.09,
        other => panic!("no Table 2 value for {other}"),
    }
}

/// The isolation-matrix fixture with tenant a's values of Table 2 (both repetitions
/// alike), then each record passed to `edit`, which may change it and leaves it out
/// by returning false; with `capacity`, a capacity step of two repetitions before
/// the baselines, whose burn was pinned on CPUs 0 and 1.
fn table2_run(
    capacity: Option<f64>,
    edit: impl Fn(&mut Value) -> bool,
) -> (tempfile::TempDir, Run) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/isolation-matrix");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(from.join("manifest.json"), dir.path().join("manifest.json")).unwrap();
    let mut records: Vec<Value> = std::fs::read_to_string(from.join("samples.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter_map(|mut r: Value| {
            r["step_index"] = json!(r["step_index"].as_u64().unwrap() + 2);
            if r["role"] == "test" {
                let v = table2(r["level_label"].as_str().unwrap());
                r["value"] = json!(v);
                r["ops_per_sec"] = json!(v);
            }
            edit(&mut r).then_some(r)
        })
        .collect();
    if let Some(v) = capacity {
        let first = records
            .iter()
            .find(|r| r["role"] == "test")
            .unwrap()
            .clone();
        for rep in [2, 1] {
            let mut r = first.clone();
            r["step"] = json!(format!("capacity/capacity/rep={rep}"));
            r["step_index"] = json!(rep - 1);
            r["group"] = json!("capacity");
            r["level"] = json!(0.0);
            r["level_label"] = json!("capacity");
            r["rep"] = json!(rep);
            r["value"] = json!(v);
            r["ops_per_sec"] = json!(v);
            r["result"] = json!({"scope": "host", "placement": {"strategy": "compact",
                "slots": [{"cpu": 0, "core": 0}, {"cpu": 1, "core": 0}]}});
            records.insert(0, r);
        }
    }
    let samples: String = records.iter().map(|r| r.to_string() + "\n").collect();
    std::fs::write(dir.path().join("samples.jsonl"), samples).unwrap();
    let run = read_run(dir.path()).unwrap();
    (dir, run)
}

fn pair(iso: &Isolation, id: u32) -> &IsolationPair {
    iso.pairs.iter().find(|p| p.id == id).unwrap()
}

/// m10: p_max is the resource's maximum, measured in the capacity step. Table 2 of
/// Volpert et al. on 2 CPUs (p_max = 2 x 100% = 200): a_s b_o, |25.00 - 23.48| = 1.52,
/// I_ulr = 1.52 / 200 = 0.76% (as printed), I_plr = 1.52 / 25.00 = 6.08% (printed
/// 6.07, from unrounded means); a_o b_f: |25.00 - 25.09| = 0.09, 0.045% and 0.36%.
#[test]
fn m10_p_max_is_the_capacity_step() {
    let (_d, run) = table2_run(Some(200.0), |_| true);
    let iso = isolation(&run).unwrap().unwrap();
    close(iso.p_max, 200.0);
    assert_eq!(
        iso.p_max_source,
        PmaxSource::Capacity {
            n: 2,
            cpus: Some(2)
        }
    );
    // The baselines are a's four states, the capacity is not one of them.
    assert_eq!(iso.baselines.len(), 4);
    let p = pair(&iso, 11);
    assert_eq!(p.shortname, "a_s b_o");
    close(p.p_a, 25.0);
    close(p.p_b, 23.48);
    assert!((p.i_ulr - 0.0076).abs() < 1e-12, "{}", p.i_ulr);
    assert!((p.i_plr - 0.0608).abs() < 1e-12, "{}", p.i_plr);
    let p = pair(&iso, 16);
    assert!((p.i_ulr - 0.00045).abs() < 1e-12, "{}", p.i_ulr);
    assert!((p.i_plr - 0.0036).abs() < 1e-12, "{}", p.i_plr);

    let t = iso.table();
    assert_eq!(t.rows.len(), 1 + 4 + 12);
    assert_eq!(t.rows[0][..2], [Cell::Int(0), Cell::text("capacity")]);
    assert!(matches!(t.rows[0][2], Cell::Num { value, .. } if value == 200.0));
    assert_eq!(t.rows[0][3], Cell::Empty);
    assert_eq!(t.rows[1][1], Cell::text("a_u"));
    let note = iso.p_max_note();
    assert_eq!(
        note,
        "p_max = 200 ops/s: the host's capacity, 2 CPUs busy, tenant a alone \
         (capacity step, id 0, n = 2)"
    );
    assert!(t.notes.contains(&note), "{:?}", t.notes);
    assert!(!note.contains("stand-in"));
}

/// m10: a run made before the capacity step existed falls back to a's unrestricted
/// baseline (98.92), and says it is a stand-in: a_s b_o, I_ulr = 1.52 / 98.92.
#[test]
fn m10_without_a_capacity_step_the_unrestricted_baseline_stands_in() {
    let (_d, run) = table2_run(None, |_| true);
    let iso = isolation(&run).unwrap().unwrap();
    close(iso.p_max, 98.92);
    assert_eq!(iso.p_max_source, PmaxSource::UnrestrictedBaseline);
    close(pair(&iso, 11).i_ulr, 1.52 / 98.92);
    close(pair(&iso, 11).i_plr, 1.52 / 25.0);
    let t = iso.table();
    assert_eq!(t.rows.len(), 4 + 12);
    assert_eq!(t.rows[0][0], Cell::Int(1));
    let note = iso.p_max_note();
    assert!(
        note.starts_with("p_max = 99 ops/s: stand-in, a's unrestricted baseline (id 4); this run has no capacity step, so I_ulr is relative to it, not to the resource maximum"),
        "{note}"
    );
    assert!(t.notes.contains(&note), "{:?}", t.notes);
}

/// m10: with neither a capacity step nor a's unrestricted baseline, the largest
/// baseline stands in (here a overcommitted, raised to 26.00 so it is the largest
/// alone), and the note names it: a_s b_o, I_ulr = 1.52 / 26.
#[test]
fn m10_without_capacity_or_unrestricted_the_largest_baseline_stands_in() {
    let (_d, run) = table2_run(None, |r| {
        let baseline = |r: &Value, state: &str| {
            r["group"] == "baseline" && r["level_label"] == state && r["role"] == "test"
        };
        if baseline(r, "a=overcommitted") {
            // Table 2's a_o is 25.00, as a_s: raised so that one baseline is largest.
            r["value"] = json!(26.0);
            r["ops_per_sec"] = json!(26.0);
        }
        !baseline(r, "a=unrestricted")
    });
    let iso = isolation(&run).unwrap().unwrap();
    close(iso.p_max, 26.0);
    assert_eq!(
        iso.p_max_source,
        PmaxSource::LargestBaseline {
            id: 3,
            state: TenantState::Overcommitted
        }
    );
    assert_eq!(iso.baselines.len(), 3);
    close(pair(&iso, 11).i_ulr, 1.52 / 26.0);
    // a_o b_o against a's raised overcommitted baseline: |26 - 25.08| / 26 both ways.
    close(pair(&iso, 15).i_ulr, 0.92 / 26.0);
    close(pair(&iso, 15).i_plr, 0.92 / 26.0);
    let note = iso.p_max_note();
    assert_eq!(
        note,
        "p_max = 26 ops/s: stand-in, a's largest baseline (overcommitted, id 3); this run \
         has no capacity step and no unrestricted baseline, so I_ulr is relative to it, \
         not to the resource maximum"
    );
    assert!(iso.table().notes.contains(&note));
}

/// m10, version 5: with host-side utilisation recorded, a and a' are it, not the
/// generator's ops/s: tenant a's `host_cpu_pct` carries Table 2's values (the ops/s
/// are set far off, so reading them would show), b's is 40% of one CPU (30 and 50 in
/// its two repetitions: sd 14.142). The capacity step kept CPUs 0 and 1 busy, so
/// p_max = 2 x 100% = 200 exactly, not the 199 it measured. a_s b_o: I_ulr = 1.52 /
/// 200 = 0.76%; Fig. 5's shares: a's 23.48 / 200 = 11.74%, b's 40 / 200 = 20% with
/// sd 14.142 / 200 = 7.071%.
#[test]
fn m10_host_side_cpu_utilisation_is_what_the_matrix_compares() {
    let (_d, run) = table2_run(Some(1e9), |r| {
        if r["role"] == "test" {
            r["host_cpu_pct"] = if r["group"] == "capacity" {
                json!(199.0)
            } else {
                r["value"].clone()
            };
            r["ops_per_sec"] = json!(1e9);
            r["value"] = json!(1e9);
        } else {
            r["host_cpu_pct"] = json!(if r["rep"] == 1 { 30.0 } else { 50.0 });
        }
        true
    });
    let iso = isolation(&run).unwrap().unwrap();
    assert!(iso.host_side);
    assert_eq!(iso.metric, Metric::HostCpuPct);
    close(iso.p_max, 200.0);
    assert_eq!(iso.p_max_source, PmaxSource::Cpus { cpus: 2 });
    let p = pair(&iso, 11);
    close(p.p_a, 25.0);
    close(p.p_b, 23.48);
    assert!((p.i_ulr - 0.0076).abs() < 1e-12, "{}", p.i_ulr);
    let (b_mean, b_sd) = p.b.unwrap();
    close(b_mean, 40.0);
    close(b_sd, 200f64.sqrt());
    let shares = iso.shares();
    assert_eq!(shares.len(), 4 + 12);
    let s11 = shares.iter().find(|s| s.id == 11).unwrap();
    close(s11.a.0, 11.74);
    close(s11.a.1, 0.0);
    let (b_share, b_share_sd) = s11.b.unwrap();
    close(b_share, 20.0);
    close(b_share_sd, 200f64.sqrt() / 2.0);
    assert!(shares.iter().filter(|s| s.id <= 4).all(|s| s.b.is_none()));
    let t = iso.table();
    assert_eq!(t.columns[2], "a (% CPU)");
    assert!(
        t.notes.iter().any(|n| n.contains("seen from the host")),
        "{:?}",
        t.notes
    );
    assert_eq!(
        iso.p_max_note(),
        "p_max = 200.00 % CPU: 2 CPUs x 100%, the CPUs tenant a's capacity step kept busy"
    );
}

/// m10, version 5: a memory matrix has no capacity step; p_max is the machine's
/// memory its memory jobs reported (8 GiB), and a and a' are resident bytes shown in
/// MiB: a_s = 256 MiB alone, 128 MiB beside b: I_plr = 50%, I_ulr = 128 MiB / 8 GiB
/// = 1.5625%.
#[test]
fn m10_memory_utilisation_is_relative_to_the_machines_memory() {
    let mib = (1u64 << 20) as f64;
    let (_d, run) = table2_run(None, |r| {
        r["job"] = json!("memory");
        r["metric"] = json!("rss_bytes");
        let label = r["level_label"].as_str().unwrap_or_default().to_string();
        let rss = match label.as_str() {
            "a=saturated" => 256.0 * mib,
            "a=saturated,b=overcommitted" => 128.0 * mib,
            _ => 100.0 * mib,
        };
        r["host_mem_bytes"] = json!(rss);
        r["rss_bytes"] = json!(rss);
        r["value"] = json!(rss);
        r["result"] =
            json!({"peak_rss_bytes": rss, "elapsed_s": 3.0, "mem_total_bytes": 8u64 << 30});
        true
    });
    let iso = isolation(&run).unwrap().unwrap();
    assert_eq!(iso.metric, Metric::HostMemBytes);
    assert_eq!(iso.p_max_source, PmaxSource::Memory { bytes: 8 << 30 });
    let p = pair(&iso, 11);
    close(p.i_plr, 0.5);
    close(p.i_ulr, 128.0 / 8192.0);
    let t = iso.table();
    assert_eq!(t.columns[2], "a (MiB)");
    let row = t.rows.iter().find(|r| r[0] == Cell::Int(11)).unwrap();
    assert!(matches!(row[2], Cell::Num { value, .. } if (value - 256.0).abs() < 1e-9));
    assert!(matches!(row[3], Cell::Num { value, .. } if (value - 128.0).abs() < 1e-9));
    assert!(iso
        .p_max_note()
        .starts_with("p_max = 8192.0 MiB: the machine's memory"));
}

/// `fixture` as a run of format `version`: its manifest and every record say so.
fn as_version(fixture: &str, version: u64) -> (tempfile::TempDir, Run) {
    edited(
        fixture,
        |m| m["format_version"] = json!(version),
        |r| r["format_version"] = json!(version),
    )
}

/// The steps of one staircase level: its warm-up and three repetitions.
fn level_steps(group: &str, n: usize) -> Vec<String> {
    std::iter::once(format!("{group}/neighbors={n}/warmup=1"))
        .chain((1..=3).map(|r| format!("{group}/neighbors={n}/rep={r}")))
        .collect()
}

/// A background record as `nnb run` writes one (format version 3), with `fields`
/// (what it achieved, its status) over the defaults of a neighbor stopped cleanly.
fn background_record(tenant: &str, job: &str, steps: &[String], fields: Value) -> Value {
    let mut r = json!({"format_version": 3, "run_id": "20261122T100000Z-aaaaaa",
        "tenant": tenant, "role": "neighbor", "job": job, "steps": steps, "status": "ok",
        "state": "stopped", "error": null, "started_at": "2026-11-22T10:00:00.000Z",
        "stopped_at": "2026-11-22T10:01:00.000Z", "ran_s": 60.0, "target_bps": null,
        "runtime_s": null, "ops_per_sec": null, "sent_bps": null, "rate_bps": null,
        "reflected": null, "send_failures": null, "garbage": null, "result": {"any": 1}});
    for (k, v) in fields.as_object().unwrap() {
        r[k] = v.clone();
    }
    r
}

/// `dir`'s run with `records` as its `background.jsonl`, read again.
fn with_background(dir: &tempfile::TempDir, records: &[Value]) -> Run {
    let lines: String = records.iter().map(|r| r.to_string() + "\n").collect();
    std::fs::write(dir.path().join("background.jsonl"), lines).unwrap();
    read_run(dir.path()).unwrap()
}

/// M8: a version-3 staircase whose busy neighbors' ends were recorded. At
/// busy/neighbors=1, nb-1 burned 4e8 ops/s. At neighbors=2, nb-1 burned 3e8; nb-2's
/// first job ended on its own during rep 1 after 2e8 ops/s (failed), its restart
/// burned 3e8: its mean is (2e8 + 3e8) / 2 = 2.5e8, the level's sum 3e8 + 2.5e8 =
/// 5.5e8 ops/s. Idle neighbors run nothing and stay out of the table; the failed job
/// is in the verdict.
#[test]
fn m8_the_busy_neighbors_achieved_ops_per_level() {
    let (dir, _) = as_version("staircase", 3);
    let two = level_steps("busy", 2);
    let ops = |v: f64| json!({"ops_per_sec": v, "runtime_s": 60.0});
    let run = with_background(
        &dir,
        &[
            background_record("nb-1", "busy", &level_steps("busy", 1), ops(4e8)),
            background_record("nb-1", "busy", &two, ops(3e8)),
            background_record(
                "nb-2",
                "busy",
                &two[..2],
                json!({"ops_per_sec": 2e8, "status": "failed", "state": "done",
                    "error": "it ended done before it was stopped"}),
            ),
            background_record("nb-2", "busy", &two[1..], ops(3e8)),
            background_record("nb-1", "idle", &level_steps("idle", 1), json!({})),
        ],
    );
    assert_eq!(run.manifest.format_version, 3);
    assert_eq!(run.background.len(), 5);
    let b = achieved_background(&run).unwrap().unwrap();
    let levels: Vec<(&str, &str, usize, usize, usize)> = b
        .levels
        .iter()
        .map(|l| {
            (
                l.group.name(),
                l.label.as_str(),
                l.neighbors,
                l.reported,
                l.failed,
            )
        })
        .collect();
    assert_eq!(
        levels,
        [
            ("busy", "neighbors=1", 1, 1, 0),
            ("busy", "neighbors=2", 2, 2, 1)
        ]
    );
    close(b.levels[0].ops_per_sec.unwrap(), 4e8);
    close(b.levels[1].ops_per_sec.unwrap(), 5.5e8);
    assert_eq!(b.levels[1].target_bps, None);
    let t = b.table();
    assert_eq!(
        t.columns,
        ["level", "neighbors", "reported", "failed", "ops/s"]
    );
    assert_eq!(t.rows[1][0], Cell::text("busy/neighbors=2"));
    let a = Analyses::of(&run).unwrap();
    assert!(
        a.verdict.iter().any(|f| f.starts_with(
            "1 background job(s) failed or could not be stopped (e.g. neighbor busy on nb-2: \
             it ended done before it was stopped)"
        )),
        "{:?}",
        a.verdict
    );
    let names: Vec<String> = run_tables(&run)
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names[..2], ["degradation", "background"]);
}

/// M8: load neighbors of 100 Mbit/s each. At neighbors=1, nb-1 sent 95 Mbit/s of which
/// 18 arrived: 18% of its target, which the verdict flags. At neighbors=2, nb-1 sent
/// 100 and 99 arrived; nb-2 sent 98 but its sink report is incomplete (no received
/// rate): target 200, sent 198, received 99 of nb-1's 100 = 99%. The endpoint's
/// reflector failed to send 3 pongs.
#[test]
fn m8_a_load_neighbor_short_of_its_target_is_flagged() {
    let (dir, _) = as_version("staircase", 3);
    let load = |sent: f64, received: Option<f64>| json!({"target_bps": 1e8, "sent_bps": sent, "rate_bps": received, "runtime_s": 60.0});
    let two = level_steps("busy", 2);
    let all: Vec<String> = level_steps("busy", 0)
        .into_iter()
        .chain(level_steps("busy", 1))
        .chain(two.clone())
        .collect();
    let run = with_background(
        &dir,
        &[
            background_record(
                "nb-1",
                "load",
                &level_steps("busy", 1),
                load(9.5e7, Some(1.8e7)),
            ),
            background_record("nb-1", "load", &two, load(1e8, Some(9.9e7))),
            background_record("nb-2", "load", &two, load(9.8e7, None)),
            background_record(
                "endpoint",
                "serve",
                &all,
                json!({"role": "endpoint", "reflected": 1000, "send_failures": 3, "garbage": 0}),
            ),
        ],
    );
    let b = achieved_background(&run).unwrap().unwrap();
    assert_eq!(b.levels.len(), 2);
    let (one, both) = (&b.levels[0], &b.levels[1]);
    close(one.target_bps.unwrap(), 1e8);
    close(one.sent_bps.unwrap(), 9.5e7);
    close(one.rate_bps.unwrap(), 1.8e7);
    close(one.received_pct.unwrap(), 18.0);
    assert_eq!((both.neighbors, both.reported, both.failed), (2, 2, 0));
    close(both.target_bps.unwrap(), 2e8);
    close(both.sent_bps.unwrap(), 1.98e8);
    close(both.rate_bps.unwrap(), 9.9e7);
    close(both.received_pct.unwrap(), 99.0);
    assert_eq!(both.ops_per_sec, None);
    let t = b.table();
    assert_eq!(
        t.columns,
        [
            "level",
            "neighbors",
            "reported",
            "failed",
            "target (Mbit/s)",
            "sent (Mbit/s)",
            "received (Mbit/s)",
            "received %"
        ]
    );
    let a = Analyses::of(&run).unwrap();
    assert!(
        a.verdict.iter().any(|f| f.starts_with(
            "neighbor load below 90% of its target in 1 case(s), lowest nb-1 at \
             busy/neighbors=1/warmup=1: 18.0 of 100.0 Mbit/s (18%)"
        )),
        "{:?}",
        a.verdict
    );
    assert!(
        a.verdict
            .iter()
            .any(|f| f.starts_with("the reflector could not send 3 pong(s)")),
        "{:?}",
        a.verdict
    );
    assert!(!a
        .verdict
        .iter()
        .any(|f| f.contains("background job(s) failed")));
    assert!(!a.verdict.iter().any(|f| f.contains("endpoint dropped")));
}

/// M8: runs of versions 1 and 2 have no background records and analyse as before:
/// no background table, no background finding.
#[test]
fn m8_v1_and_v2_runs_without_background_records_still_analyse() {
    for version in [1, 2] {
        let (_d, run) = as_version("staircase", version);
        assert_eq!(run.manifest.format_version, version as u32);
        assert!(run.background.is_empty());
        let a = Analyses::of(&run).unwrap();
        assert!(a.background.is_none());
        assert!(a.degradation.is_some());
        let names: Vec<String> = run_tables(&run)
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(names, ["degradation", "verdict"], "version {version}");
    }
}

/// M8 for load-steps, whose neighbors' loads are measured jobs: at load=100M each of
/// the two neighbors received 20 Mbit/s, 40 of 100 = 40% of the level, which the
/// verdict flags beside the latency table's achieved column.
#[test]
fn m8_a_load_steps_level_short_of_its_target_is_flagged() {
    let (_d, run) = edited(
        "load-steps",
        |_| {},
        |r| {
            if r["job"] == "load" && r["level_label"] == "load=100M" {
                r["rate_bps"] = json!(2e7);
                r["value"] = json!(2e7);
            }
        },
    );
    let lat = latency_vs_load(&run).unwrap().unwrap();
    close(lat.levels[2].achieved_bps.unwrap(), 4e7);
    let a = Analyses::of(&run).unwrap();
    assert!(
        a.verdict.iter().any(|f| f.starts_with(
            "neighbor load below 90% of its target in 1 case(s), lowest the neighbors at \
             load=100M: 40.0 of 100.0 Mbit/s (40%)"
        )),
        "{:?}",
        a.verdict
    );
    assert!(a.background.is_none());
}

/// A fixed-time thread sweep of 1 to 96 threads on an m5.metal-shaped tenant (48
/// cores, 2-way SMT, threads on every core first): each thread does 1e8 ops/s alone
/// on its core; from 49 threads on, thread `k - 1` shares the core of thread `k - 49`
/// and both do 0.62e8. Each repetition scales every thread by `noise[rep]`. The
/// records carry the total as their value and each thread's rate in
/// `result.burn.threads[]`, as a burn writes them.
fn smt_sweep(noise: &[f64]) -> (tempfile::TempDir, Run) {
    let template = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/thread-sweep/samples.jsonl"),
    )
    .unwrap();
    let template: Value = serde_json::from_str(template.lines().next().unwrap()).unwrap();
    let dir = copied("thread-sweep", tenant_topology(96, 48, 2), |_| {});
    let mut lines = String::new();
    for k in 1..=96usize {
        for (rep, scale) in noise.iter().enumerate() {
            let threads: Vec<f64> = (0..k)
                .map(|i| {
                    let shared = i >= 48 || i + 48 < k;
                    scale * if shared { 0.62e8 } else { 1e8 }
                })
                .collect();
            let total: f64 = threads.iter().sum();
            let mut r = template.clone();
            r["step"] = json!(format!("sweep/threads={k}/rep={}", rep + 1));
            r["step_index"] = json!((k - 1) * noise.len() + rep);
            r["level"] = json!(k as f64);
            r["level_label"] = json!(format!("threads={k}"));
            r["rep"] = json!(rep + 1);
            r["metric"] = json!("ops_per_sec");
            r["value"] = json!(total);
            r["higher_is_better"] = json!(true);
            r["ops_per_sec"] = json!(total);
            r["runtime_s"] = json!(10.0);
            let per: Vec<Value> = threads
                .iter()
                .enumerate()
                .map(|(i, ops)| json!({"thread": i, "ops_per_sec": ops}))
                .collect();
            r["result"] = json!({"burn": {"threads": per}});
            lines.push_str(&(r.to_string() + "\n"));
        }
    }
    std::fs::write(dir.path().join("samples.jsonl"), lines).unwrap();
    let run = read_run(dir.path()).unwrap();
    (dir, run)
}

/// T7: compared on the slowest thread, the sweeps n5 (2 repetitions, ±0.1%) and n5b
/// (3, ±0.02%) have one knee, at 49: 1e9 / 0.62e8 = 16.129 ns against 10 ns, +61.3%;
/// every other step is 0. (The mean over threads moves 0.78% at 49 and then ramps:
/// no knee in n5, 25 in n5b.)
#[test]
fn t7_fixed_time_sweeps_compare_the_slowest_thread() {
    for noise in [&[1.001, 0.999][..], &[1.0002, 1.0, 0.9998][..]] {
        let (_d, run) = smt_sweep(noise);
        let k = knees(&run).unwrap().unwrap();
        assert_eq!(k.expected_knee, Some(49.0));
        let knee_at: Vec<f64> = k.steps.iter().filter(|s| s.is_knee).map(|s| s.to).collect();
        assert_eq!(knee_at, vec![49.0], "{noise:?}");
        let d = degradation(&run).unwrap().unwrap();
        assert_eq!(d.thread_basis, Some(ThreadBasis::Slowest));
        assert!(
            d.table()
                .notes
                .iter()
                .any(|n| n.contains("the slowest thread's time per op")),
            "{:?}",
            d.table().notes
        );
        let step = k.steps.iter().find(|s| s.to == 49.0).unwrap();
        assert!(
            (step.step_pct - (1.0 / 0.62 - 1.0) * 100.0).abs() < 1e-6,
            "{}",
            step.step_pct
        );
    }
}

/// T11: an isolation matrix's repetitions face the CV rule. a's saturated baseline
/// measured 45.22 and 50.29 % CPU (the review's real run): mean 47.755, sd |50.29 -
/// 45.22| / sqrt 2 = 3.585, CV 7.51%. Beside b, a is Table 2's value in both
/// repetitions (no spread), so for a_s b_s (24.06) Welch's interval has df 1, t
/// 12.706, half-width 12.706 x 3.585 / sqrt 2 = 32.21 on a difference of 23.695:
/// (23.695 -/+ 32.21) / 47.755 = -17.83..117.07% of a, which includes 0; I_plr =
/// 23.695 / 47.755 = 49.62% is within the noise, as are the other 3 pairs of a_s.
#[test]
fn t11_isolation_repetitions_face_the_cv_rule() {
    let (_d, run) = table2_run(None, |r| {
        if r["role"] == "test" && r["level_label"] == "a=saturated" {
            let v = if r["rep"] == 1 { 45.22 } else { 50.29 };
            r["value"] = json!(v);
            r["ops_per_sec"] = json!(v);
        }
        true
    });
    let f = Analyses::of(&run).unwrap().verdict;
    assert!(
        f.iter()
            .any(|x| x == "CV 7.5% at baseline/a=saturated: the machine was noisy"),
        "{f:?}"
    );
    let within = f
        .iter()
        .find(|x| x.starts_with("I_plr within the noise in 4 pair(s): "))
        .unwrap_or_else(|| panic!("{f:?}"));
    assert!(
        within.contains("a_s b_s (I_plr 49.62%, a' against a 95% interval -17.83..117.07%)"),
        "{within}"
    );
    assert!(
        !within.contains("a_u") && !within.contains("a_o"),
        "{within}"
    );
}

/// A command neighbor (format version 11) reports only how long it ran: at
/// busy/neighbors=1 nb-1's `stress-ng` ran 60 s and is counted as reported, with no
/// ops/s or rate of its own to sum (there is none to read).
#[test]
fn a_command_neighbor_is_reported_by_its_run_time() {
    let (dir, _) = as_version("staircase", 3);
    let run = with_background(
        &dir,
        &[background_record(
            "nb-1",
            "command",
            &level_steps("busy", 1),
            json!({"format_version": 11, "runtime_s": 60.0}),
        )],
    );
    let b = achieved_background(&run).unwrap().unwrap();
    let l = &b.levels[0];
    assert_eq!(
        (l.label.as_str(), l.neighbors, l.reported, l.failed),
        ("neighbors=1", 1, 1, 0)
    );
    assert_eq!((l.ops_per_sec, l.sent_bps), (None, None));
}
