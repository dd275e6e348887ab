//! Issue 28: podman as a tenant's technology (root, podman installed). The agent
//! runs in a container `podman run` makes of nnb's minimal root filesystem, its
//! grant given in podman's flags: a tenant granted 0.5 CPU running two busy
//! threads on two CPUs is held to half a CPU, as the host sees the container's own
//! cgroup (the one `podman inspect` names); its record names podman and its
//! version; and nothing is left after a shutdown — no `nnb-` container in `podman
//! ps -a`, no cgroup, no bundle.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nnb_controller::provider::runtime::CGROUP_PREFIX;
use nnb_controller::provider::Provider;
use nnb_experiment::tenant::TenantGrant;
use nnb_format::Runtime;

use crate::support::agents::still_alive_after;
use crate::support::exclusive::measuring;
use crate::support::runc::{held_to_half_a_cpu, installed, launch_a, leftovers};
use nnb_testkit::{require, require_root};

/// Root and podman, or skip (fail under CI).
fn podman_or_skip() -> bool {
    require_root("podman tenants") && require(installed("podman"), "podman is not installed")
}

/// The names of podman's containers that nnb names (`nnb-`), running or not.
fn nnb_containers() -> Vec<String> {
    let out = Command::new("podman")
        .args(["ps", "--all", "--format", "{{.Names}}"])
        .output()
        .unwrap_or_else(|e| panic!("podman ps: {e}"));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|n| n.starts_with("nnb-"))
        .map(str::to_string)
        .collect()
}

/// One podman tenant granted 0.5 CPU on both CPUs, launched through the local
/// provider as `nnb run` does: its record names podman, its grant and lift are in
/// the container's cgroup, a 2-thread burn on it is held to 50 +- 3 % of a CPU as
/// the host sees that cgroup ([`held_to_half_a_cpu`]), and nothing is left after
/// its shutdown.
#[test]
fn a_podman_tenant_granted_half_a_cpu_is_held_to_half_a_cpu_and_leaves_nothing() {
    if !podman_or_skip() {
        return;
    }
    measuring(async {
        let grant = TenantGrant {
            cpu: Some(0.5),
            memory_bytes: Some(256 << 20),
            ..TenantGrant::default()
        };
        let (mut p, mut fleet) = launch_a(Runtime::Podman, 2, grant).await;
        let me = std::process::id();
        let record = fleet.tenants[0]
            .runtime
            .clone()
            .unwrap_or_else(|| panic!("tenant a has no runtime record"));
        assert_eq!(record.runtime, Runtime::Podman);
        let version = record.version.clone().unwrap_or_default();
        assert!(version.starts_with("podman version "), "{record:?}");
        let name = record.container.clone().unwrap_or_default();
        assert!(
            nnb_containers().contains(&name),
            "{name} is not in podman ps"
        );
        let cgroup = record.cgroup.clone().unwrap_or_default();
        assert!(
            cgroup.starts_with(&format!("/{CGROUP_PREFIX}/run-{me}-"))
                && cgroup.contains("/libpod-"),
            "{cgroup}"
        );
        // podman wrote the grant into that cgroup.
        let file = |controller: &str, f: &str| {
            let path = Path::new("/sys/fs/cgroup")
                .join(controller)
                .join(cgroup.trim_start_matches('/'))
                .join(f);
            std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
                .trim()
                .to_string()
        };
        let granted = || {
            (
                file("cpu", "cpu.cfs_quota_us"),
                file("memory", "memory.limit_in_bytes"),
            )
        };
        assert_eq!(
            (granted(), file("cpu", "cpu.cfs_period_us")),
            (
                ("50000".to_string(), (256u64 << 20).to_string()),
                "100000".to_string()
            )
        );
        // The matrix's unrestricted state: written to the cgroup, and restored by
        // `podman update`.
        p.set_lifted(&mut fleet, &["a".to_string()])
            .await
            .unwrap_or_else(|e| panic!("lifting: {e}"));
        let lifted = granted();
        assert_eq!(lifted.0, "-1");
        assert!(lifted.1.parse::<u64>().unwrap_or(0) > 1 << 60, "{lifted:?}");
        p.set_lifted(&mut fleet, &[])
            .await
            .unwrap_or_else(|e| panic!("restoring: {e}"));
        assert_eq!(granted(), ("50000".to_string(), (256u64 << 20).to_string()));

        held_to_half_a_cpu(&p, &fleet, "podman").await;

        let pids = fleet.pids();
        p.shutdown(fleet)
            .await
            .unwrap_or_else(|e| panic!("shutdown: {e}"));
        assert!(!nnb_containers().contains(&name), "{name} is left");
        assert_eq!(leftovers(me), Vec::<PathBuf>::new(), "left after shutdown");
        assert!(still_alive_after(&pids, Duration::from_secs(5)).is_empty());
    });
}
