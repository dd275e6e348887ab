//! Wang & Ng's tables and figures (issue 25) from hand-made run directories: every
//! expected value below is worked out by hand from the samples written here, in the
//! result shapes of the contract (`docs/results-format.md`, version 8). The analyses
//! key on the job kinds, not on the scenario, so these runs are staircase runs that
//! hold `steal`, `rtt`, `load` and `badabing` samples.

use std::path::{Path, PathBuf};

use nnb_analysis::plot::series_color;
use nnb_analysis::read::read_run;
use nnb_analysis::report::{write_report, ReportOptions};
use nnb_analysis::wang_ng::wang_ng;
use serde_json::{json, Value};

/// One sample of `job` on `tenant` (role `role`) in round `rep`, with `result`.
fn sample(
    step_index: usize,
    rep: u32,
    tenant: &str,
    role: &str,
    job: &str,
    result: Value,
) -> Value {
    json!({
        "format_version": 8, "run_id": "wang-ng",
        "step": format!("busy/{step_index}-{job}-{tenant}/rep={rep}"),
        "step_index": step_index, "part": 1, "parts": 1, "scenario": "neighbor-staircase",
        "group": "busy", "level": step_index as f64, "level_label": format!("{job}-{tenant}"),
        "rep": rep, "warmup": false, "tenant": tenant, "role": role, "job": job,
        "status": "ok", "error": null, "attempts": 1,
        "started_at": "2026-11-27T10:00:00Z", "elapsed_ms": 1000.0,
        "result": result,
    })
}

/// Writes a run directory holding `samples` (each numbered in order) and returns it.
fn write_run(root: &Path, samples: Vec<(u32, &str, &str, &str, Value)>) -> PathBuf {
    let dir = root.join("wang-ng");
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = json!({
        "format_version": 8, "run_id": "wang-ng", "nnb_version": "0.1.0",
        "experiment_file": "x.toml", "experiment_text": "",
        "experiment": {"name": "pair", "tenants": [{"name": "test", "role": "test", "vcpus": 1}],
            "scenario": {"kind": "neighbor-staircase", "levels": [0], "states": ["busy"]}},
        "planned_steps": samples.len(),
        "controller": {},
        "sessions": [],
    });
    std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
    let lines: String = samples
        .into_iter()
        .enumerate()
        .map(|(i, (rep, tenant, role, job, result))| {
            format!("{}\n", sample(i, rep, tenant, role, job, result))
        })
        .collect();
    std::fs::write(dir.join("samples.jsonl"), lines).unwrap();
    dir
}

/// A CPUTest result: 100 ms on cpu 0 with two 10 ms gaps (at 20 ms and 60 ms) and a
/// 1 ms one, not longer than the 1 ms threshold, 1000 iterations in every other 1 ms
/// bin; a second CPU without a trace at 45%.
fn steal_test() -> Value {
    let counts: Vec<u32> = (0..100)
        .map(|b| {
            if (20..30).contains(&b) || (60..70).contains(&b) {
                0
            } else {
                1000
            }
        })
        .collect();
    json!({
        "threshold_ns": 1_000_000u64, "duration_ns": 100_000_000u64,
        "cpus": [
            {"cpu": 0, "span_ns": 1.0e8, "ran_share": 0.8, "gaps": 2, "longest_gap_ns": 10_000_000u64,
             "trace": {"gaps": [[20_000_000u64, 10_000_000u64], [45_000_000u64, 1_000_000u64],
                                [60_000_000u64, 10_000_000u64]],
                       "counts_per_ms": counts, "gaps_left_out": 0}},
            {"cpu": 1, "span_ns": 1.0e8, "ran_share": 0.45, "gaps": 30, "longest_gap_ns": 3_000_000u64},
        ],
    })
}

/// The other side's CPUTest: all of the CPU.
fn steal_endpoint() -> Value {
    json!({"threshold_ns": 1_000_000u64, "duration_ns": 100_000_000u64,
           "cpus": [{"cpu": 3, "span_ns": 1.0e8, "ran_share": 1.0, "gaps": 0, "longest_gap_ns": 0}]})
}

