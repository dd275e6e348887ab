//! Unit tests of the controller, driven through the fake provider and agents
//! ([`super::testing`]): which measured jobs the agents saw started and with how
//! many busy neighbors, the samples the run wrote, and how it ended.
//!
//! The plan of [`staircase`] is three steps, `busy/neighbors=0/rep=1`, `=1` and
//! `=2`; a fake burn reports `1 + busy neighbors` seconds, so a step's sample value
//! is 1, 2, 3. What the background jobs' stops answer is scripted per test, and
//! read back from `background.jsonl`.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::testing::{fake_kernel, FakeProvider, World};
use super::{execute_with, Cancel, ControllerError, Run, RunOptions, RunOutcome, RunStatus};
use crate::journal::read_samples;
use crate::provider::{Provider, StaticProvider};
use crate::results::{BackgroundRecord, ResultsError, Sample, SampleStatus};
use nnb_experiment::plan;
use nnb_format::{AgentJob, SessionStatus};

const HOST_CPUS: usize = 8;
const STEPS: [&str; 3] = [
    "busy/neighbors=0/rep=1",
    "busy/neighbors=1/rep=1",
    "busy/neighbors=2/rep=1",
];

/// A staircase of a test tenant and two busy neighbors, one repetition, with the
/// given `on_failure` policy.
fn staircase(on_failure: &str) -> String {
    nnb_testkit::Staircase {
        name: "fake-staircase",
        repetitions: 1,
        settle: "10ms",
        step_timeout: Some("60s"),
        on_failure: Some(on_failure),
        neighbor_state: "busy",
        workload: Some("fpadd"),
        ops: 1000,
    }
    .toml()
}

fn create(results: &Path, on_failure: &str) -> Run {
    let run = create_from(results, &staircase(on_failure));
    let ids: Vec<&str> = run.plan.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, STEPS);
    run
}

/// A new run of experiment `text` under `results`.
fn create_from(results: &Path, text: &str) -> Run {
    let exp = nnb_experiment::parse("fake.toml", text, Some(HOST_CPUS)).expect("valid experiment");
    let plan = plan::expand(&exp, HOST_CPUS);
    Run::create(results, "fake.toml", text, exp, plan).expect("run created")
}

/// The background jobs' ends the run recorded, ordered by tenant and first step.
fn background(run: &Run) -> Vec<BackgroundRecord> {
    let path = run.dir.background_path();
    if !path.exists() {
        return Vec::new();
    }
    let mut all: Vec<BackgroundRecord> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| nnb_format::parse_background(l).expect("a background record"))
        .collect();
    all.sort_by(|a, b| (&a.tenant, a.steps.first()).cmp(&(&b.tenant, b.steps.first())));
    all
}

async fn go(run: &mut Run, provider: &mut FakeProvider, cancel: &Cancel) -> RunOutcome {
    execute_with(run, provider, &RunOptions::default(), cancel)
        .await
        .expect("the run ends without a controller error")
}

fn never() -> Cancel {
    let (canceller, cancel) = Cancel::manual();
    // A cancel whose canceller is gone stays unset for good.
    drop(canceller);
    cancel
}

/// `(step, status, attempts, value)` of every sample, in journal order.
fn samples(run: &Run) -> Vec<(String, SampleStatus, u32, Option<f64>)> {
    let path = run.dir.samples_path();
    if !path.exists() {
        return Vec::new();
    }
    read_samples(&path)
        .expect("samples readable")
        .into_iter()
        .map(|s: Sample| (s.step, s.status, s.attempts, s.value))
        .collect()
}

/// Busy neighbors at each measured start the fakes saw.
fn busy_at_starts(world: &Arc<Mutex<World>>) -> Vec<usize> {
    let w = world.lock().unwrap();
    assert!(w
        .starts
        .iter()
        .all(|s| s.tenant == "test" && s.kind == AgentJob::Burn));
    w.starts.iter().map(|s| s.busy).collect()
}

fn ok(step: &str, attempts: u32, value: f64) -> (String, SampleStatus, u32, Option<f64>) {
    (step.to_string(), SampleStatus::Ok, attempts, Some(value))
}

fn failed(step: &str, attempts: u32) -> (String, SampleStatus, u32, Option<f64>) {
    (step.to_string(), SampleStatus::Failed, attempts, None)
}

fn counts(o: &RunOutcome) -> (RunStatus, usize, usize, usize, usize) {
    (o.status, o.planned, o.skipped, o.measured, o.failed)
}

#[tokio::test]
async fn every_step_is_measured_once_in_plan_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = create(dir.path(), "skip");
    let world = World::shared();
    let mut provider = FakeProvider::new(&world);
    let out = go(&mut run, &mut provider, &never()).await;
    assert_eq!(counts(&out), (RunStatus::Completed, 3, 0, 3, 0));
    assert_eq!(busy_at_starts(&world), [0, 1, 2]);
    assert_eq!(
        samples(&run),
        [
            ok(STEPS[0], 1, 1.0),
            ok(STEPS[1], 1, 2.0),
            ok(STEPS[2], 1, 3.0)
        ]
    );
    assert_eq!((provider.launches, provider.shutdowns), (1, 1));
    // Both busy neighbors were stopped when the run ended, nb-1 also when the
    // background changed to two neighbors (every job restarts on a change).
    let w = world.lock().unwrap();
    assert_eq!(w.stopped.get("nb-1"), Some(&2));
    assert_eq!(w.stopped.get("nb-2"), Some(&1));
    drop(w);
    let manifest = run.dir.read_manifest().unwrap();
    assert_eq!(manifest.sessions.len(), 1);
    assert_eq!(manifest.sessions[0].status, SessionStatus::Completed);
    assert_eq!(manifest.sessions[0].steps_run, 3);
}

