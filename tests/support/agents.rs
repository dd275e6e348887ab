//! Helpers for the root tests that start `nnb` agents: local-provider options that
//! run this build's binary, a small fleet's tenants, and whether agent processes are
//! gone.
//!

use std::time::{Duration, Instant};

use nnb_controller::provider::{LocalOptions, Network, Role, TenantSpec};

/// Local-provider options that start this build's `nnb` binary as the agents, on
/// `network`.
pub(crate) fn local_options(network: Network) -> LocalOptions {
    LocalOptions {
        nnb_bin: Some(env!("CARGO_BIN_EXE_nnb").into()),
        network,
        ..LocalOptions::default()
    }
}

/// A test tenant `test` of `test_vcpus` vCPUs and two 1-vCPU neighbors `n1`, `n2`.
pub(crate) fn three_tenants(test_vcpus: usize) -> Vec<TenantSpec> {
    let t = |name: &str, role, vcpus| TenantSpec {
        name: name.into(),
        role,
        vcpus,
        runtime: Default::default(),
    };
    vec![
        t("test", Role::Test, test_vcpus),
        t("n1", Role::Neighbor, 1),
        t("n2", Role::Neighbor, 1),
    ]
}

/// Whether process `pid` is gone (absent, or a zombie nobody has reaped yet).
pub(crate) fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

/// Waits up to `timeout` for every process in `pids` to be gone; returns the ones
/// still alive then (empty when all are gone).
pub(crate) fn still_alive_after(pids: &[u32], timeout: Duration) -> Vec<u32> {
    let end = Instant::now() + timeout;
    while Instant::now() < end && !pids.iter().all(|&p| process_gone(p)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    pids.iter().copied().filter(|&p| !process_gone(p)).collect()
}

/// The agent pids recorded in every session of a run's manifest (`manifest.json`
/// read as JSON).
pub(crate) fn recorded_pids(manifest: &serde_json::Value) -> Vec<u32> {
    manifest["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["agent_pids"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p.as_u64().and_then(|p| u32::try_from(p).ok()))
        .collect()
}

/// Asserts that some agents were recorded (`pids`) and that none of them is still
/// running 5 s later.
pub(crate) fn assert_gone(pids: &[u32]) {
    assert!(!pids.is_empty(), "no agent pids recorded");
    let alive = still_alive_after(pids, Duration::from_secs(5));
    assert!(alive.is_empty(), "agents still running: {alive:?}");
}

/// Polls `done` every 20 ms until it holds; panics naming `what` after `timeout`.
pub(crate) fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < end, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
