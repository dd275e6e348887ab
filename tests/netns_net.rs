//! The load generator across two network namespaces joined by a veth pair, with the
//! path shaped by `tc`: a token bucket must cap what the sink receives. Needs root
//! (see `netns::require_root` for the skip/fail policy). The probe's RTT against a
//! known delay is checked without root, through a delay proxy written in the test
//! (`ground_truth_delay.rs`): the netem test that stood here skipped itself on
//! kernels without netem, so it could not fail where it ran.

use crate::support::netns;

use std::time::Duration;

use crate::support::netns::{sink_in, NetnsPair};
use serde_json::Value;

use crate::support::cli::NNB;

/// Runs `nnb` with `args` inside namespace `a`; its JSON output.
fn nnb_in_a(pair: &NetnsPair, args: &[&str]) -> Value {
    let out = pair.a.command(NNB).args(args).output().expect("run nnb");
    assert!(
        out.status.success(),
        "nnb {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("nnb prints JSON")
}

#[test]
fn token_bucket_caps_what_the_sink_receives() {
    if !netns::require_root() {
        return;
    }
    let pair = NetnsPair::new().expect("cannot build the namespace pair");
    pair.a
        .tbf(100_000_000, 64 * 1024, Duration::from_millis(50))
        .expect("tbf");
    let (_serve, sink) = sink_in(&pair.b);
    let target = sink.to_string();
    let v = nnb_in_a(
        &pair,
        &[
            "load",
            "--target",
            &target,
            "--rate",
            "200M",
            "--duration",
            "3s",
            "--interval",
            "0",
            "--json",
        ],
    );
    let sent = v["sent"]["payload_bps"].as_f64().expect("sender rate");
    assert!(sent > 150e6, "the sender pushed {sent} bit/s, not ~200M");
    let received = v["sink"]["rate_bps"].as_f64().expect("the sink answers");
    assert!(
        (received - 100e6).abs() <= 100e6 * 0.05,
        "the sink received {received} bit/s, not 100 Mbit/s within 5%"
    );
    let lost = v["sink"]["lost"].as_u64().expect("loss");
    let expected = v["sink"]["expected"].as_u64().expect("expected");
    eprintln!("tbf 100M: sent {sent} bit/s, received {received} bit/s, lost {lost} of {expected}");
    // Half of 200M does not fit 100M: about half the datagrams are dropped.
    assert!(
        lost * 10 > expected * 3 && lost * 10 < expected * 7,
        "lost {lost} of {expected}"
    );
}