#[tokio::test]
async fn a_failed_attempt_is_retried_and_the_retry_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = create(dir.path(), "retry 1");
    let world = World::shared();
    world.lock().unwrap().fail.insert(2);
    let mut provider = FakeProvider::new(&world);
    let out = go(&mut run, &mut provider, &never()).await;
    assert_eq!(counts(&out), (RunStatus::Completed, 3, 0, 3, 0));
    // Step 2 ran twice; its background was started afresh for the retry.
    assert_eq!(busy_at_starts(&world), [0, 1, 1, 2]);
    assert_eq!(
        samples(&run),
        [
            ok(STEPS[0], 1, 1.0),
            ok(STEPS[1], 2, 2.0),
            ok(STEPS[2], 1, 3.0)
        ]
    );
}

/// A job that ends "done" but whose probe heard no answer measured nothing: the
/// attempt fails and is retried, instead of recording an RTT of 0. (The fake's
/// result is a readable one, so the dead probe is what fails it.)
#[tokio::test]
async fn a_probe_that_heard_nothing_is_a_failed_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = create(dir.path(), "retry 1");
    let world = World::shared();
    world.lock().unwrap().results.insert(
        2,
        serde_json::json!({"burn": {"wall_ns": 5e9, "ops_per_sec": 1e6},
            "counts": {"sent": 50, "answered": 0, "lost": 50}}),
    );
    let mut provider = FakeProvider::new(&world);
    let out = go(&mut run, &mut provider, &never()).await;
    assert_eq!(counts(&out), (RunStatus::Completed, 3, 0, 3, 0));
    assert_eq!(
        samples(&run),
        [
            ok(STEPS[0], 1, 1.0),
            ok(STEPS[1], 2, 2.0),
            ok(STEPS[2], 1, 3.0)
        ]
    );
}

/// A result the results format cannot read (a burn's without `wall_ns`, as after a
/// field renamed on the agent's side only) fails the attempt, and the step is
/// recorded failed with an error naming the job's kind and the field: never a sample
/// with an empty column.
#[tokio::test]
async fn an_unreadable_result_is_a_failed_step_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = create(dir.path(), "skip");
    let world = World::shared();
    world.lock().unwrap().results.insert(
        2,
        serde_json::json!({"burn": {"wall_nanos": 2e9, "ops_per_sec": 1e6}}),
    );
    let mut provider = FakeProvider::new(&world);
    let out = go(&mut run, &mut provider, &never()).await;
    assert_eq!(counts(&out), (RunStatus::Completed, 3, 0, 2, 1));
    assert_eq!(
        samples(&run),
        [
            ok(STEPS[0], 1, 1.0),
            failed(STEPS[1], 1),
            ok(STEPS[2], 1, 3.0)
        ]
    );
    let all = read_samples(&run.dir.samples_path()).unwrap();
    let error = all[1].error.as_deref().unwrap_or("");
    assert!(
        error.contains("tenant test")
            && error.contains("the burn job's result")
            && error.contains("missing field `wall_ns`"),
        "{error}"
    );
}

#[tokio::test]
async fn a_step_failing_every_retry_is_recorded_failed_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = create(dir.path(), "retry 1");
    let world = World::shared();
    world.lock().unwrap().fail.extend([2, 3]);
    let mut provider = FakeProvider::new(&world);
    let out = go(&mut run, &mut provider, &never()).await;
    assert_eq!(counts(&out), (RunStatus::Completed, 3, 0, 2, 1));
    assert_eq!(busy_at_starts(&world), [0, 1, 1, 2]);
    assert_eq!(
        samples(&run),
        [
            ok(STEPS[0], 1, 1.0),
            failed(STEPS[1], 2),
            ok(STEPS[2], 1, 3.0)
        ]
    );
    let all = read_samples(&run.dir.samples_path()).unwrap();
    let error = all[1].error.as_deref().unwrap_or("");
    assert!(
        error.contains("injected failure of measured start 3"),
        "{error}"
    );
}

#[tokio::test]
async fn skip_records_the_failed_step_once_and_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = create(dir.path(), "skip");
    let world = World::shared();
    world.lock().unwrap().fail.insert(1);
    let mut provider = FakeProvider::new(&world);
    let out = go(&mut run, &mut provider, &never()).await;
    assert_eq!(counts(&out), (RunStatus::Completed, 3, 0, 2, 1));
    assert_eq!(busy_at_starts(&world), [0, 1, 2]);
    assert_eq!(
        samples(&run),
        [
            failed(STEPS[0], 1),
            ok(STEPS[1], 1, 2.0),
            ok(STEPS[2], 1, 3.0)
        ]
    );
}

