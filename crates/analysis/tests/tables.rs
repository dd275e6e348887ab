//! The analyses on the hand-made fixture runs in `fixtures/`, every number checked
//! against arithmetic written out here (not against the library's own output).

use std::path::{Path, PathBuf};

use nnb_format::Metric;

use nnb_analysis::read::{read_run, ReadError, Run, Scenario};
use nnb_analysis::table::{Cell, Table};
use nnb_analysis::tables::{
    compare_tables, degradation, isolation, knees, latency_vs_load, run_tables, summary_table,
    throughput, GroupLevels, LevelStats,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

fn load(name: &str) -> Run {
    match read_run(&fixture(name)) {
        Ok(run) => run,
        Err(e) => panic!("fixture {name} does not load: {e}"),
    }
}

/// Equal to 1e-9 relative (the arithmetic here and in the library round differently).
#[track_caller]
fn close(got: f64, want: f64) {
    assert!(
        (got - want).abs() <= 1e-9 * want.abs().max(1.0),
        "got {got}, want {want}"
    );
}

fn level<'a>(g: &'a GroupLevels, label: &str) -> &'a LevelStats {
    g.levels
        .iter()
        .find(|l| l.label == label)
        .unwrap_or_else(|| panic!("no level {label} in group {}", g.group))
}

/// Sample stddev of three values with the given mean, by hand.
fn sd3(v: [f64; 3], mean: f64) -> f64 {
    (((v[0] - mean).powi(2) + (v[1] - mean).powi(2) + (v[2] - mean).powi(2)) / 2.0).sqrt()
}

#[test]
fn staircase_loads_typed_columns_without_warmups_or_failures_in_stats() {
    let run = load("staircase");
    assert_eq!(run.manifest.scenario, Scenario::NeighborStaircase);
    assert_eq!(run.run_id, "20261122T100000Z-aaaaaa");
    assert_eq!(run.samples.height(), 24);
    // The format's columns, the sample's `technology` (version 11), then `record`
    // (the row's index into `qualities`).
    assert_eq!(
        run.samples.width(),
        nnb_analysis::read::columns().count() + 2
    );
    assert_eq!(run.qualities.len(), run.samples.height());
    assert!(
        run.notes
            .iter()
            .all(|n| n.starts_with("controller warning:")),
        "{:?}",
        run.notes
    );
    // The fixture's sessions list no tenants: the test tenant's machine is unknown.
    assert_eq!(run.test_topology(), None);
    assert_eq!(run.label(), "fixture-staircase");
}

#[test]
fn staircase_degradation_mean_stddev_ci_by_hand() {
    let d = degradation(&load("staircase")).unwrap().unwrap();
    assert_eq!(d.metric, Metric::RuntimeS);
    assert_eq!(d.unit, "s");
    assert!(!d.higher_is_better);
    let groups: Vec<&str> = d.groups.iter().map(|g| g.group.name()).collect();
    assert_eq!(groups, ["busy", "idle"]);
    let busy = &d.groups[0];
    let idle = &d.groups[1];

    // busy, neighbors=0: 10.0, 10.2, 9.8 (the warm-up's 15.0 is left out).
    let l = level(busy, "neighbors=0");
    assert_eq!(l.n, 3);
    close(l.mean, (10.0 + 10.2 + 9.8) / 3.0);
    let sd = sd3([10.0, 10.2, 9.8], 10.0);
    close(sd, 0.2);
    close(l.stddev, 0.2);
    let half = 4.303 * 0.2 / 3f64.sqrt(); // t(0.975, df 2) = 4.303
    close(l.ci95.0, 10.0 - half);
    close(l.ci95.1, 10.0 + half);
    close(l.degradation_pct.unwrap(), 0.0);
    assert_eq!(l.values, vec![10.0, 10.2, 9.8]);

    // busy, neighbors=1: 11.0, 11.4, 10.6: mean 11.0, sd 0.4, (11 - 10) / 10 = 10%.
    let l = level(busy, "neighbors=1");
    close(l.mean, 11.0);
    close(l.stddev, sd3([11.0, 11.4, 10.6], 11.0));
    close(l.stddev, 0.4);
    close(l.degradation_pct.unwrap(), (11.0 - 10.0) / 10.0 * 100.0);

    // busy, neighbors=2: 12.0, 12.6, 12.3: mean 12.3, sd 0.3, 23%.
    let l = level(busy, "neighbors=2");
    close(l.mean, 12.3);
    close(l.stddev, 0.3);
    close(l.ci95.1 - l.ci95.0, 2.0 * 4.303 * 0.3 / 3f64.sqrt());
    close(l.degradation_pct.unwrap(), (12.3 - 10.0) / 10.0 * 100.0);
    let (at, pct) = busy.max.unwrap();
    assert_eq!(at, 2.0);
    close(pct, 23.0);

    // idle: 10.0/10.1/9.9 -> 10.0; 10.2/10.3/10.1 -> 10.2 (2%); neighbors=2 lost its
    // third repetition (failed): 10.4, 10.5 -> 10.45 (4.5%), sd sqrt(0.005), t(1) = 12.706.
    close(level(idle, "neighbors=0").mean, 10.0);
    close(level(idle, "neighbors=1").degradation_pct.unwrap(), 2.0);
    let l = level(idle, "neighbors=2");
    assert_eq!(l.n, 2);
    close(l.mean, 10.45);
    close(l.stddev, 0.005f64.sqrt());
    close(l.ci95.1 - 10.45, 12.706 * 0.005f64.sqrt() / 2f64.sqrt());
    close(l.degradation_pct.unwrap(), 4.5);
    let (at, pct) = idle.max.unwrap();
    assert_eq!(at, 2.0);
    close(pct, 4.5);
}

