//! The disk load generator on this machine's disk: a paced direct-I/O run reaches its
//! target and leaves nothing behind, a stop ends a long run at once, memory-backed
//! directories are refused for direct I/O, the sweep removes only what a dead
//! generator left (never opening a FIFO, a link or another user's file), and names
//! taken beforehand are skipped.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nnb_burn::disk::{run, sweep_stale, DiskError, DiskSpec};

/// A fresh directory on a disk: under /tmp (ext4 on the build machines), or under
/// cargo's target directory where /tmp keeps its files in memory.
fn disk_dir() -> tempfile::TempDir {
    let tmp = Path::new("/tmp");
    let base = match nnb_sys::file::fs_stats(tmp) {
        Ok(fs) if !fs.in_memory() => tmp.to_path_buf(),
        _ => PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
    };
    tempfile::Builder::new()
        .prefix("nnb-disk-test")
        .tempdir_in(base)
        .expect("temp dir")
}

fn spec(dir: &Path) -> DiskSpec {
    DiskSpec {
        dir: dir.to_path_buf(),
        file_size: 16 << 20,
        block_size: 4096,
        iops: Some(200.0),
        read_fraction: 0.5,
        queue_depth: 4,
        direct: true,
        duration: Duration::from_secs(2),
    }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// 2 s at 200 IOPS with direct I/O: 400 operations scheduled, achieved within 5%
/// of 200 per second, about half of them reads; the scratch file is gone afterwards.
#[test]
fn paced_direct_run_reaches_its_target_and_cleans_up() {
    let dir = disk_dir();
    let stop = AtomicBool::new(false);
    let r = run(&spec(dir.path()), &stop).expect("disk run");
    // Paced, not flat out: near its 200 and never above the schedule. How close it
    // gets is a timing claim, measured beside fio by benches/compare_fio.sh (a test
    // sharing 2 CPUs with CPU-heavy tests can fall 10% short).
    assert!(
        (150.0..=205.0).contains(&r.iops),
        "achieved {:.1} IOPS of 200: {r:?}",
        r.iops
    );
    assert_eq!(r.ops, r.reads + r.writes);
    assert!(r.ops <= 400, "more operations than scheduled: {}", r.ops);
    // 400 fair coin flips: 200 reads expected, sd 10.
    assert!(
        (150..=250).contains(&r.reads),
        "{} reads of {}",
        r.reads,
        r.ops
    );
    assert_eq!(r.bytes, r.ops * 4096);
    assert!((r.bandwidth_bps - r.iops * 4096.0 * 8.0).abs() < 1e-6 * r.bandwidth_bps);
    assert!(r.direct && !r.stopped);
    assert!(r.latency.is_some() && r.read_latency.is_some() && r.write_latency.is_some());
    let pacing = r.pacing.expect("a paced run reports its pacing");
    assert!(pacing.p50_ns <= pacing.p99_ns && pacing.p99_ns <= pacing.max_ns);
    assert_eq!(r.file.parent(), Some(dir.path()));
    assert!(!r.file.exists(), "{} was left behind", r.file.display());
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
}

/// The file is really written (allocated, not sparse) while the generator runs, and
/// raising the stop flag ends a 60 s run at once, with its report and without its
/// file.
#[test]
fn a_stop_ends_the_run_and_removes_the_file() {
    let dir = disk_dir();
    let stop = AtomicBool::new(false);
    let s = DiskSpec {
        iops: None,
        duration: Duration::from_secs(60),
        ..spec(dir.path())
    };
    std::thread::scope(|scope| {
        let runner = scope.spawn(|| run(&s, &stop));
        let deadline = Instant::now() + Duration::from_secs(20);
        let allocated = loop {
            let used = entries(dir.path()).iter().find_map(|name| {
                let md = std::fs::metadata(dir.path().join(name)).ok()?;
                Some(md.blocks() * 512)
            });
            if used.is_some_and(|b| b >= s.file_size) || Instant::now() > deadline {
                break used;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        stop.store(true, Ordering::Relaxed);
        let stopped_at = Instant::now();
        let r = runner.join().expect("runner").expect("disk run");
        let took = stopped_at.elapsed();
        assert!(
            allocated.is_some_and(|b| b >= s.file_size),
            "the scratch file never had its {} bytes on disk: {allocated:?}",
            s.file_size
        );
        assert!(r.stopped, "{r:?}");
        assert!(r.elapsed_s < 30.0, "{r:?}");
        // 5 ms stop polls and one 4 KiB operation: a second is plenty on a busy box.
        assert!(
            took < Duration::from_secs(1),
            "the run took {took:?} to stop"
        );
        assert!(r.pacing.is_none(), "unpaced runs have no schedule");
    });
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
}

/// Direct I/O into a memory-backed filesystem loads no disk: refused, naming it,
/// and nothing is left there.
#[test]
fn direct_io_on_tmpfs_is_refused() {
    let shm = Path::new("/dev/shm");
    match nnb_sys::file::fs_stats(shm) {
        Ok(fs) if fs.in_memory() => {}
        other => {
            eprintln!("skipped: /dev/shm is not a tmpfs here ({other:?})");
            return;
        }
    }
    let dir = tempfile::Builder::new()
        .prefix("nnb-disk-test")
        .tempdir_in(shm)
        .expect("temp dir");
    let err = run(&spec(dir.path()), &AtomicBool::new(false)).expect_err("tmpfs");
    assert!(matches!(err, DiskError::InMemory { .. }), "{err:?}");
    assert!(err.is_bad_input());
    let msg = err.to_string();
    assert!(
        msg.contains("tmpfs") && msg.contains("pick a directory on a disk"),
        "{msg}"
    );
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
}

/// A file named with a pid no process can have (the kernel's pid_max) is removed; one
/// with this process's pid, one whose lock is held, and other files stay.
#[test]
fn sweep_removes_only_dead_generators_files() {
    let dir = disk_dir();
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .expect("pid_max")
        .trim()
        .parse()
        .expect("a number");
    let dead = format!("nnb-disk-{pid_max}-0.dat");
    let locked = format!("nnb-disk-{pid_max}-1.dat");
    let own = format!("nnb-disk-{}-0.dat", std::process::id());
    for name in [&dead, &locked, &own, &"notes.dat".to_string()] {
        std::fs::write(dir.path().join(name), b"x").expect("write");
    }
    let holder = std::fs::File::open(dir.path().join(&locked)).expect("open");
    assert!(nnb_sys::file::try_lock_exclusive(&holder).expect("lock"));
    assert_eq!(sweep_stale(dir.path()).expect("sweep"), 1);
    let mut kept = vec![locked.clone(), own, "notes.dat".into()];
    kept.sort();
    assert_eq!(entries(dir.path()), kept);
    drop(holder);
    assert_eq!(sweep_stale(dir.path()).expect("sweep"), 1);
    assert!(!dir.path().join(&locked).exists());
}

/// A name no live process can have: the kernel's pid_max.
fn dead_pid() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .expect("pid_max")
        .trim()
        .parse()
        .expect("a number")
}

/// `mkfifo path`, through the tool (the tests have no `unsafe`).
fn mkfifo(path: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo")
        .success();
    assert!(ok, "mkfifo {}", path.display());
}

/// Runs the sweep of `dir` on a thread and waits at most 20 s for it: a sweep that
/// opens a FIFO blocks for ever. On a timeout every FIFO in `fifos` is opened for
/// writing (which frees a reader blocked on it) and the test fails.
fn bounded_sweep(dir: &Path, fifos: &[&Path]) -> usize {
    let (tx, rx) = std::sync::mpsc::channel();
    let swept = dir.to_path_buf();
    std::thread::spawn(move || tx.send(sweep_stale(&swept).expect("sweep")));
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(n) => n,
        Err(_) => {
            for fifo in fifos {
                let _ = std::fs::OpenOptions::new().write(true).open(fifo);
            }
            panic!("the sweep of {} blocked for 20 s", dir.display());
        }
    }
}

/// Reliability review NM1 and NL2: a FIFO named like a dead generator's file, and
/// links so named to a FIFO and to a root-only file elsewhere, are left alone: the
/// sweep neither blocks on them nor opens (and locks) what the links point at; the
/// link's target keeps its content, and a real stale file beside them still goes.
#[test]
fn the_sweep_never_opens_a_fifo_or_follows_a_link() {
    let dir = disk_dir();
    let elsewhere = tempfile::tempdir().expect("temp dir");
    let dead = dead_pid();
    let fifo = dir.path().join(format!("nnb-disk-{dead}-0.dat"));
    mkfifo(&fifo);
    let far_fifo = elsewhere.path().join("pipe");
    mkfifo(&far_fifo);
    let secret = elsewhere.path().join("secret.conf");
    std::fs::write(&secret, b"ORIGINAL ROOT-ONLY CONTENT").expect("write");
    let to_fifo = dir.path().join(format!("nnb-disk-{dead}-1.dat"));
    std::os::unix::fs::symlink(&far_fifo, &to_fifo).expect("symlink");
    let to_secret = dir.path().join(format!("nnb-disk-{dead}-2.dat"));
    std::os::unix::fs::symlink(&secret, &to_secret).expect("symlink");
    let stale = format!("nnb-disk-{dead}-3.dat");
    std::fs::write(dir.path().join(&stale), b"x").expect("write");
    assert_eq!(bounded_sweep(dir.path(), &[&fifo, &far_fifo]), 1);
    let mut kept: Vec<String> = [&fifo, &to_fifo, &to_secret]
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    kept.sort();
    assert_eq!(entries(dir.path()), kept);
    assert_eq!(
        std::fs::read(&secret).expect("read"),
        b"ORIGINAL ROOT-ONLY CONTENT"
    );
}

/// Reliability review NM1 ("skip entries not owned by the caller"): another user's
/// file named like a dead generator's in a directory that is not theirs (a shared
/// scratch directory) is left, and never locked.
#[test]
fn the_sweep_leaves_other_users_files() {
    if !nnb_testkit::require_root("giving a file to another uid") {
        return;
    }
    let dir = disk_dir();
    let theirs = dir.path().join(format!("nnb-disk-{}-0.dat", dead_pid()));
    std::fs::write(&theirs, b"x").expect("write");
    // A uid no account has, standing for another local user.
    std::os::unix::fs::lchown(&theirs, Some(3_999_999), None).expect("chown");
    assert_eq!(bounded_sweep(dir.path(), &[]), 0);
    assert!(theirs.exists());
}

/// Reliability review NM10: names this process would use next, created beforehand
/// (as another user can in a shared directory), do not fail the load: it takes the
/// next free name, and leaves the others' files alone.
#[test]
fn taken_scratch_names_are_skipped() {
    let dir = disk_dir();
    // Other tests of this binary use some numbers first: these cover the next.
    let taken: Vec<String> = (0..64)
        .map(|n| format!("nnb-disk-{}-{n}.dat", std::process::id()))
        .collect();
    for name in &taken {
        std::fs::write(dir.path().join(name), b"").expect("write");
    }
    let quick = DiskSpec {
        file_size: 1 << 20,
        iops: None,
        direct: false,
        duration: Duration::from_millis(100),
        ..spec(dir.path())
    };
    let r = run(&quick, &AtomicBool::new(false)).expect("a free name is taken");
    assert!(!taken.contains(&r.file.file_name().unwrap().to_string_lossy().into_owned()));
    let mut kept = taken.clone();
    kept.sort();
    assert_eq!(entries(dir.path()), kept);
}