#[tokio::test]
async fn abort_stops_the_run_after_the_failed_step() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = create(dir.path(), "abort");
    let world = World::shared();
    world.lock().unwrap().fail.insert(2);
    let mut provider = FakeProvider::new(&world);
    let out = go(&mut run, &mut provider, &never()).await;
    assert_eq!(counts(&out), (RunStatus::Aborted, 3, 0, 1, 1));
    assert_eq!(busy_at_starts(&world), [0, 1]);
    assert_eq!(samples(&run), [ok(STEPS[0], 1, 1.0), failed(STEPS[1], 1)]);
    assert_eq!(provider.shutdowns, 1);
    assert_eq!(
        run.dir.read_manifest().unwrap().sessions[0].status,
        SessionStatus::Aborted
    );
}

#[tokio::test]
async fn a_cap_below_the_teardown_reserve_measures_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = create(dir.path(), "skip");
    let world = World::shared();
    let mut provider = FakeProvider::new(&world);
    // $1 per second; the 300 s teardown reserve alone would cost $300.
    provider.price = Some((3600.0, 100.0));
    let out = go(&mut run, &mut provider, &never()).await;
    assert_eq!(counts(&out), (RunStatus::CostCap, 3, 0, 0, 0));
    assert!(busy_at_starts(&world).is_empty());
    assert!(samples(&run).is_empty());
    assert_eq!(provider.shutdowns, 1, "the fleet is torn down");
}

#[tokio::test(start_paused = true)]
async fn the_cost_cap_stops_before_a_step_that_would_pass_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = create(dir.path(), "skip");
    let world = World::shared();
    // Each measured job takes 10 s (paused tokio time).
    world.lock().unwrap().job_time = Duration::from_secs(10);
    let mut provider = FakeProvider::new(&world);
    // $1 per second, cap $305: before step 1, 0 + 0 + 300 s fit; before step 2,
    // about 10 s held + a 10 s step + 300 s do not.
    provider.price = Some((3600.0, 305.0));
    let out = go(&mut run, &mut provider, &never()).await;
    assert_eq!(counts(&out), (RunStatus::CostCap, 3, 0, 1, 0));
    assert_eq!(busy_at_starts(&world), [0]);
    assert_eq!(samples(&run), [ok(STEPS[0], 1, 1.0)]);
    assert_eq!(
        run.dir.read_manifest().unwrap().sessions[0].status,
        SessionStatus::Aborted
    );
}

#[tokio::test(start_paused = true)]
async fn an_interrupted_run_resumes_measuring_each_remaining_step_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = create(dir.path(), "retry 1");
    let run_id = run.dir.run_id.clone();
    let world = World::shared();
    let (canceller, cancel) = Cancel::manual();
    {
        let mut w = world.lock().unwrap();
        w.job_time = Duration::from_secs(1);
        // Ctrl-C while the second step's job runs.
        w.cancel_at = Some((2, Arc::new(canceller)));
    }
    let mut provider = FakeProvider::new(&world);
    let out = go(&mut run, &mut provider, &cancel).await;
    assert_eq!(counts(&out), (RunStatus::Interrupted, 3, 0, 1, 0));
    assert_eq!(busy_at_starts(&world), [0, 1]);
    assert_eq!(
        samples(&run),
        [ok(STEPS[0], 1, 1.0)],
        "the step in flight is dropped"
    );
    assert_eq!(provider.shutdowns, 1);
    // A second writer is refused while this one holds the run directory.
    match Run::open(dir.path(), &run_id, HOST_CPUS) {
        Err(ControllerError::Results(ResultsError::Locked { holder, .. })) => {
            assert!(
                holder.contains(&format!("pid {}", std::process::id())),
                "{holder}"
            )
        }
        other => panic!("a second writer got in: {:?}", other.map(|r| r.dir.run_id)),
    }
    // As a kill -9 leaves it: the session never closed, and the lock dies with it.
    let mut m = run.dir.read_manifest().unwrap();
    m.sessions[0].status = SessionStatus::Running;
    run.dir.write_manifest(&m).unwrap();
    drop(run);

    let mut resumed = Run::open(dir.path(), &run_id, HOST_CPUS).expect("run reopens");
    let world = World::shared();
    world.lock().unwrap().job_time = Duration::from_secs(1);
    let mut provider = FakeProvider::new(&world);
    let out = go(&mut resumed, &mut provider, &never()).await;
    assert_eq!(counts(&out), (RunStatus::Completed, 3, 1, 2, 0));
    assert_eq!(busy_at_starts(&world), [1, 2]);
    assert_eq!(
        samples(&resumed),
        [
            ok(STEPS[0], 1, 1.0),
            ok(STEPS[1], 1, 2.0),
            ok(STEPS[2], 1, 3.0)
        ]
    );
    let sessions = resumed.dir.read_manifest().unwrap().sessions;
    let ends: Vec<(&str, usize)> = sessions
        .iter()
        .map(|s| (s.status.name(), s.steps_run))
        .collect();
    assert_eq!(ends, [("died", 1), ("completed", 2)]);
}

#[tokio::test]
async fn a_cancel_before_the_launch_ends_measures_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = create(dir.path(), "skip");
    let world = World::shared();
    let (canceller, cancel) = Cancel::manual();
    canceller.cancel();
    let mut provider = FakeProvider::new(&world);
    let out = go(&mut run, &mut provider, &cancel).await;
    assert_eq!(out.status, RunStatus::Interrupted);
    assert_eq!(out.measured + out.failed, 0);
    assert!(busy_at_starts(&world).is_empty());
}

