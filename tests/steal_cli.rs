//! End-to-end tests of `nnb steal`: a real pinned gap scan on this machine, and bad
//! input exiting with code 2.

use serde_json::Value;

use crate::support::cli::nnb;

/// A 300 ms scan of CPU 0: the thread ran for at least the duration, some share of it
/// was run (not all lost), the loop iterated, and /proc/stat steal is reported beside.
#[test]
fn scans_cpu0_and_reports_gaps_and_steal() {
    let out = nnb(&["steal", "--cpus", "0", "--duration", "300ms", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &v["steal"];
    assert_eq!(s["threshold_ns"], 5000);
    assert_eq!(s["duration_ns"], 300_000_000);
    let cpus = s["cpus"].as_array().unwrap();
    assert_eq!(cpus.len(), 1);
    let c = &cpus[0];
    assert_eq!(c["cpu"], 0);
    let span = c["span_ns"].as_f64().unwrap();
    assert!(span >= 300e6, "a 300 ms scan spanned {span} ns");
    let ran = c["ran_share"].as_f64().unwrap();
    assert!(ran > 0.0 && ran <= 1.0, "{ran}");
    assert!(c["iterations"].as_u64().unwrap() > 1000);
    let gaps = c["gaps"].as_u64().unwrap();
    assert_eq!(c["percentiles"].as_array().unwrap().is_empty(), gaps == 0);
    assert!(c["proc_steal_ticks"].is_u64());
    assert!(s["proc_steal_ticks_all"].is_u64());
    assert!(v["environment"]["kernel"].is_string());
}

#[test]
fn bad_input_exits_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["steal", "--cpus", "9999"], "CPU 9999 does not exist"),
        (&["steal", "--duration", "0s"], "--duration"),
        (
            &["steal", "--duration", "100ms", "--threshold", "1s"],
            "shorter than --duration",
        ),
        (&["steal", "--cpus", "0,0"], "twice"),
    ];
    for (args, needle) in cases {
        let out = nnb(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
    }
}
