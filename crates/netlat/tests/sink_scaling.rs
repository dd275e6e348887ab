//! The UDP sink across cores and its own drops, over loopback, against counts the
//! test takes itself: datagrams counted on the sending side, and the kernel's drop
//! count of the sink's socket read from `/proc/net/udp` (not nnb's code path).

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nnb_netlat::load::SinkView;
use nnb_netlat::report::{decode_report, encode_request, StreamReport};
use nnb_netlat::serve::{ServeConfig, ServeSnapshot, Server};
use nnb_netlat::wire::{Header, Kind, HEADER_LEN};

/// A load datagram of `len` bytes.
fn load(stream: u32, seq: u64, len: usize) -> Vec<u8> {
    let mut d = vec![0u8; len];
    Header {
        kind: Kind::Load,
        flags: 0,
        seq,
        send_ts: 0,
        stream,
        payload_len: (len - HEADER_LEN) as u32,
    }
    .encode(&mut d);
    d
}

/// Asks the sink for `stream`'s report from `sock`.
fn report(sock: &UdpSocket, sink: SocketAddr, stream: u32) -> StreamReport {
    sock.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut buf = [0u8; 2048];
    for attempt in 0..5u64 {
        sock.send_to(&encode_request(stream, attempt, 0), sink)
            .unwrap();
        if let Ok((n, _)) = sock.recv_from(&mut buf) {
            return decode_report(&buf[..n]).unwrap().1;
        }
    }
    panic!("no report for stream {stream}");
}

/// The kernel's drop count of the UDP sockets bound to 127.0.0.1:`port`, summed:
/// the last column of their `/proc/net/udp` lines.
fn proc_drops(port: u16) -> u64 {
    let text = std::fs::read_to_string("/proc/net/udp").expect("/proc/net/udp");
    let local = format!("0100007F:{port:04X}");
    text.lines()
        .skip(1)
        .filter(|l| l.split_whitespace().nth(1) == Some(local.as_str()))
        .map(|l| {
            l.split_whitespace()
                .last()
                .and_then(|d| d.parse::<u64>().ok())
                .expect("a drops column")
        })
        .sum()
}

