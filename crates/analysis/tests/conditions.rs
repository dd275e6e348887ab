//! What the measured jobs ran under (format version 4): steal on their CPUs and their
//! CPUs' effective frequency qualify the levels they happened at. The staircase
//! fixture, made a version-4 run by hand: every test record ran at 3000 MHz but
//! `busy/neighbors=2` (2800, 2790, 2810 MHz: median 2800, (3000 - 2800) / 3000 =
//! 6.7% below the fastest level, past the 5% line) and `idle/neighbors=1` (2900 MHz:
//! 3.3%, within it); `busy/neighbors=1` had steal in two repetitions, 25 and 12 ticks
//! at 100 per second = 0.37 s; the warm-up of `busy/neighbors=0` had 500 ticks, which
//! do not count.

use nnb_analysis::read::{read_run, Run};
use nnb_analysis::tables::{findings, Analyses};
use serde_json::{json, Value};

use crate::fixture::copied;

/// Puts what a version-4 agent reports into a record: the raw result's `steal`,
/// `uptime_s` and `freq`, and the sample's columns made from them.
fn ran_under(r: &mut Value, steal_ticks: u64, mhz: f64) {
    let before = 1000;
    r["format_version"] = json!(4);
    r["result"] = json!({"burn": {}, "steal": {"cpus": [0], "ticks": steal_ticks,
        "user_hz": 100, "before": before, "after": before + steal_ticks},
        "uptime_s": 3600.0, "freq": {"mhz": mhz, "source": "cpuinfo"}});
    r["steal_ticks_before"] = json!(before);
    r["steal_ticks_after"] = json!(before + steal_ticks);
    r["steal_s"] = json!(steal_ticks as f64 / 100.0);
    r["uptime_s"] = json!(3600.0);
    r["effective_mhz"] = json!(mhz);
    r["freq_source"] = json!("cpuinfo");
}

fn v4_staircase() -> (tempfile::TempDir, Run) {
    let dir = copied(
        "staircase",
        |m| m["format_version"] = json!(4),
        |r| {
            if r["status"] != "ok" {
                r["format_version"] = json!(4);
                return;
            }
            let (steal, mhz) = match r["step"].as_str().unwrap_or_default() {
                "busy/neighbors=0/warmup=1" => (500, 3000.0),
                "busy/neighbors=1/rep=2" => (25, 3000.0),
                "busy/neighbors=1/rep=3" => (12, 3000.0),
                "busy/neighbors=2/rep=1" => (0, 2800.0),
                "busy/neighbors=2/rep=2" => (0, 2790.0),
                "busy/neighbors=2/rep=3" => (0, 2810.0),
                s if s.starts_with("idle/neighbors=1/") => (0, 2900.0),
                _ => (0, 3000.0),
            };
            ran_under(r, steal, mhz);
        },
    );
    let run = read_run(dir.path()).unwrap();
    (dir, run)
}

#[test]
fn steal_and_a_frequency_drop_are_noted_where_they_happened() {
    let (_d, run) = v4_staircase();
    let a = Analyses::of(&run).unwrap();
    let f = findings(&run, &a).unwrap();
    let steal: Vec<&String> = f.iter().filter(|x| x.starts_with("steal")).collect();
    assert_eq!(
        steal,
        [
            "steal in 2 record(s), 0.37 s in all, during busy/neighbors=1 (0.37 s): the \
          hypervisor ran something else on the measured jobs' CPUs (counted where it is \
          above 2 ticks per CPU and 1% of the job's CPU time, the counter's quantisation)"
        ],
        "{f:?}"
    );
    let freq: Vec<&String> = f.iter().filter(|x| x.contains("frequency")).collect();
    assert_eq!(
        freq,
        [
            "effective CPU frequency more than 5% below the tenant's fastest level in 1 \
          level(s): test at busy/neighbors=2: 2800 of 3000 MHz (-6.7%, cpuinfo): those \
          CPUs ran slower, whatever the neighbors did"
        ],
        "{f:?}"
    );
    let d = a.degradation.unwrap();
    let flags = |group: &str, label: &str| {
        let g = d.groups.iter().find(|g| g.group.name() == group).unwrap();
        let l = g.levels.iter().find(|l| l.label == label).unwrap();
        l.flags.clone()
    };
    assert_eq!(flags("busy", "neighbors=1"), ["steal 0.37 s"]);
    assert_eq!(flags("busy", "neighbors=2"), ["freq -6.7%"]);
    assert!(flags("busy", "neighbors=0").is_empty());
    assert!(flags("idle", "neighbors=1").is_empty());
}

/// The conditions are columns of the samples table, null where a record has none
/// (the failed step).
#[test]
fn the_conditions_are_columns() {
    let (_d, run) = v4_staircase();
    let mhz: Vec<Option<f64>> = run
        .samples
        .column("effective_mhz")
        .unwrap()
        .f64()
        .unwrap()
        .iter()
        .collect();
    assert_eq!(mhz[0], Some(3000.0));
    assert_eq!(mhz[23], None, "the failed step");
    let after: Vec<Option<u64>> = run
        .samples
        .column("steal_ticks_after")
        .unwrap()
        .u64()
        .unwrap()
        .iter()
        .collect();
    assert_eq!(after[0], Some(1500));
}

/// A version-3 run (the same fixture, marked 3) still reads: no conditions, no
/// frequency finding.
#[test]
fn a_v3_run_still_reads() {
    let dir = copied(
        "staircase",
        |m| m["format_version"] = json!(3),
        |r| r["format_version"] = json!(3),
    );
    let run = read_run(dir.path()).unwrap();
    assert_eq!(run.manifest.format_version, 3);
    assert_eq!(run.samples.height(), 24);
    let uptime = run.samples.column("uptime_s").unwrap();
    assert_eq!(uptime.null_count(), 24);
    let f = findings(&run, &Analyses::of(&run).unwrap()).unwrap();
    assert!(!f.iter().any(|x| x.contains("frequency")), "{f:?}");
}
