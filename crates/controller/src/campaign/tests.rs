//! Unit tests of campaigns, on the fake provider and agents ([`crate::testing`]):
//! each lane's rounds get a [`World`] of their own, and the fake providers log when
//! their fleets were launched and shut down (tokio time, paused).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::*;
use crate::testing::{FakeProvider, FleetEvent, World};
use nnb_format::campaign::{RoundRecord, ROUNDS};

const HOST_CPUS: usize = 8;

/// The fake staircase (3 steps a round) as a campaign of `table`.
fn campaign_text(table: &str) -> String {
    let staircase = nnb_testkit::Staircase {
        name: "fake-campaign",
        repetitions: 1,
        settle: "10ms",
        step_timeout: Some("60s"),
        on_failure: Some("skip"),
        neighbor_state: "busy",
        workload: Some("fpadd"),
        ops: 1000,
    }
    .toml();
    format!("{staircase}\n[campaign]\n{table}\n")
}

fn create(results: &Path, table: &str) -> CampaignRun {
    let text = campaign_text(table);
    let exp = nnb_experiment::parse("fake.toml", &text, Some(HOST_CPUS)).expect("valid campaign");
    CampaignRun::create(results, "fake.toml", &text, exp, HOST_CPUS).expect("campaign created")
}

/// The fakes of a campaign: a world per lane (the lane read from the round's run
/// id), every fleet's launch and shutdown logged, the providers built so far.
#[derive(Clone, Default)]
struct Fakes {
    worlds: Arc<Mutex<BTreeMap<String, Arc<Mutex<World>>>>>,
    events: Arc<Mutex<Vec<FleetEvent>>>,
    providers: Arc<Mutex<usize>>,
    /// Whether the providers say their fleets may run at once.
    concurrent: bool,
    /// How long a fake measured job runs.
    job_time: Duration,
}

impl Fakes {
    fn provider(&self, cx: &ProviderContext) -> Box<dyn Provider> {
        let lane = cx.run_id.rsplit('-').next().unwrap_or("?");
        let lane = lane.split('.').next().unwrap_or(lane).to_string();
        let world = Arc::clone(
            self.worlds
                .lock()
                .unwrap()
                .entry(lane.clone())
                .or_insert_with(|| {
                    let w = World::shared();
                    w.lock().unwrap().job_time = self.job_time;
                    w
                }),
        );
        // A new provider's agents are new: none of them has died.
        world.lock().unwrap().dead.clear();
        *self.providers.lock().unwrap() += 1;
        let mut p = FakeProvider::new(&world);
        p.concurrent = self.concurrent;
        p.events = Some((lane, Arc::clone(&self.events)));
        Box::new(p)
    }

    /// Each fleet's `(lane, launched, shut down)`, in launch order.
    fn fleets(&self) -> Vec<(String, Instant, Instant)> {
        let events = self.events.lock().unwrap();
        let mut open: BTreeMap<String, Instant> = BTreeMap::new();
        let mut fleets = Vec::new();
        for (lane, what, at) in events.iter() {
            match *what {
                "launch" => assert!(
                    open.insert(lane.clone(), *at).is_none(),
                    "two fleets of lane {lane} at once"
                ),
                _ => fleets.push((
                    lane.clone(),
                    open.remove(lane).expect("a launch before"),
                    *at,
                )),
            }
        }
        assert!(open.is_empty(), "fleets left up: {open:?}");
        fleets.sort_by_key(|f| f.1);
        fleets
    }
}

async fn go(c: &mut CampaignRun, fakes: &Fakes, cancel: &Cancel) -> CampaignOutcome {
    let f = fakes.clone();
    let providers = move |_: &Experiment, cx: ProviderContext| Ok(f.provider(&cx));
    execute_campaign(c, &providers, &RunOptions::default(), cancel)
        .await
        .expect("the campaign ends without a controller error")
}

fn never() -> Cancel {
    let (canceller, cancel) = Cancel::manual();
    drop(canceller);
    cancel
}

