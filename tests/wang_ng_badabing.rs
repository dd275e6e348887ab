//! Wang & Ng (seed 003): ground truth for the badabing instrument (issue 25).
//!
//! `nnb badabing` probes an `nnb serve` reflector through the descheduled-receiver
//! forwarder (tests/support/desched.rs, no nnb code): in each 97 ms it holds every
//! packet towards the reflector for the first 29 ms, and it drops every 1,000th
//! packet, so the truth is known. Held packets reach the reflector late by what is
//! left of the hold (0 to 29 ms) and their answers come straight back, so a
//! packet's one-way delay is its hold while its RTT/2 is half of it.
//!
//! The seed's finding (§VI, Figs 10 and 11) must come out: the probe loss rate is the
//! true one, while the loss frequency is far above it, because the held packets'
//! one-way delays exceed max_owd × (1 − α) once a loss has set max_owd, in slots
//! where nothing was lost.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::support::cli::{json, nnb};
use crate::support::desched::{Desched, DeschedConfig};
use crate::support::exclusive::hold_machine;
use crate::support::netns::spawn_reflector;

const MS: u64 = 1_000_000;

fn u64_of(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("no integer `{k}` in the result"))
}

fn f64_of(v: &Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("no number `{k}` in the result"))
}

/// One probed slot of the result's series.
#[derive(Debug, Clone, Copy)]
struct Slot {
    slot: u64,
    owd: Option<u64>,
    max_owd: Option<u64>,
    lost: u64,
    lossy: bool,
}

fn series(v: &Value) -> Vec<Slot> {
    v["series"]
        .as_array()
        .expect("a series")
        .iter()
        .map(|s| Slot {
            slot: u64_of(s, "slot"),
            owd: s["owd_ns"].as_u64(),
            max_owd: s["max_owd_ns"].as_u64(),
            lost: u64_of(s, "lost"),
            lossy: s["lossy"].as_bool().expect("lossy"),
        })
        .collect()
}

#[test]
fn badabing_through_a_descheduled_receiver_reports_the_seeds_false_loss() {
    let _machine = hold_machine();
    let (_serve, refl) = spawn_reflector("120s");
    let fwd = Desched::start(
        refl,
        DeschedConfig {
            drop_every: Some(1000),
            ..DeschedConfig::default()
        },
    );
    let target = fwd.addr().to_string();
    // The seed's slots, packets, τ and α; every slot probed (probability 1) so that
    // 5 s carry 3,000 packets and so 3 drops: the probability only thins the probed
    // slots, and the rules are per probed slot.
    let r = json(&[
        "badabing",
        &target,
        "--duration",
        "5s",
        "--probability",
        "1",
        "--seed",
        "25",
        "--json",
    ]);
    let truth = fwd.stats();
    let s = series(&r);
    assert_eq!(r["owd_relative"], Value::Bool(true));
    assert_eq!(u64_of(&r, "seed"), 25);
    assert_eq!(
        (u64_of(&r, "slot_ns"), u64_of(&r, "tau_ns")),
        (5 * MS, 50 * MS)
    );

    // The probe loss rate is the truth. 1,000 slots of 5 ms, one probe of 3 packets
    // each: 3,000 packets, of which the forwarder drops the 1,000th, 2,000th and
    // 3,000th. They are 1,000 packets apart, so each is in a probe of its own: 3 lost
    // probes of 1,000, 0.3% (the 0.1% packet loss times 3 packets per probe).
    let (probes, packets) = (u64_of(&r, "probes"), u64_of(&r, "packets_sent"));
    assert_eq!(probes, 1000, "every slot probed");
    assert_eq!(packets, 3 * probes);
    assert_eq!(truth.dropped, packets / 1000, "{truth:?}");
    assert_eq!(u64_of(&r, "packets_lost"), truth.dropped, "no other loss");
    assert_eq!(u64_of(&r, "lost_probes"), truth.dropped);
    let probe_loss = f64_of(&r, "probe_loss_rate");
    let expected = truth.dropped as f64 / probes as f64;
    assert!((probe_loss - expected).abs() < 1e-12 && (0.0029..=0.0031).contains(&expected));

    // The one-way delays are the holds, not RTT/2: a packet sent as a hold starts
    // waits all of its 29 ms (RTT/2 would be 14.5 ms), and about 28 of every 97 ms
    // send into a hold that still has more than 1 ms to run.
    let owds: Vec<u64> = s.iter().filter_map(|x| x.owd).collect();
    let held: Vec<u64> = owds.iter().copied().filter(|&d| d >= MS).collect();
    let max = owds.iter().copied().max().unwrap_or(0);
    assert!((20 * MS..=40 * MS).contains(&max), "largest OWD {max} ns");
    let held_share = held.len() as f64 / owds.len() as f64;
    assert!((0.2..=0.4).contains(&held_share), "held share {held_share}");
    let held_mean = held.iter().sum::<u64>() as f64 / held.len() as f64 / 1e6;
    assert!(
        (10.0..=20.0).contains(&held_mean),
        "mean held OWD {held_mean} ms"
    );

    // The max_owd trace: none before the first loss; then it changes only at a
    // slot that lost a packet, to a delay the run saw.
    let first_loss = s.iter().position(|x| x.lost > 0).expect("a loss");
    assert!(s[..first_loss].iter().all(|x| x.max_owd.is_none()));
    for w in s.windows(2) {
        if w[1].max_owd != w[0].max_owd {
            assert!(w[1].lost > 0, "max_owd moved without a loss: {w:?}");
        }
    }
    assert!(s[first_loss..]
        .iter()
        .all(|x| x.max_owd.is_some_and(|m| m <= max)));

    // The false positives: lossy slots farther than τ (10 slots, one for the slot's
    // own length and one for a late send) from every slot that lost a packet. Each is explained by the
    // trace, a one-way delay above max_owd × (1 − α); the holds make them by the tens
    // (a hold of 29 ms spans 5 to 6 slots of every 19 or 20; only a max_owd within
    // about 1.5 ms of a full hold at both losses that count would leave fewer: odds
    // about (1.5 / 97)^2).
    let loss_slots: Vec<u64> = s.iter().filter(|x| x.lost > 0).map(|x| x.slot).collect();
    let far = |x: &Slot| loss_slots.iter().all(|&l| x.slot.abs_diff(l) > 12);
    let false_positives: Vec<Slot> = s.iter().filter(|x| x.lossy && far(x)).copied().collect();
    for x in &false_positives {
        let (owd, m) = (x.owd.expect("answered"), x.max_owd.expect("after a loss"));
        assert!(owd as f64 > m as f64 * (1.0 - 0.005), "{x:?}");
    }
    let held_fp = false_positives.iter().filter(|x| x.owd >= Some(MS)).count();
    assert!(
        held_fp >= 10,
        "{held_fp} held false positives of {false_positives:?}"
    );
    // And no slot far from a loss is lossy without that reason.
    for x in s.iter().filter(|x| far(x) && !x.lossy) {
        let above = x
            .owd
            .zip(x.max_owd)
            .is_some_and(|(o, m)| o as f64 > m as f64 * (1.0 - 0.005));
        assert!(!above, "{x:?}");
    }

    // So the loss frequency is far above the probe loss rate (the seed's Fig. 10).
    let lossy = u64_of(&r, "lossy_slots");
    let freq = f64_of(&r, "loss_frequency");
    assert_eq!(lossy, s.iter().filter(|x| x.lossy).count() as u64);
    assert!((freq - lossy as f64 / probes as f64).abs() < 1e-12);
    assert!(freq >= 10.0 * probe_loss, "{freq} vs {probe_loss}");
    eprintln!(
        "badabing through the forwarder: probe loss {:.2}%, loss frequency {:.1}%, \
         {} false positives ({held_fp} held), max OWD {:.1} ms, held share {:.1}%, \
         max_owd estimates {:?} ms",
        100.0 * probe_loss,
        100.0 * freq,
        false_positives.len(),
        max as f64 / 1e6,
        100.0 * held_share,
        s.iter()
            .filter(|x| x.lost > 0)
            .map(|x| x.max_owd.map(|m| m as f64 / 1e6))
            .collect::<Vec<_>>()
    );
}

