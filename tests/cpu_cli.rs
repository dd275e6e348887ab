//! End-to-end tests of `nnb cpu`: a real pinned burn on this machine whose threads must
//! have run where the placement put them, the placement plan for a 96-CPU fixture, and
//! every kind of bad input exiting with code 2 and a message naming the problem.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::cli::{json, json_of, nnb};

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/burn/fixtures")
        .join(name)
        .display()
        .to_string()
}

/// Two threads (one if this machine has a single CPU), compact placement: every
/// thread of every repetition was seen on its planned CPU at start and end, did all
/// its ops, and produced cpu_burn's checksum; the environment and clock are recorded.
#[test]
fn real_burn_runs_where_the_placement_says() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get().min(2));
    let threads = cpus.to_string();
    let out = nnb(&[
        "cpu",
        "--json",
        "--threads",
        &threads,
        "--pin",
        "compact",
        "--ops",
        "2000000",
        "--reps",
        "2",
        "--warmup",
        "1",
    ]);
    let v = json_of(&out);
    assert_eq!(v["environment"]["nnb_version"], env!("CARGO_PKG_VERSION"));
    assert!(v["environment"]["steal_ticks"].is_u64());
    assert!(v["environment"]["steal_ticks_after"].is_u64());
    assert!(v["clock"]["freq_hz"].as_f64().unwrap() > 0.0);
    assert_eq!(v["workload"]["name"], "fpadd");
    let step = &v["steps"][0];
    assert_eq!(step["threads"].as_u64().unwrap() as usize, cpus);
    let slots = step["placement"]["slots"].as_array().unwrap();
    let runs = step["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "warm-up runs are not reported");
    let mut checksums = Vec::new();
    for run in runs {
        let recs = run["threads"].as_array().unwrap();
        assert_eq!(recs.len(), slots.len());
        for (rec, slot) in recs.iter().zip(slots) {
            let planned = &slot["cpu"];
            assert!(planned.is_u64(), "compact pins every thread");
            assert_eq!(&rec["planned_cpu"], planned);
            assert_eq!(&rec["cpu_start"], planned, "thread ran elsewhere at start");
            assert_eq!(&rec["cpu_end"], planned, "thread ran elsewhere at end");
            assert_eq!(rec["affinity"], Value::Array(vec![planned.clone()]));
            assert_eq!(rec["ops"], 2_000_000);
            assert!(rec["cycles"].as_u64().unwrap() > 0);
            checksums.push(rec["checksum"].as_u64().unwrap());
        }
        let wall = run["wall_ns"].as_f64().unwrap();
        let longest = recs
            .iter()
            .map(|r| r["elapsed_ns"].as_f64().unwrap())
            .fold(0.0, f64::max);
        assert!(wall >= longest && wall > 0.0);
    }
    assert!(checksums.windows(2).all(|w| w[0] == w[1]) && checksums[0] != 0);
    let rt = &step["runtime_s"];
    assert_eq!(rt["n"], 2);
    assert!(rt["min"].as_f64().unwrap() <= rt["median"].as_f64().unwrap());
    assert!(rt["ci95_low"].as_f64().unwrap() <= rt["mean"].as_f64().unwrap());
}

/// A fixed-time sweep reports every thread count with degradation against the first.
#[test]
fn sweep_reports_degradation_per_step() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get().min(2));
    let sweep = format!("1..{cpus}");
    let v = json_of(&nnb(&[
        "cpu",
        "--json",
        "--sweep",
        &sweep,
        "--duration",
        "50ms",
        "--reps",
        "2",
        "--warmup",
        "0",
        "--workload",
        "int",
    ]));
    let steps = v["sweep"]["analysis"]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), cpus);
    assert_eq!(steps[0]["degradation_pct"], 0.0);
    assert_eq!(v["sweep"]["metric"], "s_per_op_per_thread");
    for (i, s) in v["steps"].as_array().unwrap().iter().enumerate() {
        assert_eq!(s["threads"].as_u64().unwrap() as usize, i + 1);
        assert!(s["ops_per_sec"]["mean"].as_f64().unwrap() > 0.0);
    }
}

