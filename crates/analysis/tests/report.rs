//! `write_report` on small runs written here in the results format (manifest,
//! samples.jsonl, HDR interval logs): the expected table and plot files, one
//! directory per run when there are several, the cross-run and comparison plots, and
//! an index.html that inlines and links every SVG and carries the runs' notes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2Serializer;
use hdrhistogram::Histogram;
use nnb_analysis::read::{read_run, Run};
use nnb_analysis::report::{write_report, ReportError, ReportOptions};
use nnb_format::Metric;
use serde_json::{json, Value};

/// One record of samples.jsonl with the fields every record has.
pub(crate) fn record(
    run_id: &str,
    scenario: &str,
    step_index: usize,
    step: (&str, f64, &str, u32, bool),
) -> Value {
    let (group, level, label, rep, warmup) = step;
    json!({
        "format_version": 1, "run_id": run_id,
        "step": format!("{group}/{label}/{}={rep}", if warmup { "warmup" } else { "rep" }),
        "step_index": step_index, "part": 1, "parts": 1, "scenario": scenario,
        "group": group, "level": level, "level_label": label, "rep": rep, "warmup": warmup,
        "tenant": "test", "role": "test", "job": "burn", "status": "ok", "error": null,
        "attempts": 1, "started_at": "2026-11-22T10:44:09Z", "elapsed_ms": 1500.0,
    })
}

/// Writes a run directory: manifest, samples (plus `tail` verbatim) and HDR logs.
pub(crate) fn write_run(
    root: &Path,
    run_id: &str,
    experiment: Value,
    logical: u64,
    lines: &[Value],
    tail: &str,
) -> PathBuf {
    let dir = root.join(run_id);
    std::fs::create_dir_all(dir.join("hdr")).unwrap();
    // The test tenant's agent reports `logical` CPUs on logical / 2 cores (2-way SMT);
    // the controller is another machine.
    let cpus: Vec<u64> = (0..logical).collect();
    let manifest = json!({
        "format_version": 1, "run_id": run_id, "nnb_version": "0.1.0",
        "experiment_file": "x.toml", "experiment_text": "",
        "experiment": experiment, "planned_steps": lines.len(),
        "controller": {"topology": {"logical": 2}},
        "sessions": [{"started_at": "2026-11-22T10:44:09Z", "finished_at": null,
            "status": "completed", "command": ["nnb", "run"], "warnings": [],
            "agent_pids": [], "steps_run": lines.len(),
            "tenants": [{"name": "test", "role": "test", "addr": "127.0.0.1:7000",
                "cpus": cpus, "netns": null, "ip": null,
                "health": {"cpus": cpus, "topology": {"logical": logical, "online": logical,
                    "cores": logical / 2, "smt_ways": 2}}}]}],
    });
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();
    let mut samples: String = lines.iter().map(|l| format!("{l}\n")).collect();
    samples.push_str(tail);
    std::fs::write(dir.join("samples.jsonl"), samples).unwrap();
    dir
}

/// Fills in a staircase record's runtime.
pub(crate) fn runtime(mut r: Value, seconds: f64) -> Value {
    r["metric"] = json!(Metric::RuntimeS.name());
    r["value"] = json!(seconds);
    r[Metric::RuntimeS.name()] = json!(seconds);
    r["higher_is_better"] = json!(false);
    r
}

/// A staircase run (busy and idle, 0..=3 neighbors, 3 reps and a warm-up each) whose
/// busy runtime grows by `slope` per neighbor.
fn staircase(root: &Path, run_id: &str, name: &str, slope: f64) -> PathBuf {
    let mut lines = Vec::new();
    for group in ["busy", "idle"] {
        for n in 0..=3u32 {
            let label = format!("neighbors={n}");
            for (rep, warmup) in [(1, true), (1, false), (2, false), (3, false)] {
                let growth = if group == "busy" { slope } else { slope / 20.0 };
                let t = 7.0 + growth * f64::from(n) + 0.05 * f64::from(rep);
                let r = record(
                    run_id,
                    "neighbor-staircase",
                    lines.len(),
                    (group, f64::from(n), &label, rep, warmup),
                );
                lines.push(runtime(r, t));
            }
        }
    }
    let experiment = json!({
        "name": name,
        "tenants": [{"name": "test", "role": "test", "vcpus": 2}, {"name": "neighbor-1", "role": "neighbor", "vcpus": 2}],
        "scenario": {"kind": "neighbor-staircase", "levels": [0, 1, 2, 3], "states": ["busy", "idle"],
                     "busy": {"kind": "burner", "workload": "fpadd", "threads": null},
                     "test": {"workload": "fpadd", "threads": 2, "pin": "cores"}},
    });
    write_run(root, run_id, experiment, 8, &lines, "")
}

