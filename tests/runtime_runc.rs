//! Issue 28 item 2: runc as a tenant's technology (root, runc installed). The agent
//! runs in a container runc makes from nnb's bundle, its grant given to runc in OCI
//! terms: a tenant granted 0.5 CPU running two busy threads on two CPUs is held to
//! half a CPU, as the host sees the container's own cgroup; its record names runc
//! and its version; and nothing is left — no container (`runc list`), no cgroup,
//! no bundle — after a shutdown, or after a controller killed with `-9` and its
//! `--resume`. Runtimes that cannot run here (crun on a hybrid cgroup host, docker
//! without its daemon, podman) are refused before anything is created, with the
//! reason, exit 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use nnb_controller::provider::runtime::CGROUP_PREFIX;
use nnb_controller::provider::Provider;
use nnb_experiment::tenant::TenantGrant;
use nnb_format::Runtime;
use serde_json::Value;

use crate::support::agents::{recorded_pids, still_alive_after, wait_until};
use crate::support::cli::NNB;
use crate::support::exclusive::{self, measuring};
use crate::support::runc::{
    held_to_half_a_cpu, installed, launch_a, leftovers, runc_containers, runc_or_skip,
};

/// One runc tenant granted 0.5 CPU (and 256 MiB) on both CPUs, launched through
/// the local provider as `nnb run` does: runc wrote the grant into the container's
/// cgroup, a 2-thread burn on it is held to 50 +- 3 % of a CPU as the host sees
/// that cgroup ([`held_to_half_a_cpu`]), and nothing is left after its shutdown.
#[test]
fn a_runc_tenant_granted_half_a_cpu_is_held_to_half_a_cpu_and_leaves_nothing() {
    if !runc_or_skip("runc tenants") {
        return;
    }
    measuring(async {
        let grant = TenantGrant {
            cpu: Some(0.5),
            memory_bytes: Some(256 << 20),
            ..TenantGrant::default()
        };
        let (mut p, fleet) = launch_a(Runtime::Runc, 2, grant).await;
        let me = std::process::id();
        let record = fleet.tenants[0]
            .runtime
            .clone()
            .unwrap_or_else(|| panic!("tenant a has no runtime record"));
        assert_eq!(record.runtime, Runtime::Runc);
        let version = record.version.clone().unwrap_or_default();
        assert!(version.starts_with("runc version "), "{record:?}");
        let id = record.container.clone().unwrap_or_default();
        assert!(runc_containers().contains(&id), "{id} is not in runc list");
        let cgroup = record.cgroup.clone().unwrap_or_default();
        assert!(
            cgroup.starts_with(&format!("/{CGROUP_PREFIX}/run-{me}-")) && cgroup.ends_with(&id),
            "{cgroup}"
        );
        // runc wrote the grant into that cgroup.
        let cpu = Path::new("/sys/fs/cgroup/cpu").join(cgroup.trim_start_matches('/'));
        let read = |f: &str| std::fs::read_to_string(cpu.join(f)).unwrap_or_default();
        assert_eq!(
            (
                read("cpu.cfs_quota_us").trim(),
                read("cpu.cfs_period_us").trim()
            ),
            ("50000", "100000")
        );

        held_to_half_a_cpu(&p, &fleet, "runc").await;

        let pids = fleet.pids();
        p.shutdown(fleet)
            .await
            .unwrap_or_else(|e| panic!("shutdown: {e}"));
        assert!(!runc_containers().contains(&id), "{id} is left");
        assert_eq!(leftovers(me), Vec::<PathBuf>::new(), "left after shutdown");
        assert!(still_alive_after(&pids, Duration::from_secs(5)).is_empty());
    });
}

/// A short staircase whose two tenants run in `runtime`.
fn staircase(runtime: &str) -> String {
    format!(
        "name = \"runc-tenants\"\nrepetitions = 3\nsettle = \"0s\"\n\
         [[tenants]]\nname = \"t\"\nrole = \"test\"\nruntime = \"{runtime}\"\n\
         grant = {{ cpu = 0.5 }}\n\
         [[tenants]]\nname = \"nb\"\nrole = \"neighbor\"\nruntime = \"{runtime}\"\n\
         [scenario]\nkind = \"neighbor-staircase\"\n\
         [scenario.test]\nworkload = \"fpadd\"\nops = 20000000\n"
    )
}