/// CSV: environment in comments, a header, one row per thread per repetition.
#[test]
fn csv_has_a_row_per_thread_and_rep() {
    let out = nnb(&[
        "cpu",
        "--csv",
        "--threads",
        "1",
        "--ops",
        "100000",
        "--reps",
        "3",
        "--warmup",
        "0",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("# environment: {"));
    let rows: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(rows[0].starts_with("threads,rep,thread,planned_cpu"));
    assert_eq!(rows.len(), 1 + 3);
}

/// Where 96 threads land on an m5.metal under --pin cores: one per physical core
/// first (cpus 0-47, cores 0-47, package 0 then 1), then the SMT siblings 48-95.
#[test]
fn dry_run_places_96_threads_on_m5_metal() {
    let m5 = fixture("m5.metal");
    let args = ["cpu", "--dry-run", "--sysfs-root", &m5, "--threads", "96"];
    let v = json_of(&nnb(&[&args[..], &["--pin", "cores", "--json"]].concat()));
    assert_eq!(v["topology"]["logical"], 96);
    let slots = v["placements"][0]["slots"].as_array().unwrap();
    assert_eq!(slots.len(), 96);
    for (i, s) in slots.iter().enumerate() {
        assert_eq!(s["cpu"].as_u64().unwrap() as usize, i, "thread {i}");
        assert_eq!(s["core"].as_u64().unwrap() as usize, i % 48, "thread {i}");
        assert_eq!(
            s["package"].as_u64().unwrap() as usize,
            (i % 48) / 24,
            "thread {i}"
        );
    }
    // The human form prints a row per thread.
    let out = nnb(&args);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).lines().count() > 96);
}

