//! Command jobs with real processes: wall time, printed values, failures, bounded
//! output, the stop of a whole tree, presets, and the agent's opt-in over HTTP.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::prepare;
use crate::job_table::JobShared;
use crate::jobs::{limits, CommandMetric, CommandSpec, OutputStream, Preset};

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// `sh -c SCRIPT` as a command.
fn sh(script: &str) -> CommandSpec {
    CommandSpec::new(argv(&["/bin/sh", "-c", script]))
}

/// Runs `spec` to its end on this thread.
fn run(spec: &CommandSpec) -> Result<Value, String> {
    prepare(spec)?.run(&JobShared::default())
}

fn json(pointer: &str, stream: OutputStream) -> CommandMetric {
    CommandMetric::Json {
        pointer: pointer.into(),
        unit: "ops/s".into(),
        higher_is_better: true,
        stream,
    }
}

fn regex(pattern: &str, higher_is_better: bool) -> CommandMetric {
    CommandMetric::Regex {
        pattern: pattern.into(),
        unit: "ms".into(),
        higher_is_better,
        stream: OutputStream::Stdout,
    }
}

/// The wall time of `sleep 0.3` is at least 0.3 s (the monotonic clock from before
/// the spawn to the reaped exit cannot be shorter than the sleep) and, on a busy
/// 2-core machine, well under 0.3 s + 2 s (a fork, an exec and the 20 ms poll are
/// milliseconds; the bound only catches a wrong clock or unit).
#[test]
fn a_commands_wall_time_is_its_sleep() {
    let r = run(&CommandSpec {
        timeout_ms: Some(30_000),
        ..CommandSpec::new(argv(&["sleep", "0.3"]))
    })
    .expect("sleep runs");
    let wall = r["wall_s"].as_f64().expect("wall_s");
    assert!((0.3..2.3).contains(&wall), "{r}");
    assert_eq!(r["value"].as_f64(), Some(wall));
    assert_eq!(
        (r["source"].as_str(), r["unit"].as_str()),
        (Some("wall"), Some("s"))
    );
    assert_eq!(
        (r["exit_code"].as_i64(), r["stopped"].as_bool()),
        (Some(0), Some(false))
    );
    assert_eq!(r["higher_is_better"], false);
    assert!(r["pid"].as_u64().is_some_and(|p| p > 0), "{r}");
}

