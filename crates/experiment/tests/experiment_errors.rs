//! Bad experiment files: each error names the file, the right line and column, and
//! says what is wrong.

use std::sync::LazyLock;

use nnb_experiment::{parse, Diagnostic, Scenario};
use nnb_testkit::Staircase;

/// A valid staircase (the shared fixture, nothing optional); each test breaks one
/// line of it.
static GOOD: LazyLock<String> = LazyLock::new(|| Staircase::default().toml());

/// Parses `src` on a pretend 2-CPU host and returns the diagnostic it must produce.
fn diagnose(src: &str) -> Diagnostic {
    match parse("bad.toml", src, Some(2)) {
        Ok(_) => panic!("accepted an invalid file:\n{src}"),
        Err(e) => match e.diagnostic() {
            Some(d) => d.clone(),
            None => panic!("error without location: {e}"),
        },
    }
}

/// `GOOD` with `from` replaced by `to` (which must occur).
fn broken(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "fixture lacks {from}");
    GOOD.replacen(from, to, 1)
}

/// The 1-based line of the first occurrence of `needle` in `src`.
fn line_of(src: &str, needle: &str) -> usize {
    let at = src.find(needle).unwrap_or_else(|| panic!("no {needle}"));
    src[..at].matches('\n').count() + 1
}

fn assert_error(src: &str, needle: &str, message_part: &str) {
    let d = diagnose(src);
    assert_eq!(d.line, line_of(src, needle), "wrong line for: {d}");
    assert!(
        d.message.contains(message_part),
        "message `{}` lacks `{message_part}`",
        d.message
    );
    let shown = d.to_string();
    assert!(
        shown.starts_with(&format!("bad.toml:{}:{}: error: ", d.line, d.column)),
        "{shown}"
    );
    assert!(shown.contains('^'), "{shown}");
}

