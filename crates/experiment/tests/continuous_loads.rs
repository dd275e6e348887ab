//! A throughput staircase's `loads`: continuous (the thesis': one load per node from
//! the level where it joins to the end, a window of the sink's series per level) or
//! restart-per-level (every node present sends afresh at each level).

use std::time::Duration;

use nnb_agent::jobs::JobSpec;
use nnb_experiment::parse;
use nnb_experiment::plan::{expand, Plan, SINK};

const TENANTS: &str = r#"
[[tenants]]
name = "test"
role = "test"
vcpus = 2

[[tenants]]
name = "nb"
count = 3
role = "neighbor"
vcpus = 2
"#;

fn staircase(extra: &str) -> String {
    format!(
        "name = \"t\"\nrepetitions = 2\nsettle = \"10s\"\n[network]\nmode = \"emulated\"\nhost_bw = \"100M\"\n\
         {TENANTS}\n[scenario]\nkind = \"throughput-staircase\"\nstep = 2\n\
         sample_interval = \"500ms\"\nwindow = 6\nstreams = 2\n{extra}"
    )
}

fn plan(src: &str) -> Plan {
    let exp = parse("p.toml", src, Some(64)).unwrap_or_else(|e| panic!("{e}"));
    expand(&exp, 64)
}

/// Continuous by default: at every level each present node runs the same load in
/// the background (no duration, not sampled: it carries over from the level where
/// the node joined, so the background assignments of earlier nodes are identical
/// from level to level), and every node's measured job is a window of 6 x 500 ms of
/// its running load; a level lasts its settle and the window (and two bins).
#[test]
fn continuous_levels_keep_earlier_loads_and_measure_windows() {
    let p = plan(&staircase(""));
    let ids: Vec<&str> = p.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "throughput/neighbors=0/rep=1",
            "throughput/neighbors=0/rep=2",
            "throughput/neighbors=2/rep=1",
            "throughput/neighbors=2/rep=2",
            "throughput/neighbors=3/rep=1",
            "throughput/neighbors=3/rep=2",
        ]
    );
    let load = JobSpec::Load {
        target: SINK.to_string(),
        rate_bps: 200e6,
        streams: 2,
        msg_size: 1400,
        duration_ms: None,
        sampling: None,
        options: Default::default(),
    };
    for s in &p.steps {
        assert!(s.continuous, "{}", s.id);
        let background: Vec<(&str, &JobSpec)> = s
            .background
            .iter()
            .map(|a| (a.tenant.as_str(), &a.job))
            .collect();
        let want: Vec<(&str, &JobSpec)> = s.present.iter().map(|t| (t.as_str(), &load)).collect();
        assert_eq!(background, want, "{}", s.id);
        let measured: Vec<&str> = s.measure.iter().map(|a| a.tenant.as_str()).collect();
        assert_eq!(measured, s.present, "{}", s.id);
        for a in &s.measure {
            assert_eq!(
                a.job,
                JobSpec::LoadWindow {
                    interval_ms: 500,
                    window: 6
                }
            );
        }
        assert_eq!(s.estimate, Some(Duration::from_millis(3200)), "{}", s.id);
    }
    // Level 2's assignments are level 3's first ones, unchanged.
    let (l2, l3) = (&p.steps[2], &p.steps[4]);
    assert_eq!(l2.background[..], l3.background[..3]);
    assert!(p.needs_endpoint());
    // Three changes (one per level), each settled: 6 x 3.2 s + 3 x 10 s.
    assert_eq!(p.changes(), 3);
    assert_eq!(
        p.estimate(Duration::from_secs(10)),
        (Duration::from_millis(49_200), 0)
    );
}

/// Restarting per level is today's plan: every node present measured sending for
/// the level's duration, sampled, nothing in the background, nothing carried over;
/// a level lasts its settle and the duration.
#[test]
fn restart_per_level_is_the_restarting_plan() {
    let p = plan(&staircase(
        "loads = \"restart-per-level\"\nduration = \"4s\"\n",
    ));
    assert_eq!(p.steps.len(), 6);
    for s in &p.steps {
        assert!(!s.continuous && s.background.is_empty(), "{}", s.id);
        let measured: Vec<&str> = s.measure.iter().map(|a| a.tenant.as_str()).collect();
        assert_eq!(measured, s.present, "{}", s.id);
        for a in &s.measure {
            let JobSpec::Load {
                duration_ms,
                sampling,
                ..
            } = &a.job
            else {
                panic!("a node runs a load, not {:?}", a.job);
            };
            assert_eq!(*duration_ms, Some(4000));
            let s = sampling.expect("sampled");
            assert_eq!((s.interval_ms, s.window), (500, 6));
        }
    }
    assert_eq!(
        p.estimate(Duration::from_secs(10)),
        (Duration::from_secs(6 * 4 + 3 * 10), 0)
    );
}

/// A wrong `loads`, a `duration` or a byte bound with continuous loads, and a window
/// longer than the series the sink keeps are refused at their line.
#[test]
fn loads_are_checked_where_they_are_written() {
    let err = |src: &str| {
        parse("p.toml", src, Some(64))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_else(|| panic!("{src} is accepted"))
    };
    let line = |src: &str, key: &str| {
        let n = src
            .lines()
            .position(|l| l.starts_with(key))
            .expect("the key")
            + 1;
        format!("p.toml:{n}")
    };
    let src = staircase("loads = \"sometimes\"\n");
    let e = err(&src);
    assert!(e.contains(&line(&src, "loads")), "{e}");
    assert!(
        e.contains("continuous") && e.contains("restart-per-level"),
        "{e}"
    );
    let src = staircase("duration = \"30s\"\n");
    let e = err(&src);
    assert!(
        e.contains(&line(&src, "duration")) && e.contains("restart-per-level"),
        "{e}"
    );
    let src = staircase("bytes = \"800MB\"\n");
    let e = err(&src);
    assert!(
        e.contains(&line(&src, "bytes")) && e.contains("byte bound"),
        "{e}"
    );
    let src = staircase("").replace("window = 6", "window = 300");
    let e = err(&src);
    assert!(
        e.contains(&line(&src, "window")) && e.contains("at most"),
        "{e}"
    );
}