/// A value the program prints: a JSON pointer into its stdout (or stderr), the first
/// group of a regex, each with the declared unit and direction.
#[test]
fn a_printed_value_is_read_by_json_pointer_and_by_regex() {
    let doc = r#"printf '{"jobs": [{"read": {"iops": 4.5}}], "name": "x", "s": " 7.25 "}'"#;
    let r = run(&CommandSpec {
        metric: json("/jobs/0/read/iops", OutputStream::Stdout),
        ..sh(doc)
    })
    .expect("the JSON reads");
    assert_eq!(
        (r["value"].as_f64(), r["source"].as_str()),
        (Some(4.5), Some("json"))
    );
    assert_eq!(
        (r["unit"].as_str(), r["higher_is_better"].as_bool()),
        (Some("ops/s"), Some(true))
    );
    // A number in a string reads; on stderr too.
    let r = run(&CommandSpec {
        metric: json("/s", OutputStream::Stderr),
        ..sh(&format!("{doc} >&2"))
    })
    .expect("the JSON on stderr reads");
    assert_eq!(r["value"].as_f64(), Some(7.25));

    let r = run(&CommandSpec {
        metric: regex(r"latency: ([0-9.]+) ms", false),
        ..sh("echo warming up; echo 'latency: 12.5 ms'; echo 'latency: 99 ms'")
    })
    .expect("the regex reads");
    assert_eq!(
        (r["value"].as_f64(), r["source"].as_str()),
        (Some(12.5), Some("regex"))
    );
    assert_eq!(r["higher_is_better"], false);
    assert!(
        r["stdout_tail"]
            .as_str()
            .is_some_and(|t| t.contains("latency: 99 ms")),
        "{r}"
    );

    for (spec, why) in [
        (
            CommandSpec {
                metric: json("/missing", OutputStream::Stdout),
                ..sh(doc)
            },
            "nothing at \"/missing\"",
        ),
        (
            CommandSpec {
                metric: json("/name", OutputStream::Stdout),
                ..sh(doc)
            },
            "is not a number",
        ),
        (
            CommandSpec {
                metric: json("/x", OutputStream::Stdout),
                ..sh("echo not json")
            },
            "is not one JSON document",
        ),
        (
            CommandSpec {
                metric: regex(r"rate: (\S+)", true),
                ..sh("echo 'rate: fast'")
            },
            "matched \"fast\" in its stdout: not a number",
        ),
        (
            CommandSpec {
                metric: regex(r"rate: ([0-9]+)", true),
                ..sh("echo 'no rate here'")
            },
            "matched nothing in its stdout",
        ),
        (
            CommandSpec {
                metric: json("/x", OutputStream::Stdout),
                output_limit: 8,
                ..sh(r#"printf '{"x": 123456789}'"#)
            },
            "longer than output_limit (8 bytes)",
        ),
    ] {
        let err = run(&spec).expect_err(why);
        assert!(err.contains(why), "{why}: {err}");
    }
}

/// A non-zero exit (or a death by signal) fails the job with the status and the
/// stderr's tail.
#[test]
fn a_failing_command_fails_with_its_status_and_stderr_tail() {
    let err = run(&sh(
        "echo starting; echo 'disk full: cannot write' >&2; exit 3",
    ))
    .expect_err("exit 3 fails");
    assert!(err.contains("exited with status 3"), "{err}");
    assert!(err.contains("disk full: cannot write"), "{err}");
    let err = run(&sh("kill -9 $$")).expect_err("a killed command fails");
    assert!(err.contains("was ended by signal 9"), "{err}");
    assert!(err.contains("its stderr is empty"), "{err}");
}

/// 50 MB on stdout with a 64 KiB bound: the head (64 KiB) and the tail (4 KiB) are
/// kept, the rest counted and dropped; the capture never holds more.
#[test]
fn output_beyond_the_bound_is_counted_and_dropped() {
    const BYTES: u64 = 50 << 20;
    let r = run(&CommandSpec {
        timeout_ms: Some(60_000),
        output_limit: 64 << 10,
        ..CommandSpec::new(argv(&["head", "-c", &BYTES.to_string(), "/dev/zero"]))
    })
    .expect("head runs");
    assert_eq!(
        r["stdout_bytes"].as_u64(),
        Some(BYTES),
        "{}",
        r["stdout_bytes"]
    );
    let kept = (64 << 10) + limits::COMMAND_TAIL;
    assert_eq!(r["stdout_dropped"].as_u64(), Some(BYTES - kept));
    let tail = r["stdout_tail"].as_str().expect("a tail");
    assert_eq!(tail.len() as u64, limits::COMMAND_TAIL);
    assert!(tail.bytes().all(|b| b == 0));
    assert_eq!(
        (r["stderr_bytes"].as_u64(), r["stderr_dropped"].as_u64()),
        (Some(0), Some(0))
    );
    // A bound below the tail's size bounds the tail too.
    let r = run(&CommandSpec {
        output_limit: 4,
        ..sh("printf 0123456789abcdefghij")
    })
    .expect("printf runs");
    assert_eq!(
        (r["stdout_tail"].as_str(), r["stdout_bytes"].as_u64()),
        (Some("ghij"), Some(20))
    );
    assert_eq!(r["stdout_dropped"], 12);
}

/// Pids written, one a line, to `file`, once it has `n` of them.
fn wait_for_pids(file: &Path, n: usize) -> Vec<u32> {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let pids: Vec<u32> = std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.len() >= n {
            return pids;
        }
        assert!(Instant::now() < end, "only {pids:?} in {}", file.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A neighbor's command whose child forks a grandchild that ignores SIGTERM and
/// leaves the process group with setsid, the child then exiting (the grandchild is
/// orphaned): after the stop, none of the recorded processes exists, not even as a
/// zombie.
#[test]
fn a_stopped_command_leaves_no_process_of_its_tree() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let pids = dir.path().join("pids");
    let script = dir.path().join("tree.sh");
    std::fs::write(
        &script,
        r#"echo $$ >> "$PIDS"
sh -c 'trap "" TERM
setsid sh -c "trap \"\" TERM; echo \$\$ >> \"\$PIDS\"; while :; do sleep 0.05; done" &
echo $$ >> "$PIDS"
sleep 0.3' &
trap "" TERM
while :; do sleep 0.05; done
"#,
    )
    .expect("the script");
    let mut spec = CommandSpec::new(argv(&["/bin/sh", &script.display().to_string()]));
    spec.env = BTreeMap::from([("PIDS".to_string(), pids.display().to_string())]);
    let job = prepare(&spec).expect("the command prepares");
    let shared = Arc::new(JobShared::default());
    let running = Arc::clone(&shared);
    let thread = std::thread::spawn(move || job.run(&running));
    let recorded = wait_for_pids(&pids, 3);
    // Let the child exit, orphaning the grandchild (it sleeps 0.3 s first).
    std::thread::sleep(Duration::from_millis(600));
    let published = shared.interim.lock().expect("interim").clone();
    let leader = published.as_ref().and_then(|p| p["pid"].as_u64());
    assert_eq!(leader, Some(u64::from(recorded[0])), "{published:?}");
    let stopped_at = Instant::now();
    shared.stop.store(true, Ordering::Relaxed);
    let r = thread
        .join()
        .expect("the job's thread")
        .expect("a stopped result");
    // SIGTERM is ignored by all: SIGKILL comes after the grace, not much later.
    let took = stopped_at.elapsed();
    assert!(took >= limits::COMMAND_STOP_GRACE, "{took:?}");
    for pid in &recorded {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} of the tree is left after the stop: {}",
            std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default()
        );
    }
    assert_eq!(
        (r["stopped"].as_bool(), r["exit_code"].as_i64()),
        (Some(true), None),
        "{r}"
    );
    assert_eq!(r["signal"].as_i64(), Some(9), "{r}");
    // The leader and the grandchild at least, and the sleeps they ran.
    assert!(r["killed"].as_u64().is_some_and(|n| n >= 2), "{r}");
    assert!(r["sigkilled"].as_u64().is_some_and(|n| n >= 2), "{r}");
}

