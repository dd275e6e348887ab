//! The memory load on this machine: a 64 MiB keep load becomes resident, a worker
//! killed from outside is counted and restarted, a stopped load ends at once, and no
//! worker process (nor zombie) is left behind by any of them.
//!
//! Workers are found as children of this process named `nnb-memload` in
//! `/proc/*/stat`; the tests take a lock so that one test's workers are not seen by
//! another.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nnb_burn::memload::{run, MemMode, MemReport, MemSpec};
use nnb_sys::toucher::WORKER_NAME;

const MIB: u64 = 1 << 20;

/// One memory test at a time.
static LOCK: Mutex<()> = Mutex::new(());

/// Pids of this process's children named `nnb-memload`, zombies included.
fn workers_of_ours() -> Vec<u32> {
    let me = std::process::id();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc") {
        let name = entry.expect("/proc entry").file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        // `PID (COMM) STATE PPID ...`; COMM may hold spaces and parentheses.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        let ppid = stat[close + 1..].split_whitespace().nth(1);
        if comm == WORKER_NAME && ppid == Some(me.to_string().as_str()) {
            pids.push(pid);
        }
    }
    pids
}

fn spec(bytes: u64, mode: MemMode, duration: Duration) -> MemSpec {
    MemSpec {
        bytes,
        mode,
        workers: 1,
        duration,
    }
}

fn run_alone(spec: &MemSpec, stop: &AtomicBool) -> MemReport {
    let report = run(spec, stop).expect("memory load");
    assert_eq!(workers_of_ours(), Vec::<u32>::new(), "workers left behind");
    report
}

/// 64 MiB kept for 1 s: the worker's peak RSS is the 64 MiB it touched plus what it
/// shares with this process (allowed: up to 8 MiB), 95% of the target is reached, and
/// nothing was killed.
#[test]
fn a_keep_load_becomes_resident() {
    let _one = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let never = AtomicBool::new(false);
    let r = run_alone(
        &spec(64 * MIB, MemMode::Keep, Duration::from_secs(1)),
        &never,
    );
    let peak_mib = r.peak_rss_bytes as f64 / MIB as f64;
    assert!((60.0..=72.0).contains(&peak_mib), "peak RSS {peak_mib} MiB");
    assert!(r.time_to_target_s.is_some(), "{r:?}");
    assert_eq!((r.oom_kills, r.restarts), (0, 0));
    assert_eq!(r.target_bytes, 64 * MIB);
    assert!(r.elapsed_s >= 1.0, "{r:?}");
    // At least the first pass: every page of the region once.
    assert!(r.touched_bytes >= 64 * MIB, "{r:?}");
    // 1 s is many samples after the first pass of 64 MiB.
    assert!(r.touched_bytes_per_s.is_some_and(|b| b > 0.0), "{r:?}");
}

/// A worker killed with `kill -9` while time remains is counted and restarted.
#[test]
fn a_killed_worker_is_counted_and_restarted() {
    let _one = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let never = AtomicBool::new(false);
    let spec = spec(16 * MIB, MemMode::Keep, Duration::from_secs(1));
    let (r, killed) = std::thread::scope(|s| {
        let killer = s.spawn(|| {
            let started = Instant::now();
            let victim = loop {
                if let Some(&pid) = workers_of_ours().first() {
                    break pid;
                }
                assert!(started.elapsed() < Duration::from_secs(1), "no worker");
                std::thread::sleep(Duration::from_millis(5));
            };
            std::thread::sleep(Duration::from_millis(200));
            let killed = std::process::Command::new("kill")
                .args(["-9", &victim.to_string()])
                .status()
                .expect("run kill");
            assert!(killed.success());
            victim
        });
        let r = run(&spec, &never).expect("memory load");
        (r, killer.join().expect("killer"))
    });
    assert_eq!((r.oom_kills, r.restarts), (1, 1), "killed {killed}: {r:?}");
    assert_eq!(workers_of_ours(), Vec::<u32>::new(), "workers left behind");
}

/// A load of a minute stopped after 200 ms returns at once (within 2 s) with what
/// it did; streaming writes cover the region at least once.
#[test]
fn a_stopped_load_ends_at_once() {
    let _one = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let stop = AtomicBool::new(false);
    let spec = MemSpec {
        workers: 2,
        ..spec(16 * MIB, MemMode::Bandwidth, Duration::from_secs(60))
    };
    let started = Instant::now();
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            stop.store(true, Ordering::Relaxed);
        });
        run_alone(&spec, &stop)
    });
    assert!(started.elapsed() < Duration::from_secs(2), "{r:?}");
    assert!(r.elapsed_s < 2.0, "{r:?}");
    assert_eq!((r.mode, r.workers), (MemMode::Bandwidth, 2));
    assert!(r.touched_bytes >= 16 * MIB, "{r:?}");
}
