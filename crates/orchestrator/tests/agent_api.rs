//! The agent's HTTP API, served in-process on a real loopback socket: token checks,
//! bad requests, jobs with results, deadlines and stops.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use nnb_orchestrator::agent::{self, Agent, Token};
use nnb_orchestrator::client::{AgentClient, AgentError};
use nnb_orchestrator::jobs::{BurnScope, JobRequest, JobSpec, JobState};
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
    tokio::spawn(agent::serve(listener, agent, std::future::pending()));
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
    };
    let id = start_job(&c, spec, 60_000).await;
    let st = c.wait(&id, Duration::from_secs(60)).await.unwrap();
    assert_eq!(st.state, JobState::Done, "{st:?}");
    assert_eq!(st.kind, "burn");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uninterruptible_job_past_its_deadline_is_timed_out_and_keeps_its_late_result() {
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
    };
    let id = start_job(&c, spec, 100).await;
    let st = c.wait(&id, Duration::from_secs(10)).await.unwrap();
    assert_eq!(st.state, JobState::TimedOut, "{st:?}");
    assert!(st.result.is_none(), "the burn cannot have finished yet");
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
}
