//! Campaigns on aws, end to end against a real moto server (issue 26's first "Done
//! when" point): the real campaign engine, aws provider and controller run rounds of
//! default-tenancy pairs (the test tenant and the endpoint, each an m5.large off any
//! dedicated host) whose instances moto holds, each instance's agent served by a real
//! `nnb agent` on 127.0.0.1 (the provider's test seam, as the staircase test does).
//!
//! When each round's measured job starts (the test tenant's CPUTest), the test asks
//! DescribeInstances which instances run, and reads each one's zone from moto with
//! boto3: in the round's zone exactly the round's instances run. A spatial round's
//! instances are terminated after it, a temporal lane keeps its pair, and a
//! controller killed with SIGKILL between rounds is resumed to a campaign with every
//! round recorded once and nothing left in moto. Skipped (with the reason) when moto
//! is missing, failing instead under `CI`.

#![cfg(feature = "aws")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nnb_aws::ec2::Ec2;
use nnb_controller::campaign::{execute_campaign, CampaignOutcome, CampaignRun};
use nnb_controller::client::BoxFuture;
use nnb_controller::provider::aws::{AwsProvider, InstanceAgents};
use nnb_controller::provider::{Provider, ProviderContext, ProviderError};
use nnb_controller::{Cancel, RunOptions, RunStatus};
use nnb_experiment::Experiment;
use nnb_format::campaign::{RoundRecord, RoundStatus, ROUNDS};
use nnb_format::SessionStatus;

use crate::support::agents::still_alive_after;
use crate::support::aws_agents::{
    assert_all_gone, ec2_of, LocalAgents, OnTestJob, Watched, AGENT_PIDS,
};
use crate::support::cli::signal;
use crate::support::moto::{Moto, ZONE};

/// The second zone of the spatial campaign.
const ZONE_B: &str = "us-east-1b";
/// The variable that makes [`campaign_controller_child`] the controller the kill
/// test kills: the directory it works in.
const CHILD_DIR: &str = "NNB_TEST_CAMPAIGN_CHILD_DIR";
/// The moto endpoint of that controller.
const CHILD_MOTO: &str = "NNB_TEST_CAMPAIGN_CHILD_MOTO";
/// How long the child's rounds wait when their measured job starts.
const CHILD_PAUSE: Duration = Duration::from_secs(3);
/// The name the kill test gives the campaign's file.
const FILE: &str = "aws-campaign.toml";

/// A campaign of `[campaign]` table `campaign` whose rounds are default-tenancy
/// m5.large pairs measured by a short CPUTest on each side (no traffic: moto's
/// addresses are not this machine's), a failed step ending the campaign, each zone's
/// round launched into moto's default subnet of the zone; `provider_extra` adds
/// `[provider]` keys.
fn campaign_text(moto: &Moto, campaign: &str, provider_extra: &str) -> String {
    let subnets = [ZONE, ZONE_B]
        .map(|z| format!("\"{z}\" = \"{}\"", moto.default_subnet_of(z)))
        .join(", ");
    format!(
        r#"name = "aws-campaign"
repetitions = 1
settle = "0s"
step_timeout = "30s"
on_failure = "abort"

[provider]
kind = "aws"
availability_zone = "{ZONE}"
tenancy = "default"
instance_type = "m5.large"
image_id = "ami-12c6146b"
allowed_cidrs = ["10.0.0.0/8"]
preinstalled = "/usr/local/bin/nnb"
health_timeout = "20s"
expires_after = "1h"
subnets = {{ {subnets} }}
{provider_extra}

[[tenants]]
name = "test"
role = "test"

[scenario]
kind = "pair-suite"
measurements = ["cputest"]

[scenario.cputest]
duration = "100ms"

[campaign]
{campaign}
"#
    )
}

/// What the cloud looked like when a round's measured job started.
#[derive(Debug, Clone)]
struct Look {
    /// The run id of the fleet's provider (a spatial round's run id; a temporal
    /// lane's first round's).
    run_id: String,
    /// The fleet's zone.
    zone: String,
    /// Instances DescribeInstances calls running, of all the campaign started.
    running: BTreeSet<String>,
}

/// One fleet's watch: looks at the cloud when the test tenant's job starts.
#[derive(Debug)]
struct FleetWatch {
    run_id: String,
    zone: String,
    ec2: Ec2,
    agents: Arc<LocalAgents>,
    looks: Arc<Mutex<Vec<Look>>>,
    /// Waits this long after looking.
    pause: Duration,
}

