//! Latency under neighbor load (thesis 6.2, figures 6.5 and 6.6): for each load
//! level, the load generator runs on its own threads toward the load target while
//! the probe measures, and the level's latency statistics are set beside the load
//! actually achieved.
//!
//! The thesis stepped iPerf3 neighbors up in 1 Gbit/s steps and ran sockperf
//! ping-pong at each step; it reports the mean and how far the 90th and 99.9th
//! percentiles lie above the mean (41 us and 100 us on average on m5). A level here
//! is: start the load, probe (its warm-up doubles as the load's settling time),
//! stop the load, collect the sender's and the sink's views.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;
use thiserror::Error;

use crate::hist::LatencySummary;
use crate::load::{self, LoadConfig, LoadError, LoadReport};
use crate::probe::{self, Interval, ProbeConfig, ProbeError, ProbeLength, ProbeReport};
use nnb_units::Rate;

/// Settings of a stepped neighbor-load experiment.
#[derive(Debug, Clone)]
pub struct NeighborConfig {
    /// The probe run at every level.
    pub probe: ProbeConfig,
    /// The neighbor load; its `rate` is replaced by each level and its `duration`
    /// by the probe's length (the load is stopped when the probe ends).
    pub load: LoadConfig,
    /// Aggregate load levels; a zero level probes without load (the baseline).
    pub levels: Vec<Rate>,
}

/// Latency percentiles' distance above the mean (figure 6.6), nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AboveMean {
    /// The probe's figure these are computed from: `"rtt"` (ping-pong) or
    /// `"rtt_intended"` (open loop: from each ping's intended send time, corrected
    /// for coordinated omission).
    pub series: &'static str,
    /// p50 - mean (negative when the median is below the mean).
    pub p50_ns: f64,
    /// p90 - mean.
    pub p90_ns: f64,
    /// p99 - mean.
    pub p99_ns: f64,
    /// p99.9 - mean.
    pub p999_ns: f64,
}

/// One level's result.
#[derive(Debug, Clone, Serialize)]
pub struct LevelResult {
    /// Aggregate load asked for, payload bit/s.
    pub target_bps: f64,
    /// Load the senders achieved, payload bit/s (0 without load).
    pub sent_bps: f64,
    /// Load the sink received, payload bit/s, when the load target is an nnb sink.
    pub received_bps: Option<f64>,
    /// The probe's result at this level.
    pub probe: ProbeReport,
    /// RTT percentiles' distance above the mean RTT, of the series
    /// [`LevelResult::latency`] says.
    pub above_mean: AboveMean,
    /// The load generator's full result (absent at a zero level).
    pub load: Option<LoadReport>,
}