/// The lines of `rounds.jsonl`, as written.
fn journal(c: &CampaignRun) -> Vec<RoundRecord> {
    std::fs::read_to_string(c.dir.path.join(ROUNDS))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a round record"))
        .collect()
}

fn indexes(records: &[RoundRecord]) -> Vec<u32> {
    let mut i: Vec<u32> = records.iter().map(|r| r.round).collect();
    i.sort_unstable();
    i
}

/// On a provider whose fleets may run at once, the two lanes' rounds overlap in
/// time, but a lane's own rounds follow one another (a fleet each, released before
/// the next is launched); each round is recorded once, in its own run directory
/// named after the campaign, the round and the lane.
#[tokio::test(start_paused = true)]
async fn spatial_lanes_overlap_but_a_lanes_rounds_never_do() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = create(
        dir.path(),
        "kind = \"spatial\"\nzones = [\"a\", \"b\"]\nrounds = 3",
    );
    let fakes = Fakes {
        concurrent: true,
        job_time: Duration::from_secs(10),
        ..Fakes::default()
    };
    let out = go(&mut c, &fakes, &never()).await;
    assert_eq!(
        (out.status, out.recorded, out.total_rounds),
        (RunStatus::Completed, 6, 6)
    );
    let fleets = fakes.fleets();
    assert_eq!(fleets.len(), 6, "a fleet per round");
    for lane in ["a", "b"] {
        let mine: Vec<_> = fleets.iter().filter(|f| f.0 == lane).collect();
        assert_eq!(mine.len(), 3);
        for w in mine.windows(2) {
            assert!(
                w[0].2 <= w[1].1,
                "lane {lane}: a round launched before the last was released"
            );
        }
    }
    let (a, b): (Vec<_>, Vec<_>) = fleets.iter().partition(|f| f.0 == "a");
    let overlap = a.iter().any(|x| b.iter().any(|y| x.1 < y.2 && y.1 < x.2));
    assert!(overlap, "the lanes ran one after another: {fleets:?}");
    let records = journal(&c);
    assert_eq!(indexes(&records), [0, 1, 2, 3, 4, 5]);
    for r in &records {
        assert_eq!(r.lane, ["a", "b"][r.round as usize % 2]);
        assert_eq!(r.lane_round, r.round / 2);
        assert_eq!(r.run_id, format!("{}-r{:05}-{}", c.id(), r.round, r.lane));
        assert_eq!(r.status, RoundStatus::Completed);
        assert_eq!(
            r.generation, r.lane_round,
            "a spatial round's fleet is its own"
        );
        assert!(c
            .dir
            .path
            .join(&r.run_id)
            .join(nnb_format::MANIFEST)
            .is_file());
        let test = r
            .instances
            .iter()
            .find(|i| i.tenant == "test")
            .expect("the test tenant placed");
        assert_eq!(test.cpu_model.as_deref(), Some("Fake CPU"));
    }
    let m = c.dir.read_manifest().unwrap();
    assert_eq!(m.sessions.len(), 1);
    assert_eq!(
        (m.sessions[0].status, m.sessions[0].rounds_run),
        (SessionStatus::Completed, 6)
    );
}

/// A local provider's fleets (the default) run one at a time: the lanes' rounds
/// take turns, in round index order.
#[tokio::test(start_paused = true)]
async fn local_lanes_take_turns_in_round_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = create(
        dir.path(),
        "kind = \"spatial\"\nzones = [\"a\", \"b\"]\nrounds = 2",
    );
    let fakes = Fakes {
        job_time: Duration::from_secs(10),
        ..Fakes::default()
    };
    go(&mut c, &fakes, &never()).await;
    let fleets = fakes.fleets();
    let lanes: Vec<&str> = fleets.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(lanes, ["a", "b", "a", "b"]);
    for w in fleets.windows(2) {
        assert!(w[0].2 <= w[1].1, "two fleets at once: {fleets:?}");
    }
}

