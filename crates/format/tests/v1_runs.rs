//! Version-1 runs stay readable: every record of the analysis fixtures (runs in format
//! version 1) parses into the typed records and serializes back with every field and
//! value it had; the only additions are the columns of versions 2 and 4, null.

use std::path::{Path, PathBuf};

use nnb_format::{
    parse_sample, ExperimentView, JobKind, LineError, Manifest, Metric, NetworkView, Role, Sample,
    SampleStatus, Scenario, SessionStatus, StepGroup, MANIFEST, SAMPLES,
};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../analysis/fixtures")
        .join(name)
}

fn lines(run: &str) -> Vec<String> {
    std::fs::read_to_string(fixture(run).join(SAMPLES))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Columns version 2 added to a sample.
const ADDED_IN_V2: [&str; 1] = ["ns_per_op_per_thread"];

/// Columns added since version 1: version 2's, 4's, 5's, 8's, 9's, 10's and 11's.
fn added_since_v1() -> impl Iterator<Item = &'static str> {
    ADDED_IN_V2
        .into_iter()
        .chain(nnb_format::CONDITION_COLUMNS)
        .chain(crate::ADDED_IN_V5)
        .chain(crate::ADDED_IN_V8)
        .chain(crate::ADDED_IN_V9)
        .chain(crate::ADDED_IN_V10)
        .chain(crate::ADDED_IN_V11)
}

#[test]
fn v1_samples_round_trip_with_every_field() {
    for run in [
        "staircase",
        "thread-sweep",
        "isolation-matrix",
        "load-steps",
        "throughput-m5",
    ] {
        for line in lines(run) {
            let sample: Sample = parse_sample(&line).unwrap_or_else(|e| panic!("{run}: {e}"));
            assert_eq!(sample.format_version, 1);
            let mut written: Value = serde_json::to_value(&sample).unwrap();
            let read: Value = serde_json::from_str(&line).unwrap();
            for added in added_since_v1() {
                let v = written.as_object_mut().unwrap().remove(added);
                assert_eq!(v, Some(Value::Null), "{run}: {added}");
            }
            assert_eq!(written, read, "{run}: {line}");
        }
    }
}

#[test]
fn v1_manifests_round_trip_unchanged() {
    for run in ["staircase", "load-steps", "throughput-m5"] {
        let text = std::fs::read_to_string(fixture(run).join(MANIFEST)).unwrap();
        let m: Manifest = serde_json::from_str(&text).unwrap();
        assert_eq!(m.format_version, 1);
        let read: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_value(&m).unwrap(), read, "{run}");
    }
}

/// Every fixture's manifest reads through the readers' view of its experiment, with
/// its sessions' statuses and tenants' roles typed.
#[test]
fn v1_manifests_read_with_the_experiment_view() {
    let kinds = [
        ("staircase", Scenario::NeighborStaircase),
        ("thread-sweep", Scenario::ThreadSweep),
        ("isolation-matrix", Scenario::IsolationMatrix),
        ("load-steps", Scenario::LoadSteps),
        ("throughput-m5", Scenario::LoadSteps),
    ];
    for (run, kind) in kinds {
        let text = std::fs::read_to_string(fixture(run).join(MANIFEST)).unwrap();
        let m: Manifest<Value, Value, ExperimentView> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{run}: {e}"));
        assert_eq!(m.experiment.scenario.kind, kind, "{run}");
        assert_eq!(m.sessions[0].status, SessionStatus::Completed, "{run}");
        assert_eq!(
            m.experiment.tenant(Role::Test).map(|t| t.vcpus.is_some()),
            Some(true),
            "{run}"
        );
    }
    let text = std::fs::read_to_string(fixture("thread-sweep").join(MANIFEST)).unwrap();
    let m: Manifest<Value, Value, ExperimentView> = serde_json::from_str(&text).unwrap();
    assert_eq!(m.sessions[0].tenants[0].role, Role::Test);
    let text = std::fs::read_to_string(fixture("load-steps").join(MANIFEST)).unwrap();
    let m: Manifest<Value, Value, ExperimentView> = serde_json::from_str(&text).unwrap();
    assert_eq!(
        m.experiment.network,
        NetworkView::Emulated { host_bw_bps: 200e6 }
    );
}

/// `staircase` line 2: `busy/neighbors=0/rep=1`, runtime 10.0 s; line 24 failed.
#[test]
fn typed_fields_of_a_v1_run() {
    let all = lines("staircase");
    let s: Sample<serde::de::IgnoredAny> = parse_sample(&all[1]).unwrap();
    assert_eq!((s.metric, s.value), (Some(Metric::RuntimeS), Some(10.0)));
    assert_eq!(s.get(Metric::RuntimeS), Some(10.0));
    assert_eq!(s.status, SampleStatus::Ok);
    assert_eq!(
        (s.scenario, s.group, s.role, s.job),
        (
            Scenario::NeighborStaircase,
            StepGroup::Busy,
            Role::Test,
            JobKind::Burn
        )
    );
    let failed: Sample = parse_sample(&all[23]).unwrap();
    assert_eq!((failed.status, failed.metric), (SampleStatus::Failed, None));
    // A name the format does not have is not a record.
    for (field, name) in [("group", "busier"), ("role", "tester"), ("job", "idle")] {
        let mut v: Value = serde_json::from_str(&all[1]).unwrap();
        v[field] = Value::from(name);
        let err = parse_sample::<Value>(&v.to_string()).unwrap_err();
        assert!(
            matches!(&err, LineError::Invalid(m) if m.contains(&format!("`{name}`"))),
            "{field}: {err}"
        );
    }
}

#[test]
fn other_versions_and_broken_lines_are_told_apart() {
    let wrong = std::fs::read_to_string(fixture("wrong-version").join(SAMPLES)).unwrap();
    let third = wrong.lines().nth(2).unwrap();
    assert_eq!(
        parse_sample::<Value>(third).unwrap_err(),
        LineError::Version(99)
    );
    assert_eq!(
        parse_sample::<Value>(r#"{"format_version": 99}"#).unwrap_err(),
        LineError::Version(99)
    );
    assert!(matches!(
        parse_sample::<Value>(r#"{"format_version": 1, "run_id""#),
        Err(LineError::Invalid(_))
    ));
}

/// The flat columns are a sample's fields less `format_version`, `run_id` and
/// `result`, in order, and every metric has its column.
#[test]
fn columns_are_the_flat_fields_of_a_sample() {
    let line = &lines("load-steps")[0];
    let v: serde_json::Map<String, Value> = serde_json::from_str(line).unwrap();
    let flat: Vec<&str> = v
        .keys()
        .map(String::as_str)
        .filter(|k| !["format_version", "run_id", "result"].contains(k))
        .collect();
    let mut sorted_flat = flat.clone();
    sorted_flat.sort_unstable();
    let mut sorted_columns: Vec<&str> = nnb_format::columns()
        .filter(|c| !added_since_v1().any(|a| a == *c))
        .collect();
    sorted_columns.sort_unstable();
    assert_eq!(sorted_flat, sorted_columns);
    for m in Metric::ALL {
        assert!(nnb_format::columns().any(|c| c == m.name()), "{m}");
    }
}
