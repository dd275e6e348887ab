//! The result contract between the agent and the results format. Every job kind the
//! agent runs (every [`JobSpec`] variant, as serde itself lists them) runs here, small
//! and real, on an agent served in process on a loopback socket, reached through the
//! controller's [`AgentClient`]; its real result is read through the format's entry
//! points as the controller reads it: a measured job's with [`JobOutcome::read`], a
//! background job's final result with [`BackgroundResult::parse`]. Each must read and
//! give every metric (or achieved figure) and every optional field its kind reports,
//! and what it ran under. A field renamed on one side only (in `nnb_burn`'s or
//! `nnb_netlat`'s report, or in `nnb_format::job`) fails here, with serde's message
//! naming the field.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use nnb_agent::jobs::{
    BurnScope, CommandMetric, CommandSpec, JobRequest, JobSpec, JobState, LoadSampling,
    StealOptions,
};
use nnb_agent::{Agent, AgentConfig, Token};
use nnb_controller::client::AgentClient;
use nnb_format::quality::Quality;
use nnb_format::{
    Achieved, BackgroundResult, CommandValueSource, JobOutcome, JobResult, Metric, Metrics,
    StepConditions,
};
use serde_json::{json, Value};

const TOKEN: &str = "contract-token-for-tests";

/// How long a measured job may take (a debug build on a busy 2-core machine).
const JOB_TIMEOUT: Duration = Duration::from_secs(60);

/// A background job runs this long before it is stopped.
const BACKGROUND_TIME: Duration = Duration::from_millis(300);

/// Serves a fresh agent on an ephemeral loopback port for the test's runtime, started
/// with the opt-in to command jobs; the controller's client of it.
async fn start_agent() -> AgentClient {
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    let token = Token::new(TOKEN).expect("a valid token");
    let config = AgentConfig {
        allow_commands: true,
    };
    let agent: Arc<Agent> =
        Agent::with_config(token, IpAddr::V4(Ipv4Addr::LOCALHOST), config).expect("an agent");
    tokio::spawn(nnb_agent::serve(listener, agent, std::future::pending()));
    AgentClient::new(addr, TOKEN.to_string())
}

/// Starts `spec`; its job id.
async fn start_job(c: &AgentClient, spec: &JobSpec) -> String {
    let req = JobRequest {
        spec: spec.clone(),
        deadline_ms: 120_000,
    };
    c.start(&req)
        .await
        .unwrap_or_else(|e| panic!("{spec:?}: {e}"))
}