/// A temporal lane launches one fleet and measures its 3 rounds on it, a round
/// every 10 minutes (start to start), then shuts it down.
#[tokio::test(start_paused = true)]
async fn a_temporal_lane_keeps_its_fleet_for_every_round() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = create(
        dir.path(),
        "kind = \"temporal\"\nrounds = 3\ninterval = \"10m\"",
    );
    let fakes = Fakes {
        job_time: Duration::from_secs(5),
        ..Fakes::default()
    };
    let begun = Instant::now();
    let out = go(&mut c, &fakes, &never()).await;
    assert_eq!((out.status, out.recorded), (RunStatus::Completed, 3));
    assert_eq!(
        *fakes.providers.lock().unwrap(),
        2,
        "the probe and the lane's one provider"
    );
    let fleets = fakes.fleets();
    assert_eq!(fleets.len(), 1, "one launch for the lane: {fleets:?}");
    // Rounds start at 0, 10 and 20 minutes; the last one's 3 steps take 15 s.
    let held = fleets[0].2 - begun;
    assert!(held >= Duration::from_secs(20 * 60 + 15), "{held:?}");
    assert!(held < Duration::from_secs(21 * 60), "{held:?}");
    let records = journal(&c);
    assert_eq!(indexes(&records), [0, 1, 2]);
    for r in &records {
        assert_eq!((r.lane.as_str(), r.generation), ("local", 0));
        assert_eq!(r.status, RoundStatus::Completed);
        assert_eq!(r.error, None, "no round was late");
    }
}

/// A temporal lane whose fleet stops answering (a neighbor's agent dies during
/// round 0) launches a new one, generation 1, for rounds 1 and 2, and round 1's
/// record says why.
#[tokio::test(start_paused = true)]
async fn a_temporal_lane_replaces_a_fleet_that_died() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = create(
        dir.path(),
        "kind = \"temporal\"\nrounds = 3\ninterval = \"10m\"",
    );
    let fakes = Fakes::default();
    let world = World::shared();
    // Round 0's last step (the 3rd measured start): nb-2 dies.
    world.lock().unwrap().die_at = Some((3, "nb-2".into()));
    fakes.worlds.lock().unwrap().insert("local".into(), world);
    let out = go(&mut c, &fakes, &never()).await;
    assert_eq!((out.status, out.recorded), (RunStatus::Completed, 3));
    assert_eq!(fakes.fleets().len(), 2, "the dead fleet replaced once");
    let mut records = journal(&c);
    records.sort_by_key(|r| r.round);
    let generations: Vec<u32> = records.iter().map(|r| r.generation).collect();
    assert_eq!(generations, [0, 1, 1]);
    let why = records[1].error.as_deref().unwrap_or_default();
    assert!(
        why.contains("stopped answering (nb-2") && why.contains("relaunched as generation 1"),
        "{why}"
    );
    assert_eq!(
        (records[1].status, records[2].status),
        (RoundStatus::Completed, RoundStatus::Completed)
    );
    assert_eq!(records[2].error, None);
}

