//! `nnb_sys::cgroup` on the host's real cgroup hierarchy (root only): the kernel
//! enforces the grants nnb writes (a CPU quota, write IOPS, a memory limit), the
//! accounting nnb reads shows it, and removal and sweeping leave nothing behind.
//! The tests take turns (one lock), so the CPU and disk measurements do not
//! disturb each other.

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nnb_sys::cgroup::{block_device_of, Cgroup, Grant, Hierarchy, IoLimit};
use nnb_sys::process::is_root;

/// Where these tests make their cgroups.
const PREFIX: &str = "nnb-test";

/// One test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// True when running as root; otherwise fails under CI and skips elsewhere.
fn root_or_skip(test: &str) -> bool {
    nnb_testkit::require(is_root(), &format!("{test}: writing cgroups needs root"))
}

/// This process's run, `nnb-test/run-<pid>`, removed (with what is below it) on drop.
struct Run {
    h: Hierarchy,
    rel: PathBuf,
    _turn: MutexGuard<'static, ()>,
}

impl Run {
    fn new() -> Run {
        let turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let h = Hierarchy::detect().expect("detect the cgroup hierarchy");
        eprintln!("cgroup {:?}", h.version());
        let rel = Path::new(PREFIX).join(format!("run-{}", std::process::id()));
        Run {
            h,
            rel,
            _turn: turn,
        }
    }

