//! Loopback tests of the latency probe (ping-pong and open-loop) against the real
//! `serve` reflector and against small misbehaving reflectors run in threads here.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nnb_netlat::hist::HistLog;
use nnb_netlat::probe::{self, ProbeConfig, ProbeError, ProbeLength, ProbeReport};
use nnb_netlat::serve::{ServeConfig, Server};
use nnb_netlat::wire::Header;

fn reflector() -> Server {
    let cfg = ServeConfig {
        sink_port: None,
        tcp_port: None,
        ..ServeConfig::default()
    };
    Server::start(&cfg).expect("start the reflector")
}

fn quick(target: SocketAddr) -> ProbeConfig {
    ProbeConfig {
        warmup: Duration::from_millis(50),
        length: ProbeLength::Count(500),
        ..ProbeConfig::new(target)
    }
}

fn run(cfg: &ProbeConfig) -> ProbeReport {
    let stop = AtomicBool::new(false);
    probe::run(cfg, &stop, &mut |_| {}).expect("probe runs")
}

fn assert_ordered(r: &ProbeReport) {
    let s = r.rtt;
    assert!(s.min_ns > 0, "{s:?}");
    assert!(
        s.min_ns <= s.p50_ns && s.p50_ns <= s.p90_ns && s.p90_ns <= s.p99_ns,
        "{s:?}"
    );
    assert!(
        s.p99_ns <= s.p999_ns && s.p999_ns <= s.p9999_ns && s.p9999_ns <= s.max_ns,
        "{s:?}"
    );
    assert_eq!(r.rtt_half.p50_ns, s.p50_ns / 2);
}

#[test]
fn blocking_count_mode_answers_every_ping() {
    let server = reflector();
    let target = server.reflector_addr().expect("reflector address");
    let r = run(&quick(target));
    assert_eq!(r.mode, "ping-pong");
    assert_eq!(r.counts.sent, 500);
    assert_eq!(r.counts.answered, 500);
    assert_eq!(
        (r.counts.lost, r.counts.late, r.counts.duplicates),
        (0, 0, 0)
    );
    assert_eq!(r.rtt.count, 500);
    assert!(r.warmup_pings > 0, "warm-up pings are sent and discarded");
    assert_ordered(&r);
    let reflected = server.stop().reflector.expect("reflector stats");
    assert!(
        serde_json::to_value(reflected).is_ok(),
        "reflector snapshot serializes"
    );
}

#[test]
fn busy_poll_duration_mode_with_intervals() {
    let server = reflector();
    let cfg = ProbeConfig {
        busy_poll: true,
        length: ProbeLength::Duration(Duration::from_millis(600)),
        interval: Some(Duration::from_millis(200)),
        msg_size: 256,
        ..quick(server.reflector_addr().expect("reflector address"))
    };
    let stop = AtomicBool::new(false);
    let mut seen = Vec::new();
    let r = probe::run(&cfg, &stop, &mut |iv| {
        seen.push((iv.start, iv.sent, iv.answered, iv.rtt.count()))
    })
    .expect("probe runs");
    assert!(r.busy_poll);
    assert!(r.counts.sent > 10, "{r:?}");
    assert_eq!(r.counts.answered, r.counts.sent);
    assert!(r.elapsed_s >= 0.6, "{}", r.elapsed_s);
    assert!((3..=4).contains(&seen.len()), "intervals: {seen:?}");
    let total: u64 = seen.iter().map(|s| s.1).sum();
    assert_eq!(total, r.counts.sent, "intervals add up to the whole run");
    assert!(seen.iter().all(|s| s.2 == s.3));
    assert_eq!(seen[1].0, Duration::from_millis(200));
    assert_ordered(&r);
}

/// Runs a probe that must fail because nothing answered; checks the error and
/// returns how long it took.
fn no_answer(cfg: &ProbeConfig, sent: u64) -> Duration {
    let stop = AtomicBool::new(false);
    let t = Instant::now();
    let err = probe::run(cfg, &stop, &mut |_| {}).expect_err("nothing answers");
    let took = t.elapsed();
    match &err {
        ProbeError::NoAnswer {
            target,
            sent: s,
            late,
            timeout,
        } => {
            assert_eq!(
                (*target, *s, *late, *timeout),
                (cfg.target, sent, 0, cfg.timeout)
            );
        }
        other => panic!("expected NoAnswer, got {other:?}"),
    }
    let text = err.to_string();
    assert!(text.starts_with("no answer from 127.0.0.1:"), "{text}");
    assert!(
        text.contains(&format!("none of the {sent} pings")),
        "{text}"
    );
    took
}