/// A controller that died in round 1 of 3 (its session still `running`, a torn
/// line at the end of rounds.jsonl, round 1's run directory unfinished): the
/// resume marks the session died, cuts the line, measures round 1 anew in a new
/// run directory and round 2, so that each round is recorded exactly once.
#[tokio::test(start_paused = true)]
async fn a_resume_records_each_round_once_and_remeasures_in_a_new_dir() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = create(dir.path(), "kind = \"spatial\"\nrounds = 3");
    let id = c.id().to_string();
    let fakes = Fakes::default();
    // The 5th measured job is round 1's second step: cancelled there.
    let (canceller, cancel) = Cancel::manual();
    let world = World::shared();
    world.lock().unwrap().cancel_at = Some((5, Arc::new(canceller)));
    fakes.worlds.lock().unwrap().insert("local".into(), world);
    let out = go(&mut c, &fakes, &cancel).await;
    assert_eq!((out.status, out.recorded), (RunStatus::Interrupted, 1));
    let unfinished = format!("{id}-r00001-local");
    assert!(c.dir.path.join(&unfinished).is_dir());
    // Make it a death: the session left running, a record torn mid-write.
    let mut m = c.dir.read_manifest().unwrap();
    m.sessions[0].status = SessionStatus::Running;
    m.sessions[0].rounds_run = 0;
    c.dir.write_manifest(&m).unwrap();
    drop(c);
    let rounds = dir.path().join(&id).join(ROUNDS);
    let mut text = std::fs::read_to_string(&rounds).unwrap();
    text.push_str("{\"format_version\":10,\"round\":1,\"la");
    std::fs::write(&rounds, text).unwrap();
    let unfinished_manifest = std::fs::read(
        dir.path()
            .join(&id)
            .join(&unfinished)
            .join(nnb_format::MANIFEST),
    )
    .unwrap();

    let mut c = CampaignRun::open(dir.path(), &id, HOST_CPUS).unwrap();
    assert_eq!(c.manifest.sessions[0].status, SessionStatus::Died);
    let fakes = Fakes::default();
    let out = go(&mut c, &fakes, &never()).await;
    assert_eq!((out.status, out.recorded), (RunStatus::Completed, 3));
    assert_eq!(out.lanes[0].before, 1);
    assert_eq!(out.lanes[0].completed, 2);
    let records = journal(&c);
    assert_eq!(indexes(&records), [0, 1, 2], "each round once: {records:?}");
    let r1 = records.iter().find(|r| r.round == 1).unwrap();
    assert_eq!(
        r1.run_id,
        format!("{unfinished}.2"),
        "measured again in a new directory"
    );
    assert_eq!(
        std::fs::read(
            dir.path()
                .join(&id)
                .join(&unfinished)
                .join(nnb_format::MANIFEST)
        )
        .unwrap(),
        unfinished_manifest,
        "the unfinished run directory is left as it was"
    );
    assert_eq!(fakes.fleets().len(), 2, "only rounds 1 and 2 launched");
    let sessions: Vec<_> = c
        .manifest
        .sessions
        .iter()
        .map(|s| (s.status, s.rounds_run))
        .collect();
    assert_eq!(
        sessions,
        [(SessionStatus::Died, 1), (SessionStatus::Completed, 2)],
        "the died session's round is counted from the journal"
    );
}

/// A round recorded with `minutes` of held time.
fn held_round(round: u32, minutes: u32) -> RoundRecord {
    RoundRecord {
        format_version: nnb_format::FORMAT_VERSION,
        round,
        lane: "local".into(),
        lane_round: round,
        run_id: format!("earlier-{round}"),
        status: RoundStatus::Completed,
        started_at: "2026-11-28T01:00:00.000Z".into(),
        finished_at: format!("2026-11-28T01:{minutes:02}:00.000Z"),
        generation: round,
        instances: Vec::new(),
        error: None,
    }
}

/// The cap counts every round: rounds 0 and 1 held their fleets 30 and 45 minutes
/// (1.25 h at $2/h = $2.50) and the next round is taken to hold its fleet as long
/// as the longest so far (45 min, more than its plan and launch: $1.50): $4.00 in
/// all. A cap of $3.99 stops before round 2; a cap of $4.00 lets it run.
#[tokio::test(start_paused = true)]
async fn the_cost_cap_stops_before_the_round_that_would_pass_it() {
    for (max_usd, runs) in [(3.99, false), (4.0, true)] {
        let dir = tempfile::tempdir().unwrap();
        let mut c = create(dir.path(), "kind = \"spatial\"\nrounds = 3");
        c.rounds.append(held_round(0, 30)).unwrap();
        c.rounds.append(held_round(1, 45)).unwrap();
        c.budget = Some(CampaignBudget {
            usd_per_hour: 2.0,
            max_usd,
        });
        let fakes = Fakes::default();
        let out = go(&mut c, &fakes, &never()).await;
        if runs {
            assert_eq!((out.status, out.recorded), (RunStatus::Completed, 3));
        } else {
            assert_eq!((out.status, out.recorded), (RunStatus::CostCap, 2));
            assert!(out.notes[0].contains("would make $4.00"), "{:?}", out.notes);
            assert!(fakes.events.lock().unwrap().is_empty(), "nothing launched");
            let m = c.dir.read_manifest().unwrap();
            assert_eq!(m.sessions[0].status, SessionStatus::Aborted);
        }
    }
}

