//! Version-3 records stay readable in versions 4 to 6: a sample written before the
//! conditions columns (and version 5's metric columns) existed reads with them null
//! and writes back with every field it had, plus those nulls; a version-4 sample made from a job's result carries them.

use std::time::SystemTime;

use nnb_format::{
    parse_sample, JobKind, Metrics, Role, Sample, SampleParts, SampleStatus, Scenario,
    StepConditions, StepGroup, StepRecord, CONDITION_COLUMNS, FORMAT_VERSION,
};
use serde_json::{json, Value};

/// A version-3 burn record as `nnb run` wrote it: steal without counters, no
/// conditions columns.
fn v3_line() -> Value {
    json!({"format_version": 3, "run_id": "20261122T100000Z-aaaaaa",
        "step": "busy/neighbors=1/rep=1", "step_index": 3, "part": 1, "parts": 1,
        "scenario": "neighbor-staircase", "group": "busy", "level": 1.0,
        "level_label": "neighbors=1", "rep": 1, "warmup": false, "tenant": "test",
        "role": "test", "job": "burn", "status": "ok", "error": null, "attempts": 1,
        "started_at": "2026-11-22T10:00:00.000Z", "elapsed_ms": 2100.0,
        "metric": "runtime_s", "value": 2.0, "higher_is_better": false,
        "runtime_s": 2.0, "ops_per_sec": 1e8, "rtt_mean_ns": null, "rtt_p50_ns": null,
        "rtt_p90_ns": null, "rtt_p99_ns": null, "rtt_p999_ns": null, "rate_bps": null,
        "ns_per_op_per_thread": 10.0, "hdr_log": null,
        "result": {"steal": {"cpus": [1], "ticks": 4, "user_hz": 100}}})
}

#[test]
fn a_v3_sample_reads_with_null_conditions() {
    let line = v3_line();
    let s: Sample = parse_sample(&line.to_string()).unwrap();
    assert_eq!(s.format_version, 3);
    assert_eq!(s.conditions, StepConditions::default());
    let mut written = serde_json::to_value(&s).unwrap();
    for c in CONDITION_COLUMNS
        .into_iter()
        .chain(crate::ADDED_IN_V5)
        .chain(crate::ADDED_IN_V8)
        .chain(crate::ADDED_IN_V9)
        .chain(crate::ADDED_IN_V10)
        .chain(crate::ADDED_IN_V11)
    {
        let v = written.as_object_mut().unwrap().remove(c);
        assert_eq!(v, Some(Value::Null), "{c}");
    }
    assert_eq!(written, line);
}

struct Step;

impl StepRecord for Step {
    fn id(&self) -> &str {
        "idle/neighbors=2/rep=1"
    }
    fn group(&self) -> StepGroup {
        StepGroup::Idle
    }
    fn level(&self) -> f64 {
        2.0
    }
    fn level_label(&self) -> &str {
        "neighbors=2"
    }
    fn rep(&self) -> u32 {
        1
    }
    fn warmup(&self) -> bool {
        false
    }
    fn present(&self) -> &[String] {
        &[]
    }
}

/// A latency job's result with its conditions: 12 ticks at 100 per second = 0.12 s.
#[test]
fn a_v4_sample_carries_the_conditions_of_its_result() {
    let result = json!({"counts": {"sent": 10, "answered": 10},
        "steal": {"cpus": [0, 1], "ticks": 12, "user_hz": 100, "before": 500, "after": 512},
        "uptime_s": 7200.0, "freq": {"mhz": 3100.0, "source": "scaling-cur-freq"}});
    let part = |result: Option<Value>| SampleParts {
        tenant: "test".into(),
        role: Role::Test,
        job: JobKind::Latency,
        status: SampleStatus::Ok,
        error: None,
        attempts: 1,
        started_at: SystemTime::UNIX_EPOCH,
        elapsed_ms: 1.0,
        metrics: Metrics::default(),
        conditions: result.as_ref().map(StepConditions::of).unwrap_or_default(),
        sampler: None,
        hdr_log: None,
        result,
    };
    let s = Sample::new(
        "r",
        Scenario::NeighborStaircase,
        0,
        &Step,
        1,
        1,
        part(Some(result)),
    );
    assert_eq!(s.format_version, FORMAT_VERSION);
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["steal_ticks_before"], 500);
    assert_eq!(v["steal_ticks_after"], 512);
    assert_eq!(v["steal_s"], 0.12);
    assert_eq!(v["uptime_s"], 7200.0);
    assert_eq!(v["effective_mhz"], 3100.0);
    assert_eq!(v["freq_source"], "scaling-cur-freq");
    let back: Sample = parse_sample(&v.to_string()).unwrap();
    assert_eq!(back, s);
    let failed = Sample::new("r", Scenario::NeighborStaircase, 0, &Step, 1, 1, part(None));
    assert_eq!(failed.conditions, StepConditions::default());
}
