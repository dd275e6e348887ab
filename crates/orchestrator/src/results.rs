//! The results of a run on disk: `<results>/<run-id>/manifest.json`, `samples.jsonl`
//! (see [`crate::journal`]) and raw HDR logs under `hdr/`.
//!
//! The record format is versioned ([`FORMAT_VERSION`]) and documented in
//! `docs/results-format.md`: one JSON object per line, one line per measured job of a
//! step, with flat metric columns so pandas, polars and duckdb read it directly.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::jobs::Health;
use crate::plan::Step;

/// Version of the manifest and sample record format (`format_version` field).
pub const FORMAT_VERSION: u32 = 1;
/// Name of the manifest file in a run directory.
pub const MANIFEST: &str = "manifest.json";
/// Name of the samples journal in a run directory.
pub const SAMPLES: &str = "samples.jsonl";

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
    let t = civil(SystemTime::now());
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z-{:06x}",
        t.0,
        t.1,
        t.2,
        t.3,
        t.4,
        t.5,
        rand::random::<u32>() & 0xff_ffff
    )
}

/// RFC 3339 UTC time with milliseconds, e.g. `2026-11-22T10:44:09.123Z`.
pub fn timestamp(at: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = civil(at);
    let ms = at
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_millis());
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
}

/// (year, month, day, hour, minute, second) in UTC (Howard Hinnant's
/// days-to-civil algorithm).
fn civil(at: SystemTime) -> (i64, u32, u32, u32, u32, u32) {
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        (rem % 3600 / 60) as u32,
        (rem % 60) as u32,
    )
}

/// Whether a sample measured something or records a failed step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SampleStatus {
    /// The job ended with a result.
    Ok,
    /// The step failed (after any retries); `error` says why.
    Failed,
}

/// One line of `samples.jsonl`: one measured job of one step (format version 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Record format version ([`FORMAT_VERSION`]).
    pub format_version: u32,
    /// The run.
    pub run_id: String,
    /// Stable step id, e.g. `busy/neighbors=2/rep=3`.
    pub step: String,
    /// 0-based position of the step in the plan.
    pub step_index: usize,
    /// 1-based index of this record among the step's records.
    pub part: usize,
    /// How many records the step has (a step is complete when all are written).
    pub parts: usize,
    /// Scenario kind, e.g. `neighbor-staircase`.
    pub scenario: String,
    /// Scenario part: `busy`, `idle`, `sweep`, `load`, `baseline`, `pair`.
    pub group: String,
    /// Numeric level (neighbors, threads, bit/s, Table 1 id).
    pub level: f64,
    /// Level label, e.g. `neighbors=2`.
    pub level_label: String,
    /// Repetition within the level (1-based).
    pub rep: u32,
    /// A warm-up repetition (leave it out of statistics).
    pub warmup: bool,
    /// The tenant the job ran on.
    pub tenant: String,
    /// `test` or `neighbor`.
    pub role: String,
    /// Job kind: `burn`, `latency`, `load`.
    pub job: String,
    /// Ok or failed.
    pub status: SampleStatus,
    /// Why the step failed.
    pub error: Option<String>,
    /// Attempts made (1 = first try succeeded).
    pub attempts: u32,
    /// Wall-clock start of the measured jobs (RFC 3339 UTC).
    pub started_at: String,
    /// Controller-side time from starting the measured jobs to collecting them, ms.
    pub elapsed_ms: f64,
    /// Name of the primary metric in `value` (e.g. `runtime_s`).
    pub metric: Option<String>,
    /// The primary metric's value.
    pub value: Option<f64>,
    /// Whether a higher `value` is better (throughput) or worse (runtime, latency).
    pub higher_is_better: Option<bool>,
    /// burn: wall time last end - first start, seconds.
    pub runtime_s: Option<f64>,
    /// burn: ops of all threads per second.
    pub ops_per_sec: Option<f64>,
    /// latency: mean RTT, ns.
    pub rtt_mean_ns: Option<f64>,
    /// latency: median RTT, ns.
    pub rtt_p50_ns: Option<f64>,
    /// latency: 90th percentile RTT, ns.
    pub rtt_p90_ns: Option<f64>,
    /// latency: 99th percentile RTT, ns.
    pub rtt_p99_ns: Option<f64>,
    /// latency: 99.9th percentile RTT, ns.
    pub rtt_p999_ns: Option<f64>,
    /// load: payload rate received by the sink (sent rate when no sink report), bit/s.
    pub rate_bps: Option<f64>,
    /// Raw HDR log of this job, relative to the run directory.
    pub hdr_log: Option<String>,
    /// The job's raw result as the agent returned it.
    pub result: Option<Value>,
}

