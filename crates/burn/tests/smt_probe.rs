//! Runs the SMT probe for real on this machine's CPUs and checks the report against
//! sysfs. The development VM has two vCPUs without SMT: the probe must find no
//! siblings and no disagreement there. On a machine with SMT, the pair tested is two
//! CPUs sysfs calls separate cores, so the same expectation holds.

use nnb_burn::placement::allowed_cpus;
use nnb_burn::smt_probe::{probe, ProbeConfig};
use nnb_burn::topology::Topology;

/// Two allowed online CPUs that sysfs says are on different physical cores.
fn two_separate_cores(topo: &Topology) -> Option<Vec<usize>> {
    let allowed = allowed_cpus();
    let usable: Vec<_> = topo.online().filter(|c| allowed.contains(&c.id)).collect();
    let first = usable.first()?;
    let second = usable.iter().find(|c| c.core != first.core)?;
    Some(vec![first.id, second.id])
}

#[test]
fn probe_finds_no_siblings_between_separate_cores() {
    let topo = Topology::host().unwrap_or_else(|e| panic!("{e}"));
    let Some(cpus) = two_separate_cores(&topo) else {
        nnb_testkit::skip_or_fail("needs two allowed CPUs on separate cores");
        return;
    };
    let mut config = ProbeConfig::new(cpus.clone());
    // Three times the default trials: the verdict must hold on a busy, shared 2-vCPU
    // machine (alone and concurrent runs are measured side by side in thread CPU
    // time, so preemption by other processes does not count as slowdown).
    config.trials = 9;
    // A probe measures the moment. The host under this VM at times runs its two
    // vCPUs on one physical CPU for a while (seen: every trial at ratio 0.51 for a
    // whole 0.1 s probe, in about 1 run of 6, with no steal ticks recorded): then the
    // probe rightly sees them share. So up to three probes, 0.5 s apart, each fully
    // checked; separate cores must come out separate in one of them.
    let mut judged = Vec::new();
    for attempt in 0..3 {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        let report = probe(&topo, &config).unwrap_or_else(|e| panic!("{e}"));
        eprintln!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
        assert_eq!(report.config, config);
        assert!(report.spin_iterations > 0);
        assert_eq!(report.alone.iter().map(|a| a.cpu).collect::<Vec<_>>(), cpus);
        assert!(report.alone.iter().all(|a| a.ns.is_finite() && a.ns > 0.0));
        assert!(report.estimated_s > 0.0 && report.duration_s > 0.0);
        assert_eq!(report.pairs.len(), 1);
        let pair = &report.pairs[0];
        assert_eq!((pair.a, pair.b), (cpus[0], cpus[1]));
        assert_eq!(pair.ratios.len(), 9);
        assert!(
            pair.ratios.iter().all(|r| r.is_finite() && *r > 0.0),
            "{:?}",
            pair.ratios
        );
        assert!(!pair.sysfs_siblings);
        if !pair.siblings {
            assert_eq!(report.sibling_groups, vec![vec![cpus[0]], vec![cpus[1]]]);
            assert!(
                report.disagreements.is_empty(),
                "{:?}",
                report.disagreements
            );
            return;
        }
        judged.push(pair.ratios.clone());
    }
    panic!("separate cores judged siblings in three probes: {judged:?}");
}
