//! The emulated network on its own (root only): built, addressed, cleaned, and
//! leftovers of a dead run removed.

use std::process::Command;

use nnb_controller::provider::netns::{is_root, list_namespaces, NetLab, MAX_TENANTS};
use nnb_controller::provider::ProviderError;
use nnb_experiment::NicQueue;

/// Tests needing root fail under CI and are skipped (with the reason) elsewhere.
fn root_or_skip(test: &str) -> bool {
    nnb_testkit::require(
        is_root(),
        &format!("{test}: the emulated network needs root"),
    )
}

#[test]
fn a_lab_replaces_a_dead_runs_leftovers_and_removes_itself() {
    if !root_or_skip("a_lab_replaces_a_dead_runs_leftovers_and_removes_itself") {
        return;
    }
    // Above the kernel's largest pid (2^22): no process can own this name.
    let leftover = "nnb7fffffe-0-t0";
    let ok = Command::new("ip")
        .args(["netns", "add", leftover])
        .status()
        .unwrap();
    assert!(ok.success());
    let lab = NetLab::create(2, 0, 100e6, NicQueue::Fifo).unwrap();
    let present = list_namespaces().unwrap();
    assert!(
        !present.iter().any(|n| n == leftover),
        "the dead run's namespace is left"
    );
    for ns in lab.namespaces() {
        assert!(present.contains(&ns), "{ns} missing");
    }
    assert_ne!(lab.tenant_ip(0), lab.tenant_ip(1));
    assert_ne!(lab.endpoint_ip(), lab.controller_ip());
    let namespaces = lab.namespaces();
    lab.remove().unwrap();
    let present = list_namespaces().unwrap();
    for ns in namespaces {
        assert!(!present.contains(&ns), "{ns} left behind");
    }
}

#[test]
fn impossible_labs_are_refused() {
    if !root_or_skip("impossible_labs_are_refused") {
        return;
    }
    for (tenants, bw) in [(MAX_TENANTS + 1, 1e9), (1, 0.0), (1, f64::NAN)] {
        match NetLab::create(tenants, 0, bw, NicQueue::Fifo) {
            Err(ProviderError::Invalid(_)) => {}
            other => panic!("{tenants} tenants at {bw}: expected Invalid, got {other:?}"),
        }
    }
}
