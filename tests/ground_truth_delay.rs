//! `nnb latency` against a path whose truth the test makes itself, without root: a
//! UDP proxy written here with plain `std::net` sockets and threads (no nnb code)
//! sits between the probe and an `nnb serve` reflector. It holds every datagram
//! `D` in each direction, so the true RTT is `2 D` plus microseconds of loopback,
//! and it can drop chosen pings, so the true loss is known; with nothing answering
//! at all the probe must fail.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::support::cli::{json, nnb};
use crate::support::netns::spawn_reflector;

/// Sleeps until `due`: most of the way in `sleep`, the last 200 us spinning, so a
/// datagram leaves within microseconds of its time.
fn wait_until(due: Instant) {
    loop {
        let now = Instant::now();
        if now >= due {
            return;
        }
        let left = due - now;
        if left > Duration::from_micros(200) {
            std::thread::sleep(left - Duration::from_micros(200));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// A UDP proxy on 127.0.0.1 in front of `upstream` that holds each datagram
/// `delay` in each direction and drops the client's datagram `i` (counted from 0)
/// when `dropped(i)`. It serves one client (the first to send), until dropped.
struct DelayProxy {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl DelayProxy {
    fn start(upstream: SocketAddr, delay: Duration, dropped: fn(u64) -> bool) -> DelayProxy {
        let front = UdpSocket::bind("127.0.0.1:0").expect("bind the proxy");
        let back = UdpSocket::bind("127.0.0.1:0").expect("bind the upstream side");
        back.connect(upstream).expect("connect upstream");
        for s in [&front, &back] {
            s.set_read_timeout(Some(Duration::from_millis(20)))
                .expect("read timeout");
        }
        let addr = front.local_addr().expect("proxy address");
        let stop = Arc::new(AtomicBool::new(false));
        let client: Arc<Mutex<Option<SocketAddr>>> = Arc::default();
        let (to_server, server_queue) = mpsc::channel::<(Instant, Vec<u8>)>();
        let (to_client, client_queue) = mpsc::channel::<(Instant, Vec<u8>)>();
        let front_tx = front.try_clone().expect("clone");
        let back_tx = back.try_clone().expect("clone");
        let mut threads = Vec::new();
        // Client -> proxy: note the client, stamp each datagram with its due time.
        let (s, c) = (stop.clone(), client.clone());
        threads.push(std::thread::spawn(move || {
            let mut buf = [0u8; 65_536];
            let mut index = 0u64;
            while !s.load(Ordering::Relaxed) {
                let Ok((n, from)) = front.recv_from(&mut buf) else {
                    continue;
                };
                let arrived = Instant::now();
                c.lock().expect("client lock").get_or_insert(from);
                if !dropped(index) {
                    let _ = to_server.send((arrived + delay, buf[..n].to_vec()));
                }
                index += 1;
            }
        }));
        // Reflector -> proxy: each reply is due `delay` after it came.
        let s = stop.clone();
        threads.push(std::thread::spawn(move || {
            let mut buf = [0u8; 65_536];
            while !s.load(Ordering::Relaxed) {
                if let Ok(n) = back.recv(&mut buf) {
                    let _ = to_client.send((Instant::now() + delay, buf[..n].to_vec()));
                }
            }
        }));
        // The two forwarders: a constant delay keeps each direction in order.
        threads.push(std::thread::spawn(move || {
            for (due, d) in server_queue {
                wait_until(due);
                let _ = back_tx.send(&d);
            }
        }));
        threads.push(std::thread::spawn(move || {
            for (due, d) in client_queue {
                wait_until(due);
                if let Some(to) = *client.lock().expect("client lock") {
                    let _ = front_tx.send_to(&d, to);
                }
            }
        }));
        DelayProxy {
            addr,
            stop,
            threads,
        }
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        // The receivers stop; their channels close, and the forwarders end.
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The proxy's one-way delay: 5 ms, so the true RTT is 10 ms.
const D: Duration = Duration::from_millis(5);

#[test]
fn delay_proxy_rtt_is_twice_the_delay() {
    let (_serve, reflector) = spawn_reflector("60s");
    let proxy = DelayProxy::start(reflector, D, |_| false);
    let target = proxy.addr.to_string();
    let v = json(&[
        "latency", "--target", &target, "--count", "200", "--warmup", "100ms", "--json",
    ]);
    assert_eq!(v["counts"]["lost"], 0, "{v}");
    let p50 = v["rtt"]["p50_ns"].as_f64().expect("p50");
    let truth = 2.0 * D.as_nanos() as f64;
    eprintln!("proxy {D:?} each way: p50 RTT {p50} ns, truth {truth} ns");
    assert!(
        (p50 - truth).abs() <= truth * 0.05,
        "p50 RTT {p50} ns is not within 5% of 2 x {D:?}"
    );
    let half = v["rtt_half"]["p50_ns"].as_f64().expect("RTT/2 p50");
    assert!((half - truth / 2.0).abs() <= truth / 2.0 * 0.05, "{half}");
}

#[test]
fn dropped_pings_are_reported_as_loss() {
    // Every fourth ping (3, 7, ..., 39 of 40) never reaches the reflector: 10 lost.
    let (_serve, reflector) = spawn_reflector("60s");
    let proxy = DelayProxy::start(reflector, D, |i| i % 4 == 3);
    let target = proxy.addr.to_string();
    let v = json(&[
        "latency",
        "--target",
        &target,
        "--count",
        "40",
        "--warmup",
        "0s",
        "--timeout",
        "200ms",
        "--json",
    ]);
    assert_eq!(v["counts"]["sent"], 40, "{v}");
    assert_eq!(v["counts"]["answered"], 30, "{v}");
    assert_eq!(v["counts"]["lost"], 10, "{v}");
    assert_eq!(v["rtt"]["count"], 30, "{v}");
}

#[test]
fn a_dead_port_fails_instead_of_reporting_zero_latency() {
    // A bound UDP socket that never answers, and a proxy that drops everything: in
    // both, no ping is answered. The probe must fail (exit 1) and say so, printing
    // no result (no "p50 0 ns").
    let silent = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let silent_addr = silent.local_addr().expect("addr");
    let black_hole = DelayProxy::start(silent_addr, D, |_| true);
    for target in [silent_addr, black_hole.addr] {
        let target = target.to_string();
        for mode in [&[][..], &["--rate", "100"][..]] {
            let mut args = vec![
                "latency",
                "--target",
                &target,
                "--count",
                "3",
                "--timeout",
                "100ms",
                "--warmup",
                "0s",
                "--json",
            ];
            args.extend_from_slice(mode);
            let out = nnb(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
            assert!(
                err.contains(&format!(
                    "no answer from {target}: none of the 3 pings sent was answered within 100ms"
                )),
                "{args:?}: {err}"
            );
            assert!(out.stdout.is_empty(), "{args:?}: printed a result");
        }
    }
}