    /// A cgroup `leaf` inside the run.
    fn create(&self, leaf: &str) -> Cgroup {
        self.h.create(&self.rel.join(leaf)).expect("create")
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Ok(run) = self.h.create(&self.rel) {
            let _ = run.remove();
        }
        // The prefix goes too once no other run is in it.
        if let Ok(prefix) = self.h.create(Path::new(PREFIX)) {
            for dir in prefix.dirs() {
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
}

/// Starts `script` under `sh` at a raised priority (nice -10, so it gets its grant
/// on a busy machine) inside `cg`: the shell waits for a line on stdin, sent only
/// once it has joined, so nothing of the script runs outside.
fn spawn_in(cg: &Cgroup, script: &str) -> Child {
    let mut child = Command::new("nice")
        .args(["-n", "-10", "sh", "-c"])
        .arg(format!("read _ && {script}"))
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn sh");
    cg.add_process(child.id()).expect("add the child");
    assert!(cg.procs().expect("procs").contains(&child.id()));
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"go\n").expect("start the child");
    child
}

/// Removes `cg`, checks no directory of it is left and that `child` died of SIGKILL.
fn remove_and_reap(cg: &Cgroup, mut child: Child) {
    let dirs = cg.dirs();
    cg.remove().expect("remove");
    for dir in &dirs {
        assert!(!dir.exists(), "{dir:?} is left");
    }
    cg.remove().expect("removing again is fine");
    let status = child.wait().expect("reap");
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
}

/// How much of `what` (from `cg`'s usage) accrues per second over `secs`.
fn rate(cg: &Cgroup, secs: f64, what: fn(&nnb_sys::cgroup::Usage) -> u64) -> f64 {
    let (u0, t0) = (cg.usage().expect("usage"), Instant::now());
    std::thread::sleep(Duration::from_secs_f64(secs));
    let (u1, t1) = (cg.usage().expect("usage"), Instant::now());
    (what(&u1) - what(&u0)) as f64 / (t1 - t0).as_secs_f64()
}

#[test]
fn a_half_cpu_quota_holds_a_spinner_to_half_a_cpu() {
    if !root_or_skip("a_half_cpu_quota_holds_a_spinner_to_half_a_cpu") {
        return;
    }
    let run = Run::new();
    let cg = run.create("cpu");
    let cpu = *nnb_sys::affinity::allowed_cpus()
        .expect("cpus")
        .last()
        .expect("a CPU");
    cg.apply(&Grant {
        cpus: Some(vec![cpu]),
        cpu_quota: Some(0.5),
        ..Grant::default()
    })
    .expect("apply");
    let child = spawn_in(&cg, "while :; do :; done");
    std::thread::sleep(Duration::from_millis(300));
    let cpus = rate(&cg, 2.0, |u| u.cpu_ns) / 1e9;
    eprintln!("spinner with a 0.5 CPU quota: {cpus:.3} CPUs");
    assert!((cpus - 0.5).abs() <= 0.05, "{cpus} CPUs, granted 0.5");
    cg.lift().expect("lift");
    remove_and_reap(&cg, child);
}

#[test]
fn a_write_iops_limit_holds_direct_writes_to_it() {
    if !root_or_skip("a_write_iops_limit_holds_direct_writes_to_it") {
        return;
    }
    let run = Run::new();
    let dir = std::env::temp_dir();
    let device = block_device_of(&dir).expect("the temp dir's disk");
    let cg = run.create("io");
    cg.apply(&Grant {
        io: vec![IoLimit {
            device,
            read_iops: None,
            write_iops: Some(200),
            read_bytes_per_s: None,
            write_bytes_per_s: None,
        }],
        ..Grant::default()
    })
    .expect("apply");
    // 4000 writes: 20 s at 200/s, well under a second unthrottled.
    let file = dir.join(format!("nnb-cgroup-io-{}", std::process::id()));
    let script = format!(
        "dd if=/dev/zero of={} bs=4k count=4000 oflag=direct 2>/dev/null",
        file.display()
    );
    let child = spawn_in(&cg, &script);
    std::thread::sleep(Duration::from_millis(500));
    let iops = rate(&cg, 3.0, |u| u.io_ops);
    eprintln!(
        "dd with 200 write IOPS on {}:{}: {iops:.1} IOPS",
        device.0, device.1
    );
    assert!((iops - 200.0).abs() <= 20.0, "{iops} IOPS, granted 200");
    cg.lift().expect("lift");
    remove_and_reap(&cg, child);
    std::fs::remove_file(&file).expect("remove the dd file");
}

#[test]
fn a_memory_limit_is_never_exceeded() {
    if !root_or_skip("a_memory_limit_is_never_exceeded") {
        return;
    }
    const LIMIT: u64 = 64 << 20;
    let run = Run::new();
    let cg = run.create("memory");
    cg.apply(&Grant {
        memory_bytes: Some(LIMIT),
        ..Grant::default()
    })
    .expect("apply");
    // tail keeps everything since the last 10 lines, and /dev/zero has no newline:
    // it would hold 200 MiB.
    let mut child = spawn_in(&cg, "head -c 200M /dev/zero | tail");
    let (mut peak, mut peak_rss) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        let u = cg.usage().expect("usage");
        peak = peak.max(u.memory_usage_bytes);
        peak_rss = peak_rss.max(u.memory_bytes);
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the allocating child did not end"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    eprintln!(
        "memory limit {LIMIT}: peak usage sampled {peak}, peak rss {peak_rss}, child {status}"
    );
    // v1's usage_in_bytes is "a fuzz value" (the kernel's memory.txt): charges are
    // batched per CPU, 64 pages at most (MEMCG_CHARGE_BATCH), so a sample may read a
    // page or a batch above the limit (67112960, one page over, in CI); the kernel's
    // own high-water mark below must not.
    const FUZZ: u64 = 64 * 4096;
    assert!(
        peak <= LIMIT + FUZZ,
        "usage {peak} above the {LIMIT} limit and its batch"
    );
    assert!(peak_rss > LIMIT / 2, "the child held only {peak_rss} bytes");
    // The kernel's own high-water mark (v1 memory.max_usage_in_bytes, v2 memory.peak).
    let kernel_peak = cg
        .dirs()
        .iter()
        .flat_map(|d| [d.join("memory.max_usage_in_bytes"), d.join("memory.peak")])
        .find_map(|f| std::fs::read_to_string(f).ok())
        .and_then(|t| t.trim().parse::<u64>().ok());
    eprintln!("kernel peak: {kernel_peak:?}");
    assert!(kernel_peak.is_some_and(|p| p <= LIMIT), "{kernel_peak:?}");
    // The out-of-memory killer ended tail (SIGKILL: 128 + 9 from the shell).
    assert_eq!(status.code(), Some(137), "{status}");
    cg.remove().expect("remove");
}

#[test]
fn sweeping_removes_dead_runs_and_keeps_live_ones() {
    if !root_or_skip("sweeping_removes_dead_runs_and_keeps_live_ones") {
        return;
    }
    let run = Run::new();
    // 2^22, the kernel's largest pid_max: no process has this pid.
    let dead = Path::new(PREFIX).join("run-4194304");
    let dead_leaf = run.h.create(&dead.join("t")).expect("create the dead run");
    let mut sleeper = spawn_in(&dead_leaf, "sleep 100");
    let live = run.create("t");
    let removed = run.h.sweep_dead(Path::new(PREFIX)).expect("sweep");
    assert!(removed.contains(&dead), "{removed:?}");
    assert!(!removed.contains(&run.rel), "{removed:?}");
    for dir in dead_leaf.dirs() {
        let run_dir = dir.parent().expect("run dir");
        assert!(!run_dir.exists(), "{run_dir:?} is left");
    }
    for dir in live.dirs() {
        assert!(dir.is_dir(), "{dir:?} was removed");
    }
    let status = sleeper.wait().expect("reap");
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
    live.remove().expect("remove");
}