/// `nnb run` of a staircase of runc tenants, killed with `-9` once it journaled a
/// sample: its containers' agents do not outlive it (each container's watchdog
/// deletes it when the controller's end of its pipe closes), and the resume
/// removes the dead run's cgroups and bundle directory at its launch, completes,
/// and leaves nothing of its own.
#[test]
fn a_killed_runs_containers_are_gone_and_its_resume_leaves_nothing() {
    if !runc_or_skip("runc tenants") {
        return;
    }
    let _machine = exclusive::hold_machine();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let exp = dir.path().join("runc.toml");
    std::fs::write(&exp, staircase("runc")).unwrap_or_else(|e| panic!("{e}"));
    let results = dir.path().join("results");
    let mut child = Command::new(NNB)
        .arg("run")
        .arg(&exp)
        .arg("--results")
        .arg(&results)
        .arg("--quiet")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning nnb run: {e}"));
    let dead = child.id();
    let mut run = PathBuf::new();
    wait_until("the run's first sample", Duration::from_secs(120), || {
        if let Ok(Some(st)) = child.try_wait() {
            panic!("nnb run ended early: {st}");
        }
        let found = std::fs::read_dir(&results)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|r| {
                std::fs::read_to_string(r.join("samples.jsonl"))
                    .is_ok_and(|t| t.lines().next().is_some())
            });
        run = found.unwrap_or_default();
        !run.as_os_str().is_empty()
    });
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(run.join("manifest.json")).unwrap_or_default(),
    )
    .unwrap_or_else(|e| panic!("manifest: {e}"));
    let pids = recorded_pids(&manifest);
    let containers: Vec<String> = manifest["sessions"][0]["tenants"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["runtime"]["container"].as_str().map(str::to_string))
        .collect();
    assert_eq!(containers.len(), 2, "{manifest:#}");
    child.kill().unwrap_or_else(|e| panic!("kill -9: {e}"));
    let _ = child.wait();
    let alive = still_alive_after(&pids, Duration::from_secs(10));
    assert!(
        alive.is_empty(),
        "agents outlived their controller: {alive:?}"
    );
    wait_until("the watchdogs' deletes", Duration::from_secs(10), || {
        let left = runc_containers();
        containers.iter().all(|c| !left.contains(c))
    });

    let run_id = run.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let resume = Command::new(NNB)
        .arg("run")
        .arg("--results")
        .arg(&results)
        .args(["--resume", run_id, "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning the resume: {e}"));
    let resumer = resume.id();
    let out = resume
        .wait_with_output()
        .unwrap_or_else(|e| panic!("waiting for the resume: {e}"));
    assert!(
        out.status.success(),
        "resume: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left = runc_containers();
    assert!(
        containers.iter().all(|c| !left.contains(c)),
        "containers left: {left:?}"
    );
    assert_eq!(leftovers(dead), Vec::<PathBuf>::new(), "the dead run's");
    assert_eq!(leftovers(resumer), Vec::<PathBuf>::new(), "the resume's");
}

