//! Reading one run directory (`docs/results-format.md`, versions 1 to 6) into a typed polars
//! data frame: `manifest.json` into [`RunInfo`] (what analysis needs of
//! [`nnb_format::Manifest`]), `samples.jsonl` into flat columns
//! (the nested `result` object is skipped), `background.jsonl` (version 3; absent
//! before) into [`Background`] records, HDR interval logs on demand.
//!
//! A torn last line and a last step with fewer than `parts` records (a crashed or
//! running run) are tolerated and noted; any other unreadable line (not JSON, not
//! UTF-8, longer than [`MAX_LINE_BYTES`]), a value no measurement can have (a negative
//! or non-finite runtime, rate or RTT; a `part` outside `1..=parts`), or a
//! `format_version` this nnb does not read ([`nnb_format::READABLE_VERSIONS`]), is an
//! error naming the file and line. A record whose step, tenant and part an earlier line
//! already had is ignored and noted (see [`Run::duplicates`]).
//!
//! A run directory is untrusted input, and reading it stays bounded: every file read
//! must be a regular file (a FIFO or a link to `/dev/zero` is refused, never read), the
//! manifest and each HDR log have a size limit ([`MAX_MANIFEST_BYTES`],
//! [`MAX_HDR_BYTES`]), JSON Lines are read a bounded line at a time, and an `hdr_log`
//! must name a file inside the run directory (symlinks resolved).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Component, Path, PathBuf};

use base64::Engine as _;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use nnb_format::quality::{Quality, ResultQuality};
use nnb_format::{
    parse_background, parse_sample, BackgroundRecord, ExperimentView, JobKind, LineError, Manifest,
    Metric, Role, Sample, SampleStatus, Session, BACKGROUND,
};
use polars::prelude::{Column, DataFrame, NamedFrom, Series};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

pub use nnb_format::{columns, Scenario, FORMAT_VERSION, MANIFEST, SAMPLES};

/// The longest line, with its newline, read from `samples.jsonl` or
/// `background.jsonl`: a record is a few KiB, so a longer line is not one. Only this much
/// of a line is held in memory; the rest is skipped and the line is unreadable.
pub const MAX_LINE_BYTES: usize = 16 << 20;
/// The largest `manifest.json` read: a manifest is a few KiB plus a few per session.
pub const MAX_MANIFEST_BYTES: u64 = 16 << 20;
/// The largest HDR interval log read: one compressed histogram per second, so a
/// day-long job writes a few tens of MiB.
pub const MAX_HDR_BYTES: u64 = 256 << 20;

/// One record of `samples.jsonl` as analysis reads it: of the nested `result`, only
/// its qualifiers ([`Quality`]).
type Record = Sample<ResultQuality>;

/// One line of `background.jsonl` as analysis reads it: a background job's end and
/// what it achieved, its raw `result` skipped.
pub type Background = BackgroundRecord<serde::de::IgnoredAny>;

/// Why a run could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The run directory or one of its files could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A line (or the manifest, line = its line) is not what the format describes.
    #[error("{path}:{line}: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A record or the manifest carries a format version this crate does not read.
    #[error("{path}:{line}: format_version {found} is not supported (this nnb reads versions 1 to {FORMAT_VERSION})")]
    Version {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The version found.
        found: u64,
    },
    /// A file analysis does not read: not a regular file, over its size limit, or (an
    /// `hdr_log`) outside the run directory.
    #[error("{path}: refused: {message}")]
    Refused {
        /// The file, or the run directory for an `hdr_log` outside it.
        path: PathBuf,
        /// Why it is refused.
        message: String,
    },
    /// An HDR interval log could not be decoded.
    #[error("{path}: {message}")]
    Hdr {
        /// The log file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Building the data frame failed.
    #[error("building the samples table of {path}: {source}")]
    Frame {
        /// The samples file.
        path: PathBuf,
        /// The polars error.
        #[source]
        source: polars::error::PolarsError,
    },
}

impl ReadError {
    /// Whether the error is the user's to fix (a run directory that is not what nnb
    /// writes, of a version it does not read, refused, or with a broken HDR log), not
    /// a failure of the machine.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            ReadError::Corrupt { .. }
                | ReadError::Version { .. }
                | ReadError::Refused { .. }
                | ReadError::Hdr { .. }
        )
    }
}