/// Flat metrics read from a job's raw result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    /// Primary metric name.
    pub metric: Option<&'static str>,
    /// Primary metric value.
    pub value: Option<f64>,
    /// Direction of the primary metric.
    pub higher_is_better: Option<bool>,
    /// See [`Sample::runtime_s`].
    pub runtime_s: Option<f64>,
    /// See [`Sample::ops_per_sec`].
    pub ops_per_sec: Option<f64>,
    /// Mean, p50, p90, p99, p99.9 RTT in ns.
    pub rtt: [Option<f64>; 5],
    /// See [`Sample::rate_bps`].
    pub rate_bps: Option<f64>,
}

fn num(v: &Value, pointer: &str) -> Option<f64> {
    v.pointer(pointer).and_then(Value::as_f64)
}

/// Reads the metrics of a `kind` job's result. A fixed-work burn's primary metric is
/// its runtime, a fixed-time burn's its throughput; a probe's the mean RTT; a load's
/// the received rate.
pub fn metrics(kind: &str, fixed_work: bool, result: &Value) -> Metrics {
    match kind {
        "burn" => {
            let runtime_s = num(result, "/burn/wall_ns").map(|ns| ns / 1e9);
            let ops_per_sec = num(result, "/burn/ops_per_sec");
            let (metric, value, higher) = if fixed_work {
                ("runtime_s", runtime_s, false)
            } else {
                ("ops_per_sec", ops_per_sec, true)
            };
            Metrics {
                metric: Some(metric),
                value,
                higher_is_better: Some(higher),
                runtime_s,
                ops_per_sec,
                ..Metrics::default()
            }
        }
        "latency" => {
            let rtt = ["mean_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns"]
                .map(|f| num(result, &format!("/rtt/{f}")));
            Metrics {
                metric: Some("rtt_mean_ns"),
                value: rtt[0],
                higher_is_better: Some(false),
                rtt,
                ..Metrics::default()
            }
        }
        "load" => {
            let rate = num(result, "/sink/rate_bps").or_else(|| num(result, "/sent/payload_bps"));
            Metrics {
                metric: Some("rate_bps"),
                value: rate,
                higher_is_better: Some(true),
                rate_bps: rate,
                ..Metrics::default()
            }
        }
        _ => Metrics::default(),
    }
}

/// What the record of one job of a step is made of, besides the step itself.
#[derive(Debug, Clone)]
pub struct SampleParts {
    /// Tenant name.
    pub tenant: String,
    /// `test` or `neighbor`.
    pub role: String,
    /// Job kind.
    pub job: String,
    /// Ok or failed.
    pub status: SampleStatus,
    /// Why it failed.
    pub error: Option<String>,
    /// Attempts made.
    pub attempts: u32,
    /// When the measured jobs started.
    pub started_at: SystemTime,
    /// Controller-side elapsed time, ms.
    pub elapsed_ms: f64,
    /// Flat metrics.
    pub metrics: Metrics,
    /// HDR log path relative to the run directory.
    pub hdr_log: Option<String>,
    /// Raw result.
    pub result: Option<Value>,
}

impl Sample {
    /// The record for part `part` (1-based) of `parts` of `step`.
    pub fn new(
        run_id: &str,
        scenario: &str,
        step_index: usize,
        step: &Step,
        part: usize,
        parts: usize,
        p: SampleParts,
    ) -> Sample {
        let m = p.metrics;
        Sample {
            format_version: FORMAT_VERSION,
            run_id: run_id.to_string(),
            step: step.id.clone(),
            step_index,
            part,
            parts,
            scenario: scenario.to_string(),
            group: step.group.clone(),
            level: step.level,
            level_label: step.level_label.clone(),
            rep: step.rep,
            warmup: step.warmup,
            tenant: p.tenant,
            role: p.role,
            job: p.job,
            status: p.status,
            error: p.error,
            attempts: p.attempts,
            started_at: timestamp(p.started_at),
            elapsed_ms: p.elapsed_ms,
            metric: m.metric.map(str::to_string),
            value: m.value,
            higher_is_better: m.higher_is_better,
            runtime_s: m.runtime_s,
            ops_per_sec: m.ops_per_sec,
            rtt_mean_ns: m.rtt[0],
            rtt_p50_ns: m.rtt[1],
            rtt_p90_ns: m.rtt[2],
            rtt_p99_ns: m.rtt[3],
            rtt_p999_ns: m.rtt[4],
            rate_bps: m.rate_bps,
            hdr_log: p.hdr_log,
            result: p.result,
        }
    }
}

