//! `nnb load` against a path whose capacity the test sets itself: two network
//! namespaces joined by a veth pair, the sender's side shaped by a token bucket
//! (`tbf rate 50mbit`). Offered twice that, the sink must receive what the bucket
//! lets through, in payload terms, and report the rest as lost. Needs root (see
//! `netns::require_root` for the skip/fail policy); tbf is in every kernel these
//! tests run on, unlike netem. (It replaces `netns_net.rs`, whose tbf test compared
//! payload with the shaped frame rate and needed 150 of 200 Mbit/s from the sender.)

use std::time::Duration;

use serde_json::Value;

use crate::support::cli::NNB;
use crate::support::netns::{self, sink_in, NetnsPair};

/// The shaped rate: tbf's `rate 50mbit`, in bit/s of whole Ethernet frames.
const SHAPED_BPS: u64 = 50_000_000;
/// `nnb load --msg-size`: UDP payload bytes per datagram (nnb's header included).
const MSG: u64 = 1400;

#[test]
fn token_bucket_rate_is_what_the_sink_receives_in_payload_terms() {
    if !netns::require_root() {
        return;
    }
    // Dropping `pair` (also while a failed assertion unwinds) deletes both namespaces
    // and the veth pair; `_serve` is declared after it, so it is killed first.
    let pair = NetnsPair::new().expect("cannot build the namespace pair");
    // tc's `burst 32kbit` is 32 * 1024 / 8 = 4096 bytes.
    pair.a
        .tbf(SHAPED_BPS, 4096, Duration::from_millis(50))
        .expect("tbf on the sender's veth");
    eprintln!(
        "sender qdisc: {}",
        pair.a.qdiscs().unwrap_or_default().trim()
    );
    let (_serve, sink) = sink_in(&pair.b);
    let target = sink.to_string();
    let out = pair
        .a
        .command(NNB)
        .args([
            "load",
            "--target",
            &target,
            "--rate",
            "100M",
            "--duration",
            "3s",
        ])
        .args(["--msg-size", "1400", "--interval", "0", "--json"])
        .output()
        .expect("run nnb load in the sender namespace");
    assert!(
        out.status.success(),
        "nnb load failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("nnb load prints JSON");

    // tbf counts every frame whole: 1400 bytes of UDP payload + 8 (UDP) + 20 (IPv4)
    // + 14 (Ethernet) = 1442 bytes. Of 50 Mbit/s of frames, 1400/1442 is payload:
    // 50e6 * 1400 / 1442 = 48,543,689 bit/s.
    let frame = MSG + 8 + 20 + 14;
    assert_eq!(frame, 1442);
    let expected = SHAPED_BPS as f64 * MSG as f64 / frame as f64;
    assert!((expected - 48_543_689.3).abs() < 1.0, "{expected}");

    let sent = v["sent"]["payload_bps"].as_f64().expect("sender rate");
    let received = v["sink"]["rate_bps"]
        .as_f64()
        .unwrap_or_else(|| panic!("the sink did not answer: {v}"));
    let lost = v["sink"]["lost"].as_u64().expect("sink loss");
    let sink_expected = v["sink"]["expected"].as_u64().expect("sink expected");
    let error = (received - expected) / expected;
    eprintln!(
        "tbf 50mbit, offered 100M: sent {sent:.0} bit/s; sink received {received:.0} bit/s of \
         payload, expected {expected:.0} ({:+.2}%); lost {lost} of {sink_expected}",
        error * 100.0
    );
    // The sender must offer clearly more than the bucket passes; on a busy machine
    // (tests run in parallel) it may fall short of its 100M without catch-up.
    assert!(
        sent > 1.3 * expected,
        "the sender offered only {sent} bit/s, not clearly above {expected}"
    );
    assert!(
        error.abs() <= 0.03,
        "the sink received {received} bit/s of payload, not within 3% of {expected} \
         (50 Mbit/s of 1442-byte frames carrying 1400 bytes each)"
    );
    // What the bucket cannot pass is lost: 1 - expected / sent of the datagrams (about
    // half at the full 100M offered), within 10 points.
    assert!(
        lost > 0,
        "offered more than the shaped rate but no loss reported: {v}"
    );
    let lost_share = lost as f64 / sink_expected.max(1) as f64;
    let want_share = 1.0 - expected / sent;
    assert!(
        (lost_share - want_share).abs() <= 0.10,
        "lost {lost} of {sink_expected} ({lost_share:.3}), expected about {want_share:.3}"
    );
}