/// An ICMP RTT series: 12 probes, the first 2 dropped (one of 500 ms, one lost), then
/// 0.1 to 0.8 ms and 2 lost among the 10 kept.
fn rtt() -> Value {
    let rtts: [Option<u64>; 12] = [
        Some(500_000_000),
        None,
        Some(300_000),
        Some(100_000),
        None,
        Some(800_000),
        Some(200_000),
        Some(500_000),
        Some(400_000),
        None,
        Some(700_000),
        Some(600_000),
    ];
    let log: Vec<Value> = rtts
        .iter()
        .enumerate()
        .map(|(i, r)| json!({"seq": i, "sent_ns": i as u64 * 100_000_000, "rtt_ns": r}))
        .collect();
    json!({"mode": "icmp", "target": "10.0.0.2", "rate_hz": 10.0, "probes": 12, "skip": 2,
           "msg_size": 56, "elapsed_s": 1.2, "sent": 12, "lost": 3,
           "summary": {"min_ns": 100000.0, "p50_ns": 450000.0, "mean_ns": 450000.0,
                       "max_ns": 800000.0, "std_ns": 229128.8, "kept": 8, "lost": 2},
           "log": log})
}

/// A TCP load: 4 fine points, TCP_INFO with 3 samples and no retransmission, two
/// quiet periods (30 and 20 ms).
fn tcp_load() -> Value {
    json!({
        "target": "10.0.0.2:7001", "protocol": "tcp", "target_bps": null, "msg_size": 131072,
        "sent": {"elapsed_s": 2.0, "payload_bps": 5.0e8},
        "sink": {"rate_bps": 4.5e8, "streams_reported": 1},
        "socket": {"send_buffer_requested": 262144, "send_buffer_granted": 524288,
                   "recv_buffer_requested": 262144, "recv_buffer_granted": 524288},
        "bytes_bound": 800_000_000u64,
        "tcp_info": {"interval_ms": 10, "retransmissions": 0,
                     "samples": [{"t_ns": 0, "retrans_total": 0, "cwnd": 10, "srtt_us": 100, "unacked": 0, "delivery_rate_bps": 0.0, "bytes_acked": 0},
                                 {"t_ns": 10000000, "retrans_total": 0, "cwnd": 20, "srtt_us": 100, "unacked": 3, "delivery_rate_bps": 9.0e8, "bytes_acked": 100000},
                                 {"t_ns": 20000000, "retrans_total": 0, "cwnd": 20, "srtt_us": 100, "unacked": 0, "delivery_rate_bps": 9.0e8, "bytes_acked": 200000}]},
        "quiet": {"threshold_ns": 10_000_000u64, "count": 2, "longest_ns": 30_000_000u64, "total_ns": 50_000_000u64,
                  "periods": [{"start_ns": 100_000_000u64, "len_ns": 30_000_000u64, "retrans_during": 0, "retrans_after": 0},
                              {"start_ns": 400_000_000u64, "len_ns": 20_000_000u64, "retrans_during": 0, "retrans_after": 0}]},
        "streams": [{"stream": 0, "fine": {"grain_bytes": 262144, "points_left_out": 0,
            "points": [{"t_ns": 2_000_000u64, "bps": 1.0e9}, {"t_ns": 4_000_000u64, "bps": 1.0e9},
                       {"t_ns": 50_000_000u64, "bps": 4.0e7}, {"t_ns": 52_000_000u64, "bps": 1.0e9}]}}],
    })
}

/// Points in a UDP load's fine series: 10 s of one point per 200 us.
const UDP_POINTS: u64 = 50_000;

