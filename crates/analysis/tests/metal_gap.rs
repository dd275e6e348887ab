//! The gap between a test node and metal at equal busy threads (review item 21; thesis
//! §5.2.1 l.296-301, §5.4 l.406) on two runs written here: a staircase whose test node
//! and neighbors run 2 threads each (0-4 neighbors: 2, 4, 6, 8, 10 busy threads) and a
//! metal sweep of 1, 2, 4, 6, 8 and 10 threads, 3 repetitions each, with means,
//! gaps and intervals worked out by hand below.

use nnb_analysis::read::read_run;
use nnb_analysis::report::{write_report, ReportOptions};
use nnb_analysis::tables::{metal_gap, metal_gap_tables, Analyses};
use serde_json::json;

use super::report::{record, runtime, write_run};

/// The staircase's busy runtimes per neighbor count (3 repetitions each).
const STAIR: [[f64; 3]; 5] = [
    [7.0, 7.1, 7.2],
    [5.0, 5.6, 6.2],
    [6.5, 6.6, 6.7],
    [7.0, 7.2, 7.4],
    [8.0, 8.2, 8.4],
];
/// The metal sweep's runtimes per thread count.
const METAL: [(u32, [f64; 3]); 6] = [
    (1, [5.0, 5.1, 5.2]),
    (2, [5.1, 5.2, 5.3]),
    (4, [5.2, 5.3, 5.4]),
    (6, [6.0, 6.1, 6.2]),
    (8, [7.0, 7.1, 7.2]),
    (10, [8.0, 8.1, 8.2]),
];

/// Writes both runs under `root`: the staircase's experiment names no test `threads`
/// (the thesis files' shape: the burner runs on all the test node's vCPUs).
fn runs(root: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let mut lines = Vec::new();
    for (n, reps) in STAIR.iter().enumerate() {
        let label = format!("neighbors={n}");
        for (i, t) in reps.iter().enumerate() {
            let r = record(
                "stair",
                "neighbor-staircase",
                lines.len(),
                ("busy", n as f64, &label, i as u32 + 1, false),
            );
            lines.push(runtime(r, *t));
        }
    }
    let experiment = json!({
        "name": "m5-large",
        "tenants": [{"name": "test", "role": "test", "vcpus": 2},
                    {"name": "neighbor-1", "role": "neighbor", "vcpus": 2}],
        "scenario": {"kind": "neighbor-staircase", "levels": [0, 1, 2, 3, 4], "states": ["busy"],
                     "busy": {"kind": "burner", "workload": "cpu-burn-o0"},
                     "test": {"workload": "cpu-burn-o0", "pin": "cores"}},
    });
    let stair = write_run(root, "stair", experiment, 2, &lines, "");
    let mut lines = Vec::new();
    for (threads, reps) in METAL {
        let label = format!("threads={threads}");
        for (i, t) in reps.iter().enumerate() {
            let r = record(
                "metal",
                "thread-sweep",
                lines.len(),
                ("sweep", f64::from(threads), &label, i as u32 + 1, false),
            );
            lines.push(runtime(r, *t));
        }
    }
    let experiment = json!({
        "name": "m5-metal",
        "scenario": {"kind": "thread-sweep", "threads": [1, 2, 4, 6, 8, 10],
                     "test": {"workload": "cpu-burn-o0", "threads": 10}},
    });
    let metal = write_run(root, "metal", experiment, 10, &lines, "");
    (stair, metal)
}

#[track_caller]
fn close(got: f64, want: f64, tol: f64) {
    assert!((got - want).abs() <= tol, "got {got}, want {want}");
}

