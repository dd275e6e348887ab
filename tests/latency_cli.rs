//! `nnb latency` end to end: the real binary against its embedded reflector (or a
//! silent socket), checking the JSON it prints, the human output, the histogram log
//! and the exit codes for bad input.

use crate::support::cli::{json, nnb};

#[test]
fn ping_pong_count_json() {
    let v = json(&["latency", "--count", "300", "--warmup", "50ms", "--json"]);
    assert_eq!(v["mode"], "ping-pong");
    assert_eq!(v["counts"]["sent"], 300);
    assert_eq!(v["counts"]["answered"], 300);
    assert_eq!(v["counts"]["lost"], 0);
    assert_eq!(v["rtt"]["count"], 300);
    let p50 = v["rtt"]["p50_ns"].as_u64().expect("p50");
    assert!(p50 > 0);
    assert_eq!(v["rtt_half"]["p50_ns"].as_u64(), Some(p50 / 2));
    assert!(v["rtt_intended"].is_null());
    // The environment travels with the result (M7): this kernel's release, as uname
    // has it, and the steal counter closed after the run.
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("osrelease");
    let kernel = v["environment"]["kernel"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(kernel.contains(release.trim()), "{kernel} vs {release}");
    assert!(v["environment"]["topology"]["online"].as_u64() > Some(0));
    assert!(v["environment"]["steal_ticks_after"].is_u64());
}

#[test]
fn busy_poll_duration_human_with_intervals() {
    let out = nnb(&[
        "latency",
        "--busy-poll",
        "--duration",
        "300ms",
        "--interval",
        "100ms",
        "--warmup",
        "50ms",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("busy-poll receive"), "{text}");
    assert!(text.contains("RTT/2 (one-way estimate)"), "{text}");
    assert!(text.contains("p99.99"), "{text}");
    assert!(text.contains("0.10-0.20s"), "interval lines: {text}");
}

#[test]
fn open_loop_reports_both_latencies() {
    let v = json(&[
        "latency",
        "--rate",
        "2k",
        "--duration",
        "300ms",
        "--warmup",
        "50ms",
        "--json",
    ]);
    assert_eq!(v["mode"], "open-loop");
    assert_eq!(v["counts"]["sent"], 600);
    let intended = v["rtt_intended"]["p50_ns"].as_u64().expect("intended p50");
    let actual = v["rtt"]["p50_ns"].as_u64().expect("actual p50");
    assert!(intended >= actual, "{intended} < {actual}");
}

#[test]
fn hist_out_writes_an_interval_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("rtt.hlog");
    let p = path.to_str().expect("utf-8 path");
    let out = nnb(&[
        "latency",
        "--duration",
        "300ms",
        "--warmup",
        "0s",
        "--hist-out",
        p,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = std::fs::read_to_string(&path).expect("log written");
    assert!(log.contains("#[Histogram log format version 1.3]"), "{log}");
    assert!(log.contains("#[BaseTime: "), "{log}");
    // The first interval starts when measuring starts: BaseTime is that moment, so
    // its StartTimestamp (seconds after BaseTime) is within a few ms of 0.
    let first: f64 = log
        .lines()
        .find_map(|l| l.strip_prefix("Tag=rtt,"))
        .and_then(|l| l.split(',').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no rtt interval: {log}"));
    assert!((0.0..0.05).contains(&first), "{first}: {log}");
}

#[test]
fn neighbor_load_steps() {
    let v = json(&[
        "latency",
        "--neighbor-load",
        "0:20M:20M",
        "--count",
        "200",
        "--warmup",
        "100ms",
        "--json",
    ]);
    let levels = v["levels"].as_array().expect("levels");
    assert_eq!(levels.len(), 2);
    assert!(v["environment"]["steal_ticks_after"].is_u64(), "{v}");
    assert_eq!(levels[0]["target_bps"], 0.0);
    assert_eq!(levels[1]["target_bps"], 20e6);
    // Every slot of the 20M schedule was sent or, after a stall of this busy machine,
    // skipped: (bytes + skipped * 1400) * 8 / elapsed is the target.
    let sent = &levels[1]["load"]["sent"];
    let slots = sent["bytes"].as_f64().expect("bytes")
        + sent["skipped"].as_f64().expect("skipped") * 1400.0;
    let scheduled = slots * 8.0 / sent["elapsed_s"].as_f64().expect("elapsed");
    assert!(
        (scheduled - 20e6).abs() < 20e6 * 0.05,
        "{scheduled}: {sent}"
    );
    assert!(levels[1]["sent_bps"].as_f64().expect("sent") > 0.0);
    assert!(levels[1]["received_bps"].as_f64().is_some());
    for l in levels {
        assert_eq!(l["probe"]["counts"]["sent"], 200);
        assert!(l["above_mean"]["p90_ns"].is_number());
    }
}

#[test]
fn bad_input_exits_2_with_a_reason() {
    for (args, needle) in [
        (&["latency", "--rate", "10Mbps"][..], "packets per second"),
        (&["latency", "--msg-size", "8"][..], "32-byte nnb header"),
        (&["latency", "--duration", "ten"][..], "duration"),
        (
            &["latency", "--target", "no-such-host.invalid:1"][..],
            "--target",
        ),
        (
            &["latency", "--neighbor-load", "5G:1G:1G"][..],
            "TO is below FROM",
        ),
        // Reliability review L11: a CPU this process may not use is named, exit 2,
        // not the kernel's bare EINVAL with exit 1.
        (
            &["latency", "--pin", "4095", "--count", "5"][..],
            "--pin: CPU 4095 is not available to this process",
        ),
        // L5: zero pings would measure nothing and exit 0.
        (&["latency", "--count", "0"][..], "--count"),
    ] {
        let out = nnb(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