/// A UDP load: a long fine series (every 10th point at 2 Gbit/s, the rest at
/// 0.8 Gbit/s) and two buffer burst periods against a 1 Gbit/s link: 1 MB in 2 ms
/// (the link carries 0.25 MB in 2 ms: 0.75 MB of burst data) and 3 MB in 4 ms (2.5 MB).
fn udp_load() -> Value {
    let points: Vec<Value> = (0..UDP_POINTS)
        .map(|i| json!({"t_ns": i * 200_000, "bps": if i % 10 == 0 { 2.0e9 } else { 8.0e8 }}))
        .collect();
    json!({
        "target": "10.0.0.2:7000", "protocol": "udp", "target_bps": 1.0e9, "msg_size": 1472,
        "sent": {"elapsed_s": 10.0, "payload_bps": 9.5e8},
        "sink": {"rate_bps": 7.7e8, "streams_reported": 1},
        "socket": {"send_buffer_requested": 131072, "send_buffer_granted": 262144,
                   "recv_buffer_requested": null, "recv_buffer_granted": null},
        "bytes_bound": null,
        "streams": [{"stream": 0,
            "fine": {"grain_bytes": 262144, "points_left_out": 7, "points": points},
            "buffer_bursts": {"link_bps": 1.0e9, "largest_burst_bytes": 2_500_000.0, "total_burst_bytes": 3_250_000.0,
                "periods": [{"start_ns": 1_000_000u64, "len_ns": 2_000_000u64, "bytes": 1_000_000u64, "burst_bytes": 750_000.0},
                            {"start_ns": 9_000_000u64, "len_ns": 4_000_000u64, "bytes": 3_000_000u64, "burst_bytes": 2_500_000.0}]}}],
    })
}

/// A Badabing run: 1000 slots, 300 probed, 12 lossy (a loss frequency of 12 / 300),
/// 1 of 300 probes lost; a series of 5 probed slots, 2 lossy (one with every packet
/// lost).
fn badabing() -> Value {
    json!({
        "elapsed_s": 5.0, "slot_ns": 5_000_000u64, "probability": 0.3, "packets": 3,
        "tau_ns": 50_000_000u64, "alpha": 0.005, "slots": 1000, "probed_slots": 300,
        "lossy_slots": 12, "probes": 300, "lost_probes": 1, "packets_sent": 900, "packets_lost": 1,
        "loss_frequency": 0.04, "probe_loss_rate": 1.0 / 300.0, "owd_relative": true,
        "series": [
            {"slot": 0, "t_ns": 0, "owd_ns": 0, "max_owd_ns": null, "lossy": false},
            {"slot": 3, "t_ns": 15_000_000u64, "owd_ns": 1_000_000u64, "max_owd_ns": null, "lossy": false},
            {"slot": 7, "t_ns": 35_000_000u64, "owd_ns": null, "max_owd_ns": 1_000_000u64, "lossy": true},
            {"slot": 9, "t_ns": 45_000_000u64, "owd_ns": 25_000_000u64, "max_owd_ns": 1_000_000u64, "lossy": true},
            {"slot": 12, "t_ns": 60_000_000u64, "owd_ns": 200_000u64, "max_owd_ns": 1_000_000u64, "lossy": false},
        ],
    })
}

/// One round of the pair suite, `rep`.
fn round(rep: u32) -> Vec<(u32, &'static str, &'static str, &'static str, Value)> {
    vec![
        (rep, "test", "test", "steal", steal_test()),
        (rep, "endpoint", "endpoint", "steal", steal_endpoint()),
        (rep, "test", "test", "rtt", rtt()),
        (rep, "test", "test", "load", tcp_load()),
        (rep, "test", "test", "load", udp_load()),
        (rep, "test", "test", "badabing", badabing()),
    ]
}

/// The report of `dir` written to `out`: each table's JSON by name.
fn report(dir: &Path, out: &Path) -> nnb_analysis::report::ReportSummary {
    let run = read_run(dir).unwrap();
    write_report(
        &[run],
        &ReportOptions {
            out: out.to_path_buf(),
            compare: false,
        },
    )
    .unwrap()
}

/// A table written by the report, as JSON rows.
fn rows(out: &Path, name: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(out.join(format!("{name}.json")))
        .unwrap_or_else(|e| panic!("{name}.json: {e}"));
    let v: Value = serde_json::from_str(&text).unwrap();
    v["rows"].as_array().unwrap().clone()
}

