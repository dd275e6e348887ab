//! Plan expansion: step counts and ids for each scenario, and what runs where.

use nnb_agent::jobs::{BurnScope, JobSpec};
use nnb_experiment::parse;
use nnb_experiment::plan::{expand, Plan, REFLECTOR, SINK};
use nnb_format::{MatrixLevel, StepGroup};

fn plan(src: &str) -> Plan {
    let exp = parse("p.toml", src, Some(64)).unwrap_or_else(|e| panic!("{e}"));
    expand(&exp, 64)
}

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

#[test]
fn staircase_busy_and_idle_with_warmup() {
    let src = format!(
        "name = \"s\"\nrepetitions = 2\nwarmup = 1\n{TENANTS}\n[scenario]\nkind = \"neighbor-staircase\"\nneighbor_state = \"both\"\nstep = 2\n[scenario.test]\nops = 100\n"
    );
    let p = plan(&src);
    // Levels 0, 2, 3 (the top is always included), busy then idle, 1 warm-up + 2 reps.
    assert_eq!(p.steps.len(), 2 * 3 * 3);
    assert_eq!(p.steps[0].id, "busy/neighbors=0/warmup=1");
    assert_eq!(p.steps[1].id, "busy/neighbors=0/rep=1");
    assert_eq!(p.steps[17].id, "idle/neighbors=3/rep=2");
    let busy3 = &p.steps[8];
    assert_eq!(busy3.id, "busy/neighbors=3/rep=2");
    assert_eq!(busy3.background.len(), 3);
    assert!(busy3
        .background
        .iter()
        .all(|a| matches!(a.job, JobSpec::Busy { threads: 2, .. })));
    let idle2 = p.steps.iter().find(|s| s.id == "idle/neighbors=2/rep=1");
    let idle2 = idle2.unwrap_or_else(|| panic!("no idle level 2"));
    assert!(idle2.background.iter().all(|a| a.job == JobSpec::Idle));
    assert_eq!(idle2.background[1].tenant, "nb-2");
    // Level k has exactly the test tenant and k neighbors; each pass starts alone.
    assert_eq!(p.steps[0].present, ["test"]);
    assert_eq!(busy3.present, ["test", "nb-1", "nb-2", "nb-3"]);
    assert_eq!(idle2.present, ["test", "nb-1", "nb-2"]);
    let idle0 = p.steps.iter().find(|s| s.id == "idle/neighbors=0/rep=1");
    assert_eq!(
        idle0.map(|s| s.present.clone()),
        Some(vec!["test".to_string()])
    );
    assert!(matches!(
        idle2.measure[0].job,
        JobSpec::Burn {
            threads: 2,
            ops: Some(100),
            ..
        }
    ));
    // Unique ids; background changes at each level.
    let mut ids: Vec<&str> = p.steps.iter().map(|s| s.id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), p.steps.len());
    assert_eq!(p.changes(), 6);
    assert_eq!(p.estimate(std::time::Duration::from_secs(1)).1, 18);
}

/// With `unused_neighbors = "idle"` every tenant is up at every level, the ones
/// above the level idle (the static provider's way).
#[test]
fn a_staircase_can_keep_unused_neighbors_up() {
    let src = format!(
        "name = \"s\"\n{TENANTS}\n[scenario]\nkind = \"neighbor-staircase\"\nunused_neighbors = \"idle\"\n[scenario.test]\nops = 100\n"
    );
    let p = plan(&src);
    assert!(p
        .steps
        .iter()
        .all(|s| s.present == ["test", "nb-1", "nb-2", "nb-3"]));
    assert_eq!(p.steps[0].background.len(), 0);
}