/// Runtimes that cannot run here are refused by `nnb run` (and its dry run) before
/// anything is created, with the reason, exit 2: crun (refuses a v1/hybrid cgroup
/// host; no binary), docker (no daemon), podman where it is not installed (where
/// it is, it runs tenants: tests/runtime_podman.rs).
#[test]
fn runtimes_that_cannot_run_here_are_refused_with_the_reason() {
    // podman's probes start containers: not beside a measuring test.
    let _machine = exclusive::hold_machine();
    let hybrid = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.contains(" - cgroup "));
    let docker_daemon = Path::new("/var/run/docker.sock").exists();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let mut cases = Vec::new();
    if !installed("podman") {
        cases.push(("podman", "no podman binary in PATH"));
    }
    if hybrid {
        cases.push(("crun", "crun refuses the v1/hybrid hierarchy"));
    }
    if !docker_daemon {
        cases.push(("docker", "no docker daemon at /var/run/docker.sock"));
    }
    for (runtime, reason) in cases {
        let exp = dir.path().join(format!("{runtime}.toml"));
        std::fs::write(&exp, staircase(runtime)).unwrap_or_else(|e| panic!("{e}"));
        let results = dir.path().join(format!("results-{runtime}"));
        for dry in [true, false] {
            let mut cmd = Command::new(NNB);
            cmd.arg("run").arg(&exp).arg("--results").arg(&results);
            if dry {
                cmd.arg("--dry-run");
            }
            let out = cmd.output().unwrap_or_else(|e| panic!("nnb run: {e}"));
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{runtime} (dry run {dry}): {err}"
            );
            assert!(
                err.contains(&format!("tenant t cannot run in {runtime}")) && err.contains(reason),
                "{runtime} (dry run {dry}): {err}"
            );
            assert!(!results.exists(), "{runtime}: a results directory was made");
        }
    }
}

/// The matrix's unrestricted state for a runc tenant: `runc update` lifts its CPU
/// quota and memory limit (-1, the kernel's "none") and gives it every CPU, and
/// restores them; its I/O throttle (which `runc update` cannot change) is cleared
/// and written back in the container's own cgroup. A restarted container (absent,
/// then present again) gets its grant again, in a fresh container of the same id.
#[test]
fn a_runc_tenants_grant_is_lifted_and_restored() {
    if !runc_or_skip("runc tenants") {
        return;
    }
    let io_dir = std::env::temp_dir();
    measuring(async {
        let grant = TenantGrant {
            cpu: Some(0.5),
            memory_bytes: Some(256 << 20),
            read_iops: Some(300),
            io_dir: Some(io_dir.clone()),
            ..TenantGrant::default()
        };
        let (mut p, mut fleet) = launch_a(Runtime::Runc, 1, grant).await;
        let record = fleet.tenants[0]
            .runtime
            .clone()
            .unwrap_or_else(|| panic!("no record"));
        let rel = record.cgroup.unwrap_or_default();
        let read = |controller: &str, file: &str| {
            let path = Path::new("/sys/fs/cgroup")
                .join(controller)
                .join(rel.trim_start_matches('/'))
                .join(file);
            std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
                .trim()
                .to_string()
        };
        let state = || {
            (
                read("cpu", "cpu.cfs_quota_us"),
                read("memory", "memory.limit_in_bytes"),
                read("blkio", "blkio.throttle.read_iops_device"),
            )
        };
        let granted = state();
        assert_eq!(granted.0, "50000");
        assert_eq!(granted.1, (256u64 << 20).to_string());
        assert!(granted.2.ends_with(" 300"), "{granted:?}");
        p.set_lifted(&mut fleet, &["a".to_string()])
            .await
            .unwrap_or_else(|e| panic!("lifting: {e}"));
        let lifted = state();
        assert_eq!(lifted.0, "-1");
        assert!(lifted.1.parse::<u64>().unwrap_or(0) > 1 << 60, "{lifted:?}");
        assert_eq!(lifted.2, "", "{lifted:?}");
        p.set_lifted(&mut fleet, &[])
            .await
            .unwrap_or_else(|e| panic!("restoring: {e}"));
        assert_eq!(state(), granted);
        p.set_present(&mut fleet, &[])
            .await
            .unwrap_or_else(|e| panic!("absent: {e}"));
        assert!(!runc_containers().contains(&record.container.clone().unwrap_or_default()));
        p.set_present(&mut fleet, &["a".to_string()])
            .await
            .unwrap_or_else(|e| panic!("present again: {e}"));
        assert_eq!(state(), granted, "the restarted container's grant");
        fleet.tenants[0]
            .client()
            .health()
            .await
            .unwrap_or_else(|e| panic!("the restarted agent: {e}"));
        let me = std::process::id();
        p.shutdown(fleet)
            .await
            .unwrap_or_else(|e| panic!("shutdown: {e}"));
        assert_eq!(leftovers(me), Vec::<PathBuf>::new(), "left after shutdown");
    });
}
