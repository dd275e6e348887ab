//! A command test workload's printed value (format version 11): its unit and its
//! direction are the ones its experiment declared, recorded in each sample, which the
//! metric `command_value` itself cannot say. The staircase fixture's burn runtimes
//! (10, 11, 12 s at 0 busy neighbors ... ) become a command's "latency in ms", lower
//! is better: the tables must count a longer one as a degradation, as they do for the
//! runtime, and title it in ms.

use nnb_analysis::read::read_run;
use nnb_analysis::table::Cell;
use nnb_analysis::tables::{degradation, tidy};
use serde_json::{json, Value};

use crate::fixture::copied;

/// The fixture's test records as a command printing `runtime_s x 1000` ms.
fn as_command(r: &mut Value) {
    r["format_version"] = json!(11);
    if r["role"] != "test" || r["status"] != "ok" {
        return;
    }
    let ms = r["runtime_s"].as_f64().unwrap() * 1e3;
    r["job"] = json!("command");
    r["metric"] = json!("command_value");
    r["value"] = json!(ms);
    r["higher_is_better"] = json!(false);
    r["command_value"] = json!(ms);
    r["runtime_s"] = Value::Null;
    r["ops_per_sec"] = Value::Null;
    r["result"] = json!({"unit": "ms", "value": ms, "higher_is_better": false});
}

#[test]
fn a_declared_unit_and_direction_carry_into_the_tables() {
    let burn = read_run(copied("staircase", |_| {}, |_| {}).path()).unwrap();
    let dir = copied("staircase", |m| m["format_version"] = json!(11), as_command);
    let run = read_run(dir.path()).unwrap();
    let d = degradation(&run).unwrap().expect("a staircase degrades");
    assert_eq!(d.unit, "ms");
    assert!(!d.higher_is_better);
    // The same records in ms, lower is better: the same degradation as the runtime's.
    let reference = degradation(&burn).unwrap().unwrap();
    let pcts = |d: &nnb_analysis::tables::Degradation| -> Vec<Option<f64>> {
        d.groups
            .iter()
            .flat_map(|g| g.levels.iter().map(|l| l.degradation_pct))
            .collect()
    };
    let (ours, theirs) = (pcts(&d), pcts(&reference));
    assert_eq!(ours.len(), theirs.len());
    for (o, t) in ours.iter().zip(&theirs) {
        match (o, t) {
            (Some(o), Some(t)) => assert!((o - t).abs() < 1e-9, "{o} vs {t}"),
            _ => assert_eq!(o.is_some(), t.is_some()),
        }
    }
    assert!(ours.iter().flatten().any(|&p| p > 0.0), "{ours:?}");
    // The long form: command_value's degradation has the runtime's sign (a
    // longer time is worse), not the higher-is-better fallback's.
    let long = tidy(&run).unwrap();
    let col = |name: &str| long.columns.iter().position(|c| c == name).unwrap();
    let (metric, role, degr) = (col("metric"), col("role"), col("degradation_pct"));
    let degradations: Vec<f64> = long
        .rows
        .iter()
        .filter(|r| {
            matches!(&r[metric], Cell::Text(m) if m == "command_value")
                && matches!(&r[role], Cell::Text(t) if t == "test")
        })
        .filter_map(|r| match r[degr] {
            Cell::Num { value, .. } => Some(value),
            _ => None,
        })
        .collect();
    assert!(!degradations.is_empty());
    let max = degradations.iter().copied().fold(f64::MIN, f64::max);
    let expected = theirs.iter().flatten().copied().fold(f64::MIN, f64::max);
    assert!((max - expected).abs() < 1e-6, "{max} vs {expected}");
}
