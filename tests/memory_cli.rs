//! End-to-end tests of `nnb memory`: the JSON report of a real load, the summary, bad
//! input exiting with code 2 and a message naming the problem, and (root) a load
//! larger than its cgroup's memory limit, whose workers the OOM killer takes and nnb
//! restarts while nnb itself survives.

use std::path::PathBuf;
use std::process::Command;

use nnb_controller::provider::netns::is_root;

use crate::support::cli::{json, json_of, nnb, NNB};
use crate::support::netns::skip_or_fail;

const MIB: u64 = 1 << 20;

/// 32 MiB kept for 500 ms: every field of the report, the target reached, nothing
/// killed, and the environment beside it.
#[test]
fn json_reports_the_load() {
    let v = json(&["memory", "--json", "--size", "32M", "--duration", "500ms"]);
    assert_eq!(v["mode"], "keep");
    assert_eq!(v["workers"], 1);
    assert_eq!(v["target_bytes"], 32 * MIB);
    let peak = v["peak_rss_bytes"].as_u64().unwrap();
    // The 32 MiB touched, plus what the worker shares with nnb (a few MiB).
    assert!((32 * MIB..48 * MIB).contains(&peak), "{peak}");
    assert!(v["time_to_target_s"].as_f64().unwrap() > 0.0);
    assert_eq!(v["oom_kills"], 0);
    assert_eq!(v["restarts"], 0);
    assert!(v["touched_bytes"].as_u64().unwrap() >= 32 * MIB);
    assert!(v["touched_bytes_per_s"].as_f64().unwrap() > 0.0);
    assert!(v["elapsed_s"].as_f64().unwrap() >= 0.5);
    assert_eq!(v["environment"]["nnb_version"], env!("CARGO_PKG_VERSION"));
}

/// T19: a 16 MiB worker's peak RSS is its 16 MiB, not 16 MiB plus the ~3.4 MiB of
/// nnb's pages it inherited at fork (VmRSS counted them: 20.2 MB for 16.8 MB). Up to
/// 1 MiB of the worker's own pages besides its region (its stack, the pages it wrote
/// after the fork) are allowed.
#[test]
fn the_peak_rss_is_the_workers_own_memory() {
    let v = json(&["memory", "--json", "--size", "16M", "--duration", "500ms"]);
    let peak = v["peak_rss_bytes"].as_u64().unwrap();
    assert!(
        (16 * MIB..17 * MIB).contains(&peak),
        "peak {:.2} MiB for a 16 MiB load",
        peak as f64 / MIB as f64
    );
}

/// The summary says the RSS reached, how soon, and the OOM kills; bandwidth mode with
/// two workers says its write rate.
#[test]
fn the_summary_says_rss_time_and_kills() {
    let out = nnb(&[
        "memory",
        "--size",
        "16MiB",
        "--workers",
        "2",
        "--mode",
        "bandwidth",
        "--duration",
        "300ms",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("16.0 MiB in 2 workers (bandwidth)"), "{text}");
    for needle in [
        "RSS reached",
        "time to reach",
        "OOM kills      0",
        "write rate",
    ] {
        assert!(text.contains(needle), "{needle:?} missing: {text}");
    }
}

/// Each bad input exits with code 2 and says what is wrong.
#[test]
fn bad_input_exits_2_with_a_clear_message() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["memory", "--size", "1k", "--duration", "1s"],
            "1.0 KiB (1024 bytes) is less than one page (4096 bytes)",
        ),
        (
            &["memory", "--size", "100000G", "--duration", "1s"],
            "MemTotal",
        ),
        (&["memory", "--size", "lots", "--duration", "1s"], "lots"),
        (
            &[
                "memory",
                "--size",
                "1M",
                "--workers",
                "0",
                "--duration",
                "1s",
            ],
            "1 to 256 workers, not 0",
        ),
        (
            &[
                "memory",
                "--size",
                "1M",
                "--workers",
                "300",
                "--duration",
                "1s",
            ],
            "1 to 256 workers, not 300",
        ),
        (
            &[
                "memory",
                "--size",
                "8k",
                "--workers",
                "3",
                "--duration",
                "1s",
            ],
            "less than one page",
        ),
        (
            &[
                "memory",
                "--size",
                "1M",
                "--mode",
                "stream",
                "--duration",
                "1s",
            ],
            "unknown memory mode 'stream'",
        ),
        (&["memory", "--size", "1M", "--duration", "0s"], "duration"),
        (&["memory", "--size", "1M"], "--duration"),
    ];
    for (args, needle) in cases {
        let out = nnb(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
    }
}

/// A cgroup v1 memory cgroup, removed on drop (its processes killed first).
struct MemCgroup(PathBuf);

impl MemCgroup {
    fn create(limit: u64) -> MemCgroup {
        let dir = PathBuf::from(format!(
            "/sys/fs/cgroup/memory/nnb-memtest-{}",
            std::process::id()
        ));
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        let cg = MemCgroup(dir);
        std::fs::write(cg.0.join("memory.limit_in_bytes"), limit.to_string())
            .expect("memory.limit_in_bytes");
        cg
    }
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        let procs = std::fs::read_to_string(self.0.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.split_whitespace() {
            let _ = Command::new("kill").args(["-9", pid]).status();
        }
        for _ in 0..50 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        eprintln!("could not remove {}", self.0.display());
    }
}

/// Root: `nnb memory --size 128M` in a cgroup limited to 64 MiB. The worker hits the
/// limit, the cgroup's OOM killer takes it (not nnb: the worker is the biggest and has
/// oom_score_adj 1000), nnb counts and restarts it, the peak RSS stays within the limit
/// (plus 4 MiB of slack: the pages the worker shares with nnb are charged once but
/// counted in its VmRSS), the target is never reached, and nnb reports it all.
#[test]
fn a_cgroup_limit_oom_kills_workers_and_nnb_reports_it() {
    if !is_root() {
        skip_or_fail("a memory cgroup needs root");
        return;
    }
    let cg = MemCgroup::create(64 * MIB);
    // The shell joins the cgroup, then becomes nnb: every page nnb and its workers
    // touch is charged there.
    let out = Command::new("sh")
        .arg("-c")
        .arg("echo $$ > \"$0\" && exec \"$@\"")
        .arg(cg.0.join("cgroup.procs"))
        .arg(NNB)
        .args(["memory", "--size", "128M", "--duration", "2s", "--json"])
        .output()
        .expect("run sh");
    let v = json_of(&out);
    let failcnt = std::fs::read_to_string(cg.0.join("memory.failcnt")).unwrap_or_default();
    let kills = v["oom_kills"].as_u64().unwrap();
    assert!(kills >= 1, "no OOM kill (failcnt {failcnt}): {v}");
    assert!(v["restarts"].as_u64().unwrap() >= 1, "{v}");
    let peak = v["peak_rss_bytes"].as_u64().unwrap();
    assert!(peak <= 68 * MIB, "peak RSS {} MiB", peak / MIB);
    assert!(peak >= 32 * MIB, "peak RSS {} MiB", peak / MIB);
    assert!(v["time_to_target_s"].is_null(), "{v}");
}