/// Why a neighbor-load run failed.
#[derive(Debug, Error)]
pub enum NeighborError {
    /// The probe failed.
    #[error("probe: {0}")]
    Probe(#[from] ProbeError),
    /// The load generator failed.
    #[error("neighbor load: {0}")]
    Load(#[from] LoadError),
    /// No level was given.
    #[error("no load level given")]
    NoLevels,
}

/// Runs every level in turn; `on_level` sees each result as it completes and
/// `on_interval` the probe's intervals. `stop` ends the run after the current level.
pub fn run(
    cfg: &NeighborConfig,
    stop: &AtomicBool,
    on_level: &mut dyn FnMut(&LevelResult),
    on_interval: &mut (dyn FnMut(&Interval<'_>) + Send),
) -> Result<Vec<LevelResult>, NeighborError> {
    if cfg.levels.is_empty() {
        return Err(NeighborError::NoLevels);
    }
    cfg.probe.validate()?;
    let mut results = Vec::with_capacity(cfg.levels.len());
    for &level in &cfg.levels {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let r = run_level(cfg, level, stop, on_interval)?;
        on_level(&r);
        results.push(r);
    }
    Ok(results)
}

/// One level: load on its own threads, the probe on this one.
fn run_level(
    cfg: &NeighborConfig,
    level: Rate,
    stop: &AtomicBool,
    on_interval: &mut (dyn FnMut(&Interval<'_>) + Send),
) -> Result<LevelResult, NeighborError> {
    let target_bps = level.bits_per_sec(cfg.load.msg_size);
    let (probe, load) = if level.is_zero() {
        (probe::run(&cfg.probe, stop, on_interval)?, None)
    } else {
        let load_cfg = LoadConfig {
            rate: Some(level),
            duration: load_duration(&cfg.probe),
            ..cfg.load.clone()
        };
        load_cfg.validate()?;
        let load_stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let loader = s.spawn(|| load::run(&load_cfg, &load_stop));
            let probed = probe::run(&cfg.probe, stop, on_interval);
            load_stop.store(true, Ordering::Relaxed);
            let loaded = loader
                .join()
                .map_err(|_| NeighborError::Load(LoadError::Panicked(0)))?;
            Ok::<_, NeighborError>((probed?, Some(loaded?)))
        })?
    };
    Ok(LevelResult {
        target_bps,
        sent_bps: load.as_ref().map_or(0.0, |l| l.sent.payload_bps),
        received_bps: load
            .as_ref()
            .and_then(|l| l.sink.as_ref().map(|s| s.rate_bps)),
        above_mean: above_mean(&probe),
        probe,
        load,
    })
}

impl LevelResult {
    /// The level's latency: in open loop the RTT from the intended send time (what
    /// a client on that schedule waits, coordinated omission corrected), else the
    /// RTT. The one the level's line, table and [`AboveMean`] show.
    pub fn latency(&self) -> (&'static str, &LatencySummary) {
        latency_of(&self.probe)
    }
}

/// See [`LevelResult::latency`].
fn latency_of(probe: &ProbeReport) -> (&'static str, &LatencySummary) {
    match &probe.rtt_intended {
        Some(intended) => ("rtt_intended", intended),
        None => ("rtt", &probe.rtt),
    }
}

/// The percentiles' distance above the mean of the probe's level latency.
fn above_mean(probe: &ProbeReport) -> AboveMean {
    let (series, s) = latency_of(probe);
    let above = |v: u64| v as f64 - s.mean_ns;
    AboveMean {
        series,
        p50_ns: above(s.p50_ns),
        p90_ns: above(s.p90_ns),
        p99_ns: above(s.p99_ns),
        p999_ns: above(s.p999_ns),
    }
}

/// Longest the probe can take: the load runs that long unless stopped sooner.
fn load_duration(p: &ProbeConfig) -> Duration {
    let measuring = match p.length {
        ProbeLength::Duration(d) => d + p.timeout,
        ProbeLength::Count(n) => p
            .timeout
            .saturating_mul(u32::try_from(n).unwrap_or(u32::MAX)),
    };
    (p.warmup + measuring + Duration::from_secs(1)).min(Duration::from_secs(24 * 3600))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::ProbeCounts;

    fn summary(mean_ns: f64, p: [u64; 4]) -> LatencySummary {
        LatencySummary {
            count: 100,
            mean_ns,
            p50_ns: p[0],
            p90_ns: p[1],
            p99_ns: p[2],
            p999_ns: p[3],
            ..LatencySummary::default()
        }
    }

    fn report(rtt_intended: Option<LatencySummary>) -> ProbeReport {
        let rtt = summary(100_000.0, [90_000, 150_000, 200_000, 300_000]);
        ProbeReport {
            target: "127.0.0.1:9000".into(),
            mode: if rtt_intended.is_some() {
                "open-loop"
            } else {
                "ping-pong"
            },
            rate_pps: rtt_intended.map(|_| 1000.0),
            msg_size: 64,
            busy_poll: false,
            elapsed_s: 1.0,
            warmup_pings: 0,
            counts: ProbeCounts::default(),
            rtt,
            rtt_intended,
            rtt_half: rtt.halved(),
            clamped: 0,
            recv_buffer: None,
            reply_ttl: None,
        }
    }

    #[test]
    fn open_loop_levels_use_the_intended_time_rtt() {
        // A stalled reflector: pings queue behind it, so from their intended send
        // times they waited far longer (mean 1 ms) than from their actual sends.
        let intended = summary(1_000_000.0, [500_000, 2_000_000, 5_000_000, 9_000_000]);
        let a = above_mean(&report(Some(intended)));
        assert_eq!(
            a,
            AboveMean {
                series: "rtt_intended",
                p50_ns: -500_000.0,
                p90_ns: 1_000_000.0,
                p99_ns: 4_000_000.0,
                p999_ns: 8_000_000.0,
            }
        );
        let a = above_mean(&report(None));
        assert_eq!(
            a,
            AboveMean {
                series: "rtt",
                p50_ns: -10_000.0,
                p90_ns: 50_000.0,
                p99_ns: 100_000.0,
                p999_ns: 200_000.0,
            }
        );
    }
}