#[test]
fn thread_sweep_levels() {
    let src = "name = \"w\"\nrepetitions = 3\n[[tenants]]\nrole = \"test\"\nvcpus = 8\n[scenario]\nkind = \"thread-sweep\"\nthreads = \"1..8:2\"\n[scenario.test]\nduration = \"1s\"\n";
    let p = plan(src);
    assert_eq!(p.steps.len(), 4 * 3);
    assert_eq!(p.steps[3].id, "sweep/threads=3/rep=1");
    assert!(matches!(
        p.steps[11].measure[0].job,
        JobSpec::Burn {
            threads: 7,
            duration_ms: Some(1000),
            ..
        }
    ));
    assert_eq!(
        p.estimate(std::time::Duration::ZERO),
        (std::time::Duration::from_secs(12), 0)
    );
}

#[test]
fn load_steps_split_the_load_over_neighbors() {
    let src = format!(
        "name = \"l\"\nrepetitions = 2\n{TENANTS}\n[scenario]\nkind = \"load-steps\"\nlevels = \"0:300M:100M\"\n"
    );
    let p = plan(&src);
    assert_eq!(p.steps.len(), 4 * 2);
    assert_eq!(p.steps[2].id, "load/load=100M/rep=1");
    assert!(p.needs_endpoint());
    let top = &p.steps[7];
    assert_eq!(top.measure.len(), 4);
    assert!(matches!(&top.measure[0].job, JobSpec::Latency { target, .. } if target == REFLECTOR));
    for a in &top.measure[1..] {
        match &a.job {
            JobSpec::Load {
                target,
                rate_bps,
                duration_ms,
                ..
            } => {
                assert_eq!(target, SINK);
                assert!((rate_bps - 100e6).abs() < 1.0);
                assert_eq!(*duration_ms, Some(2500));
            }
            other => panic!("not a load: {other:?}"),
        }
    }
    // No load at level 0: only the probe.
    assert_eq!(p.steps[0].measure.len(), 1);
}

/// Issue 27 item 4 (the thesis' latency baseline, §6.2.1 l.481): with
/// `unused_neighbors = "absent"` (and by default) the zero-load level has the test
/// tenant alone, and every level above it every tenant; "idle" keeps every tenant
/// up at every level.
#[test]
fn load_steps_measure_the_baseline_with_the_neighbors_absent() {
    let src = |unused: &str| {
        format!(
            "name = \"l\"\nrepetitions = 2\n{TENANTS}\n[scenario]\nkind = \"load-steps\"\n\
             levels = [\"0\", \"100M\", \"200M\"]\n{unused}"
        )
    };
    let all = ["test", "nb-1", "nb-2", "nb-3"];
    for unused in ["unused_neighbors = \"absent\"\n", ""] {
        let p = plan(&src(unused));
        for s in &p.steps {
            if s.level == 0.0 {
                assert_eq!(s.present, ["test"], "{unused}{}", s.id);
            } else {
                assert_eq!(s.present, all, "{unused}{}", s.id);
            }
        }
        // The neighbors join once, after the baseline's repetitions.
        assert_eq!(p.changes(), 2, "{unused}");
    }
    let p = plan(&src("unused_neighbors = \"idle\"\n"));
    assert!(p.steps.iter().all(|s| s.present == all));
}

