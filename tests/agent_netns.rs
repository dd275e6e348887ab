//! The local provider's emulated network (root only): namespaces per tenant on a
//! bridge whose uplink to the endpoint is shaped with `tc`, all removed afterwards.

use std::process::Command;
use std::time::Duration;

use nnb_agent::jobs::{JobRequest, JobSpec, JobState};
use nnb_controller::client::AgentClient;
use nnb_controller::provider::launch_local;
use nnb_controller::provider::netns::list_namespaces;
use nnb_controller::provider::Network;
use nnb_experiment::NicQueue;

use crate::support::agents;
use crate::support::netns;

fn sh(program: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(program).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emulated_network_is_built_shaped_and_removed() {
    if !netns::require_root() {
        return;
    }
    let opts = agents::local_options(Network::Emulated {
        host_bw_bps: 200e6,
        queue: NicQueue::Fifo,
    });
    let fleet = launch_local(&agents::three_tenants(1), &opts)
        .await
        .unwrap();
    let lab = fleet.network().expect("an emulated fleet has a network");
    let namespaces = lab.namespaces();
    assert_eq!(
        namespaces.len(),
        5,
        "host, endpoint and three tenants: {namespaces:?}"
    );
    let present = list_namespaces().unwrap();
    for ns in &namespaces {
        assert!(present.contains(ns), "{ns} missing from {present:?}");
    }
    let endpoint = fleet.endpoint.clone().unwrap();
    for tenant in fleet.tenants.iter().chain([&endpoint]) {
        let ns = tenant.netns.as_deref().unwrap();
        assert!(namespaces.iter().any(|n| n == ns));
        assert_eq!(
            Some(tenant.addr.ip()),
            tenant.ip,
            "{} listens on its namespace address",
            tenant.name
        );
        tenant.client().health().await.unwrap();
        let (ok, addrs) = sh("ip", &["-n", ns, "-4", "-o", "addr", "show", "dev", "eth0"]);
        assert!(
            ok && addrs.contains(&tenant.addr.ip().to_string()),
            "{ns}: {addrs}"
        );
    }
    for (ns, dev) in [(lab.host_ns(), "up0"), (lab.endpoint_ns(), "eth0")] {
        let (ok, qdisc) = sh("tc", &["-n", &ns, "qdisc", "show", "dev", dev]);
        assert!(
            ok && qdisc.contains("tbf") && qdisc.contains("rate 200Mbit"),
            "{ns} {dev}: {qdisc}"
        );
    }
    // A tenant reaches the endpoint across the bridge and the shaped uplink: the
    // reflector answers the test node's probe.
    let ep = endpoint.client();
    let (serve_id, reflector, _) = serve(&ep, 60_000).await;
    assert!(
        reflector.starts_with(&endpoint.ip.unwrap().to_string()),
        "{reflector}"
    );
    assert_eq!(ep.stop(&serve_id).await.unwrap().state, JobState::Stopped);

    let ctl = format!("{}c", lab.run_id());
    fleet.shutdown().await.unwrap();
    let present = list_namespaces().unwrap();
    for ns in &namespaces {
        assert!(!present.contains(ns), "{ns} left behind");
    }
    let (exists, _) = sh("ip", &["link", "show", &ctl]);
    assert!(!exists, "the controller's veth {ctl} is left behind");
}

/// Starts a serve job on `ep` that may run `deadline_ms`, and waits for its bound
/// addresses; returns its id with the reflector and sink addresses.
async fn serve(ep: &AgentClient, deadline_ms: u64) -> (String, String, String) {
    let id = ep
        .start(&JobRequest {
            spec: JobSpec::Serve {
                reflector_port: 0,
                sink_port: 0,
                tcp_port: None,
                sink_threads: None,
            },
            deadline_ms,
        })
        .await
        .unwrap();
    for _ in 0..100 {
        if let Some(r) = ep.status(&id).await.unwrap().result {
            let get = |k: &str| r[k].as_str().unwrap().to_string();
            return (id, get("reflector"), get("sink"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the endpoint's serve job published no address");
}

/// Starts a job and waits for its end, returning its result.
async fn run_job(c: &AgentClient, spec: JobSpec) -> serde_json::Value {
    let id = c
        .start(&JobRequest {
            spec,
            deadline_ms: 60_000,
        })
        .await
        .unwrap();
    let st = c.wait(&id, Duration::from_secs(60)).await.unwrap();
    assert_eq!(st.state, JobState::Done, "{st:?}");
    st.result.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shaped_uplink_caps_neighbors_at_host_bandwidth_and_delays_the_test_node() {
    if !netns::require_root() {
        return;
    }
    let host_bw = 200e6;
    let opts = agents::local_options(Network::Emulated {
        host_bw_bps: host_bw,
        queue: NicQueue::Fifo,
    });
    let fleet = launch_local(&agents::three_tenants(1), &opts)
        .await
        .unwrap();
    let ep = fleet.endpoint.clone().unwrap().client();
    let (_, reflector, sink) = serve(&ep, 120_000).await;
    let probe = || JobSpec::Latency {
        target: reflector.clone(),
        duration_ms: 1000,
        msg_size: 64,
        warmup_ms: 200,
        busy_poll: false,
    };
    let test = fleet.test().unwrap().client();
    let idle = run_job(&test, probe()).await;

    let load = |c: AgentClient, sink: String| async move {
        let spec = JobSpec::Load {
            target: sink,
            rate_bps: 150e6,
            streams: 1,
            msg_size: 1400,
            duration_ms: Some(3000),
            sampling: None,
            options: Default::default(),
        };
        run_job(&c, spec).await
    };
    let mut neighbors = fleet
        .neighbors()
        .map(|n| n.client())
        .collect::<Vec<_>>()
        .into_iter();
    let l1 = tokio::spawn(load(neighbors.next().unwrap(), sink.clone()));
    let l2 = tokio::spawn(load(neighbors.next().unwrap(), sink.clone()));
    tokio::time::sleep(Duration::from_millis(700)).await;
    let loaded = run_job(&test, probe()).await;
    let (r1, r2) = (l1.await.unwrap(), l2.await.unwrap());
    let received: f64 = [&r1, &r2]
        .iter()
        .map(|r| r["sink"]["rate_bps"].as_f64().unwrap())
        .sum();
    let sent: f64 = [&r1, &r2]
        .iter()
        .map(|r| r["sent"]["payload_bps"].as_f64().unwrap())
        .sum();
    let (p50_idle, p50_loaded) = (
        idle["rtt"]["p50_ns"].as_u64().unwrap(),
        loaded["rtt"]["p50_ns"].as_u64().unwrap(),
    );
    eprintln!(
        "sent {:.1} Mbit/s, sink received {:.1} Mbit/s through a {:.0} Mbit/s uplink; test RTT p50 idle {} us, loaded {} us",
        sent / 1e6, received / 1e6, host_bw / 1e6, p50_idle / 1000, p50_loaded / 1000
    );
    // The shaper counts frames: 1400-byte datagrams take 1400 + 8 + 20 + 14 = 1442
    // bytes, so the uplink carries at most 200e6 * 1400 / 1442 = 194.2 Mbit/s of
    // payload, which is what the sink counts.
    let cap = host_bw * 1400.0 / 1442.0;
    assert!(
        sent > 1.2 * cap,
        "the neighbors must offer clearly more than the uplink carries: {sent}"
    );
    // Capped: never more than the uplink, and most of it used (a stalled sender on
    // this busy machine skips slots, which the bucket cannot make up for).
    assert!(
        received <= cap * 1.03 && received >= cap * 0.85,
        "received {received} bit/s is not capped near the {cap} bit/s of payload the uplink carries"
    );
    assert!(
        p50_loaded > 2 * p50_idle,
        "RTT idle {p50_idle} ns vs loaded {p50_loaded} ns"
    );
    fleet.shutdown().await.unwrap();
}