/// Polls snapshots until `done` holds, for at most 20 s; returns the last.
fn wait_for(server: &Server, done: impl Fn(&ServeSnapshot) -> bool) -> ServeSnapshot {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let snap = server.snapshot();
        if done(&snap) || Instant::now() > deadline {
            return snap;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A thread pinned to `cpu` that spins until the guard drops.
struct Spinner {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Spinner {
    fn on(cpu: usize) -> Spinner {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            nnb_sys::affinity::pin_current_thread(cpu).expect("pin the spinner");
            while !flag.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        Spinner {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Issue 27 item 1 (review item 38): a sink fed by more than its core takes (the
/// smallest receive buffer, its thread pinned beside a spinner, four senders
/// blasting) counts its own drops, and the count is the kernel's for its socket
/// (`/proc/net/udp`): sent = received + dropped, each stream's report carries the
/// drops of its life, and a load's view of them is the socket's count once.
#[test]
fn an_overloaded_sink_counts_its_own_drops_as_the_kernel_does() {
    let cpu = *nnb_sys::affinity::allowed_cpus()
        .expect("affinity")
        .last()
        .expect("a CPU");
    let server = Server::start(&ServeConfig {
        reflector_port: None,
        tcp_port: None,
        sink_threads: Some(1),
        sink_cpu: Some(cpu),
        // The smallest buffer the kernel grants: a few datagrams.
        recv_buffer: Some(1),
        ..ServeConfig::default()
    })
    .expect("start the sink");
    let sink = server.sink_addr().expect("sink");
    const SENDERS: u32 = 4;
    const PER_SENDER: u64 = 20_000;
    let senders: Vec<UdpSocket> = (0..SENDERS)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    // Each stream's first datagram reaches the sink before any drop, so each
    // stream's life covers every drop.
    for (stream, s) in (0u32..).zip(&senders) {
        s.send_to(&load(stream, 0, 100), sink).unwrap();
        wait_for(&server, |snap| {
            snap.sink.as_ref().unwrap().totals.streams_seen == u64::from(stream) + 1
        });
    }
    assert_eq!(proc_drops(sink.port()), 0, "no drop before the blast");
    let sent: u64 = {
        let _spinner = Spinner::on(cpu);
        let threads: Vec<_> = (0u32..)
            .zip(senders.iter().map(|s| s.try_clone().unwrap()))
            .map(|(stream, s)| {
                std::thread::spawn(move || {
                    (1..=PER_SENDER)
                        .filter(|&seq| s.send_to(&load(stream, seq, 1000), sink).is_ok())
                        .count() as u64
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).sum::<u64>() + u64::from(SENDERS)
    };
    // Everything queued is read, then what was sent is what arrived or was dropped.
    let settled = |snap: &ServeSnapshot| {
        snap.sink.as_ref().unwrap().totals.seq.received + proc_drops(sink.port()) == sent
    };
    let snap = wait_for(&server, settled);
    let kernel = proc_drops(sink.port());
    let s = snap.sink.expect("sink");
    assert!(kernel > 0, "the blast overflowed nothing: no test");
    assert_eq!(
        s.totals.seq.received + kernel,
        sent,
        "sent = received + dropped"
    );
    // Each stream asks for its report: its request carries the socket's count.
    let reports: Vec<StreamReport> = (0u32..)
        .zip(&senders)
        .map(|(stream, s)| report(s, sink, stream))
        .collect();
    for r in &reports {
        assert_eq!(r.socket_drops, Some(kernel), "{r:?}");
        assert_eq!(r.socket, Some(0));
    }
    // The load's view counts the one socket's drops once, not once per stream.
    assert_eq!(SinkView::socket_drops(&reports), Some(kernel));
    // The serve snapshot (its count as of the requests) and the host's counter.
    let snap = server.snapshot();
    assert_eq!(snap.sink.as_ref().unwrap().drops, kernel);
    assert_eq!(snap.sink.as_ref().unwrap().sockets[0].drops, kernel);
    let host = snap.host_udp_errors.expect("/proc/net/snmp");
    assert!(host.rcvbuf_errors >= kernel, "{host:?} against {kernel}");
    assert!(host.in_errors >= kernel, "{host:?} against {kernel}");
}

/// With several sockets on one port, every datagram is counted once, per stream as
/// the senders counted them, and the senders spread over more than one socket.
#[test]
fn a_sink_of_several_sockets_counts_every_stream_as_sent() {
    let server = Server::start(&ServeConfig {
        reflector_port: None,
        tcp_port: None,
        sink_threads: Some(3),
        ..ServeConfig::default()
    })
    .expect("start the sink");
    let sink = server.sink_addr().expect("sink");
    const STREAMS: u32 = 24;
    const PER_STREAM: u64 = 500;
    let senders: Vec<UdpSocket> = (0..STREAMS)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    // Stream i sends datagrams of 100 + i bytes: each stream's bytes are its own.
    let mut sent_bytes = vec![0u64; STREAMS as usize];
    for seq in 0..PER_STREAM {
        for (i, s) in (0u32..).zip(&senders) {
            let len = 100 + i as usize;
            s.send_to(&load(i, seq, len), sink).unwrap();
            sent_bytes[i as usize] += len as u64;
        }
        if seq % 50 == 49 {
            // Stay well inside the sockets' buffers on a busy machine.
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let total: u64 = sent_bytes.iter().sum();
    let snap = wait_for(&server, |s| s.sink.as_ref().unwrap().totals.bytes >= total);
    let s = snap.sink.expect("sink");
    assert_eq!(
        s.drops, 0,
        "the sink dropped: the counts below cannot add up"
    );
    assert_eq!(s.totals.bytes, total);
    assert_eq!(s.totals.seq.received, u64::from(STREAMS) * PER_STREAM);
    assert_eq!(s.totals.streams_seen, u64::from(STREAMS));
    assert_eq!(s.sockets.len(), 3);
    let per_socket: Vec<u64> = s.sockets.iter().map(|k| k.datagrams).collect();
    assert_eq!(
        per_socket.iter().sum::<u64>(),
        u64::from(STREAMS) * PER_STREAM
    );
    assert!(
        per_socket.iter().filter(|&&n| n > 0).count() >= 2,
        "one socket took every sender: {per_socket:?}"
    );
    assert!(s.sockets.iter().all(|k| k.cpu.is_some()), "{:?}", s.sockets);
    for (i, sock) in (0u32..).zip(&senders) {
        let r = report(sock, sink, i);
        assert_eq!(r.bytes, sent_bytes[i as usize], "stream {i}");
        assert_eq!(
            (r.seq.received, r.seq.lost()),
            (PER_STREAM, 0),
            "stream {i}"
        );
        assert_eq!(r.socket_drops, Some(0));
    }
}
