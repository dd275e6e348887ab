//! Loopback tests of `serve`: the reflector, the UDP sink with report requests, the
//! TCP sink, many clients at once, and a garbage flood, all over real sockets.

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use nnb_netlat::report::{
    decode_fine, decode_report, encode_fine_request, encode_request, StreamReport,
};
use nnb_netlat::serve::tcp_sink::TcpAnswer;
use nnb_netlat::serve::{GarbageCounts, ServeConfig, ServeSnapshot, Server, TcpReport};
use nnb_netlat::wire::{Header, Kind, HEADER_LEN, MAGIC, VERSION};

fn client() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s
}

fn datagram(kind: Kind, seq: u64, send_ts: u64, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; HEADER_LEN + payload.len()];
    Header {
        kind,
        flags: 0,
        seq,
        send_ts,
        stream,
        payload_len: payload.len() as u32,
    }
    .encode(&mut b);
    b[HEADER_LEN..].copy_from_slice(payload);
    b
}

/// Sends one ping and returns the decoded pong and its payload.
fn ping(sock: &UdpSocket, to: SocketAddr, seq: u64, stream: u32) -> (Header, Vec<u8>) {
    let payload: Vec<u8> = (0..40u8).map(|i| i ^ seq as u8).collect();
    sock.send_to(
        &datagram(Kind::Ping, seq, seq * 7 + 1, stream, &payload),
        to,
    )
    .unwrap();
    let mut buf = [0u8; 2048];
    let (n, from) = sock.recv_from(&mut buf).expect("no pong within 2 s");
    assert_eq!(from, to);
    let h = Header::decode(&buf[..n]).unwrap();
    assert_eq!(&buf[HEADER_LEN..n], &payload[..]);
    (h, buf[HEADER_LEN..n].to_vec())
}

/// Asks the sink for its report on `stream`, retrying like a load generator does.
fn request_report(sock: &UdpSocket, sink: SocketAddr, stream: u32) -> StreamReport {
    let mut buf = [0u8; 2048];
    for attempt in 0..3u64 {
        let req = encode_request(stream, attempt, 0);
        sock.send_to(&req, sink).unwrap();
        if let Ok((len, _)) = sock.recv_from(&mut buf) {
            let (h, report) = decode_report(&buf[..len]).unwrap();
            assert_eq!(h.stream, stream);
            return report;
        }
    }
    panic!("the sink never answered a report request");
}

