//! Tests of the root network-namespace harness (tests/support/netns.rs): the veth pair
//! carries UDP between the namespaces, the shaping helpers install their qdiscs, and
//! everything is gone after drop, also after a panic. Needs root (see
//! `netns::require_root` for the skip/fail policy).

use crate::support::netns;

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, UdpSocket};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::netns::{netns_exists, KillOnDrop, NetnsPair};
use serde_json::Value;

use crate::support::cli::NNB;

/// A 32-byte nnb header (crates/netlat/src/wire.rs) with no payload, as a bash
/// `printf` format of `\xHH` escapes.
fn printf_datagram(kind: u8, seq: u64, stream: u32) -> String {
    let mut b = Vec::with_capacity(32);
    b.extend_from_slice(b"NNB\x01");
    b.extend_from_slice(&[1, kind, 0, 0]);
    b.extend_from_slice(&seq.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&stream.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.iter().map(|x| format!("\\x{x:02x}")).collect()
}

#[test]
fn veth_pair_carries_udp_between_namespaces_and_drop_removes_it() {
    if !netns::require_root() {
        return;
    }
    let pair = NetnsPair::new().expect("cannot build the namespace pair");
    let names = [pair.a.name.clone(), pair.b.name.clone()];
    assert!(names.iter().all(|n| netns_exists(n)), "{names:?}");
    // The namespaces' addresses are not the root namespace's.
    assert!(UdpSocket::bind((pair.b.ip, 0)).is_err());

    let b_ip = pair.b.ip.to_string();
    let mut serve = KillOnDrop(
        pair.b
            .command(NNB)
            .args([
                "serve",
                "--bind",
                &b_ip,
                "--reflector-port",
                "0",
                "--sink-port",
                "0",
            ])
            .args(["--no-tcp", "--json", "--duration", "3s"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("cannot run nnb serve inside the namespace"),
    );
    let mut out = BufReader::new(serve.0.stdout.take().expect("piped stdout"));
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let listening: Value = serde_json::from_str(&first).expect("listening line is JSON");
    let addr = |k: &str| -> SocketAddr { listening[k].as_str().unwrap().parse().unwrap() };
    let (refl, sink) = (addr("reflector"), addr("sink"));
    assert_eq!(refl.ip(), pair.b.ip);

    // From namespace a, with bash's /dev/udp: one ping to the reflector, one load
    // datagram to the sink.
    for (kind, to) in [(1u8, refl), (3u8, sink)] {
        let script = format!(
            "printf '{}' > /dev/udp/{}/{}",
            printf_datagram(kind, 0, 9),
            to.ip(),
            to.port()
        );
        let sent = pair
            .a
            .command("bash")
            .args(["-c", &script])
            .status()
            .unwrap();
        assert!(sent.success(), "sending from {} failed", pair.a.name);
    }
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let summary: Value = serde_json::from_str(rest.lines().last().expect("a summary")).unwrap();
    assert_eq!(summary["reflector"]["reflected"], 1, "{summary}");
    assert_eq!(summary["sink"]["totals"]["seq"]["received"], 1, "{summary}");
    let peer: SocketAddr = summary["sink"]["streams"][0]["peer"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(peer.ip(), pair.a.ip);

    drop(serve);
    drop(pair);
    assert!(
        !names.iter().any(|n| netns_exists(n)),
        "{names:?} left behind"
    );
}

#[test]
fn shaping_helpers_install_their_qdiscs() {
    if !netns::require_root() {
        return;
    }
    let pair = NetnsPair::new().expect("cannot build the namespace pair");
    pair.a
        .tbf(100_000_000, 64 * 1024, Duration::from_millis(50))
        .unwrap();
    let q = pair.a.qdiscs().unwrap();
    assert!(q.contains("tbf") && q.contains("100Mbit"), "{q}");
    // Replacing works too: shaping can be changed between steps of a test.
    pair.a
        .tbf(200_000_000, 64 * 1024, Duration::from_millis(50))
        .unwrap();
    assert!(pair.a.qdiscs().unwrap().contains("200Mbit"));
    if !netns::require_netem() {
        return;
    }
    pair.b.netem_delay(Duration::from_millis(5)).unwrap();
    let q = pair.b.qdiscs().unwrap();
    assert!(q.contains("netem") && q.contains("delay 5ms"), "{q}");
}

#[test]
fn namespaces_are_removed_when_a_test_panics() {
    if !netns::require_root() {
        return;
    }
    let names = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&names);
    let result = std::panic::catch_unwind(move || {
        let pair = NetnsPair::new().expect("cannot build the namespace pair");
        seen.lock()
            .unwrap()
            .extend([pair.a.name.clone(), pair.b.name.clone()]);
        panic!("deliberate panic: the harness must clean up while unwinding");
    });
    assert!(result.is_err());
    let names = names.lock().unwrap();
    assert_eq!(names.len(), 2);
    assert!(
        !names.iter().any(|n| netns_exists(n)),
        "{names:?} left behind"
    );
}
