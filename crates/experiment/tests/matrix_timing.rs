//! The isolation matrix's timing keys (issue 28, seeds-coverage N13, N14):
//! `start_order` and `stagger` become each pair step's `start`, `usage_interval`
//! the host-side sampling interval; each bad value is an error at its line.

use std::time::Duration;

use nnb_experiment::plan::expand;
use nnb_experiment::{parse, Scenario};
use nnb_format::{StartOrder, StepGroup, StepStart};

/// A CPU matrix of `duration` with `keys` added to its `[scenario]`.
fn matrix(keys: &str) -> String {
    format!(
        "name = \"m\"\nrepetitions = 1\n[[tenants]]\nname = \"a\"\nrole = \"test\"\nvcpus = 2\n\
         [[tenants]]\nname = \"b\"\nrole = \"neighbor\"\nvcpus = 2\n[scenario]\n\
         kind = \"isolation-matrix\"\nresource = \"cpu\"\nduration = \"2s\"\n{keys}"
    )
}

/// The error of `src`: its 1-based line and message.
fn error(src: &str) -> (usize, String) {
    match parse("m.toml", src, Some(4)) {
        Ok(_) => panic!("accepted:\n{src}"),
        Err(e) => {
            let d = e.diagnostic().unwrap_or_else(|| panic!("no line: {e}"));
            (d.line, d.message.clone())
        }
    }
}

/// The 1-based line of `needle` in `src`.
fn line_of(src: &str, needle: &str) -> usize {
    let at = src.find(needle).unwrap_or_else(|| panic!("no {needle}"));
    src[..at].matches('\n').count() + 1
}

/// N14: b first, 500 ms before a: every pair step (and only pair steps: one job
/// elsewhere) records it; together (the default) records nothing.
#[test]
fn a_start_order_with_a_stagger_is_each_pair_steps_start() {
    let exp = parse(
        "m.toml",
        &matrix("start_order = \"b-first\"\nstagger = \"500ms\"\n"),
        Some(4),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let Scenario::IsolationMatrix(m) = &exp.scenario else {
        panic!("not a matrix");
    };
    let want = StepStart {
        order: StartOrder::BFirst,
        stagger_ms: 500,
    };
    assert_eq!(m.start, want);
    let plan = expand(&exp, 4);
    let pairs: Vec<_> = plan
        .steps
        .iter()
        .filter(|s| s.group == StepGroup::Pair)
        .collect();
    assert_eq!(pairs.len(), 12);
    assert!(pairs.iter().all(|s| s.start == Some(want)));
    // A pair's estimate is its 2 s and the 500 ms stagger.
    assert!(pairs
        .iter()
        .all(|s| s.estimate == Some(Duration::from_millis(2500))));
    assert!(plan
        .steps
        .iter()
        .filter(|s| s.group != StepGroup::Pair)
        .all(|s| s.start.is_none()));
    // The default, and together written out, start both at once: no start.
    for keys in ["", "start_order = \"together\"\n"] {
        let exp = parse("m.toml", &matrix(keys), Some(4)).unwrap_or_else(|e| panic!("{e}"));
        assert!(expand(&exp, 4).steps.iter().all(|s| s.start.is_none()));
    }
}

#[test]
fn a_bad_start_is_an_error_at_its_line() {
    for (keys, at, says) in [
        (
            "start_order = \"a-last\"\n",
            "start_order",
            "unknown start_order `a-last`: expected one of \"together\", \"a-first\", \"b-first\"",
        ),
        (
            "stagger = \"500ms\"\n",
            "stagger",
            "a stagger needs start_order = \"a-first\" or \"b-first\"",
        ),
        (
            "start_order = \"together\"\nstagger = \"500ms\"\n",
            "stagger",
            "a stagger needs start_order",
        ),
        (
            "start_order = \"a-first\"\n",
            "start_order",
            "start_order = \"a-first\" needs a stagger",
        ),
        (
            "start_order = \"a-first\"\nstagger = \"0ms\"\n",
            "stagger",
            "a stagger is at least 1ms",
        ),
        (
            "start_order = \"b-first\"\nstagger = \"2s\"\n",
            "stagger",
            "the stagger (2.0 s) must be below the matrix's duration (2.0 s)",
        ),
        (
            "start_order = \"a-first\"\nstagger = \"500\"\n",
            "stagger",
            "duration",
        ),
    ] {
        let src = matrix(keys);
        let (line, message) = error(&src);
        assert_eq!(line, line_of(&src, at), "{keys}: {message}");
        assert!(message.contains(says), "{keys}: `{message}` lacks `{says}`");
    }
}

/// N13: the sampling interval is a setting, 20 ms by default.
#[test]
fn the_usage_interval_is_a_bounded_setting() {
    let interval = |keys: &str| match parse("m.toml", &matrix(keys), Some(4)) {
        Ok(exp) => match exp.scenario {
            Scenario::IsolationMatrix(m) => m.usage_interval,
            other => panic!("not a matrix: {other:?}"),
        },
        Err(e) => panic!("{e}"),
    };
    assert_eq!(interval(""), Duration::from_millis(20));
    assert_eq!(
        interval("usage_interval = \"100ms\"\n"),
        Duration::from_millis(100)
    );
    // 2 s / 10 readings: 200 ms is the longest.
    assert_eq!(
        interval("usage_interval = \"200ms\"\n"),
        Duration::from_millis(200)
    );
    for (value, says) in [
        ("1ms", "usage_interval is 5 ms to 1.0 s, got 1 ms"),
        ("2s", "usage_interval is 5 ms to 1.0 s, got 2.0 s"),
        (
            "250ms",
            "usage_interval 250 ms leaves fewer than 10 readings in the matrix's duration \
             (2.0 s): at most 200 ms",
        ),
        ("fast", "duration"),
    ] {
        let src = matrix(&format!("usage_interval = \"{value}\"\n"));
        let (line, message) = error(&src);
        assert_eq!(line, line_of(&src, "usage_interval"), "{value}: {message}");
        assert!(
            message.contains(says),
            "{value}: `{message}` lacks `{says}`"
        );
    }
}