#[test]
fn the_fixture_is_valid() {
    let exp = parse("good.toml", &GOOD, Some(2)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(exp.tenants.len(), 3);
    match exp.scenario {
        Scenario::NeighborStaircase(s) => assert_eq!(s.levels, vec![0, 1, 2]),
        other => panic!("wrong scenario {other:?}"),
    }
}

#[test]
fn unknown_key() {
    let src = broken("settle = \"1s\"", "settle = \"1s\"\nsettel_time = 3");
    assert_error(&src, "settel_time", "unknown field `settel_time`");
}

#[test]
fn unknown_key_inside_the_scenario() {
    let src = broken("ops = 1000", "ops = 1000\nthraeds = 2");
    assert_error(&src, "thraeds", "unknown field `thraeds`");
}

#[test]
fn bad_unit() {
    let src = broken("settle = \"1s\"", "settle = \"1 fortnight\"");
    assert_error(&src, "settle", "unknown unit");
}

/// A bare number used to mean seconds: `settle = "500"` was 500 s, not 500 ms.
#[test]
fn bare_number_duration_names_the_unit() {
    let src = broken(r#"settle = "1s""#, r#"settle = "500""#);
    assert_error(&src, "settle", "`500s` or `500ms`");
}

#[test]
fn more_vcpus_than_the_host_has() {
    let src = broken("role = \"test\"\nvcpus = 1", "role = \"test\"\nvcpus = 64");
    assert_error(&src, "vcpus = 64", "this host has 2 online CPUs");
}

#[test]
fn negative_count() {
    let src = broken("count = 2", "count = -2");
    assert_error(&src, "count = -2", "-2");
}

#[test]
fn zero_repetitions() {
    let src = broken("repetitions = 2", "repetitions = 0");
    assert_error(&src, "repetitions", "at least 1");
}

#[test]
fn wrong_type() {
    let src = broken("repetitions = 2", "repetitions = \"many\"");
    assert_error(&src, "repetitions", "invalid type");
}

#[test]
fn missing_test_tenant() {
    let src = broken("role = \"test\"", "role = \"neighbor\"");
    // Points at the tenants array, which starts at the first [[tenants]].
    assert_error(&src, "[[tenants]]", "no tenant has role = \"test\"");
}

#[test]
fn unknown_scenario_kind() {
    let src = broken(
        "kind = \"neighbor-staircase\"",
        "kind = \"neighbour-stairs\"",
    );
    assert_error(&src, "neighbour-stairs", "unknown scenario kind");
}

#[test]
fn bad_range() {
    let src = r#"name = "s"
[[tenants]]
role = "test"
[scenario]
kind = "thread-sweep"
threads = "8..1"
[scenario.test]
ops = 10
"#;
    assert_error(src, "threads =", "ends before it starts");
}

#[test]
fn bad_rate_in_load_levels() {
    let src = r#"name = "l"
[[tenants]]
role = "test"
[[tenants]]
role = "neighbor"
[scenario]
kind = "load-steps"
levels = "0:200Q:50M"
"#;
    assert_error(src, "levels", "unknown unit");
}

#[test]
fn more_neighbors_than_defined() {
    let src = broken(
        "neighbor_state = \"both\"",
        "neighbor_state = \"both\"\nmax_neighbors = 5",
    );
    assert_error(&src, "max_neighbors", "only 2 neighbor tenants");
}

#[test]
fn both_ops_and_duration() {
    let src = broken("ops = 1000", "ops = 1000\nduration = \"2s\"");
    assert_error(&src, "duration", "not both");
}

#[test]
fn unknown_workload() {
    let src = broken("ops = 1000", "ops = 1000\nworkload = \"quicksort\"");
    assert_error(&src, "quicksort", "unknown workload");
}

#[test]
fn bad_failure_policy() {
    let src = broken("settle = \"1s\"", "settle = \"1s\"\non_failure = \"pray\"");
    assert_error(&src, "on_failure", "unknown failure policy");
}

#[test]
fn toml_syntax_error() {
    let src = broken("repetitions = 2", "repetitions = = 2");
    assert_error(&src, "repetitions", "");
}

#[test]
fn schema_lists_every_scenario_kind() {
    let schema = serde_json::to_string(&nnb_experiment::schema()).unwrap_or_default();
    for kind in nnb_format::Scenario::NAMES {
        assert!(schema.contains(kind), "schema lacks {kind}");
    }
    assert!(schema.contains("additionalProperties"));
}

#[test]
fn pinned_sweep_beyond_the_test_tenant() {
    let src = r#"name = "s"
[[tenants]]
role = "test"
vcpus = 2
[scenario]
kind = "thread-sweep"
threads = [1, 2, 4]
[scenario.test]
ops = 10
"#;
    assert_error(src, "threads =", "do not fit the test tenant's 2 vCPUs");
    assert!(parse(
        "ok.toml",
        &src.replace("ops = 10", "ops = 10\npin = \"none\""),
        Some(2)
    )
    .is_ok());
}

/// The static provider's agents are the user's: a staircase whose neighbors come
/// and go is refused, naming the way out; with idle unused neighbors it is fine.
#[test]
fn a_static_staircase_must_keep_its_neighbors_up() {
    let provider =
        "[provider]\nkind = \"static\"\nhosts = \"hosts\"\ntoken_file = \"token\"\n\n[[tenants]]";
    let src = GOOD.replacen("[[tenants]]", provider, 1);
    assert_error(&src, "neighbor-staircase", "unused_neighbors = \"idle\"");
    let idle = src.replace(
        "neighbor_state = \"both\"",
        "neighbor_state = \"both\"\nunused_neighbors = \"idle\"",
    );
    let exp = parse("ok.toml", &idle, Some(2)).unwrap_or_else(|e| panic!("{e}"));
    assert!(!exp.scenario.tenants_come_and_go());
}

/// Table C9 of the review: every key the schema documents as aws-only (`aws: ...`)
/// is refused under kind = "local", pointing at it, so a new aws key cannot be
/// accepted silently by the other kinds; the keys of every kind are not.
#[test]
fn every_aws_key_is_refused_under_another_kind() {
    let schema = serde_json::to_value(nnb_experiment::schema()).expect("the schema as JSON");
    let keys = schema
        .pointer("/definitions/ProviderFile/properties")
        .and_then(serde_json::Value::as_object)
        .expect("the schema describes [provider]");
    let mut aws = 0;
    for (key, property) in keys {
        let doc = property["description"].as_str().unwrap_or_default();
        let Some(value) = doc.starts_with("aws:").then(|| toml_value(property)) else {
            continue;
        };
        aws += 1;
        let written = format!("{key} = {value}");
        let provider = format!("[provider]\nkind = \"local\"\n{written}\n\n[[tenants]]");
        let src = GOOD.replacen("[[tenants]]", &provider, 1);
        assert_error(&src, &written, "applies to kind = \"aws\"");
    }
    assert!(aws >= 17, "only {aws} aws keys in the schema: {keys:?}");
    let every_kind = GOOD.replacen(
        "[[tenants]]",
        "[provider]\nkind = \"local\"\nresults_s3 = \"s3://bucket/runs\"\n\n[[tenants]]",
        1,
    );
    let exp = parse("ok.toml", &every_kind, Some(2)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(exp.results_s3.as_deref(), Some("s3://bucket/runs"));
}

/// A TOML value of the type `property` describes (whatever it says: a refused key
/// is refused before its value is read).
fn toml_value(property: &serde_json::Value) -> &'static str {
    let types = property["type"].to_string();
    if property.to_string().contains("TenancyFile") {
        "\"default\""
    } else if types.contains("object") {
        "{ \"us-east-1a\" = \"subnet-1\" }"
    } else if property.get("anyOf").is_some() || property.get("$ref").is_some() {
        "{ x86_64 = \"https://example.com/nnb\" }"
    } else if types.contains("array") {
        "[\"x\"]"
    } else if types.contains("integer") {
        "7700"
    } else if types.contains("number") {
        "1.5"
    } else {
        "\"x\""
    }
}

/// A fair NIC queue needs an emulated NIC.
#[test]
fn a_queue_without_an_emulated_nic() {
    let src = GOOD.replacen(
        "[[tenants]]",
        "[network]\nmode = \"none\"\nqueue = \"fair\"\n\n[[tenants]]",
        1,
    );
    assert_error(&src, "queue = ", "applies to mode = \"emulated\"");
}

/// A valid disk isolation matrix with grants; each grant test breaks one line.
const MATRIX: &str = r#"name = "m"

[[tenants]]
name = "a"
role = "test"
vcpus = 1
grant = { cpu = 0.5, memory = "256M", write_iops = 200, read_iops = 100 }

[[tenants]]
name = "b"
role = "neighbor"
vcpus = 1
grant = { cpu = 0.5, memory = "256M", write_iops = 200, read_iops = 100 }

[scenario]
kind = "isolation-matrix"
resource = "disk"
read_fraction = 0.25
"#;

fn matrix(from: &str, to: &str) -> String {
    assert!(MATRIX.contains(from), "fixture lacks {from}");
    MATRIX.replacen(from, to, 1)
}

#[test]
fn grants_parse_into_the_tenants() {
    let exp = parse("m.toml", MATRIX, Some(2)).unwrap_or_else(|e| panic!("{e}"));
    let a = &exp.tenants[0].grant;
    assert_eq!(a.cpu, Some(0.5));
    assert_eq!(a.memory_bytes, Some(256 << 20));
    assert_eq!((a.read_iops, a.write_iops), (Some(100), Some(200)));
    // A quarter reads: reads bind at 100 / 0.25 = 400, writes at 200 / 0.75 = 266.7.
    let sustained = a.sustained_iops(0.25).unwrap_or_default();
    assert!((sustained - 200.0 / 0.75).abs() < 1e-9, "{sustained}");
    assert_eq!(exp.disk_dir(), Some(std::path::Path::new("/var/tmp")));
    assert!(exp.has_grants());
}

#[test]
fn a_cpu_grant_above_the_tenants_vcpus() {
    let src = matrix("grant = { cpu = 0.5,", "grant = { cpu = 1.5,");
    assert_error(&src, "grant = { cpu = 1.5", "1 vCPUs");
}

#[test]
fn a_memory_grant_too_small_for_the_agent() {
    let src = matrix(
        "memory = \"256M\", write_iops = 200, read_iops = 100 }\n\n[[tenants]]",
        "memory = \"1M\", write_iops = 200, read_iops = 100 }\n\n[[tenants]]",
    );
    assert_error(&src, "grant = { cpu = 0.5, memory = \"1M\"", "16 MiB");
}

#[test]
fn a_zero_iops_grant() {
    let src = matrix(
        "write_iops = 200, read_iops = 100 }\n\n[[tenants]]",
        "write_iops = 0, read_iops = 100 }\n\n[[tenants]]",
    );
    assert_error(
        &src,
        "grant = { cpu = 0.5, memory = \"256M\", write_iops = 0",
        "leave it out",
    );
}

#[test]
fn a_rate_grant_needs_the_emulated_network() {
    let src = matrix(
        "grant = { cpu = 0.5,",
        "grant = { rate = \"50M\", cpu = 0.5,",
    );
    assert_error(&src, "grant = { rate", "emulated");
}

#[test]
fn grants_are_for_the_local_provider() {
    let src =
        format!("{MATRIX}\n[provider]\nkind = \"static\"\nhosts = \"h\"\ntoken_file = \"t\"\n");
    assert_error(&src, "grant = {", "local provider");
}

#[test]
fn a_disk_matrix_needs_iops_grants() {
    let src = MATRIX.replace(", write_iops = 200, read_iops = 100", "");
    assert_error(&src, "kind = \"isolation-matrix\"", "no IOPS grant");
}

#[test]
fn io_limits_outside_a_disk_matrix_need_an_io_dir() {
    let src = matrix(
        "resource = \"disk\"\nread_fraction = 0.25",
        "resource = \"cpu\"",
    );
    assert_error(&src, "grant = {", "io_dir");
}

#[test]
fn disk_settings_belong_to_a_disk_matrix() {
    let src = matrix("resource = \"disk\"", "resource = \"memory\"");
    assert_error(&src, "read_fraction = 0.25", "resource = \"disk\"");
}

#[test]
fn a_read_fraction_outside_zero_to_one() {
    let src = matrix("read_fraction = 0.25", "read_fraction = 1.5");
    assert_error(&src, "read_fraction = 1.5", "0 to 1");
}
