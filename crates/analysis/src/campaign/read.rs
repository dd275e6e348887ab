//! Reading a campaign directory, or runs given together, into a [`Campaign`].

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

use nnb_format::campaign::{
    CampaignKind, CampaignManifest, PlacedInstance, RoundRecord, RoundStatus, CAMPAIGN, ROUNDS,
};
use nnb_format::{Role, MANIFEST};

use super::values::{run_values, RunValues};
use super::{Campaign, Measure, Placement, Round};
use crate::read::{each_line, read_limited, read_run, ReadError, Run, MAX_MANIFEST_BYTES};

/// The most round records and run directories a campaign is read with: Wang & Ng's
/// temporal experiment is 9 pairs every 10 minutes for 150 hours, 8100 rounds.
pub const MAX_ROUNDS: usize = 100_000;

/// Why a campaign could not be analysed at all.
#[derive(Debug, thiserror::Error)]
pub enum CampaignError {
    /// The directory has neither a manifest nor a journal of rounds.
    #[error("{path} is not a campaign directory: it has neither {CAMPAIGN} nor {ROUNDS}")]
    NotACampaign {
        /// The directory.
        path: PathBuf,
    },
    /// The journal or the directory could not be read (refused, too long a line).
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Nothing left to analyse.
    #[error("{what}: no round to analyse ({why})")]
    NoRounds {
        /// The campaign directory, or `the runs`.
        what: String,
        /// Why.
        why: String,
    },
}

impl CampaignError {
    /// Whether the error is the user's to fix (a directory that is not a campaign,
    /// one with nothing readable), not a failure of the machine.
    pub fn is_bad_input(&self) -> bool {
        match self {
            CampaignError::Read(e) => e.is_bad_input(),
            CampaignError::NotACampaign { .. } | CampaignError::NoRounds { .. } => true,
        }
    }
}

/// Whether `dir` is a campaign directory (it has a manifest or a journal of rounds).
pub fn is_campaign(dir: &Path) -> bool {
    dir.join(CAMPAIGN).exists() || dir.join(ROUNDS).exists()
}

/// Collects the measures of the rounds as they are read.
#[derive(Default)]
struct Builder {
    measures: Vec<Measure>,
    rounds: Vec<Round>,
    notes: Vec<String>,
}

impl Builder {
    /// Each measure of `values` as an index into the campaign's measures.
    fn index(&mut self, values: RunValues) -> Vec<(usize, Vec<f64>)> {
        values
            .measures
            .into_iter()
            .map(|(m, v)| {
                let i = match self.measures.iter().position(|k| k.name == m.name) {
                    Some(i) => i,
                    None => {
                        self.measures.push(m);
                        self.measures.len() - 1
                    }
                };
                (i, v)
            })
            .collect()
    }

    /// Reads the run in `dir` and what it measured; `None` (and a note) when it
    /// cannot be read or analysed.
    fn measure(&mut self, what: &str, dir: &Path) -> Option<(Run, RunValues)> {
        let run = match read_run(dir) {
            Ok(run) => run,
            Err(e) => {
                self.notes
                    .push(format!("{what}: cannot read its run: {e}; left out"));
                return None;
            }
        };
        self.notes
            .extend(run.notes.iter().map(|n| format!("{what}: {n}")));
        match run_values(&run) {
            Ok(values) => Some((run, values)),
            Err(e) => {
                self.notes
                    .push(format!("{what}: cannot analyse its run: {e}; left out"));
                None
            }
        }
    }

    fn finish(self, id: String, kind: CampaignKind, adhoc: bool, lanes: Vec<String>) -> Campaign {
        let mut lanes = lanes;
        for r in &self.rounds {
            if !lanes.contains(&r.lane) {
                lanes.push(r.lane.clone());
            }
        }
        Campaign {
            id,
            kind,
            adhoc,
            lanes,
            measures: self.measures,
            rounds: self.rounds,
            notes: self.notes,
        }
    }
}

/// A round's run as the report lists it, labelled `lane`.
fn run_info(run: &Run, lane: &str) -> crate::report::RunInfo {
    crate::report::RunInfo {
        run_id: run.run_id.clone(),
        label: lane.to_string(),
        experiment_name: run.manifest.experiment_name.clone(),
        scenario: run.manifest.scenario.name(),
        dir: run.dir.clone(),
    }
}

