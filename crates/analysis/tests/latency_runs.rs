//! Issue 27 item 5 (review items 52, 54; thesis §6.2.2 l.485, l.492-495): the latency
//! table shows the thesis' statistics, the mean over the runs of each run's own, with
//! its 95% CI, beside the pooled ones. Two repetitions of one level with histograms
//! built here with `hdrhistogram` (not nnb's code), written as interval logs, their
//! records carrying each histogram's own statistics; every expected number is
//! worked out by hand below.
//!
//! Repetition 1: 1500 RTTs, 1498 of 40 µs and 2 of 240 µs. Its mean is
//! (1498 * 40 + 2 * 240) / 1500 = 60400 / 1500 = 40.2667 µs; p50, p90 and p99 are 40
//! (the k-th percentile is the ceil(k/100 * n)-th smallest: ranks 750, 1350, 1485 are
//! all among the first 1498) and p99.9 is the 1499th smallest, 240.
//! Repetition 2: 1300 RTTs of 50 µs: every statistic 50, p90 - mean 0.
//!
//! Pooled (2800 RTTs: 1498 x 40, 1300 x 50, 2 x 240): mean 125400 / 2800 = 44.7857 µs;
//! p50 the 1400th smallest, 40; p90 the 2520th, 50; p99 the 2772nd, 50; p99.9 the
//! ceil(2797.2) = 2798th, 50 (the 2 slow pings of repetition 1 sit at 2799 and 2800).
//!
//! Mean of runs: mean (40.2667 + 50) / 2 = 45.1333; p50, p90, p99 (40 + 50) / 2 = 45;
//! p99.9 (240 + 50) / 2 = 145; p90 - mean (-0.2667 + 0) / 2 = -0.1333; p99.9 - mean
//! (199.7333 + 0) / 2 = 99.8667. With two values a and b the sample standard deviation
//! is |a - b| / sqrt(2), so the 95% CI half-width is t(0.975, 1 df) * |a - b| / 2 =
//! 12.706 * |a - b| / 2: for p99.9 12.706 * 95 = 1207.07 µs.

use std::path::Path;
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use nnb_analysis::read::read_run;
use nnb_analysis::table::{Cell, Table};
use nnb_analysis::tables::latency_vs_load;
use serde_json::Value;

use crate::fixture::copied;

/// 1 ns .. 10 ms at 5 significant digits: every value below 262144 ns is its own
/// bucket, so the test's 40, 50 and 240 µs come back exactly.
fn histogram(values: &[(u64, u64)]) -> Histogram<u64> {
    let mut h = Histogram::<u64>::new_with_bounds(1, 10_000_000, 5).unwrap();
    for &(ns, count) in values {
        h.record_n(ns, count).unwrap();
    }
    h
}

/// Writes `h` as a one-interval log tagged `rtt`.
fn write_log(path: &Path, h: &Histogram<u64>) {
    let mut out = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_000_000);
    let mut log = IntervalLogWriterBuilder::new()
        .with_start_time(start)
        .with_base_time(start)
        .begin_log_with(&mut out, &mut serializer)
        .unwrap();
    log.write_histogram(h, Duration::ZERO, Duration::from_secs(1), Tag::new("rtt"))
        .unwrap();
    drop(log);
    std::fs::write(path, out).unwrap();
}