/// The addresses a running `serve` job published, as the controller's endpoint reads
/// them: (reflector, sink).
async fn published(c: &AgentClient, id: &str) -> (String, String) {
    for _ in 0..250 {
        let st = c.status(id).await.expect("the serve job's status");
        assert_eq!(st.state, JobState::Running, "{st:?}");
        if let Some(r) = st.result {
            let addr = |k: &str| {
                r[k].as_str()
                    .unwrap_or_else(|| panic!("no `{k}` address in {r}"))
                    .to_string()
            };
            return (addr("reflector"), addr("sink"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the serve job published no addresses");
}

/// Every `kind` of [`JobSpec`], as serde lists them when it refuses an unknown one:
/// so a new variant is in this list without anyone adding it here, and the test
/// fails until it has an example.
fn every_kind() -> BTreeSet<String> {
    let err = serde_json::from_value::<JobSpec>(json!({"kind": "no-such-kind"}))
        .expect_err("an unknown kind is refused")
        .to_string();
    let (_, expected) = err
        .split_once("expected one of ")
        .unwrap_or_else(|| panic!("serde's message lists no kinds: {err}"));
    let kinds: BTreeSet<String> = expected
        .split(", ")
        .filter_map(|k| k.split('`').nth(1))
        .map(str::to_string)
        .collect();
    assert!(
        kinds.len() >= 9 && kinds.contains("burn") && kinds.contains("memory"),
        "{kinds:?} from {err}"
    );
    kinds
}

/// The metrics a result of this kind gives, every one of which must have a value:
/// the match has no catch-all, so a new kind of result does not compile until it
/// says which.
fn metrics_of(result: &JobResult) -> Vec<Metric> {
    match result {
        JobResult::Burn(_) => vec![
            Metric::RuntimeS,
            Metric::OpsPerSec,
            Metric::NsPerOpPerThread,
        ],
        // Hops: the pongs' IP TTL, which every Linux kernel reports (UDP here).
        JobResult::Latency(_) => [&Metric::RTT[..], &[Metric::Hops]].concat(),
        JobResult::Load(_) => vec![Metric::RateBps],
        JobResult::Disk(_) => vec![Metric::Iops],
        JobResult::Memory(_) => vec![Metric::RssBytes],
        JobResult::Steal(_) => vec![Metric::CpuSharePct],
        JobResult::Rtt(_) => vec![
            Metric::RttMinNs,
            Metric::RttP50Ns,
            Metric::RttMeanNs,
            Metric::RttMaxNs,
            Metric::RttStdNs,
            Metric::Hops,
        ],
        JobResult::Badabing(_) => vec![Metric::LossFrequencyPct, Metric::ProbeLossPct],
        JobResult::Command(c) => match c.source {
            CommandValueSource::Wall => vec![Metric::CommandWallS],
            CommandValueSource::Json | CommandValueSource::Regex => {
                vec![Metric::CommandWallS, Metric::CommandValue]
            }
        },
    }
}

/// The optional fields and qualifiers a real result of this kind has, which the
/// format would read as absent if they were renamed.
fn assert_optional_fields(spec: &JobSpec, o: &JobOutcome) {
    let q: &Quality = &o.quality;
    let raw = &o.raw;
    match &o.result {
        JobResult::Burn(b) => {
            assert!(!b.burn.threads.is_empty(), "burn threads: {raw}");
            let clock = q.clock.as_ref().and_then(|c| c.source.as_ref());
            assert!(clock.is_some(), "clock: {raw}");
            assert!(!q.slots().is_empty(), "placement: {raw}");
        }
        JobResult::Latency(_) => {
            let counts = q.counts.unwrap_or_else(|| panic!("probe counts: {raw}"));
            assert!(counts.sent > 0 && counts.answered > 0, "{counts:?}");
            assert!(!q.probe_dead());
            assert!(o.hdr_log.is_some(), "a latency job's HDR log");
        }
        JobResult::Load(l) => {
            let sink = l.sink.unwrap_or_else(|| panic!("sink report: {raw}"));
            assert!(sink.streams_reported.is_some(), "streams_reported: {raw}");
            assert!(!l.streams.is_empty() && q.sink_complete(), "streams: {raw}");
            assert!(q.sent.is_some(), "sender totals: {raw}");
            let sampled = matches!(
                spec,
                JobSpec::Load {
                    sampling: Some(_),
                    ..
                } | JobSpec::LoadWindow { .. }
            );
            match l.samples {
                Some(s) => {
                    assert!(sampled, "samples of an unsampled load: {raw}");
                    assert!(s.sent_window_bps.is_some(), "sent window: {raw}");
                    assert!(s.received_window_bps.is_some(), "received window: {raw}");
                }
                None => assert!(!sampled, "a sampled load's samples: {raw}"),
            }
        }
        JobResult::Disk(d) => {
            for (what, lat) in [
                ("latency", d.latency),
                ("read_latency", d.read_latency),
                ("write_latency", d.write_latency),
            ] {
                let lat = lat.unwrap_or_else(|| panic!("{what}: {raw}"));
                assert!(
                    lat.mean_ns > 0.0 && lat.max_ns >= lat.p50_ns,
                    "{what}: {lat:?}"
                );
            }
            assert!(d.pacing.is_some(), "a paced disk job's pacing: {raw}");
        }
        JobResult::Memory(_) => {
            let total = q.mem_total_bytes;
            assert!(total.is_some_and(|b| b > 0), "mem_total_bytes: {raw}");
        }
        JobResult::Steal(s) => assert_steal_trace(spec, s.cpus.len(), raw),
        JobResult::Rtt(r) => assert_rtt_log(spec, r.summary.is_some(), raw),
        JobResult::Badabing(_) => assert_badabing_series(spec, raw),
        JobResult::Command(c) => {
            assert_eq!((c.exit_code, c.signal), (Some(0), None), "{raw}");
            let declared = match spec {
                JobSpec::Command(CommandSpec {
                    metric: CommandMetric::Json { unit, .. } | CommandMetric::Regex { unit, .. },
                    ..
                }) => unit.as_str(),
                _ => "s",
            };
            assert_eq!(c.unit, declared, "{raw}");
            for field in [
                "stdout_tail",
                "stderr_tail",
                "stdout_dropped",
                "stderr_dropped",
            ] {
                assert!(raw.get(field).is_some(), "{field}: {raw}");
            }
        }
    }
}

/// A traced steal job's `cpus[i].trace` (the analysis draws Wang & Ng's Fig. 1 from
/// it): every kept gap longer than the threshold, the counts per ms summing to the
/// iterations over the span, and the CPU share that of the gaps kept.
fn assert_steal_trace(spec: &JobSpec, cpus: usize, raw: &Value) {
    let JobSpec::Steal {
        threshold_ns,
        options,
        ..
    } = spec
    else {
        panic!("a steal result of {spec:?}");
    };
    assert!(options.trace, "the contract's steal job keeps its trace");
    let list = raw["cpus"].as_array().expect("cpus");
    assert_eq!(list.len(), cpus, "{raw}");
    for cpu in list {
        let trace = &cpu["trace"];
        let num = |v: &Value, k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k}: {cpu}"));
        let gaps = trace["gaps"]
            .as_array()
            .unwrap_or_else(|| panic!("gaps: {cpu}"));
        let mut lost = 0.0;
        for g in gaps {
            let (at, len) = (g[0].as_f64(), g[1].as_f64());
            let (Some(at), Some(len)) = (at, len) else {
                panic!("a gap is [at_ns, len_ns]: {g}");
            };
            assert!(len > *threshold_ns as f64 - 1.0 && at >= 0.0, "{g}");
            lost += len;
        }
        assert_eq!(num(trace, "gaps_left_out"), 0.0, "{cpu}");
        let counts = trace["counts_per_ms"]
            .as_array()
            .unwrap_or_else(|| panic!("counts_per_ms: {cpu}"));
        let total: f64 = counts.iter().filter_map(Value::as_f64).sum();
        assert_eq!(total, num(cpu, "iterations"), "{cpu}");
        let span_ms = num(cpu, "span_ns") / 1e6;
        assert!(
            (counts.len() as f64 - span_ms).abs() <= 2.0,
            "{} bins over {span_ms} ms",
            counts.len()
        );
        let share = 1.0 - lost / num(cpu, "span_ns");
        assert!(
            (share - num(cpu, "ran_share")).abs() < 1e-6,
            "{share} from the trace: {cpu}"
        );
    }
}

/// An rtt job's per-probe log (the analysis draws Wang & Ng's Fig. 9 from it):
/// every probe, in order, its RTT or null; the summary over those after `skip`.
fn assert_rtt_log(spec: &JobSpec, summary: bool, raw: &Value) {
    let JobSpec::Rtt { probes, skip, .. } = spec else {
        panic!("an rtt result of {spec:?}");
    };
    assert_eq!(raw["mode"], "udp", "{raw}");
    let log = raw["log"]
        .as_array()
        .unwrap_or_else(|| panic!("log: {raw}"));
    assert_eq!(log.len() as u64, *probes, "{raw}");
    for (i, p) in log.iter().enumerate() {
        assert_eq!(p["seq"].as_u64(), Some(i as u64), "{p}");
        assert!(p["sent_ns"].is_u64(), "{p}");
        assert!(p["rtt_ns"].is_u64() || p["rtt_ns"].is_null(), "{p}");
    }
    let answered = log[*skip as usize..]
        .iter()
        .filter(|p| p["rtt_ns"].is_u64())
        .count();
    assert!(summary, "an rtt job's summary: {raw}");
    assert_eq!(
        raw["summary"]["kept"].as_u64(),
        Some(answered as u64),
        "{raw}"
    );
}

/// A badabing job's result beyond the format's three figures (the analysis draws
/// Wang & Ng's Figs 10 and 11 from it): its settings echoed, the seed of its slot
/// draw, its counts, and one series entry per probed slot with the relative one-way
/// delay and the max_owd estimate.
fn assert_badabing_series(spec: &JobSpec, raw: &Value) {
    let JobSpec::Badabing {
        slot_us, packets, ..
    } = spec
    else {
        panic!("a badabing result of {spec:?}");
    };
    let num = |k: &str| raw[k].as_u64().unwrap_or_else(|| panic!("{k}: {raw}"));
    assert_eq!(raw["owd_relative"], Value::Bool(true), "{raw}");
    assert_eq!(num("slot_ns"), slot_us * 1000, "{raw}");
    assert_eq!(num("packets"), u64::from(*packets), "{raw}");
    assert!(raw["seed"].is_u64() && raw["alpha"].is_f64(), "{raw}");
    for k in [
        "tau_ns",
        "slots",
        "lossy_slots",
        "lost_probes",
        "packets_lost",
    ] {
        num(k);
    }
    let series = raw["series"]
        .as_array()
        .unwrap_or_else(|| panic!("series: {raw}"));
    assert!(!series.is_empty(), "probes in 300 ms: {raw}");
    assert_eq!(series.len() as u64, num("probed_slots"), "{raw}");
    assert_eq!(num("probes"), num("probed_slots"), "{raw}");
    assert_eq!(
        num("packets_sent"),
        num("probes") * u64::from(*packets),
        "{raw}"
    );
    for s in series {
        assert!(
            s["slot"].is_u64() && s["t_ns"].is_u64() && s["lost"].is_u64(),
            "{s}"
        );
        assert!(s["owd_ns"].is_u64() || s["owd_ns"].is_null(), "{s}");
        assert!(s["max_owd_ns"].is_u64() || s["max_owd_ns"].is_null(), "{s}");
        assert!(s["lossy"].is_boolean(), "{s}");
    }
}

/// What every job ran under (steal, uptime, frequency), as a sample's conditions
/// columns read it from the qualifiers.
fn assert_conditions(kind: &str, c: &StepConditions) {
    assert!(
        c.uptime_s.is_some_and(|u| u > 0.0),
        "{kind}: uptime_s {c:?}"
    );
    assert!(c.steal_s.is_some(), "{kind}: steal {c:?}");
    let counters = c.steal_ticks_before.zip(c.steal_ticks_after);
    assert!(
        counters.is_some_and(|(before, after)| after >= before),
        "{kind}: steal counters {c:?}"
    );
    assert_eq!(
        c.effective_mhz.is_some(),
        c.freq_source.is_some(),
        "{kind}: {c:?}"
    );
}

/// A measured job (one that ends on its own): its result reads, with every metric.
async fn check_measured(c: &AgentClient, spec: &JobSpec) {
    let kind = spec.measured().expect("a measured kind");
    let id = start_job(c, spec).await;
    let st = c.wait(&id, JOB_TIMEOUT).await.expect("the job's end");
    assert_eq!(st.state, JobState::Done, "{spec:?}: {st:?}");
    let raw = st
        .result
        .unwrap_or_else(|| panic!("{spec:?} ended without a result"));
    let o = JobOutcome::read(kind, raw).unwrap_or_else(|e| panic!("{spec:?}: {e}"));
    assert_eq!(o.result.kind(), kind);
    let fixed_work = matches!(spec, JobSpec::Burn { ops: Some(_), .. });
    let m = Metrics::of(&o.result, fixed_work);
    assert!(m.value.is_some(), "{spec:?}: no primary value in {}", o.raw);
    for metric in metrics_of(&o.result) {
        let v = m.get(metric);
        assert!(
            v.is_some_and(f64::is_finite),
            "{spec:?}: {metric} is {v:?} in {}",
            o.raw
        );
    }
    assert!(o.result.measured_secs(0.0) > 0.0, "{spec:?}: {}", o.raw);
    assert_optional_fields(spec, &o);
    assert_conditions(kind.name(), &StepConditions::from(&o.quality));
}

/// A background job (one that runs until stopped, started as `id` or now): its final
/// result reads, with every figure its kind achieves.
async fn check_background(c: &AgentClient, spec: &JobSpec, id: Option<String>) {
    let job = spec.background().expect("a background kind");
    let id = match id {
        Some(id) => id,
        None => start_job(c, spec).await,
    };
    tokio::time::sleep(BACKGROUND_TIME).await;
    let st = c.stop(&id).await.expect("the job's final status");
    assert_eq!(st.state, JobState::Stopped, "{spec:?}: {st:?}");
    // An idle job's result is JSON null, which the status carries as no result.
    let raw = st.result.unwrap_or(Value::Null);
    let read = BackgroundResult::parse(job, &raw).unwrap_or_else(|e| panic!("{spec:?}: {e}"));
    let a = Achieved::of(&read);
    let figures: Vec<(&str, bool)> = match &read {
        BackgroundResult::Busy(_) => vec![
            ("runtime_s", a.runtime_s.is_some_and(|s| s > 0.0)),
            ("ops_per_sec", a.ops_per_sec.is_some_and(|r| r > 0.0)),
        ],
        BackgroundResult::Load(l) => vec![
            ("runtime_s", a.runtime_s.is_some_and(|s| s > 0.0)),
            ("sent_bps", a.sent_bps.is_some_and(|r| r > 0.0)),
            ("rate_bps", a.rate_bps.is_some()),
            ("sink", l.sink.is_some_and(|s| s.streams_reported.is_some())),
            ("streams", !l.streams.is_empty()),
        ],
        BackgroundResult::Serve(s) => vec![
            // The latency jobs pinged this reflector and the loads fed this sink.
            ("reflected", a.reflected.is_some_and(|n| n > 0)),
            ("send_failures", a.send_failures.is_some()),
            ("garbage", a.garbage.is_some()),
            ("sink", s.sink.is_some()),
        ],
        BackgroundResult::Idle => vec![("nothing", a == Achieved::default() && raw.is_null())],
        // Stopped by SIGTERM: the program had no exit code of its own.
        BackgroundResult::Command(c) => vec![
            ("runtime_s", a.runtime_s.is_some_and(|s| s > 0.0)),
            ("signal", c.signal.is_some() && c.exit_code.is_none()),
            ("stopped", raw["stopped"] == json!(true)),
        ],
    };
    for (figure, ok) in figures {
        assert!(ok, "{spec:?}: {figure} missing or wrong in {raw}");
    }
}

/// Every job kind's real result reads through the format and gives its metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_job_kinds_real_result_reads_through_the_format() {
    let c = start_agent().await;
    let disk_dir = tempfile::tempdir().expect("a scratch directory");
    // The endpoint of the probes and loads, stopped last: its snapshot counts them.
    let serve = JobSpec::Serve {
        reflector_port: 0,
        sink_port: 0,
        tcp_port: None,
        sink_threads: None,
    };
    let serve_id = start_job(&c, &serve).await;
    let (reflector, sink) = published(&c, &serve_id).await;
    let burn = |ops: Option<u64>, duration_ms: Option<u64>| JobSpec::Burn {
        workload: "int".into(),
        threads: 1,
        ops,
        duration_ms,
        pin: "cores".into(),
        cpus: None,
        scope: BurnScope::Tenant,
        duty: None,
        pool: nnb_format::EventPool::PerThread,
    };
    let load = |duration_ms: Option<u64>, sampling: Option<LoadSampling>| JobSpec::Load {
        target: sink.clone(),
        rate_bps: 10e6,
        streams: 1,
        msg_size: 1000,
        duration_ms,
        sampling,
        options: Default::default(),
    };
    let measured = [
        burn(Some(200_000), None),
        burn(None, Some(100)),
        JobSpec::Latency {
            target: reflector.clone(),
            duration_ms: 300,
            msg_size: 64,
            warmup_ms: 50,
            busy_poll: false,
        },
        load(Some(300), None),
        load(
            Some(600),
            Some(LoadSampling {
                interval_ms: 100,
                window: 3,
            }),
        ),
        JobSpec::Disk {
            dir: disk_dir.path().display().to_string(),
            file_size: 1 << 20,
            block_size: 4096,
            iops: Some(500.0),
            read_fraction: 0.5,
            queue_depth: 1,
            direct: false,
            duration_ms: 300,
        },
        JobSpec::Memory {
            bytes: 8 << 20,
            workers: 1,
            mode: "keep".into(),
            duration_ms: 300,
        },
        // CPUTest: Wang & Ng's 1 ms threshold, with the timestamp trace.
        JobSpec::Steal {
            cpus: None,
            duration_ms: 300,
            threshold_ns: 1_000_000,
            options: StealOptions { trace: true },
        },
        // Badabing with the seed's settings, short: 60 slots of 5 ms.
        JobSpec::Badabing {
            target: reflector.clone(),
            duration_ms: 300,
            slot_us: 5_000,
            probability: 0.3,
            packets: 3,
            msg_size: 64,
            tau_us: 50_000,
            alpha: 0.005,
        },
        // Wang & Ng's RTT series, short: 30 probes at 100/s, the first 5 dropped.
        JobSpec::Rtt {
            target: reflector.clone(),
            probes: 30,
            rate_hz: 100.0,
            skip: 5,
            msg_size: 64,
            icmp: false,
        },
        // A program's wall time, and a value it prints as JSON (a real program,
        // /bin/sh, printing a known document).
        JobSpec::Command(CommandSpec {
            timeout_ms: Some(30_000),
            ..CommandSpec::new(vec!["sleep".into(), "0.1".into()])
        }),
        JobSpec::Command(CommandSpec {
            timeout_ms: Some(30_000),
            metric: CommandMetric::Json {
                pointer: "/x".into(),
                unit: "ops/s".into(),
                higher_is_better: true,
                stream: Default::default(),
            },
            ..CommandSpec::new(vec![
                "/bin/sh".into(),
                "-c".into(),
                r#"echo '{"x": 4.5}'"#.into(),
            ])
        }),
    ];
    let background = [
        JobSpec::Busy {
            workload: "int".into(),
            threads: 1,
        },
        load(None, None),
        JobSpec::Idle,
        // A neighbor's program, until stopped.
        JobSpec::Command(CommandSpec::new(vec!["sleep".into(), "60".into()])),
    ];
    // A window of the background load, read while it runs.
    let window = JobSpec::LoadWindow {
        interval_ms: 100,
        window: 3,
    };
    let covered: BTreeSet<String> = measured
        .iter()
        .chain(&background)
        .chain([&serve, &window])
        .map(|s| s.kind().to_string())
        .collect();
    assert_eq!(
        covered,
        every_kind(),
        "every job kind needs an example here"
    );

    for spec in &measured {
        check_measured(&c, spec).await;
    }
    let running = load(None, None);
    let running_id = start_job(&c, &running).await;
    check_measured(&c, &window).await;
    for spec in &background {
        let id = (spec == &running).then(|| running_id.clone());
        check_background(&c, spec, id).await;
    }
    check_background(&c, &serve, Some(serve_id)).await;
}
