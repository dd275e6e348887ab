//! The results of a run on disk: `<results>/<run-id>/manifest.json`, `samples.jsonl`
//! (see [`crate::journal`]), `background.jsonl` (the background jobs' ends) and raw
//! HDR logs under `hdr/`.
//!
//! The record format is versioned ([`FORMAT_VERSION`]) and documented in
//! `docs/results-format.md`: one JSON object per line, one line per measured job of a
//! step, with flat metric columns so pandas, polars and duckdb read it directly.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::provider::CloudRecord;
use nnb_agent::jobs::Health;

pub use nnb_format::{
    timestamp, BackgroundRecord, Metrics, Sample, SampleParts, SampleStatus, BACKGROUND,
    FORMAT_VERSION, MANIFEST, SAMPLES,
};

/// `manifest.json` as the controller writes it: agents' health and cloud records typed.
pub type Manifest = nnb_format::Manifest<Health, CloudRecord>;
/// One start or resume of a run, as the controller records it.
pub type Session = nnb_format::Session<Health, CloudRecord>;
/// Where one tenant ran, with its agent's health.
pub type TenantRecord = nnb_format::TenantRecord<Health>;

/// Why results could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// A file operation failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A results file is not what nnb writes.
    #[error("{path}: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Another process is writing the run directory.
    #[error(
        "{path} is being written by another nnb ({holder}): two writers would measure \
         steps twice and interleave their records; wait for it to finish or stop it"
    )]
    Locked {
        /// The run directory.
        path: PathBuf,
        /// Who holds the lock, as it wrote itself into the lock file.
        holder: String,
    },
}

impl ResultsError {
    /// Whether the error is the user's to fix (a results file that is not what nnb
    /// writes, a run that is not there), not a failure of the machine.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, ResultsError::Format { .. })
    }
}

/// Takes the run directory's lock and writes this process into the lock file, or
/// says who holds it.
pub(crate) fn lock_dir(dir: &Path) -> Result<std::sync::Arc<File>, ResultsError> {
    let path = dir.join(LOCK);
    match crate::lockfile::try_hold(&path).map_err(io_err("cannot lock", &path))? {
        Ok(file) => Ok(std::sync::Arc::new(file)),
        Err(holder) => Err(ResultsError::Locked {
            path: dir.to_path_buf(),
            holder,
        }),
    }
}

/// Creates `<results>/<id>` (which must not exist yet) and takes its lock: a run's
/// or a campaign's directory.
pub(crate) fn create_locked(
    results: &Path,
    id: &str,
) -> Result<(PathBuf, std::sync::Arc<File>), ResultsError> {
    fs::create_dir_all(results).map_err(io_err("cannot create", results))?;
    let path = results.join(id);
    fs::create_dir(&path).map_err(io_err("cannot create", &path))?;
    let lock = lock_dir(&path)?;
    Ok((path, lock))
}

/// Opens the existing directory `<results>/<id>` whose manifest is `manifest` (a
/// `what`: "run" or "campaign") and takes its lock; one another process writes is
/// refused ([`ResultsError::Locked`]). The manifest's temporary file that a killed
/// writer left behind is removed.
pub(crate) fn open_locked(
    results: &Path,
    id: &str,
    manifest: &str,
    what: &str,
) -> Result<(PathBuf, std::sync::Arc<File>), ResultsError> {
    let path = results.join(id);
    if !path.join(manifest).is_file() {
        return Err(ResultsError::Format {
            path,
            message: format!("no {what} `{id}` here (no {manifest})"),
        });
    }
    let lock = lock_dir(&path)?;
    let tmp = path.join(format!("{manifest}.tmp"));
    if tmp.exists() {
        tracing::info!("removing {}, left by a writer that died", tmp.display());
        fs::remove_file(&tmp).map_err(io_err("cannot remove", &tmp))?;
    }
    Ok((path, lock))
}

/// Reads the manifest `name` in `dir` (a run's or a campaign's) as a `T` whose
/// `version` must be the one this nnb writes: a resume appends to it, so another
/// version is refused.
pub(crate) fn read_manifest_json<T: serde::de::DeserializeOwned>(
    dir: &Path,
    name: &str,
    version: impl Fn(&T) -> u32,
) -> Result<T, ResultsError> {
    let path = dir.join(name);
    let text = fs::read(&path).map_err(io_err("cannot read", &path))?;
    let m: T = serde_json::from_slice(&text).map_err(|e| ResultsError::Format {
        path: path.clone(),
        message: e.to_string(),
    })?;
    if version(&m) != FORMAT_VERSION {
        return Err(ResultsError::Format {
            path,
            message: format!(
                "format version {} is not {FORMAT_VERSION}, which this nnb writes",
                version(&m)
            ),
        });
    }
    Ok(m)
}