/// A thread sweep on an 8-CPU host with its knee at 5 threads (n/2 + 1).
fn sweep(root: &Path, run_id: &str) -> PathBuf {
    let mut lines = Vec::new();
    for threads in [1u32, 2, 4, 5, 6, 8] {
        let label = format!("threads={threads}");
        for rep in 1..=3 {
            let t = if threads <= 4 {
                5.0
            } else {
                6.2 + 0.3 * f64::from(threads - 5)
            } + 0.01 * f64::from(rep);
            let r = record(
                run_id,
                "thread-sweep",
                lines.len(),
                ("sweep", f64::from(threads), &label, rep, false),
            );
            lines.push(runtime(r, t));
        }
    }
    let experiment = json!({
        "name": "metal-sweep",
        "scenario": {"kind": "thread-sweep", "threads": [1, 2, 4, 5, 6, 8], "test": {"workload": "fpadd", "threads": 8}},
    });
    write_run(root, run_id, experiment, 8, &lines, "")
}

/// Writes an HDR interval log of `samples` RTTs around `centre_ns`, tagged `rtt`.
fn hdr_log(path: &Path, centre_ns: u64, samples: u64) {
    let mut h = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).unwrap();
    for i in 0..samples {
        h.record(
            centre_ns + (i % 97) * centre_ns / 200 + if i % 1000 == 0 { 20 * centre_ns } else { 0 },
        )
        .unwrap();
    }
    let mut buf = Vec::new();
    let mut serializer = V2Serializer::new();
    let mut log = IntervalLogWriterBuilder::new()
        .begin_log_with(&mut buf, &mut serializer)
        .unwrap();
    log.write_histogram(&h, Duration::ZERO, Duration::from_secs(1), Tag::new("rtt"))
        .unwrap();
    drop(log);
    std::fs::write(path, buf).unwrap();
}

/// A load-steps run: the probe's RTT and two load-generating neighbors per step at
/// 0, 100M and 400M bit/s on an emulated 1 Gbit/s host, and a torn last line.
fn load_steps(root: &Path, run_id: &str) -> PathBuf {
    let dir = root.join(run_id);
    std::fs::create_dir_all(dir.join("hdr")).unwrap();
    let mut lines = Vec::new();
    for (step_index, (load, label)) in [(0.0, "load=0"), (100e6, "load=100M"), (400e6, "load=400M")]
        .into_iter()
        .enumerate()
    {
        for rep in 1..=2u32 {
            let step_index = step_index * 2 + rep as usize - 1;
            let rel = format!("hdr/{step_index}.test.hlog");
            let centre = 30_000 + (load / 1e4) as u64;
            hdr_log(&dir.join(&rel), centre, 5_000);
            let mut probe = record(
                run_id,
                "load-steps",
                step_index,
                ("load", load, label, rep, false),
            );
            probe["parts"] = json!(3);
            probe["job"] = json!("latency");
            probe["metric"] = json!(Metric::RttMeanNs.name());
            probe["value"] = json!(centre as f64);
            probe[Metric::RttMeanNs.name()] = json!(centre as f64);
            // The repetition's own percentiles, as an agent records them.
            for (metric, above) in Metric::RTT[1..].iter().zip([0, 4_000, 4_900, 4_990]) {
                probe[metric.name()] = json!((centre + above) as f64);
            }
            probe["higher_is_better"] = json!(false);
            probe["hdr_log"] = json!(rel);
            lines.push(probe);
            for (part, node) in [(2, "neighbor-1"), (3, "neighbor-2")] {
                let mut n = record(
                    run_id,
                    "load-steps",
                    step_index,
                    ("load", load, label, rep, false),
                );
                n["parts"] = json!(3);
                n["part"] = json!(part);
                n["tenant"] = json!(node);
                n["role"] = json!("neighbor");
                n["job"] = json!("load");
                n["metric"] = json!(Metric::RateBps.name());
                n["value"] = json!(load / 2.0);
                n[Metric::RateBps.name()] = json!(load / 2.0);
                n["higher_is_better"] = json!(true);
                lines.push(n);
            }
        }
    }
    let experiment = json!({
        "name": "latency-load",
        "network": {"mode": "emulated", "host_bw_bps": 1e9},
        "scenario": {"kind": "load-steps", "levels_bps": [0.0, 100e6, 400e6]},
    });
    let torn = "{\"format_version\": 1, \"run_id\": \"torn";
    write_run(root, run_id, experiment, 8, &lines, torn)
}

