use super::*;
use crate::probe::connected_socket;
use crate::serve::sink::SinkState;
use crate::wire::{Header, Kind, HEADER_LEN};

/// A load datagram of `len` bytes.
fn load(seq: u64, stream: u32, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    Header {
        kind: Kind::Load,
        flags: 0,
        seq,
        send_ts: 0,
        stream,
        payload_len: (len - HEADER_LEN) as u32,
    }
    .encode(&mut b);
    b
}

/// Feeds `sink` `bytes` payload bytes of `stream` from `peer` arriving in `bin`
/// (datagrams of at most 1000 bytes).
fn feed(sink: &mut SinkState, peer: SocketAddr, stream: u32, bin: u64, bytes: usize) {
    let mut left = bytes;
    let mut reply = Vec::new();
    let mut seq = bin * 10_000;
    while left > 0 {
        let len = left.clamp(HEADER_LEN, 1000);
        sink.handle(peer, &load(seq, stream, len), bin * BIN_NS + 1, &mut reply);
        left = left.saturating_sub(len);
        seq += 1;
    }
}

/// The window of a running load is read from the sink's arrival series through the
/// load's own sockets (GSO set on them, as a sending load's are), and its recorded
/// rate is the mean of the latest `window` whole intervals, counted back from the
/// last whole bin, of the streams' bins added up: checked against the mean worked
/// out by hand from bytes fed to a sink bin by bin.
#[test]
fn a_running_loads_window_is_the_mean_of_the_latest_intervals_of_its_series() {
    let server = UdpSocket::bind("127.0.0.1:0").expect("bind the sink");
    let sink_addr = server.local_addr().expect("sink address");
    let tap = LoadTap::new(sink_addr, 2);
    let socks: Vec<UdpSocket> = (0..2)
        .map(|_| connected_socket(sink_addr).expect("a load socket"))
        .collect();
    let mut sink = SinkState::new(16);
    for (s, sock) in socks.iter().enumerate() {
        // A sending load's segment size: a request longer than it still goes whole.
        if let Err(e) = nnb_sys::socket::set_udp_segment(sock, 100) {
            eprintln!("no UDP GSO here ({e}): the request goes as a plain datagram");
        }
        let local = sock.local_addr().expect("local address");
        tap.attach(s as u32, &local.to_string(), sock);
        // Bins 8..=41 of the sink's clock, 500 ms intervals (5 bins), window 3.
        // Stream 0: 1000 bytes a bin, and 1 MB in bin 8 (the first, partial) and
        // bin 41 (the last, in progress): both left out. Stream 1: 200 bytes a bin
        // in bins 26..=30, 400 in 31..=35, 600 in 36..=41.
        for bin in 8..=41u64 {
            let bytes = match (s, bin) {
                (0, 8 | 41) => 1_000_000,
                (0, _) => 1000,
                (_, 26..=30) => 200,
                (_, 31..=35) => 400,
                (_, 36..=41) => 600,
                _ => 0,
            };
            if bytes > 0 {
                feed(&mut sink, local, s as u32, bin, bytes);
            }
        }
    }
    // The sink answers series requests from what it was fed.
    let done = Arc::new(AtomicBool::new(false));
    let answering = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            server
                .set_read_timeout(Some(Duration::from_millis(20)))
                .expect("timeout");
            let mut buf = vec![0u8; 65_536];
            let mut reply = Vec::new();
            while !done.load(Ordering::Relaxed) {
                if let Ok((len, peer)) = server.recv_from(&mut buf) {
                    sink.handle(peer, &buf[..len], 0, &mut reply);
                    if !reply.is_empty() {
                        server.send_to(&reply, peer).expect("answer");
                    }
                }
            }
        })
    };
    tap.sent(10, 5_000);
    // A raised stop skips the wait: the series is read at once.
    let r = read_window(
        &tap,
        Duration::from_millis(500),
        3,
        Duration::from_millis(500),
        &AtomicBool::new(true),
    )
    .expect("a window");
    done.store(true, Ordering::Relaxed);
    answering.join().expect("the sink thread");
    // Whole bins 9..=40 (32, not a whole number of intervals: counted back from the
    // last, not on from the first); the latest three intervals are 26..=30, 31..=35, 36..=40:
    // 5 x (1000 + 200) = 6000 bytes in 0.5 s = 96 kbit/s, 5 x 1400 = 7000 bytes =
    // 112 kbit/s, 5 x 1600 = 8000 bytes = 128 kbit/s; mean 112 kbit/s.
    assert_eq!(
        r.samples.received_bps,
        Some(vec![96_000.0, 112_000.0, 128_000.0])
    );
    assert_eq!(r.samples.received_window_bps, Some(112_000.0));
    assert_eq!(
        r.sink,
        Some(WindowSink {
            streams_reported: 2,
            rate_bps: 112_000.0
        })
    );
    assert_eq!(r.streams.len(), 2);
    // Only the latest bins are read: the 1.7 s the window waits and a bin each side,
    // 19 of stream 0's 34 (bins 23..=41); all 16 of stream 1's.
    assert_eq!(r.streams[0].bins, Some(19));
    assert_eq!(r.streams[1].bins, Some(16));
    assert_eq!(r.load.locals.len(), 2);
    assert_eq!((r.sent.datagrams, r.sent.bytes), (0, 0));
    // The results format's shape of a sampled load: `sent`, `sink`, `streams`,
    // `samples.received_window_bps`.
    let json = serde_json::to_value(&r).expect("json");
    assert_eq!(json["samples"]["received_window_bps"], 112_000.0);
    assert_eq!(json["sink"]["streams_reported"], 2);
    assert!(json["sent"]["payload_bps"].is_number());
}