#[test]
fn staircase_table_and_summary_like_thesis_table_5_3() {
    let run = load("staircase");
    let d = degradation(&run).unwrap().unwrap();
    let t = d.table();
    assert_eq!(t.columns[0], "level");
    assert_eq!(t.columns.len(), 1 + 2 * 7);
    assert_eq!(t.rows.len(), 3);
    assert_eq!(t.rows[1][0], Cell::text("neighbors=1"));
    // busy degradation % and idle degradation % of neighbors=2, side by side
    let Cell::Num { value, decimals } = t.rows[2][5] else {
        panic!("{:?}", t.rows[2][5]);
    };
    close(value, 23.0);
    assert_eq!(decimals, 2);
    let Cell::Num { value, .. } = t.rows[2][12] else {
        panic!("{:?}", t.rows[2][12]);
    };
    close(value, 4.5);
    // a quiet fixture: no level has anything to flag
    assert_eq!(t.columns[7], "busy flags");
    assert!(
        t.rows.iter().all(|r| r[7] == Cell::text("")),
        "{:?}",
        t.rows
    );

    let s = summary_table(&[(&run, &d)]);
    assert_eq!(
        s.columns,
        [
            "run",
            "instance",
            "maximum nodes",
            "busy max degradation %",
            "busy at",
            "idle max degradation %",
            "idle at"
        ]
    );
    // test node + 2 neighbors = 3 nodes
    assert_eq!(s.rows[0][2], Cell::Int(3));
    assert_eq!(s.rows[0][4], Cell::text("neighbors=2"));
    assert_eq!(s.rows[0][6], Cell::text("neighbors=2"));
}

#[test]
fn run_tables_notes_failed_steps_and_compare_needs_degradation() {
    let run = load("staircase");
    let tables = run_tables(&run).unwrap();
    // the degradation table, then the run's verdict
    assert_eq!(tables.len(), 2);
    assert_eq!(tables[1].name, "verdict");
    assert!(
        tables[0]
            .notes
            .iter()
            .any(|n| n == "1 failed step(s) left out of the statistics"),
        "{:?}",
        tables[0].notes
    );
    let both = [load("staircase"), load("isolation-matrix")];
    let cmp = compare_tables(&both).unwrap();
    assert_eq!(cmp.len(), 1);
    assert_eq!(cmp[0].rows.len(), 1, "only the staircase has a degradation");
}

