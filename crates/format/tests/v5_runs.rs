//! Version-5 disk results stay readable in version 6: their latencies, written in µs
//! (`mean_us`, `p50_us`, `p99_us`, `max_us`), read as the same latencies in ns, the
//! unit of every other latency of nnb.

use nnb_format::job::{DiskLatency, DiskPacing};
use nnb_format::{parse_sample, JobKind, JobResult, Sample};
use serde_json::{json, Value};

/// A version-5 disk record as `nnb run` wrote it: 200 reads and 200 writes in 2 s.
fn v5_line() -> Value {
    json!({"format_version": 5, "run_id": "20261123T100000Z-bbbbbb",
        "step": "pair/a=saturated,b=saturated/rep=1", "step_index": 9, "part": 1, "parts": 2,
        "scenario": "isolation-matrix", "group": "pair", "level": 16.0,
        "level_label": "a=saturated,b=saturated", "rep": 1, "warmup": false, "tenant": "a",
        "role": "test", "job": "disk", "status": "ok", "error": null, "attempts": 1,
        "started_at": "2026-11-23T10:00:00.000Z", "elapsed_ms": 2300.0,
        "metric": "iops", "value": 200.0, "higher_is_better": true,
        "iops": 200.0, "host_iops": 201.0, "hdr_log": null,
        "result": {"target_iops": 200.0, "ops": 400, "reads": 200, "writes": 200,
            "elapsed_s": 2.0, "iops": 200.0,
            "latency": {"mean_us": 812.5, "p50_us": 640.0, "p99_us": 2400.0, "max_us": 10250.0},
            "read_latency": {"mean_us": 150.75, "p50_us": 120.5, "p99_us": 900.0,
                "max_us": 1800.0},
            "write_latency": {"mean_us": 1474.25, "p50_us": 1200.0, "p99_us": 3000.0,
                "max_us": 10250.0},
            "pacing": {"p50_us": 12.5, "p99_us": 480.0, "max_us": 1500.0, "late_ops": 3}}})
}

/// Worked by hand: 1 µs = 1000 ns, and every µs figure above is a sum of powers of
/// two, so its ns figure is exact. All operations: reads and writes as many, so the
/// mean is theirs halved, (150.75 + 1474.25) / 2 = 812.5 µs = 812 500 ns; the longest
/// is the longest write, 10 250 µs = 10 250 000 ns.
#[test]
fn a_v5_disk_result_reads_its_microseconds_as_nanoseconds() {
    let s: Sample = parse_sample(&v5_line().to_string()).unwrap();
    assert_eq!(s.format_version, 5);
    let result = s.result.as_ref().unwrap();
    let JobResult::Disk(d) = JobResult::parse_of_version(JobKind::Disk, s.format_version, result)
        .unwrap_or_else(|e| panic!("{e}: {result}"))
    else {
        panic!("not a disk result: {result}");
    };
    let ns = |mean_ns, p50_ns, p99_ns, max_ns| DiskLatency {
        mean_ns,
        p50_ns,
        p99_ns,
        max_ns,
    };
    assert_eq!(
        d.latency,
        Some(ns(812_500.0, 640_000.0, 2_400_000.0, 10_250_000.0))
    );
    assert_eq!(
        d.read_latency,
        Some(ns(150_750.0, 120_500.0, 900_000.0, 1_800_000.0))
    );
    assert_eq!(
        d.write_latency,
        Some(ns(1_474_250.0, 1_200_000.0, 3_000_000.0, 10_250_000.0))
    );
    assert_eq!(
        d.pacing,
        Some(DiskPacing {
            p50_ns: 12_500.0,
            p99_ns: 480_000.0,
            max_ns: 1_500_000.0,
            late_ops: 3,
        })
    );
    assert_eq!((d.elapsed_s, d.iops), (2.0, 200.0));
    assert_eq!(JobResult::Disk(d).measured_secs(0.0), 2.0);

    // Version 6 writes the same run in ns: it reads as the version-5 one does.
    let mut v6 = result.clone();
    for (key, l) in [
        ("latency", d.latency),
        ("read_latency", d.read_latency),
        ("write_latency", d.write_latency),
    ] {
        let l = l.unwrap();
        v6[key] = json!({"mean_ns": l.mean_ns, "p50_ns": l.p50_ns as u64,
            "p99_ns": l.p99_ns as u64, "max_ns": l.max_ns as u64});
    }
    v6["pacing"] = json!({"p50_ns": 12_500, "p99_ns": 480_000, "max_ns": 1_500_000,
        "late_ops": 3});
    assert_eq!(
        JobResult::parse_of_version(JobKind::Disk, 6, &v6).unwrap(),
        JobResult::Disk(d)
    );
    assert_eq!(
        JobResult::parse(JobKind::Disk, &v6).unwrap(),
        JobResult::Disk(d)
    );
    // Microseconds in a version-6 result are not read as anything.
    assert!(JobResult::parse(JobKind::Disk, result).is_err());
    // Nor is anything but a disk job's result changed for an old version.
    let burn = json!({"burn": {"wall_ns": 2e9, "ops_per_sec": 5.0, "p50_us": 1.0}});
    assert_eq!(
        JobResult::parse_of_version(JobKind::Burn, 5, &burn).unwrap(),
        JobResult::parse(JobKind::Burn, &burn).unwrap()
    );
}
