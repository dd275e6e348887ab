//! The probe and the load generator across two network namespaces joined by a veth
//! pair, with the path shaped by `tc`: netem delay must show in the RTT, and a token
//! bucket must cap what the sink receives. Needs root (see `netns::require_root` for
//! the skip/fail policy).

use crate::support::netns;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use crate::support::netns::{KillOnDrop, NetnsPair};
use serde_json::Value;

use crate::support::cli::NNB;

/// Starts `nnb serve` inside namespace `b` on its veth address; returns the process
/// and its reflector and sink addresses (from the JSON line it prints first).
fn serve_in_b(pair: &NetnsPair) -> (KillOnDrop, SocketAddr, SocketAddr) {
    let ip = pair.b.ip.to_string();
    let mut serve = KillOnDrop(
        pair.b
            .command(NNB)
            .args(["serve", "--bind", &ip, "--reflector-port", "0"])
            .args([
                "--sink-port",
                "0",
                "--no-tcp",
                "--json",
                "--duration",
                "60s",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .expect("cannot run nnb serve inside the namespace"),
    );
    let stdout = serve.0.stdout.take().expect("piped stdout");
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("serve prints its addresses");
    let v: Value = serde_json::from_str(&first).expect("the first line is JSON");
    let addr = |k: &str| -> SocketAddr {
        v[k].as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no {k} address in {first}"))
    };
    (serve, addr("reflector"), addr("sink"))
}

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
fn netem_delay_shows_in_the_rtt() {
    if !netns::require_root() || !netns::require_netem() {
        return;
    }
    let pair = NetnsPair::new().expect("cannot build the namespace pair");
    for side in [&pair.a, &pair.b] {
        side.netem_delay(Duration::from_millis(5))
            .expect("netem delay");
    }
    let (_serve, reflector, _) = serve_in_b(&pair);
    let target = reflector.to_string();
    let v = nnb_in_a(
        &pair,
        &[
            "latency", "--target", &target, "--count", "300", "--warmup", "200ms", "--json",
        ],
    );
    assert_eq!(v["counts"]["lost"], 0, "{v}");
    let p50 = v["rtt"]["p50_ns"].as_f64().expect("p50");
    eprintln!(
        "netem 5 ms each way: p50 RTT {p50} ns, p99 {}",
        v["rtt"]["p99_ns"]
    );
    // 5 ms each way: the RTT is 10 ms plus microseconds of stack.
    assert!(
        (p50 - 10e6).abs() <= 10e6 * 0.10,
        "p50 RTT {p50} ns is not within 10% of 10 ms"
    );
    assert_eq!(
        v["rtt_half"]["p50_ns"].as_f64(),
        Some((p50 as u64 / 2) as f64)
    );
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
    let (_serve, _, sink) = serve_in_b(&pair);
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