/// The run's `manifest.json`: the fields analysis reads.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// Format version the run was written in.
    pub format_version: u32,
    /// The run id (the directory name).
    pub run_id: String,
    /// The experiment's `name`, when it has one.
    pub experiment_name: Option<String>,
    /// The experiment's scenario kind.
    pub scenario: Scenario,
    /// What analysis reads of the checked experiment the controller recorded (units
    /// resolved).
    pub experiment: ExperimentView,
    /// The controller's environment (CPU model, kernel, topology ...), raw.
    pub controller: serde_json::Value,
    /// Steps in the plan.
    pub planned_steps: usize,
    /// What the controller warned about in any session (e.g. tenants sharing CPUs),
    /// each once, in order: they qualify every number of the run.
    pub warnings: Vec<String>,
    /// The test tenant's machine, from its agent's health in the sessions.
    pub test_topology: Option<TenantTopology>,
}

/// The test tenant's machine as its agent reported it (`sessions[].tenants[]` with
/// role `test`, `health.topology` and `health.cpus`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantTopology {
    /// Online logical CPUs.
    pub online: Option<usize>,
    /// Physical cores.
    pub cores: Option<usize>,
    /// Hardware threads per core.
    pub smt_ways: Option<usize>,
    /// The CPUs the tenant's agent was allowed to use (empty: not recorded).
    pub cpus: Vec<usize>,
}

/// What analysis reads of an agent's health record (a manifest tenant's `health`).
#[derive(Debug, Deserialize)]
struct AgentHealth {
    /// The agent's machine.
    #[serde(default)]
    topology: Option<HealthTopology>,
    /// The CPUs the agent was allowed to use.
    #[serde(default)]
    cpus: Vec<usize>,
}

/// The counts of an agent's topology that analysis reads.
#[derive(Debug, Clone, Copy, Deserialize)]
struct HealthTopology {
    #[serde(default)]
    online: Option<usize>,
    #[serde(default)]
    cores: Option<usize>,
    #[serde(default)]
    smt_ways: Option<usize>,
}

/// Only the version of a manifest, checked before its other fields are read (another
/// version may have others).
#[derive(Debug, Deserialize)]
struct VersionOnly {
    format_version: u64,
}

/// `manifest.json` as analysis reads it: the agents' health as far as analysis needs
/// it, the cloud record skipped, the experiment through the format's view of it.
type ManifestRecord = Manifest<AgentHealth, IgnoredAny, ExperimentView>;

/// The test tenant's topology from the last session that recorded one.
fn test_topology(sessions: &[Session<AgentHealth, IgnoredAny>]) -> Option<TenantTopology> {
    let (topology, health) = sessions.iter().rev().find_map(|s| {
        let health = s
            .tenants
            .iter()
            .find(|t| t.role == Role::Test)?
            .health
            .as_ref()?;
        Some((health.topology?, health))
    })?;
    Some(TenantTopology {
        online: topology.online,
        cores: topology.cores,
        smt_ways: topology.smt_ways,
        cpus: health.cpus.clone(),
    })
}

/// One run, read.
#[derive(Debug, Clone)]
pub struct Run {
    /// The run directory.
    pub dir: PathBuf,
    /// The run id.
    pub run_id: String,
    /// The manifest.
    pub manifest: RunInfo,
    /// One row per record of every complete step, flat columns named as in the format
    /// (see [`columns`]), the sample's `technology` (null outside a matrix over
    /// technologies) and a last column `record`, the row's index in `qualities`;
    /// `result` is dropped.
    pub samples: DataFrame,
    /// The qualifiers of each record's result, in record order.
    pub qualities: Vec<Quality>,
    /// How every background job ended and what it achieved (`background.jsonl`; empty
    /// for runs before version 3 and runs without background jobs).
    pub background: Vec<Background>,
    /// Records ignored because an earlier line had the same step, tenant and part, as
    /// two writers appending to one run leave them: the first copy is kept (a complete
    /// measurement of the step), the later ones would count the step twice, narrowing
    /// its interval and weighting its level. Flagged (a note and a verdict finding)
    /// rather than refused, so that a run damaged this way still analyses honestly.
    pub duplicates: usize,
    /// What was tolerated while reading, e.g. `samples.jsonl:1043: torn last line ignored`.
    pub notes: Vec<String>,
}

