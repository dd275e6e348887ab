//! Commands in experiment files: a program as a neighbor staircase's test workload
//! and as its busy neighbors' job, checked key by key into the agent's command
//! spec; every mistake is reported at its own line.

use nnb_agent::jobs::{CommandMetric, JobSpec, OutputStream, Preset};
use nnb_experiment::{parse, plan, Busy, Scenario, TestWorkload};

/// A staircase whose test workload and busy neighbors run commands; each test
/// changes one line of it.
const GOOD: &str = r#"name = "cmd"
repetitions = 2
settle = "1s"

[[tenants]]
name = "test"
role = "test"

[[tenants]]
name = "nb"
count = 2
role = "neighbor"

[scenario]
kind = "neighbor-staircase"

[scenario.busy]
command = ["stress-ng", "--cpu", "1", "--cpu-load", "50"]
env = { LC_ALL = "C" }

[scenario.test]
command = ["/usr/bin/sysbench", "cpu", "--time=2", "run"]
cwd = "/tmp"
timeout = "30s"
output_limit = "16K"
metric = { regex = "events per second: +([0-9.]+)", unit = "events/s", higher_is_better = true }
"#;

/// `GOOD`'s metric line.
const METRIC: &str = r#"metric = { regex = "events per second: +([0-9.]+)", unit = "events/s", higher_is_better = true }"#;

/// `GOOD` with `from` replaced by `to` (which must occur).
fn broken(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "fixture lacks {from}");
    GOOD.replacen(from, to, 1)
}

/// Asserts that `src` is refused at the line of `needle` with a message holding
/// `part`.
fn assert_error(src: &str, needle: &str, part: &str) {
    let d = match parse("bad.toml", src, Some(2)) {
        Ok(_) => panic!("accepted an invalid file:\n{src}"),
        Err(e) => e
            .diagnostic()
            .cloned()
            .unwrap_or_else(|| panic!("error without location: {e}")),
    };
    let at = src.find(needle).unwrap_or_else(|| panic!("no {needle}"));
    let line = src[..at].matches('\n').count() + 1;
    assert_eq!(d.line, line, "wrong line for: {d}");
    assert!(d.message.contains(part), "`{}` lacks `{part}`", d.message);
}

fn staircase(src: &str) -> nnb_experiment::Staircase {
    match parse("good.toml", src, Some(2)).map(|e| e.scenario) {
        Ok(Scenario::NeighborStaircase(s)) => s,
        other => panic!("not a staircase: {other:?}"),
    }
}

#[test]
fn a_command_test_workload_and_command_neighbors_expand_into_command_jobs() {
    let exp = parse("good.toml", GOOD, Some(2)).unwrap_or_else(|e| panic!("{e}"));
    assert!(exp.runs_commands());
    let Scenario::NeighborStaircase(s) = &exp.scenario else {
        panic!("not a staircase")
    };
    let TestWorkload::Command(test) = &s.test else {
        panic!("the test workload is not a command: {:?}", s.test)
    };
    assert_eq!(test.argv, ["/usr/bin/sysbench", "cpu", "--time=2", "run"]);
    assert_eq!(test.cwd.as_deref(), Some("/tmp"));
    assert_eq!((test.timeout_ms, test.duration_ms), (Some(30_000), None));
    assert_eq!(test.output_limit, 16 * 1024);
    assert_eq!(
        test.metric,
        CommandMetric::Regex {
            pattern: "events per second: +([0-9.]+)".into(),
            unit: "events/s".into(),
            higher_is_better: true,
            stream: OutputStream::Stdout,
        }
    );
    // Without `kind`, a busy table naming a command is a command neighbor.
    let Busy::Command(busy) = &s.busy else {
        panic!("the neighbors are not commands: {:?}", s.busy)
    };
    assert_eq!(busy.argv[0], "stress-ng");
    assert_eq!(busy.env.get("LC_ALL").map(String::as_str), Some("C"));
    assert_eq!((busy.timeout_ms, busy.duration_ms), (None, None));

    let p = plan::expand(&exp, 2);
    assert_eq!(p.command_tenants(), ["test", "nb-1", "nb-2"]);
    let top = p
        .steps
        .iter()
        .find(|s| s.id == "busy/neighbors=2/rep=1")
        .expect("the top busy level");
    assert!(matches!(&top.measure[0].job, JobSpec::Command(c) if c == test));
    assert_eq!(top.background.len(), 2);
    assert!(top
        .background
        .iter()
        .all(|a| matches!(&a.job, JobSpec::Command(c) if c == busy)));
    // A command that runs until it exits has no estimate, as fixed work.
    assert_eq!(top.estimate, None);
}

