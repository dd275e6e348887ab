//! Loopback test of the stepped neighbor-load experiment: a baseline level without
//! load and a loaded level, each with its probe result and achieved load.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use nnb_netlat::load::LoadConfig;
use nnb_netlat::neighbor::{self, NeighborConfig};
use nnb_netlat::probe::{ProbeConfig, ProbeLength};
use nnb_netlat::serve::{ServeConfig, Server};
use nnb_units::parse_rate_steps;

#[test]
fn steps_the_load_and_probes_each_level() {
    let server = Server::start(&ServeConfig::default()).expect("start serve");
    let probe = ProbeConfig {
        length: ProbeLength::Duration(Duration::from_millis(400)),
        warmup: Duration::from_millis(100),
        ..ProbeConfig::new(server.reflector_addr().expect("reflector"))
    };
    let load = LoadConfig::new(server.sink_addr().expect("sink"), None);
    let cfg = NeighborConfig {
        probe,
        load,
        levels: parse_rate_steps("0:40M:20M").expect("steps").levels(),
    };
    let stop = AtomicBool::new(false);
    let mut seen = 0;
    let levels = neighbor::run(&cfg, &stop, &mut |_| seen += 1, &mut |_| {}).expect("runs");
    assert_eq!((levels.len(), seen), (3, 3));
    assert!(levels[0].load.is_none());
    assert_eq!(levels[0].sent_bps, 0.0);
    for (l, target) in levels.iter().zip([0.0, 20e6, 40e6]) {
        assert_eq!(l.target_bps, target);
        assert!(l.probe.counts.answered > 0, "{:?}", l.probe.counts);
        let rtt = l.probe.rtt;
        let p90 = rtt.p90_ns as f64 - rtt.mean_ns;
        assert!((l.above_mean.p90_ns - p90).abs() < 1e-6);
        assert!(l.above_mean.p999_ns >= l.above_mean.p90_ns);
        if target > 0.0 {
            // The load ran alongside the probe and kept its schedule (generously): what
            // it sent plus the slots a stall of this busy machine made it skip (no
            // catch-up); the sink received what was sent.
            let r = l.load.as_ref().expect("a load report");
            let slots = r.sent.bytes + r.sent.skipped * r.msg_size as u64;
            let scheduled = slots as f64 * 8.0 / r.sent.elapsed_s;
            assert!(scheduled > target * 0.8, "{:?} for {target}", r.sent);
            let received = l.received_bps.expect("the nnb sink answers");
            assert!(received > l.sent_bps * 0.8, "{received} for {}", l.sent_bps);
        }
    }
}
