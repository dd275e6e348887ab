//! Interrupting `nnb run` (reliability review NM2, R13): what the step in flight
//! leaves on the machine once the run has exited. A disk job's scratch file must be
//! gone, however the interrupt reached the run.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nnb_testkit::require_root;

use crate::support::agents::still_alive_after;
use crate::support::cli::NNB;
use crate::support::exclusive;

/// How long the test waits for the run to reach the moment it interrupts.
const REACH: Duration = Duration::from_secs(120);
/// Pause between two looks at the run's files.
const POLL: Duration = Duration::from_millis(20);

/// A disk isolation matrix of two tenants each granted 10 read and 10 write
/// operations per second on the disk of `io`, whose generators write their scratch
/// files in `io`: the capacity step (grants lifted) fills its 256 MiB file at once,
/// but every later step fills it under the grant, ten 1 MiB chunks a second, so the
/// step after the capacity one is still filling its file for about 25 s. A stopped
/// generator then takes a few tenths of a second (its last chunk and the file's
/// sync, under the grant) to remove its file. (With a grant of 1 IOPS it takes
/// longer than an agent's shutdown grace: the agent exits and leaves the file.)
fn slow_fill_matrix(io: &Path) -> String {
    let io = io.display();
    format!(
        r#"name = "nm2-interrupt"
repetitions = 1
settle = "0s"
step_timeout = "300s"

[[tenants]]
name = "a"
role = "test"
vcpus = 1
grant = {{ read_iops = 10, write_iops = 10, io_dir = "{io}" }}

[[tenants]]
name = "b"
role = "neighbor"
vcpus = 1
grant = {{ read_iops = 10, write_iops = 10, io_dir = "{io}" }}

[scenario]
kind = "isolation-matrix"
resource = "disk"
duration = "1s"
dir = "{io}"
file_size = "256M"
"#
    )
}

/// The disk generators' scratch files (`nnb-disk-*.dat`) in `dir`.
fn scratch_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("nnb-disk-") && n.ends_with(".dat"))
        })
        .collect()
}

/// Lines of the only run's `samples.jsonl` under `results` (0 before it exists).
fn journaled(results: &Path) -> usize {
    let Some(run) = std::fs::read_dir(results)
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
    else {
        return 0;
    };
    std::fs::read_to_string(run.path().join("samples.jsonl")).map_or(0, |t| t.lines().count())
}

/// Polls until `reached` holds, failing when `child` ended first or it took longer
/// than [`REACH`].
fn wait_until(child: &mut Child, what: &str, reached: impl Fn() -> bool) {
    let end = Instant::now() + REACH;
    while !reached() {
        if let Ok(Some(st)) = child.try_wait() {
            panic!("nnb run ended ({st}) before {what}");
        }
        assert!(Instant::now() < end, "not {what} within {REACH:?}");
        std::thread::sleep(POLL);
    }
}

/// Agent pids recorded in the only run's manifest under `results`.
fn agent_pids(results: &Path) -> Vec<u32> {
    let run = std::fs::read_dir(results)
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .unwrap_or_else(|| panic!("no run under {}", results.display()));
    let text = std::fs::read_to_string(run.path().join("manifest.json"))
        .unwrap_or_else(|e| panic!("manifest: {e}"));
    let m: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("manifest: {e}"));
    m["sessions"][0]["agent_pids"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.as_u64().and_then(|p| u32::try_from(p).ok()))
        .collect()
}

/// NM2 / R13: `timeout -s INT nnb run` (which signals the command and then its whole
/// process group, the run's local agents included, as Ctrl-C at a terminal does)
/// while a disk step fills its scratch file. The old controller saw its agents'
/// listeners close, gave up stopping their jobs and SIGKILLed them at once (it
/// exited within 0.15 s), before the disk job had ended and removed its file: the
/// file stayed, every time. Now the agents get SIGTERM and time to end their jobs,
/// and the file is gone when the run has exited 130.
#[test]
fn interrupting_a_run_during_a_disk_step_leaves_no_scratch_file() {
    if !require_root("tenants with IOPS grants, which run in cgroups,") {
        return;
    }
    let _machine = exclusive::hold_machine();
    // On a disk: /tmp may be a tmpfs, where direct I/O is refused.
    let dir = tempfile::Builder::new()
        .prefix("nnb-run-interrupt")
        .tempdir_in("/var/tmp")
        .unwrap_or_else(|e| panic!("a directory in /var/tmp: {e}"));
    let io = dir.path().join("io");
    std::fs::create_dir(&io).unwrap_or_else(|e| panic!("{}: {e}", io.display()));
    let exp = dir.path().join("exp.toml");
    std::fs::write(&exp, slow_fill_matrix(&io)).unwrap_or_else(|e| panic!("exp.toml: {e}"));
    let results = dir.path().join("results");
    let mut child = Command::new(NNB)
        .arg("run")
        .arg(&exp)
        .arg("--results")
        .arg(&results)
        .arg("--quiet")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        // A process group of its own, as `timeout` makes, so the group can be signalled.
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("spawning nnb run: {e}"));
    wait_until(&mut child, "the capacity step was journaled", || {
        journaled(&results) >= 1
    });
    // The capacity step's file is removed before its record is written: a file now
    // is the next step's, being filled under the grant.
    wait_until(&mut child, "the next disk step created its file", || {
        !scratch_files(&io).is_empty()
    });
    let group = format!("-{}", child.id());
    let sent = Command::new("kill")
        .args(["-INT", "--", &group])
        .status()
        .unwrap_or_else(|e| panic!("kill -INT -- {group}: {e}"));
    assert!(sent.success(), "kill -INT -- {group} failed: {sent}");
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("waiting for nnb run: {e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(130),
        "an interrupted run exits 130: {err}"
    );
    let left = scratch_files(&io);
    assert!(
        left.is_empty(),
        "scratch files left behind: {left:?}\n{err}"
    );
    let pids = agent_pids(&results);
    assert!(!pids.is_empty(), "no agent pids recorded");
    let alive = still_alive_after(&pids, Duration::from_secs(5));
    assert!(alive.is_empty(), "agents still running: {alive:?}");
}
