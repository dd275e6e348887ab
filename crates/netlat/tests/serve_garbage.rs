//! The deterministic counterpart of the `decode` fuzz target (fuzz/): 100 000 random
//! and mutated datagrams through the wire decoder, the reflector's classification and
//! the sink's per-datagram handling. Nothing may panic, and every count must match an
//! independent classification of the same bytes.

use std::net::SocketAddr;

use nnb_netlat::report::{decode_report, decode_series, REPORT_REQUEST_LEN};
use nnb_netlat::serve::{reflector, GarbageCounts, GarbageKind, SinkOutcome, SinkState};
use nnb_netlat::wire::{
    Header, Kind, FLAG_REPORT_REQUEST, FLAG_SERIES, HEADER_LEN, MAGIC, VERSION,
};

/// xorshift64: a small deterministic generator, so a failure is reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What a datagram is, by the header layout alone (a second opinion on `decode`).
#[derive(Debug, PartialEq, Eq)]
enum Expect {
    Garbage(GarbageKind),
    Valid { kind: u8, flags: u16 },
}

fn oracle(d: &[u8]) -> Expect {
    if d.len() < HEADER_LEN {
        return Expect::Garbage(GarbageKind::Truncated);
    }
    if d[..4] != MAGIC.to_le_bytes() {
        return Expect::Garbage(GarbageKind::BadMagic);
    }
    if d[4] != VERSION {
        return Expect::Garbage(GarbageKind::BadVersion);
    }
    if !(1..=4).contains(&d[5]) {
        return Expect::Garbage(GarbageKind::UnknownKind);
    }
    let claimed = u32::from_le_bytes([d[28], d[29], d[30], d[31]]) as usize;
    if claimed != d.len() - HEADER_LEN {
        return Expect::Garbage(GarbageKind::LengthMismatch);
    }
    Expect::Valid {
        kind: d[5],
        flags: u16::from_le_bytes([d[6], d[7]]),
    }
}

/// A valid datagram of a random kind, then (most of the time) one random mutation.
fn datagram(rng: &mut Rng) -> Vec<u8> {
    let kind =
        [Kind::Ping, Kind::Pong, Kind::Load, Kind::Load, Kind::Report][rng.below(5) as usize];
    let flags = if rng.below(20) == 0 {
        FLAG_REPORT_REQUEST
    } else {
        0
    };
    // Half the report requests padded as nnb pads them (answered), half short as a
    // forger would send them (not answered: the answer would be larger).
    let payload = if flags == FLAG_REPORT_REQUEST && rng.below(2) == 0 {
        REPORT_REQUEST_LEN - HEADER_LEN
    } else {
        rng.below(64) as usize
    };
    let mut d = vec![0u8; HEADER_LEN + payload];
    Header {
        kind,
        flags,
        seq: rng.below(300),
        send_ts: rng.next(),
        stream: rng.below(4) as u32,
        payload_len: payload as u32,
    }
    .encode(&mut d);
    for b in &mut d[HEADER_LEN..] {
        *b = rng.next() as u8;
    }
    match rng.below(8) {
        0 | 1 => {}
        2 => {
            let i = rng.below(d.len() as u64) as usize;
            d[i] ^= 1 << rng.below(8);
        }
        3 => d.truncate(rng.below(d.len() as u64) as usize),
        4 => d.extend((0..1 + rng.below(16)).map(|_| rng.next() as u8)),
        5 => {
            let i = rng.below(HEADER_LEN as u64) as usize;
            d[i] = rng.next() as u8;
        }
        6 => d = (0..rng.below(200)).map(|_| rng.next() as u8).collect(),
        _ => d[4] = rng.next() as u8,
    }
    d
}

#[test]
fn hundred_thousand_random_datagrams_are_counted_never_panic() {
    let mut rng = Rng(0x853c_49e6_748f_ea9b);
    let mut sink = SinkState::new(16);
    let mut reply = Vec::new();
    let (mut want_sink, mut want_refl) = (GarbageCounts::default(), GarbageCounts::default());
    let (mut data, mut reports, mut short, mut pings) = (0u64, 0u64, 0u64, 0u64);
    for i in 0..100_000u64 {
        let d = datagram(&mut rng);
        let expect = oracle(&d);
        match (&expect, Header::decode(&d)) {
            (Expect::Valid { kind, .. }, Ok(h)) => assert_eq!(h.kind as u8, *kind),
            (Expect::Garbage(g), Err(e)) => assert_eq!(GarbageKind::from(&e), *g),
            (e, got) => panic!("datagram {i}: oracle says {e:?}, decode says {got:?}"),
        }
        let peer = SocketAddr::from(([10, 0, 0, rng.below(8) as u8], 4000));
        let outcome = sink.handle(peer, &d, i * 100, &mut reply);
        match expect {
            Expect::Garbage(g) => {
                assert_eq!(outcome, SinkOutcome::Garbage(g));
                want_sink.add(g);
                assert_eq!(reflector::classify(&d), Err(g));
                want_refl.add(g);
            }
            Expect::Valid { kind, flags } => {
                if kind == Kind::Load as u8 && flags & FLAG_REPORT_REQUEST != 0 {
                    assert_eq!(outcome, SinkOutcome::Report);
                    // Answered only when the answer is no larger than the request.
                    if reply.is_empty() {
                        short += 1;
                    } else {
                        assert!(reply.len() <= d.len(), "{} > {}", reply.len(), d.len());
                        if flags & FLAG_SERIES != 0 {
                            // A mutated flag asks for a page of the arrival series.
                            let (h, page) = decode_series(&reply).expect("the page decodes");
                            assert_eq!(h.stream, page.stream);
                        } else {
                            let (h, r) = decode_report(&reply).expect("the answer decodes");
                            assert_eq!((h.stream, r.peer), (r.stream, peer.to_string()));
                        }
                        reports += 1;
                    }
                } else if kind == Kind::Load as u8 {
                    assert_eq!(outcome, SinkOutcome::Data);
                    data += 1;
                } else {
                    assert_eq!(outcome, SinkOutcome::Garbage(GarbageKind::WrongKind));
                    want_sink.add(GarbageKind::WrongKind);
                }
                if kind == Kind::Ping as u8 {
                    assert_eq!(reflector::classify(&d), Ok(()));
                    pings += 1;
                } else {
                    assert_eq!(reflector::classify(&d), Err(GarbageKind::WrongKind));
                    want_refl.add(GarbageKind::WrongKind);
                }
            }
        }
    }
    let snap = sink.snapshot();
    assert_eq!(snap.garbage, want_sink);
    assert_eq!(snap.totals.reports_sent, reports);
    assert_eq!(snap.totals.short_report_requests, short);
    let t = &snap.totals.seq;
    assert_eq!(t.received + t.duplicates + t.too_old, data);
    assert!(snap.streams.len() <= 16);
    assert_eq!(
        snap.totals.live_streams + snap.totals.evicted_streams,
        snap.totals.streams_seen
    );
    // Every kind of damage and every outcome occurred.
    for c in [
        want_sink.truncated,
        want_sink.bad_magic,
        want_sink.bad_version,
        want_sink.unknown_kind,
        want_sink.length_mismatch,
        want_sink.wrong_kind,
        data,
        reports,
        short,
        pings,
    ] {
        assert!(
            c > 100,
            "{want_sink:?} data {data} reports {reports} short {short} pings {pings}"
        );
    }
    assert_eq!(want_refl.total() + pings, 100_000);
}