/// Where one tenant ran, as the provider placed it and its agent reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantRecord {
    /// Name.
    pub name: String,
    /// `test`, `neighbor` or `endpoint`.
    pub role: String,
    /// Agent address.
    pub addr: String,
    /// CPUs the provider pinned it to.
    pub cpus: Vec<usize>,
    /// Network namespace (emulated network).
    pub netns: Option<String>,
    /// IP in the emulated network.
    pub ip: Option<String>,
    /// What the agent said about itself (version, topology, allowed CPUs).
    pub health: Option<Health>,
}

/// One start or resume of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// When it started (RFC 3339 UTC).
    pub started_at: String,
    /// When it ended, if it did.
    pub finished_at: Option<String>,
    /// `running`, `completed`, `interrupted`, `aborted` or `failed`.
    pub status: String,
    /// The controller's command line.
    pub command: Vec<String>,
    /// The tenants of this session's fleet.
    pub tenants: Vec<TenantRecord>,
    /// Provider warnings (e.g. tenants sharing CPUs).
    pub warnings: Vec<String>,
    /// Process ids of the agents this session started (local provider), so anyone
    /// can check that none outlived the run.
    pub agent_pids: Vec<u32>,
    /// Steps measured (ok or failed) in this session.
    pub steps_run: usize,
    /// Cloud resources this session ran on (aws provider: host, instances); absent
    /// for local and static fleets and in manifests written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud: Option<crate::provider::CloudRecord>,
}

/// `manifest.json`: what was run, where and with what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Format version ([`FORMAT_VERSION`]).
    pub format_version: u32,
    /// The run id (the directory name).
    pub run_id: String,
    /// nnb version of the controller.
    pub nnb_version: String,
    /// The experiment file as named on the command line.
    pub experiment_file: String,
    /// The experiment file's text (a resume re-reads this, not the file).
    pub experiment_text: String,
    /// The checked experiment.
    pub experiment: Value,
    /// Steps in the plan.
    pub planned_steps: usize,
    /// The controller host's environment (CPU model, kernel, clocksource, ...).
    pub controller: Value,
    /// Start and resumes, in order.
    pub sessions: Vec<Session>,
}

/// A run's directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    /// `<results>/<run-id>`.
    pub path: PathBuf,
    /// The run id.
    pub run_id: String,
}

impl RunDir {
    /// Creates `<results>/<run_id>` (which must not exist yet).
    pub fn create(results: &Path, run_id: &str) -> Result<RunDir, ResultsError> {
        fs::create_dir_all(results).map_err(io_err("cannot create", results))?;
        let path = results.join(run_id);
        fs::create_dir(&path).map_err(io_err("cannot create", &path))?;
        Ok(RunDir {
            path,
            run_id: run_id.to_string(),
        })
    }

    /// Opens the existing run `run_id` under `results`.
    pub fn open(results: &Path, run_id: &str) -> Result<RunDir, ResultsError> {
        let path = results.join(run_id);
        if !path.join(MANIFEST).is_file() {
            return Err(ResultsError::Format {
                path,
                message: format!("no run `{run_id}` here (no {MANIFEST})"),
            });
        }
        Ok(RunDir {
            path,
            run_id: run_id.to_string(),
        })
    }

    /// Path of `samples.jsonl`.
    pub fn samples_path(&self) -> PathBuf {
        self.path.join(SAMPLES)
    }

    /// Writes the manifest atomically (temporary file, fsync, rename, fsync dir).
    pub fn write_manifest(&self, m: &Manifest) -> Result<(), ResultsError> {
        let tmp = self.path.join(format!("{MANIFEST}.tmp"));
        let dest = self.path.join(MANIFEST);
        let text = serde_json::to_vec_pretty(m).map_err(|e| ResultsError::Format {
            path: dest.clone(),
            message: e.to_string(),
        })?;
        let mut f = File::create(&tmp).map_err(io_err("cannot create", &tmp))?;
        f.write_all(&text).map_err(io_err("cannot write", &tmp))?;
        f.sync_all().map_err(io_err("cannot sync", &tmp))?;
        fs::rename(&tmp, &dest).map_err(io_err("cannot replace", &dest))?;
        sync_dir(&self.path)
    }

