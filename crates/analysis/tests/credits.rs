//! Burst credits (review item 42): the `throughput-m5` fixture (an aws m5.large
//! load-steps run, steps 0-5: load=0 reps 1-2 the test tenant's probes alone, then
//! load=50M and load=100M with three load-generating neighbors) given, by hand,
//! what a version-9 agent reports around each job: `uptime_s` = 1000 + 120 x the
//! step index, and the ENA's allowance counters, which rose only for neighbor-1 at
//! load/load=50M/rep=1 (pps +3) and for neighbor-2 at load/load=100M/rep=2
//! (bw_out +1500). The neighbors' first records are at step 2 (uptime 1240), so
//! their load=100M records (steps 4-5) ran 240 and 360 s after it: 360 > 300 s,
//! the shortest burst window of an m5.large, at load=100M only.

use nnb_analysis::read::{read_run, Run};
use nnb_analysis::tables::{credits, Analyses, CreditLevel, Credits};
use serde_json::{json, Value};

use crate::fixture::copied;

/// An `ena` reading whose counters rose by `rise` ([bw_in, bw_out, pps,
/// conntrack, linklocal]) from a non-zero `before`.
fn ena(before: u64, rise: [u64; 5]) -> Value {
    let names = [
        "bw_in_allowance_exceeded",
        "bw_out_allowance_exceeded",
        "pps_allowance_exceeded",
        "conntrack_allowance_exceeded",
        "linklocal_allowance_exceeded",
    ];
    let mut b = json!({});
    let mut a = json!({});
    for (name, r) in names.into_iter().zip(rise) {
        b[name] = json!(before);
        a[name] = json!(before + r);
    }
    json!({"interfaces": ["ens5"], "before": b, "after": a})
}

fn with_credits(instance_type: &str, record: impl Fn(&mut Value, u64)) -> (tempfile::TempDir, Run) {
    let instance_type = instance_type.to_string();
    let dir = copied(
        "throughput-m5",
        |m| m["experiment"]["provider"]["instance_type"] = json!(instance_type),
        |r| {
            let step = r["step_index"].as_u64().unwrap();
            record(r, step);
        },
    );
    let run = read_run(dir.path()).unwrap();
    (dir, run)
}

/// The (label, tenant) of the rows `flagged` picks.
fn rows(c: &Credits, flagged: impl Fn(&CreditLevel) -> bool) -> Vec<(String, String)> {
    c.levels
        .iter()
        .filter(|l| flagged(l))
        .map(|l| (l.label.clone(), l.tenant.clone()))
        .collect()
}

fn pair(label: &str, tenant: &str) -> (String, String) {
    (label.to_string(), tenant.to_string())
}

#[test]
fn the_levels_whose_allowance_counters_rose_are_flagged() {
    let (_d, run) = with_credits("m5.large", |r, step| {
        let rise = match (r["step"].as_str().unwrap(), r["tenant"].as_str().unwrap()) {
            ("load/load=50M/rep=1", "neighbor-1") => [0, 0, 3, 0, 0],
            ("load/load=100M/rep=2", "neighbor-2") => [0, 1500, 0, 0, 0],
            _ => [0; 5],
        };
        r["result"]["uptime_s"] = json!(1000 + 120 * step);
        r["result"]["ena"] = ena(100 * step + 7, rise);
    });
    let c = credits(&run)
        .unwrap()
        .expect("an m5.large run has a burst window");
    assert_eq!(
        rows(&c, CreditLevel::allowance_exceeded),
        [
            pair("load=50M", "neighbor-1"),
            pair("load=100M", "neighbor-2")
        ]
    );
    assert_eq!(
        rows(&c, |l| l.past_window(c.window)),
        [
            pair("load=100M", "neighbor-1"),
            pair("load=100M", "neighbor-2"),
            pair("load=100M", "neighbor-3"),
        ],
        "the test tenant's probes (360 s at load=50M) are not network loads"
    );
    let n1 = |label: &str| {
        c.levels
            .iter()
            .find(|l| l.label == label && l.tenant == "neighbor-1")
            .unwrap()
    };
    assert_eq!(
        (n1("load=50M").since_first_s, n1("load=100M").since_first_s),
        (Some(120.0), Some(360.0))
    );
    assert!(
        c.levels.iter().all(|l| l.cpu_credits_est.is_none()),
        "not burstable"
    );

    let verdict = Analyses::of(&run).unwrap().verdict;
    let line = |what: &str| verdict.iter().find(|l| l.contains(what)).cloned();
    let exceeded = line("ENA allowance exceeded").expect("an ENA line");
    assert!(
        exceeded.contains("at load/load=50M, load/load=100M:"),
        "{exceeded}"
    );
    let past = line("burst window").expect("a burst window line");
    assert!(
        past.starts_with("1 level(s) from load/load=100M") && past.contains("m5.large (5-60 min"),
        "{past}"
    );
    let table = c.table();
    assert_eq!(table.name, "credits");
    let flags = table.columns.iter().position(|h| h == "flags").unwrap();
    let flagged: Vec<String> = table.rows.iter().map(|r| r[flags].display()).collect();
    assert!(
        flagged.contains(&"bw_out_allowance_exceeded +1500, past the burst window".to_string()),
        "{flagged:?}"
    );
}

