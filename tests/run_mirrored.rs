//! `nnb run` with mirrored servers on the emulated network (root only; issue 27
//! item 1, review item 38): a test tenant probing and two neighbors loading, each
//! with a server of its own beyond the shaped uplink, as the thesis paired each
//! client with a server on a second host. Each server's final `serve` snapshot in
//! `background.jsonl` holds exactly what its own client sent (counted from the
//! client's load results) and nothing of the others'.

use crate::support::{cli, netns};

use serde_json::Value;

/// Well under the 1 Gbit/s NIC (20 Mbit/s per neighbor), so nothing is lost and
/// every datagram a client sent is one its server received.
const EXPERIMENT: &str = r#"name = "e2e-mirrored"
repetitions = 2
settle = "200ms"
step_timeout = "60s"
on_failure = "abort"

[provider]
kind = "local"
servers = "mirrored"

[network]
mode = "emulated"
host_bw = "1G"

[[tenants]]
name = "test"
role = "test"

[[tenants]]
name = "nb"
count = 2
role = "neighbor"

[scenario]
kind = "load-steps"
levels = ["0", "40M"]
msg_size = 1400

[scenario.probe]
duration = "500ms"
warmup = "100ms"
"#;

/// The JSON lines of `path`.
fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn each_mirrored_server_receives_exactly_its_own_clients_load() {
    if !netns::require_root() {
        return;
    }
    // Its loads keep the CPUs busy: no measuring test beside them.
    let _machine = crate::support::exclusive::hold_machine();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let exp = dir.path().join("exp.toml");
    std::fs::write(&exp, EXPERIMENT).unwrap_or_else(|e| panic!("{e}"));
    let (run, text) = cli::run_experiment(&exp, &dir.path().join("results"));
    let samples: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    assert!(samples.iter().all(|s| s["status"] == "ok"), "{samples:?}");
    // What each neighbor sent, summed over its load jobs (one per repetition).
    let sent = |tenant: &str, what: &str| -> u64 {
        samples
            .iter()
            .filter(|s| s["tenant"] == tenant && s["job"] == "load")
            .map(|s| s["result"]["sent"][what].as_u64().unwrap_or(0))
            .sum()
    };
    let serves: Vec<Value> = lines(&run.join("background.jsonl"))
        .into_iter()
        .filter(|r| r["job"] == "serve")
        .collect();
    let server = |client: &str| -> &Value {
        let name = format!("endpoint@{client}");
        let found: Vec<&Value> = serves.iter().filter(|r| r["tenant"] == name).collect();
        assert_eq!(found.len(), 1, "{name}: {serves:?}");
        assert_eq!(found[0]["serves"], client, "{}", found[0]);
        assert_eq!(found[0]["status"], "ok", "{}", found[0]);
        &found[0]["result"]
    };
    assert_eq!(serves.len(), 3, "one server per client: {serves:?}");
    for nb in ["nb-1", "nb-2"] {
        let (datagrams, bytes) = (sent(nb, "datagrams"), sent(nb, "bytes"));
        // 20 Mbit/s for 600 ms, twice: about 2,100 datagrams of 1400 bytes.
        assert!(datagrams > 1000, "{nb} sent {datagrams} datagrams");
        let snap = server(nb);
        let totals = &snap["sink"]["totals"];
        assert_eq!(
            totals["seq"]["received"].as_u64(),
            Some(datagrams),
            "{nb}'s server: {totals}"
        );
        assert_eq!(
            totals["bytes"].as_u64(),
            Some(bytes),
            "{nb}'s server: {totals}"
        );
        assert_eq!(snap["reflector"]["reflected"], 0, "{nb}'s server: {snap}");
    }
    // The test tenant only probes: its server reflected its pings and sank nothing.
    let test = server("test");
    assert!(
        test["reflector"]["reflected"].as_u64().unwrap_or(0) > 0,
        "{test}"
    );
    assert_eq!(test["sink"]["totals"]["bytes"], 0, "{test}");
    assert_eq!(test["sink"]["totals"]["seq"]["received"], 0, "{test}");
    // Each server had an address of its own beyond the uplink.
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(run.join("manifest.json")).unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let tenants = manifest["sessions"][0]["tenants"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ips: Vec<&str> = tenants
        .iter()
        .filter(|t| {
            t["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("endpoint@"))
        })
        .filter_map(|t| t["ip"].as_str())
        .collect();
    let mut distinct = ips.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!((ips.len(), distinct.len()), (3, 3), "{tenants:?}");
}