#[tokio::test]
async fn a_dead_neighbor_fails_the_steps_that_need_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = create(dir.path(), "skip");
    let world = World::shared();
    world.lock().unwrap().dead.insert("nb-2".to_string());
    let mut provider = FakeProvider::new(&world);
    let out = go(&mut run, &mut provider, &never()).await;
    assert_eq!(counts(&out), (RunStatus::Completed, 3, 0, 2, 1));
    assert_eq!(samples(&run)[2], failed(STEPS[2], 1));
}

/// Level k of a staircase has exactly the test tenant and k neighbors up: the
/// provider is asked for each change, and every measured start saw that set.
#[tokio::test]
async fn each_step_runs_with_exactly_the_tenants_it_wants() {
    let dir = tempfile::tempdir().unwrap();
    let text = staircase("skip").replace("\"busy\"", "\"both\"");
    let mut run = create_from(dir.path(), &text);
    let world = World::shared();
    let mut provider = FakeProvider::new(&world);
    let out = go(&mut run, &mut provider, &never()).await;
    assert_eq!(out.measured, 6);
    let w = world.lock().unwrap();
    let seen: Vec<Vec<&str>> = w
        .starts
        .iter()
        .map(|s| s.present.iter().map(String::as_str).collect())
        .collect();
    let levels = [
        vec!["test"],
        vec!["test", "nb-1"],
        vec!["test", "nb-1", "nb-2"],
    ];
    let want: Vec<Vec<&str>> = levels.iter().chain(levels.iter()).cloned().collect();
    assert_eq!(seen, want);
    // Every level of both passes changes who is there (the idle pass starts from
    // the test tenant alone again).
    assert_eq!(w.presence_changes, 6);
    // Busy neighbors at each busy level, none in the idle pass.
    let busy: Vec<usize> = w.starts.iter().map(|s| s.busy).collect();
    assert_eq!(busy, [0, 1, 2, 0, 0, 0]);
}

#[tokio::test]
async fn a_static_provider_refuses_to_make_tenants_come_and_go() {
    let mut provider = StaticProvider::new(Path::new("hosts"), Path::new("token"));
    let tenant = |name: &str| crate::provider::Tenant {
        name: name.to_string(),
        role: crate::provider::Role::Neighbor,
        addr: "127.0.0.1:1".parse().unwrap(),
        token: String::new(),
        cpus: Vec::new(),
        netns: None,
        ip: None,
        runtime: None,
    };
    let mut fleet = crate::provider::Fleet::of(vec![tenant("test"), tenant("nb-1")], None);
    let all = ["test".to_string(), "nb-1".to_string()];
    assert!(provider
        .set_present(&mut fleet, &all)
        .await
        .unwrap()
        .is_empty());
    let err = provider
        .set_present(&mut fleet, &all[..1])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cannot start or stop"), "{err}");
    assert!(err.to_string().contains("nb-1"), "{err}");
}

/// Every background job's final status lands in `background.jsonl` with the steps it
/// ran through: nb-1's first job spans both repetitions of neighbors=1 and reports
/// what its scripted stop returned, its second job those of neighbors=2; nb-2's stop
/// fails, which is recorded as a failed job while every step is still measured.
#[tokio::test]
async fn background_results_are_recorded_with_the_steps_they_spanned() {
    let dir = tempfile::tempdir().unwrap();
    let text = staircase("skip").replace("repetitions = 1", "repetitions = 2");
    let mut run = create_from(dir.path(), &text);
    let world = World::shared();
    {
        let mut w = world.lock().unwrap();
        let busy = |ops: f64, per_sec: f64| {
            Ok(serde_json::json!({"placement": {}, "slices": 9,
            "total_ops": ops, "ops_per_sec": per_sec}))
        };
        w.stop_results.insert(("nb-1".into(), 1), busy(2e9, 1e8));
        w.stop_results.insert(("nb-1".into(), 2), busy(1e9, 5e7));
        w.stop_results
            .insert(("nb-2".into(), 1), Err("the agent crashed".into()));
    }
    let mut provider = FakeProvider::new(&world);
    let out = go(&mut run, &mut provider, &never()).await;
    assert_eq!(counts(&out), (RunStatus::Completed, 6, 0, 6, 0));
    assert_eq!(busy_at_starts(&world), [0, 0, 1, 1, 2, 2]);
    let steps = |n: usize| {
        vec![
            format!("busy/neighbors={n}/rep=1"),
            format!("busy/neighbors={n}/rep=2"),
        ]
    };
    let b = background(&run);
    let seen: Vec<(&str, &str, &str, SampleStatus)> = b
        .iter()
        .map(|r| (r.tenant.as_str(), r.role.name(), r.job.name(), r.status))
        .collect();
    assert_eq!(
        seen,
        [
            ("nb-1", "neighbor", "busy", SampleStatus::Ok),
            ("nb-1", "neighbor", "busy", SampleStatus::Ok),
            ("nb-2", "neighbor", "busy", SampleStatus::Failed),
        ]
    );
    assert_eq!(b[0].steps, steps(1));
    assert_eq!(
        (b[0].achieved.ops_per_sec, b[0].achieved.runtime_s),
        (Some(1e8), Some(20.0))
    );
    assert_eq!(b[1].steps, steps(2));
    assert_eq!(b[1].achieved.ops_per_sec, Some(5e7));
    assert_eq!(b[2].steps, steps(2));
    assert_eq!(b[2].state, None);
    assert_eq!(b[2].achieved.ops_per_sec, None);
    let error = b[2].error.as_deref().unwrap_or_default();
    assert!(
        error.contains("stopping it failed") && error.contains("the agent crashed"),
        "{error}"
    );
    assert!(samples(&run).iter().all(|s| s.1 == SampleStatus::Ok));
}