/// A number of a table row.
fn num(row: &Value, column: &str) -> f64 {
    row[column]
        .as_f64()
        .unwrap_or_else(|| panic!("{column} of {row}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

fn svg(out: &Path, stem: &str) -> String {
    let text = std::fs::read_to_string(out.join(format!("{stem}.svg")))
        .unwrap_or_else(|e| panic!("{stem}.svg: {e}"));
    roxmltree::Document::parse(&text).expect("well-formed SVG");
    text
}

/// The points of the polylines stroked in `color`.
fn polylines(text: &str, color: &str) -> Vec<Vec<(f64, f64)>> {
    let doc = roxmltree::Document::parse(text).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some(color))
        .map(|n| {
            n.attribute("points")
                .unwrap_or("")
                .split_whitespace()
                .filter_map(|p| p.split_once(','))
                .map(|(x, y)| (x.parse().unwrap(), y.parse().unwrap()))
                .collect()
        })
        .collect()
}

/// Filled circles in `color`.
fn circles(text: &str, color: &str) -> usize {
    let doc = roxmltree::Document::parse(text).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("circle") && n.attribute("fill") == Some(color))
        .count()
}

/// Every text of the SVG.
fn texts(text: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(text).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect()
}

#[test]
fn cputest_share_is_wall_time_outside_gaps_and_fig1_shows_each_gap_as_a_jump() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = write_run(tmp.path(), round(1));
    let out = tmp.path().join("out");
    report(&dir, &out);
    let t = rows(&out, "cputest_share");
    assert_eq!(t.len(), 3, "{t:?}");
    // Two 10 ms gaps in 100 ms: 80%; the 1 ms gap is not longer than the threshold.
    assert!(close(num(&t[0], "CPU share (%)"), 80.0), "{:?}", t[0]);
    assert_eq!(num(&t[0], "gaps > threshold"), 2.0);
    assert!(close(num(&t[0], "longest gap (ms)"), 10.0));
    assert!(close(num(&t[0], "threshold (ms)"), 1.0));
    assert_eq!(t[0]["share from"], "trace");
    assert_eq!(t[0]["tenant"], "test (test)");
    // No trace: the result's own share.
    assert!(close(num(&t[1], "CPU share (%)"), 45.0));
    assert_eq!(t[1]["share from"], "ran_share");
    assert!(close(num(&t[2], "CPU share (%)"), 100.0));
    assert_eq!(t[2]["tenant"], "endpoint (endpoint)");

    // Fig. 1: time up, iterations across; each 10 ms gap a vertical jump (same
    // iteration count, pixels apart), the 1 ms one too small to count.
    let text = svg(&out, "cputest_trace_1");
    // The line, then its legend entry.
    let line = polylines(&text, &series_color(0));
    assert_eq!(line.len(), 2);
    let jumps: Vec<f64> = line[0]
        .windows(2)
        .filter(|w| (w[0].0 - w[1].0).abs() < 0.5 && (w[0].1 - w[1].1).abs() > 20.0)
        .map(|w| (w[0].1 - w[1].1).abs())
        .collect();
    assert_eq!(jumps.len(), 2, "{:?}", line[0]);
    assert!(close(jumps[0], jumps[1]) || (jumps[0] - jumps[1]).abs() <= 1.0);
    assert!(texts(&text).iter().any(|t| t.contains("gaps > 1 ms")));
}