#[test]
fn absent_server_fails_with_no_answer_and_finishes_on_time() {
    // A bound socket that never answers: every ping times out, and a probe that
    // heard nothing is an error, not a report of zero latency.
    let silent = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let target = silent.local_addr().expect("addr");
    for busy_poll in [false, true] {
        let cfg = ProbeConfig {
            length: ProbeLength::Count(5),
            timeout: Duration::from_millis(100),
            warmup: Duration::ZERO,
            busy_poll,
            ..ProbeConfig::new(target)
        };
        let took = no_answer(&cfg, 5);
        assert!(
            took >= Duration::from_millis(500),
            "waits each timeout: {took:?}"
        );
        assert!(
            took < Duration::from_millis(1500),
            "bounded by count*timeout: {took:?}"
        );
    }
    // Open loop: 20 pings at 100/s, then one timeout for the last.
    let cfg = ProbeConfig {
        rate_pps: Some(100.0),
        length: ProbeLength::Count(20),
        timeout: Duration::from_millis(100),
        warmup: Duration::ZERO,
        ..ProbeConfig::new(target)
    };
    let took = no_answer(&cfg, 20);
    assert!(took < Duration::from_millis(1000), "{took:?}");
    // Nothing bound at all: the kernel refuses, the probe still counts and ends.
    drop(silent);
    let cfg = ProbeConfig {
        length: ProbeLength::Count(3),
        timeout: Duration::from_millis(50),
        warmup: Duration::ZERO,
        ..ProbeConfig::new(target)
    };
    let took = no_answer(&cfg, 3);
    assert!(took < Duration::from_secs(1), "{took:?}");
}

/// A reflector thread that treats ping `seq` by `behave(seq)`; stops on `stop`.
fn odd_reflector(
    behave: fn(u64) -> Behaviour,
    stop: Arc<AtomicBool>,
) -> (SocketAddr, JoinHandle<()>) {
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .expect("timeout");
    let addr = sock.local_addr().expect("addr");
    let handle = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut held: Option<(Vec<u8>, SocketAddr)> = None;
        while !stop.load(Ordering::Relaxed) {
            let Ok((n, peer)) = sock.recv_from(&mut buf) else {
                continue;
            };
            let Ok(h) = Header::decode(&buf[..n]) else {
                continue;
            };
            let mut pong = buf[..n].to_vec();
            Header::turn_into_pong(&mut pong);
            match behave(h.seq) {
                Behaviour::Answer => {
                    let _ = sock.send_to(&pong, peer);
                }
                Behaviour::Drop => {}
                Behaviour::Twice => {
                    let _ = sock.send_to(&pong, peer);
                    let _ = sock.send_to(&pong, peer);
                }
                Behaviour::GarbageFirst => {
                    let _ = sock.send_to(b"not an nnb datagram at all, surely", peer);
                    let _ = sock.send_to(&pong, peer);
                }
                Behaviour::Hold => held = Some((pong, peer)),
            }
            // A held pong is released with the next answer: it arrives after its
            // ping timed out.
            if h.seq % 10 == 5 {
                if let Some((p, to)) = held.take() {
                    let _ = sock.send_to(&p, to);
                }
            }
        }
    });
    (addr, handle)
}

#[derive(Clone, Copy)]
enum Behaviour {
    Answer,
    Drop,
    Twice,
    GarbageFirst,
    Hold,
}

