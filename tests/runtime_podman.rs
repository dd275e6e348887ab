//! Issue 28: podman as a tenant's technology (root, podman installed). The agent
//! runs in a container `podman run` makes of nnb's minimal root filesystem, its
//! grant given in podman's flags: a tenant granted 0.5 CPU running two busy
//! threads on two CPUs is held to half a CPU, as the host sees the container's own
//! cgroup (the one `podman inspect` names); its record names podman and its
//! version; and nothing is left after a shutdown — no `nnb-` container in `podman
//! ps -a`, no cgroup, no bundle.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use nnb_agent::jobs::{BurnScope, JobRequest, JobSpec, JobState};
use nnb_controller::provider::local::Cgroups;
use nnb_controller::provider::runtime::{BUNDLES, CGROUP_PREFIX};
use nnb_controller::provider::{LocalProvider, Network, Provider, Role, Serving, TenantSpec};
use nnb_experiment::tenant::TenantGrant;
use nnb_format::Runtime;

use crate::support::agents::{local_options, still_alive_after};
use crate::support::exclusive;
use nnb_testkit::{require, require_root};

/// Root and podman, or skip (fail under CI).
fn podman_or_skip() -> bool {
    let found = Command::new("sh")
        .args(["-c", "command -v podman"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    require_root("podman tenants") && require(found, "podman is not installed")
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

/// The runs' cgroups (`nnb-runc/run-PID-N`) of controller `pid` in every cgroup
/// mount under /sys/fs/cgroup, and its bundle directories.
fn leftovers(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("run-{pid}-");
    std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join(CGROUP_PREFIX))
        .chain([PathBuf::from(BUNDLES)])
        .flat_map(|dir| std::fs::read_dir(dir).into_iter().flatten().flatten())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix))
        })
        .collect()
}

/// Tries at measuring while other work leaves the tenant's CPUs alone.
const CPU_ATTEMPTS: usize = 4;

/// One podman tenant granted 0.5 CPU on both CPUs, launched through the local
/// provider as `nnb run` does; a 2-thread burn on it, metered from the host (the
/// container's cgroup) over 2 s inside the burn. The quota holds it to 50 ms per
/// 100 ms period: 20 periods, 1.0 s of CPU; the window's two partial periods can
/// add or take at most one period's quota (50 ms of 2 s: 2.5 points): 50 +- 3 %.
/// Other work can take the tenant's CPUs (this 2-CPU machine is shared with
/// builds): a figure below the range is measured again, up to [`CPU_ATTEMPTS`]
/// times; one above fails at once.
#[test]
fn a_podman_tenant_granted_half_a_cpu_is_held_to_half_a_cpu_and_leaves_nothing() {
    if !podman_or_skip() {
        return;
    }
    let _machine = exclusive::hold_machine();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio: {e}"));
    rt.block_on(async {
        let grant = TenantGrant {
            cpu: Some(0.5),
            memory_bytes: Some(256 << 20),
            ..TenantGrant::default()
        };
        let mut p = LocalProvider::new(nnb_controller::provider::LocalOptions {
            cgroups: Cgroups::Grants,
            grants: vec![("a".to_string(), grant)],
            ..local_options(Network::None)
        });
        let specs = [TenantSpec {
            name: "a".into(),
            role: Role::Test,
            vcpus: 2,
            runtime: Runtime::Podman,
        }];
        let mut fleet = p
            .launch(&specs, &Serving::None)
            .await
            .unwrap_or_else(|e| panic!("launching a podman tenant: {e}"));
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

        let client = fleet.tenants[0].client();
        let mut figures = Vec::new();
        for _ in 0..CPU_ATTEMPTS {
            let job = client
                .start(&JobRequest {
                    spec: JobSpec::Burn {
                        workload: "int".into(),
                        threads: 2,
                        ops: None,
                        duration_ms: Some(3_000),
                        pin: "none".into(),
                        cpus: None,
                        scope: BurnScope::Tenant,
                        duty: None,
                        pool: nnb_format::EventPool::PerThread,
                    },
                    deadline_ms: 60_000,
                })
                .await
                .unwrap_or_else(|e| panic!("starting the burn: {e}"));
            tokio::time::sleep(Duration::from_millis(500)).await;
            let meter = p
                .usage_meter(&fleet, &["a".to_string()])
                .unwrap_or_else(|| panic!("no host-side meter for a podman tenant"));
            tokio::time::sleep(Duration::from_secs(2)).await;
            let usage = meter.finish(None).usage.remove("a").unwrap_or_default();
            let st = client
                .wait(&job, Duration::from_secs(30))
                .await
                .unwrap_or_else(|e| panic!("waiting for the burn: {e}"));
            assert_eq!(st.state, JobState::Done, "{st:?}");
            let pct = usage
                .cpu_pct
                .unwrap_or_else(|| panic!("no host-side CPU: {usage:?}"));
            eprintln!("podman tenant granted 0.5 CPU, 2 busy threads: {pct:.2}% of a CPU");
            assert!(pct <= 53.0, "{pct:.2}% is above the quota's 50 +- 3%");
            figures.push(pct);
            if pct >= 47.0 {
                break;
            }
        }
        assert!(
            figures.last().is_some_and(|&p| p >= 47.0),
            "other work kept the tenant below 50 +- 3% in every try: {figures:?}"
        );

        let pids = fleet.pids();
        p.shutdown(fleet)
            .await
            .unwrap_or_else(|e| panic!("shutdown: {e}"));
        assert!(!nnb_containers().contains(&name), "{name} is left");
        assert_eq!(leftovers(me), Vec::<PathBuf>::new(), "left after shutdown");
        assert!(still_alive_after(&pids, Duration::from_secs(5)).is_empty());
    });
}