#[test]
fn rtt_table_drops_the_first_probes_and_fig9_is_log_y_with_lost_probes_marked() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = write_run(tmp.path(), round(1));
    let out = tmp.path().join("out");
    report(&dir, &out);
    let t = rows(&out, "rtt_series");
    assert_eq!(t.len(), 1);
    let r = &t[0];
    assert_eq!(r["mode"], "ICMP echo");
    assert_eq!(r["pair"], "test → 10.0.0.2");
    assert_eq!(
        (
            num(r, "logged"),
            num(r, "first dropped"),
            num(r, "kept"),
            num(r, "lost")
        ),
        (12.0, 2.0, 10.0, 2.0)
    );
    assert!(close(num(r, "loss (%)"), 20.0));
    // The kept answered RTTs are 0.1 .. 0.8 ms: min 0.1, median and mean 0.45,
    // max 0.8, std 0.1 * sqrt(var(1..8)) = 0.1 * sqrt(5.25); the 500 ms first probe
    // is dropped.
    assert!(close(num(r, "min (ms)"), 0.1));
    assert!(close(num(r, "median (ms)"), 0.45));
    assert!(close(num(r, "mean (ms)"), 0.45));
    assert!(close(num(r, "max (ms)"), 0.8));
    assert!(close(num(r, "std (ms)"), 0.1 * 5.25f64.sqrt()));

    let text = svg(&out, "rtt_series_1");
    let all = texts(&text);
    assert!(all.iter().any(|t| t.contains("log scale")), "{all:?}");
    for decade in ["0.1", "1", "10", "100"] {
        assert!(all.iter().any(|t| t == decade), "tick {decade} in {all:?}");
    }
    assert!(all.iter().any(|t| t.contains("ICMP echo")));
    // Kept probes: 8 answered; the dropped ones: 1 answered; 3 lost marked (and the
    // legend's mark).
    assert_eq!(polylines(&text, &series_color(0))[0].len(), 8);
    assert_eq!(polylines(&text, &series_color(1))[0].len(), 1);
    assert_eq!(circles(&text, &series_color(2)), 3 + 1);
}

#[test]
fn fine_throughput_table_is_exact_and_its_figure_bounded_to_one_second() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = write_run(tmp.path(), round(1));
    let out = tmp.path().join("out");
    report(&dir, &out);
    let t = rows(&out, "fine_throughput");
    assert_eq!(t.len(), 2);
    let udp = t.iter().find(|r| r["protocol"] == "UDP").unwrap();
    assert_eq!(num(udp, "points"), UDP_POINTS as f64);
    assert_eq!(num(udp, "points left out"), 7.0);
    assert!(close(num(udp, "grain (KiB)"), 256.0));
    // Every point counts: 0.9 * 800 + 0.1 * 2000 Mbit/s.
    assert!(close(num(udp, "mean of points (Mbit/s)"), 920.0));
    assert!(close(num(udp, "lowest (Mbit/s)"), 800.0));
    assert!(close(num(udp, "highest (Mbit/s)"), 2000.0));
    let tcp = t.iter().find(|r| r["protocol"] == "TCP").unwrap();
    assert!(close(
        num(tcp, "mean of points (Mbit/s)"),
        (3000.0 + 40.0) / 4.0
    ));

    // One second of UDP is 5000 points: drawn with at most 2000, the spikes kept.
    let text = svg(&out, "fine_throughput_round_1");
    let tcp_line = &polylines(&text, &series_color(0))[0];
    assert_eq!(tcp_line.len(), 4);
    let udp_line = &polylines(&text, &series_color(1))[0];
    assert!(
        udp_line.len() <= 2000 && udp_line.len() > 500,
        "{}",
        udp_line.len()
    );
    let all = texts(&text);
    assert!(
        all.iter().any(|t| t.contains("of 5000 points drawn")),
        "{all:?}"
    );
    assert!(all.iter().any(|t| t == "full link rate"));
    let top = udp_line.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let spikes = udp_line.iter().filter(|p| (p.1 - top).abs() < 0.5).count();
    assert!(spikes > 100, "spikes at 2 Gbit/s kept: {spikes}");
}

