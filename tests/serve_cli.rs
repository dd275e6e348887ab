//! End-to-end tests of `nnb serve`: the binary on ephemeral loopback ports, driven
//! over real sockets, its listening line, interval lines, summary and exit codes.

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::cli::{signal, NNB};
const MAGIC: &[u8; 4] = b"NNB\x01";

/// A 32-byte nnb header (see crates/netlat/src/wire.rs) plus `payload` zero bytes.
fn datagram(kind: u8, seq: u64, stream: u32, payload: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(32 + payload);
    b.extend_from_slice(MAGIC);
    b.push(1);
    b.push(kind);
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&seq.to_le_bytes());
    b.extend_from_slice(&seq.to_le_bytes());
    b.extend_from_slice(&stream.to_le_bytes());
    b.extend_from_slice(&(payload as u32).to_le_bytes());
    b.resize(32 + payload, 0);
    b
}

/// Starts `nnb serve` on ephemeral ports with `extra` arguments; returns the child,
/// its first stdout line, and the rest of its stdout.
fn serve(extra: &[&str]) -> (Child, String, BufReader<ChildStdout>) {
    let mut child = Command::new(NNB)
        .args([
            "serve",
            "--reflector-port",
            "0",
            "--sink-port",
            "0",
            "--tcp-port",
            "0",
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("cannot run nnb");
    let mut out = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut first = String::new();
    out.read_line(&mut first).expect("no listening line");
    (child, first, out)
}

fn ping(sock: &UdpSocket, to: SocketAddr, seq: u64) {
    sock.send_to(&datagram(1, seq, 0, 16), to).unwrap();
    let mut buf = [0u8; 128];
    let (n, _) = sock.recv_from(&mut buf).expect("no pong");
    assert_eq!(n, 48);
    assert_eq!(buf[5], 2, "not a pong");
    assert_eq!(&buf[8..16], &seq.to_le_bytes());
}

#[test]
fn json_mode_reports_listening_intervals_and_summary() {
    let (child, first, mut out) = serve(&["--json", "--interval", "300ms", "--duration", "2s"]);
    let listening: Value = serde_json::from_str(&first).expect("listening line is JSON");
    assert_eq!(listening["event"], "listening");
    let addr = |k: &str| -> SocketAddr { listening[k].as_str().unwrap().parse().unwrap() };
    let (refl, sink) = (addr("reflector"), addr("sink"));
    assert!(refl.ip().is_loopback() && refl.port() != 0);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    for seq in 0..10 {
        ping(&sock, refl, seq);
    }
    for seq in (0..100u64).filter(|s| *s != 50) {
        sock.send_to(&datagram(3, seq, 7, 64), sink).unwrap();
    }
    sock.send_to(b"garbage", sink).unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let status = child.wait_with_output().unwrap().status;
    assert!(status.success(), "{status}");
    let lines: Vec<Value> = rest
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect();
    assert!(lines.iter().filter(|l| l["event"] == "interval").count() >= 3);
    let summary = lines.last().unwrap();
    assert_eq!(summary["event"], "summary");
    assert_eq!(summary["reflector"]["reflected"], 10);
    let totals = &summary["sink"]["totals"];
    assert_eq!(totals["seq"]["received"], 99);
    assert_eq!(totals["seq"]["expected"], 100);
    assert_eq!(summary["sink"]["garbage"]["truncated"], 1);
    let stream = &summary["sink"]["streams"][0];
    assert_eq!(stream["stream"], 7);
    assert_eq!(stream["bytes"], 99 * 96);
    assert_eq!(stream["peer"], sock.local_addr().unwrap().to_string());
}

#[test]
fn human_mode_stops_on_sigterm_with_a_summary() {
    let (child, first, mut out) = serve(&["--no-tcp"]);
    assert!(
        first.starts_with("listening reflector=127.0.0.1:"),
        "{first}"
    );
    assert!(first.trim_end().ends_with("tcp=off"), "{first}");
    let refl: SocketAddr = first
        .split_whitespace()
        .find_map(|w| w.strip_prefix("reflector="))
        .unwrap()
        .parse()
        .unwrap();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    ping(&sock, refl, 1);
    signal(child.id(), "TERM");
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(child.wait_with_output().unwrap().status.success());
    assert!(rest.contains("served for"), "{rest}");
    assert!(rest.contains("reflector: 1 pings answered"), "{rest}");
}

#[test]
fn bad_input_exits_with_code_2() {
    for args in [
        &["serve", "--no-reflector", "--no-sink", "--no-tcp"][..],
        &["serve", "--interval", "0s"],
        &["serve", "--duration", "soon"],
        // L5: a zero duration serves nothing and used to exit 0.
        &["serve", "--duration", "0s"],
        &["serve", "--bind", "not-an-ip"],
        &["serve", "--sink-threads", "0"],
        &["serve", "--sink-threads", "257"],
    ] {
        let out = Command::new(NNB).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn a_port_in_use_is_a_clear_error() {
    let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = Command::new(NNB)
        .args([
            "serve",
            "--reflector-port",
            &port,
            "--sink-port",
            "0",
            "--tcp-port",
            "0",
        ])
        .args(["--duration", "1s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot bind the reflector"), "{err}");
}

/// A sink port in use is refused with several sockets too: the SO_REUSEPORT group
/// never joins another socket's port.
#[test]
fn a_sink_of_several_sockets_refuses_a_port_in_use_and_shows_each_socket() {
    let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = Command::new(NNB)
        .args(["serve", "--no-reflector", "--no-tcp", "--sink-port", &port])
        .args(["--sink-threads", "2", "--duration", "1s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot bind the sink"), "{err}");
    let (child, _, mut out) = serve(&["--sink-threads", "2", "--json", "--duration", "1s"]);
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(child.wait_with_output().unwrap().status.success());
    let summary: Value = serde_json::from_str(rest.lines().last().unwrap()).unwrap();
    let sockets = summary["sink"]["sockets"].as_array().unwrap();
    assert_eq!(sockets.len(), 2, "{summary}");
    assert!(sockets.iter().all(|s| s["cpu"].is_u64()), "{summary}");
    assert_eq!(summary["sink"]["drops"], 0);
    assert!(
        summary["host_udp_errors"]["rcvbuf_errors"].is_u64(),
        "{summary}"
    );
}