#[test]
fn thread_sweep_knee_at_the_tenants_cores_plus_1() {
    let run = load("thread-sweep");
    let k = knees(&run).unwrap().unwrap();
    // The test tenant's agent: 8 online, 4 cores, 2-way SMT, all 8 CPUs allowed; pin
    // `cores`: the 5th thread is the first on a busy core. The controller (2 CPUs,
    // no SMT) does not count.
    let t = run.test_topology().unwrap();
    assert_eq!((t.online, t.cores, t.smt_ways), (Some(8), Some(4), Some(2)));
    close(k.expected_knee.unwrap(), 4.0 + 1.0);
    // means: 1:10.0 2:10.1 3:10.1 4:10.2 5:13.0 6:13.1 7:13.2 8:14.5
    let means = [10.0, 10.1, 10.1, 10.2, 13.0, 13.1, 13.2, 14.5];
    assert_eq!(k.levels.len(), 8);
    for (l, m) in k.levels.iter().zip(means) {
        close(l.mean, m);
    }
    close(
        k.levels[7].degradation_pct.unwrap(),
        (14.5 - 10.0) / 10.0 * 100.0,
    );
    let want = [
        (1.0, 2.0, (10.1 - 10.0) / 10.0 * 100.0, false),
        (2.0, 3.0, 0.0, false),
        (3.0, 4.0, (10.2 - 10.1) / 10.1 * 100.0, false),
        (4.0, 5.0, (13.0 - 10.2) / 10.2 * 100.0, true), // 27.45%: the knee
        (5.0, 6.0, (13.1 - 13.0) / 13.0 * 100.0, false),
        (6.0, 7.0, (13.2 - 13.1) / 13.1 * 100.0, false),
        (7.0, 8.0, (14.5 - 13.2) / 13.2 * 100.0, false), // 9.85% < 27.45 / 2
    ];
    assert_eq!(k.steps.len(), want.len());
    for (s, (from, to, pct, knee)) in k.steps.iter().zip(want) {
        assert_eq!((s.from, s.to, s.is_knee), (from, to, knee), "{s:?}");
        // 2 -> 3 is 10.1 vs 10.1 from values rounded differently: allow 1e-9 absolute
        assert!((s.step_pct - pct).abs() < 1e-9, "{s:?} want {pct}");
    }
    let largest = k.largest().unwrap();
    assert_eq!((largest.from, largest.to), (4.0, 5.0));
    let t = k.table();
    assert_eq!(t.rows.len(), 7);
    assert_eq!(t.rows[3][7], Cell::text("knee"));
    assert_eq!(t.rows[3][8], Cell::text("SMT"));
    assert!(
        t.notes.iter().any(|n| n.contains("(as expected)")),
        "{:?}",
        t.notes
    );
    // no knees in a staircase
    assert!(knees(&load("staircase")).unwrap().is_none());
}