#[test]
fn buffer_bursts_tcp_beside_udp_and_quiet_periods() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = write_run(tmp.path(), round(1));
    let out = tmp.path().join("out");
    report(&dir, &out);
    let b = rows(&out, "buffer_bursts");
    assert_eq!(b.len(), 1, "only the UDP stream has bursts: {b:?}");
    let b = &b[0];
    assert!(close(num(b, "link rate (Mbit/s)"), 1000.0));
    assert_eq!(num(b, "periods"), 2.0);
    // 3 MB in 4 ms less the link's 0.5 MB; 0.75 + 2.5 MB in all.
    assert!(close(num(b, "largest burst data (MB)"), 2.5));
    assert!(close(num(b, "total burst data (MB)"), 3.25));
    assert!(close(num(b, "received in periods (MB)"), 4.0));
    assert!(close(num(b, "longest period (ms)"), 4.0));

    let t = rows(&out, "tcp_vs_udp");
    assert_eq!(t.len(), 2);
    let tcp = t.iter().find(|r| r["protocol"] == "TCP").unwrap();
    let udp = t.iter().find(|r| r["protocol"] == "UDP").unwrap();
    assert!(close(num(tcp, "received (Mbit/s)"), 450.0));
    assert!(close(num(udp, "received (Mbit/s)"), 770.0));
    assert!(close(num(tcp, "send buffer asked (KiB)"), 256.0));
    assert!(close(num(tcp, "send buffer granted (KiB)"), 512.0));
    assert!(close(num(tcp, "bound (MB)"), 800.0));
    assert!(udp["recv buffer granted (KiB)"].is_null());

    let q = rows(&out, "tcp_quiet_periods");
    assert_eq!(q.len(), 1);
    let q = &q[0];
    assert_eq!(num(q, "TCP_INFO samples"), 3.0);
    assert_eq!(num(q, "retransmissions"), 0.0);
    assert_eq!(num(q, "quiet periods"), 2.0);
    assert!(close(num(q, "longest (ms)"), 30.0));
    assert!(close(num(q, "total (ms)"), 50.0));
    assert!(close(num(q, "quiet threshold (ms)"), 10.0));
    assert_eq!(num(q, "retrans. during"), 0.0);
    assert_eq!(num(q, "retrans. after"), 0.0);
}

#[test]
fn badabing_loss_frequency_beside_probe_loss_and_the_owd_figure() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = write_run(tmp.path(), round(1));
    let out = tmp.path().join("out");
    report(&dir, &out);
    let t = rows(&out, "badabing");
    assert_eq!(t.len(), 1);
    let r = &t[0];
    assert!(close(num(r, "loss frequency (%)"), 4.0));
    assert!(close(num(r, "probe loss rate (%)"), 100.0 / 300.0));
    assert_eq!((num(r, "lossy slots"), num(r, "lost probes")), (12.0, 1.0));
    assert!(close(num(r, "slot (ms)"), 5.0));
    assert!(close(num(r, "tau (ms)"), 50.0));
    assert_eq!(r["packets lost / sent"], "1 / 900");

    let text = svg(&out, "badabing_owd_1");
    let all = texts(&text);
    assert!(
        all.iter().any(|t| t.contains("above the smallest seen")),
        "the axis says the OWD is relative: {all:?}"
    );
    // 4 slots with a delay; the max_owd estimate from its first value, as steps;
    // 2 lossy slots marked (and the legend's mark).
    assert_eq!(polylines(&text, &series_color(0))[0].len(), 4);
    assert_eq!(polylines(&text, &series_color(1))[0].len(), 5);
    assert_eq!(circles(&text, &series_color(2)), 2 + 1);
}

