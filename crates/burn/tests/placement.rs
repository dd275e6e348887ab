//! Placement of every pin strategy on every fixture host, for several thread counts,
//! and the errors for bad input (zero threads, too many threads, offline, absent or
//! disallowed CPUs, unparsable lists).

use std::collections::BTreeSet;
use std::path::Path;

use nnb_burn::placement::{
    parse_cpu_list, plan, render_placement, PinStrategy, Placement, PlacementError,
};
use nnb_burn::topology::Topology;

const FIXTURES: [&str; 6] = [
    "m5.metal",
    "m6a.metal",
    "m6g.metal",
    "m5.2xlarge",
    "lying-hypervisor",
    "offline-cpu",
];

fn read(name: &str) -> Topology {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    Topology::read(&root).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

fn online(t: &Topology) -> Vec<usize> {
    t.online().map(|c| c.id).collect()
}

fn place(t: &Topology, s: &PinStrategy, threads: usize) -> Placement {
    plan(t, s, threads, &online(t), false)
        .unwrap_or_else(|e| panic!("{s} with {threads} threads: {e}"))
}

fn cpus(p: &Placement) -> Vec<usize> {
    p.slots
        .iter()
        .map(|s| {
            s.cpu
                .unwrap_or_else(|| panic!("thread {} unpinned", s.thread))
        })
        .collect()
}

fn strategy(name: &str) -> PinStrategy {
    name.parse().unwrap_or_else(|e| panic!("{e}"))
}

fn err(t: &Topology, s: &PinStrategy, threads: usize, allowed: &[usize]) -> PlacementError {
    match plan(t, s, threads, allowed, false) {
        Ok(p) => panic!("{s} with {threads} threads should fail, got {:?}", cpus(&p)),
        Err(e) => e,
    }
}

/// Properties every strategy must have on every host, for every thread count up to
/// the number of online CPUs: one slot per thread in order, distinct online CPUs,
/// core and package copied from the topology; `cores` puts the first threads on
/// distinct cores; `smt-sibling` fills a core before the next.
#[test]
fn every_strategy_on_every_fixture_keeps_its_invariants() {
    for name in FIXTURES {
        let t = read(name);
        let n = t.online().count();
        for s in ["cores", "smt-sibling", "compact"] {
            for threads in 1..=n {
                let p = place(&t, &strategy(s), threads);
                assert_eq!(p.strategy, s);
                let got = cpus(&p);
                assert_eq!(got.len(), threads);
                assert_eq!(
                    got.iter().collect::<BTreeSet<_>>().len(),
                    threads,
                    "{name} {s}"
                );
                for (i, slot) in p.slots.iter().enumerate() {
                    assert_eq!(slot.thread, i);
                    let cpu = slot.cpu.and_then(|id| t.cpu(id));
                    let cpu = cpu.unwrap_or_else(|| panic!("{name} {s}: bad cpu {slot:?}"));
                    assert!(cpu.online);
                    assert_eq!(slot.core, Some(cpu.core));
                    assert_eq!(slot.package, Some(cpu.package));
                }
                let cores: Vec<usize> = p.slots.iter().filter_map(|s| s.core).collect();
                let distinct = cores.iter().collect::<BTreeSet<_>>().len();
                match s {
                    "cores" => assert_eq!(distinct, threads.min(t.physical_cores()), "{name}"),
                    "smt-sibling" => {
                        // Cores appear in non-decreasing order: never back to an earlier core.
                        assert!(cores.windows(2).all(|w| w[0] <= w[1]), "{name} {cores:?}");
                    }
                    _ => assert!(got.windows(2).all(|w| w[0] < w[1]), "{name} compact"),
                }
            }
            let too_many = err(&t, &strategy(s), n + 1, &online(&t));
            assert!(
                matches!(too_many, PlacementError::TooManyThreads { threads, available, .. }
                    if threads == n + 1 && available == n),
                "{name} {s}: {too_many}"
            );
        }
        let p = place(&t, &PinStrategy::None, n);
        assert!(p
            .slots
            .iter()
            .all(|s| s.cpu.is_none() && s.core.is_none() && s.package.is_none()));
    }
}

#[test]
fn m5_metal_cores_uses_every_physical_core_before_any_sibling() {
    let t = read("m5.metal");
    let p = place(&t, &PinStrategy::Cores, 48);
    assert_eq!(cpus(&p), (0..48).collect::<Vec<_>>());
    let cores: BTreeSet<_> = p.slots.iter().filter_map(|s| s.core).collect();
    assert_eq!(
        cores.len(),
        48,
        "48 threads on 48 distinct cores, no sibling pair"
    );
    // The first 24 threads stay on package 0 (core order is package-major).
    assert!(p.slots[..24].iter().all(|s| s.package == Some(0)));
    assert!(p.slots[24..].iter().all(|s| s.package == Some(1)));

    let p = place(&t, &PinStrategy::Cores, 49);
    assert_eq!(p.slots[48].cpu, Some(48), "49th thread on cpu 0's sibling");
    assert_eq!(p.slots[48].core, p.slots[0].core);
    assert_eq!(
        cpus(&place(&t, &PinStrategy::Cores, 96)),
        (0..96).collect::<Vec<_>>()
    );
}

#[test]
fn m5_metal_smt_sibling_fills_both_threads_of_a_core() {
    let t = read("m5.metal");
    let s = PinStrategy::SmtSibling;
    assert_eq!(cpus(&place(&t, &s, 1)), vec![0]);
    assert_eq!(cpus(&place(&t, &s, 2)), vec![0, 48]);
    assert_eq!(cpus(&place(&t, &s, 5)), vec![0, 48, 1, 49, 2]);
    let all = cpus(&place(&t, &s, 96));
    assert_eq!(&all[46..50], &[23, 71, 24, 72], "package 1 after package 0");
    let p = place(&t, &s, 96);
    for pair in p.slots.chunks(2) {
        assert_eq!(pair[0].core, pair[1].core);
    }
}

#[test]
fn m5_metal_compact_is_logical_order() {
    let t = read("m5.metal");
    assert_eq!(cpus(&place(&t, &PinStrategy::Compact, 3)), vec![0, 1, 2]);
    let p = place(&t, &PinStrategy::Compact, 50);
    assert_eq!(p.slots[49].cpu, Some(49));
    assert_eq!(p.slots[49].core, Some(1));
}

#[test]
fn m6a_metal_places_siblings_at_n_plus_96() {
    let t = read("m6a.metal");
    let cores = place(&t, &PinStrategy::Cores, 97);
    assert_eq!(&cpus(&cores)[..96], (0..96).collect::<Vec<_>>().as_slice());
    assert_eq!(cores.slots[96].cpu, Some(96));
    assert_eq!(cores.slots[48].package, Some(1));
    assert_eq!(
        cpus(&place(&t, &PinStrategy::SmtSibling, 3)),
        vec![0, 96, 1]
    );
    assert_eq!(cpus(&place(&t, &PinStrategy::Compact, 2)), vec![0, 1]);
}

#[test]
fn m6g_metal_without_smt_places_every_strategy_alike() {
    let t = read("m6g.metal");
    for threads in [1, 2, 32, 63, 64] {
        let expect: Vec<usize> = (0..threads).collect();
        for s in ["cores", "smt-sibling", "compact"] {
            assert_eq!(
                cpus(&place(&t, &strategy(s), threads)),
                expect,
                "{s} {threads}"
            );
        }
    }
}

#[test]
fn m5_2xlarge_guest() {
    let t = read("m5.2xlarge");
    assert_eq!(cpus(&place(&t, &PinStrategy::Cores, 4)), vec![0, 1, 2, 3]);
    assert_eq!(
        cpus(&place(&t, &PinStrategy::Cores, 5)),
        vec![0, 1, 2, 3, 4]
    );
    assert_eq!(
        cpus(&place(&t, &PinStrategy::SmtSibling, 4)),
        vec![0, 4, 1, 5]
    );
    assert_eq!(
        cpus(&place(&t, &PinStrategy::SmtSibling, 8)),
        vec![0, 4, 1, 5, 2, 6, 3, 7]
    );
    assert_eq!(
        cpus(&place(&t, &PinStrategy::Compact, 8)),
        (0..8).collect::<Vec<_>>()
    );
}

#[test]
fn lying_hypervisor_smt_sibling_cannot_pair_what_it_cannot_see() {
    let t = read("lying-hypervisor");
    // sysfs claims 8 cores, so "siblings" are just consecutive CPUs.
    assert_eq!(cpus(&place(&t, &PinStrategy::SmtSibling, 2)), vec![0, 1]);
    assert_eq!(
        cpus(&place(&t, &PinStrategy::Cores, 8)),
        (0..8).collect::<Vec<_>>()
    );
}

#[test]
fn offline_cpu_is_skipped_by_every_strategy() {
    let t = read("offline-cpu");
    assert_eq!(
        cpus(&place(&t, &PinStrategy::Cores, 7)),
        vec![0, 1, 2, 7, 4, 5, 6]
    );
    assert_eq!(
        cpus(&place(&t, &PinStrategy::SmtSibling, 7)),
        vec![0, 4, 1, 5, 2, 6, 7]
    );
    assert_eq!(
        cpus(&place(&t, &PinStrategy::Compact, 7)),
        vec![0, 1, 2, 4, 5, 6, 7]
    );
    let e = err(&t, &PinStrategy::Cores, 8, &online(&t));
    assert!(
        e.to_string()
            .contains("8 threads but only 7 usable CPUs (0-2,4-7)"),
        "{e}"
    );
}

#[test]
fn oversubscribe_wraps_around_the_strategy_order() {
    let t = read("m5.2xlarge");
    let p =
        plan(&t, &PinStrategy::SmtSibling, 10, &online(&t), true).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cpus(&p), vec![0, 4, 1, 5, 2, 6, 3, 7, 0, 4]);
    let list = PinStrategy::List(vec![6, 2]);
    let p = plan(&t, &list, 5, &online(&t), true).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cpus(&p), vec![6, 2, 6, 2, 6]);
    let p = plan(&t, &PinStrategy::None, 9, &online(&t), true).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.slots.len(), 9);
}