/// The files below `dir`, relative to it.
fn files_below(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(
                    p.strip_prefix(dir)
                        .unwrap()
                        .to_string_lossy()
                        .replace('\\', "/"),
                );
            }
        }
    }
    out
}

/// Checks every SVG parses and index.html inlines and links each one.
fn check_index(out: &Path) -> String {
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    let svgs: Vec<String> = files_below(out)
        .into_iter()
        .filter(|f| f.ends_with(".svg"))
        .collect();
    assert!(!svgs.is_empty());
    for svg in &svgs {
        let text = std::fs::read_to_string(out.join(svg)).unwrap();
        roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{svg}: {e}"));
        assert!(
            html.contains(&format!("href=\"{svg}\"")),
            "index.html links {svg}"
        );
    }
    assert_eq!(
        html.matches("<svg").count(),
        svgs.len(),
        "each SVG inlined once"
    );
    assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
    html
}

#[test]
fn one_load_steps_run_gets_its_tables_plots_and_an_index_with_its_notes() {
    let root = tempfile::tempdir().unwrap();
    let run = read_run(&load_steps(root.path(), "20261122T104409Z-aaaaaa")).unwrap();
    let out = root.path().join("report");
    let summary = write_report(
        std::slice::from_ref(&run),
        &ReportOptions {
            out: out.clone(),
            compare: false,
        },
    )
    .unwrap();

    let files = files_below(&out);
    for svg in [
        "latency_vs_load.svg",
        "latency_percentiles.svg",
        "throughput_per_node.svg",
    ] {
        assert!(files.contains(svg), "{svg} in {files:?}");
    }
    let tables = &summary.sections[0].tables;
    assert!(tables.len() >= 2, "latency and throughput tables at least");
    for t in tables {
        for ext in ["md", "csv", "json"] {
            assert!(
                files.contains(&format!("{}.{ext}", t.name)),
                "{}.{ext}",
                t.name
            );
        }
        let json: Value = serde_json::from_str(
            &std::fs::read_to_string(out.join(format!("{}.json", t.name))).unwrap(),
        )
        .unwrap();
        assert_eq!(json["name"], json!(t.name));
    }
    assert!(files.contains("index.md") && files.contains("index.html"));
    let listed: BTreeSet<String> = summary
        .files
        .iter()
        .map(|f| f.to_string_lossy().into_owned())
        .collect();
    assert_eq!(listed, files, "the summary lists exactly the files written");

    let html = check_index(&out);
    let md = std::fs::read_to_string(out.join("index.md")).unwrap();
    for text in [&html, &md] {
        assert!(text.contains("20261122T104409Z-aaaaaa") && text.contains("latency-load"));
        assert!(
            text.contains("torn last line ignored"),
            "the torn tail is noted at the top"
        );
    }
    assert!(md.contains("![") && md.contains("(latency_percentiles.svg)"));
    assert!(html.contains("<table>") && html.contains("<td class=\"num\">"));
    // the prediction of the emulated host (1 Gbit/s over 2 nodes) is the reference
    // line, as payload: 1400-byte datagrams take 1442 bytes on a shaped link, so
    // 500 * 1400 / 1442 = 485.4 Mbit/s
    let boxes = std::fs::read_to_string(out.join("throughput_per_node.svg")).unwrap();
    assert!(
        boxes.contains("485 Mbit/s"),
        "predicted per-node rate in the legend"
    );
}

