//! Criterion benches of the network side's hot paths: encoding and decoding the wire
//! header, recording into the latency histogram, and one loopback UDP round trip
//! through the `serve` reflector (blocking and busy-polled).
// criterion_group! below defines an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use nnb_netlat::hist::LatencyHist;
use nnb_netlat::probe::{self, ProbeConfig, ProbeLength};
use nnb_netlat::serve::{ServeConfig, Server};
use nnb_netlat::wire::{Header, Kind, HEADER_LEN};

fn header(c: &mut Criterion) {
    let h = Header {
        kind: Kind::Ping,
        flags: 0,
        seq: 42,
        send_ts: 1_234_567_890,
        stream: 7,
        payload_len: 32,
    };
    let mut buf = [0u8; 64];
    c.bench_function("header_encode", |b| {
        b.iter(|| black_box(&h).encode(black_box(&mut buf[..])))
    });
    h.encode(&mut buf);
    c.bench_function("header_decode", |b| {
        b.iter(|| Header::decode(black_box(&buf[..HEADER_LEN + 32])))
    });
}

fn histogram(c: &mut Criterion) {
    let mut h = LatencyHist::new();
    let mut v = 10_000u64;
    c.bench_function("hist_record", |b| {
        b.iter(|| {
            // A spread of values so every iteration does not hit the same bucket.
            v = v.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1) % 10_000_000 + 1;
            h.record(black_box(v));
        })
    });
}

fn round_trip(c: &mut Criterion) {
    for busy_poll in [false, true] {
        let server = match Server::start(&ServeConfig {
            sink_port: None,
            tcp_port: None,
            busy_poll,
            ..ServeConfig::default()
        }) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("cannot start the reflector, round-trip bench skipped: {e}");
                return;
            }
        };
        let Some(target) = server.reflector_addr() else {
            return;
        };
        let name = if busy_poll {
            "loopback_round_trip_busy_poll"
        } else {
            "loopback_round_trip_blocking"
        };
        let stop = AtomicBool::new(false);
        c.bench_function(name, |b| {
            b.iter_custom(|iters| {
                // One probe of `iters` pings; its elapsed time covers exactly them.
                let cfg = ProbeConfig {
                    length: ProbeLength::Count(iters),
                    warmup: Duration::ZERO,
                    busy_poll,
                    ..ProbeConfig::new(target)
                };
                match probe::run(&cfg, &stop, &mut |_| {}) {
                    Ok(r) => Duration::from_secs_f64(r.elapsed_s),
                    Err(e) => panic!("round trip failed: {e}"),
                }
            })
        });
    }
}

criterion_group!(benches, header, histogram, round_trip);
criterion_main!(benches);
