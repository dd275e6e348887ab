//! Writes a large load-steps run in the results format (docs/results-format.md) for
//! the `nnb analyze` benchmark (benches/analyze_big.sh): by default 1000 measured
//! steps (100 load levels x 10 repetitions), each with the latency probe and 4
//! load-generating neighbors, and 10 million RTT samples spread over one HDR interval
//! log per step (one histogram per second, compressed V2, as netlat writes them).
//!
//! Usage: `gen_big_run RESULTS_DIR [STEPS] [SAMPLES]`; prints the run directory.

use std::error::Error;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use nnb_format::Metric;
use serde_json::json;

/// Repetitions per load level.
const REPS: usize = 10;
/// Load-generating neighbors per step.
const NEIGHBORS: usize = 4;
/// One histogram per second of probing, this many seconds per step.
const SECONDS_PER_STEP: usize = 10;
/// Emulated host bandwidth, bit/s.
const HOST_BW_BPS: f64 = 10e9;
/// Run id of the generated run.
const RUN_ID: &str = "20261122T000000Z-b16b16";

/// A small deterministic generator (xorshift64*), so runs are reproducible.
struct Rng(u64);

impl Rng {
    /// Uniform in [0, 1).
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// An RTT in ns at `load` bit/s: a base that grows with load, jitter, and a 1% tail.
fn rtt_ns(rng: &mut Rng, load: f64) -> u64 {
    let base = 30_000.0 + load / HOST_BW_BPS * 120_000.0;
    let jitter = base * 0.2 * rng.next();
    let tail = if rng.next() < 0.01 {
        base * 20.0 * rng.next().powi(4)
    } else {
        0.0
    };
    (base + jitter + tail) as u64
}

/// Parses the optional positional argument `i` as a count.
fn count_arg(args: &[String], i: usize, default: usize) -> Result<usize, Box<dyn Error>> {
    match args.get(i) {
        Some(a) => Ok(a
            .replace('_', "")
            .parse()
            .map_err(|e| format!("`{a}` is not a count: {e}"))?),
        None => Ok(default),
    }
}

/// Writes the interval log of one step: `samples` RTTs over [`SECONDS_PER_STEP`]
/// one-second histograms tagged `rtt`.
fn write_hdr_log(
    path: &Path,
    rng: &mut Rng,
    load: f64,
    samples: usize,
) -> Result<(), Box<dyn Error>> {
    let mut out = BufWriter::new(File::create(path)?);
    let mut serializer = V2DeflateSerializer::new();
    let start = SystemTime::now();
    let mut log = IntervalLogWriterBuilder::new()
        .add_comment("nnb gen_big_run")
        .add_comment("[Histogram log format version 1.3]")
        .with_start_time(start)
        .with_base_time(start)
        .begin_log_with(&mut out, &mut serializer)?;
    let mut h = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3)?;
    for second in 0..SECONDS_PER_STEP {
        h.reset();
        let n = samples / SECONDS_PER_STEP + usize::from(second < samples % SECONDS_PER_STEP);
        for _ in 0..n {
            h.saturating_record(rtt_ns(rng, load));
        }
        let at = Duration::from_secs(second as u64);
        log.write_histogram(&h, at, Duration::from_secs(1), Tag::new("rtt"))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    drop(log);
    out.flush()?;
    Ok(())
}

/// Writes manifest.json.
fn write_manifest(dir: &Path, levels: &[f64], steps: usize) -> Result<(), Box<dyn Error>> {
    let mut tenants = vec![json!({"name": "probe", "role": "test", "vcpus": 1})];
    tenants.extend(
        (1..=NEIGHBORS)
            .map(|i| json!({"name": format!("neighbor-{i}"), "role": "neighbor", "vcpus": 1})),
    );
    let manifest = json!({
        "format_version": 1,
        "run_id": RUN_ID,
        "nnb_version": env!("CARGO_PKG_VERSION"),
        "experiment_file": "generated",
        "experiment_text": "",
        "experiment": {
            "name": "big-load-steps",
            "repetitions": REPS,
            "warmup": 0,
            "network": {"mode": "emulated", "host_bw_bps": HOST_BW_BPS},
            "tenants": tenants,
            "scenario": {"kind": "load-steps", "levels_bps": levels, "streams": 1, "msg_size": 1400,
                         "probe": {"duration_ms": SECONDS_PER_STEP * 1000, "warmup_ms": 0, "msg_size": 64, "busy_poll": false}},
        },
        "planned_steps": steps,
        "controller": {"topology": {"logical": 16}},
        "sessions": [{"started_at": "2026-11-22T10:00:00.000Z", "finished_at": null,
            "status": "completed", "command": ["gen_big_run"], "tenants": [],
            "warnings": [], "agent_pids": [], "steps_run": steps}],
    });
    fs::write(
        dir.join("manifest.json"),
        serde_json::to_string_pretty(&manifest)?,
    )?;
    Ok(())
}

/// Writes the run under `results` and returns its directory.
fn generate(results: &Path, steps: usize, samples: usize) -> Result<PathBuf, Box<dyn Error>> {
    let dir = results.join(RUN_ID);
    fs::create_dir_all(dir.join("hdr"))?;
    let n_levels = steps.div_ceil(REPS).max(1);
    let levels: Vec<f64> = (0..n_levels)
        .map(|i| HOST_BW_BPS * i as f64 / n_levels as f64)
        .collect();
    write_manifest(&dir, &levels, steps)?;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut out = BufWriter::new(File::create(dir.join("samples.jsonl"))?);
    for step_index in 0..steps {
        let (level_index, rep) = (step_index / REPS, step_index % REPS + 1);
        let load = levels[level_index];
        let label = format!("load={}M", (load / 1e6).round());
        let step = format!("load/{label}/rep={rep}");
        let per_step = samples / steps + usize::from(step_index < samples % steps);
        let rel = format!("hdr/{step_index}.probe.hlog");
        write_hdr_log(&dir.join(&rel), &mut rng, load, per_step)?;
        let common = |part: usize, tenant: &str, role: &str, job: &str| {
            json!({
                "format_version": 1, "run_id": RUN_ID, "step": step, "step_index": step_index,
                "part": part, "parts": NEIGHBORS + 1, "scenario": "load-steps", "group": "load",
                "level": load, "level_label": label, "rep": rep, "warmup": false,
                "tenant": tenant, "role": role, "job": job, "status": "ok", "error": null, "attempts": 1,
                "started_at": "2026-11-22T00:00:00Z", "elapsed_ms": 10_500.0,
            })
        };
        let mean = 30_000.0 + load / HOST_BW_BPS * 120_000.0;
        let mut probe = common(1, "probe", "test", "latency");
        let fields = [
            ("metric", json!(Metric::RttMeanNs.name())),
            ("value", json!(mean)),
            ("higher_is_better", json!(false)),
            (Metric::RttMeanNs.name(), json!(mean)),
            (Metric::RttP50Ns.name(), json!(mean)),
            (Metric::RttP90Ns.name(), json!(mean * 1.2)),
            (Metric::RttP99Ns.name(), json!(mean * 2.0)),
            (Metric::RttP999Ns.name(), json!(mean * 8.0)),
            ("hdr_log", json!(rel)),
        ];
        for (k, v) in fields {
            probe[k] = v;
        }
        writeln!(out, "{probe}")?;
        for node in 1..=NEIGHBORS {
            let share = load / NEIGHBORS as f64;
            let rate = share.min(HOST_BW_BPS / NEIGHBORS as f64) * (0.95 + 0.05 * rng.next());
            let mut r = common(node + 1, &format!("neighbor-{node}"), "neighbor", "load");
            for (k, v) in [
                ("metric", json!(Metric::RateBps.name())),
                ("value", json!(rate)),
                ("higher_is_better", json!(true)),
                (Metric::RateBps.name(), json!(rate)),
            ] {
                r[k] = v;
            }
            writeln!(out, "{r}")?;
        }
    }
    out.flush()?;
    Ok(dir)
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let Some(results) = args.get(1) else {
        return Err("usage: gen_big_run RESULTS_DIR [STEPS] [SAMPLES]".into());
    };
    let steps = count_arg(&args, 2, 1000)?.max(1);
    let samples = count_arg(&args, 3, 10_000_000)?;
    let dir = generate(Path::new(results), steps, samples)?;
    println!("{}", dir.display());
    Ok(())
}