#[test]
fn a_staircase_and_a_sweep_get_a_directory_each_and_a_test_node_vs_metal_plot() {
    let root = tempfile::tempdir().unwrap();
    let runs = vec![
        read_run(&staircase(
            root.path(),
            "20261122T100000Z-111111",
            "m5-staircase",
            0.5,
        ))
        .unwrap(),
        read_run(&sweep(root.path(), "20261122T110000Z-222222")).unwrap(),
    ];
    let out = root.path().join("report");
    let summary = write_report(
        &runs,
        &ReportOptions {
            out: out.clone(),
            compare: false,
        },
    )
    .unwrap();
    let files = files_below(&out);
    assert!(
        files.contains("20261122T100000Z-111111/runtime_vs_neighbors.svg"),
        "{files:?}"
    );
    assert!(files.contains("20261122T110000Z-222222/thread_sweep.svg"));
    assert!(files.contains("staircase_vs_metal.svg"));
    assert!(
        !files.iter().any(|f| f.starts_with("compare/")),
        "no comparison unless asked"
    );
    assert_eq!(summary.sections.len(), 3);

    // busy threads: the test node's 2 plus 2 per neighbor, beside the sweep's threads
    let metal = std::fs::read_to_string(out.join("staircase_vs_metal.svg")).unwrap();
    assert!(metal.contains("busy threads on the host"));
    assert!(metal.contains("m5-staircase: test node beside busy neighbors"));
    assert!(metal.contains("metal-sweep: threads on metal"));
    // the sweep's test tenant: 4 cores, 2-way SMT, pin cores: the 5th thread shares
    assert!(metal.contains("expected SMT knee: 5 threads"));
    let sweep_svg =
        std::fs::read_to_string(out.join("20261122T110000Z-222222/thread_sweep.svg")).unwrap();
    assert!(
        sweep_svg.contains("knee: 4 → 5 threads"),
        "the measured knee is marked"
    );
    check_index(&out);
}

/// Reliability review M5: a manifest's run id is a name, never a path. Run ids that
/// point outside `--out` (`../pwned_rel`, an absolute path, `..`) still get their
/// reports under `--out`, and nothing is written anywhere else.
#[test]
fn run_ids_never_write_outside_out() {
    let root = tempfile::tempdir().unwrap();
    let abs = root.path().join("pwned_abs");
    let hostile = [
        "../pwned_rel".to_string(),
        abs.to_string_lossy().into_owned(),
        "..".to_string(),
    ];
    let runs: Vec<Run> = hostile
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let dir = staircase(root.path(), &format!("20261122T10000{i}Z-111111"), "s", 0.5);
            let path = dir.join("manifest.json");
            let mut m: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            m["run_id"] = json!(id);
            std::fs::write(&path, m.to_string()).unwrap();
            read_run(&dir).unwrap()
        })
        .collect();
    let before = files_below(root.path());
    let out = root.path().join("nest").join("report");
    write_report(
        &runs,
        &ReportOptions {
            out: out.clone(),
            compare: false,
        },
    )
    .unwrap();
    assert!(!root.path().join("nest").join("pwned_rel").exists());
    assert!(!abs.exists());
    let outside: Vec<String> = files_below(root.path())
        .difference(&before)
        .filter(|f| !f.starts_with("nest/report/"))
        .cloned()
        .collect();
    assert!(outside.is_empty(), "written outside --out: {outside:?}");
    let files = files_below(&out);
    for dir in [".._pwned_rel/", "run-3/"] {
        assert!(
            files.iter().any(|f| f.starts_with(dir)),
            "{dir} in {files:?}"
        );
    }
    let abs_dir = abs.to_string_lossy().replace('/', "_") + "/";
    assert!(files.iter().any(|f| f.starts_with(&abs_dir)), "{files:?}");
}