#[test]
fn isolation_matrix_is_the_capacity_then_4_and_4_baselines_then_12_pairs() {
    let src = "name = \"m\"\nrepetitions = 1\n[[tenants]]\nname = \"a\"\nrole = \"test\"\nvcpus = 4\n[[tenants]]\nname = \"b\"\nrole = \"neighbor\"\nvcpus = 4\n[scenario]\nkind = \"isolation-matrix\"\nresource = \"cpu\"\n";
    let p = plan(src);
    // The capacity, a alone (ids 1-4), b alone (ids 17-20), the pairs (ids 5-16).
    assert_eq!(p.steps.len(), 1 + 4 + 4 + 12);
    let cap = &p.steps[0];
    assert_eq!(cap.id, "capacity/capacity/rep=1");
    assert_eq!((cap.group, cap.level), (StepGroup::Capacity, 0.0));
    assert_eq!(cap.measure.len(), 1);
    assert_eq!(cap.measure[0].tenant, "a");
    // The capacity: tenant a alone, one thread pinned on each of the host's 64 CPUs,
    // placed over the host's CPUs rather than a's 4.
    match &cap.measure[0].job {
        JobSpec::Burn {
            threads,
            pin,
            cpus,
            scope,
            duration_ms,
            ..
        } => {
            assert_eq!((*threads, pin.as_str()), (64, "compact"));
            assert_eq!((cpus, *scope), (&None, BurnScope::Host));
            assert!(duration_ms.is_some());
        }
        other => panic!("not a burn: {other:?}"),
    }
    assert!(p.steps[1..5]
        .iter()
        .all(|s| s.group == StepGroup::Baseline && s.measure.len() == 1));
    // b's baselines (N12): b alone in each state, ids 17-20 after Table 1's, so a's
    // and the pairs' ids are those of a run without them.
    for (k, state) in [
        "undercommitted",
        "saturated",
        "overcommitted",
        "unrestricted",
    ]
    .iter()
    .enumerate()
    {
        let s = &p.steps[5 + k];
        assert_eq!(s.id, format!("baseline/b={state}/rep=1"));
        assert_eq!((s.group, s.level), (StepGroup::Baseline, 17.0 + k as f64));
        assert_eq!(s.measure.len(), 1);
        assert_eq!(s.measure[0].tenant, "b");
        let lifted: &[&str] = if *state == "unrestricted" {
            &["b"]
        } else {
            &[]
        };
        assert_eq!(s.lifted, lifted, "{}", s.id);
        assert_eq!(s.start, None);
    }
    assert!(p.steps[9..]
        .iter()
        .all(|s| s.group == StepGroup::Pair && s.measure.len() == 2));
    // Together by default: no pair step records a start.
    assert!(p.steps.iter().all(|s| s.start.is_none()));
    // Every label is a matrix level of its step's group, as the analysis reads it.
    for s in &p.steps {
        let level: MatrixLevel = s.level_label.parse().expect("a matrix level");
        assert_eq!(level.group(), s.group, "{}", s.id);
    }
    assert_eq!(p.steps[4].id, "baseline/a=unrestricted/rep=1");
    assert_eq!(p.steps[15].id, "pair/a=saturated,b=overcommitted/rep=1");
    assert_eq!(p.steps[15].level, 11.0);
    let burn = |s: usize, t: usize| match &p.steps[s].measure[t].job {
        JobSpec::Burn {
            threads,
            pin,
            scope,
            ..
        } => (*threads, pin.clone(), *scope),
        other => panic!("not a burn: {other:?}"),
    };
    let threads = |s: usize, t: usize| burn(s, t).0;
    // a undercommitted = half its vCPUs, saturated = all, overcommitted = twice;
    // unrestricted = every host CPU.
    assert_eq!(
        (threads(1, 0), threads(2, 0), threads(3, 0), threads(4, 0)),
        (2, 4, 8, 64)
    );
    // b alike, alone.
    assert_eq!(
        (threads(5, 0), threads(6, 0), threads(7, 0), threads(8, 0)),
        (2, 4, 8, 64)
    );
    assert_eq!(threads(12, 1), 64);
    // Only the unrestricted tenant leaves its own CPUs: a alone (id 4), b alone (id
    // 20) and b beside a (id 8, a_u b_f), unpinned over the host's CPUs.
    let host = (64, "none".to_string(), BurnScope::Host);
    assert_eq!(burn(4, 0), host);
    assert_eq!(burn(8, 0), host);
    assert_eq!(burn(12, 1), host);
    assert_eq!(burn(12, 0).2, BurnScope::Tenant);
    for s in [1, 2, 3, 5, 6, 7, 10, 11, 15] {
        for t in 0..p.steps[s].measure.len() {
            assert_eq!(burn(s, t).2, BurnScope::Tenant, "{}", p.steps[s].id);
        }
    }

    let net = src.replace(
        "resource = \"cpu\"",
        "resource = \"network\"\nshare = \"100M\"",
    );
    let p = plan(&net);
    assert_eq!(p.steps.len(), 21);
    assert!(p.needs_endpoint());
    // The link's capacity: a alone, 4 streams asking for 10 x 100M = 1G.
    match &p.steps[0].measure[0].job {
        JobSpec::Load {
            target,
            rate_bps,
            streams,
            ..
        } => {
            assert_eq!((target.as_str(), *streams), (SINK, 4));
            assert!((rate_bps - 1e9).abs() < 1.0, "{rate_bps}");
        }
        other => panic!("not a load: {other:?}"),
    }
    match &p.steps[20].measure[1].job {
        JobSpec::Load { rate_bps, .. } => assert!((rate_bps - 1e9).abs() < 1.0),
        other => panic!("not a load: {other:?}"),
    }
    // On an emulated 3G NIC, 10 x 100M would not fill the link: twice the NIC, 6G.
    let emulated = net.replace(
        "[scenario]",
        "[network]\nmode = \"emulated\"\nhost_bw = \"3G\"\n[scenario]",
    );
    match &plan(&emulated).steps[0].measure[0].job {
        JobSpec::Load { rate_bps, .. } => assert!((rate_bps - 6e9).abs() < 1.0, "{rate_bps}"),
        other => panic!("not a load: {other:?}"),
    }
}

