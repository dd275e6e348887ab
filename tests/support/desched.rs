//! A "descheduled receiver" written with plain `std::net` sockets and threads (no nnb
//! code), the ground truth of Wang & Ng's tests: a UDP forwarder in front of a
//! target that, in each period (97 ms), holds every datagram towards the target for
//! the first part of it (29 ms) and then releases them back to back, as a receiver
//! whose virtual CPU is scheduled off for 29 ms would find them queued on its
//! return. 97 ms, not 100: a period that 10 probes/s would alias with would delay
//! every probe alike.
//!
//! It counts the payload bytes it held in each hold window, so a test knows how much
//! data each release carried; it can drop every Nth datagram towards the target, so
//! the true loss is known. Replies from the target go straight back to the client
//! (the last address that sent), undelayed.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// When the forwarder holds, and what it drops.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeschedConfig {
    /// The scheduling period: one hold at the start of each.
    pub period: Duration,
    /// How long each period's hold lasts.
    pub hold: Duration,
    /// Drop datagram `i` towards the target (counted from 1) when `i % n == 0`.
    pub drop_every: Option<u64>,
}

impl Default for DeschedConfig {
    fn default() -> Self {
        DeschedConfig {
            period: Duration::from_millis(97),
            hold: Duration::from_millis(29),
            drop_every: None,
        }
    }
}

/// What the forwarder did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DeschedStats {
    /// Datagrams forwarded to the target.
    pub forwarded: u64,
    /// Datagrams dropped (`drop_every`).
    pub dropped: u64,
    /// Payload bytes held, per hold window that held any, in time order.
    pub held: Vec<u64>,
}

/// A running forwarder; stops when dropped.
pub(crate) struct Desched {
    addr: SocketAddr,
    stats: Arc<Mutex<DeschedStats>>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// The largest UDP datagram.
const MAX_DATAGRAM: usize = 65_536;

impl Desched {
    /// Starts a forwarder on 127.0.0.1 in front of `target` (an address in the same
    /// network namespace as the test).
    pub(crate) fn start(target: SocketAddr, cfg: DeschedConfig) -> Desched {
        assert!(
            cfg.hold < cfg.period,
            "the hold must be shorter than the period"
        );
        let any = if target.is_ipv4() {
            "127.0.0.1:0"
        } else {
            "[::1]:0"
        };
        let front = UdpSocket::bind(any).expect("bind the forwarder");
        let back = UdpSocket::bind(any).expect("bind the target side");
        back.connect(target).expect("connect to the target");
        for s in [&front, &back] {
            s.set_read_timeout(Some(Duration::from_millis(5)))
                .expect("set a read timeout");
        }
        let addr = front.local_addr().expect("the forwarder's address");
        let stats = Arc::new(Mutex::new(DeschedStats::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let client: Arc<Mutex<Option<SocketAddr>>> = Arc::new(Mutex::new(None));
        let epoch = Instant::now();

        let forward = {
            let (front, back) = (
                front.try_clone().expect("clone"),
                back.try_clone().expect("clone"),
            );
            let (stats, stop, client) = (stats.clone(), stop.clone(), client.clone());
            std::thread::spawn(move || {
                let mut buf = vec![0u8; MAX_DATAGRAM];
                let mut queue: Vec<Vec<u8>> = Vec::new();
                let mut queued_in: Option<u128> = None;
                let mut queued_bytes = 0u64;
                let mut seen = 0u64;
                let period = cfg.period.as_nanos();
                let hold = cfg.hold.as_nanos();
                let release = |queue: &mut Vec<Vec<u8>>, queued_bytes: &mut u64| {
                    let mut s = stats.lock().expect("stats");
                    for d in queue.drain(..) {
                        if back.send(&d).is_ok() {
                            s.forwarded += 1;
                        }
                    }
                    if *queued_bytes > 0 {
                        s.held.push(*queued_bytes);
                    }
                    *queued_bytes = 0;
                };
                while !stop.load(Ordering::Relaxed) {
                    let now = epoch.elapsed().as_nanos();
                    let window = now / period;
                    let holding = now % period < hold;
                    if queued_in.is_some_and(|w| w != window || !holding) {
                        release(&mut queue, &mut queued_bytes);
                        queued_in = None;
                    }
                    // While holding, wake at the hold's end at the latest.
                    let wait = if holding {
                        let left = hold - now % period;
                        Duration::from_nanos(left.min(1_000_000) as u64 + 1)
                    } else {
                        Duration::from_millis(5)
                    };
                    front.set_read_timeout(Some(wait)).expect("timeout");
                    let Ok((n, from)) = front.recv_from(&mut buf) else {
                        continue;
                    };
                    *client.lock().expect("client") = Some(from);
                    seen += 1;
                    if cfg.drop_every.is_some_and(|k| seen % k == 0) {
                        stats.lock().expect("stats").dropped += 1;
                        continue;
                    }
                    let now = epoch.elapsed().as_nanos();
                    if now % period < hold {
                        let w = now / period;
                        if queued_in.is_some_and(|q| q != w) {
                            release(&mut queue, &mut queued_bytes);
                        }
                        queued_in = Some(w);
                        queued_bytes += n as u64;
                        queue.push(buf[..n].to_vec());
                    } else if back.send(&buf[..n]).is_ok() {
                        stats.lock().expect("stats").forwarded += 1;
                    }
                }
                release(&mut queue, &mut queued_bytes);
            })
        };
        let reply = {
            let (stop, client) = (stop.clone(), client.clone());
            std::thread::spawn(move || {
                let mut buf = vec![0u8; MAX_DATAGRAM];
                while !stop.load(Ordering::Relaxed) {
                    let Ok(n) = back.recv(&mut buf) else {
                        continue;
                    };
                    if let Some(to) = *client.lock().expect("client") {
                        let _ = front.send_to(&buf[..n], to);
                    }
                }
            })
        };
        Desched {
            addr,
            stats,
            stop,
            threads: vec![forward, reply],
        }
    }

    /// Where the client sends.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What it did so far.
    pub(crate) fn stats(&self) -> DeschedStats {
        self.stats.lock().expect("stats").clone()
    }
}

impl Drop for Desched {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
