//! End-to-end tests of `nnb topo`: the built binary reads fixture trees, prints the
//! numbers a person and a script need, refuses bad roots and bad probe flags with exit
//! code 2, and runs the SMT probe on this machine.

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

use crate::support::cli::{json, nnb};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/burn/fixtures")
        .join(name)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn m5_metal_json_has_the_fixture_numbers() {
    let root = fixture("m5.metal");
    let v = json(&["topo", "--sysfs-root", &root.to_string_lossy(), "--json"]);
    let s = &v["summary"];
    assert_eq!(s["logical"], 96);
    assert_eq!(s["online"], 96);
    assert_eq!(s["cores"], 48);
    assert_eq!(s["packages"], 2);
    assert_eq!(s["numa_nodes"], 2);
    assert_eq!(s["smt_ways"], 2);
    let cores = v["cores"].as_array().map(Vec::len);
    assert_eq!(cores, Some(48));
    assert_eq!(v["cores"][0], serde_json::json!([0, 48]));
    assert_eq!(v["cores"][47], serde_json::json!([47, 95]));
    assert_eq!(v["cpus"].as_array().map(Vec::len), Some(96));
    assert_eq!(v["cpus"][72]["package"], 1);
    assert_eq!(v["cpus"][72]["numa_node"], 1);
    assert_eq!(v["numa_nodes"][1]["id"], 1);
    assert_eq!(v["sysfs_root"], root.to_string_lossy().as_ref());
    // The clock and hypervisor are this machine's, and say so.
    let describes = v["machine"]["describes"].as_str().unwrap_or_default();
    assert!(
        describes.contains("not the --sysfs-root tree"),
        "{describes}"
    );
    assert!(v["machine"]["clock"]["freq_hz"]
        .as_f64()
        .is_some_and(|f| f > 0.0));
    assert!(v["probe"].is_null());
}

#[test]
fn human_output_names_the_offline_cpu_and_the_lone_sibling() {
    let root = fixture("offline-cpu");
    let o = nnb(&["topo", "--sysfs-root", &root.to_string_lossy()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let line = |key: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(key))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("no {key:?} line in:\n{out}"))
    };
    assert_eq!(line("logical CPUs"), ["logical", "CPUs", "8"]);
    assert_eq!(line("online"), ["online", "7", "(0-2,4-7)"]);
    assert_eq!(line("offline"), ["offline", "3"]);
    assert_eq!(line("physical cores"), ["physical", "cores", "4"]);
    assert_eq!(line("SMT ways"), ["SMT", "ways", "2"]);
    // Core 3 holds cpu7 alone: columns core, package, die, core_id, NUMA, CPUs.
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().eq(["3", "0", "0", "3", "0", "7"])),
        "{out}"
    );
    assert!(
        out.contains("this machine, not the --sysfs-root tree"),
        "{out}"
    );
}

#[test]
fn every_fixture_reads() {
    for (name, cores, smt) in [
        ("m6a.metal", 96, 2),
        ("m6g.metal", 64, 1),
        ("m5.2xlarge", 4, 2),
        ("lying-hypervisor", 8, 1),
    ] {
        let root = fixture(name);
        let v = json(&["topo", "--sysfs-root", &root.to_string_lossy(), "--json"]);
        assert_eq!(v["summary"]["cores"], cores, "{name}");
        assert_eq!(v["summary"]["smt_ways"], smt, "{name}");
    }
}

#[test]
fn a_missing_root_is_a_usage_error() {
    let o = nnb(&["topo", "--sysfs-root", "/nonexistent/nnb-fixture"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("--sysfs-root /nonexistent/nnb-fixture: no such directory"),
        "{err}"
    );
    assert!(stdout(&o).is_empty());
}

#[test]
fn a_root_without_sysfs_names_what_is_missing() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path().to_string_lossy().into_owned();
    let o = nnb(&["topo", "--sysfs-root", &root, "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("not a readable sysfs tree"), "{err}");
    assert!(
        err.contains(&format!("{root}/sys/devices/system/cpu")),
        "{err}"
    );
}

#[test]
fn probe_flags_are_checked() {
    let root = fixture("m5.metal");
    let o = nnb(&["topo", "--probe", "--sysfs-root", &root.to_string_lossy()]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "the probe measures this machine only"
    );
    let o = nnb(&["topo", "--probe", "--probe-trials", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--probe-trials must be at least 1"),
        "{}",
        stderr(&o)
    );
    let o = nnb(&["topo", "--probe", "--probe-cpus", "0,999"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("CPU 999 does not exist"),
        "{}",
        stderr(&o)
    );
    let o = nnb(&["topo", "--probe", "--probe-cpus", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("at least two CPUs"), "{}", stderr(&o));
    let o = nnb(&["topo", "--probe-trials", "3"]);
    assert_eq!(o.status.code(), Some(2), "--probe-trials needs --probe");
}

#[test]
fn probe_runs_on_this_machine_and_announces_its_cost() {
    let o = nnb(&["topo", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    let online = v["summary"]["online"].as_u64().unwrap_or(0);
    if !nnb_testkit::require(
        online >= 2,
        &format!("the probe needs two CPUs, this machine has {online}"),
    ) {
        return;
    }
    let o = nnb(&["topo", "--probe", "--probe-cpus", "0,1", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("probing SMT siblings of 2 CPUs (1 pair x 3 trials)"),
        "{err}"
    );
    assert!(err.contains("for 96 CPUs)"), "{err}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    let p = &v["probe"];
    assert_eq!(p["pairs"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(p["pairs"][0]["a"], 0);
    assert_eq!(p["pairs"][0]["b"], 1);
    assert_eq!(p["pairs"][0]["ratios"].as_array().map(Vec::len), Some(3));
    assert_eq!(p["config"]["cpus"], serde_json::json!([0, 1]));
    assert!(p["duration_s"].as_f64().is_some_and(|d| d > 0.0));
    assert!(p["disagreements"].is_array());
}