/// Level 0: the test node alone (2 threads) took 7.1 s (s = 0.1), 2 threads on metal
/// 5.2 s (s = 0.1): gap 7.1 / 5.2 - 1 = 36.538%. Delta method: relative variances
/// 0.01 / (3 * 7.1^2) = 6.6125e-5 and 0.01 / (3 * 5.2^2) = 1.23274e-4, df = 3.67 -> 3,
/// t = 3.182, half-width 3.182 * 1.365385 * sqrt(1.89399e-4) = 5.979 points.
/// Full host (4 neighbors, 10 threads): 8.2 (s 0.2) vs 8.1 (s 0.1): 1.2346%; relative
/// variances 1.98295e-4 and 5.08053e-5, df = 2.96 -> 2, t = 4.303, half-width 4.303 *
/// 1.012346 * sqrt(2.491e-4) = 6.875 points, so -5.64..8.11 includes 0.
/// Per level: 1 neighbor 5.6 (s 0.6) vs 5.3: 5.66%, CI -22.9..34.2 (n.s.); 2 neighbors
/// 6.6 vs 6.1: 8.20%, CI 3.76..12.63 (significant); 3 neighbors 7.2 (s 0.2) vs 7.1:
/// 1.41%, CI -6.44..9.25 (n.s.); 4 neighbors n.s. So the gap converges from 3
/// neighbors (8 threads): not from 1, whose n.s. does not last.
#[test]
fn gap_at_level_0_at_full_host_and_convergence_by_hand() {
    let root = tempfile::tempdir().unwrap();
    let (stair, metal) = runs(root.path());
    let (stair, metal) = (read_run(&stair).unwrap(), read_run(&metal).unwrap());
    let (a, b) = (Analyses::of(&stair).unwrap(), Analyses::of(&metal).unwrap());
    let gap = metal_gap(
        ("m5-large", &stair, a.degradation.as_ref().unwrap()),
        ("m5-metal", b.knees.as_ref().unwrap()),
    );
    assert_eq!(gap.levels.len(), 5, "{gap:?}");
    let threads: Vec<f64> = gap.levels.iter().map(|g| g.threads).collect();
    assert_eq!(threads, [2.0, 4.0, 6.0, 8.0, 10.0]);

    let l0 = gap.level0.as_ref().unwrap();
    assert_eq!(
        (l0.neighbors, l0.threads, l0.vm_n, l0.metal_n),
        (0.0, 2.0, 3, 3)
    );
    close(l0.vm_mean, 7.1, 1e-9);
    close(l0.metal_mean, 5.2, 1e-9);
    close(l0.gap_pct, 36.538_461_5, 1e-6);
    let r = 7.1 / 5.2;
    let half = 3.182 * r * (0.01f64 / (3.0 * 7.1 * 7.1) + 0.01 / (3.0 * 5.2 * 5.2)).sqrt();
    let (lo, hi) = l0.gap_ci95.unwrap();
    close(lo, (r - half - 1.0) * 100.0, 1e-9);
    close(hi, (r + half - 1.0) * 100.0, 1e-9);
    close(hi - lo, 2.0 * 5.979, 0.01);

    let full = gap.full_host.as_ref().unwrap();
    assert_eq!((full.neighbors, full.threads), (4.0, 10.0));
    close(full.gap_pct, (8.2 / 8.1 - 1.0) * 100.0, 1e-9);
    let (lo, hi) = full.gap_ci95.unwrap();
    close(lo, -5.64, 0.01);
    close(hi, 8.11, 0.01);

    let ns: Vec<bool> = gap.levels.iter().map(|g| g.includes_zero()).collect();
    assert_eq!(ns, [false, true, false, true, true]);
    let (lo, hi) = gap.levels[2].gap_ci95.unwrap();
    close(lo, 3.76, 0.01);
    close(hi, 12.63, 0.01);
    assert_eq!(gap.converged_from, Some(3.0));

    let t = gap.table("metal_gap");
    let at = t.columns.iter().position(|c| c == "at").unwrap();
    let marks: Vec<String> = t.rows.iter().map(|r| r[at].display()).collect();
    assert_eq!(
        marks,
        [
            "level 0 (test node alone)",
            "",
            "",
            "converged from here",
            "full host"
        ]
    );
    assert!(t.notes[0].starts_with("gap at level 0: 36.54% (95% CI 30.56..42.52%)"));
    assert!(t.notes[1].starts_with("gap at the full host: 1.23%"));
    assert!(t.notes[2].starts_with("converged from neighbors=3 (8 busy threads)"));
}

/// The report writes the table beside the chart, as CSV and JSON; `metal_gap_tables`
/// (what `nnb analyze` prints) gives the same table from the runs alone.
#[test]
fn the_report_writes_the_gap_table_beside_the_chart() {
    let root = tempfile::tempdir().unwrap();
    let (stair, metal) = runs(root.path());
    let runs = vec![read_run(&stair).unwrap(), read_run(&metal).unwrap()];
    let out = root.path().join("report");
    let summary = write_report(
        &runs,
        &ReportOptions {
            out: out.clone(),
            compare: false,
        },
    )
    .unwrap();
    for f in [
        "staircase_vs_metal.svg",
        "metal_gap.csv",
        "metal_gap.json",
        "metal_gap.md",
    ] {
        assert!(out.join(f).is_file(), "{f}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("metal_gap.json")).unwrap())
            .unwrap();
    close(
        json["rows"][0]["gap %"].as_f64().unwrap(),
        36.538_461_5,
        1e-6,
    );
    let section = summary
        .sections
        .iter()
        .find(|s| s.title == "Test node vs metal")
        .unwrap();
    assert_eq!(section.tables[0].name, "metal_gap");
    let printed = metal_gap_tables(&runs).unwrap();
    assert_eq!(printed.len(), 1);
    assert_eq!(printed[0].rows, section.tables[0].rows);
}
