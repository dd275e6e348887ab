//! One round's values: what its run measured, one value per measured repetition of
//! each measure.

use nnb_format::Metric;
use nnb_units::DisplayUnit;
use polars::prelude::DataFrame;

use super::Measure;
use crate::read::Run;
use crate::tables::AnalysisError;
use crate::wang_ng::{wang_ng, PairNumbers};

/// What a round's run measured.
#[derive(Debug, Clone, Default)]
pub(super) struct RunValues {
    /// Each measure with the value of each measured repetition.
    pub measures: Vec<(Measure, Vec<f64>)>,
    /// Hops between the pair, mean over the repetitions that recorded them.
    pub hops: Option<f64>,
}

impl RunValues {
    /// Adds `value` to measure `measure` (by name), adding the measure if new.
    fn push(&mut self, measure: Measure, value: f64) {
        match self
            .measures
            .iter_mut()
            .find(|(m, _)| m.name == measure.name)
        {
            Some((_, values)) => values.push(value),
            None => self.measures.push((measure, vec![value])),
        }
    }
}

/// A seed's number of the pair suite: its measure and how to read it.
struct PairMeasure {
    name: &'static str,
    unit: DisplayUnit,
    /// The power of the unit's prefix step a table shows it in.
    power: i32,
    decimals: usize,
    log_x: bool,
    key: bool,
    get: fn(&PairNumbers) -> Option<f64>,
}

/// Milliseconds, as the seed gives times, of values in ns.
const MS: i32 = -1;
/// Mbit/s of values in bit/s.
const MBIT: i32 = 2;
/// MiB of values in bytes.
const MIB: i32 = 2;

/// The seed's numbers per pair, in the per-pair table's order: Fig 2 (CPU share)
/// and Figs 3/4 (throughput) on a linear axis, Fig 8 (RTT statistics) and Fig 10
/// (loss) on a logarithmic one, as the seed draws them.
const PAIR_MEASURES: [PairMeasure; 16] = {
    const fn m(
        name: &'static str,
        unit: DisplayUnit,
        power: i32,
        decimals: usize,
        log_x: bool,
        key: bool,
        get: fn(&PairNumbers) -> Option<f64>,
    ) -> PairMeasure {
        PairMeasure {
            name,
            unit,
            power,
            decimals,
            log_x,
            key,
            get,
        }
    }
    let (pct, ns, bps) = (
        DisplayUnit::PERCENT_CPU,
        DisplayUnit::NANOSECONDS,
        DisplayUnit::BITS_PER_SECOND,
    );
    [
        m("CPU share test side", pct, 0, 1, false, true, |p| {
            p.share_test
        }),
        m("CPU share other side", pct, 0, 1, false, true, |p| {
            p.share_other
        }),
        m("longest gap test side", ns, MS, 2, false, true, |p| {
            p.longest_gap_ns
        }),
        m("RTT min", ns, MS, 3, true, true, |p| p.rtt?.min),
        m("RTT median", ns, MS, 3, true, true, |p| p.rtt?.median),
        m("RTT mean", ns, MS, 3, true, true, |p| p.rtt?.mean),
        m("RTT p99", ns, MS, 3, true, true, |p| p.rtt?.p99),
        m("RTT max", ns, MS, 3, true, true, |p| p.rtt?.max),
        m("RTT std", ns, MS, 3, true, false, |p| p.rtt?.std),
        m("TCP throughput", bps, MBIT, 1, false, true, |p| p.tcp_bps),
        m("UDP throughput", bps, MBIT, 1, false, true, |p| p.udp_bps),
        m("TCP fine-grained lowest", bps, MBIT, 1, false, false, |p| {
            p.tcp_fine_min_bps
        }),
        m("UDP fine-grained lowest", bps, MBIT, 1, false, false, |p| {
            p.udp_fine_min_bps
        }),
        m(
            "largest buffer burst",
            DisplayUnit::BYTES,
            MIB,
            3,
            false,
            false,
            |p| p.burst_bytes,
        ),
        m(
            "loss frequency",
            DisplayUnit::PERCENT,
            0,
            3,
            true,
            true,
            |p| p.loss_frequency_pct,
        ),
        m(
            "probe loss rate",
            DisplayUnit::PERCENT,
            0,
            3,
            true,
            true,
            |p| p.probe_loss_pct,
        ),
    ]
};