/// A time as the format writes it, as seconds since the Unix epoch.
fn epoch_s(at: &str) -> Option<f64> {
    let t = nnb_format::parse_timestamp(at)?;
    Some(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64())
}

/// What the round's records say of where it ran: the test instance's (else the
/// first one's) type, zone, host and CPU, and every instance's address, test first.
fn placement(instances: &[PlacedInstance]) -> Placement {
    let test = instances
        .iter()
        .find(|i| i.role == Some(Role::Test))
        .or(instances.first());
    let mut ips: Vec<String> = test
        .and_then(|t| t.private_ip.clone())
        .into_iter()
        .collect();
    for i in instances {
        if let Some(ip) = &i.private_ip {
            if !ips.contains(ip) {
                ips.push(ip.clone());
            }
        }
    }
    Placement {
        instance_type: test.and_then(|t| t.instance_type.clone()),
        zone: test.and_then(|t| t.zone.clone()),
        host_id: test.and_then(|t| t.host_id.clone()),
        cpu_model: test.and_then(|t| t.cpu_model.clone()),
        private_ips: ips,
        hops: None,
    }
}

/// Whether a run id names a directory right inside the campaign directory.
fn plain_name(run_id: &str) -> bool {
    let mut parts = Path::new(run_id).components();
    matches!(parts.next(), Some(Component::Normal(_))) && parts.next().is_none()
}

/// The campaign's manifest, or a note on why it cannot be had.
fn manifest(dir: &Path) -> Result<CampaignManifest, String> {
    let path = dir.join(CAMPAIGN);
    if !path.exists() {
        return Err(format!("{CAMPAIGN} is missing"));
    }
    let bytes = read_limited(&path, MAX_MANIFEST_BYTES).map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes)
        .map_err(|e| format!("{CAMPAIGN} is not a campaign manifest ({e})"))
}

/// The recorded rounds of the journal, in round order, the first record of a round
/// kept; notes on lines left out.
fn journal(dir: &Path, notes: &mut Vec<String>) -> Result<Vec<RoundRecord>, CampaignError> {
    let path = dir.join(ROUNDS);
    if !path.exists() {
        notes.push(format!("{ROUNDS} is missing: no round recorded yet"));
        return Ok(Vec::new());
    }
    let mut records: Vec<RoundRecord> = Vec::new();
    let mut seen = HashSet::new();
    let mut capped = false;
    let parse =
        |line: &str| Ok(serde_json::from_str::<RoundRecord>(line).map_err(|e| e.to_string()));
    let torn = each_line(&path, parse, |line, parsed| match parsed {
        Ok(_) if records.len() >= MAX_ROUNDS => {
            if !capped {
                capped = true;
                notes.push(format!(
                    "{ROUNDS}:{line}: more than {MAX_ROUNDS} rounds: the rest left out"
                ));
            }
        }
        Ok(r) if !seen.insert(r.round) => notes.push(format!(
            "{ROUNDS}:{line}: round {} recorded again: the first record kept",
            r.round
        )),
        Ok(r) => records.push(r),
        Err(e) => notes.push(format!(
            "{ROUNDS}:{line}: not a round record ({e}): left out"
        )),
    })?;
    notes.extend(torn);
    records.sort_by_key(|r| r.round);
    Ok(records)
}