impl OnTestJob for FleetWatch {
    fn starting(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let described = self
                .ec2
                .describe(&self.agents.instance_ids())
                .await
                .unwrap_or_else(|e| panic!("DescribeInstances: {e}"));
            let running = described
                .into_iter()
                .filter(|l| l.state == "running")
                .map(|l| l.instance_id)
                .collect();
            self.looks
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Look {
                    run_id: self.run_id.clone(),
                    zone: self.zone.clone(),
                    running,
                });
            tokio::time::sleep(self.pause).await;
        })
    }
}

/// The campaign's providers: the real aws provider on moto, agents from `agents`,
/// every fleet's test tenant watched into `looks`.
struct Providers {
    ec2: Ec2,
    agents: Arc<LocalAgents>,
    looks: Arc<Mutex<Vec<Look>>>,
    /// How long each round waits after its look.
    pause: Duration,
}

impl Providers {
    fn new(ec2: Ec2, agents: Arc<LocalAgents>) -> Providers {
        Providers {
            ec2,
            agents,
            looks: Arc::default(),
            pause: Duration::ZERO,
        }
    }

    /// The provider of one fleet, for the engine's factory.
    fn make(
        &self,
        exp: &Experiment,
        cx: ProviderContext,
    ) -> Result<Box<dyn Provider>, ProviderError> {
        let nnb_experiment::Provider::Aws(spec) = &exp.provider else {
            panic!("an aws experiment")
        };
        let seam: Arc<dyn InstanceAgents> = self.agents.clone();
        let hook = Arc::new(FleetWatch {
            run_id: cx.run_id.clone(),
            zone: spec.availability_zone.clone(),
            ec2: self.ec2.clone(),
            agents: Arc::clone(&self.agents),
            looks: Arc::clone(&self.looks),
            pause: self.pause,
        });
        Ok(Box::new(Watched {
            inner: AwsProvider::with_agents(spec, &cx, self.ec2.clone(), seam),
            hook,
        }))
    }