#[test]
fn example_experiments_expand() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    for (file, steps) in [
        ("local-cpu-staircase.toml", 2 * 3 * (1 + 3)),
        ("local-latency-load.toml", 5 * 3),
        ("isolation-matrix-cpu.toml", (1 + 4 + 4 + 12) * 3),
        // Memory has no capacity step: its maximum is the machine's memory.
        ("isolation-matrix-memory.toml", (4 + 4 + 12) * 3),
        ("isolation-matrix-disk.toml", (1 + 4 + 4 + 12) * 3),
        ("isolation-matrix-network.toml", (1 + 4 + 4 + 12) * 3),
    ] {
        let exp = nnb_experiment::load(&root.join(file), Some(2)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(expand(&exp, 2).steps.len(), steps, "{file}");
    }
    // Every AWS example and every thesis file (one per figure or table) is valid and has
    // steps, and docs/reproducing-the-thesis.md names each thesis file, so the doc cannot
    // fall behind the directory.
    let doc_path = root.join("../docs/reproducing-the-thesis.md");
    let doc = std::fs::read_to_string(&doc_path)
        .unwrap_or_else(|e| panic!("{}: {e}", doc_path.display()));
    for dir in ["aws", "thesis"] {
        let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("experiments/{dir}: {e}"))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        assert!(
            !files.is_empty(),
            "no experiment files in experiments/{dir}"
        );
        for path in files {
            let exp = nnb_experiment::load(&path, Some(2)).unwrap_or_else(|e| panic!("{e}"));
            assert!(!expand(&exp, 2).steps.is_empty(), "{}", path.display());
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            let named = format!("experiments/{dir}/{}", name.unwrap_or_default());
            assert!(
                dir != "thesis" || doc.contains(&named),
                "docs/reproducing-the-thesis.md does not name {named}"
            );
        }
    }
}