/// Each bad input exits with code 2 and says what is wrong.
#[test]
fn bad_input_exits_2_with_a_clear_message() {
    let offline = fixture("offline-cpu");
    let cases: &[(&[&str], &str)] = &[
        (&["cpu", "--threads", "0"], "--threads"),
        (&["cpu", "--pin", "bogus"], "bogus"),
        (&["cpu", "--cpus", "9999"], "CPU 9999 does not exist"),
        (
            &["cpu", "--dry-run", "--sysfs-root", &offline, "--cpus", "3"],
            "CPU 3 is offline",
        ),
        (&["cpu", "--ops", "0"], "--ops"),
        (&["cpu", "--reps", "0"], "--reps"),
        (&["cpu", "--sweep", "4..2"], "ends before it starts"),
        (&["cpu", "--sweep", "0..2"], "starts at 0"),
        (&["cpu", "--sweep", "1..4:0"], "step 0"),
        (&["cpu", "--sweep", "lots"], "START..END"),
        (&["cpu", "--workload", "avx"], "unknown workload 'avx'"),
        (
            &["cpu", "--pool", "sometimes"],
            "unknown event pool 'sometimes'",
        ),
        (&["cpu", "--duration", "0s"], "bad duration"),
        (&["cpu", "--clock", "hpet"], "unknown clock 'hpet'"),
        (&["cpu", "--threads", "1024"], "--oversubscribe"),
        // NM9: beyond the agent's bound, refused before a slot is planned (it used to
        // abort with rc 134 allocating 56 TB).
        (
            &[
                "cpu",
                "--threads",
                "1000000000000",
                "--oversubscribe",
                "--dry-run",
            ],
            "1000000000000 threads is more than 1024",
        ),
        (
            &["cpu", "--threads", "1025", "--oversubscribe", "--dry-run"],
            "--threads: 1025 threads is more than 1024",
        ),
        (
            &[
                "cpu",
                "--sweep",
                "1..10000000:5000000",
                "--oversubscribe",
                "--dry-run",
            ],
            "--sweep: 10000000 threads is more than 1024",
        ),
        (&["cpu", "--sysfs-root", &offline], "--dry-run"),
        (
            &["cpu", "--duration", "1s", "--load", "0"],
            "0 is not in 1..=100",
        ),
        (
            &["cpu", "--duration", "1s", "--load", "150"],
            "150 is not in 1..=100",
        ),
        (&["cpu", "--load", "50"], "--duration"),
    ];
    for (args, needle) in cases {
        let out = nnb(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
    }
}

/// `--load 50` runs a fixed-time burn at half load and records the share in the
/// report and in every run.
#[test]
fn load_is_recorded() {
    let v = json(&[
        "cpu",
        "--json",
        "--threads",
        "1",
        "--duration",
        "200ms",
        "--load",
        "50",
        "--reps",
        "2",
        "--warmup",
        "0",
    ]);
    assert_eq!(v["duty"], 0.5);
    let runs = v["steps"][0]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for run in runs {
        assert_eq!(run["duty"], 0.5);
        assert_eq!(run["work"]["duration_ns"], 200_000_000);
    }
    // Without --load there is no duty.
    let plain = json(&["cpu", "--json", "--threads", "1", "--duration", "50ms"]);
    assert!(plain.get("duty").is_none());
    assert!(plain["steps"][0]["runs"][0].get("duty").is_none());
}

/// `--pool shared`: the report and every run say so, and the threads' ops add up to
/// `--ops` exactly (50,001 `int` ops drawn in batches of 20,000), each thread with its
/// busy time; per-thread (the default) gives every thread `--ops`.
#[test]
fn a_shared_pool_is_recorded_and_its_events_add_up() {
    let burn = |pool: &str, ops: &str| {
        json(&[
            "cpu",
            "--json",
            "--threads",
            "2",
            "--pin",
            "none",
            "--workload",
            "int",
            "--ops",
            ops,
            "--pool",
            pool,
            "--reps",
            "2",
            "--warmup",
            "0",
        ])
    };
    let shared = burn("shared", "50001");
    assert_eq!(shared["pool"], "shared");
    for run in shared["steps"][0]["runs"].as_array().unwrap() {
        assert_eq!(run["pool"], "shared");
        let threads = run["threads"].as_array().unwrap();
        let ops: u64 = threads.iter().map(|t| t["ops"].as_u64().unwrap()).sum();
        assert_eq!(ops, 50_001, "{threads:?}");
        assert_eq!(run["total_ops"], 50_001);
        assert!(threads.iter().all(|t| t["busy_ns"].as_f64().unwrap() > 0.0));
    }
    let per_thread = burn("per-thread", "1001");
    assert_eq!(per_thread["pool"], "per-thread");
    for t in per_thread["steps"][0]["runs"][0]["threads"]
        .as_array()
        .unwrap()
    {
        assert_eq!(t["ops"], 1001);
    }
}

/// `1h` is a duration for `nnb cpu` as for every other command (it used to be refused).
#[test]
fn an_hour_is_a_duration() {
    let out = nnb(&["cpu", "--duration", "1h", "--dry-run"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
}

/// A CPU range far beyond any machine is refused before it is expanded (it used to be
/// expanded first: billions of entries, then out of memory).
#[test]
fn a_huge_cpu_range_is_refused_at_once() {
    let out = nnb(&["cpu", "--cpus", "0-1000000000", "--dry-run"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("CPU 1000000000 does not exist"), "{err}");
}

/// T9: `--load 75` beside a spinner pinned to the same CPU cannot be busy 75% of the
/// time (the scheduler shares the CPU, about half each): the record keeps the request
/// as `duty` and says what the threads got as `achieved_duty`, well below it, and a
/// warning says so.
#[test]
fn a_load_that_the_cpu_cannot_give_is_recorded_as_achieved() {
    use std::sync::atomic::{AtomicBool, Ordering};

    let Some(&cpu) = nnb_burn::placement::allowed_cpus().last() else {
        panic!("no allowed CPU");
    };
    let stop = AtomicBool::new(false);
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            nnb_burn::burner::pin_current_thread(cpu).expect("pin the spinner");
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        let out = nnb(&[
            "cpu",
            "--json",
            "--cpus",
            &cpu.to_string(),
            "--load",
            "75",
            "--duration",
            "2s",
            "--reps",
            "1",
            "--warmup",
            "0",
        ]);
        stop.store(true, Ordering::Relaxed);
        out
    });
    let v = json_of(&out);
    let run = &v["steps"][0]["runs"][0];
    assert_eq!(run["duty"], 0.75);
    let achieved = run["achieved_duty"].as_f64().expect("achieved_duty");
    assert!((0.05..0.6).contains(&achieved), "achieved {achieved}");
    let per_thread = run["threads"][0]["achieved_duty"].as_f64().unwrap();
    assert_eq!(per_thread, achieved);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("asked for 75% load, got"), "{err}");
}
