//! The probes record the IP TTL their answers arrived with (`reply_ttl`) and the hops
//! it suggests, on loopback: the real reflector (the host's default TTL, no router:
//! 0 hops) and reflector threads that send with a TTL of their own, which the hops
//! are worked out from by hand.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use nnb_netlat::probe::series::{self, SeriesConfig, SeriesMode};
use nnb_netlat::probe::{self, ProbeConfig, ProbeLength, ReplyTtl};
use nnb_netlat::serve::{ServeConfig, Server};
use nnb_netlat::wire::Header;

/// The probes of every kind to `target`: ping-pong (blocking and busy-polling),
/// open loop, and an RTT series; the `reply_ttl` each recorded.
fn reply_ttls(target: SocketAddr) -> Vec<(&'static str, Option<ReplyTtl>)> {
    let stop = AtomicBool::new(false);
    let probe = |busy_poll, rate_pps| ProbeConfig {
        warmup: Duration::from_millis(20),
        length: ProbeLength::Count(50),
        busy_poll,
        rate_pps,
        ..ProbeConfig::new(target)
    };
    let mut seen = Vec::new();
    for (name, cfg) in [
        ("ping-pong", probe(false, None)),
        ("busy-poll", probe(true, None)),
        ("open-loop", probe(false, Some(2000.0))),
    ] {
        let r = probe::run(&cfg, &stop, &mut |_| {}).expect("probe runs");
        assert_eq!(r.counts.answered, 50, "{name}");
        seen.push((name, r.reply_ttl));
    }
    let rtt = SeriesConfig {
        probes: 30,
        rate_hz: 1000.0,
        skip: 0,
        ..SeriesConfig::new(target, SeriesMode::Udp)
    };
    let r = series::run(&rtt, &stop, &mut |_| {}).expect("series runs");
    assert_eq!(r.lost, 0);
    seen.push(("rtt series", r.reply_ttl));
    seen
}

#[test]
fn loopback_answers_come_with_the_hosts_default_ttl_and_no_hop() {
    let server = Server::start(&ServeConfig {
        sink_port: None,
        tcp_port: None,
        ..ServeConfig::default()
    })
    .expect("start the reflector");
    let target = server.reflector_addr().expect("reflector address");
    // The reflector's pongs leave with the host's default TTL and cross no router.
    let default_ttl: u8 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_default_ttl")
        .expect("the default TTL")
        .trim()
        .parse()
        .expect("a TTL");
    for (name, ttl) in reply_ttls(target) {
        let ttl = ttl.unwrap_or_else(|| panic!("{name}: no reply TTL"));
        assert_eq!((ttl.min, ttl.max), (default_ttl, default_ttl), "{name}");
        if default_ttl == 64 {
            assert_eq!(ttl.hops, 0, "{name}");
        }
    }
    server.stop();
}

/// A reflector thread whose pong to ping `seq` leaves with IP TTL `ttl(seq)`.
fn ttl_reflector(ttl: fn(u64) -> u32, stop: Arc<AtomicBool>) -> (SocketAddr, JoinHandle<()>) {
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .expect("timeout");
    let addr = sock.local_addr().expect("addr");
    let handle = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            let Ok((n, peer)) = sock.recv_from(&mut buf) else {
                continue;
            };
            let Ok(h) = Header::decode(&buf[..n]) else {
                continue;
            };
            sock.set_ttl(ttl(h.seq)).expect("IP_TTL");
            Header::turn_into_pong(&mut buf[..n]);
            let _ = sock.send_to(&buf[..n], peer);
        }
    });
    (addr, handle)
}

#[test]
fn the_hops_are_counted_down_from_the_next_usual_initial_ttl() {
    let stop = Arc::new(AtomicBool::new(false));
    // Sent with TTL 100 over loopback, seen as 100: above 64, so from 128, 28 hops.
    let (target, t) = ttl_reflector(|_| 100, stop.clone());
    for (name, ttl) in reply_ttls(target) {
        let want = ReplyTtl {
            min: 100,
            max: 100,
            hops: 28,
        };
        assert_eq!(ttl, Some(want), "{name}");
    }
    // TTLs 63 and 64 by turns: the range is both, the hops from the largest (64: 0).
    let (target, t2) = ttl_reflector(|seq| 63 + (seq % 2) as u32, stop.clone());
    for (name, ttl) in reply_ttls(target) {
        let want = ReplyTtl {
            min: 63,
            max: 64,
            hops: 0,
        };
        assert_eq!(ttl, Some(want), "{name}");
    }
    stop.store(true, Ordering::Relaxed);
    t.join().expect("reflector thread");
    t2.join().expect("reflector thread");
}