/// Wraps an I/O error with what was done to which path.
pub(crate) fn io_err<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> ResultsError + 'a {
    move |source| ResultsError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// A new run id: UTC start time and a short random suffix, e.g.
/// `20261122T104409Z-3f9a2c`. Sorts by time; unique in practice.
pub fn new_run_id() -> String {
    format!(
        "{}-{:06x}",
        nnb_format::run_id_stamp(SystemTime::now()),
        rand::random::<u32>() & 0xff_ffff
    )
}

/// The lock file of a run directory: one writer at a time holds an exclusive
/// advisory lock on it (see [`RunDir`]).
pub const LOCK: &str = ".lock";

/// A run's directory, locked for writing: while a `RunDir` (or a clone) lives, this
/// process holds an exclusive lock on its `.lock` file, which also says who holds it
/// (pid, command, start). The kernel drops the lock when the process ends, even by
/// `kill -9`, so a dead writer never blocks a resume.
#[derive(Debug, Clone)]
pub struct RunDir {
    /// `<results>/<run-id>`.
    pub path: PathBuf,
    /// The run id.
    pub run_id: String,
    /// The locked `.lock` file, kept open for the directory's lifetime.
    _lock: std::sync::Arc<File>,
}

impl RunDir {
    /// Creates `<results>/<run_id>` (which must not exist yet), locked.
    pub fn create(results: &Path, run_id: &str) -> Result<RunDir, ResultsError> {
        let (path, lock) = create_locked(results, run_id)?;
        Ok(RunDir {
            path,
            run_id: run_id.to_string(),
            _lock: lock,
        })
    }

    /// Opens the existing run `run_id` under `results`, locked; a run another process
    /// is writing is refused with [`ResultsError::Locked`]. A manifest's temporary
    /// file that a killed writer left behind is removed.
    pub fn open(results: &Path, run_id: &str) -> Result<RunDir, ResultsError> {
        let (path, lock) = open_locked(results, run_id, MANIFEST, "run")?;
        Ok(RunDir {
            path,
            run_id: run_id.to_string(),
            _lock: lock,
        })
    }

    /// Path of `samples.jsonl`.
    pub fn samples_path(&self) -> PathBuf {
        self.path.join(SAMPLES)
    }

    /// Path of `background.jsonl`.
    pub fn background_path(&self) -> PathBuf {
        self.path.join(BACKGROUND)
    }

    /// Appends one background job's record to `background.jsonl` (created on first
    /// use) and fsyncs it. A torn last line, left by a crash, is cut first; a failed
    /// write is cut back, so every line stays a whole record.
    pub fn append_background(&self, record: &BackgroundRecord) -> Result<(), ResultsError> {
        let path = self.background_path();
        let mut line = serde_json::to_vec(record).map_err(|e| ResultsError::Format {
            path: path.clone(),
            message: e.to_string(),
        })?;
        line.push(b'\n');
        let existed = path.exists();
        let mut f = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(io_err("cannot open", &path))?;
        if !existed {
            sync_dir(&self.path)?;
        }
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)
            .map_err(io_err("cannot read", &path))?;
        let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1) as u64;
        if whole < bytes.len() as u64 {
            f.set_len(whole).map_err(io_err("cannot truncate", &path))?;
        }
        if let Err(e) = f.write_all(&line).and_then(|()| f.sync_data()) {
            // A line cut short here would spoil the next one.
            if let Err(cut) = f.set_len(whole) {
                tracing::warn!("{}: cannot cut a failed append: {cut}", path.display());
            }
            return Err(io_err("cannot append to", &path)(e));
        }
        Ok(())
    }

    /// Writes the manifest atomically (temporary file, fsync, rename, fsync dir). A
    /// temporary file that could not be written whole (a full disk) is removed, so
    /// a failed write leaves the directory as it was (reliability review NL10).
    pub fn write_manifest(&self, m: &Manifest) -> Result<(), ResultsError> {
        write_json_atomic(&self.path, MANIFEST, m)
    }

    /// Reads the manifest.
    pub fn read_manifest(&self) -> Result<Manifest, ResultsError> {
        read_manifest_json(&self.path, MANIFEST, |m: &Manifest| m.format_version)
    }

    /// Writes a raw HDR log for `tenant` at step `step_id`; returns its path relative
    /// to the run directory (`hdr/<step>.<tenant>.hlog`, `/` and `=` made safe).
    pub fn write_hdr(
        &self,
        step_id: &str,
        tenant: &str,
        log: &str,
    ) -> Result<String, ResultsError> {
        let dir = self.path.join(nnb_format::HDR_DIR);
        fs::create_dir_all(&dir).map_err(io_err("cannot create", &dir))?;
        let rel = nnb_format::hdr_log_path(step_id, tenant);
        let path = self.path.join(&rel);
        let mut f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&path)
            .map_err(io_err("cannot create", &path))?;
        f.write_all(log.as_bytes())
            .map_err(io_err("cannot write", &path))?;
        f.sync_data().map_err(io_err("cannot sync", &path))?;
        Ok(rel)
    }
}

