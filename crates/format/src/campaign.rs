//! A campaign on disk (version 10): many rounds of one experiment, each round a run
//! of its own, sampled across instances (spatial) or over time (temporal).
//!
//! ```text
//! <results>/<campaign-id>/
//!   campaign.json        CampaignManifest: the experiment, the rounds planned, sessions
//!   rounds.jsonl         one RoundRecord per round that ended, appended and fsynced
//!   <round run id>/      each round's run directory (manifest.json, samples.jsonl, ...)
//! ```
//!
//! A round is recorded once, when it ends; a round whose controller died before it
//! ended has a run directory but no record, and a resume measures it again in a new
//! run directory (the unfinished one stays, unread by the campaign's analysis).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::kind::{Role, SessionStatus};

/// Name of a campaign's manifest file.
pub const CAMPAIGN: &str = "campaign.json";
/// Name of a campaign's journal of rounds.
pub const ROUNDS: &str = "rounds.jsonl";

/// How a campaign samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CampaignKind {
    /// Each round gets fresh instances and releases them at its end (Wang & Ng's
    /// spatial experiment; the thesis' 50 default-tenancy m5.large).
    Spatial,
    /// Each lane keeps its instances from round to round, a round every `interval`
    /// (Wang & Ng's temporal experiment: every 10 minutes for 150 hours).
    Temporal,
}

impl CampaignKind {
    /// Every kind.
    pub const ALL: [CampaignKind; 2] = [CampaignKind::Spatial, CampaignKind::Temporal];

    /// The name written in files and records.
    pub const fn name(self) -> &'static str {
        match self {
            CampaignKind::Spatial => "spatial",
            CampaignKind::Temporal => "temporal",
        }
    }

    /// The kind named `name`.
    pub fn from_name(name: &str) -> Option<CampaignKind> {
        CampaignKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

display_name!(CampaignKind);

/// How a round ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoundStatus {
    /// Every step of its run was measured.
    Completed,
    /// Its run ended with some steps recorded as failed.
    Partial,
    /// Nothing was measured: its instances could not be had (capacity, a launch or
    /// health check that failed) or its run failed; `error` says why.
    Failed,
}

/// `campaign.json`: what the campaign runs, and its sessions (start and resumes).
/// `E` is what the experiment is read as (its writer's JSON by default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignManifest<E = Value> {
    /// Format version ([`crate::FORMAT_VERSION`], 10 or later).
    pub format_version: u32,
    /// The campaign id (the directory name).
    pub campaign_id: String,
    /// nnb version of the controller that created it.
    pub nnb_version: String,
    /// The experiment file as named on the command line.
    pub experiment_file: String,
    /// The experiment file's text (a resume re-reads this, not the file).
    pub experiment_text: String,
    /// The checked experiment (with its `campaign`).
    pub experiment: E,
    /// Spatial or temporal.
    pub kind: CampaignKind,
    /// The lanes, in order: availability zones on aws, labels locally. Rounds of
    /// different lanes may overlap in time (on aws); a lane's rounds never do.
    pub lanes: Vec<String>,
    /// Rounds per lane.
    pub rounds_per_lane: u32,
    /// Temporal: from one round's start to the next, ms.
    #[serde(default)]
    pub interval_ms: Option<u64>,
    /// Start and resumes of the campaign, in order.
    pub sessions: Vec<CampaignSession>,
}

/// One start or resume of a campaign's controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignSession {
    /// When it started (RFC 3339 UTC).
    pub started_at: String,
    /// When it ended; `None` while running or when it died.
    pub finished_at: Option<String>,
    /// How it ended (`died` when a resume found it still `running`).
    pub status: SessionStatus,
    /// The command line.
    pub command: Vec<String>,
    /// Rounds it recorded.
    pub rounds_run: usize,
}

/// One line of `rounds.jsonl`: a round that ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundRecord {
    /// Format version of the line.
    pub format_version: u32,
    /// Its index in the campaign, from 0: lane-major within a round number
    /// (`round_in_lane * lanes + lane_index`), so indexes are stable across resumes.
    pub round: u32,
    /// Its lane (zone).
    pub lane: String,
    /// Its number within the lane, from 0.
    pub lane_round: u32,
    /// Its run directory, relative to the campaign directory (the run id).
    pub run_id: String,
    /// How it ended.
    pub status: RoundStatus,
    /// When its instances were asked for, and when it ended (RFC 3339 UTC).
    pub started_at: String,
    /// When it ended.
    pub finished_at: String,
    /// Which set of instances measured it, counted per lane from 0: a spatial
    /// round's own number; in a temporal lane, one more each time its instances had
    /// to be replaced (a resume after the controller died).
    pub generation: u32,
    /// Where each instance of the round landed, as far as it can be known.
    pub instances: Vec<PlacedInstance>,
    /// Why it failed (`status = failed`), or what it had to give up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Where one instance (or local tenant) of a round ran: every field the provider or
/// the agent could tell, `None` where it could not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlacedInstance {
    /// Tenant name (`test`, `endpoint`, `endpoint@test`, ...).
    pub tenant: String,
    /// Its role.
    pub role: Option<Role>,
    /// Instance id (aws).
    pub instance_id: Option<String>,
    /// Instance type (aws).
    pub instance_type: Option<String>,
    /// Availability zone (aws).
    pub zone: Option<String>,
    /// Subnet (aws).
    pub subnet_id: Option<String>,
    /// Private IP address (aws), or the namespace address (local).
    pub private_ip: Option<String>,
    /// The physical host, where the cloud says (dedicated hosts only on aws).
    pub host_id: Option<String>,
    /// The CPU model its agent saw.
    pub cpu_model: Option<String>,
}