/// The throughput staircase: level k has the test tenant and the first k neighbors
/// present (file order), and every one of them measured, sending the node rate to
/// the sink for the level's duration, sampled; nothing in the background.
#[test]
fn throughput_staircase_adds_a_sending_node_per_level() {
    let src = format!(
        "name = \"t\"\nrepetitions = 2\n[network]\nmode = \"emulated\"\nhost_bw = \"100M\"\n{TENANTS}\n\
         [scenario]\nkind = \"throughput-staircase\"\nloads = \"restart-per-level\"\nstep = 2\nduration = \"4s\"\n\
         sample_interval = \"500ms\"\nwindow = 6\nstreams = 2\n"
    );
    let p = plan(&src);
    // Levels 0, 2, 3 (the top always included), 2 repetitions each.
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
    let present: Vec<Vec<String>> = p
        .steps
        .iter()
        .step_by(2)
        .map(|s| s.present.clone())
        .collect();
    assert_eq!(
        present,
        [
            vec!["test"],
            vec!["test", "nb-1", "nb-2"],
            vec!["test", "nb-1", "nb-2", "nb-3"],
        ]
    );
    for s in &p.steps {
        assert!(s.background.is_empty(), "{}", s.id);
        let measured: Vec<&str> = s.measure.iter().map(|a| a.tenant.as_str()).collect();
        assert_eq!(measured, s.present, "{}", s.id);
        assert_eq!(s.estimate, Some(std::time::Duration::from_secs(4)));
        for a in &s.measure {
            match &a.job {
                JobSpec::Load {
                    target,
                    rate_bps,
                    streams,
                    duration_ms,
                    sampling,
                    ..
                } => {
                    assert_eq!(target, SINK);
                    // Default rate: twice the emulated link.
                    assert!((rate_bps - 200e6).abs() < 1.0, "{rate_bps}");
                    assert_eq!((*streams, *duration_ms), (2, Some(4000)));
                    let s = sampling.unwrap_or_else(|| panic!("a staircase load is sampled"));
                    assert_eq!((s.interval_ms, s.window), (500, 6));
                }
                other => panic!("a node runs a load, not {other:?}"),
            }
        }
    }
    assert!(p.needs_endpoint());
    // Every level changes who is present: 3 changes, each with its settle.
    assert_eq!(p.changes(), 3);
}

/// The example files of the throughput staircase expand to the levels they say.
#[test]
fn throughput_staircase_examples_expand() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    for (file, levels, reps) in [
        ("local-throughput-staircase.toml", 4, 3),
        ("aws/m5-throughput-staircase-4xlarge.toml", 6, 1),
    ] {
        let exp = nnb_experiment::load(&root.join(file), Some(2)).unwrap_or_else(|e| panic!("{e}"));
        let p = expand(&exp, 2);
        assert_eq!(p.steps.len(), levels * reps, "{file}");
        let top = p.steps.last().map_or(0, |s| s.present.len());
        assert_eq!(top, levels, "{file}: the top level has every node");
    }
}

/// A sampling interval the sink's 100 ms bins cannot make, and a window longer than
/// a level, are refused where they are written.
#[test]
fn throughput_staircase_sampling_is_checked() {
    let base = format!("name = \"t\"\n{TENANTS}\n[scenario]\nkind = \"throughput-staircase\"\n");
    let err = |extra: &str| {
        nnb_experiment::parse("p.toml", &format!("{base}{extra}"), Some(64))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_else(|| panic!("{extra} is accepted"))
    };
    let e = err("sample_interval = \"250ms\"\n");
    assert!(e.contains("multiple of the sink's 100ms bins"), "{e}");
    assert!(e.contains("p.toml:"), "{e}");
    let e = err("loads = \"restart-per-level\"\nduration = \"5s\"\nwindow = 6\n");
    assert!(e.contains("only 5 samples"), "{e}");
}

/// The example matrix `file`'s plan on a 2-CPU host.
fn example(file: &str) -> Plan {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let exp = nnb_experiment::load(&root.join(file), Some(2)).unwrap_or_else(|e| panic!("{e}"));
    expand(&exp, 2)
}

/// The first repetition of level `label`: its measured jobs and lifted tenants.
fn level<'p>(p: &'p Plan, label: &str) -> &'p nnb_experiment::plan::Step {
    p.steps
        .iter()
        .find(|s| s.level_label == label && s.rep == 1)
        .unwrap_or_else(|| panic!("no level {label}"))
}