/// A measured command still running at its timeout is stopped and fails; a command
/// with a duration is stopped at it and ends normally.
#[test]
fn a_timeout_fails_and_a_duration_ends_normally() {
    let err = run(&CommandSpec {
        timeout_ms: Some(300),
        ..sh("echo about to hang >&2; exec sleep 30")
    })
    .expect_err("a timeout fails");
    assert!(err.contains("timed out after 300 ms"), "{err}");
    assert!(err.contains("about to hang"), "{err}");
    let r = run(&CommandSpec {
        duration_ms: Some(300),
        ..CommandSpec::new(argv(&["sleep", "30"]))
    })
    .expect("a duration ends normally");
    assert_eq!(
        (r["stopped"].as_bool(), r["signal"].as_i64()),
        (Some(true), Some(15)),
        "{r}"
    );
    assert!(
        r["wall_s"]
            .as_f64()
            .is_some_and(|w| (0.3..10.0).contains(&w)),
        "{r}"
    );
}

/// A preset whose tool is not installed is refused before anything runs, naming
/// the tool; an installed one's version is in the result.
#[test]
fn a_presets_tool_is_checked_and_its_version_recorded() {
    let empty = tempfile::tempdir().expect("an empty directory");
    let missing = CommandSpec {
        env: BTreeMap::from([("PATH".to_string(), empty.path().display().to_string())]),
        preset: Some(Preset::Fio),
        ..CommandSpec::new(argv(&["fio", "--name=x"]))
    };
    let err = prepare(&missing).expect_err("no fio on that PATH");
    assert!(
        err.contains("preset \"fio\": fio is not installed"),
        "{err}"
    );
    let err = prepare(&CommandSpec::new(argv(&["no-such-program-nnb"]))).expect_err("missing");
    assert!(
        err.contains("\"no-such-program-nnb\" is not on the PATH"),
        "{err}"
    );
    let wrong = CommandSpec {
        preset: Some(Preset::Sysbench),
        ..CommandSpec::new(argv(&["fio"]))
    };
    assert!(wrong.check().is_err_and(|e| e.contains("runs sysbench")));

    let installed = Path::new("/usr/bin/sysbench").exists();
    if !nnb_testkit::require(installed, "sysbench is not installed") {
        return;
    }
    let r = run(&CommandSpec {
        preset: Some(Preset::Sysbench),
        timeout_ms: Some(60_000),
        metric: regex(r"events per second:\s*([0-9.]+)", true),
        ..CommandSpec::new(argv(&["sysbench", "cpu", "--time=1", "--threads=1", "run"]))
    })
    .expect("sysbench runs");
    let version = r["tool"]["version"].as_str().unwrap_or_default();
    assert!(version.starts_with("sysbench "), "{r}");
    assert_eq!(r["tool"]["preset"], "sysbench");
    assert!(r["value"].as_f64().is_some_and(|v| v > 0.0), "{r}");
}

const TOKEN: &str = "command-test-token-0123";

/// Serves an agent with `config` on a loopback port for the test's runtime.
async fn serve(config: crate::AgentConfig) -> std::net::SocketAddr {
    use std::net::{IpAddr, Ipv4Addr};
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let token = crate::Token::new(TOKEN).expect("token");
    let agent =
        crate::Agent::with_config(token, IpAddr::V4(Ipv4Addr::LOCALHOST), config).expect("agent");
    tokio::spawn(crate::serve(listener, agent, std::future::pending()));
    addr
}