impl PairMeasure {
    fn measure(&self) -> Measure {
        Measure {
            name: self.name.to_string(),
            unit: self.unit,
            table: self.unit.at(self.power),
            decimals: self.decimals,
            log_x: self.log_x,
            key: self.key,
        }
    }
}

/// Whether the seed draws a metric's CDF on a logarithmic x axis (Fig 8: RTT
/// statistics; Fig 10: loss).
fn seed_log_x(metric: Metric) -> bool {
    Metric::RTT.contains(&metric)
        || matches!(
            metric,
            Metric::RttMinNs
                | Metric::RttMaxNs
                | Metric::RttStdNs
                | Metric::LossFrequencyPct
                | Metric::ProbeLossPct
        )
}

/// What `run` measured: the seed's numbers per repetition of a pair suite run, else
/// every metric of the test tenant per group and level.
pub(super) fn run_values(run: &Run) -> Result<RunValues, AnalysisError> {
    let mut out = RunValues::default();
    let pairs = wang_ng(run)?.map(|w| w.pair_numbers()).unwrap_or_default();
    if !pairs.is_empty() {
        for p in &pairs {
            for pm in &PAIR_MEASURES {
                if let Some(v) = (pm.get)(p).filter(|v| v.is_finite()) {
                    out.push(pm.measure(), v);
                }
            }
        }
        let hops: Vec<f64> = pairs.iter().filter_map(|p| p.hops).collect();
        out.hops = nnb_format::stats::Summary::of(&hops).map(|s| s.mean);
        return Ok(out);
    }
    test_metrics(run, &mut out).map_err(|source| AnalysisError::Polars {
        run: run.run_id.clone(),
        source,
    })?;
    Ok(out)
}

/// Every metric of the test tenant's measured records (ok, not warm-up), per group
/// and level, one value per record; the hops of every record that has them, mean.
fn test_metrics(run: &Run, out: &mut RunValues) -> polars::error::PolarsResult<()> {
    let df: &DataFrame = &run.samples;
    let text = |name: &str| -> polars::error::PolarsResult<Vec<Option<String>>> {
        Ok(df
            .column(name)?
            .str()?
            .iter()
            .map(|s| s.map(str::to_string))
            .collect())
    };
    let (group, level, role, status, primary) = (
        text("group")?,
        text("level_label")?,
        text("role")?,
        text("status")?,
        text("metric")?,
    );
    let warmup: Vec<Option<bool>> = df.column("warmup")?.bool()?.iter().collect();
    let mut columns = Vec::new();
    for metric in Metric::ALL {
        let values: Vec<Option<f64>> = df.column(metric.name())?.f64()?.iter().collect();
        columns.push((metric, values));
    }
    let is = |v: &Option<String>, want: &str| v.as_deref() == Some(want);
    let mut hops = Vec::new();
    for row in 0..df.height() {
        if !(is(&role[row], "test") && is(&status[row], "ok") && warmup[row] == Some(false)) {
            continue;
        }
        let at = format!(
            "{} {}",
            group[row].as_deref().unwrap_or("?"),
            level[row].as_deref().unwrap_or("?")
        );
        for (metric, values) in &columns {
            let Some(v) = values[row].filter(|v| v.is_finite()) else {
                continue;
            };
            if *metric == Metric::Hops {
                hops.push(v);
            }
            let unit = metric.quantity().display_unit();
            let measure = Measure {
                name: format!("{at} {}", metric.name()),
                unit,
                table: unit.table(),
                decimals: metric.decimals(),
                log_x: seed_log_x(*metric),
                key: is(&primary[row], metric.name()),
            };
            out.push(measure, v);
        }
    }
    out.hops = nnb_format::stats::Summary::of(&hops).map(|s| s.mean);
    Ok(())
}