/// A staircase of two load neighbors (100 Mbit/s each) towards the endpoint.
fn load_staircase() -> String {
    staircase("skip").replace(
        "neighbor_state = \"busy\"",
        "neighbor_state = \"busy\"\n\n[scenario.busy]\nkind = \"load\"\nrate = \"100M\"",
    )
}

/// A background load's record says what it sent and what arrived against its
/// target, and the endpoint's `serve` is stopped at the end of the session and
/// recorded with its final snapshot, over every step.
#[tokio::test]
async fn a_load_neighbors_rates_and_the_endpoints_snapshot_are_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = create_from(dir.path(), &load_staircase());
    let world = World::shared();
    {
        let mut w = world.lock().unwrap();
        w.stop_results.insert(
            ("nb-1".into(), 1),
            Ok(serde_json::json!({"target_bps": 1e8,
                "sent": {"elapsed_s": 2.0, "payload_bps": 9e7},
                "sink": {"rate_bps": 1.8e7, "streams_reported": 1}, "streams": [{}]})),
        );
        w.stop_results.insert(
            ("endpoint".into(), 1),
            Ok(serde_json::json!({"taken_ns": 5,
                "reflector": {"reflected": 0, "send_failures": 2, "garbage": {"bad_magic": 1}},
                "sink": {"streams": [], "totals": {}, "garbage": {"truncated": 4}}})),
        );
    }
    let mut provider = FakeProvider::new(&world);
    let out = go(&mut run, &mut provider, &never()).await;
    assert_eq!(counts(&out), (RunStatus::Completed, 3, 0, 3, 0));
    let b = background(&run);
    let jobs: Vec<(&str, &str, &[String])> = b
        .iter()
        .map(|r| (r.tenant.as_str(), r.job.name(), r.steps.as_slice()))
        .collect();
    let at = |steps: &[&str]| steps.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        jobs,
        [
            ("endpoint", "serve", at(&STEPS).as_slice()),
            ("nb-1", "load", at(&STEPS[1..2]).as_slice()),
            ("nb-1", "load", at(&STEPS[2..]).as_slice()),
            ("nb-2", "load", at(&STEPS[2..]).as_slice()),
        ]
    );
    let ep = &b[0];
    assert_eq!((ep.role.name(), ep.status), ("endpoint", SampleStatus::Ok));
    assert_eq!(
        (ep.achieved.send_failures, ep.achieved.garbage),
        (Some(2), Some(5))
    );
    let nb1 = &b[1];
    assert_eq!(nb1.target_bps, Some(1e8));
    assert_eq!(
        (nb1.achieved.sent_bps, nb1.achieved.rate_bps),
        (Some(9e7), Some(1.8e7))
    );
    // Unscripted stops end the job with no result: nothing achieved is claimed.
    assert_eq!(b[3].target_bps, Some(1e8));
    assert_eq!(
        (b[3].status, b[3].achieved.sent_bps),
        (SampleStatus::Ok, None)
    );
}

/// Every tenant's record in the manifest, the endpoint's included, carries the
/// environment its own agent reported (the fakes name their tenant in the kernel).
#[tokio::test]
async fn the_manifest_records_each_tenants_environment() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = create_from(dir.path(), &load_staircase());
    let world = World::shared();
    let mut provider = FakeProvider::new(&world);
    go(&mut run, &mut provider, &never()).await;
    let manifest = run.dir.read_manifest().unwrap();
    let tenants = &manifest.sessions[0].tenants;
    let names: Vec<(&str, &str)> = tenants
        .iter()
        .map(|t| (t.name.as_str(), t.role.name()))
        .collect();
    assert_eq!(
        names,
        [
            ("test", "test"),
            ("nb-1", "neighbor"),
            ("nb-2", "neighbor"),
            ("endpoint", "endpoint")
        ]
    );
    for t in tenants {
        let env = t.environment.as_ref().expect("an environment");
        assert_eq!(env["kernel"], fake_kernel(&t.name), "{}", t.name);
        assert_eq!(env["clocksource"], "fake-tsc");
        // Recorded once, in the tenant record, not again in the health.
        assert!(t.health.as_ref().is_some_and(|h| h.environment.is_none()));
    }
}

/// A [`FakeProvider`] that notes, when told to shut the fleet down, which jobs its
/// agents still run, before its shutdown stops them: what a fleet whose agents a
/// `SIGKILL` ends would leave running without cleaning up.
struct NotingShutdown {
    inner: FakeProvider,
    /// `(tenant, kind)` of every job still running at the shutdown.
    running: Vec<(String, AgentJob)>,
}