    fn looks(&self) -> Vec<Look> {
        self.looks.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Runs (or resumes) campaign `c` to its end with `providers`.
async fn execute(c: &mut CampaignRun, providers: &Providers) -> CampaignOutcome {
    let (_canceller, cancel) = Cancel::manual();
    let factory = |exp: &Experiment, cx: ProviderContext| providers.make(exp, cx);
    execute_campaign(c, &factory, &RunOptions::default(), &cancel)
        .await
        .unwrap_or_else(|e| panic!("the campaign: {e}"))
}

/// A new campaign of `text` under `results`.
fn create(results: &Path, text: &str) -> CampaignRun {
    let exp: Experiment = nnb_experiment::parse(FILE, text, Some(2))
        .unwrap_or_else(|e| panic!("the experiment: {e}"));
    CampaignRun::create(results, FILE, text, exp, 2)
        .unwrap_or_else(|e| panic!("creating the campaign: {e}"))
}

/// `rounds.jsonl` of campaign directory `dir`, line by line.
fn records(dir: &Path) -> Vec<RoundRecord> {
    let text = std::fs::read_to_string(dir.join(ROUNDS)).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{ROUNDS} line {l}: {e}")))
        .collect()
}

/// Each record's instance ids (test and endpoint).
fn ids(r: &RoundRecord) -> BTreeSet<String> {
    r.instances
        .iter()
        .filter_map(|i| i.instance_id.clone())
        .collect()
}

/// Every round index of `0..total` is recorded exactly once, completed.
fn assert_each_round_once(records: &[RoundRecord], total: u32) {
    let mut seen: BTreeMap<u32, usize> = BTreeMap::new();
    for r in records {
        *seen.entry(r.round).or_default() += 1;
        assert_eq!(r.status, RoundStatus::Completed, "round {}: {r:?}", r.round);
    }
    let want: BTreeMap<u32, usize> = (0..total).map(|i| (i, 1)).collect();
    assert_eq!(seen, want, "rounds recorded (index -> times)");
}

/// A spatial campaign of 3 rounds in each of 2 zones: each round launches a fresh
/// default-tenancy pair in its zone; when the round's measured job starts, exactly
/// that pair runs in its zone (DescribeInstances, zones read with boto3); it is
/// terminated after the round; a zone's rounds never overlap; every round is
/// recorded once with its two instances in its zone; nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_spatial_campaign_runs_each_rounds_pair_in_its_zone_and_releases_it() {
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let text = campaign_text(
        &moto,
        &format!("kind = \"spatial\"\nzones = [\"{ZONE}\", \"{ZONE_B}\"]\nrounds = 3"),
        "",
    );
    let mut c = create(&dir.path().join("results"), &text);
    let agents = Arc::new(LocalAgents::new());
    let providers = Providers::new(ec2_of(&moto.endpoint).await, Arc::clone(&agents));
    let out = execute(&mut c, &providers).await;
    assert_eq!(
        out.status,
        RunStatus::Completed,
        "{out:?}\n{:#?}",
        records(&c.dir.path)
    );
    assert_eq!((out.total_rounds, out.recorded), (6, 6), "{out:?}");

    let records = records(&c.dir.path);
    assert_each_round_once(&records, 6);
    let zones = moto.instance_zones();
    let mut all = BTreeSet::new();
    for r in &records {
        // Round index = lane_round x lanes + lane index.
        let lane = [ZONE, ZONE_B][r.round as usize % 2];
        assert_eq!(
            (r.lane.as_str(), r.lane_round),
            (lane, r.round / 2),
            "{r:?}"
        );
        let tenants: BTreeSet<&str> = r.instances.iter().map(|i| i.tenant.as_str()).collect();
        assert_eq!(tenants, BTreeSet::from(["endpoint", "test"]), "{r:?}");
        for id in ids(r) {
            assert_eq!(
                zones.get(&id).map(String::as_str),
                Some(lane),
                "{id} of {r:?}"
            );
            assert!(all.insert(id.clone()), "{id} measured two rounds");
        }
        assert_eq!(ids(r).len(), 2, "{r:?}");
    }
    assert_eq!(agents.instance_ids().len(), 12, "a fresh pair per round");

    let looks = providers.looks();
    assert_eq!(looks.len(), 6, "one look per round: {looks:?}");
    for look in &looks {
        let r = records
            .iter()
            .find(|r| r.run_id == look.run_id)
            .unwrap_or_else(|| panic!("no record of {look:?}"));
        let in_zone: BTreeSet<String> = look
            .running
            .iter()
            .filter(|id| zones.get(*id) == Some(&look.zone))
            .cloned()
            .collect();
        assert_eq!(
            in_zone,
            ids(r),
            "round {} in {}: running",
            r.round,
            look.zone
        );
    }
    for lane in [ZONE, ZONE_B] {
        let at = |t: &str| {
            nnb_format::parse_timestamp(t).unwrap_or_else(|| panic!("a record's time {t:?}"))
        };
        let mut times: Vec<_> = records
            .iter()
            .filter(|r| r.lane == lane)
            .map(|r| (r.lane_round, at(&r.started_at), at(&r.finished_at)))
            .collect();
        times.sort();
        for w in times.windows(2) {
            assert!(w[0].2 <= w[1].1, "{lane}: rounds overlap: {w:?}");
        }
    }
    assert_all_gone(&moto, &agents);
}

/// A temporal campaign of 3 rounds keeps its pair: one launch, the same two
/// instance ids in every round's record and running at every round's look, and
/// nothing left after the last round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_temporal_campaign_keeps_its_pair_across_rounds() {
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let text = campaign_text(
        &moto,
        "kind = \"temporal\"\nrounds = 3\ninterval = \"4s\"",
        "",
    );
    let mut c = create(&dir.path().join("results"), &text);
    let agents = Arc::new(LocalAgents::new());
    let providers = Providers::new(ec2_of(&moto.endpoint).await, Arc::clone(&agents));
    let out = execute(&mut c, &providers).await;
    assert_eq!(
        out.status,
        RunStatus::Completed,
        "{out:?}\n{:#?}",
        records(&c.dir.path)
    );

    let records = records(&c.dir.path);
    assert_each_round_once(&records, 3);
    assert_eq!(agents.instance_ids().len(), 2, "launched once");
    let pair: BTreeSet<String> = agents.instance_ids().into_iter().collect();
    for r in &records {
        assert_eq!(ids(r), pair, "round {}", r.round);
        assert_eq!(r.generation, 0, "round {}", r.round);
    }
    let looks = providers.looks();
    assert_eq!(looks.len(), 3, "{looks:?}");
    for look in &looks {
        assert_eq!(look.running, pair, "{look:?}");
    }
    assert_all_gone(&moto, &agents);
}

/// The controller of the kill test: a no-op unless [`CHILD_DIR`] is set, when it
/// runs a new campaign of `$CHILD_DIR/aws-campaign.toml` under `$CHILD_DIR/results` on the
/// moto at [`CHILD_MOTO`] until it is killed (its agents' pids logged in
/// `$CHILD_DIR`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaign_controller_child() {
    let (Some(dir), Some(endpoint)) = (std::env::var_os(CHILD_DIR), std::env::var(CHILD_MOTO).ok())
    else {
        return;
    };
    let dir = PathBuf::from(dir);
    let text = std::fs::read_to_string(dir.join(FILE))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.join(FILE).display()));
    let mut c = create(&dir.join("results"), &text);
    let agents = Arc::new(LocalAgents::logging_pids_in(&dir));
    let mut providers = Providers::new(ec2_of(&endpoint).await, agents);
    // Each round dwells on its measured job, so the kill lands while a round's
    // pair runs.
    providers.pause = CHILD_PAUSE;
    let out = execute(&mut c, &providers).await;
    eprintln!(
        "the controller was not killed: {out:?}\n{:#?}",
        records(&c.dir.path)
    );
}

