//! The agent's HTTP API, served in-process on a real loopback socket: token checks,
//! bad requests, jobs with results, deadlines and stops.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use nnb_agent::jobs::{BurnScope, JobRequest, JobSpec, JobState};
use nnb_agent::{Agent, Token};
use nnb_controller::client::{AgentClient, AgentError};
use serde_json::Value;

const TOKEN: &str = "s3cret-token-for-tests";

/// Starts an agent on an ephemeral loopback port and returns its address; the
/// server runs until the test's runtime ends.
async fn start_agent() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let token = Token::new(TOKEN).unwrap();
    let agent: Arc<Agent> = Agent::new(token, IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
    tokio::spawn(nnb_agent::serve(listener, agent, std::future::pending()));
    addr
}

fn client(addr: SocketAddr) -> AgentClient {
    AgentClient::new(addr, TOKEN.to_string())
}

async fn post_raw(addr: SocketAddr, auth: Option<&str>, body: &str) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .post(format!("http://{addr}/jobs"))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.json::<Value>().await.unwrap_or(Value::Null);
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_or_wrong_token_is_401_and_the_agent_keeps_serving() {
    let addr = start_agent().await;
    let http = reqwest::Client::new();
    let none = http
        .get(format!("http://{addr}/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(none.status().as_u16(), 401);
    let wrong = http
        .get(format!("http://{addr}/health"))
        .bearer_auth("s3cret-token-for-tesTS")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
    let (status, _) = post_raw(
        addr,
        Some("Bearer nope"),
        r#"{"spec":{"kind":"idle"},"deadline_ms":10}"#,
    )
    .await;
    assert_eq!(
        status, 401,
        "a job start with a wrong token must be refused"
    );
    assert!(
        client(addr).list().await.unwrap().is_empty(),
        "no job may have started"
    );

    let wrong_client = AgentClient::new(addr, "other".into());
    match wrong_client.health().await {
        Err(AgentError::Unauthorized { addr: a }) => assert_eq!(a, addr),
        other => panic!("expected Unauthorized, got {other:?}"),
    }
    let health = client(addr).health().await.unwrap();
    assert!(!health.cpus.is_empty());
    assert!(health.topology.online >= health.cpus.len());
}

/// The agent reports the machine it runs on, captured when it started, for the
/// controller to record with the tenant (M7).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_carries_the_agents_environment() {
    let addr = start_agent().await;
    let health = client(addr).health().await.unwrap();
    let env = health
        .environment
        .expect("the agent reports its environment");
    assert!(!env.kernel.trim().is_empty(), "{env:?}");
    assert!(!env.clocksource.trim().is_empty(), "{env:?}");
    assert!(!env.cpu_model.trim().is_empty(), "{env:?}");
    assert_eq!(env.topology, health.topology);
    assert_eq!(env.nnb_version, health.version);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_400_with_a_reason_and_the_agent_keeps_serving() {
    let addr = start_agent().await;
    let auth = format!("Bearer {TOKEN}");
    let cases = [
        (
            r#"{"spec":{"kind":"shell","cmd":"rm -rf /"},"deadline_ms":1000}"#,
            "unknown variant",
        ),
        (
            r#"{"spec":{"kind":"idle"},"deadline_ms":"#,
            "invalid job request",
        ),
        ("not json at all", "invalid job request"),
        (
            r#"{"spec":{"kind":"burn","workload":"int"},"deadline_ms":1000}"#,
            "missing field",
        ),
        (r#"{"spec":{"kind":"idle"},"deadline_ms":0}"#, "above zero"),
        (
            r#"{"spec":{"kind":"idle"},"deadline_ms":10,"extra":1}"#,
            "unknown field",
        ),
        (
            r#"{"spec":{"kind":"burn","workload":"nope","threads":1,"ops":10,"duration_ms":null,"pin":"cores","cpus":null},"deadline_ms":1000}"#,
            "unknown workload",
        ),
        (
            r#"{"spec":{"kind":"burn","workload":"int","threads":1,"ops":10,"duration_ms":5,"pin":"cores","cpus":null},"deadline_ms":1000}"#,
            "exactly one of",
        ),
        (
            r#"{"spec":{"kind":"burn","workload":"int","threads":1,"ops":10,"duration_ms":null,"pin":"cores","cpus":null,"scope":"galaxy"},"deadline_ms":1000}"#,
            "unknown variant",
        ),
        (
            r#"{"spec":{"kind":"burn","workload":"int","threads":1,"ops":10,"duration_ms":null,"pin":"cores","cpus":null,"scope":"host","cores":2},"deadline_ms":1000}"#,
            "unknown field",
        ),
        // L1: the unit variant and the array forms take no extras either.
        (
            r#"{"spec":{"kind":"idle","cmd":"rm -rf /"},"deadline_ms":1000}"#,
            "unknown field `cmd`",
        ),
        (r#"[{"kind":"idle"},1000]"#, "must be a JSON object"),
        (
            r#"{"spec":["idle"],"deadline_ms":1000}"#,
            "must be a JSON object",
        ),
        // M2, M10, L5, L16: every number is bounded, and the message names the limit.
        (
            r#"{"spec":{"kind":"busy","workload":"int","threads":1000000000000},"deadline_ms":1000}"#,
            "limit of 1024 threads",
        ),
        (
            r#"{"spec":{"kind":"burn","workload":"int","threads":5000,"ops":null,"duration_ms":100,"pin":"none","cpus":null},"deadline_ms":1000}"#,
            "limit of 1024 threads",
        ),
        (
            r#"{"spec":{"kind":"burn","workload":"int","threads":1,"ops":null,"duration_ms":18446744073709551615,"pin":"none","cpus":null},"deadline_ms":1000}"#,
            "limit of 604800000 ms",
        ),
        (
            r#"{"spec":{"kind":"load","target":"127.0.0.1:9","rate_bps":1e6,"streams":1000000000000,"msg_size":100,"duration_ms":100},"deadline_ms":1000}"#,
            "limit of 256 streams",
        ),
        (
            r#"{"spec":{"kind":"load","target":"127.0.0.1:9","rate_bps":1e6,"streams":100000,"msg_size":100,"duration_ms":100},"deadline_ms":1000}"#,
            "limit of 256 streams",
        ),
        (
            r#"{"spec":{"kind":"load","target":"127.0.0.1:9","rate_bps":1e6,"streams":1,"msg_size":100,"duration_ms":18446744073709551615},"deadline_ms":1000}"#,
            "limit of 604800000 ms",
        ),
        (
            r#"{"spec":{"kind":"load","target":"127.0.0.1:9","rate_bps":1e30,"streams":1,"msg_size":100,"duration_ms":100},"deadline_ms":1000}"#,
            "limit of 1000000000000 bit/s",
        ),
        (
            r#"{"spec":{"kind":"load","target":"127.0.0.1:9","rate_bps":1e-30,"streams":1,"msg_size":100,"duration_ms":100},"deadline_ms":1000}"#,
            "outside the agent's limits",
        ),
        (
            r#"{"spec":{"kind":"latency","target":"127.0.0.1:9","duration_ms":0,"msg_size":64,"warmup_ms":0,"busy_poll":false},"deadline_ms":1000}"#,
            "duration_ms must be above zero",
        ),
        (
            r#"{"spec":{"kind":"steal","cpus":null,"duration_ms":18446744073709551615,"threshold_ns":1000},"deadline_ms":1000}"#,
            "limit of 604800000 ms",
        ),
    ];
    for (body, why) in cases {
        let (status, err) = post_raw(addr, Some(&auth), body).await;
        assert_eq!(status, 400, "{body} must be a 400, got {status} {err}");
        let msg = err["error"].as_str().unwrap_or_default();
        assert!(
            msg.contains(why),
            "error for {body} should mention {why:?}: {msg}"
        );
    }
    let c = client(addr);
    match c.status("12345").await {
        Err(AgentError::Rejected { status: 404, .. }) => {}
        other => panic!("expected a 404 for an unknown job, got {other:?}"),
    }
    assert!(
        c.list().await.unwrap().is_empty(),
        "no bad request may start a job"
    );
    assert_eq!(c.health().await.unwrap().running_jobs, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burn_job_returns_its_result_with_placement() {
    let addr = start_agent().await;
    let c = client(addr);
    let cpus = c.health().await.unwrap().cpus;
    let spec = JobSpec::Burn {
        workload: "int".into(),
        threads: 1,
        ops: Some(100_000),
        duration_ms: None,
        pin: "cores".into(),
        cpus: None,
        scope: BurnScope::Tenant,
        duty: None,
        pool: nnb_format::EventPool::PerThread,
    };
    let id = start_job(&c, spec, 60_000).await;
    let st = c.wait(&id, Duration::from_secs(60)).await.unwrap();
    assert_eq!(st.state, JobState::Done, "{st:?}");
    assert_eq!(st.kind, nnb_format::AgentJob::Burn);
    let result = st.result.unwrap();
    let slot_cpu = result["placement"]["slots"][0]["cpu"].as_u64().unwrap() as usize;
    assert!(
        cpus.contains(&slot_cpu),
        "placed on {slot_cpu}, allowed {cpus:?}"
    );
    assert_eq!(result["burn"]["total_ops"].as_u64(), Some(100_000));
    assert_eq!(
        result["burn"]["threads"][0]["cpu_start"].as_u64(),
        Some(slot_cpu as u64)
    );
    // Tenant scope (the default): the one pinned thread was allowed on its CPU only.
    assert_eq!(result["scope"], "tenant");
    assert_eq!(result["cpus"], serde_json::json!([slot_cpu]));
    // The steal on the burn's CPU while it ran (this kernel has the steal column).
    assert_eq!(result["steal"]["cpus"], serde_json::json!([slot_cpu]));
    assert!(result["steal"]["ticks"].is_u64(), "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_past_its_deadline_is_timed_out_and_a_stopped_job_reports() {
    let addr = start_agent().await;
    let c = client(addr);
    let idle = start_job(&c, JobSpec::Idle, 200).await;
    let busy = start_job(
        &c,
        JobSpec::Busy {
            workload: "fpadd".into(),
            threads: 1,
        },
        60_000,
    )
    .await;
    let st = c.wait(&idle, Duration::from_secs(10)).await.unwrap();
    assert_eq!(st.state, JobState::TimedOut, "{st:?}");
    assert!(st.error.unwrap().contains("deadline"));
    assert_eq!(
        c.status(&busy).await.unwrap().state,
        JobState::Running,
        "jobs run side by side"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let st = c.stop(&busy).await.unwrap();
    assert_eq!(st.state, JobState::Stopped, "{st:?}");
    let result = st.result.unwrap();
    assert!(result["slices"].as_u64().unwrap() >= 1, "{result}");
    assert!(result["total_ops"].as_u64().unwrap() > 0);
    assert_eq!(c.health().await.unwrap().running_jobs, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serve_job_publishes_its_addresses_and_stops_with_a_snapshot() {
    let addr = start_agent().await;
    let c = client(addr);
    let (id, reflector, _) = serve(&c).await;
    assert_eq!(c.status(&id).await.unwrap().state, JobState::Running);
    let reflector: SocketAddr = reflector.parse().unwrap();
    assert_eq!(reflector.ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    assert_ne!(reflector.port(), 0);
    let st = c.stop(&id).await.unwrap();
    assert_eq!(st.state, JobState::Stopped);
    assert!(
        st.result.unwrap().get("reflector").is_some(),
        "the final snapshot has the reflector counters"
    );
}

/// Starts `spec` on `c` with a deadline of `deadline_ms`; returns the job's id.
async fn start_job(c: &AgentClient, spec: JobSpec, deadline_ms: u64) -> String {
    c.start(&JobRequest { spec, deadline_ms }).await.unwrap()
}

/// Starts a serve job and returns its id with the reflector and sink addresses.
async fn serve(c: &AgentClient) -> (String, String, String) {
    let id = start_job(
        c,
        JobSpec::Serve {
            reflector_port: 0,
            sink_port: 0,
            tcp_port: None,
            sink_threads: None,
        },
        60_000,
    )
    .await;
    for _ in 0..100 {
        if let Some(r) = c.status(&id).await.unwrap().result {
            let get = |k: &str| r[k].as_str().unwrap().to_string();
            return (id, get("reflector"), get("sink"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("serve job published no address");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_load_and_steal_jobs_return_library_reports() {
    let addr = start_agent().await;
    let c = client(addr);
    let (serve_id, reflector, sink) = serve(&c).await;
    let latency = start_job(
        &c,
        JobSpec::Latency {
            target: reflector.clone(),
            duration_ms: 300,
            msg_size: 64,
            warmup_ms: 50,
            busy_poll: false,
        },
        30_000,
    )
    .await;
    let load = start_job(
        &c,
        JobSpec::Load {
            target: sink,
            rate_bps: 10e6,
            streams: 1,
            msg_size: 1000,
            duration_ms: None,
            sampling: None,
            options: Default::default(),
        },
        30_000,
    )
    .await;
    let st = c.wait(&latency, Duration::from_secs(30)).await.unwrap();
    assert_eq!(st.state, JobState::Done, "{st:?}");
    let r = st.result.unwrap();
    assert_eq!(r["target"].as_str(), Some(reflector.as_str()));
    let answered = r["counts"]["answered"].as_u64().unwrap();
    assert!(answered > 0, "the reflector answered no ping: {r}");
    assert_eq!(r["rtt"]["count"].as_u64(), Some(answered));
    // The raw RTTs come back as a standard HdrHistogram interval log: one tagged
    // histogram per interval of the 300 ms run.
    let log = r["hdr_log"]
        .as_str()
        .expect("a latency result carries hdr_log");
    let tags: Vec<String> = IntervalLogIterator::new(log.as_bytes())
        .filter_map(|entry| match entry {
            Ok(LogEntry::Interval(iv)) => Some(iv.tag().map(|t| t.as_str().to_owned())),
            _ => None,
        })
        .map(|tag| tag.unwrap_or_default())
        .collect();
    assert_eq!(tags, ["rtt"], "one interval of RTTs in the log:\n{log}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let st = c.stop(&load).await.unwrap();
    assert_eq!(
        st.state,
        JobState::Stopped,
        "a load without duration runs until stopped: {st:?}"
    );
    let sent = st.result.unwrap()["sent"]["datagrams"].as_u64().unwrap();
    assert!(sent > 0, "the load sent nothing");
    c.stop(&serve_id).await.unwrap();

    let steal = start_job(
        &c,
        JobSpec::Steal {
            cpus: None,
            duration_ms: 100,
            threshold_ns: 5_000,
            options: Default::default(),
        },
        30_000,
    )
    .await;
    let st = c.wait(&steal, Duration::from_secs(30)).await.unwrap();
    assert_eq!(st.state, JobState::Done, "{st:?}");
    let health = c.health().await.unwrap();
    assert_eq!(
        st.result.unwrap()["cpus"].as_array().unwrap().len(),
        health.cpus.len(),
        "a steal job without CPUs scans all of the agent's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_targets_and_foreign_cpus_are_400() {
    let addr = start_agent().await;
    let c = client(addr);
    let bad_target = JobSpec::Latency {
        target: "not-an-address".into(),
        duration_ms: 100,
        msg_size: 64,
        warmup_ms: 0,
        busy_poll: false,
    };
    let foreign = JobSpec::Steal {
        cpus: Some(vec![100_000]),
        duration_ms: 100,
        threshold_ns: 5_000,
        options: Default::default(),
    };
    for spec in [bad_target, foreign] {
        match c
            .start(&JobRequest {
                spec,
                deadline_ms: 1000,
            })
            .await
        {
            Err(AgentError::Rejected { status: 400, .. }) => {}
            other => panic!("expected a 400, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_dead_agent_is_reported_as_unreachable_with_its_address() {
    // Bind then drop a listener: nothing listens on that port any more.
    let port = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap();
    let err = AgentClient::new(port, TOKEN.into())
        .health()
        .await
        .unwrap_err();
    assert!(err.agent_is_down(), "{err:?}");
    assert!(err.to_string().contains(&port.to_string()), "{err}");
}

/// A burn past its deadline stays `timed-out` and keeps the result of the work it
/// did: it stopped at its deadline (a 100 ms deadline on a 1 s burn), not at its
/// end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burn_past_its_deadline_is_timed_out_and_keeps_what_it_did() {
    let addr = start_agent().await;
    let c = client(addr);
    let spec = JobSpec::Burn {
        workload: "fpadd".into(),
        threads: 1,
        ops: None,
        duration_ms: Some(1000),
        pin: "cores".into(),
        cpus: None,
        scope: BurnScope::Tenant,
        duty: None,
        pool: nnb_format::EventPool::PerThread,
    };
    let id = start_job(&c, spec, 100).await;
    let st = c.wait(&id, Duration::from_secs(10)).await.unwrap();
    assert_eq!(st.state, JobState::TimedOut, "{st:?}");
    let mut late = None;
    for _ in 0..100 {
        let st = c.status(&id).await.unwrap();
        assert_eq!(st.state, JobState::TimedOut, "the state stays timed out");
        if st.result.is_some() {
            late = st.result;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let late = late.expect("the burn's thread delivered no result");
    assert!(late["burn"]["total_ops"].as_u64().unwrap() > 0);
    let wall = late["burn"]["wall_ns"].as_f64().unwrap();
    assert!(wall < 900e6, "the burn ran to its end: {wall} ns");
}

/// Thread ids of this process's threads whose name starts with `prefix`.
fn threads_named(prefix: &str) -> std::collections::BTreeSet<u64> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Default::default();
    };
    dir.filter_map(|e| {
        let path = e.ok()?.path();
        let comm = std::fs::read_to_string(path.join("comm")).ok()?;
        comm.starts_with(prefix)
            .then(|| path.file_name()?.to_str()?.parse().ok())?
    })
    .collect()
}

/// M1: a burn that outlives its deadline, and one that is stopped, end their
/// threads: each minute-long burn's burner thread is gone within seconds (before,
/// a timed-out burn kept spinning to its end and slowed the next one on its CPU),
/// the stopped one is `stopped` without being abandoned, and health counts no job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_or_stopped_burn_leaves_no_thread_spinning() {
    let addr = start_agent().await;
    let c = client(addr);
    let burn = |threads| JobSpec::Burn {
        workload: "int".into(),
        threads,
        ops: None,
        duration_ms: Some(60_000),
        pin: "none".into(),
        cpus: None,
        scope: BurnScope::Tenant,
        duty: None,
        pool: nnb_format::EventPool::PerThread,
    };
    let timed = start_job(&c, burn(1), 300).await;
    let stopped = start_job(&c, burn(1), 120_000).await;
    // The burner threads as they run (other tests' burns may be among them: those
    // last a second at most).
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..100 {
        seen.extend(threads_named("burn-"));
        if seen.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(seen.len() >= 2, "the burns' threads never showed: {seen:?}");
    let st = c.wait(&timed, Duration::from_secs(10)).await.unwrap();
    assert_eq!(st.state, JobState::TimedOut, "{st:?}");
    let st = c.stop(&stopped).await.unwrap();
    assert_eq!(st.state, JobState::Stopped, "{st:?}");
    assert!(st.error.is_none(), "stopped, not abandoned: {st:?}");
    assert!(st.result.is_some(), "a stopped burn reports what it did");
    let mut left = seen.clone();
    for _ in 0..100 {
        left = threads_named("burn-")
            .intersection(&seen)
            .copied()
            .collect();
        if left.is_empty() && c.health().await.unwrap().running_jobs == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(left.is_empty(), "burner threads still run: {left:?}");
    assert_eq!(c.health().await.unwrap().running_jobs, 0);
}

/// M1 for `steal`: a stopped scan ends with what it saw instead of running to the end
/// of its duration; the stop reports a result, not an abandoned job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_steal_scan_ends_with_its_result() {
    let addr = start_agent().await;
    let c = client(addr);
    let spec = JobSpec::Steal {
        cpus: None,
        duration_ms: 600_000,
        threshold_ns: 5_000,
        options: Default::default(),
    };
    let id = start_job(&c, spec, 900_000).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let st = c.stop(&id).await.unwrap();
    assert_eq!(st.state, JobState::Stopped, "{st:?}");
    assert!(st.error.is_none(), "stopped, not abandoned: {st:?}");
    let result = st.result.expect("a stopped scan reports what it saw");
    let span = result["cpus"][0]["span_ns"].as_f64().expect("a span");
    assert!((1e8..60e9).contains(&span), "scanned {span} ns");
    assert_eq!(c.health().await.unwrap().running_jobs, 0);
}

/// M12: jobs run on a bounded pool; beyond it (idle jobs count) a start is a JSON
/// 503 "busy" at once, not a job that never starts, and a slot freed by a stop is
/// used again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_job_pool_answers_busy() {
    use nnb_agent::jobs::limits::MAX_RUNNING_JOBS;
    let addr = start_agent().await;
    let c = client(addr);
    let auth = format!("Bearer {TOKEN}");
    let idle = r#"{"spec":{"kind":"idle"},"deadline_ms":60000}"#;
    let mut ids = Vec::new();
    for _ in 0..MAX_RUNNING_JOBS {
        ids.push(start_job(&c, JobSpec::Idle, 60_000).await);
    }
    let (status, err) = post_raw(addr, Some(&auth), idle).await;
    assert_eq!(status, 503, "{err}");
    assert!(err["error"].as_str().unwrap().contains("busy"), "{err}");
    assert_eq!(c.health().await.unwrap().running_jobs, MAX_RUNNING_JOBS);
    c.stop(&ids[0]).await.unwrap();
    let (status, err) = post_raw(addr, Some(&auth), idle).await;
    assert_eq!(status, 201, "{err}");
    nnb_controller::client::stop_all_jobs(&c).await;
}

/// L2, L15: every error answer is `{"error": ...}` JSON, also those axum writes
/// itself (413 for a body over 2 MB, which also closes its connection, 405 for a
/// wrong method), and the unauthenticated 404 does not list the endpoints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_answer_is_json() {
    let addr = start_agent().await;
    let http = reqwest::Client::new();
    let big = http
        .post(format!("http://{addr}/jobs"))
        .bearer_auth(TOKEN)
        .body(vec![b' '; 3 << 20])
        .send()
        .await
        .unwrap();
    // The refused body stays unread: the agent closes that connection and says so,
    // so the client does not reuse it for the next request.
    assert_eq!(
        big.headers().get("connection").map(|v| v.as_bytes()),
        Some(&b"close"[..]),
        "{:?}",
        big.headers()
    );
    let wrong_method = http
        .delete(format!("http://{addr}/health"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let unknown = http
        .get(format!("http://{addr}/admin"))
        .send()
        .await
        .unwrap();
    for (resp, status) in [(big, 413), (wrong_method, 405), (unknown, 404)] {
        assert_eq!(resp.status().as_u16(), status);
        let body: Value = resp.json().await.expect("a JSON error body");
        let msg = body["error"].as_str().unwrap_or_else(|| panic!("{body}"));
        assert!(
            !msg.is_empty() && !msg.contains("/health"),
            "{status}: {msg}"
        );
    }
}

/// This process's soft limit on open files (`/proc/self/limits`).
fn open_files_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// M3: 2,000 idle connections and 50 slowloris ones (a header line now and then)
/// do not lock a controller out: `/health` on a new connection answers within a
/// second. The agent closes an idle connection, and a slowloris one, once the
/// header read timeout has passed (they were kept forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slowloris_connections_neither_lock_out_health_nor_stay_forever() {
    use nnb_agent::jobs::limits::HEADER_READ_TIMEOUT;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    let addr = start_agent().await;
    // Both ends of every connection live in this process.
    let limit = open_files_limit().unwrap_or(1024);
    let idle_count = 2000.min(limit.saturating_sub(300) / 2);
    if idle_count < 2000 {
        eprintln!("only {idle_count} idle connections: the open-files limit is {limit}");
    }
    let mut idle = Vec::new();
    for _ in 0..idle_count {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }
    let mut slow = Vec::new();
    for _ in 0..50 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        slow.push(s);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let health = tokio::time::timeout(Duration::from_secs(1), client(addr).health()).await;
    assert!(
        matches!(health, Ok(Ok(_))),
        "no health within 1 s under {idle_count} idle connections: {health:?}"
    );

    // The newest idle connection, and a slowloris one that keeps sending header
    // lines, are closed by the agent after the header timeout.
    let mut last_idle = idle.pop().unwrap();
    let mut loris = slow.pop().unwrap();
    let bound = HEADER_READ_TIMEOUT + Duration::from_secs(5);
    let idle_closed = tokio::time::timeout(bound, async {
        let mut buf = [0u8; 256];
        loop {
            match last_idle.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    });
    let loris_closed = tokio::time::timeout(bound, async {
        let mut buf = [0u8; 256];
        loop {
            if loris.write_all(b"X-Slow: 1\r\n").await.is_err() {
                break;
            }
            let read = tokio::time::timeout(Duration::from_secs(1), loris.read(&mut buf)).await;
            if matches!(read, Ok(Ok(0) | Err(_))) {
                break;
            }
        }
    });
    let (idle_closed, loris_closed) = tokio::join!(idle_closed, loris_closed);
    assert!(idle_closed.is_ok(), "an idle connection outlived {bound:?}");
    assert!(
        loris_closed.is_ok(),
        "a slowloris connection outlived {bound:?}"
    );
}

/// M4: shutdown ends within its grace period although a client holds a request
/// half sent, and the busy job that ran is stopped with it (before, the agent
/// waited for the client forever, its job burning on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_within_its_grace_despite_a_half_sent_request() {
    use nnb_agent::jobs::limits::SHUTDOWN_GRACE;
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let agent = Agent::new(Token::new(TOKEN).unwrap(), IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(nnb_agent::serve(listener, agent, async {
        let _ = stopped.await;
    }));
    let c = client(addr);
    let busy = JobSpec::Busy {
        workload: "int".into(),
        threads: 1,
    };
    start_job(&c, busy, 600_000).await;
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        seen.extend(threads_named("steady-"));
        if !seen.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!seen.is_empty(), "the busy job's thread never showed");
    let mut half = tokio::net::TcpStream::connect(addr).await.unwrap();
    half.write_all(b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = std::time::Instant::now();
    stop.send(()).unwrap();
    let bound = SHUTDOWN_GRACE * 2 + Duration::from_secs(3);
    let ended = tokio::time::timeout(bound, server).await;
    assert!(ended.is_ok(), "shutdown took over {bound:?}");
    eprintln!("shutdown took {:?}", started.elapsed());
    let left: Vec<u64> = threads_named("steady-")
        .intersection(&seen)
        .copied()
        .collect();
    assert!(left.is_empty(), "the busy job still burns: {left:?}");
    drop(half);
}