/// Polls snapshots until `done` holds, for at most 5 s; returns the last snapshot.
fn wait_for(server: &Server, done: impl Fn(&ServeSnapshot) -> bool) -> ServeSnapshot {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let snap = server.snapshot();
        if done(&snap) || Instant::now() > deadline {
            return snap;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn reflector_echoes_seq_timestamp_stream_and_payload() {
    let server = Server::start(&ServeConfig::default()).unwrap();
    let to = server.reflector_addr().unwrap();
    let sock = client();
    for seq in 0..100 {
        let (h, _) = ping(&sock, to, seq, 42);
        assert_eq!(h.kind, Kind::Pong);
        assert_eq!((h.seq, h.send_ts, h.stream), (seq, seq * 7 + 1, 42));
    }
    let snap = server.stop();
    assert_eq!(snap.reflector.unwrap().reflected, 100);
}

#[test]
fn busy_poll_reflector_answers() {
    let cfg = ServeConfig {
        busy_poll: true,
        sink_port: None,
        tcp_port: None,
        ..ServeConfig::default()
    };
    let server = Server::start(&cfg).unwrap();
    assert!(server.sink_addr().is_none() && server.tcp_addr().is_none());
    let sock = client();
    for seq in 0..50 {
        assert_eq!(
            ping(&sock, server.reflector_addr().unwrap(), seq, 1).0.seq,
            seq
        );
    }
}

#[test]
fn sink_counts_loss_duplicates_and_reordering_per_stream() {
    let server = Server::start(&ServeConfig::default()).unwrap();
    let sink = server.sink_addr().unwrap();
    let sock = client();
    let payload = [0u8; 100];
    // Stream 1: 0 1 3 2 2 5 7 7 6 -> received 7, lost 1 (4), dups 2, reordered 2.
    for seq in [0u64, 1, 3, 2, 2, 5, 7, 7, 6] {
        sock.send_to(&datagram(Kind::Load, seq, seq, 1, &payload), sink)
            .unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    // Stream 2 on the same socket: 0..10 in order.
    for seq in 0..10u64 {
        sock.send_to(&datagram(Kind::Load, seq, seq, 2, &payload), sink)
            .unwrap();
    }
    let r1 = request_report(&sock, sink, 1);
    assert_eq!(r1.peer, sock.local_addr().unwrap().to_string());
    assert_eq!(r1.seq.expected, 8);
    assert_eq!(r1.seq.received, 7);
    assert_eq!(r1.seq.lost(), 1);
    assert_eq!(r1.seq.duplicates, 2);
    assert_eq!(r1.seq.reordered, 2);
    assert_eq!(r1.bytes, 9 * (HEADER_LEN as u64 + 100));
    assert!(r1.last_arrival_ns > r1.first_arrival_ns);
    assert!(r1.rate_bps > 0.0);
    let r2 = request_report(&sock, sink, 2);
    assert_eq!(
        (r2.seq.received, r2.seq.lost(), r2.seq.reordered),
        (10, 0, 0)
    );
    // A stream the sink never saw gets an empty report, not silence.
    let r3 = request_report(&sock, sink, 3);
    assert_eq!((r3.seq.received, r3.bytes), (0, 0));
    let snap = server.stop();
    let sink = snap.sink.unwrap();
    assert_eq!(sink.streams.len(), 2);
    assert_eq!(sink.totals.seq.received, 17);
    assert!(sink.totals.reports_sent >= 3);
    assert_eq!(sink.garbage.total(), 0);
}

/// The sink records where each 16 KiB of a stream arrived and cuts them into the
/// grain a fine request asks for, after the data (it needs no grain in advance).
#[test]
fn sink_answers_the_grain_ends_a_fine_request_asks_for() {
    let server = Server::start(&ServeConfig::default()).unwrap();
    let sink = server.sink_addr().unwrap();
    let sock = client();
    // 256 datagrams of 1024 bytes: 256 KiB, ends 0..=16 of 16 KiB grains.
    for seq in 0..256u64 {
        sock.send_to(
            &datagram(Kind::Load, seq, 0, 6, &[0; 1024 - HEADER_LEN]),
            sink,
        )
        .unwrap();
    }
    assert_eq!(request_report(&sock, sink, 6).bytes, 256 * 1024);
    let mut buf = [0u8; 2048];
    let mut fine = |grain: u64| {
        sock.send_to(&encode_fine_request(6, 0, grain, 0), sink)
            .unwrap();
        let (len, _) = sock.recv_from(&mut buf).expect("no fine answer within 2 s");
        decode_fine(&buf[..len]).unwrap().1
    };
    let page = fine(16 * 1024);
    assert_eq!((page.grain, page.first_end, page.total), (16 * 1024, 0, 17));
    assert_eq!(page.t_ns.len(), 17);
    assert_eq!(page.t_ns[0], 0);
    let page = fine(256 * 1024);
    assert_eq!((page.total, page.t_ns.len()), (2, 2));
    // Not a whole number of checkpoints: refused, grain 0.
    assert_eq!(fine(100_000).grain, 0);
}

#[test]
fn sink_counts_every_segment_of_a_gso_send() {
    let server = Server::start(&ServeConfig::default()).unwrap();
    let sink = server.sink_addr().unwrap();
    let sock = client();
    // Nine 100-byte datagrams and a 60-byte one in one send (UDP_SEGMENT).
    let mut buf = Vec::new();
    for seq in 0..10u64 {
        let len = if seq == 9 { 60 } else { 100 };
        buf.extend(datagram(
            Kind::Load,
            seq,
            seq,
            3,
            &vec![0; len - HEADER_LEN],
        ));
    }
    if nnb_sys::socket::set_udp_segment(&sock, 100).is_err() {
        eprintln!("skipping: this kernel has no UDP_SEGMENT");
        return;
    }
    sock.send_to(&buf, sink).unwrap();
    // 0 turns segmentation off for the report request.
    nnb_sys::socket::set_udp_segment(&sock, 0).expect("GSO off");
    let r = request_report(&sock, sink, 3);
    assert_eq!((r.seq.received, r.seq.lost(), r.bytes), (10, 0, 960));
    assert_eq!(server.stop().garbage().total(), 0);
}

#[test]
fn many_clients_at_once() {
    let server = Server::start(&ServeConfig::default()).unwrap();
    let (refl, sink) = (
        server.reflector_addr().unwrap(),
        server.sink_addr().unwrap(),
    );
    let threads: Vec<_> = (0..16u32)
        .map(|c| {
            std::thread::spawn(move || {
                let sock = client();
                for seq in 0..200 {
                    let (h, _) = ping(&sock, refl, seq, c);
                    assert_eq!((h.seq, h.stream), (seq, c));
                    sock.send_to(&datagram(Kind::Load, seq, seq, c, &[1; 64]), sink)
                        .unwrap();
                }
                request_report(&sock, sink, c)
            })
        })
        .collect();
    for t in threads {
        let r = t.join().unwrap();
        assert_eq!((r.seq.received, r.seq.lost()), (200, 0), "{r:?}");
    }
    let snap = server.stop();
    assert_eq!(snap.reflector.unwrap().reflected, 16 * 200);
    let sink = snap.sink.unwrap();
    assert_eq!(sink.totals.streams_seen, 16);
    assert_eq!(sink.totals.seq.received, 16 * 200);
}

/// Deterministic garbage: `n` datagrams of every kind a service must drop, built
/// from a small xorshift generator. Returns them with the counts they should cause.
fn garbage_set(n: usize, seed: u64, wrong_kind: Kind) -> (Vec<Vec<u8>>, GarbageCounts) {
    let mut x = seed;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = Vec::new();
    let mut want = GarbageCounts::default();
    for i in 0..n {
        let valid = datagram(Kind::Ping, i as u64, 0, 0, &[7; 24]);
        // Truncated header (0..32 bytes).
        out.push(valid[..(next() % HEADER_LEN as u64) as usize].to_vec());
        want.truncated += 1;
        // Random bytes with a foreign magic.
        let mut r: Vec<u8> = (0..(HEADER_LEN + (next() % 200) as usize))
            .map(|_| next() as u8)
            .collect();
        if r[..4] == MAGIC.to_le_bytes() {
            r[0] ^= 0xff;
        }
        out.push(r);
        want.bad_magic += 1;
        // Wrong version.
        let mut v = valid.clone();
        v[4] = VERSION.wrapping_add(1 + (next() % 250) as u8);
        out.push(v);
        want.bad_version += 1;
        // Unknown kind.
        let mut k = valid.clone();
        k[5] = 5 + (next() % 250) as u8;
        out.push(k);
        want.unknown_kind += 1;
        // Payload length lying.
        let mut l = valid.clone();
        l[28] ^= 1 + (next() % 200) as u8;
        out.push(l);
        want.length_mismatch += 1;
        // A valid header of a kind this service does not take.
        out.push(datagram(wrong_kind, i as u64, 0, 0, &[]));
        want.wrong_kind += 1;
    }
    (out, want)
}

#[test]
fn garbage_flood_is_counted_and_serving_goes_on() {
    let server = Server::start(&ServeConfig::default()).unwrap();
    let (refl, sink) = (
        server.reflector_addr().unwrap(),
        server.sink_addr().unwrap(),
    );
    let sock = client();
    let (to_refl, want_refl) = garbage_set(2000, 0x9e37_79b9_7f4a_7c15, Kind::Pong);
    let (to_sink, want_sink) = garbage_set(2000, 0x2545_f491_4f6c_dd1d, Kind::Ping);
    // Flood in chunks, each sent as fast as the socket takes it, then wait until the
    // server has counted the chunk: no queue can overflow (even with a small
    // net.core.rmem_max), so the counts must be exact.
    let chunks = to_refl.chunks(64).zip(to_sink.chunks(64));
    let mut sent = 0u64;
    for (a, b) in chunks {
        for (x, y) in a.iter().zip(b) {
            sock.send_to(x, refl).unwrap();
            sock.send_to(y, sink).unwrap();
        }
        sent += a.len() as u64;
        wait_for(&server, |s| {
            s.reflector.unwrap().garbage.total() >= sent
                && s.sink.as_ref().unwrap().garbage.total() >= sent
        });
    }
    let snap = server.snapshot();
    assert_eq!(snap.reflector.unwrap().garbage, want_refl);
    assert_eq!(snap.sink.as_ref().unwrap().garbage, want_sink);
    // Garbage from an unknown sender creates no stream.
    assert_eq!(snap.sink.as_ref().unwrap().totals.streams_seen, 0);
    // Still serving: a valid ping is answered, load is counted.
    assert_eq!(ping(&sock, refl, 5, 5).0.kind, Kind::Pong);
    sock.send_to(&datagram(Kind::Load, 0, 0, 9, &[0; 10]), sink)
        .unwrap();
    let r = request_report(&sock, sink, 9);
    assert_eq!(r.seq.received, 1);
    let mut total = want_refl;
    total.merge(&want_sink);
    assert_eq!(server.stop().garbage(), total);
}

#[test]
fn garbage_from_a_known_sender_is_attributed_to_its_streams() {
    let server = Server::start(&ServeConfig::default()).unwrap();
    let sink = server.sink_addr().unwrap();
    let sock = client();
    sock.send_to(&datagram(Kind::Load, 0, 0, 4, &[0; 10]), sink)
        .unwrap();
    let before = request_report(&sock, sink, 4);
    assert_eq!(before.garbage, 0);
    for _ in 0..3 {
        sock.send_to(b"not nnb", sink).unwrap();
    }
    let snap = wait_for(&server, |s| s.sink.as_ref().unwrap().garbage.total() == 3);
    assert_eq!(snap.sink.unwrap().streams[0].garbage, 3);
    assert_eq!(request_report(&sock, sink, 4).garbage, 3);
}

#[test]
fn tcp_sink_answers_its_view_after_half_close() {
    let server = Server::start(&ServeConfig::default()).unwrap();
    let tcp = server.tcp_addr().unwrap();
    let clients: Vec<_> = (0..4u64)
        .map(|c| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(tcp).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let chunk = vec![0xabu8; 64 * 1024];
                let total = (c + 1) * 16 * chunk.len() as u64;
                for _ in 0..(c + 1) * 16 {
                    s.write_all(&chunk).unwrap();
                }
                s.shutdown(Shutdown::Write).unwrap();
                let mut line = String::new();
                BufReader::new(&s).read_line(&mut line).unwrap();
                let answer: TcpAnswer = serde_json::from_str(line.trim()).unwrap();
                let report = answer.report;
                assert_eq!(report.bytes, total);
                // Arrival checkpoints: one per 16 KiB received, and checkpoint 0.
                let checkpoints = answer.checkpoints.expect("the sink's checkpoints");
                assert_eq!(checkpoints.grain, 16 * 1024);
                assert_eq!(checkpoints.t_ns.len() as u64, total / (16 * 1024) + 1);
                assert_eq!(report.peer, s.local_addr().unwrap().to_string());
                assert!(report.duration_ns > 0 && report.rate_bps > 0.0);
                total
            })
        })
        .collect();
    let sent: u64 = clients.into_iter().map(|t| t.join().unwrap()).sum();
    let snap = wait_for(&server, |s| s.tcp.as_ref().unwrap().active == 0);
    let tcp = snap.tcp.unwrap();
    assert_eq!((tcp.accepted, tcp.refused, tcp.bytes), (4, 0, sent));
    assert_eq!(tcp.recent.len(), 4);
}