/// Loads the run in `dir`: its manifest, its complete steps and notes on what was
/// tolerated.
pub fn read_run(dir: &Path) -> Result<Run, ReadError> {
    let manifest = read_manifest(&dir.join(MANIFEST))?;
    let samples_path = dir.join(SAMPLES);
    let (records, mut notes) = read_lines(&samples_path, parse_sample::<ResultQuality>)?;
    check_values(&samples_path, &records)?;
    let (records, duplicates) = drop_duplicates(records, &mut notes);
    let background_path = dir.join(BACKGROUND);
    let background = if background_path.exists() {
        let (records, torn) =
            read_lines(&background_path, parse_background::<serde::de::IgnoredAny>)?;
        notes.extend(torn);
        records.into_iter().map(|(_, r)| r).collect()
    } else {
        Vec::new()
    };
    let records = complete_steps(records, &mut notes);
    let (records, qualities) = qualify(records, &mut notes);
    let samples = frame(&records).map_err(|source| ReadError::Frame {
        path: samples_path.clone(),
        source,
    })?;
    for note in &notes {
        tracing::warn!(run = %manifest.run_id, "{note}");
    }
    // Recorded at run time and printed then; here they only qualify the tables.
    notes.extend(
        manifest
            .warnings
            .iter()
            .map(|w| format!("controller warning: {w}")),
    );
    Ok(Run {
        dir: dir.to_path_buf(),
        run_id: manifest.run_id.clone(),
        manifest,
        samples,
        qualities,
        background,
        duplicates,
        notes,
    })
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> ReadError + '_ {
    move |source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn corrupt(path: &Path, line: usize, message: impl Into<String>) -> ReadError {
    ReadError::Corrupt {
        path: path.to_path_buf(),
        line,
        message: message.into(),
    }
}

fn refused(path: &Path, message: impl Into<String>) -> ReadError {
    ReadError::Refused {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Opens `path` (following symlinks) if it is a regular file, with its size. It is
/// opened without blocking and checked once open, so a FIFO neither hangs the open nor
/// is read, and a device such as `/dev/zero` is refused before a byte is read from it.
fn open_regular(path: &Path) -> Result<(File, u64), ReadError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path).map_err(io_error(path))?;
    let meta = file.metadata().map_err(io_error(path))?;
    if !meta.is_file() {
        return Err(refused(
            path,
            format!("a {}, not a regular file", nnb_sys::owned::kind_name(&meta)),
        ));
    }
    Ok((file, meta.len()))
}

/// The whole of the regular file `path`, refused when longer than `limit` bytes: by
/// its size before reading, and by reading no more than `limit + 1` bytes should it
/// grow meanwhile.
pub(crate) fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let too_large = || refused(path, format!("larger than {} MiB, the limit", limit >> 20));
    let (file, len) = open_regular(path)?;
    if len > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io_error(path))?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Reads and checks `manifest.json`.
fn read_manifest(path: &Path) -> Result<RunInfo, ReadError> {
    let text = String::from_utf8(read_limited(path, MAX_MANIFEST_BYTES)?).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
        corrupt(path, line, "not valid UTF-8")
    })?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| corrupt(path, e.line(), format!("not valid JSON: {e}")))?;
    let field_line = |name: &str| {
        text.lines()
            .position(|l| l.contains(&format!("\"{name}\"")))
            .map_or(1, |i| i + 1)
    };
    let version = VersionOnly::deserialize(&v)
        .map_err(|_| corrupt(path, 1, "no `format_version`: not an nnb manifest"))?
        .format_version;
    if !nnb_format::readable(version) {
        return Err(ReadError::Version {
            path: path.to_path_buf(),
            line: field_line("format_version"),
            found: version,
        });
    }
    let m: ManifestRecord = serde_json::from_str(&text)
        .map_err(|e| corrupt(path, e.line(), format!("not an nnb manifest: {e}")))?;
    Ok(RunInfo {
        format_version: m.format_version,
        experiment_name: m.experiment.name.clone(),
        scenario: m.experiment.scenario.kind,
        controller: m.controller,
        planned_steps: m.planned_steps,
        warnings: session_warnings(&m.sessions),
        test_topology: test_topology(&m.sessions),
        run_id: m.run_id,
        experiment: m.experiment,
    })
}

