//! A campaign's directory: `campaign.json` written atomically, `rounds.jsonl`
//! appended and fsynced one round at a time, and a lock so that one controller at a
//! time writes it (as a run directory's, [`crate::results::RunDir`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::journal::open_for_append;
use crate::results::{
    create_locked, io_err, open_locked, read_manifest_json, write_json_atomic, ResultsError,
};
use nnb_format::campaign::{RoundRecord, CAMPAIGN, ROUNDS};

/// `campaign.json` as the controller writes it (the experiment as JSON).
pub type CampaignManifest = nnb_format::campaign::CampaignManifest<Value>;

/// Whether `<results>/<id>` is a campaign (it has a `campaign.json`), not a run.
pub fn is_campaign(results: &Path, id: &str) -> bool {
    results.join(id).join(CAMPAIGN).is_file()
}

/// A campaign's directory, locked for writing while this value (or a clone) lives;
/// the kernel drops the lock when the process ends, even by `kill -9`.
#[derive(Debug, Clone)]
pub struct CampaignDir {
    /// `<results>/<campaign-id>`.
    pub path: PathBuf,
    /// The campaign id.
    pub id: String,
    _lock: Arc<File>,
}

impl CampaignDir {
    /// Creates `<results>/<id>` (which must not exist yet), locked.
    pub fn create(results: &Path, id: &str) -> Result<CampaignDir, ResultsError> {
        let (path, lock) = create_locked(results, id)?;
        Ok(CampaignDir {
            path,
            id: id.to_string(),
            _lock: lock,
        })
    }

    /// Opens the existing campaign `id` under `results`, locked; one that another
    /// process writes is refused ([`ResultsError::Locked`]). A manifest's temporary
    /// file left by a writer that died is removed.
    pub fn open(results: &Path, id: &str) -> Result<CampaignDir, ResultsError> {
        let (path, lock) = open_locked(results, id, CAMPAIGN, "campaign")?;
        Ok(CampaignDir {
            path,
            id: id.to_string(),
            _lock: lock,
        })
    }

    /// Writes `campaign.json` atomically.
    pub fn write_manifest(&self, m: &CampaignManifest) -> Result<(), ResultsError> {
        write_json_atomic(&self.path, CAMPAIGN, m)
    }

    /// Reads `campaign.json`; another format version is refused.
    pub fn read_manifest(&self) -> Result<CampaignManifest, ResultsError> {
        read_manifest_json(&self.path, CAMPAIGN, |m: &CampaignManifest| {
            m.format_version
        })
    }

    /// Path of `rounds.jsonl`.
    pub fn rounds_path(&self) -> PathBuf {
        self.path.join(ROUNDS)
    }
}

/// `rounds.jsonl`, open for appending: the rounds recorded, by index.
#[derive(Debug)]
pub struct RoundsJournal {
    file: File,
    path: PathBuf,
    recorded: BTreeMap<u32, RoundRecord>,
}

impl RoundsJournal {
    /// Opens (creating if needed) the journal at `path`. A torn last line (a crash
    /// in the middle of an append) is cut with a warning, as the samples journal
    /// cuts an unfinished step; a damaged line with records after it, or a round
    /// recorded twice, is not a crash's trace and is refused, the file left as is.
    /// Returns the journal and the bytes cut.
    pub fn open(path: &Path) -> Result<(RoundsJournal, u64), ResultsError> {
        let (file, bytes) = open_for_append(path)?;
        let format = |message: String| ResultsError::Format {
            path: path.to_path_buf(),
            message,
        };
        let mut recorded = BTreeMap::new();
        let mut good_end = 0;
        let mut lines = bytes
            .split_inclusive(|&b| b == b'\n')
            .enumerate()
            .peekable();
        while let Some((i, line)) = lines.next() {
            let last = lines.peek().is_none();
            let parsed = (line.last() == Some(&b'\n'))
                .then(|| serde_json::from_slice::<RoundRecord>(line))
                .map(|r| r.map_err(|e| e.to_string()));
            match parsed {
                Some(Ok(r)) => {
                    if recorded.contains_key(&r.round) {
                        return Err(format(format!(
                            "line {}: round {} is recorded twice",
                            i + 1,
                            r.round
                        )));
                    }
                    recorded.insert(r.round, r);
                    good_end += line.len();
                }
                // A torn append: only the last line can be one.
                _ if last => break,
                Some(Err(e)) => return Err(format(format!("line {}: {e}", i + 1))),
                None => unreachable!("only the last line lacks its newline"),
            }
        }
        let cut = (bytes.len() - good_end) as u64;
        if cut > 0 {
            tracing::warn!(
                "{}: cutting {cut} bytes of a round record the controller did not finish \
                 writing",
                path.display()
            );
            file.set_len(good_end as u64)
                .and_then(|()| file.sync_all())
                .map_err(io_err("cannot truncate", path))?;
        }
        Ok((
            RoundsJournal {
                file,
                path: path.to_path_buf(),
                recorded,
            },
            cut,
        ))
    }

    /// The rounds recorded, by index.
    pub fn recorded(&self) -> &BTreeMap<u32, RoundRecord> {
        &self.recorded
    }

    /// Whether round `round` is recorded.
    pub fn is_recorded(&self, round: u32) -> bool {
        self.recorded.contains_key(&round)
    }

    /// Appends `record` as one line in one write and fsyncs it; a round already
    /// recorded is refused (a round is recorded once).
    pub fn append(&mut self, record: RoundRecord) -> Result<(), ResultsError> {
        if self.recorded.contains_key(&record.round) {
            return Err(ResultsError::Format {
                path: self.path.clone(),
                message: format!("round {} is recorded already", record.round),
            });
        }
        let mut line = serde_json::to_vec(&record).map_err(|e| ResultsError::Format {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        line.push(b'\n');
        let before = self
            .file
            .metadata()
            .map_err(io_err("cannot read", &self.path))?
            .len();
        if let Err(e) = self
            .file
            .write_all(&line)
            .and_then(|()| self.file.sync_data())
        {
            // A line cut short here would spoil the next one.
            if let Err(cut) = self.file.set_len(before) {
                tracing::warn!("{}: cannot cut a failed append: {cut}", self.path.display());
            }
            return Err(io_err("cannot append to", &self.path)(e));
        }
        self.recorded.insert(record.round, record);
        Ok(())
    }
}