/// A stream the load did not lend (or that stopped) leaves the window without a
/// received rate: a partial sum would undercount.
#[test]
fn a_window_missing_a_stream_has_no_received_rate() {
    let tap = LoadTap::new("127.0.0.1:9".parse().expect("addr"), 2);
    let page = SeriesPage {
        stream: 0,
        bin_ns: BIN_NS,
        first_bin: 0,
        total: 5,
        offset: 0,
        bytes: vec![1, 2, 3, 4, 5],
    };
    let r = window_report(
        &tap,
        Duration::from_millis(100),
        2,
        (1_000_000_000, 10, 1000),
        vec![(0, "a".into(), Some(vec![page]))],
    );
    assert_eq!(r.samples.received_window_bps, None);
    assert_eq!(r.sink.map(|s| s.streams_reported), Some(1));
    assert_eq!(r.streams.len(), 2);
    assert_eq!(r.streams[1].bins, None);
    assert_eq!(r.sent.payload_bps, 8000.0);
}

#[test]
fn a_window_fits_the_series_the_sink_keeps() {
    let s = Duration::from_secs;
    // The thesis' 20 one-second samples: 20 s and two bins.
    assert_eq!(window_span(s(1), 20), Ok(Duration::from_millis(20_200)));
    for (interval, window, why) in [
        (Duration::from_millis(250), 4, "multiple of the sink's"),
        (s(1), 0, "at least one"),
        (s(1), 120, "at most"),
    ] {
        let e = window_span(interval, window).expect_err(why);
        assert!(e.contains(why), "{e}");
    }
}

#[test]
fn only_one_running_load_is_read() {
    let taps = LoadTaps::default();
    assert!(taps.only_running().unwrap_err().contains("no UDP load"));
    let a = LoadTap::new("127.0.0.1:9".parse().expect("addr"), 1);
    taps.register(&a);
    assert!(Arc::ptr_eq(&taps.only_running().expect("one"), &a));
    let b = LoadTap::new("127.0.0.1:9".parse().expect("addr"), 1);
    taps.register(&b);
    assert!(taps.only_running().unwrap_err().contains("2 UDP loads"));
    // A load that ended drops its tap.
    drop(a);
    assert!(Arc::ptr_eq(&taps.only_running().expect("one"), &b));
}