/// Writes `value` as pretty JSON to `dir/name` atomically (temporary file, fsync,
/// rename, fsync dir). A temporary file that could not be written whole (a full
/// disk) is removed, so a failed write leaves the directory as it was (reliability
/// review NL10). A run's manifest and a campaign's are written so.
pub(crate) fn write_json_atomic(
    dir: &Path,
    name: &str,
    value: &impl serde::Serialize,
) -> Result<(), ResultsError> {
    let tmp = dir.join(format!("{name}.tmp"));
    let dest = dir.join(name);
    let text = serde_json::to_vec_pretty(value).map_err(|e| ResultsError::Format {
        path: dest.clone(),
        message: e.to_string(),
    })?;
    let written = File::create(&tmp)
        .map_err(io_err("cannot create", &tmp))
        .and_then(|mut f| {
            f.write_all(&text).map_err(io_err("cannot write", &tmp))?;
            f.sync_all().map_err(io_err("cannot sync", &tmp))
        })
        .and_then(|()| fs::rename(&tmp, &dest).map_err(io_err("cannot replace", &dest)));
    if written.is_err() {
        if let Err(e) = fs::remove_file(&tmp) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!("cannot remove {}: {e}", tmp.display());
            }
        }
    }
    written?;
    sync_dir(dir)
}

/// fsyncs a directory so a created or renamed entry survives a crash.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), ResultsError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("cannot sync", dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// A background record of `tenant`, as the controller writes one.
    fn background(tenant: &str) -> BackgroundRecord {
        serde_json::from_value(serde_json::json!({"format_version": FORMAT_VERSION,
            "run_id": "r", "tenant": tenant, "role": "neighbor", "job": "idle",
            "steps": ["idle/neighbors=1/rep=1"], "status": "ok", "state": "stopped",
            "error": null, "started_at": "2026-11-22T10:00:00.000Z",
            "stopped_at": "2026-11-22T10:00:01.000Z", "ran_s": 1.0, "target_bps": null,
            "result": null}))
        .expect("a background record")
    }

    /// Reliability review H2: one writer per run directory. A second open is refused
    /// and names the holder; once the holder is gone (dropped here; a killed process
    /// loses its lock the same way) the run opens again, and a manifest temporary
    /// file the dead writer left is cleaned up.
    #[test]
    fn a_run_directory_has_one_writer_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(dir.path(), "r").unwrap();
        fs::write(run.path.join(MANIFEST), "{}").unwrap();
        let err = RunDir::open(dir.path(), "r").unwrap_err();
        let ResultsError::Locked { holder, .. } = &err else {
            panic!("{err}");
        };
        assert!(
            holder.starts_with(&format!("pid {},", std::process::id())),
            "{holder}"
        );
        assert!(
            err.to_string().contains("being written by another nnb"),
            "{err}"
        );
        let tmp = run.path.join(format!("{MANIFEST}.tmp"));
        fs::write(&tmp, "half a manifest").unwrap();
        drop(run);
        let again = RunDir::open(dir.path(), "r").unwrap();
        assert!(!tmp.exists(), "the dead writer's temporary file is removed");
        assert!(again.path.join(LOCK).is_file());
    }

    #[test]
    fn background_records_append_as_whole_lines_after_a_torn_one() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(dir.path(), "r").unwrap();
        run.append_background(&background("nb-1")).unwrap();
        // A crash in the middle of the second record's line.
        let mut f = OpenOptions::new()
            .append(true)
            .open(run.background_path())
            .unwrap();
        f.write_all(b"{\"format_version\": 3, \"ten").unwrap();
        run.append_background(&background("nb-2")).unwrap();
        let text = fs::read_to_string(run.background_path()).unwrap();
        let tenants: Vec<String> = text
            .lines()
            .map(|l| nnb_format::parse_background::<Value>(l).unwrap().tenant)
            .collect();
        assert_eq!(tenants, ["nb-1", "nb-2"]);
    }

    #[test]
    fn run_ids_sort_by_time_and_differ() {
        let (a, b) = (new_run_id(), new_run_id());
        assert_eq!(a.len(), "20261122T104409Z-3f9a2c".len());
        assert_ne!(a, b);
    }
}