/// The same run without the agent's readings: the table is there (an m5.large has
/// a burst window) but nothing is flagged and the verdict says nothing of credits.
#[test]
fn without_readings_nothing_is_flagged() {
    let (_d, run) = with_credits("m5.large", |_, _| {});
    let c = credits(&run).unwrap().expect("table");
    assert!(c
        .levels
        .iter()
        .all(|l| l.since_first_s.is_none() && l.ena_rose.is_none()));
    let verdict = Analyses::of(&run).unwrap().verdict;
    assert!(
        !verdict
            .iter()
            .any(|l| l.contains("ENA") || l.contains("burst window") || l.contains("CPU credits")),
        "{verdict:?}"
    );
    // A local run (no instance type, no ENA) has no credits table at all.
    let (_d, local) = copied_local();
    assert!(credits(&local).unwrap().is_none());
}

fn copied_local() -> (tempfile::TempDir, Run) {
    let dir = copied("load-steps", |_| {}, |_| {});
    let run = read_run(dir.path()).unwrap();
    (dir, run)
}

/// A t3.micro (12 credits/h, at most 288): the test tenant's records k = 0..5 at
/// uptime 36000 + 600 k s with 3600 + 1200 k busy CPU-seconds. From 0 at boot:
/// k0 120 earned - 60 spent = 60; then each 600 s earns 2 and spends 20: 42, 24, 6,
/// 0, 0 (never below 0). Per level the lowest: load=0 42, load=50M 6, load=100M 0;
/// below 10% of 288 (28.8) at load=50M and load=100M.
#[test]
fn the_cpu_credit_estimate_by_hand() {
    let (_d, run) = with_credits("t3.micro", |r, step| {
        if r["tenant"] == "test" {
            r["result"]["uptime_s"] = json!(36000 + 600 * step);
            r["result"]["cpu_busy_s"] = json!(3600 + 1200 * step);
        }
    });
    let c = credits(&run).unwrap().expect("a t3.micro has CPU credits");
    assert_eq!(c.window, None, "a t3.micro is not a host family size here");
    let est: Vec<(String, Option<f64>)> = c
        .levels
        .iter()
        .filter(|l| l.tenant == "test")
        .map(|l| (l.label.clone(), l.cpu_credits_est))
        .collect();
    assert_eq!(
        est,
        [
            ("load=0".to_string(), Some(42.0)),
            ("load=50M".to_string(), Some(6.0)),
            ("load=100M".to_string(), Some(0.0)),
        ]
    );
    assert_eq!(
        rows(&c, |l| l.credits_low(c.cpu.as_ref())),
        [pair("load=50M", "test"), pair("load=100M", "test")]
    );
    let verdict = Analyses::of(&run).unwrap().verdict;
    assert!(
        verdict.iter().any(
            |l| l.starts_with("estimated CPU credits of t3.micro below 10%")
                && l.contains("at load/load=50M, load/load=100M:")
        ),
        "{verdict:?}"
    );
}