#[test]
fn explicit_list_keeps_the_given_order() {
    let t = read("m5.metal");
    let list = PinStrategy::List(parse_cpu_list("0,2,4-7").unwrap_or_default());
    let p = place(&t, &list, 6);
    assert_eq!(cpus(&p), vec![0, 2, 4, 5, 6, 7]);
    assert_eq!(p.strategy, "cpus:0,2,4,5,6,7");
    assert_eq!(
        cpus(&place(&t, &PinStrategy::List(vec![50, 3]), 2)),
        vec![50, 3]
    );
    assert_eq!(
        place(&t, &PinStrategy::List(vec![50, 3]), 2).slots[0].core,
        Some(2)
    );
    assert_eq!(
        cpus(&place(&t, &list, 2)),
        vec![0, 2],
        "fewer threads take the first CPUs"
    );
    let e = err(&t, &list, 7, &online(&t));
    assert!(
        matches!(
            e,
            PlacementError::TooManyThreads {
                threads: 7,
                available: 6,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn allowed_set_restricts_every_strategy() {
    let t = read("m5.metal");
    let allowed = [0, 1, 2, 3, 48, 49];
    let with = |s: PinStrategy, n| {
        plan(&t, &s, n, &allowed, false)
            .map(|p| cpus(&p))
            .unwrap_or_else(|e| panic!("{e}"))
    };
    assert_eq!(with(PinStrategy::Cores, 6), vec![0, 1, 2, 3, 48, 49]);
    assert_eq!(with(PinStrategy::SmtSibling, 5), vec![0, 48, 1, 49, 2]);
    assert_eq!(with(PinStrategy::Compact, 5), vec![0, 1, 2, 3, 48]);
    let e = err(&t, &PinStrategy::List(vec![0, 5]), 2, &allowed);
    assert_eq!(
        e,
        PlacementError::NotAllowed {
            cpu: 5,
            allowed: "0-3,48-49".to_string()
        }
    );
    assert!(e.to_string().contains("CPU 5 is not allowed"), "{e}");
    let e = err(&t, &PinStrategy::Cores, 1, &[200]);
    assert!(matches!(e, PlacementError::NoUsableCpu { .. }), "{e}");
}

#[test]
fn zero_threads_is_an_error_for_every_strategy() {
    let t = read("m5.2xlarge");
    for s in [
        PinStrategy::None,
        PinStrategy::Cores,
        PinStrategy::SmtSibling,
        PinStrategy::Compact,
        PinStrategy::List(vec![0]),
    ] {
        let e = err(&t, &s, 0, &online(&t));
        assert_eq!(e, PlacementError::ZeroThreads);
        assert!(e.to_string().contains("at least 1"));
    }
}

#[test]
fn offline_cpu_in_a_list_is_named() {
    let t = read("offline-cpu");
    let e = err(&t, &PinStrategy::List(vec![0, 3]), 2, &online(&t));
    assert!(
        matches!(e, PlacementError::OfflineCpu { cpu: 3, .. }),
        "{e}"
    );
    assert_eq!(e.to_string(), "CPU 3 is offline (online CPUs: 0-2,4-7)");
}

#[test]
fn absent_cpu_in_a_list_is_named() {
    let t = read("m5.2xlarge");
    let e = err(&t, &PinStrategy::List(vec![1, 8]), 2, &online(&t));
    assert_eq!(
        e.to_string(),
        "CPU 8 does not exist (this machine has CPUs 0-7)"
    );
    let t = read("m5.metal");
    let e = err(&t, &PinStrategy::List(vec![200]), 1, &online(&t));
    assert!(
        matches!(e, PlacementError::AbsentCpu { cpu: 200, .. }),
        "{e}"
    );
}

#[test]
fn unparsable_and_repeated_lists_are_rejected() {
    for bad in ["", "a", "0-", "3-1", "1,,2", "-1", "0-2,1"] {
        let e = parse_cpu_list(bad).map(|v| panic!("{bad:?} parsed as {v:?}"));
        let msg = e.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(!msg.is_empty(), "{bad:?}");
    }
    let e = parse_cpu_list("3-1")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.contains("\"3-1\"") && e.contains("ends before it starts"),
        "{e}"
    );
    let t = read("m5.2xlarge");
    let e = err(&t, &PinStrategy::List(vec![1, 1]), 2, &online(&t));
    assert_eq!(e, PlacementError::DuplicateCpu { cpu: 1 });
    let e = err(&t, &PinStrategy::List(vec![]), 1, &online(&t));
    assert_eq!(e, PlacementError::EmptyList);
}

#[test]
fn placement_serializes_and_renders() {
    let t = read("m5.metal");
    let p = place(&t, &PinStrategy::SmtSibling, 2);
    let json = serde_json::to_value(&p).unwrap_or_default();
    assert_eq!(json["strategy"], "smt-sibling");
    assert_eq!(json["warnings"], serde_json::json!([]));
    assert_eq!(
        json["slots"][1],
        serde_json::json!({"thread": 1, "cpu": 48, "core": 0, "package": 0})
    );
    let text = render_placement(&p, &t);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "placement: smt-sibling (2 threads)");
    assert!(lines[1]
        .split_whitespace()
        .eq(["thread", "cpu", "core", "package", "siblings"]));
    assert!(
        lines[3]
            .split_whitespace()
            .eq(["1", "48", "0", "0", "0,48"]),
        "{text}"
    );
    let none = render_placement(&place(&t, &PinStrategy::None, 1), &t);
    assert!(none
        .lines()
        .nth(2)
        .is_some_and(|l| l.split_whitespace().eq(["0", "-", "-", "-", "-"])));
}

/// The offline-sibling guest (m5.2xlarge with cpu5 offline) has cores {0,4}, {1},
/// {2,6} and {3,7}: core 1 lost its sibling. `smt-sibling` pairs threads on the three
/// complete cores first and puts a thread on cpu 1 only when they are all taken.
#[test]
fn offline_sibling_smt_sibling_fills_complete_cores_first() {
    let t = read("offline-sibling");
    assert_eq!(t.cores(), vec![vec![0, 4], vec![1], vec![2, 6], vec![3, 7]]);
    assert_eq!(t.smt_ways(), 2);
    let s = PinStrategy::SmtSibling;

    // Two full pairs, from cores 0 and 2; not 0, 4, 1 and a lone 2.
    let p = place(&t, &s, 4);
    assert_eq!(cpus(&p), vec![0, 4, 2, 6]);
    let cores: Vec<_> = p.slots.iter().filter_map(|s| s.core).collect();
    assert_eq!(cores, vec![0, 0, 2, 2]);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    assert_eq!(cpus(&place(&t, &s, 3)), vec![0, 4, 2]);
    let p = place(&t, &s, 6);
    assert_eq!(cpus(&p), vec![0, 4, 2, 6, 3, 7]);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);

    // The seventh thread can only go to cpu 1, whose sibling (cpu 5) is offline.
    let p = place(&t, &s, 7);
    assert_eq!(cpus(&p), vec![0, 4, 2, 6, 3, 7, 1]);
    assert_eq!(
        p.warnings,
        vec![
            "smt-sibling: thread 6 could not get a full sibling set (no free core with all 2 \
             SMT threads online and allowed): CPU 1 has a sibling offline or not allowed"
                .to_string()
        ]
    );
    let json = serde_json::to_value(&p).unwrap_or_default();
    assert_eq!(json["warnings"][0], p.warnings[0].as_str());
    let text = render_placement(&p, &t);
    assert_eq!(
        text.lines().last(),
        Some(format!("warning: {}", p.warnings[0]).as_str()),
        "{text}"
    );

    // Oversubscribed, the order wraps; only thread 6 sits on the incomplete core.
    let p = plan(&t, &s, 9, &online(&t), true).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cpus(&p), vec![0, 4, 2, 6, 3, 7, 1, 0, 4]);
    assert_eq!(p.warnings.len(), 1);
    assert!(p.warnings[0].contains("thread 6 "), "{:?}", p.warnings);

    // The other strategies are unchanged and have nothing to warn about.
    let p = place(&t, &PinStrategy::Cores, 7);
    assert_eq!(cpus(&p), vec![0, 1, 2, 3, 4, 6, 7]);
    assert!(p.warnings.is_empty());
    let p = place(&t, &PinStrategy::Compact, 7);
    assert_eq!(cpus(&p), vec![0, 1, 2, 3, 4, 6, 7]);
    assert!(p.warnings.is_empty());
}