#[test]
fn the_per_pair_table_has_the_seeds_columns_one_row_per_round() {
    let tmp = tempfile::tempdir().unwrap();
    let mut samples = round(1);
    samples.extend(round(2));
    let dir = write_run(tmp.path(), samples);
    let out = tmp.path().join("out");
    let summary = report(&dir, &out);
    let t = rows(&out, "pair_suite");
    assert_eq!(t.len(), 2);
    for (r, rep) in t.iter().zip([1.0, 2.0]) {
        assert_eq!(num(r, "round"), rep);
        assert_eq!(r["pair"], "test ↔ endpoint");
        // Test side: the mean of 80% (trace) and 45%.
        assert!(close(num(r, "CPU share test side (%)"), 62.5));
        assert!(close(num(r, "CPU share other side (%)"), 100.0));
        assert_eq!(r["RTT mode"], "ICMP echo");
        assert!(close(num(r, "RTT min (ms)"), 0.1));
        assert!(close(num(r, "RTT median (ms)"), 0.45));
        assert!(close(num(r, "RTT mean (ms)"), 0.45));
        assert!(close(num(r, "RTT max (ms)"), 0.8));
        assert!(close(num(r, "TCP (Mbit/s)"), 450.0));
        assert!(close(num(r, "UDP (Mbit/s)"), 770.0));
        assert!(close(num(r, "largest buffer burst (MB)"), 2.5));
        assert!(close(num(r, "loss frequency (%)"), 4.0));
        assert!(close(num(r, "probe loss rate (%)"), 100.0 / 300.0));
    }
    // The pair's measurements are not levels of a degradation table.
    let names: Vec<&str> = summary.sections[0]
        .tables
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert!(!names.contains(&"degradation"), "{names:?}");
    assert_eq!(names.first(), Some(&"pair_suite"), "{names:?}");
    for stem in [
        "cputest_trace_1",
        "rtt_series_2",
        "fine_throughput_round_2",
        "badabing_owd_2",
    ] {
        svg(&out, stem);
    }
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(index.contains("Per pair"));
}

#[test]
fn malformed_results_are_notes_and_every_other_table_is_still_written() {
    let tmp = tempfile::tempdir().unwrap();
    let mut broken_rtt = rtt();
    broken_rtt.as_object_mut().unwrap().remove("log");
    let mut broken_steal = steal_test();
    broken_steal["threshold_ns"] = json!("one ms");
    let mut broken_badabing = badabing();
    broken_badabing["series"][0]["lossy"] = json!(3);
    let mut samples = round(1);
    samples.extend([
        (2, "test", "test", "rtt", broken_rtt),
        (2, "test", "test", "steal", broken_steal),
        (2, "test", "test", "badabing", broken_badabing),
        (2, "test", "test", "load", json!(null)),
    ]);
    let dir = write_run(tmp.path(), samples);
    let out = tmp.path().join("out");
    let summary = report(&dir, &out);
    let tables = &summary.sections[0].tables;
    let pair = tables.iter().find(|t| t.name == "pair_suite").unwrap();
    let notes = pair.notes.join("\n");
    for (line, what) in [
        (7, "missing field `log`"),
        (8, "invalid type: string \"one ms\""),
        (9, "invalid type: integer `3`, expected a boolean"),
        (10, "invalid type: null"),
    ] {
        assert!(
            notes.contains(&format!("samples.jsonl:{line}:")) && notes.contains(what),
            "line {line}, {what:?} in {notes}"
        );
    }
    // Round 1 is whole: every table has its row, every figure is drawn.
    assert_eq!(rows(&out, "rtt_series").len(), 1);
    assert_eq!(rows(&out, "cputest_share").len(), 3);
    assert_eq!(rows(&out, "badabing").len(), 1);
    assert_eq!(rows(&out, "tcp_vs_udp").len(), 2);
    assert_eq!(rows(&out, "pair_suite").len(), 1);
    for stem in [
        "cputest_trace_1",
        "rtt_series_1",
        "fine_throughput_round_1",
        "badabing_owd_1",
    ] {
        svg(&out, stem);
    }
}