#[test]
fn compare_puts_both_runs_on_one_plot_and_in_one_table() {
    let root = tempfile::tempdir().unwrap();
    let runs = vec![
        read_run(&staircase(
            root.path(),
            "20261122T100000Z-111111",
            "m5-staircase",
            0.5,
        ))
        .unwrap(),
        read_run(&staircase(
            root.path(),
            "20261122T120000Z-333333",
            "m6g-staircase",
            0.02,
        ))
        .unwrap(),
    ];
    let out = root.path().join("report");
    let summary = write_report(
        &runs,
        &ReportOptions {
            out: out.clone(),
            compare: true,
        },
    )
    .unwrap();
    let compare = summary.sections.last().unwrap();
    assert_eq!(compare.runs.len(), 2);
    assert!(!compare.tables.is_empty(), "the side-by-side summary table");
    let table = &compare.tables[0];
    let md =
        std::fs::read_to_string(out.join("compare").join(format!("{}.md", table.name))).unwrap();
    assert!(
        md.contains("m5-staircase") && md.contains("m6g-staircase"),
        "{md}"
    );
    let svg =
        std::fs::read_to_string(out.join("compare/compare_runtime_vs_neighbors.svg")).unwrap();
    for series in [
        "m5-staircase: busy neighbors",
        "m5-staircase: idle neighbors",
        "m6g-staircase: busy neighbors",
        "m6g-staircase: idle neighbors",
    ] {
        assert!(svg.contains(series), "{series}");
    }
    check_index(&out);
}

#[test]
fn no_runs_is_an_error() {
    let out = tempfile::tempdir().unwrap();
    let err = write_report(
        &[],
        &ReportOptions {
            out: out.path().to_path_buf(),
            compare: false,
        },
    )
    .unwrap_err();
    assert!(matches!(err, ReportError::NoRuns));
}

#[test]
fn every_fixture_run_gets_the_plots_its_scenario_supports() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let names = [
        "staircase",
        "thread-sweep",
        "isolation-matrix",
        "load-steps",
        "throughput-m5",
        "torn-tail",
    ];
    let runs: Vec<_> = names
        .iter()
        .map(|n| read_run(&fixtures.join(n)).unwrap())
        .collect();
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("report");
    write_report(
        &runs,
        &ReportOptions {
            out: out.clone(),
            compare: true,
        },
    )
    .unwrap();
    let files = files_below(&out);
    let svgs_in = |dir: &str| -> BTreeSet<String> {
        files
            .iter()
            .filter_map(|f| f.strip_prefix(&format!("{dir}/")))
            .filter(|f| f.ends_with(".svg"))
            .map(str::to_string)
            .collect()
    };
    let set = |names: &[&str]| {
        names
            .iter()
            .map(|n| n.to_string())
            .collect::<BTreeSet<String>>()
    };
    assert_eq!(
        svgs_in("20261122T100000Z-aaaaaa"),
        set(&["runtime_vs_neighbors.svg"])
    );
    assert_eq!(
        svgs_in("20261122T100100Z-bbbbbb"),
        set(&["thread_sweep.svg"])
    );
    assert_eq!(
        svgs_in("20261122T100200Z-cccccc"),
        set(&["isolation.svg"]),
        "the isolation matrix's Fig. 5"
    );
    assert!(files
        .iter()
        .any(|f| f.starts_with("20261122T100200Z-cccccc/") && f.ends_with(".csv")));
    let hdr = set(&[
        "latency_vs_load.svg",
        "latency_percentiles.svg",
        "throughput_per_node.svg",
    ]);
    assert_eq!(svgs_in("20261122T100300Z-dddddd"), hdr);
    assert_eq!(
        svgs_in("20261122T100400Z-eeeeee"),
        set(&["latency_vs_load.svg", "throughput_per_node.svg"]),
        "no HDR logs, no percentile plot"
    );
    assert_eq!(
        svgs_in("compare"),
        set(&[
            "compare_latency_vs_load.svg",
            "compare_throughput_per_node.svg"
        ])
    );
    assert!(files.contains("staircase_vs_metal.svg"));

    // m5.large: 25 Gbit/s host bandwidth over 48 instances = 521 Mbit/s of line rate
    // per node; 1400-byte datagrams take 1466 bytes of Ethernet line, so
    // 520.83 * 1400 / 1466 = 497.4 Mbit/s of payload
    let m5 = std::fs::read_to_string(out.join("20261122T100400Z-eeeeee/throughput_per_node.svg"))
        .unwrap();
    assert!(m5.contains("predicted payload: host bw / 48 nodes: 497 Mbit/s"));
    let html = check_index(&out);
    assert!(html.contains("20261122T100500Z-ffffff: samples.jsonl:13: torn last line ignored"));
}