/// A sibling outside the allowed set leaves its core incomplete just as an offline one
/// does. On the m5.2xlarge guest (cores {0,4}, {1,5}, {2,6}, {3,7}) with only 0, 1, 2
/// and 4 allowed, core 0 is the only complete core; threads beyond its pair land alone
/// on cpus 1 and 2, and the placement says so.
#[test]
fn disallowed_siblings_leave_incomplete_cores_for_last_with_a_warning() {
    let t = read("m5.2xlarge");
    let s = PinStrategy::SmtSibling;
    let with =
        |allowed: &[usize], n| plan(&t, &s, n, allowed, false).unwrap_or_else(|e| panic!("{e}"));

    let p = with(&[0, 1, 2, 4], 2);
    assert_eq!(cpus(&p), vec![0, 4]);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let p = with(&[0, 1, 2, 4], 3);
    assert_eq!(cpus(&p), vec![0, 4, 1]);
    assert_eq!(
        p.warnings,
        vec![
            "smt-sibling: thread 2 could not get a full sibling set (no free core with all 2 \
             SMT threads online and allowed): CPU 1 has a sibling offline or not allowed"
                .to_string()
        ]
    );
    let p = with(&[0, 1, 2, 4], 4);
    assert_eq!(cpus(&p), vec![0, 4, 1, 2]);
    assert_eq!(
        p.warnings,
        vec![
            "smt-sibling: threads 2-3 could not get a full sibling set (no free core with all \
             2 SMT threads online and allowed): CPUs 1-2 have a sibling offline or not allowed"
                .to_string()
        ]
    );

    // One CPU of each core allowed: no core is complete, every thread is alone.
    let p = with(&[0, 1, 2, 3], 2);
    assert_eq!(cpus(&p), vec![0, 1]);
    assert_eq!(p.warnings.len(), 1);
    assert!(
        p.warnings[0].starts_with("smt-sibling: threads 0-1 could not get a full sibling set"),
        "{:?}",
        p.warnings
    );
}