#[test]
fn isolation_matrix_i_plr_and_i_ulr_by_hand() {
    let run = load("isolation-matrix");
    assert!(degradation(&run).unwrap().is_none());
    let iso = isolation(&run).unwrap().unwrap();
    assert_eq!(iso.metric, Metric::OpsPerSec);
    // baselines (Mops/s): u (99+101)/2 = 100, s (198+202)/2 = 200, o (195+205)/2 = 200,
    // f (390+410)/2 = 400 = p_max.
    let base: Vec<(u32, &str, f64)> = iso
        .baselines
        .iter()
        .map(|b| (b.id, b.state.name(), b.mean))
        .collect();
    assert_eq!(base.len(), 4);
    for ((id, state, mean), (wid, wstate, wmean)) in base.into_iter().zip([
        (1, "undercommitted", 100e6),
        (2, "saturated", 200e6),
        (3, "overcommitted", 200e6),
        (4, "unrestricted", 400e6),
    ]) {
        assert_eq!((id, state), (wid, wstate));
        close(mean, wmean);
    }
    close(iso.p_max, 400e6);
    // (id, shortname, p_a, p_b) with p_b the mean of a's two repetitions beside b.
    let want = [
        (5, "a_u b_u", 100.0, 100.0),
        (6, "a_u b_s", 100.0, 98.0),
        (7, "a_u b_o", 100.0, (95.0 + 97.0) / 2.0),
        (8, "a_u b_f", 100.0, 90.0),
        (9, "a_s b_u", 200.0, (199.0 + 201.0) / 2.0),
        (10, "a_s b_s", 200.0, 190.0),
        (11, "a_s b_o", 200.0, (180.0 + 176.0) / 2.0),
        (12, "a_s b_f", 200.0, 150.0),
        (13, "a_o b_u", 200.0, 202.0),
        (14, "a_o b_s", 200.0, (160.0 + 170.0) / 2.0),
        (15, "a_o b_o", 200.0, 100.0),
        (16, "a_o b_f", 200.0, (120.0 + 130.0) / 2.0),
    ];
    assert_eq!(iso.pairs.len(), 12);
    for (p, (id, short, pa, pb)) in iso.pairs.iter().zip(want) {
        assert_eq!((p.id, p.shortname.as_str(), p.n), (id, short, 2));
        close(p.p_a, pa * 1e6);
        close(p.p_b, pb * 1e6);
        close(p.i_plr, (pa - pb).abs() / pa);
        close(p.i_ulr, (pa - pb).abs() / 400.0);
    }
    // spot checks written out: a_s b_o: |200 - 178| / 200 = 11%, / 400 = 5.5%;
    // a_o b_o: 100 / 200 = 50%, 100 / 400 = 25%.
    close(iso.pairs[6].i_plr, 0.11);
    close(iso.pairs[6].i_ulr, 0.055);
    close(iso.pairs[10].i_plr, 0.5);
    close(iso.pairs[10].i_ulr, 0.25);
    let t = iso.table();
    assert_eq!(
        t.columns,
        [
            "id",
            "shortname",
            "a (ops/s)",
            "a' (ops/s)",
            "I_ulr %",
            "I_plr %",
            "a'-a %",
            "sd (ops/s)",
            "n"
        ]
    );
    assert_eq!(t.rows.len(), 16);
    assert_eq!(t.rows[0][1], Cell::text("a_u"));
    assert_eq!(t.rows[0][4], Cell::Empty);
    let Cell::Num { value, .. } = t.rows[10][5] else {
        panic!("{:?}", t.rows[10]);
    };
    close(value, 11.0);
    // With its sign: a_s b_o is (178 - 200) / 200 = -11%, over 2 repetitions.
    let Cell::Num { value, .. } = t.rows[10][6] else {
        panic!("{:?}", t.rows[10]);
    };
    close(value, -11.0);
    assert_eq!(t.rows[10][8], Cell::Int(2));
}