    /// Reads the manifest.
    pub fn read_manifest(&self) -> Result<Manifest, ResultsError> {
        let path = self.path.join(MANIFEST);
        let text = fs::read(&path).map_err(io_err("cannot read", &path))?;
        let m: Manifest = serde_json::from_slice(&text).map_err(|e| ResultsError::Format {
            path: path.clone(),
            message: e.to_string(),
        })?;
        if m.format_version != FORMAT_VERSION {
            return Err(ResultsError::Format {
                path,
                message: format!(
                    "format version {} is not {FORMAT_VERSION}, which this nnb writes",
                    m.format_version
                ),
            });
        }
        Ok(m)
    }

    /// Writes a raw HDR log for `tenant` at step `step_id`; returns its path relative
    /// to the run directory (`hdr/<step>.<tenant>.hlog`, `/` and `=` made safe).
    pub fn write_hdr(
        &self,
        step_id: &str,
        tenant: &str,
        log: &str,
    ) -> Result<String, ResultsError> {
        let dir = self.path.join("hdr");
        fs::create_dir_all(&dir).map_err(io_err("cannot create", &dir))?;
        let safe: String = step_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let rel = format!("hdr/{safe}.{tenant}.hlog");
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

/// fsyncs a directory so a created or renamed entry survives a crash.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), ResultsError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("cannot sync", dir))
}

/// One line of a run's summary: the test tenant's primary metric at one level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryRow {
    /// Scenario part (`busy`, `idle`, `sweep`, `load`, `baseline`, `pair`).
    pub group: String,
    /// Level label.
    pub level_label: String,
    /// Numeric level.
    pub level: f64,
    /// The primary metric's name (e.g. `runtime_s`).
    pub metric: Option<String>,
    /// Measured repetitions that succeeded (warm-ups excluded).
    pub n: usize,
    /// Repetitions recorded as failed.
    pub failed: usize,
    /// Mean of the metric.
    pub mean: Option<f64>,
    /// Sample standard deviation of the metric.
    pub stddev: Option<f64>,
    /// Degradation against the reference level in percent, positive = worse:
    /// `(t_k - t_0) / t_0 * 100` for runtimes and latencies (thesis), `(p_a - p_b) /
    /// p_a * 100` for throughputs (Volpert's I_plr). The reference is the group's
    /// first level; for isolation-matrix pairs, tenant a's baseline in the same state.
    pub degradation_pct: Option<f64>,
    /// Load-steps: the neighbors' aggregate received load, bit/s (per repetition the
    /// sum over neighbors, then the mean over repetitions).
    pub neighbor_load_bps: Option<f64>,
}

/// Mean over a level's measured repetitions of the neighbors' summed `rate_bps`.
fn neighbor_load(samples: &[Sample], group: &str, label: &str) -> Option<f64> {
    let mut per_step: Vec<(&str, f64)> = Vec::new();
    let loads = samples.iter().filter(|s| {
        s.role == "neighbor" && !s.warmup && s.group == group && s.level_label == label
    });
    for s in loads {
        let Some(rate) = s.rate_bps else { continue };
        match per_step.iter_mut().find(|(id, _)| *id == s.step) {
            Some((_, sum)) => *sum += rate,
            None => per_step.push((&s.step, rate)),
        }
    }
    (!per_step.is_empty())
        .then(|| per_step.iter().map(|(_, r)| r).sum::<f64>() / per_step.len() as f64)
}

