//! The test burn's `pool`: a file's key reaches the burn job, the default is the
//! per-thread shares, and the thesis' primes files draw from one pool as sysbench
//! does while its cpu-burn-o0 files keep per-thread shares as `cpu_burn` did.

use nnb_agent::jobs::JobSpec;
use nnb_experiment::parse;
use nnb_experiment::plan::expand;
use nnb_format::EventPool;

/// The pool and ops of every test burn of a plan.
fn burns(name: &str, src: &str) -> Vec<(EventPool, Option<u64>)> {
    let exp = parse(name, src, Some(96)).unwrap_or_else(|e| panic!("{name}: {e}"));
    expand(&exp, 96)
        .steps
        .iter()
        .flat_map(|s| &s.measure)
        .filter_map(|a| match &a.job {
            JobSpec::Burn { pool, ops, .. } => Some((*pool, *ops)),
            _ => None,
        })
        .collect()
}

fn staircase(test: &str) -> String {
    format!(
        "name = \"s\"\n[[tenants]]\nname = \"test\"\nrole = \"test\"\nvcpus = 2\n\
         [[tenants]]\nname = \"nb\"\nrole = \"neighbor\"\nvcpus = 2\n\
         [scenario]\nkind = \"neighbor-staircase\"\n[scenario.test]\n{test}\n"
    )
}

#[test]
fn the_burn_tables_pool_reaches_the_job_and_defaults_to_per_thread() {
    let shared = burns("s.toml", &staircase("ops = 1001\npool = \"shared\""));
    assert!(!shared.is_empty());
    assert!(shared.iter().all(|b| *b == (EventPool::Shared, Some(1001))));
    let plain = burns("p.toml", &staircase("ops = 1001"));
    assert!(plain
        .iter()
        .all(|b| *b == (EventPool::PerThread, Some(1001))));
    let err = parse(
        "b.toml",
        &staircase("ops = 5\npool = \"sometimes\""),
        Some(96),
    )
    .expect_err("an unknown pool is refused")
    .to_string();
    assert!(err.contains("sometimes"), "{err}");
}

#[test]
fn the_thesis_primes_files_share_one_pool_and_cpu_burn_files_do_not() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments/thesis");
    let mut seen = (0, 0);
    for entry in std::fs::read_dir(dir).expect("experiments/thesis") {
        let path = entry.expect("a directory entry").path();
        let name = path.display().to_string();
        let src = std::fs::read_to_string(&path).expect("a thesis file");
        let Some(workload) = ["primes", "cpu-burn-o0"]
            .into_iter()
            .find(|w| src.contains(&format!("workload = \"{w}\"")))
        else {
            continue;
        };
        let pools = burns(&name, &src);
        let want = match workload {
            "primes" => EventPool::Shared,
            _ => EventPool::PerThread,
        };
        assert!(
            pools.iter().all(|(p, _)| *p == want),
            "{name}: {workload} burns with {pools:?}"
        );
        match want {
            EventPool::Shared => seen.0 += 1,
            EventPool::PerThread => seen.1 += 1,
        }
    }
    assert!(seen.0 >= 2 && seen.1 >= 2, "{seen:?}");
}