#[test]
fn latency_from_hdr_logs_by_hand() {
    let run = load("load-steps");
    let lat = latency_vs_load(&run).unwrap().unwrap();
    assert_eq!(lat.levels.len(), 3);
    // Level with base b: repetition 1 recorded b+1..=b+100 ns, repetition 2
    // b+101..=b+200 (each split over two intervals, plus an `rtt_intended` interval of
    // 999999 that must be ignored): together b+1..=b+200, 200 values.
    for (l, (label, bps, b)) in lat.levels.iter().zip([
        ("load=0", 0.0, 1000.0),
        ("load=50M", 50e6, 1200.0),
        ("load=100M", 100e6, 1500.0),
    ]) {
        assert_eq!(
            (l.label.as_str(), l.load_bps, l.n, l.samples),
            (label, bps, 2, 200)
        );
        let mean = (1..=200).map(|i| b + f64::from(i)).sum::<f64>() / 200.0; // b + 100.5
        close(l.mean_ns, mean);
        close(l.mean_ns, b + 100.5);
        // the k-th percentile is the ceil(k/100 * 200)-th smallest value
        close(l.p50_ns, b + 100.0);
        close(l.p90_ns, b + 180.0);
        close(l.p99_ns, b + 198.0);
        close(l.p999_ns, b + 200.0); // ceil(199.8) = 200
        close(l.p90_minus_mean_ns, (b + 180.0) - (b + 100.5));
        let last = l.percentiles.last().unwrap();
        assert_eq!(*last, (100.0, b + 200.0));
        assert!(l
            .percentiles
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
    }
    let t = lat.table();
    let pooled = t
        .columns
        .iter()
        .position(|c| c == "pooled: p90 - mean (µs)");
    let Cell::Num { value, .. } = t.rows[1][pooled.unwrap()] else {
        panic!("{:?}", t.rows[1]);
    };
    close(value, 79.5 / 1000.0); // p90 - mean in µs
}

#[test]
fn latency_without_hdr_logs_uses_record_percentiles() {
    let lat = latency_vs_load(&load("throughput-m5")).unwrap().unwrap();
    let l = &lat.levels[0];
    assert_eq!(l.samples, 0);
    assert!(l.percentiles.is_empty());
    // rep 1: 1001..=1100 (mean 1050.5, p90 1090), rep 2: 1101..=1200 (1150.5, 1190)
    close(l.mean_ns, (1050.5 + 1150.5) / 2.0);
    close(l.p90_ns, (1090.0 + 1190.0) / 2.0);
}

#[test]
fn throughput_per_node_and_emulated_prediction() {
    let t = throughput(&load("load-steps")).unwrap().unwrap();
    assert_eq!(t.levels.len(), 2, "load=0 has no load records");
    let l = &t.levels[0];
    assert_eq!(l.label, "load=50M");
    // neighbor-1: (24 + 24.5) / 2 = 24.25, neighbor-2: (25 + 24.9) / 2 = 24.95 Mbit/s
    assert_eq!(l.rates.per_node_bps.len(), 2);
    assert_eq!(l.rates.per_node_bps[0].0, "neighbor-1");
    close(l.rates.per_node_bps[0].1, 24.25e6);
    close(l.rates.per_node_bps[1].1, 24.95e6);
    close(l.rates.mean, (24.25e6 + 24.95e6) / 2.0);
    close(l.rates.min, 24.25e6);
    close(l.rates.max, 24.95e6);
    close(l.rates.sum, 24.25e6 + 24.95e6);
    let l = &t.levels[1];
    close(
        l.rates.mean,
        ((48e6 + 49e6) / 2.0 + (50e6 + 48e6) / 2.0) / 2.0,
    );
    close(l.rates.sum, 97.5e6);
    let p = t.prediction.as_ref().unwrap();
    close(p.host_bw_bps, 200e6);
    assert_eq!(p.max_nodes, 2);
    // as payload: a shaped link carries 1400 + 8 + 20 + 14 = 1442 bytes per datagram
    close(p.expected_per_node_bps, 200e6 * 1400.0 / 1442.0 / 2.0);
    assert_eq!(p.baseline_bps, None);
    assert_eq!(p.shortfall_pct, None);
    let table = t.table();
    let Cell::Num { value, .. } = table.rows[1][7] else {
        panic!("{:?}", table.rows[1]);
    };
    // each of the 2 nodes asked for 100 / 2 = 50 Mbit/s, less than its 97.09 share
    close(value, 48.75e6 / 50e6 * 100.0);
}

#[test]
fn throughput_prediction_from_the_catalog_for_m5_large() {
    let run = load("throughput-m5");
    assert_eq!(run.label(), "m5.large");
    let t = throughput(&run).unwrap().unwrap();
    let l = &t.levels[1];
    // 31, 33, 35 Mbit/s
    close(l.rates.mean, 33e6);
    close(l.rates.min, 31e6);
    close(l.rates.max, 35e6);
    close(l.rates.sum, 99e6);
    // thesis 6.3: a 25 Gbit/s m5 host shared by 48 m5.large = 520.83 Mbit/s each,
    // against a 750 Mbit/s baseline: (750 - 520.83) / 750 = 30.56% short (the same
    // share of both is payload, so the shortfall is framing-free).
    let p = t.prediction.unwrap();
    close(p.host_bw_bps, 25e9);
    assert_eq!(p.max_nodes, 48);
    // as payload: 1400-byte datagrams take 1466 bytes of Ethernet line
    close(p.expected_per_node_bps, 25e9 * 1400.0 / 1466.0 / 48.0);
    close(p.baseline_bps.unwrap(), 0.75e9);
    close(
        p.shortfall_pct.unwrap(),
        (0.75e9 - 25e9 / 48.0) / 0.75e9 * 100.0,
    );
    assert!(p.source.contains("m5"), "{}", p.source);
}

#[test]
fn controller_warnings_qualify_the_run() {
    let run = load("staircase");
    assert_eq!(
        run.manifest.warnings,
        ["tenants share CPUs: 3 tenants on 2 CPUs"]
    );
    assert_eq!(
        run.notes,
        ["controller warning: tenants share CPUs: 3 tenants on 2 CPUs"]
    );
    assert!(load("thread-sweep").notes.is_empty());
}

#[test]
fn torn_tail_is_tolerated_and_noted() {
    let run = load("torn-tail");
    // 13 lines: 12 whole, the 13th cut; line 12 is record 1 of 3 of the last step.
    assert_eq!(run.notes.len(), 2, "{:?}", run.notes);
    assert!(
        run.notes[0].starts_with("samples.jsonl:13: torn last line ignored"),
        "{:?}",
        run.notes
    );
    assert_eq!(
        run.notes[1],
        "samples.jsonl:12: step `load/load=100M/rep=2` has 1 of 3 records: ignored"
    );
    assert_eq!(run.samples.height(), 11);
    // the last level keeps its first repetition only
    let lat = latency_vs_load(&run).unwrap().unwrap();
    assert_eq!(lat.levels[2].n, 1);
    close(lat.levels[2].mean_ns, 1550.5);
    let tables = run_tables(&run).unwrap();
    assert!(tables[0].notes.iter().any(|n| n.contains("torn last line")));
}

#[test]
fn corrupt_line_names_file_and_line() {
    let err = read_run(&fixture("corrupt")).unwrap_err();
    let ReadError::Corrupt { path, line, .. } = &err else {
        panic!("{err:?}");
    };
    assert!(
        path.ends_with("corrupt/samples.jsonl"),
        "{}",
        path.display()
    );
    assert_eq!(*line, 5);
    assert!(err.to_string().contains("samples.jsonl:5: "), "{err}");
}

#[test]
fn unknown_version_names_file_and_line() {
    let err = read_run(&fixture("wrong-version")).unwrap_err();
    let ReadError::Version { path, line, found } = &err else {
        panic!("{err:?}");
    };
    assert!(path.ends_with("wrong-version/samples.jsonl"));
    assert_eq!((*line, *found), (3, 99));
    assert!(
        err.to_string()
            .contains("samples.jsonl:3: format_version 99"),
        "{err}"
    );
}

#[test]
fn manifest_errors_name_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let missing = read_run(dir.path()).unwrap_err();
    assert!(matches!(missing, ReadError::Io { .. }), "{missing:?}");
    assert!(missing.to_string().contains("manifest.json"), "{missing}");
    std::fs::write(
        dir.path().join("manifest.json"),
        "{\n  \"format_version\": 99,\n  \"run_id\": \"x\"\n}\n",
    )
    .unwrap();
    let err = read_run(dir.path()).unwrap_err();
    assert!(
        err.to_string()
            .contains("manifest.json:2: format_version 99"),
        "{err}"
    );
    std::fs::write(
        dir.path().join("manifest.json"),
        "{\n  \"format_version\": 1,\n  oops\n}\n",
    )
    .unwrap();
    let err = read_run(dir.path()).unwrap_err();
    assert!(
        err.to_string().contains("manifest.json:3: not valid JSON"),
        "{err}"
    );
}