/// A load-steps run of one level, `load=0`, with the two repetitions above: the
/// fixture's manifest, and its first record as the template of both.
fn two_runs() -> tempfile::TempDir {
    let dir = copied("load-steps", |_| {}, |_| {});
    let template: Value = serde_json::from_str(
        std::fs::read_to_string(dir.path().join("samples.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let reps = [
        histogram(&[(40_000, 1498), (240_000, 2)]),
        histogram(&[(50_000, 1300)]),
    ];
    let mut lines = String::new();
    for (i, h) in reps.iter().enumerate() {
        let rep = i + 1;
        let rel = format!("hdr/load_load-0_rep-{rep}.test.hlog");
        write_log(&dir.path().join(&rel), h);
        let q = |p: f64| h.value_at_quantile(p / 100.0) as f64;
        let mut r = template.clone();
        r["step"] = format!("load/load=0/rep={rep}").into();
        r["step_index"] = i.into();
        r["rep"] = rep.into();
        r["hdr_log"] = rel.into();
        r["value"] = h.mean().into();
        r["rtt_mean_ns"] = h.mean().into();
        r["rtt_p50_ns"] = q(50.0).into();
        r["rtt_p90_ns"] = q(90.0).into();
        r["rtt_p99_ns"] = q(99.0).into();
        r["rtt_p999_ns"] = q(99.9).into();
        lines += &(r.to_string() + "\n");
    }
    std::fs::write(dir.path().join("samples.jsonl"), lines).unwrap();
    dir
}

fn close(got: f64, want: f64) {
    assert!(
        (got - want).abs() <= 1e-6 * want.abs().max(1.0),
        "got {got}, want {want}"
    );
}

/// The number in the first row's column `name` (µs in the latency table).
fn cell(t: &Table, name: &str) -> f64 {
    let i = t
        .columns
        .iter()
        .position(|c| c == name)
        .unwrap_or_else(|| panic!("no column {name:?} in {:?}", t.columns));
    match t.rows[0][i] {
        Cell::Num { value, .. } => value,
        ref other => panic!("{name}: {other:?}"),
    }
}

/// Each statistic, pooled and as the mean of runs with its ±ci95, in the table
/// (and so in its CSV and JSON) under labels that say which is which.
#[test]
fn the_latency_table_shows_the_mean_of_runs_beside_the_pooled_value() {
    let dir = two_runs();
    let run = read_run(dir.path()).unwrap();
    let t = latency_vs_load(&run).unwrap().unwrap().table();
    assert_eq!(t.rows.len(), 1);
    let t975 = 12.706;
    // (statistic, pooled, mean of runs, |a - b| of the two runs' values), µs.
    let mean1 = 60400.0 / 1500.0;
    let mean_pooled = 125400.0 / 2800.0;
    for (stat, pooled, runs, spread) in [
        ("mean", mean_pooled, (mean1 + 50.0) / 2.0, 50.0 - mean1),
        ("p50", 40.0, 45.0, 10.0),
        ("p90", 50.0, 45.0, 10.0),
        ("p99", 50.0, 45.0, 10.0),
        ("p99.9", 50.0, 145.0, 190.0),
        (
            "p90 - mean",
            50.0 - mean_pooled,
            (40.0 - mean1) / 2.0,
            mean1 - 40.0,
        ),
        (
            "p99.9 - mean",
            50.0 - mean_pooled,
            (240.0 - mean1) / 2.0,
            240.0 - mean1,
        ),
    ] {
        close(cell(&t, &format!("pooled: {stat} (µs)")), pooled);
        close(cell(&t, &format!("mean of runs: {stat} (µs)")), runs);
        close(
            cell(&t, &format!("±ci95: {stat} (µs)")),
            t975 * spread / 2.0,
        );
    }
    // The review's case: pooled p99.9 and the thesis' p99.9 far apart.
    close(cell(&t, "pooled: p99.9 (µs)"), 50.0);
    close(cell(&t, "mean of runs: p99.9 (µs)"), 145.0);
    close(cell(&t, "±ci95: p99.9 (µs)"), 1207.07);
    // Fig 6.6's figures are averages over the levels: here the one level's.
    assert!(
        t.notes.iter().any(|n| n.contains(
            "averaged over the 1 level, as the thesis quotes Fig 6.6: mean of runs' \
             p90 - mean -0.13 µs, p99.9 - mean 99.87 µs"
        )),
        "{:?}",
        t.notes
    );
    assert!(
        t.notes.iter().any(|n| n.contains("mean of runs")
            && n.contains("pooled")
            && n.contains("the one to compare")),
        "{:?}",
        t.notes
    );
}

/// The same numbers in the analysis's own structure, with the interval's bounds.
#[test]
fn a_levels_mean_of_runs_has_its_interval() {
    let dir = two_runs();
    let run = read_run(dir.path()).unwrap();
    let lat = latency_vs_load(&run).unwrap().unwrap();
    let l = &lat.levels[0];
    assert_eq!((l.n, l.samples), (2, 2800));
    close(l.p999_ns, 50_000.0);
    close(l.p999_minus_mean_ns, 50_000.0 - 125_400_000.0 / 2800.0);
    let runs = l.runs.as_ref().unwrap();
    let p999 = &runs.p999_ns;
    assert_eq!(p999.n, 2);
    close(p999.mean, 145_000.0);
    close(p999.ci95_low, 145_000.0 - 1_207_070.0);
    close(p999.ci95_high, 145_000.0 + 1_207_070.0);
    close(runs.mean_ns.mean, (60_400_000.0 / 1500.0 + 50_000.0) / 2.0);
}
