//! `samples.jsonl` as a crash-safe journal of completed steps.
//!
//! Each step's records are appended in one write and fsynced before the next step
//! starts, so a crash (even `kill -9` mid-write) loses at most the step in flight.
//! On reopening, a torn last line or a step with only some of its records (`part` <
//! `parts`) is truncated away, and the complete steps are known by id: `--resume`
//! skips them, so no step is measured twice.
//!
//! Only the tail may be cut: a damaged line with any record after it is not a crash's
//! trace but corruption in the middle of the file, and cutting there would delete
//! measured steps. Reopening then fails with the file and line, and leaves the file
//! as it is.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::results::{io_err, sync_dir, ResultsError, Sample};

/// What reopening a journal found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Records of complete steps kept.
    pub kept_records: usize,
    /// Complete steps kept.
    pub kept_steps: usize,
    /// Bytes cut off the end (a torn line, or records of an incomplete step).
    pub truncated_bytes: u64,
}

/// Opens the journal file at `path` for appending, creating it (and syncing its
/// directory, so the new name survives a crash) if needed, and reads what it holds:
/// the start of every journal's reopening (the samples, a campaign's rounds).
pub(crate) fn open_for_append(path: &Path) -> Result<(File, Vec<u8>), ResultsError> {
    let existed = path.exists();
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(io_err("cannot open", path))?;
    if !existed {
        if let Some(dir) = path.parent() {
            sync_dir(dir)?;
        }
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(io_err("cannot read", path))?;
    Ok((file, bytes))
}

/// The samples journal of one run, open for appending.
#[derive(Debug)]
pub struct Journal {
    file: File,
    path: PathBuf,
    done: HashSet<String>,
}

impl Journal {
    /// Opens (creating if needed) the journal at `path`, truncating any incomplete
    /// tail, and learns which steps are complete.
    pub fn open(path: &Path) -> Result<(Journal, Recovery), ResultsError> {
        let (file, bytes) = open_for_append(path)?;
        let (good_end, done, kept_records) = scan(&bytes).map_err(|c| c.error(path))?;
        let recovery = Recovery {
            kept_records,
            kept_steps: done.len(),
            truncated_bytes: (bytes.len() - good_end) as u64,
        };
        if good_end < bytes.len() {
            tracing::warn!(
                "{}: cutting {} bytes of an incomplete last step",
                path.display(),
                bytes.len() - good_end
            );
            file.set_len(good_end as u64)
                .and_then(|()| file.sync_all())
                .map_err(io_err("cannot truncate", path))?;
        }
        Ok((
            Journal {
                file,
                path: path.to_path_buf(),
                done,
            },
            recovery,
        ))
    }

    /// Whether step `id` is complete in the journal.
    pub fn is_done(&self, id: &str) -> bool {
        self.done.contains(id)
    }

    /// How many steps are complete.
    pub fn done_count(&self) -> usize {
        self.done.len()
    }

    /// Appends all records of one step in a single write and fsyncs. The records
    /// must be parts 1..=n of n of the same step.
    pub fn append_step(&mut self, records: &[Sample]) -> Result<(), ResultsError> {
        let Some(first) = records.first() else {
            return Ok(());
        };
        let mut buf = Vec::new();
        for r in records {
            serde_json::to_writer(&mut buf, r).map_err(|e| ResultsError::Format {
                path: self.path.clone(),
                message: e.to_string(),
            })?;
            buf.push(b'\n');
        }
        self.file
            .write_all(&buf)
            .and_then(|()| self.file.sync_data())
            .map_err(io_err("cannot append to", &self.path))?;
        self.done.insert(first.step.clone());
        Ok(())
    }
}

/// The parts of a record the journal needs.
#[derive(serde::Deserialize)]
struct Part {
    step: String,
    part: usize,
    parts: usize,
}

/// A damaged line with records after it: corruption, not a torn tail.
#[derive(Debug)]
struct Corrupt {
    /// 1-based line number of the damaged line.
    line: usize,
    /// What is wrong with it.
    what: String,
    /// The 1-based line of the first record after it.
    next_record: usize,
}

impl Corrupt {
    fn error(&self, path: &Path) -> ResultsError {
        ResultsError::Format {
            path: path.to_path_buf(),
            message: format!(
                "line {}: {}, and line {} after it holds a record: this is damage in the \
                 middle of the file, not a torn last step, so nothing is cut. Repair or \
                 remove line {} (the records after it are measured steps) and resume again",
                self.line, self.what, self.next_record, self.line
            ),
        }
    }
}

/// Scans journal bytes: the end of the last complete step, the complete steps, and
/// their record count. Everything after the first damaged line (not a record, or a
/// record out of its step's order) is a torn tail to cut, unless a record follows
/// the damage: then it is [`Corrupt`].
fn scan(bytes: &[u8]) -> Result<(usize, HashSet<String>, usize), Corrupt> {
    let mut done = HashSet::new();
    let (mut good_end, mut kept, mut pending) = (0, 0, 0);
    let mut damage: Option<(usize, String)> = None;
    let lines = bytes.split_inclusive(|&b| b == b'\n');
    let mut offset = 0;
    for (i, raw) in lines.enumerate() {
        offset += raw.len();
        let line = raw.strip_suffix(b"\n");
        let parsed = line.map(serde_json::from_slice::<Part>);
        if let Some((at, what)) = &damage {
            if let Some(Ok(_)) = parsed {
                return Err(Corrupt {
                    line: *at,
                    what: what.clone(),
                    next_record: i + 1,
                });
            }
            continue;
        }
        let p = match parsed {
            // The last line of the file, without its newline: a torn write.
            None => break,
            Some(Err(e)) => {
                damage = Some((i + 1, format!("not a record ({e})")));
                continue;
            }
            Some(Ok(p)) => p,
        };
        pending += 1;
        if p.part == p.parts {
            if pending != p.parts {
                damage = Some((
                    i + 1,
                    format!(
                        "the last of {} records of step {} follows {} of them",
                        p.parts,
                        p.step,
                        pending - 1
                    ),
                ));
                continue;
            }
            done.insert(p.step);
            kept += pending;
            good_end = offset;
            pending = 0;
        }
    }
    Ok((good_end, done, kept))
}

/// Reads every record of a journal (complete steps only, as reopening would keep).
pub fn read_samples(path: &Path) -> Result<Vec<Sample>, ResultsError> {
    let bytes = std::fs::read(path).map_err(io_err("cannot read", path))?;
    let (good_end, _, _) = scan(&bytes).map_err(|c| c.error(path))?;
    bytes[..good_end]
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            serde_json::from_slice(l).map_err(|e| ResultsError::Format {
                path: path.to_path_buf(),
                message: e.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Metrics, SampleParts, SampleStatus};
    use nnb_experiment::plan::Step;
    use std::time::SystemTime;

    fn record(id: &str, part: usize, parts: usize) -> Sample {
        let step = Step {
            lifted: Vec::new(),
            id: id.to_string(),
            group: nnb_format::StepGroup::Busy,
            level: 1.0,
            level_label: "neighbors=1".to_string(),
            rep: 1,
            warmup: false,
            present: Vec::new(),
            background: Vec::new(),
            continuous: false,
            measure: Vec::new(),
            estimate: None,
            technology: None,
            start: None,
        };
        Sample::new(
            "run",
            nnb_format::Scenario::NeighborStaircase,
            0,
            &step,
            part,
            parts,
            SampleParts {
                tenant: format!("t{part}"),
                role: nnb_format::Role::Test,
                job: nnb_format::JobKind::Burn,
                status: SampleStatus::Ok,
                error: None,
                attempts: 1,
                started_at: SystemTime::now(),
                elapsed_ms: 1.0,
                metrics: Metrics::default(),
                conditions: nnb_format::StepConditions::default(),
                sampler: None,
                hdr_log: None,
                result: None,
            },
        )
    }

    fn journal_in(dir: &tempfile::TempDir) -> PathBuf {
        dir.path().join("samples.jsonl")
    }

    /// A closed journal in `dir` holding step `a` (one record); its path.
    fn journal_with_step_a(dir: &tempfile::TempDir) -> Result<PathBuf, ResultsError> {
        let path = journal_in(dir);
        let (mut j, _) = Journal::open(&path)?;
        j.append_step(&[record("a", 1, 1)])?;
        Ok(path)
    }

    /// Appends `bytes` to the file at `path` behind the journal's back, as a crash
    /// in the middle of a write leaves them.
    fn append_raw(path: &Path, bytes: &[u8]) -> Result<(), ResultsError> {
        OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io_err("open", path))?
            .write_all(bytes)
            .map_err(io_err("write", path))
    }

    #[test]
    fn appended_steps_are_durable_and_known_on_reopen() -> Result<(), ResultsError> {
        let dir = tempfile::tempdir().map_err(io_err("tempdir", Path::new("/tmp")))?;
        let path = journal_in(&dir);
        let (mut j, rec) = Journal::open(&path)?;
        assert_eq!(rec, Recovery::default());
        j.append_step(&[record("a", 1, 1)])?;
        j.append_step(&[record("b", 1, 2), record("b", 2, 2)])?;
        assert!(j.is_done("a") && j.is_done("b") && !j.is_done("c"));
        drop(j);
        let (j, rec) = Journal::open(&path)?;
        assert_eq!(
            (rec.kept_steps, rec.kept_records, rec.truncated_bytes),
            (2, 3, 0)
        );
        assert!(j.is_done("b"));
        let all = read_samples(&path)?;
        assert_eq!(all.len(), 3);
        assert_eq!(all[2].tenant, "t2");
        Ok(())
    }

    #[test]
    fn a_torn_last_line_is_cut_away() -> Result<(), ResultsError> {
        let dir = tempfile::tempdir().map_err(io_err("tempdir", Path::new("/tmp")))?;
        let path = journal_with_step_a(&dir)?;
        let good_len = std::fs::metadata(&path)
            .map_err(io_err("stat", &path))?
            .len();
        // A kill -9 in the middle of writing the next line.
        let line = serde_json::to_string(&record("b", 1, 1)).unwrap_or_default();
        append_raw(&path, &line.as_bytes()[..line.len() / 2])?;
        let (mut j, rec) = Journal::open(&path)?;
        assert_eq!(rec.kept_steps, 1);
        assert_eq!(rec.truncated_bytes, (line.len() / 2) as u64);
        assert!(!j.is_done("b"));
        let len = std::fs::metadata(&path)
            .map_err(io_err("stat", &path))?
            .len();
        assert_eq!(len, good_len);
        // Appending after recovery yields a clean file.
        j.append_step(&[record("b", 1, 1)])?;
        let ids: Vec<String> = read_samples(&path)?.into_iter().map(|s| s.step).collect();
        assert_eq!(ids, ["a", "b"]);
        Ok(())
    }

    /// Reliability review H1: a corrupt line in the middle, with complete steps after
    /// it, is refused with its line, and the file is left as it was: the steps after
    /// it are measured data, never cut.
    #[test]
    fn a_corrupt_middle_line_is_refused_and_nothing_is_cut() -> Result<(), ResultsError> {
        let dir = tempfile::tempdir().map_err(io_err("tempdir", Path::new("/tmp")))?;
        let path = journal_in(&dir);
        let (mut j, _) = Journal::open(&path)?;
        for id in ["a", "b", "c", "d"] {
            j.append_step(&[record(id, 1, 1)])?;
        }
        drop(j);
        let text = std::fs::read_to_string(&path).map_err(io_err("read", &path))?;
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines[1] = lines[1].replace("\"step\"", "\"st\u{0}ep");
        let damaged = lines.join("\n") + "\n";
        std::fs::write(&path, &damaged).map_err(io_err("write", &path))?;
        let err = Journal::open(&path).expect_err("a corrupt middle line is refused");
        let msg = err.to_string();
        assert!(msg.contains("samples.jsonl: line 2: not a record"), "{msg}");
        assert!(msg.contains("line 3 after it holds a record"), "{msg}");
        assert!(read_samples(&path).is_err());
        let after = std::fs::read_to_string(&path).map_err(io_err("read", &path))?;
        assert_eq!(after, damaged, "the file is left as it was");
        // A damaged tail with nothing after it is still a crash's trace, cut away.
        lines.truncate(2);
        std::fs::write(&path, lines.join("\n") + "\n").map_err(io_err("write", &path))?;
        let (j, rec) = Journal::open(&path)?;
        assert!(j.is_done("a") && !j.is_done("b"));
        assert_eq!(rec.kept_steps, 1);
        Ok(())
    }

    #[test]
    fn a_step_with_missing_parts_is_not_done() -> Result<(), ResultsError> {
        let dir = tempfile::tempdir().map_err(io_err("tempdir", Path::new("/tmp")))?;
        let path = journal_with_step_a(&dir)?;
        // Only the first of two records made it (whole line, newline included).
        let line = serde_json::to_string(&record("b", 1, 2)).unwrap_or_default() + "\n";
        append_raw(&path, line.as_bytes())?;
        let (j, rec) = Journal::open(&path)?;
        assert!(j.is_done("a") && !j.is_done("b"));
        assert_eq!(rec.truncated_bytes, line.len() as u64);
        assert_eq!(read_samples(&path)?.len(), 1);
        Ok(())
    }
}