#[test]
fn figures_that_cannot_be_drawn_are_notes_and_long_series_stay_bounded() {
    // A series of 200,000 probes with a zero RTT (a log axis cannot show it): the
    // table is exact, the figure a note.
    let tmp = tempfile::tempdir().unwrap();
    let mut r = rtt();
    let log: Vec<Value> = (0..200_000u64)
        .map(|i| json!({"seq": i, "sent_ns": i * 100_000_000, "rtt_ns": if i == 5 { 0 } else { 100_000 + i % 7 * 1000 }}))
        .collect();
    r["log"] = json!(log);
    r["skip"] = json!(0);
    let dir = write_run(tmp.path(), vec![(1, "test", "test", "rtt", r)]);
    let out = tmp.path().join("out");
    let summary = report(&dir, &out);
    let t = rows(&out, "rtt_series");
    assert_eq!(num(&t[0], "kept"), 200_000.0);
    assert!(close(num(&t[0], "min (ms)"), 0.0));
    assert!(!out.join("rtt_series_1.svg").exists());
    let notes = summary.sections[0].notes.join("\n");
    assert!(notes.contains("logarithmic y axis needs y > 0"), "{notes}");

    // Without the zero: drawn, with at most 2000 points.
    let mut r = rtt();
    let log: Vec<Value> = (0..200_000u64)
        .map(|i| json!({"seq": i, "sent_ns": i, "rtt_ns": 100_000 + i % 7 * 1000}))
        .collect();
    r["log"] = json!(log);
    let dir = write_run(tmp.path(), vec![(1, "test", "test", "rtt", r)]);
    report(&dir, &out);
    let text = svg(&out, "rtt_series_1");
    assert!(polylines(&text, &series_color(0))[0].len() <= 2000);
    assert!(text.len() < 1 << 20, "{} bytes", text.len());
}

#[test]
fn runs_without_wang_ng_samples_have_none() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = write_run(tmp.path(), round(1));
    let run = read_run(&dir).unwrap();
    let w = wang_ng(&run).unwrap().expect("the round's samples");
    assert_eq!(w.tables().len(), 8);
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/staircase");
    let run = read_run(&fixture).unwrap();
    assert!(wang_ng(&run).unwrap().is_none());
}

/// Pair suite runs given together (issue 26 item 3): each round's values are the
/// seed's numbers of its pair, worked out above, the mean over its two repetitions;
/// the RTT CDF is on a log x axis as the seed's Fig. 8, the throughput's linear as
/// Figs 3/4.
#[test]
fn pair_suite_runs_across_are_rounds_of_the_seeds_numbers() {
    use nnb_analysis::campaign::across;
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let dirs: Vec<PathBuf> = [&a, &b]
        .iter()
        .map(|t| {
            let mut samples = round(1);
            samples.extend(round(2));
            write_run(t.path(), samples)
        })
        .collect();
    let c = across(&dirs).unwrap();
    assert_eq!(c.rounds.len(), 2);
    let value = |name: &str| {
        let m = c
            .measures
            .iter()
            .position(|m| m.name == name)
            .unwrap_or_else(|| panic!("no {name} in {:?}", c.measures));
        c.rounds[1].value(m).unwrap()
    };
    // Kept RTTs, sorted: 0.1 .. 0.8 ms; p99 at 0.99 x 7 = 6.93: 0.7 + 0.93 x 0.1 ms.
    for (name, want) in [
        ("CPU share test side", 62.5),
        ("CPU share other side", 100.0),
        ("longest gap test side", 10e6),
        ("RTT min", 0.1e6),
        ("RTT median", 0.45e6),
        ("RTT mean", 0.45e6),
        ("RTT p99", 0.793e6),
        ("RTT max", 0.8e6),
        ("TCP throughput", 4.5e8),
        ("UDP throughput", 7.7e8),
        ("TCP fine-grained lowest", 4.0e7),
        ("UDP fine-grained lowest", 8.0e8),
        ("largest buffer burst", 2.5e6),
        ("loss frequency", 4.0),
        ("probe loss rate", 100.0 / 300.0),
    ] {
        assert!(
            close(value(name), want),
            "{name}: {} != {want}",
            value(name)
        );
    }
    let (figures, _) = c.figures();
    let log = |stem: &str| {
        figures
            .iter()
            .find(|f| f.stem == stem)
            .unwrap_or_else(|| panic!("no {stem}"))
            .chart
            .log_x
    };
    assert!(log("cdf_rtt_mean") && log("cdf_loss_frequency"));
    assert!(!log("cdf_tcp_throughput") && !log("cdf_cpu_share_test_side"));
}