#[test]
fn a_preset_builds_its_argv_from_the_tool_and_args() {
    let src = broken(
        r#"command = ["/usr/bin/sysbench", "cpu", "--time=2", "run"]"#,
        "preset = \"sysbench\"\nargs = [\"cpu\", \"run\"]\nduration = \"5s\"",
    );
    let s = staircase(&src);
    let TestWorkload::Command(c) = &s.test else {
        panic!("not a command")
    };
    assert_eq!(c.argv, ["sysbench", "cpu", "run"]);
    assert_eq!(c.preset, Some(Preset::Sysbench));
    assert_eq!(c.duration_ms, Some(5000));
    // A fixed run time is the step's estimate.
    let exp = parse("good.toml", &src, Some(2)).unwrap_or_else(|e| panic!("{e}"));
    let p = plan::expand(&exp, 2);
    assert_eq!(p.steps[0].estimate, Some(std::time::Duration::from_secs(5)));
}

#[test]
fn the_wall_time_is_the_default_metric_and_json_values_name_their_pointer() {
    let metric_line = METRIC;
    let wall = staircase(&broken(metric_line, ""));
    assert!(matches!(&wall.test, TestWorkload::Command(c) if c.metric == CommandMetric::Wall));
    let named = staircase(&broken(metric_line, r#"metric = "wall""#));
    assert!(matches!(&named.test, TestWorkload::Command(c) if c.metric == CommandMetric::Wall));
    let json = staircase(&broken(
        metric_line,
        r#"metric = { json = "/jobs/0/read/iops", unit = "IOPS", higher_is_better = true, stream = "stderr" }"#,
    ));
    let TestWorkload::Command(c) = &json.test else {
        panic!("not a command")
    };
    assert_eq!(
        c.metric,
        CommandMetric::Json {
            pointer: "/jobs/0/read/iops".into(),
            unit: "IOPS".into(),
            higher_is_better: true,
            stream: OutputStream::Stderr,
        }
    );
}

#[test]
fn an_explicit_command_kind_and_a_burner_file_without_commands() {
    let s = staircase(&broken(
        "[scenario.busy]\n",
        "[scenario.busy]\nkind = \"command\"\n",
    ));
    assert!(matches!(s.busy, Busy::Command(_)));
    // The shared fixture runs nnb's burner and no command.
    let plain = nnb_testkit::Staircase::default().toml();
    let exp = parse("plain.toml", &plain, Some(2)).unwrap_or_else(|e| panic!("{e}"));
    assert!(!exp.runs_commands());
    assert!(plan::expand(&exp, 2).command_tenants().is_empty());
}

#[test]
fn an_unknown_preset_is_refused_with_the_known_ones() {
    let src = broken(
        r#"command = ["/usr/bin/sysbench", "cpu", "--time=2", "run"]"#,
        r#"preset = "geekbench""#,
    );
    assert_error(
        &src,
        "preset",
        "unknown preset `geekbench`: expected one of stress-ng",
    );
}

#[test]
fn an_empty_argv_is_refused() {
    let src = broken(
        r#"command = ["stress-ng", "--cpu", "1", "--cpu-load", "50"]"#,
        "command = []",
    );
    assert_error(&src, "command = []", "the command is empty");
    let src = broken(
        r#"command = ["/usr/bin/sysbench", "cpu", "--time=2", "run"]"#,
        r#"command = ["", "x"]"#,
    );
    assert_error(&src, r#"command = ["", "x"]"#, "program is empty");
}

#[test]
fn a_printed_metric_needs_its_unit_and_direction() {
    let metric_line = METRIC;
    for (to, part) in [
        (
            r#"metric = { json = "/ops", higher_is_better = true }"#,
            "a json metric needs its `unit`",
        ),
        (
            r#"metric = { regex = "x: ([0-9]+)", unit = "ops" }"#,
            "a regex metric needs its direction",
        ),
        (
            r#"metric = { regex = "x: ([0-9]+)", unit = " ", higher_is_better = true }"#,
            "needs its `unit`",
        ),
        (
            r#"metric = { json = "/a", regex = "b", unit = "u", higher_is_better = true }"#,
            "either `json` or `regex`",
        ),
        (
            r#"metric = { unit = "u", higher_is_better = true }"#,
            "needs `json`",
        ),
        (r#"metric = "ops""#, r#"metric = "ops": "wall""#),
        (
            r#"metric = { regex = "x: ([0-9]+)", unit = "u", higher_is_better = true, stream = "stdin" }"#,
            "\"stdout\" or \"stderr\"",
        ),
        (
            r#"metric = { regexp = "x", unit = "u", higher_is_better = true }"#,
            "metric is \"wall\", or a table",
        ),
    ] {
        assert_error(&broken(metric_line, to), "metric", part);
    }
}

#[test]
fn a_bad_regex_or_json_pointer_is_refused_at_the_metric() {
    let metric_line = METRIC;
    let d = |to: &str| {
        let src = broken(metric_line, to);
        match parse("bad.toml", &src, Some(2)) {
            Ok(_) => panic!("accepted {to}"),
            Err(e) => e.diagnostic().cloned().expect("a located error"),
        }
    };
    let metric_at = GOOD[..GOOD.find(metric_line).unwrap()]
        .matches('\n')
        .count()
        + 1;
    for bad in [
        // An unclosed group.
        r#"metric = { regex = "rate: ([0-9.]+", unit = "u", higher_is_better = true }"#,
        // No capture group to read the number from.
        r#"metric = { regex = "rate: [0-9.]+", unit = "u", higher_is_better = true }"#,
        // A JSON pointer starts with `/`.
        r#"metric = { json = "jobs.0.iops", unit = "u", higher_is_better = true }"#,
    ] {
        let diag = d(bad);
        assert_eq!(diag.line, metric_at, "{bad}: {diag}");
    }
}

#[test]
fn durations_need_their_unit() {
    assert_error(
        &broken(r#"timeout = "30s""#, r#"timeout = "30""#),
        "timeout",
        "`30s` or `30ms`",
    );
    assert_error(
        &broken(r#"timeout = "30s""#, "timeout = \"30s\"\nduration = \"2\""),
        "duration",
        "`2s` or `2ms`",
    );
    assert_error(
        &broken(r#"timeout = "30s""#, r#"timeout = "0s""#),
        "timeout",
        "at least 1ms",
    );
}

#[test]
fn keys_of_the_other_workload_are_refused_at_their_line() {
    // A command and the burner's keys.
    assert_error(
        &broken(r#"cwd = "/tmp""#, "cwd = \"/tmp\"\nops = 1000"),
        "ops",
        "are the burner's",
    );
    // Both a command and a preset; `args` beside `command`.
    assert_error(
        &broken(r#"cwd = "/tmp""#, "cwd = \"/tmp\"\npreset = \"fio\""),
        "preset",
        "either `command`",
    );
    assert_error(
        &broken(r#"cwd = "/tmp""#, "cwd = \"/tmp\"\nargs = [\"x\"]"),
        "args",
        "`args` are a preset's arguments",
    );
    // A burner test workload with a command's key.
    let burner = nnb_testkit::Staircase::default()
        .toml()
        .replace("ops = 1000", "ops = 1000\nmetric = \"wall\"");
    assert_error(&burner, "metric", "apply to a neighbor staircase's command");
    // A command neighbor with a load's key, a burner neighbor with a command.
    assert_error(
        &broken(
            "env = { LC_ALL = \"C\" }",
            "env = { LC_ALL = \"C\" }\nrate = \"1M\"",
        ),
        "rate",
        "this key is a burner's or a load's",
    );
    assert_error(
        &broken("[scenario.busy]\n", "[scenario.busy]\nkind = \"burner\"\n"),
        "command = [\"stress-ng\"",
        "apply to kind = \"command\"",
    );
    assert_error(
        &broken(
            r#"command = ["stress-ng", "--cpu", "1", "--cpu-load", "50"]"#,
            "kind = \"command\"",
        ),
        "kind = \"command\"",
        "a command neighbor needs `command`",
    );
    // A background command runs until stopped: no timeout, no metric.
    assert_error(
        &broken(
            "env = { LC_ALL = \"C\" }",
            "env = { LC_ALL = \"C\" }\ntimeout = \"1s\"",
        ),
        "timeout = \"1s\"",
        "unknown field `timeout`",
    );
}

#[test]
fn a_thread_sweep_measures_the_burner_only() {
    let src = r#"name = "sweep"
[[tenants]]
role = "test"
vcpus = 2
[scenario]
kind = "thread-sweep"
threads = [1, 2]
[scenario.test]
command = ["./loop"]
"#;
    assert_error(src, "command", "apply to a neighbor staircase's command");
}

#[test]
fn the_agents_rules_are_reported_at_their_key() {
    // The agent runs a command in an absolute working directory only.
    let d = match parse(
        "bad.toml",
        &broken(r#"cwd = "/tmp""#, r#"cwd = "tmp""#),
        Some(2),
    ) {
        Ok(_) => panic!("a relative cwd was accepted"),
        Err(e) => e.diagnostic().cloned().expect("a located error"),
    };
    let line = GOOD[..GOOD.find("cwd = ").unwrap()].matches('\n').count() + 1;
    assert_eq!(d.line, line, "{d}");
    // An output bound beyond the agent's limit.
    let d = match parse(
        "bad.toml",
        &broken(r#"output_limit = "16K""#, r#"output_limit = "64G""#),
        Some(2),
    ) {
        Ok(_) => panic!("a 64 GB output bound was accepted"),
        Err(e) => e.diagnostic().cloned().expect("a located error"),
    };
    let line = GOOD[..GOOD.find("output_limit").unwrap()]
        .matches('\n')
        .count()
        + 1;
    assert_eq!(d.line, line, "{d}");
}

/// The README's "your command as the test workload" example: sysbench by its
/// preset, its printed rate by a regex, beside stress-ng neighbors.
#[test]
fn the_your_command_example_expands() {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments/local-your-command.toml");
    let exp = nnb_experiment::load(&file, Some(2)).unwrap_or_else(|e| panic!("{e}"));
    // Levels 0, 1, 2, each 1 warm-up and 3 repetitions.
    assert_eq!(plan::expand(&exp, 2).steps.len(), 3 * (1 + 3));
    let Scenario::NeighborStaircase(s) = &exp.scenario else {
        panic!("not a staircase")
    };
    assert!(
        matches!(&s.test, TestWorkload::Command(c) if c.preset == Some(Preset::Sysbench)
            && matches!(c.metric, CommandMetric::Regex { higher_is_better: true, .. }))
    );
    assert!(matches!(&s.busy, Busy::Command(c) if c.preset == Some(Preset::StressNg)));
}