/// The offline-cpu guest's incomplete core (cpu 7, sibling of the offline cpu 3) is
/// already last in core order: the order is unchanged, and a thread there is named.
#[test]
fn offline_cpu_smt_sibling_names_the_thread_without_a_pair() {
    let t = read("offline-cpu");
    let p = place(&t, &PinStrategy::SmtSibling, 6);
    assert_eq!(cpus(&p), vec![0, 4, 1, 5, 2, 6]);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let p = place(&t, &PinStrategy::SmtSibling, 7);
    assert_eq!(p.warnings.len(), 1);
    assert!(
        p.warnings[0].contains("thread 6 ") && p.warnings[0].contains("CPU 7 has"),
        "{:?}",
        p.warnings
    );
}

/// Hosts whose every core is whole (or without SMT) never warn, whatever the strategy
/// and thread count.
#[test]
fn complete_hosts_place_without_warnings() {
    for name in [
        "m5.metal",
        "m6a.metal",
        "m6g.metal",
        "m5.2xlarge",
        "lying-hypervisor",
    ] {
        let t = read(name);
        for s in ["cores", "smt-sibling", "compact", "none"] {
            for threads in 1..=t.online().count() {
                let p = place(&t, &strategy(s), threads);
                assert!(
                    p.warnings.is_empty(),
                    "{name} {s} {threads}: {:?}",
                    p.warnings
                );
            }
        }
    }
}
