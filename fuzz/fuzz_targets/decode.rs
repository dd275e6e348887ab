//! Fuzzes everything a server does with a received datagram: the wire decoder (which
//! must round-trip every header it accepts), the reflector's classification, and the
//! sink's per-datagram handling, whose report answers must always decode.
//!
//! The input is cut into several datagrams (each prefixed by a length byte) so the
//! sink also sees sequences of datagrams from a few senders and streams.

#![no_main]

use std::net::SocketAddr;

use libfuzzer_sys::fuzz_target;
use nnb_netlat::report::decode_report;
use nnb_netlat::serve::{reflector, SinkOutcome, SinkState};
use nnb_netlat::wire::{Header, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    let mut sink = SinkState::new(4);
    let mut reply = Vec::new();
    let mut rest = data;
    let mut now = 0u64;
    while let Some((&len, tail)) = rest.split_first() {
        let take = (len as usize).min(tail.len());
        let (datagram, next) = tail.split_at(take);
        rest = next;
        if let Ok(h) = Header::decode(datagram) {
            let mut again = datagram.to_vec();
            h.encode(&mut again);
            assert_eq!(again, datagram, "decode/encode must round-trip");
            assert_eq!(datagram.len(), HEADER_LEN + h.payload_len as usize);
        }
        let _ = reflector::classify(datagram);
        let peer = SocketAddr::from(([127, 0, 0, 1], u16::from(len % 3)));
        now += 1000;
        if sink.handle(peer, datagram, now, &mut reply) == SinkOutcome::Report {
            decode_report(&reply).expect("a sink's report must decode");
        }
    }
    let snap = sink.snapshot();
    assert!(snap.streams.len() <= 4);
});