/// One request on its own connection: the answer's status code and JSON body.
async fn request(addr: std::net::SocketAddr, method: &str, path: &str, body: &str) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).await.expect("read");
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status");
    (code, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// An agent started without the opt-in refuses a command job (403, saying why) and
/// its health says `commands: false`; with it, the job starts and health says true.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_agent_that_opted_in_runs_commands() {
    let spec = serde_json::json!({
        "spec": {"kind": "command", "argv": ["sleep", "0.1"], "timeout_ms": 10000},
        "deadline_ms": 30000
    })
    .to_string();
    let without = serve(crate::AgentConfig::default()).await;
    let (code, body) = request(without, "POST", "/jobs", &spec).await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(body["error"], crate::COMMANDS_REFUSED);
    assert!(crate::COMMANDS_REFUSED.contains("--allow-commands"));
    let (code, health) = request(without, "GET", "/health", "").await;
    assert_eq!(
        (code, &health["commands"]),
        (200, &Value::Bool(false)),
        "{health}"
    );

    let with = serve(crate::AgentConfig {
        allow_commands: true,
    })
    .await;
    let (code, health) = request(with, "GET", "/health", "").await;
    assert_eq!(
        (code, &health["commands"]),
        (200, &Value::Bool(true)),
        "{health}"
    );
    let (code, started) = request(with, "POST", "/jobs", &spec).await;
    assert_eq!(code, 201, "{started}");
    // A bad command is a 400 naming what is wrong, before anything runs.
    let bad = spec.replace("\"sleep\"", "\"no-such-program-nnb\"");
    let (code, body) = request(with, "POST", "/jobs", &bad).await;
    assert_eq!(code, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("no-such-program-nnb")),
        "{body}"
    );
}

/// The JSON form of a command job, as the lead documents it: `kind` beside the
/// spec's fields, defaults left out, unknown fields refused.
#[test]
fn a_command_jobs_json_form() {
    let spec = crate::jobs::JobSpec::Command(CommandSpec {
        timeout_ms: Some(60_000),
        metric: regex(r"([0-9.]+) ms", false),
        preset: Some(Preset::Sysbench),
        ..CommandSpec::new(argv(&["sysbench", "cpu", "run"]))
    });
    let wire = serde_json::to_value(&spec).expect("serializes");
    assert_eq!(
        wire,
        serde_json::json!({"kind": "command", "argv": ["sysbench", "cpu", "run"],
            "timeout_ms": 60000, "output_limit": 65536, "preset": "sysbench",
            "metric": {"type": "regex", "pattern": "([0-9.]+) ms", "unit": "ms",
                "higher_is_better": false}})
    );
    let back: crate::jobs::JobSpec = serde_json::from_value(wire).expect("reads back");
    assert_eq!(back, spec);
    let minimal: crate::jobs::JobSpec =
        serde_json::from_value(serde_json::json!({"kind": "command", "argv": ["true"]}))
            .expect("the minimal form");
    assert_eq!(
        minimal,
        crate::jobs::JobSpec::Command(CommandSpec::new(argv(&["true"])))
    );
    for bad in [
        serde_json::json!({"kind": "command", "argv": ["true"], "shell": "rm -rf /"}),
        serde_json::json!({"kind": "command", "argv": ["true"], "metric": {"type": "wall", "x": 1}}),
        serde_json::json!({"kind": "command", "argv": ["true"], "preset": "ab"}),
    ] {
        assert!(
            serde_json::from_value::<crate::jobs::JobSpec>(bad.clone()).is_err(),
            "{bad}"
        );
    }
    for (spec, why) in [
        (CommandSpec::new(vec![]), "needs an `argv`"),
        (CommandSpec::new(argv(&["./run.sh"])), "relative path"),
        (
            CommandSpec {
                output_limit: limits::MAX_COMMAND_OUTPUT + 1,
                ..CommandSpec::new(argv(&["true"]))
            },
            "output_limit",
        ),
        (
            CommandSpec {
                metric: regex("no group", true),
                ..CommandSpec::new(argv(&["true"]))
            },
            "no capture group",
        ),
        (
            CommandSpec {
                metric: json("x", OutputStream::Stdout),
                ..CommandSpec::new(argv(&["true"]))
            },
            "not a JSON pointer",
        ),
        (
            CommandSpec {
                cwd: Some("tmp".into()),
                ..CommandSpec::new(argv(&["true"]))
            },
            "not an absolute path",
        ),
        (
            CommandSpec {
                timeout_ms: Some(0),
                ..CommandSpec::new(argv(&["true"]))
            },
            "timeout_ms must be above zero",
        ),
    ] {
        let err = spec.check().expect_err(why);
        assert!(err.contains(why), "{why}: {err}");
    }
}