/// The TCP sink times its rate from the first read to the last, and the first read's
/// bytes arrived before that window opened: with 10 chunks written 40 ms apart, the
/// rate is 9 chunks over the time from the first write to the last (the client's
/// clock, not nnb's), not 10 chunks over it (which overstates it by 11%).
/// No amplification (reliability review M8): whatever report requests arrive, for
/// streams the sink knows or not, padded or short (as a forger would send them),
/// the sink sends back at most as many bytes as it received, and a short request gets
/// no answer at all.
#[test]
fn sink_never_answers_with_more_bytes_than_it_got() {
    let server = Server::start(&ServeConfig::default()).unwrap();
    let sink = server.sink_addr().unwrap();
    let sock = client();
    sock.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    // One known stream, with data.
    for seq in 0..5u64 {
        sock.send_to(&datagram(Kind::Load, seq, seq, 1, &[0u8; 100]), sink)
            .unwrap();
    }
    let (mut sent, mut received, mut answers) = (0usize, 0usize, 0usize);
    let mut buf = [0u8; 2048];
    for (i, stream) in [1u32, 2, 1, 3].into_iter().enumerate() {
        let padded = encode_request(stream, i as u64, 0);
        // A forger's request: the bare 32-byte header with the request flag.
        let mut short = datagram(Kind::Load, i as u64, 0, stream, &[]);
        short[..HEADER_LEN].copy_from_slice(&padded[..HEADER_LEN]);
        short[28..32].copy_from_slice(&0u32.to_le_bytes());
        for req in [&padded[..], &short[..]] {
            sock.send_to(req, sink).unwrap();
            sent += req.len();
            if let Ok((n, _)) = sock.recv_from(&mut buf) {
                assert!(
                    n <= req.len(),
                    "{n}-byte answer to a {}-byte request",
                    req.len()
                );
                received += n;
                answers += 1;
            }
        }
    }
    assert_eq!(
        answers, 4,
        "one answer per padded request, none to short ones"
    );
    assert!(received <= sent, "{received} bytes back for {sent}");
    let totals = server.snapshot().sink.unwrap().totals;
    assert_eq!((totals.reports_sent, totals.short_report_requests), (4, 4));
}