/// rounds.jsonl: a torn last line is cut on reopening; a damaged line with a
/// record after it, or a round recorded twice, is refused.
#[test]
fn the_rounds_journal_cuts_only_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(ROUNDS);
    let (mut j, cut) = RoundsJournal::open(&path).unwrap();
    assert_eq!(cut, 0);
    j.append(held_round(0, 1)).unwrap();
    assert!(
        j.append(held_round(0, 2)).is_err(),
        "a round is recorded once"
    );
    let whole = std::fs::read_to_string(&path).unwrap();
    let torn = "{\"round\": 1, \"la";
    std::fs::write(&path, format!("{whole}{torn}")).unwrap();
    let (j, cut) = RoundsJournal::open(&path).unwrap();
    assert_eq!((cut, j.recorded().len()), (torn.len() as u64, 1));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), whole);
    std::fs::write(&path, format!("garbage\n{whole}")).unwrap();
    let e = RoundsJournal::open(&path).unwrap_err().to_string();
    assert!(e.contains("line 1"), "{e}");
    std::fs::write(&path, format!("{whole}{whole}")).unwrap();
    let e = RoundsJournal::open(&path).unwrap_err().to_string();
    assert!(e.contains("round 0 is recorded twice"), "{e}");
}

/// The estimate of a campaign, worked by hand: spatial, 2 zones x 3 rounds of
/// 60 s plus the 2 s local launch, at $1.50/h for 2 instances: 6 x 62 s = 372 s
/// held; in parallel the wall time is a lane's 186 s. Temporal, 2 zones x 4
/// rounds every 10 min: a lane holds its fleet 2 s + 3 x 600 s + 60 s = 1862 s.
#[test]
fn the_campaign_estimate_counts_every_round() {
    let text = campaign_text("kind = \"spatial\"\nzones = [\"a\", \"b\"]\nrounds = 3");
    let exp = nnb_experiment::parse("fake.toml", &text, Some(HOST_CPUS)).unwrap();
    let campaign = exp.campaign.clone().unwrap();
    let price = FleetPrice {
        hourly_usd: 1.5,
        instances: 2,
    };
    let e = CampaignEstimate::new(&exp, &campaign, Duration::from_secs(60), true, Some(price));
    assert_eq!(
        (e.total_rounds, e.round_ms, e.launch_ms),
        (6, 60_000, 2_000)
    );
    assert_eq!(e.wall_ms, 186_000);
    assert!((e.fleet_hours - 372.0 / 3600.0).abs() < 1e-12);
    assert!((e.instance_hours.unwrap() - 744.0 / 3600.0).abs() < 1e-12);
    assert!((e.usd.unwrap() - 372.0 / 3600.0 * 1.5).abs() < 1e-12);
    let serial = CampaignEstimate::new(&exp, &campaign, Duration::from_secs(60), false, None);
    assert_eq!((serial.wall_ms, serial.usd), (372_000, None));

    let text = campaign_text(
        "kind = \"temporal\"\nzones = [\"a\", \"b\"]\nrounds = 4\ninterval = \"10m\"",
    );
    let exp = nnb_experiment::parse("fake.toml", &text, Some(HOST_CPUS)).unwrap();
    let campaign = exp.campaign.clone().unwrap();
    let e = CampaignEstimate::new(&exp, &campaign, Duration::from_secs(60), false, Some(price));
    assert_eq!(e.wall_ms, 2 * 1_862_000);
    assert!((e.usd.unwrap() - 2.0 * 1862.0 / 3600.0 * 1.5).abs() < 1e-12);
}