impl Provider for NotingShutdown {
    fn kind(&self) -> nnb_format::ProviderKind {
        self.inner.kind()
    }

    fn launch<'a>(
        &'a mut self,
        specs: &'a [crate::provider::TenantSpec],
        serving: &'a crate::provider::Serving,
    ) -> crate::client::BoxFuture<'a, Result<crate::provider::Fleet, crate::provider::ProviderError>>
    {
        self.inner.launch(specs, serving)
    }

    fn agent(&self, tenant: &crate::provider::Tenant) -> Arc<dyn crate::client::AgentApi> {
        self.inner.agent(tenant)
    }

    fn set_present<'a>(
        &'a mut self,
        fleet: &'a mut crate::provider::Fleet,
        present: &'a [String],
    ) -> crate::client::BoxFuture<'a, Result<Vec<String>, crate::provider::ProviderError>> {
        self.inner.set_present(fleet, present)
    }

    fn shutdown(
        &mut self,
        fleet: crate::provider::Fleet,
    ) -> crate::client::BoxFuture<'_, Result<(), crate::provider::ProviderError>> {
        Box::pin(async move {
            for t in fleet.all() {
                let jobs = self.inner.agent(t).list().await.unwrap_or_default();
                self.running.extend(
                    jobs.iter()
                        .filter(|j| !j.state.is_final())
                        .map(|j| (t.name.clone(), j.kind)),
                );
            }
            self.inner.shutdown(fleet).await
        })
    }
}

/// Reliability review NM2: a run interrupted while a step's measured job runs
/// stops that job (and the background) before it shuts the fleet down; the old
/// controller dropped the step and left the job to the shutdown, which a fleet
/// whose agents died of the same Ctrl-C never reached, so a disk job's scratch
/// file outlived the run.
#[tokio::test(start_paused = true)]
async fn an_interrupted_step_stops_its_measured_job_before_the_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = create(dir.path(), "retry 1");
    let world = World::shared();
    let (canceller, cancel) = Cancel::manual();
    {
        let mut w = world.lock().unwrap();
        w.job_time = Duration::from_secs(60);
        // Ctrl-C while the first step's job runs.
        w.cancel_at = Some((1, Arc::new(canceller)));
    }
    let mut provider = NotingShutdown {
        inner: FakeProvider::new(&world),
        running: Vec::new(),
    };
    let out = execute_with(&mut run, &mut provider, &RunOptions::default(), &cancel)
        .await
        .expect("the run ends without a controller error");
    assert_eq!(counts(&out), (RunStatus::Interrupted, 3, 0, 0, 0));
    assert_eq!(provider.running, [], "jobs left for the shutdown to stop");
    assert_eq!(
        world.lock().unwrap().stopped.get("test"),
        Some(&1),
        "the measured job was stopped"
    );
}

/// Reliability review NL10 (and L8): a session that a `kill -9` ended never wrote
/// its count, so the resume that marked it `died` said `steps_run: 0` though the
/// journal held its steps. Here the first session records step 1 and is
/// interrupted, the second records step 2 and is left as a `kill -9` leaves it
/// (`running`, the count it wrote at its start): reopening marks it `died` with
/// its 1 step, not the first session's.
#[tokio::test(start_paused = true)]
async fn a_session_that_died_is_marked_with_the_steps_it_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = create(dir.path(), "retry 1");
    let run_id = run.dir.run_id.clone();
    // Each session is interrupted at its second measured start.
    let interrupted_at_second_step = || {
        let world = World::shared();
        let (canceller, cancel) = Cancel::manual();
        let mut w = world.lock().unwrap();
        w.job_time = Duration::from_secs(1);
        w.cancel_at = Some((2, Arc::new(canceller)));
        drop(w);
        (world, cancel)
    };
    let (world, cancel) = interrupted_at_second_step();
    let out = go(&mut run, &mut FakeProvider::new(&world), &cancel).await;
    assert_eq!(counts(&out), (RunStatus::Interrupted, 3, 0, 1, 0));
    drop(run);
    let mut resumed = Run::open(dir.path(), &run_id, HOST_CPUS).expect("run reopens");
    let (world, cancel) = interrupted_at_second_step();
    let out = go(&mut resumed, &mut FakeProvider::new(&world), &cancel).await;
    assert_eq!(counts(&out), (RunStatus::Interrupted, 3, 1, 1, 0));
    let mut m = resumed.dir.read_manifest().unwrap();
    m.sessions[1].status = SessionStatus::Running;
    m.sessions[1].steps_run = 0;
    resumed.dir.write_manifest(&m).unwrap();
    drop(resumed);

    let reopened = Run::open(dir.path(), &run_id, HOST_CPUS).expect("run reopens");
    let ends: Vec<(&str, usize)> = reopened
        .manifest
        .sessions
        .iter()
        .map(|s| (s.status.name(), s.steps_run))
        .collect();
    assert_eq!(ends, [("interrupted", 1), ("died", 1)]);
}

/// A tmpfs of `size` mounted on a new temporary directory, unmounted when dropped.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount(size: &str) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "nnb-test"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        mounted.then_some(SmallDisk(dir))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.0.path())
            .status();
    }
}