/// Reads the campaign in `dir`: its manifest, every round recorded in its journal
/// with its run's values, and notes on what was left out (unfinished rounds, failed
/// ones, pieces that cannot be read).
pub fn read_campaign(dir: &Path) -> Result<Campaign, CampaignError> {
    if !is_campaign(dir) {
        return Err(CampaignError::NotACampaign {
            path: dir.to_path_buf(),
        });
    }
    let mut b = Builder::default();
    let manifest = manifest(dir)
        .map_err(|why| {
            b.notes.push(format!(
                "{why}: kind taken as spatial, lanes from the rounds"
            ))
        })
        .ok();
    let records = journal(dir, &mut b.notes)?;
    let recorded: HashSet<&str> = records.iter().map(|r| r.run_id.as_str()).collect();
    // Run directories without a record: rounds whose controller died before they ended.
    let mut unfinished: Vec<String> = std::fs::read_dir(dir)
        .map_err(|source| ReadError::Io {
            path: dir.to_path_buf(),
            source,
        })?
        .take(MAX_ROUNDS * 2)
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join(MANIFEST).is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !recorded.contains(name.as_str()))
        .collect();
    unfinished.sort();
    for name in unfinished {
        let note = format!(
            "run directory {name} has no record in {ROUNDS}: an unfinished round, left out"
        );
        tracing::warn!("{note}");
        b.notes.push(note);
    }
    for rec in &records {
        let what = format!("round {} ({})", rec.round, rec.run_id);
        let mut round = Round {
            round: rec.round,
            lane: rec.lane.clone(),
            lane_round: rec.lane_round,
            generation: rec.generation,
            run_id: rec.run_id.clone(),
            status: Some(rec.status),
            started_at: Some(rec.started_at.clone()),
            start_s: epoch_s(&rec.started_at),
            placement: placement(&rec.instances),
            values: Vec::new(),
            run: None,
        };
        if rec.status == RoundStatus::Failed {
            b.notes.push(format!(
                "{what} failed{}: no values",
                rec.error
                    .as_deref()
                    .map_or_else(String::new, |e| format!(" ({e})"))
            ));
        } else if !plain_name(&rec.run_id) {
            b.notes.push(format!(
                "{what}: its run id is not a directory name inside the campaign: left out"
            ));
        } else if let Some((run, values)) = b.measure(&what, &dir.join(&rec.run_id)) {
            round.placement.hops = values.hops;
            round.values = b.index(values);
            round.run = Some(run_info(&run, &rec.lane));
        }
        if round.start_s.is_none() {
            b.notes.push(format!(
                "{what}: start time {:?} is not a time as the format writes it",
                rec.started_at
            ));
        }
        b.rounds.push(round);
    }
    if b.rounds.is_empty() {
        return Err(CampaignError::NoRounds {
            what: dir.display().to_string(),
            why: b.notes.join("; "),
        });
    }
    let id = manifest.as_ref().map_or_else(
        || {
            dir.file_name()
                .map_or_else(|| "campaign".into(), |n| n.to_string_lossy().into_owned())
        },
        |m| m.campaign_id.clone(),
    );
    let (kind, lanes) = manifest.map_or((CampaignKind::Spatial, Vec::new()), |m| (m.kind, m.lanes));
    Ok(b.finish(id, kind, false, lanes))
}

/// The earliest start of a measured record of the run (RFC 3339), as seconds since
/// the Unix epoch with its text.
fn run_start(run: &Run) -> Option<(f64, String)> {
    let col = run.samples.column("started_at").ok()?.str().ok()?.clone();
    col.iter()
        .flatten()
        .filter_map(|t| Some((epoch_s(t)?, t.to_string())))
        .min_by(|a, b| a.0.total_cmp(&b.0))
}

/// Runs given together as the rounds of one ad-hoc spatial campaign: each run a
/// round of its own, its lane the test tenant's instance type (`-` where it has
/// none), in the order given. A run that cannot be read is left out with a note.
pub fn across(dirs: &[PathBuf]) -> Result<Campaign, CampaignError> {
    let mut b = Builder::default();
    for dir in dirs.iter().take(MAX_ROUNDS) {
        let what = format!("run {}", dir.display());
        let Some((run, values)) = b.measure(&what, dir) else {
            continue;
        };
        let lane = run.instance_type().unwrap_or_else(|| "-".to_string());
        let lane_round = b.rounds.iter().filter(|r| r.lane == lane).count() as u32;
        let start = run_start(&run);
        let round = Round {
            round: b.rounds.len() as u32,
            lane_round,
            generation: lane_round,
            run_id: run.run_id.clone(),
            status: None,
            start_s: start.as_ref().map(|s| s.0),
            started_at: start.map(|s| s.1),
            placement: Placement {
                instance_type: run.instance_type(),
                hops: values.hops,
                ..Placement::default()
            },
            values: b.index(values),
            run: Some(run_info(&run, &lane)),
            lane,
        };
        b.rounds.push(round);
    }
    if dirs.len() > MAX_ROUNDS {
        b.notes
            .push(format!("more than {MAX_ROUNDS} runs: the rest left out"));
    }
    if b.rounds.is_empty() {
        return Err(CampaignError::NoRounds {
            what: "the runs".into(),
            why: b.notes.join("; "),
        });
    }
    Ok(b.finish("adhoc".into(), CampaignKind::Spatial, true, Vec::new()))
}