#[test]
fn tcp_sink_rate_leaves_out_the_first_read() {
    const CHUNK: usize = 32 * 1024;
    const CHUNKS: u32 = 10;
    let server = Server::start(&ServeConfig::default()).unwrap();
    let mut s = TcpStream::connect(server.tcp_addr().unwrap()).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let chunk = vec![0x5au8; CHUNK];
    let mut first = None;
    let mut last = std::time::Instant::now();
    for i in 0..CHUNKS {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(40));
        }
        s.write_all(&chunk).unwrap();
        last = std::time::Instant::now();
        first.get_or_insert(last);
    }
    let span = last.duration_since(first.unwrap()).as_secs_f64();
    s.shutdown(Shutdown::Write).unwrap();
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).unwrap();
    let report: TcpReport = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(report.bytes, u64::from(CHUNKS) * CHUNK as u64);
    let expected = f64::from(CHUNKS - 1) * CHUNK as f64 * 8.0 / span;
    assert!(
        (report.rate_bps / expected - 1.0).abs() < 0.05,
        "sink {:.0} bit/s over {} ns, expected {expected:.0} bit/s over {span:.4} s",
        report.rate_bps,
        report.duration_ns
    );
}

#[test]
fn tcp_sink_refuses_beyond_its_bound() {
    let cfg = ServeConfig {
        max_tcp_connections: 1,
        ..ServeConfig::default()
    };
    let server = Server::start(&cfg).unwrap();
    let tcp = server.tcp_addr().unwrap();
    let held = TcpStream::connect(tcp).unwrap();
    wait_for(&server, |s| s.tcp.as_ref().unwrap().active == 1);
    let extra = TcpStream::connect(tcp).unwrap();
    let snap = wait_for(&server, |s| s.tcp.as_ref().unwrap().refused == 1);
    assert_eq!(snap.tcp.unwrap().refused, 1);
    drop((held, extra));
}