/// Reliability review NL10 (rest of L7): a manifest write that the disk has no room
/// for fails and leaves the directory as it was: the old manifest, no 0-byte
/// `manifest.json.tmp` beside it.
#[test]
fn a_manifest_write_that_fails_leaves_no_temporary_file() {
    if !nnb_testkit::require_root("mounting a small tmpfs") {
        return;
    }
    let Some(disk) = SmallDisk::mount("256k") else {
        nnb_testkit::skip_or_fail("cannot mount a tmpfs here");
        return;
    };
    let run = create(disk.0.path(), "retry 1");
    // Fill the disk: the next write of the manifest finds no room.
    let mut filler = std::fs::File::create(disk.0.path().join("filler")).unwrap();
    let page = vec![0u8; 4096];
    while std::io::Write::write_all(&mut filler, &page).is_ok() {}
    let failed = run.dir.write_manifest(&run.manifest);
    assert!(
        matches!(failed, Err(ResultsError::Io { .. })),
        "the write failed: {failed:?}"
    );
    let tmp = run.dir.path.join("manifest.json.tmp");
    assert!(!tmp.exists(), "{} left behind", tmp.display());
    assert_eq!(run.dir.read_manifest().unwrap(), run.manifest);
}

/// Load steps of a test tenant probing and two load neighbors, each with a server of
/// its own (`servers = "mirrored"`).
const MIRRORED_LOAD_STEPS: &str = r#"name = "fake-mirrored"
repetitions = 1
settle = "0s"
step_timeout = "60s"
on_failure = "skip"

[provider]
kind = "local"
servers = "mirrored"

[[tenants]]
name = "test"
role = "test"

[[tenants]]
name = "nb"
count = 2
role = "neighbor"

[scenario]
kind = "load-steps"
levels = "0:200M:100M"

[scenario.probe]
duration = "100ms"
warmup = "0s"
"#;

/// Issue 27 item 1 (review item 38): with mirrored servers every client's jobs go to
/// its own server and no two clients share one. The fakes launch the tenants test,
/// nb-1, nb-2 (ports 7700-7702), then the servers in the order of their clients'
/// first jobs: endpoint@test (7703), endpoint@nb-1 (7704), endpoint@nb-2 (7705); a
/// fake `serve` publishes its reflector at its agent's port + 10000 and its sink at
/// + 20000. So by hand: test probes 127.0.0.1:17703, nb-1 loads 127.0.0.1:27704,
/// nb-2 loads 127.0.0.1:27705 (one shared endpoint would have taken them all), and
/// each server's `serve` is recorded with the client it served.
#[tokio::test]
async fn mirrored_servers_take_each_clients_jobs_and_nobody_elses() {
    let dir = tempfile::tempdir().unwrap();
    let with_sinks = MIRRORED_LOAD_STEPS.replace(
        "servers = \"mirrored\"",
        "servers = \"mirrored\"\nsink_threads = 3",
    );
    let mut run = create_from(dir.path(), &with_sinks);
    let world = World::shared();
    let mut provider = FakeProvider::new(&world);
    go(&mut run, &mut provider, &never()).await;
    let targets = world.lock().unwrap().targets.clone();
    // Every server's sink gets the file's socket count.
    let mut sinks = world.lock().unwrap().serves.clone();
    sinks.sort();
    assert_eq!(
        sinks,
        ["endpoint@nb-1", "endpoint@nb-2", "endpoint@test"].map(|s| (s.to_string(), Some(3)))
    );
    let mut seen: Vec<(String, String)> = targets.clone();
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen,
        [
            ("nb-1".to_string(), "127.0.0.1:27704".to_string()),
            ("nb-2".to_string(), "127.0.0.1:27705".to_string()),
            ("test".to_string(), "127.0.0.1:17703".to_string()),
        ],
        "{targets:?}"
    );
    let serves: Vec<(String, Option<String>)> = background(&run)
        .into_iter()
        .filter(|r| r.job.name() == "serve")
        .map(|r| (r.tenant, r.serves))
        .collect();
    assert_eq!(
        serves,
        [
            ("endpoint@nb-1".to_string(), Some("nb-1".to_string())),
            ("endpoint@nb-2".to_string(), Some("nb-2".to_string())),
            ("endpoint@test".to_string(), Some("test".to_string())),
        ]
    );
    let manifest = run.dir.read_manifest().unwrap();
    let names: Vec<&str> = manifest.sessions[0]
        .tenants
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "test",
            "nb-1",
            "nb-2",
            "endpoint@test",
            "endpoint@nb-1",
            "endpoint@nb-2"
        ]
    );
}

/// A continuous throughput staircase of a test node and two neighbors, two
/// repetitions per level: levels 0, 1, 2.
fn continuous_staircase() -> String {
    "name = \"fake-throughput\"\nrepetitions = 2\nsettle = \"10ms\"\nstep_timeout = \"60s\"\n\
     on_failure = \"skip\"\n\n[[tenants]]\nname = \"test\"\nrole = \"test\"\nvcpus = 1\n\n\
     [[tenants]]\nname = \"nb\"\ncount = 2\nrole = \"neighbor\"\nvcpus = 1\n\n[scenario]\n\
     kind = \"throughput-staircase\"\nrate = \"100M\"\nsample_interval = \"100ms\"\nwindow = 2\n"
        .to_string()
}

