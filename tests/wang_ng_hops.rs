//! Wang & Ng (seed 003, §V.B): the network-location check, the hops between a pair
//! (issue 26 item 1), read from the IP TTL of the reflector's answers (root).
//!
//! Worked by hand: a fresh namespace's sockets send with TTL 64 (Linux's default,
//! `net.ipv4.ip_default_ttl`, set anew in every namespace); on a direct veth the
//! answers arrive with 64, 0 hops; through one forwarding router namespace with 63,
//! 64 - 63 = 1 hop. With the reflector's namespace sending at 100 the answers arrive
//! through the router with 99: above 64, so counted from 128, 128 - 99 = 29 hops,
//! which proves the inference and not only the plumbing.

use serde_json::Value;

use crate::support::cli::{json_of, NNB};
use crate::support::netns::{self, reflector_in, Netns, NetnsPair, RoutedPair};

/// The `reply_ttl` of `nnb latency` (ping-pong, then open loop) and of `nnb rtt`
/// run in `prober` against the reflector at `target`, in that order.
fn reply_ttls(prober: &Netns, target: &str) -> Vec<Value> {
    let latency = [
        "latency", "--target", target, "--count", "30", "--warmup", "0s",
    ];
    let runs: [&[&str]; 3] = [
        &[&latency[..], &["--json"]].concat(),
        &[&latency[..], &["--rate", "1000", "--json"]].concat(),
        &[
            "rtt", target, "--probes", "20", "--rate", "200", "--skip", "0", "--json",
        ],
    ];
    runs.iter()
        .map(|args| {
            let out = prober.command(NNB).args(*args).output().expect("run nnb");
            json_of(&out)["reply_ttl"].clone()
        })
        .collect()
}

/// Asserts every probe saw only TTL `ttl` and inferred `hops`.
fn assert_ttls(seen: &[Value], ttl: u64, hops: u64, path: &str) {
    assert_eq!(seen.len(), 3);
    for v in seen {
        assert_eq!(
            (v["min"].as_u64(), v["max"].as_u64(), v["hops"].as_u64()),
            (Some(ttl), Some(ttl), Some(hops)),
            "{path}: {v}"
        );
    }
}

#[test]
fn hops_between_a_pair_are_the_routers_between_them() {
    if !netns::require_root() {
        return;
    }
    // Direct veth: no router.
    let direct = NetnsPair::new().expect("a veth pair");
    let (_serve, reflector) = reflector_in(&direct.b);
    let seen = reply_ttls(&direct.a, &reflector.to_string());
    assert_ttls(&seen, 64, 0, "direct veth");

    // Through one router.
    let routed = RoutedPair::new().expect("two tenants and a router");
    let (_serve, reflector) = reflector_in(&routed.b);
    let target = reflector.to_string();
    assert_ttls(&reply_ttls(&routed.a, &target), 63, 1, "one router");

    // The reflector's namespace sends at 100 (read per datagram: no restart).
    routed
        .b
        .run("sysctl", &["-qw", "net.ipv4.ip_default_ttl=100"])
        .expect("the reflector's default TTL");
    assert_ttls(
        &reply_ttls(&routed.a, &target),
        99,
        29,
        "one router, TTL 100",
    );
}