/// A round's instances: on a cloud, each instance's record (zone, subnet, address,
/// host) with the CPU model its agent saw; a tenant without an instance (none
/// here but the local kind) from its own record.
#[test]
fn a_rounds_instances_come_from_the_cloud_record_and_the_agents() {
    let session: Session = serde_json::from_value(serde_json::json!({
        "started_at": "2026-11-28T01:00:00.000Z", "finished_at": null, "status": "running",
        "command": [], "warnings": [], "agent_pids": [], "steps_run": 0,
        "tenants": [
            {"name": "test", "role": "test", "addr": "10.0.1.5:7070", "cpus": [],
             "netns": null, "ip": null, "health": null,
             "environment": {"cpu_model": "Intel Xeon Platinum 8259CL"}},
            {"name": "endpoint", "role": "endpoint", "addr": "10.0.2.7:7070", "cpus": [],
             "netns": null, "ip": "10.0.2.7", "health": null, "environment": null}
        ],
        "cloud": {"provider": "aws", "region": "us-east-1", "availability_zone": "us-east-1a",
            "host": null, "security_groups": [],
            "instances": [{"tenant": "test", "role": "test", "instance_id": "i-1",
                "instance_type": "m5.large", "private_ip": "10.0.1.5", "public_ip": null,
                "host_id": null, "availability_zone": "us-east-1b",
                "subnet_id": "subnet-b"}]}
    }))
    .expect("a session");
    let placed = placed_instances(Some(&session));
    assert_eq!(
        placed,
        [
            PlacedInstance {
                tenant: "test".into(),
                role: Some(nnb_format::Role::Test),
                instance_id: Some("i-1".into()),
                instance_type: Some("m5.large".into()),
                zone: Some("us-east-1b".into()),
                subnet_id: Some("subnet-b".into()),
                private_ip: Some("10.0.1.5".into()),
                host_id: None,
                cpu_model: Some("Intel Xeon Platinum 8259CL".into()),
            },
            PlacedInstance {
                tenant: "endpoint".into(),
                role: Some(nnb_format::Role::Endpoint),
                private_ip: Some("10.0.2.7".into()),
                ..PlacedInstance::default()
            },
        ]
    );
}

/// A round whose fleet cannot be had (here its provider refuses, as a launch the
/// cloud refuses does) is recorded failed with the error, and the campaign goes on;
/// under `on_failure = "abort"` it stops there.
#[tokio::test(start_paused = true)]
async fn a_failed_round_is_recorded_and_the_campaign_goes_on_unless_abort() {
    for (on_failure, status, recorded) in [
        ("skip", RunStatus::Completed, 3),
        ("abort", RunStatus::Aborted, 2),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let text = campaign_text("kind = \"spatial\"\nrounds = 3").replace(
            "on_failure = \"skip\"",
            &format!("on_failure = \"{on_failure}\""),
        );
        let exp = nnb_experiment::parse("fake.toml", &text, Some(HOST_CPUS)).unwrap();
        let mut c = CampaignRun::create(dir.path(), "fake.toml", &text, exp, HOST_CPUS).unwrap();
        let fakes = Fakes::default();
        let f = fakes.clone();
        let providers = move |_: &Experiment, cx: ProviderContext| {
            if cx.run_id.contains("-r00001-") {
                return Err(ProviderError::Invalid("no capacity in the zone".into()));
            }
            Ok(f.provider(&cx))
        };
        let out = execute_campaign(&mut c, &providers, &RunOptions::default(), &never())
            .await
            .unwrap();
        assert_eq!(
            (out.status, out.recorded),
            (status, recorded),
            "{on_failure}"
        );
        assert_eq!(out.failed_rounds(), 1);
        let mut records = journal(&c);
        records.sort_by_key(|r| r.round);
        assert_eq!(records[1].status, RoundStatus::Failed);
        assert!(
            records[1]
                .error
                .as_deref()
                .is_some_and(|e| e.contains("no capacity in the zone")),
            "{:?}",
            records[1].error
        );
        assert!(records[1].instances.is_empty());
    }
}