fn sample_table() -> Table {
    Table {
        name: "t".to_string(),
        title: "A | table".to_string(),
        columns: vec!["name".into(), "n".into(), "value (s)".into()],
        rows: vec![
            vec![Cell::text("plain"), Cell::Int(3), Cell::num(1.23456, 2)],
            vec![
                Cell::text("a, \"quoted\"\nname"),
                Cell::Int(-1),
                Cell::Empty,
            ],
        ],
        notes: vec!["a note".to_string()],
    }
}

#[test]
fn markdown_rendering() {
    let md = sample_table().markdown();
    assert_eq!(
        md,
        "### A \\| table\n\n\
         | name | n | value (s) |\n\
         |---|--:|--:|\n\
         | plain | 3 | 1.23 |\n\
         | a, \"quoted\" name | -1 | - |\n\
         \n\
         - a note\n"
    );
}

#[test]
fn csv_rendering_quotes_and_keeps_full_precision() {
    assert_eq!(
        sample_table().csv(),
        "name,n,value (s)\r\n\
         plain,3,1.23456\r\n\
         \"a, \"\"quoted\"\"\nname\",-1,\r\n"
    );
}

#[test]
fn json_rendering() {
    let v = sample_table().json();
    assert_eq!(
        v,
        serde_json::json!({
            "name": "t",
            "title": "A | table",
            "columns": ["name", "n", "value (s)"],
            "rows": [
                {"name": "plain", "n": 3, "value (s)": 1.23456},
                {"name": "a, \"quoted\"\nname", "n": -1, "value (s)": null}
            ],
            "notes": ["a note"]
        })
    );
    assert_eq!(Cell::num(f64::NAN, 2), Cell::Empty);
}