/// The sessions' warnings, each once, in order.
fn session_warnings<H, C>(sessions: &[Session<H, C>]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in sessions.iter().flat_map(|s| &s.warnings) {
        if !out.contains(w) {
            out.push(w.clone());
        }
    }
    out
}

/// Parses one line with `parse`; a line that is not a record is returned as the error
/// message.
fn parse_line<T>(
    path: &Path,
    number: usize,
    line: &str,
    parse: impl Fn(&str) -> Result<T, LineError>,
) -> Result<Result<T, String>, ReadError> {
    match parse(line) {
        Ok(r) => Ok(Ok(r)),
        Err(LineError::Version(found)) => Err(ReadError::Version {
            path: path.to_path_buf(),
            line: number,
            found,
        }),
        Err(LineError::Invalid(message)) => Ok(Err(message)),
    }
}

/// Records with their 1-based line numbers, and notes on what was tolerated.
type Lines<T> = (Vec<(usize, T)>, Vec<String>);

/// Reads the next line of `reader` into `buf` (with its newline, if it has one),
/// holding at most [`MAX_LINE_BYTES`] of it: `None` at the end of the input, else
/// whether the whole line fit (the rest of a longer line is skipped, unread into
/// memory).
fn next_line(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<Option<bool>> {
    buf.clear();
    let (mut any, mut whole) = (false, true);
    loop {
        let chunk = match reader.fill_buf() {
            Ok(chunk) => chunk,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            break;
        }
        any = true;
        let end = chunk.iter().position(|&b| b == b'\n');
        let len = end.map_or(chunk.len(), |i| i + 1);
        let room = MAX_LINE_BYTES - buf.len();
        whole &= len <= room;
        buf.extend_from_slice(&chunk[..len.min(room)]);
        reader.consume(len);
        if end.is_some() {
            break;
        }
    }
    Ok(any.then_some(whole))
}

/// Streams a JSON Lines file of records read by `parse` (`samples.jsonl`,
/// `background.jsonl`), which must be a regular file, a bounded line at a time
/// ([`next_line`]): every record, and a note when the last line was torn. A line that
/// does not parse (including one that is not UTF-8 or is longer than
/// [`MAX_LINE_BYTES`]) is an error naming its line unless no line follows it.
fn read_lines<T>(
    path: &Path,
    parse: impl Fn(&str) -> Result<T, LineError>,
) -> Result<Lines<T>, ReadError> {
    let mut records = Vec::new();
    let notes = each_line(path, parse, |number, r| records.push((number, r)))?;
    Ok((records, notes))
}

/// [`read_lines`] one record at a time: `keep` gets each record with its line
/// number as it is read, so a caller that keeps little of each holds little; returns
/// the notes.
pub(crate) fn each_line<T>(
    path: &Path,
    parse: impl Fn(&str) -> Result<T, LineError>,
    mut keep: impl FnMut(usize, T),
) -> Result<Vec<String>, ReadError> {
    let mut reader = BufReader::with_capacity(1 << 20, open_regular(path)?.0);
    let mut pending: Option<(usize, String)> = None;
    let mut buf = Vec::new();
    let mut number = 0;
    while let Some(whole) = next_line(&mut reader, &mut buf).map_err(io_error(path))? {
        number += 1;
        let line = match std::str::from_utf8(&buf) {
            _ if !whole => Err(format!(
                "longer than {} MiB, the limit for a line",
                MAX_LINE_BYTES >> 20
            )),
            Ok(text) => Ok(text.trim_end_matches(['\n', '\r'])),
            Err(e) => Err(format!(
                "not valid UTF-8 (at byte {} of the line)",
                e.valid_up_to() + 1
            )),
        };
        if line.as_ref().is_ok_and(|l| l.trim().is_empty()) {
            continue;
        }
        if let Some((at, message)) = pending.take() {
            return Err(corrupt(path, at, message));
        }
        let parsed = match line {
            Ok(line) => parse_line(path, number, line, &parse)?,
            Err(message) => Err(message),
        };
        match parsed {
            Ok(r) => keep(number, r),
            Err(message) => pending = Some((number, message)),
        }
    }
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok(pending
        .map(|(at, message)| format!("{name}:{at}: torn last line ignored ({message})"))
        .into_iter()
        .collect())
}

/// Refuses a record with a value no measurement can have, naming its line: a `part`
/// outside `1..=parts` (its step could never be complete, or would count without all
/// its records), or a negative or non-finite elapsed time, value or metric (runtimes,
/// rates, RTTs and times per operation are all positive; a negative runtime would read
/// as a degradation of -150%).
fn check_values(path: &Path, records: &[(usize, Record)]) -> Result<(), ReadError> {
    for (line, r) in records {
        if r.part == 0 || r.part > r.parts {
            return Err(corrupt(
                path,
                *line,
                format!("part {} of {}: not a part of the step", r.part, r.parts),
            ));
        }
        let values = [("elapsed_ms", Some(r.elapsed_ms)), ("value", r.value)]
            .into_iter()
            .chain(r.metrics.iter().map(|(m, v)| (m.name(), v)));
        for (name, v) in values {
            if let Some(v) = v.filter(|v| !(v.is_finite() && *v >= 0.0)) {
                return Err(corrupt(
                    path,
                    *line,
                    format!("`{name}` is {v}: no measurement is negative or infinite"),
                ));
            }
        }
    }
    Ok(())
}

/// Keeps the first record of each step, tenant and part and drops later copies (see
/// [`Run::duplicates`]), noting how many and where the first copy is; returns the
/// records kept and the number dropped.
fn drop_duplicates(
    records: Vec<(usize, Record)>,
    notes: &mut Vec<String>,
) -> (Vec<(usize, Record)>, usize) {
    let mut seen: HashMap<(String, String, usize), usize> = HashMap::new();
    let mut first_copy: Option<(usize, usize)> = None;
    let mut dropped = 0;
    let kept = records
        .into_iter()
        .filter(|(line, r)| {
            let key = (r.step.clone(), r.tenant.clone(), r.part);
            match seen.get(&key) {
                Some(&original) => {
                    dropped += 1;
                    first_copy.get_or_insert((*line, original));
                    false
                }
                None => {
                    seen.insert(key, *line);
                    true
                }
            }
        })
        .collect();
    if let Some((line, original)) = first_copy {
        notes.push(format!(
            "{SAMPLES}:{line}: {dropped} duplicated record(s) ignored (the same step, tenant \
             and part as an earlier line, here line {original}; the first copy is kept)"
        ));
    }
    (kept, dropped)
}

/// Drops the records of steps with fewer than `parts` records (a step torn by a crash),
/// noting each.
fn complete_steps(records: Vec<(usize, Record)>, notes: &mut Vec<String>) -> Vec<Record> {
    let mut counts: HashMap<&str, (usize, usize, usize)> = HashMap::new();
    for (line, r) in &records {
        let e = counts.entry(r.step.as_str()).or_insert((0, r.parts, *line));
        e.0 += 1;
    }
    let mut torn: Vec<(&str, usize, usize, usize)> = counts
        .iter()
        .filter(|(_, (n, parts, _))| n < parts)
        .map(|(step, &(n, parts, line))| (*step, n, parts, line))
        .collect();
    torn.sort_by_key(|t| t.3);
    for (step, n, parts, line) in &torn {
        notes.push(format!(
            "{SAMPLES}:{line}: step `{step}` has {n} of {parts} records: ignored"
        ));
    }
    let torn: Vec<String> = torn.iter().map(|t| t.0.to_string()).collect();
    records
        .into_iter()
        .map(|(_, r)| r)
        .filter(|r| !torn.contains(&r.step))
        .collect()
}

/// Separates each record's qualifiers and applies what they say about its number,
/// noting it: a probe that heard no answer measured nothing (the record counts as
/// failed), and a load without a sink report from every stream has no received rate
/// (never the sender's). Runs written before nnb checked these read the same way.
fn qualify(records: Vec<Record>, notes: &mut Vec<String>) -> (Vec<Record>, Vec<Quality>) {
    let (mut dead, mut partial) = (0usize, 0usize);
    let mut qualities = Vec::with_capacity(records.len());
    let records = records
        .into_iter()
        .map(|mut r| {
            let q = r.result.take().map(|q| q.0).unwrap_or_default();
            let ok = r.status == SampleStatus::Ok;
            match r.job {
                JobKind::Latency if ok && q.probe_dead() => {
                    dead += 1;
                    r.status = SampleStatus::Failed;
                    r.error = Some("the probe heard no answer".to_string());
                    r.value = None;
                    r.metrics = Default::default();
                }
                // A load result has its sender's totals; without them it is not one.
                JobKind::Load if ok && q.sent.is_some() && !q.sink_complete() => {
                    partial += 1;
                    r.metrics.set(Metric::RateBps, None);
                    if r.metric == Some(Metric::RateBps) {
                        r.value = None;
                    }
                }
                _ => {}
            }
            qualities.push(q);
            r
        })
        .collect();
    if dead > 0 {
        notes.push(format!(
            "{dead} latency record(s) heard no answer at all: counted as failed, not as RTT 0"
        ));
    }
    if partial > 0 {
        notes.push(format!(
            "{partial} load record(s) lack a sink report from every stream: their received \
             rate is missing (the sender's rate is not a received rate)"
        ));
    }
    (records, qualities)
}

/// Flat columns of the records, named as in [`columns`], then `record`.
fn frame(records: &[Record]) -> polars::error::PolarsResult<DataFrame> {
    fn col<T, P>(name: &str, values: T) -> Column
    where
        Series: NamedFrom<T, P>,
        P: ?Sized,
    {
        Column::new(name.into(), values)
    }
    let s = |f: fn(&Record) -> &str| records.iter().map(f).collect::<Vec<&str>>();
    let os = |f: fn(&Record) -> Option<&str>| records.iter().map(f).collect::<Vec<Option<&str>>>();
    let u = |f: fn(&Record) -> usize| records.iter().map(|r| f(r) as u64).collect::<Vec<u64>>();
    let of = |f: fn(&Record) -> Option<f64>| records.iter().map(f).collect::<Vec<Option<f64>>>();
    let mut columns = vec![
        col("step", s(|r| &r.step)),
        col("step_index", u(|r| r.step_index)),
        col("part", u(|r| r.part)),
        col("parts", u(|r| r.parts)),
        col("scenario", s(|r| r.scenario.name())),
        col("group", s(|r| r.group.name())),
        col(
            "level",
            records.iter().map(|r| r.level).collect::<Vec<f64>>(),
        ),
        col("level_label", s(|r| &r.level_label)),
        col("rep", records.iter().map(|r| r.rep).collect::<Vec<u32>>()),
        col(
            "warmup",
            records.iter().map(|r| r.warmup).collect::<Vec<bool>>(),
        ),
        col("tenant", s(|r| &r.tenant)),
        col("role", s(|r| r.role.name())),
        col("job", s(|r| r.job.name())),
        col("status", s(|r| r.status.name())),
        col("error", os(|r| r.error.as_deref())),
        col(
            "attempts",
            records.iter().map(|r| r.attempts).collect::<Vec<u32>>(),
        ),
        col("started_at", s(|r| &r.started_at)),
        col(
            "elapsed_ms",
            records.iter().map(|r| r.elapsed_ms).collect::<Vec<f64>>(),
        ),
        col("metric", os(|r| r.metric.map(Metric::name))),
        col("value", of(|r| r.value)),
        col(
            "higher_is_better",
            records
                .iter()
                .map(|r| r.higher_is_better)
                .collect::<Vec<Option<bool>>>(),
        ),
    ];
    let metrics = Metric::ALL.into_iter().map(|m| {
        col(
            m.name(),
            records
                .iter()
                .map(|r| r.get(m))
                .collect::<Vec<Option<f64>>>(),
        )
    });
    columns.extend(metrics);
    let ou = |f: fn(&Record) -> Option<u64>| records.iter().map(f).collect::<Vec<Option<u64>>>();
    columns.extend([
        col(
            "steal_ticks_before",
            ou(|r| r.conditions.steal_ticks_before),
        ),
        col("steal_ticks_after", ou(|r| r.conditions.steal_ticks_after)),
        col("steal_s", of(|r| r.conditions.steal_s)),
        col("uptime_s", of(|r| r.conditions.uptime_s)),
        col("effective_mhz", of(|r| r.conditions.effective_mhz)),
        col("freq_source", os(|r| r.conditions.freq_source.as_deref())),
        col("cpu_busy_s", of(|r| r.conditions.cpu_busy_s)),
        col(
            "ena_bw_in_allowance_exceeded",
            ou(|r| r.conditions.ena_bw_in_allowance_exceeded),
        ),
        col(
            "ena_bw_out_allowance_exceeded",
            ou(|r| r.conditions.ena_bw_out_allowance_exceeded),
        ),
        col(
            "ena_pps_allowance_exceeded",
            ou(|r| r.conditions.ena_pps_allowance_exceeded),
        ),
        col(
            "ena_conntrack_allowance_exceeded",
            ou(|r| r.conditions.ena_conntrack_allowance_exceeded),
        ),
        col(
            "ena_linklocal_allowance_exceeded",
            ou(|r| r.conditions.ena_linklocal_allowance_exceeded),
        ),
    ]);
    columns.push(col("hdr_log", os(|r| r.hdr_log.as_deref())));
    // Not a flat column of the format (a list's neighbor in the record): the
    // technologies analysis picks a technology's records by it.
    columns.push(col(
        "technology",
        os(|r| r.technology.map(nnb_format::Runtime::name)),
    ));
    columns.push(col(
        "record",
        (0..records.len() as u64).collect::<Vec<u64>>(),
    ));
    DataFrame::new(records.len(), columns)
}

/// One measured record's raw `result` as `samples.jsonl` holds it, with what names
/// it: read again on demand by [`Run::each_result`] for the analyses that need more
/// of a result than its flat columns (Wang & Ng's traces and series).
#[derive(Debug, Clone)]
pub struct RawResult {
    /// 1-based line of `samples.jsonl`.
    pub line: usize,
    /// The step id.
    pub step: String,
    /// 0-based position of the step in the plan.
    pub step_index: usize,
    /// The repetition.
    pub rep: u32,
    /// The tenant the job ran on.
    pub tenant: String,
    /// Its role.
    pub role: Role,
    /// The job's kind.
    pub job: JobKind,
    /// The host-side sampler's interval and cost over its step (version 11).
    pub sampler: Option<nnb_format::HostSampler>,
    /// The raw result (`null` when the record has none).
    pub result: Value,
}

/// The fields of a record that decide whether [`Run::each_result`] wants its result,
/// read before the result itself is.
#[derive(Debug, Deserialize)]
struct ResultHead {
    step: String,
    tenant: String,
    part: usize,
    job: JobKind,
    status: SampleStatus,
    warmup: bool,
}

impl Run {
    /// Calls `keep` with the raw result of every measured record (ok, not warm-up)
    /// of the job kinds `kinds` that the run's table holds (complete steps, first
    /// copies), in file order. `samples.jsonl` is read again a bounded line at a
    /// time, and only the results of those kinds are parsed, one at a time.
    pub fn each_result(
        &self,
        kinds: &[JobKind],
        mut keep: impl FnMut(RawResult),
    ) -> Result<(), ReadError> {
        let path = self.dir.join(SAMPLES);
        let steps: std::collections::HashSet<String> = self
            .samples
            .column("step")
            .and_then(|c| Ok(c.str()?.iter().flatten().map(str::to_string).collect()))
            .map_err(|source| ReadError::Frame {
                path: path.clone(),
                source,
            })?;
        let mut seen: std::collections::HashSet<(String, String, usize)> =
            std::collections::HashSet::new();
        // Every record's key, wanted or not: the first copy is the one the table has.
        let parse = |line: &str| -> Result<(ResultHead, Option<Sample<Value>>), LineError> {
            let head: ResultHead =
                serde_json::from_str(line).map_err(|e| LineError::Invalid(e.to_string()))?;
            let wanted =
                kinds.contains(&head.job) && head.status == SampleStatus::Ok && !head.warmup;
            let full = wanted.then(|| parse_sample::<Value>(line)).transpose()?;
            Ok((head, full))
        };
        each_line(&path, parse, |line, (head, record)| {
            let first = seen.insert((head.step, head.tenant, head.part));
            let Some(r) = record.filter(|r| first && steps.contains(&r.step)) else {
                return;
            };
            keep(RawResult {
                line,
                step: r.step,
                step_index: r.step_index,
                rep: r.rep,
                tenant: r.tenant,
                role: r.role,
                job: r.job,
                sampler: r.sampler,
                result: r.result.unwrap_or(Value::Null),
            });
        })?;
        Ok(())
    }

    /// The file a sample's `hdr_log` names: a relative path of plain names whose real
    /// path (symlinks resolved) is inside the run directory's; any other is refused.
    fn hdr_path(&self, rel: &str) -> Result<PathBuf, ReadError> {
        let plain = Path::new(rel)
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if rel.is_empty() || !plain {
            return Err(refused(
                &self.dir,
                format!("hdr_log {rel:?} is not a relative path inside the run directory"),
            ));
        }
        let dir = self.dir.canonicalize().map_err(io_error(&self.dir))?;
        let path = self.dir.join(rel);
        let real = path.canonicalize().map_err(io_error(&path))?;
        if !real.starts_with(&dir) {
            return Err(refused(
                &self.dir,
                format!(
                    "hdr_log {rel:?} leads to {}, outside the run directory",
                    real.display()
                ),
            ));
        }
        Ok(real)
    }

    /// The sum of all histograms of an HDR interval log named relative to the run
    /// directory (a sample's `hdr_log`), tagged `rtt` or untagged (open-loop
    /// `rtt_intended` entries are left out). The log must be a regular file inside the
    /// run directory, of at most [`MAX_HDR_BYTES`].
    pub fn hdr(&self, rel: &str) -> Result<Histogram<u64>, ReadError> {
        let path = self.hdr_path(rel)?;
        let bytes = read_limited(&path, MAX_HDR_BYTES)?;
        let hdr_err = |message: String| ReadError::Hdr {
            path: path.clone(),
            message,
        };
        let mut sum: Option<Histogram<u64>> = None;
        let mut deserializer = Deserializer::new();
        for entry in IntervalLogIterator::new(&bytes) {
            let entry = entry.map_err(|e| hdr_err(format!("not an interval log: {e:?}")))?;
            let LogEntry::Interval(interval) = entry else {
                continue;
            };
            if interval.tag().is_some_and(|t| t.as_str() != "rtt") {
                continue;
            }
            let raw = base64::engine::general_purpose::STANDARD
                .decode(interval.encoded_histogram())
                .map_err(|e| hdr_err(format!("bad base64 histogram: {e}")))?;
            let h: Histogram<u64> = deserializer
                .deserialize(&mut raw.as_slice())
                .map_err(|e| hdr_err(format!("bad histogram: {e:?}")))?;
            match sum.as_mut() {
                Some(s) => s
                    .add(&h)
                    .map_err(|e| hdr_err(format!("cannot add histograms: {e:?}")))?,
                None => sum = Some(h),
            }
        }
        sum.ok_or_else(|| hdr_err("no `rtt` histogram in the log".to_string()))
    }

    /// The test tenant's machine as its agent reported it in the last session that
    /// has it (never the controller's, which is the operator's machine on a cloud run).
    pub fn test_topology(&self) -> Option<&TenantTopology> {
        self.manifest.test_topology.as_ref()
    }

    /// The tenants' instance type on a cloud run: the aws provider's `instance_type`,
    /// else the test tenant's.
    pub fn instance_type(&self) -> Option<String> {
        let exp = &self.manifest.experiment;
        exp.provider
            .instance_type
            .clone()
            .or_else(|| exp.tenant(Role::Test)?.instance_type.clone())
    }

    /// A short name for the run in tables: the test tenant's instance type when the
    /// experiment names one, else the experiment name, else the run id.
    pub fn label(&self) -> String {
        self.instance_type()
            .or_else(|| self.manifest.experiment_name.clone())
            .unwrap_or_else(|| self.run_id.clone())
    }
}