#[test]
fn badabing_on_a_clean_path_repeats_its_slots_by_seed_and_finds_no_loss() {
    let _machine = hold_machine();
    let (_serve, refl) = spawn_reflector("120s");
    let target = refl.to_string();
    let run = || {
        json(&[
            "badabing",
            &target,
            "--duration",
            "600ms",
            "--seed",
            "7",
            "--json",
        ])
    };
    let (a, b) = (run(), run());
    let slots = |v: &Value| series(v).iter().map(|x| x.slot).collect::<Vec<_>>();
    assert_eq!(slots(&a), slots(&b), "the same seed probes the same slots");
    // 120 slots of 5 ms at 0.3: 36 expected.
    assert!((15..=60).contains(&slots(&a).len()), "{}", slots(&a).len());
    assert_eq!(u64_of(&a, "slots"), 120);
    assert_eq!(
        (f64_of(&a, "loss_frequency"), f64_of(&a, "probe_loss_rate")),
        (0.0, 0.0)
    );
    assert!(series(&a)
        .iter()
        .all(|x| x.max_owd.is_none() && x.owd.is_some() && !x.lossy));
    // Relative to the smallest: loopback's microseconds, not the clocks' offset.
    let least = series(&a).iter().filter_map(|x| x.owd).min();
    assert!(least.is_some_and(|d| d < MS), "{least:?}");
}

/// A reflector of an older nnb: turns each ping into its pong without a receive
/// stamp. Badabing must refuse it rather than take RTTs for one-way delays.
#[test]
fn badabing_refuses_a_reflector_without_receive_stamps() {
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .expect("timeout");
    let addr = sock.local_addr().expect("address");
    let stop = Arc::new(AtomicBool::new(false));
    let echo = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                if let Ok((n, from)) = sock.recv_from(&mut buf) {
                    buf[5] = 2; // Kind::Pong, flags and payload untouched
                    let _ = sock.send_to(&buf[..n], from);
                }
            }
        })
    };
    let out = nnb(&[
        "badabing",
        &addr.to_string(),
        "--duration",
        "200ms",
        "--json",
    ]);
    stop.store(true, Ordering::Relaxed);
    echo.join().expect("the echo thread");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("without receive stamps"), "{err}");
}

#[test]
fn badabing_bad_input_exits_with_code_2() {
    for args in [
        &["badabing", "127.0.0.1:9", "--probability", "0"][..],
        &["badabing", "127.0.0.1:9", "--packets", "0"],
        &["badabing", "127.0.0.1:9", "--alpha", "1"],
        &[
            "badabing",
            "127.0.0.1:9",
            "--slot",
            "1us",
            "--duration",
            "10s",
        ],
        &["badabing", "127.0.0.1:9", "--msg-size", "39"],
        &["badabing", "not-an-address"],
    ] {
        let out = nnb(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