#[test]
fn loss_late_duplicates_and_garbage_are_counted() {
    // Per ten pings: 2 never answered, 1 answered twice, 1 preceded by garbage,
    // 1 answered only after its timeout (released with ping x5).
    fn behave(seq: u64) -> Behaviour {
        match seq % 10 {
            1 | 7 => Behaviour::Drop,
            2 => Behaviour::Twice,
            3 => Behaviour::GarbageFirst,
            4 => Behaviour::Hold,
            _ => Behaviour::Answer,
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, handle) = odd_reflector(behave, stop.clone());
    let cfg = ProbeConfig {
        length: ProbeLength::Count(100),
        timeout: Duration::from_millis(30),
        warmup: Duration::ZERO,
        ..ProbeConfig::new(addr)
    };
    let r = run(&cfg);
    stop.store(true, Ordering::Relaxed);
    handle.join().expect("reflector thread");
    let c = r.counts;
    assert_eq!(c.sent, 100);
    assert_eq!(c.lost, 30, "{c:?}"); // 1, 4 (late), 7 of every ten
    assert_eq!(c.answered, 70, "{c:?}");
    assert_eq!(c.late, 10, "{c:?}");
    assert_eq!(c.duplicates, 10, "{c:?}");
    assert_eq!(c.garbage, 10, "{c:?}");
    assert_eq!(r.rtt.count, 70);
    assert!(
        r.rtt.max_ns < 30_000_000,
        "late pongs are no samples: {:?}",
        r.rtt
    );
}

#[test]
fn open_loop_reports_intended_and_actual_latency() {
    let server = reflector();
    let cfg = ProbeConfig {
        rate_pps: Some(2000.0),
        length: ProbeLength::Duration(Duration::from_millis(500)),
        interval: Some(Duration::from_millis(250)),
        ..quick(server.reflector_addr().expect("reflector address"))
    };
    let stop = AtomicBool::new(false);
    let mut intervals = 0;
    let r = probe::run(&cfg, &stop, &mut |iv| {
        assert!(iv.rtt_intended.is_some());
        intervals += 1;
    })
    .expect("probe runs");
    assert_eq!(r.mode, "open-loop");
    assert_eq!(r.rate_pps, Some(2000.0));
    // 1000 slots in 500 ms at 2000 pps: a sender that fell behind on a loaded
    // machine stops at the schedule's end and counts the rest unsent (996 + 4 once).
    assert_eq!(r.counts.sent + r.counts.unsent, 1000, "{:?}", r.counts);
    assert!(r.counts.sent >= 990, "{:?}", r.counts);
    assert_eq!(r.warmup_pings, 100);
    assert_eq!(r.counts.answered + r.counts.lost, r.counts.sent);
    assert!(r.counts.answered >= 980, "{:?}", r.counts);
    let intended = r.rtt_intended.expect("intended-time latency");
    assert_eq!(intended.count, r.rtt.count);
    // Every pong's intended-time latency includes its actual-time latency.
    assert!(
        intended.min_ns >= r.rtt.min_ns,
        "{intended:?} vs {:?}",
        r.rtt
    );
    assert!(
        intended.p50_ns >= r.rtt.p50_ns,
        "{intended:?} vs {:?}",
        r.rtt
    );
    assert!(
        intended.max_ns >= r.rtt.max_ns,
        "{intended:?} vs {:?}",
        r.rtt
    );
    assert!((2..=3).contains(&intervals), "{intervals}");
    assert_ordered(&r);
}

/// Reliability review M11: an open-loop schedule the sender cannot keep (20M pings/s)
/// ends when its time is over, not when every ping went out (4M pings, which would
/// take this sender tens of seconds); the pings left are counted `unsent`, not lost.
#[test]
fn open_loop_stops_at_the_end_of_its_schedule() {
    let server = reflector();
    let cfg = ProbeConfig {
        rate_pps: Some(20e6),
        warmup: Duration::ZERO,
        length: ProbeLength::Duration(Duration::from_millis(200)),
        timeout: Duration::from_millis(200),
        ..ProbeConfig::new(server.reflector_addr().expect("reflector address"))
    };
    let started = std::time::Instant::now();
    let r = run(&cfg);
    let took = started.elapsed();
    assert!(r.counts.unsent > 0, "{:?}", r.counts);
    assert_eq!(r.counts.sent + r.counts.unsent, 4_000_000, "{:?}", r.counts);
    assert_eq!(r.counts.answered + r.counts.lost, r.counts.sent);
    // 200 ms of schedule, then at most the 200 ms wait for the last pong: generous
    // bounds for a busy machine, far below what sending all 4M pings takes.
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(r.elapsed_s < 2.0, "{}", r.elapsed_s);
}

#[test]
fn bad_settings_are_explained() {
    let cfg = ProbeConfig {
        msg_size: 8,
        ..ProbeConfig::new("127.0.0.1:9".parse().expect("addr"))
    };
    let stop = AtomicBool::new(false);
    let err = probe::run(&cfg, &stop, &mut |_| {}).expect_err("too small");
    assert!(err.to_string().contains("32-byte nnb header"), "{err}");
}

#[test]
fn intervals_after_a_stall_are_emitted_empty_and_samples_land_when_they_happen() {
    // Pings 0 and 1 are answered at once, ping 2 never (a 250 ms timeout: the
    // probe stalls), pings 3 to 5 at once after it. With 100 ms intervals:
    // [0,100 ms) has pings 0-2 sent and 2 answered, [100,200 ms) saw nothing
    // (the stall), and pings 3-5 were sent and answered in [200,300 ms).
    let stop_reflector = Arc::new(AtomicBool::new(false));
    let (addr, handle) = odd_reflector(
        |seq| {
            if seq == 2 {
                Behaviour::Drop
            } else {
                Behaviour::Answer
            }
        },
        stop_reflector.clone(),
    );
    let cfg = ProbeConfig {
        length: ProbeLength::Count(6),
        timeout: Duration::from_millis(250),
        warmup: Duration::ZERO,
        interval: Some(Duration::from_millis(100)),
        ..ProbeConfig::new(addr)
    };
    let stop = AtomicBool::new(false);
    let mut seen = Vec::new();
    let r = probe::run(&cfg, &stop, &mut |iv| {
        seen.push((iv.start.as_millis(), iv.sent, iv.answered, iv.rtt.count()))
    })
    .expect("probe runs");
    stop_reflector.store(true, Ordering::Relaxed);
    handle.join().expect("reflector thread");
    assert_eq!((r.counts.sent, r.counts.answered), (6, 5), "{:?}", r.counts);
    assert_eq!(
        seen,
        [(0, 3, 2, 2), (100, 0, 0, 0), (200, 3, 3, 3)],
        "(start ms, sent, answered, samples)"
    );
}

#[test]
fn open_loop_elapsed_leaves_out_the_wait_for_a_lost_pong() {
    // 1000 pings/s for 300 ms after 50 ms of warm-up (pings 0-49); measured ping
    // 100 is never answered, so the receiver waits its 1 s timeout at the end.
    // The measuring phase is the 300 pings' schedule: 300 ms, not 1.3 s.
    let stop_reflector = Arc::new(AtomicBool::new(false));
    let (addr, handle) = odd_reflector(
        |seq| {
            if seq == 100 {
                Behaviour::Drop
            } else {
                Behaviour::Answer
            }
        },
        stop_reflector.clone(),
    );
    let cfg = ProbeConfig {
        rate_pps: Some(1000.0),
        length: ProbeLength::Duration(Duration::from_millis(300)),
        warmup: Duration::from_millis(50),
        timeout: Duration::from_secs(1),
        ..ProbeConfig::new(addr)
    };
    let r = run(&cfg);
    stop_reflector.store(true, Ordering::Relaxed);
    handle.join().expect("reflector thread");
    assert_eq!((r.counts.sent, r.counts.lost), (300, 1), "{:?}", r.counts);
    assert!(
        (r.elapsed_s - 0.3).abs() < 0.05,
        "elapsed {} s",
        r.elapsed_s
    );
}

/// `#[BaseTime: S (seconds since epoch)]` of an HDR interval log, and the
/// StartTimestamp of its first interval line tagged `tag`.
fn base_and_first_start(log: &str, tag: &str) -> (f64, f64) {
    let base = log
        .lines()
        .find_map(|l| l.strip_prefix("#[BaseTime: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no BaseTime in {log}"));
    let start = log
        .lines()
        .find_map(|l| l.strip_prefix(&format!("Tag={tag},")))
        .and_then(|l| l.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {tag} interval in {log}"));
    (base, start)
}

#[test]
fn hdr_log_base_time_is_the_start_of_measuring() {
    // The log is started before the probe, as the CLI and the agent do. Measuring
    // starts after the 300 ms warm-up (open loop: 2 ms after the call, the first
    // ping's slot, plus 300 warm-up pings at 1000/s), so BaseTime plus the first
    // interval's StartTimestamp is that moment, within 10 ms.
    let server = reflector();
    let target = server.reflector_addr().expect("reflector address");
    for (rate_pps, lead_s) in [(None, 0.300), (Some(1000.0), 0.302)] {
        let mut log = HistLog::new(Vec::new(), "test").expect("log");
        let cfg = ProbeConfig {
            rate_pps,
            warmup: Duration::from_millis(300),
            length: ProbeLength::Duration(Duration::from_millis(200)),
            interval: Some(Duration::from_millis(100)),
            ..ProbeConfig::new(target)
        };
        let stop = AtomicBool::new(false);
        let called = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        probe::run(&cfg, &stop, &mut |iv| {
            iv.write_to(&mut log, None).expect("log interval");
        })
        .expect("probe runs");
        let text = String::from_utf8(log.finish().expect("finish")).expect("utf-8");
        let (base, start) = base_and_first_start(&text, "rtt");
        let measuring = called + lead_s;
        assert!(
            (base + start - measuring).abs() < 0.010,
            "{rate_pps:?}: BaseTime {base} + {start} is {:.1} ms from the measuring start",
            (base + start - measuring) * 1e3
        );
    }
}