/// Continuous loads carry over: each node's background load, started at the level
/// where it joined, runs unstopped through the later levels and their presence
/// changes (one record each in `background.jsonl`, spanning every step from its
/// join, and one stop each, at the end), while every level measures a window of
/// every present node.
#[tokio::test]
async fn a_continuous_staircase_keeps_each_nodes_load_across_levels() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = create_from(dir.path(), &continuous_staircase());
    let steps: Vec<String> = run.plan.steps.iter().map(|s| s.id.clone()).collect();
    assert_eq!(steps.len(), 6);
    let world = World::shared();
    let mut provider = FakeProvider::new(&world);
    let out = go(&mut run, &mut provider, &never()).await;
    assert_eq!(counts(&out), (RunStatus::Completed, 6, 0, 6, 0));
    let b = background(&run);
    let jobs: Vec<(&str, &str, &[String])> = b
        .iter()
        .map(|r| (r.tenant.as_str(), r.job.name(), r.steps.as_slice()))
        .collect();
    assert_eq!(
        jobs,
        [
            ("endpoint", "serve", &steps[..]),
            ("nb-1", "load", &steps[2..]),
            ("nb-2", "load", &steps[4..]),
            ("test", "load", &steps[..]),
        ]
    );
    {
        let w = world.lock().unwrap();
        // One stop per node's load (at the end), and the endpoint's serve.
        let stopped: Vec<(&str, usize)> = w.stopped.iter().map(|(t, n)| (t.as_str(), *n)).collect();
        assert_eq!(
            stopped,
            [("endpoint", 1), ("nb-1", 1), ("nb-2", 1), ("test", 1)]
        );
        // Every level measured a window of each present node: 1, 2, 3 nodes, twice.
        let windows: Vec<usize> = w.starts.iter().map(|s| s.present.len()).collect();
        assert_eq!(windows, [1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3]);
        assert!(w.starts.iter().all(|s| s.kind == AgentJob::LoadWindow));
    }
    // One record per node and step, each the window's received rate.
    let recorded = read_samples(&run.dir.samples_path()).expect("samples");
    assert_eq!(recorded.len(), 12);
    assert!(recorded
        .iter()
        .all(|s| s.status == SampleStatus::Ok && s.value == Some(5e7)));
}

/// N14: an isolation matrix whose pairs start one tenant first, a stagger before
/// the other. Per order, in every pair step the fakes saw the first tenant's job
/// posted, then the other's at least the stagger later (tokio's paused clock, so
/// the sleep is exact, not timed), and every pair sample records the order and the
/// stagger; the baselines (one job each) start at once and record none.
#[tokio::test(start_paused = true)]
async fn a_staggered_start_posts_the_later_job_after_the_stagger() {
    use nnb_format::{StartOrder, StepGroup, StepStart};
    for (order, first) in [("a-first", "a"), ("b-first", "b")] {
        let text = format!(
            "name = \"m\"\nrepetitions = 1\nsettle = \"10ms\"\n\
             [[tenants]]\nname = \"a\"\nrole = \"test\"\nvcpus = 2\n\
             [[tenants]]\nname = \"b\"\nrole = \"neighbor\"\nvcpus = 2\n\
             [scenario]\nkind = \"isolation-matrix\"\nresource = \"cpu\"\nduration = \"2s\"\n\
             start_order = \"{order}\"\nstagger = \"500ms\"\n"
        );
        let dir = tempfile::tempdir().unwrap();
        let mut run = create_from(dir.path(), &text);
        let world = World::shared();
        world.lock().unwrap().job_time = Duration::from_secs(2);
        let mut provider = FakeProvider::new(&world);
        let out = go(&mut run, &mut provider, &never()).await;
        // The capacity, 4 + 4 baselines, 12 pairs.
        assert_eq!(
            counts(&out),
            (RunStatus::Completed, 21, 0, 21, 0),
            "{order}"
        );
        let stagger = Duration::from_millis(500);
        {
            let w = world.lock().unwrap();
            // 9 single-job steps, then the 12 pairs' two starts each.
            assert_eq!(w.starts.len(), 9 + 2 * 12, "{order}");
            for pair in w.starts[9..].chunks(2) {
                let tenants = [pair[0].tenant.as_str(), pair[1].tenant.as_str()];
                let second = if first == "a" { "b" } else { "a" };
                assert_eq!(tenants, [first, second], "{order}");
                assert!(pair[1].at - pair[0].at >= stagger, "{order}");
            }
        }
        let want = StepStart {
            order: StartOrder::from_name(order).unwrap(),
            stagger_ms: 500,
        };
        let recorded = read_samples(&run.dir.samples_path()).expect("samples");
        assert_eq!(recorded.len(), 9 + 2 * 12);
        for s in &recorded {
            let expected = (s.group == StepGroup::Pair).then_some(want);
            assert_eq!(s.start, expected, "{}", s.step);
        }
        // As samples.jsonl writes it.
        let text = std::fs::read_to_string(run.dir.samples_path()).unwrap();
        let line = format!("\"start\":{{\"order\":\"{order}\",\"stagger_ms\":500}}");
        assert_eq!(text.matches(&line).count(), 24, "{order}");
    }
}