/// Each state is a demand against the tenant's grant, and only an unrestricted
/// tenant (and a in the capacity step) has its grant lifted.
#[test]
fn matrix_states_are_demands_against_the_grants() {
    // Memory, 256 MiB granted: half, all the limit leaves the load, twice, and 4 times
    // with the limit lifted.
    let p = example("isolation-matrix-memory.toml");
    let bytes = |label: &str| match &level(&p, label).measure[0].job {
        JobSpec::Memory { bytes, mode, .. } => {
            assert_eq!(mode, "keep");
            *bytes
        }
        other => panic!("not a memory job: {other:?}"),
    };
    assert_eq!(bytes("a=undercommitted"), 128 << 20);
    assert_eq!(
        bytes("a=saturated"),
        (256 - 32) << 20,
        "the limit less 32 MiB"
    );
    assert_eq!(bytes("a=overcommitted"), 512 << 20);
    assert_eq!(bytes("a=unrestricted"), 1 << 30);
    assert!(level(&p, "a=saturated").lifted.is_empty());
    assert_eq!(level(&p, "a=unrestricted").lifted, ["a"]);
    assert_eq!(level(&p, "a=saturated,b=unrestricted").lifted, ["b"]);

    // Disk, 200 read + 200 write IOPS at half reads: the grant sustains 400.
    let p = example("isolation-matrix-disk.toml");
    let disk = |label: &str| match &level(&p, label).measure[0].job {
        JobSpec::Disk {
            iops,
            queue_depth,
            direct,
            ..
        } => {
            assert!(direct);
            (*iops, *queue_depth)
        }
        other => panic!("not a disk job: {other:?}"),
    };
    assert_eq!(disk("a=undercommitted"), (Some(200.0), 4));
    assert_eq!(disk("a=saturated"), (Some(400.0), 4));
    assert_eq!(disk("a=overcommitted"), (Some(800.0), 8));
    assert_eq!(disk("a=unrestricted"), (None, 4));
    let cap = level(&p, "capacity");
    assert_eq!(cap.lifted, ["a"]);
    assert!(matches!(
        cap.measure[0].job,
        JobSpec::Disk { iops: None, .. }
    ));

    // Network, 50 Mbit/s granted, asked for as payload (50 x 1400 / 1442 Mbit/s: the
    // bucket counts 1442 bytes per 1400-byte datagram): more streams when
    // overcommitted.
    let p = example("isolation-matrix-network.toml");
    let load = |label: &str, k: usize| match &level(&p, label).measure[k].job {
        JobSpec::Load {
            rate_bps, streams, ..
        } => (
            (*rate_bps / (50e6 * 1400.0 / 1442.0) * 1e9).round() / 1e9,
            *streams,
        ),
        other => panic!("not a load: {other:?}"),
    };
    assert_eq!(load("a=undercommitted", 0), (0.5, 1));
    assert_eq!(load("a=saturated", 0), (1.0, 1));
    assert_eq!(load("a=saturated,b=overcommitted", 1), (1.5, 4));
    assert_eq!(load("a=saturated,b=unrestricted", 1), (10.0, 8));

    // CPU, 0.5 CPU granted: one thread busy a quarter, half, all of the time.
    let p = example("isolation-matrix-cpu.toml");
    let burn = |label: &str| match &level(&p, label).measure[0].job {
        JobSpec::Burn {
            threads,
            duty,
            scope,
            ..
        } => (*threads, *duty, *scope),
        other => panic!("not a burn: {other:?}"),
    };
    assert_eq!(burn("a=undercommitted"), (1, Some(0.25), BurnScope::Tenant));
    assert_eq!(burn("a=saturated"), (1, Some(0.5), BurnScope::Tenant));
    assert_eq!(burn("a=overcommitted"), (1, None, BurnScope::Tenant));
    assert_eq!(burn("a=unrestricted"), (2, None, BurnScope::Host));
}
