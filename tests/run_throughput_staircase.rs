//! `nnb run experiments/local-throughput-staircase.toml` (root only): nodes join one
//! at a time behind one emulated 100 Mbit/s NIC, all sending at twice the link, each
//! level 3 times. Per level, the nodes' mean received rates add up to the link within
//! 10%, and every node gets link / nodes within 20% (the file's NIC queue is fair: a
//! share per tenant). The file's loads are continuous: each node's load is one job
//! from the level where it joined to the end (every level's window names the same
//! load: its start and sockets), and `background.jsonl` has one load line per node
//! spanning those levels.
//!
//! Framing: the recorded rates are UDP payload (nnb header included); tc's token
//! bucket shapes Ethernet frames of payload + 8 (UDP) + 20 (IPv4) + 14 (Ethernet
//! header) bytes, so 1400-byte datagrams carry 1400 / 1442 of the link as payload.

use crate::support::{cli, netns};

use std::collections::BTreeMap;

use serde_json::Value;

/// The emulated link of the example file, bit/s.
const LINK_BPS: f64 = 100e6;
/// Its payload at 1400-byte datagrams.
const PAYLOAD_BPS: f64 = LINK_BPS * 1400.0 / 1442.0;
/// The file's repetitions of each level.
const REPETITIONS: usize = 3;

#[test]
fn every_level_shares_the_link_among_its_nodes() {
    if !netns::require_root() {
        return;
    }
    // Its continuous loads keep both CPUs busy for a minute: no measuring test
    // beside them.
    let _machine = crate::support::exclusive::hold_machine();
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("experiments/local-throughput-staircase.toml");
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let (run, text) = cli::run_experiment(&file, dir.path());
    // Neighbors -> tenant -> (received rate, sent window mean) per repetition.
    let mut reps: BTreeMap<u64, BTreeMap<String, Vec<(f64, f64)>>> = BTreeMap::new();
    // Tenant -> the loads its windows read (start, sockets), and the levels read.
    let mut loads: BTreeMap<String, (Vec<Value>, Vec<u64>)> = BTreeMap::new();
    for line in text.lines() {
        let r: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r["status"], "ok", "{line}");
        assert_eq!(r["job"], "load");
        let samples = &r["result"]["samples"];
        assert_eq!(samples["interval_s"].as_f64(), Some(1.0), "{line}");
        assert!(
            samples["received_bps"]
                .as_array()
                .is_some_and(|a| a.len() >= 5),
            "{line}"
        );
        let rate = r["rate_bps"]
            .as_f64()
            .unwrap_or_else(|| panic!("no rate: {line}"));
        let sent = samples["sent_window_bps"].as_f64().unwrap_or_default();
        let level = r["level"].as_f64().unwrap_or(-1.0) as u64;
        let tenant = r["tenant"].as_str().unwrap_or_default().to_string();
        let load = &r["result"]["load"];
        assert!(load["started_unix_ns"].as_u64().is_some(), "{line}");
        let read = loads.entry(tenant.clone()).or_default();
        if !read.0.contains(load) {
            read.0.push(load.clone());
        }
        read.1.push(level);
        reps.entry(level)
            .or_default()
            .entry(tenant)
            .or_default()
            .push((rate, sent));
    }
    // Neighbors -> (tenant, mean received rate, mean sent window) over the file's
    // repetitions.
    let levels: BTreeMap<u64, Vec<(String, f64, f64)>> = reps
        .into_iter()
        .map(|(level, tenants)| {
            let nodes = tenants
                .into_iter()
                .map(|(tenant, r)| {
                    assert_eq!(r.len(), REPETITIONS, "level {level}: {tenant}: {r:?}");
                    let n = r.len() as f64;
                    let rate = r.iter().map(|x| x.0).sum::<f64>() / n;
                    let sent = r.iter().map(|x| x.1).sum::<f64>() / n;
                    (tenant, rate, sent)
                })
                .collect();
            (level, nodes)
        })
        .collect();
    assert_eq!(levels.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 3]);
    // One load per node, read at every level from its join (node-k joins at level k)
    // to the top: never restarted.
    for (tenant, (read, at)) in &loads {
        assert_eq!(
            read.len(),
            1,
            "{tenant}'s windows read several loads: {read:?}"
        );
        let joined = tenant
            .strip_prefix("node-")
            .map_or(0, |k| k.parse().unwrap_or(99));
        let want: Vec<u64> = (joined..=3)
            .flat_map(|l| std::iter::repeat(l).take(REPETITIONS))
            .collect();
        assert_eq!(at, &want, "{tenant}");
    }
    assert_eq!(loads.len(), 4);
    // background.jsonl: one load line per node (stopped at the end), its steps every
    // step from its join; and the endpoint's serve.
    let background = std::fs::read_to_string(run.join("background.jsonl"))
        .unwrap_or_else(|e| panic!("background.jsonl: {e}"));
    let mut lines: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for line in background.lines() {
        let b: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(b["status"], "ok", "{line}");
        let tenant = b["tenant"].as_str().unwrap_or_default().to_string();
        lines.entry(tenant).or_default().push(b);
    }
    for (tenant, (_, at)) in &loads {
        let b = lines
            .get(tenant)
            .unwrap_or_else(|| panic!("no background line of {tenant}"));
        assert_eq!(b.len(), 1, "{tenant}: {b:?}");
        assert_eq!(b[0]["job"], "load");
        let steps = b[0]["steps"].as_array().map_or(0, Vec::len);
        assert_eq!(steps, at.len(), "{tenant}: {}", b[0]);
    }
    for (k, nodes) in &levels {
        let n = *k as usize + 1;
        // Level k records exactly the test node and the first k neighbors.
        let mut names: Vec<&str> = nodes.iter().map(|(t, _, _)| t.as_str()).collect();
        names.sort_unstable();
        let mut want = vec!["test".to_string()];
        want.extend((1..n).map(|i| format!("node-{i}")));
        want.sort_unstable();
        assert_eq!(names, want.iter().map(String::as_str).collect::<Vec<_>>());
        let sum: f64 = nodes.iter().map(|(_, r, _)| r).sum();
        assert!(
            (sum - PAYLOAD_BPS).abs() <= PAYLOAD_BPS * 0.10,
            "level {k}: the nodes got {sum} bit/s in all, the link carries {PAYLOAD_BPS} of payload"
        );
        let share = PAYLOAD_BPS / n as f64;
        for (tenant, rate, sent) in nodes {
            // Every node sent far more than its share (full rate)...
            assert!(*sent > 1.5 * share, "level {k}: {tenant} sent only {sent}");
            // ...and got its share of the link: the example's NIC queue is fair (a
            // FIFO token bucket split it 0.69x to 1.42x of link / nodes).
            assert!(
                (0.8 * share..=1.2 * share).contains(rate),
                "level {k}: {tenant} got {rate} bit/s, link / {n} is {share}"
            );
        }
    }
}
