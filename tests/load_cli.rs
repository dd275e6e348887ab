//! `nnb load` end to end: the real binary against its embedded sinks, a target that
//! is not an nnb sink, and bad input.

use std::net::UdpSocket;

use crate::support::cli::{json, nnb};

#[test]
fn udp_load_with_sink_view() {
    let v = json(&[
        "load",
        "--rate",
        "50M",
        "--duration",
        "1s",
        "--interval",
        "250ms",
        "--json",
    ]);
    assert_eq!(v["protocol"], "udp");
    assert_eq!(v["target_bps"], 50e6);
    // Every slot of the 50M schedule was sent or, after a stall of this busy machine,
    // skipped (no catch-up): (bytes + skipped * msg_size) * 8 / elapsed is the target.
    let sent = v["sent"]["payload_bps"].as_f64().expect("payload rate");
    let bytes = v["sent"]["bytes"].as_f64().expect("bytes");
    let skipped = v["sent"]["skipped"].as_f64().expect("skipped");
    let msg = v["msg_size"].as_f64().expect("msg_size");
    let elapsed = v["sent"]["elapsed_s"].as_f64().expect("elapsed");
    let scheduled = (bytes + skipped * msg) * 8.0 / elapsed;
    assert!((scheduled - 50e6).abs() < 50e6 * 0.05, "{scheduled} ({v})");
    assert!(sent <= 50e6 * 1.05, "{sent}");
    assert!(v["sent"]["wire_bps"].as_f64().expect("wire rate") > sent);
    let sink = &v["sink"];
    assert_eq!(sink["streams_reported"], 1);
    assert!(sink["rate_bps"].as_f64().expect("received rate") > 0.0);
    assert!(v["intervals"].as_array().expect("intervals").len() >= 4);
    // The environment travels with the result (M7).
    assert!(v["environment"]["kernel"].is_string(), "{v}");
    assert!(v["environment"]["steal_ticks_after"].is_u64(), "{v}");
}

/// `8MB/s` is eight megabytes per second: 8e6 * 8 = 64e6 bit/s (it used to send 8 Mbit/s).
#[test]
fn byte_rates_are_eight_times_bit_rates() {
    let v = json(&["load", "--rate", "8MB/s", "--duration", "300ms", "--json"]);
    assert_eq!(v["target_bps"], 64e6);
}

#[test]
fn tcp_load_with_sink_view() {
    let v = json(&[
        "load",
        "--tcp",
        "--rate",
        "50M",
        "--duration",
        "500ms",
        "--streams",
        "2",
        "--json",
    ]);
    assert_eq!(v["protocol"], "tcp");
    assert_eq!(v["streams"].as_array().expect("streams").len(), 2);
    assert_eq!(v["sink"]["bytes"], v["sent"]["bytes"]);
}

#[test]
fn human_output_says_when_the_sink_view_is_unavailable() {
    let mute = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let target = mute.local_addr().expect("addr").to_string();
    let out = nnb(&[
        "load",
        "--target",
        &target,
        "--rate",
        "5M",
        "--duration",
        "300ms",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("sink view unavailable"), "{text}");
    assert!(text.contains("payload rate"), "{text}");
}

#[test]
fn bad_input_exits_2_with_a_reason() {
    for (args, needle) in [
        (&["load", "--rate", "10X"][..], "unknown unit"),
        (&["load", "--rate", "0"][..], "zero rate"),
        (&["load", "--streams", "0"][..], "between 1 and 256"),
        // Reliability review L16: a clean refusal, not an abort.
        (&["load", "--streams", "100000"][..], "100000 streams"),
        (&["load", "--cpus", "4096"][..], "not available"),
    ] {
        let out = nnb(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