/// The kill test's campaign: 3 spatial rounds in one zone, each pair in a spread
/// placement group (so a sweep has a group to delete too).
fn kill_text(moto: &Moto) -> String {
    campaign_text(
        moto,
        "kind = \"spatial\"\nrounds = 3",
        "placement_group = \"spread\"",
    )
}

/// The controller child: killed on drop with every agent it started (a failing
/// test leaves no process behind).
struct Controller {
    child: Child,
    /// Where it logs its agents' pids.
    dir: PathBuf,
}

impl Controller {
    /// The pids of the agents it started.
    fn agent_pids(&self) -> Vec<u32> {
        std::fs::read_to_string(self.dir.join(AGENT_PIDS))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// SIGKILLs its agents (those still there: a pid whose command line names a
    /// token file of its directory), returning their pids.
    fn kill_agents(&self) -> Vec<u32> {
        let pids = self.agent_pids();
        let dir = self.dir.to_string_lossy().into_owned();
        let ours = |pid: &&u32| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&dir))
        };
        for pid in pids.iter().filter(ours) {
            let _ = Command::new("kill")
                .args(["-9", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
        pids
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.kill_agents();
    }
}

/// A controller killed with SIGKILL after its first round was recorded (the next
/// round's pair launching or measured, unowned) is resumed: the resume sweeps what
/// it left, measures the rounds not recorded, and the campaign ends with every
/// round recorded exactly once, the dead session marked `died`, and nothing left in
/// moto: no instance, host, nnb security group or placement group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_campaign_killed_between_rounds_resumes_to_every_round_once() {
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let child_dir = dir.path().join("child");
    std::fs::create_dir_all(&child_dir).unwrap_or_else(|e| panic!("mkdir: {e}"));
    std::fs::write(child_dir.join(FILE), kill_text(&moto))
        .unwrap_or_else(|e| panic!("writing the experiment: {e}"));
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
    let child = Command::new(exe)
        .args([
            "--exact",
            "aws_campaign::campaign_controller_child",
            "--nocapture",
        ])
        .env(CHILD_DIR, &child_dir)
        .env(CHILD_MOTO, &moto.endpoint)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("starting the controller: {e}"));
    let mut child = Controller {
        child,
        dir: child_dir.clone(),
    };
    let results = child_dir.join("results");

    // The campaign's directory, once the child made it and recorded its first
    // round, and the second round's pair is up (4 agents started): the kill leaves
    // that pair running, owned by no controller.
    let deadline = Instant::now() + Duration::from_secs(120);
    let campaign = loop {
        let made = std::fs::read_dir(&results)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(Result::ok)
            .map(|e| e.path());
        if let Some(path) = made.filter(|p| !records(p).is_empty() && child.agent_pids().len() >= 4)
        {
            break path;
        }
        if let Ok(Some(status)) = child.child.try_wait() {
            panic!("the controller ended before its second round was up: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "the second round not up in 120 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    signal(child.child.id(), "9");
    let _ = child.child.wait();
    assert_eq!(records(&campaign).len(), 1, "killed in the second round");
    // The dead controller's agents stand for its instances and outlive it, as the
    // instances do: stop them (the resume terminates the instances).
    let orphans = child.kill_agents();
    assert!(
        still_alive_after(&orphans, Duration::from_secs(5)).is_empty(),
        "the dead controller's agents: {orphans:?}"
    );
    let left = moto.leftovers();
    assert_eq!(
        left.instances.len(),
        2,
        "the second round's pair runs: {left:?}"
    );
    assert_eq!(left.placement_groups.len(), 1, "{left:?}");

    let id = campaign
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut c = CampaignRun::open(&results, &id, 2)
        .unwrap_or_else(|e| panic!("opening campaign {id}: {e}"));
    let agents = Arc::new(LocalAgents::new());
    let providers = Providers::new(ec2_of(&moto.endpoint).await, Arc::clone(&agents));
    let out = execute(&mut c, &providers).await;
    assert_eq!(
        out.status,
        RunStatus::Completed,
        "{out:?}\n{:#?}",
        records(&c.dir.path)
    );

    let records = records(&campaign);
    assert_each_round_once(&records, 3);
    let sessions: Vec<SessionStatus> = c.manifest.sessions.iter().map(|s| s.status).collect();
    assert_eq!(
        sessions,
        [SessionStatus::Died, SessionStatus::Completed],
        "the killed session, then the resume"
    );
    assert_eq!(
        providers.looks().len(),
        2,
        "the resume measured the two rounds not recorded"
    );
    assert_all_gone(&moto, &agents);
}