/// Reliability review L14: idle connections cannot hold the TCP sink's slots: one
/// that sends nothing for the idle timeout is closed (the client reads the end), and
/// the slot serves a new client, which still gets its report.
#[test]
fn tcp_sink_closes_idle_connections() {
    let cfg = ServeConfig {
        max_tcp_connections: 2,
        tcp_idle_timeout: Duration::from_millis(300),
        ..ServeConfig::default()
    };
    let server = Server::start(&cfg).unwrap();
    let tcp = server.tcp_addr().unwrap();
    let idle: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(tcp).unwrap()).collect();
    wait_for(&server, |s| s.tcp.as_ref().unwrap().active == 2);
    let snap = wait_for(&server, |s| s.tcp.as_ref().unwrap().idle_closed == 2);
    assert_eq!(snap.tcp.unwrap().active, 0);
    for mut c in idle {
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut b = [0u8; 16];
        // The sink closed it: end of stream (or a reset), never a wait.
        assert!(matches!(
            std::io::Read::read(&mut c, &mut b),
            Ok(0) | Err(_)
        ));
    }
    let mut s = TcpStream::connect(tcp).unwrap();
    s.write_all(&[7u8; 1000]).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).unwrap();
    let report: TcpReport = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(report.bytes, 1000);
}

#[test]
fn stop_releases_the_ports() {
    let server = Server::start(&ServeConfig::default()).unwrap();
    let (r, s, t) = (
        server.reflector_addr().unwrap(),
        server.sink_addr().unwrap(),
        server.tcp_addr().unwrap(),
    );
    server.stop();
    let again = Server::start(&ServeConfig {
        reflector_port: Some(r.port()),
        sink_port: Some(s.port()),
        tcp_port: Some(t.port()),
        ..ServeConfig::default()
    })
    .unwrap();
    assert_eq!(again.reflector_addr(), Some(r));
    // The same port twice is a bind error naming the service.
    let err = Server::start(&ServeConfig {
        reflector_port: Some(r.port()),
        ..ServeConfig::default()
    })
    .unwrap_err();
    assert!(err.to_string().contains("reflector"), "{err}");
}