/// Summarizes the test tenant's records (role `test`, warm-ups left out) per level,
/// in plan order.
pub fn summarize(samples: &[Sample]) -> Vec<SummaryRow> {
    struct Acc {
        row: SummaryRow,
        values: Vec<f64>,
        higher_is_better: bool,
    }
    let mut order: Vec<Acc> = Vec::new();
    for s in samples.iter().filter(|s| s.role == "test" && !s.warmup) {
        let i = match order
            .iter()
            .position(|a| a.row.group == s.group && a.row.level_label == s.level_label)
        {
            Some(i) => i,
            None => {
                order.push(Acc {
                    row: SummaryRow {
                        group: s.group.clone(),
                        level_label: s.level_label.clone(),
                        level: s.level,
                        metric: None,
                        n: 0,
                        failed: 0,
                        mean: None,
                        stddev: None,
                        degradation_pct: None,
                        neighbor_load_bps: None,
                    },
                    values: Vec::new(),
                    higher_is_better: false,
                });
                order.len() - 1
            }
        };
        let acc = &mut order[i];
        match (s.status, s.value) {
            (SampleStatus::Ok, Some(v)) => {
                acc.values.push(v);
                acc.row.metric = s.metric.clone();
                acc.higher_is_better = s.higher_is_better.unwrap_or(false);
            }
            _ => acc.row.failed += 1,
        }
    }
    for acc in &mut order {
        let n = acc.values.len();
        acc.row.n = n;
        if n > 0 {
            let mean = acc.values.iter().sum::<f64>() / n as f64;
            acc.row.mean = Some(mean);
            if n > 1 {
                let var =
                    acc.values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
                acc.row.stddev = Some(var.sqrt());
            }
        }
    }
    for acc in &mut order {
        acc.row.neighbor_load_bps = neighbor_load(samples, &acc.row.group, &acc.row.level_label);
    }
    let reference = |row: &SummaryRow| -> Option<f64> {
        let found = if row.group == "pair" {
            let a_state = row.level_label.split(',').next().unwrap_or_default();
            order
                .iter()
                .find(|a| a.row.group == "baseline" && a.row.level_label == a_state)
        } else {
            order.iter().find(|a| a.row.group == row.group)
        };
        found.and_then(|a| a.row.mean)
    };
    let degradations: Vec<Option<f64>> = order
        .iter()
        .map(|a| {
            let (r, v) = (reference(&a.row)?, a.row.mean?);
            if r == 0.0 || (a.row.group == "baseline") {
                return None;
            }
            Some(if a.higher_is_better {
                (r - v) / r * 100.0
            } else {
                (v - r) / r * 100.0
            })
        })
        .collect();
    order
        .into_iter()
        .zip(degradations)
        .map(|(mut a, d)| {
            a.row.degradation_pct = d;
            a.row
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_utc_rfc3339() {
        let t = UNIX_EPOCH + Duration::from_millis(1_795_344_249_123);
        assert_eq!(timestamp(t), "2026-11-22T10:44:09.123Z");
        assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn run_ids_sort_by_time_and_differ() {
        let (a, b) = (new_run_id(), new_run_id());
        assert_eq!(a.len(), "20261122T104409Z-3f9a2c".len());
        assert_ne!(a, b);
    }

    fn sample(group: &str, label: &str, value: f64, higher: bool) -> Sample {
        let step = Step {
            id: format!("{group}/{label}/rep=1"),
            group: group.to_string(),
            level: 0.0,
            level_label: label.to_string(),
            rep: 1,
            warmup: false,
            background: Vec::new(),
            measure: Vec::new(),
            estimate: None,
        };
        let metrics = Metrics {
            metric: Some("m"),
            value: Some(value),
            higher_is_better: Some(higher),
            ..Metrics::default()
        };
        Sample::new(
            "r",
            "s",
            0,
            &step,
            1,
            1,
            SampleParts {
                tenant: "test".into(),
                role: "test".into(),
                job: "burn".into(),
                status: SampleStatus::Ok,
                error: None,
                attempts: 1,
                started_at: SystemTime::now(),
                elapsed_ms: 0.0,
                metrics,
                hdr_log: None,
                result: None,
            },
        )
    }

    #[test]
    fn summary_degradation_against_the_first_level_and_the_baseline() {
        let rows = summarize(&[
            sample("busy", "neighbors=0", 2.0, false),
            sample("busy", "neighbors=0", 2.0, false),
            sample("busy", "neighbors=1", 2.5, false),
            sample("baseline", "a=saturated", 100.0, true),
            sample("pair", "a=saturated,b=unrestricted", 90.0, true),
        ]);
        assert_eq!(rows.len(), 4);
        assert_eq!((rows[0].n, rows[0].degradation_pct), (2, Some(0.0)));
        assert_eq!(rows[1].degradation_pct, Some(25.0));
        assert_eq!(rows[2].degradation_pct, None);
        assert_eq!(rows[3].degradation_pct, Some(10.0));
    }

    #[test]
    fn burn_metrics_follow_the_work_mode() {
        let r = serde_json::json!({"burn": {"wall_ns": 2.5e9, "ops_per_sec": 400.0}});
        let fixed = metrics("burn", true, &r);
        assert_eq!((fixed.metric, fixed.value), (Some("runtime_s"), Some(2.5)));
        let timed = metrics("burn", false, &r);
        assert_eq!(
            (timed.metric, timed.value),
            (Some("ops_per_sec"), Some(400.0))
        );
    }
}
