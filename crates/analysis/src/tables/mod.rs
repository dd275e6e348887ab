//! The analyses of a run, each a typed result (what plots need) that renders to
//! [`Table`]s: degradation per step, what the background neighbors achieved,
//! thread-sweep knees, the isolation matrix, latency vs neighbor load and per-node
//! throughput. Each `fn` returns `Ok(None)` when the run's scenario does not support
//! it.

mod background;
mod credits;
mod degradation;
mod fairness;
mod isolation;
mod knees;
mod latency;
mod metal_gap;
mod node_throughput;
mod sampler;
mod technologies;
mod throughput;
mod tidy;
mod verdict;

pub use background::{achieved_background, AchievedBackground, BackgroundLevel};
pub use credits::{credit_findings, credits, CreditLevel, Credits, LOW_CREDIT_SHARE};
pub use degradation::{
    degradation, summary_table, Degradation, GroupLevels, LevelStats, ThreadBasis,
};
pub use fairness::{FairPair, Fairness, PairTenant, Verdict, FAIRNESS_TOLERANCE_PP};
pub use isolation::{
    isolation, Isolation, IsolationBaseline, IsolationPair, PmaxSource, ScenarioShare,
};
pub use knees::{knees, KneeNoise, KneeStep, Knees};
pub use latency::{latency_vs_load, LatencyLevel, LatencyVsLoad, RunMeans, STATISTICS};
pub(crate) use metal_gap::busy_threads;
pub use metal_gap::{metal_gap, metal_gap_tables, pair_name, GapLevel, MetalGap};
pub use node_throughput::{
    measured_degradation_pct, node_throughput, predicted_degradation_pct, NodeLevel,
    NodeThroughput, StaircaseDegradation,
};
pub use sampler::{host_sampler, SamplerCost};
pub use technologies::{technologies, Technologies, TechnologyIsolation};
pub use throughput::{throughput, NodeRates, Prediction, Throughput, ThroughputLevel};
pub use tidy::tidy;
pub use verdict::{
    findings, verdict_table, ReceiverDrops, BASELINE_DRIFT_PCT, FREQ_DROP, LOAD_SHORTFALL, NOISY_CV,
};

use nnb_format::quality::Quality;
use nnb_format::{JobKind, Metric, MetricValues, Role, SampleStatus, StepGroup};
use polars::error::PolarsError;
use polars::prelude::{col, lit, IntoLazy, SortMultipleOptions};

use crate::read::{ReadError, Run, Scenario};
use crate::table::Table;
use crate::wang_ng::{wang_ng, WangNg};

/// Why an analysis failed.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    /// A file the analysis needs (an HDR log) could not be loaded.
    #[error(transparent)]
    Load(#[from] ReadError),
    /// A polars query failed.
    #[error("querying the samples of run {run}: {source}")]
    Polars {
        /// The run id.
        run: String,
        /// The polars error.
        #[source]
        source: polars::error::PolarsError,
    },
    /// The samples contradict the format (e.g. a level without a reference).
    #[error("run {run}: {message}")]
    Data {
        /// The run id.
        run: String,
        /// What is wrong.
        message: String,
    },
}

impl AnalysisError {
    /// Whether the error is the user's to fix: a file of the run that cannot be read
    /// as it is (see [`ReadError::is_bad_input`]: an `hdr_log` refused, like a refused
    /// `samples.jsonl`) or samples that contradict the format; not a failed query.
    pub fn is_bad_input(&self) -> bool {
        match self {
            AnalysisError::Load(e) => e.is_bad_input(),
            AnalysisError::Data { .. } => true,
            AnalysisError::Polars { .. } => false,
        }
    }
}

/// Every table the run's scenario supports, in a fixed order (degradation, achieved
/// background, knees, isolation, latency, throughput, Wang & Ng's), then the run's
/// verdict. The
/// first table's notes also carry what loading tolerated and how many failed steps
/// were left out.
pub fn run_tables(run: &Run) -> Result<Vec<Table>, AnalysisError> {
    Ok(Analyses::of(run)?.tables(run))
}

/// Every analysis a run supports, computed once: what both its tables and its plots
/// are made of.
#[derive(Debug, Clone)]
pub struct Analyses {
    /// Degradation per level ([`degradation`]).
    pub degradation: Option<Degradation>,
    /// What the background neighbors achieved per level ([`achieved_background`]).
    pub background: Option<AchievedBackground>,
    /// Thread-sweep knees ([`knees`]).
    pub knees: Option<Knees>,
    /// Isolation-matrix metrics ([`isolation`]); `None` for a matrix over
    /// technologies, analysed per technology instead.
    pub isolation: Option<Isolation>,
    /// An isolation matrix over technologies, per technology ([`technologies`]).
    pub technologies: Option<Technologies>,
    /// b's degradation and Krebs' fairness of the isolation matrix ([`Fairness`]);
    /// `None` without b's baselines (runs before version 11).
    pub fairness: Option<Fairness>,
    /// The host-side sampler's interval and CPU cost ([`host_sampler`]).
    pub sampler: Option<SamplerCost>,
    /// Latency vs aggregate neighbor load ([`latency_vs_load`]).
    pub latency: Option<LatencyVsLoad>,
    /// Per-node throughput ([`throughput`]).
    pub throughput: Option<Throughput>,
    /// Every node's throughput as nodes join ([`node_throughput`]).
    pub node_throughput: Option<NodeThroughput>,
    /// Wang & Ng's instruments and the per-pair table ([`crate::wang_ng::wang_ng`]).
    pub wang_ng: Option<WangNg>,
    /// Burst credits per level and tenant ([`credits`]).
    pub credits: Option<Credits>,
    /// Steps that failed after their retries (left out of every statistic).
    failed: usize,
    /// The run's verdict ([`findings`]): what qualifies its numbers.
    pub verdict: Vec<String>,
}

impl Analyses {
    /// Runs every analysis `run`'s scenario supports.
    pub fn of(run: &Run) -> Result<Analyses, AnalysisError> {
        let technologies = technologies(run)?;
        let mut a = Analyses {
            degradation: degradation(run)?,
            background: achieved_background(run)?,
            knees: knees(run)?,
            isolation: match technologies {
                Some(_) => None,
                None => isolation(run)?,
            },
            technologies,
            fairness: None,
            sampler: host_sampler(run)?,
            latency: latency_vs_load(run)?,
            throughput: throughput(run)?,
            node_throughput: node_throughput(run)?,
            wang_ng: wang_ng(run)?,
            credits: credits(run)?,
            failed: failed_steps(run)?,
            verdict: Vec::new(),
        };
        a.fairness = a.isolation.as_ref().and_then(Fairness::of);
        a.verdict = findings(run, &a)?;
        Ok(a)
    }

    /// The tables of these analyses of `run`, then the verdict, titled with the run,
    /// its notes (and the failed steps) under the first.
    pub fn tables(&self, run: &Run) -> Vec<Table> {
        let mut tables = Vec::new();
        tables.extend(self.degradation.as_ref().map(Degradation::table));
        tables.extend(self.background.as_ref().map(AchievedBackground::table));
        tables.extend(self.knees.as_ref().map(Knees::table));
        tables.extend(self.isolation.as_ref().map(Isolation::table));
        if let (Some(f), Some(iso)) = (&self.fairness, &self.isolation) {
            tables.push(f.table(iso));
        }
        tables.extend(self.technologies.iter().flat_map(Technologies::tables));
        for t in self.technologies.iter().flat_map(|t| &t.per) {
            if let Some(f) = Fairness::of(&t.isolation) {
                let mut table = f.table(&t.isolation);
                table.name = format!("fairness-{}", t.technology);
                table.title = format!("{} ({})", table.title, t.technology);
                tables.push(table);
            }
        }
        // The sampler's line under the isolation tables (under the first table
        // elsewhere, with the run's notes).
        let isolated = self.isolation.is_some() || self.technologies.is_some();
        if let (Some(s), true, Some(last)) = (&self.sampler, isolated, tables.last_mut()) {
            last.notes.push(s.note());
        }
        tables.extend(self.latency.as_ref().map(LatencyVsLoad::table));
        tables.extend(self.throughput.as_ref().map(Throughput::table));
        tables.extend(self.node_throughput.iter().flat_map(NodeThroughput::tables));
        tables.extend(self.wang_ng.iter().flat_map(WangNg::tables));
        tables.extend(self.credits.as_ref().map(Credits::table));
        tables.push(verdict_table(&self.verdict));
        let mut notes = run.notes.clone();
        if self.failed > 0 {
            notes.push(format!(
                "{} failed step(s) left out of the statistics",
                self.failed
            ));
        }
        let label = run.label();
        for t in &mut tables {
            t.title = format!("{} — {label} ({})", t.title, run.run_id);
        }
        if let (Some(s), false) = (&self.sampler, isolated) {
            notes.push(s.note());
        }
        if let Some(first) = tables.first_mut() {
            first.notes.extend(notes);
        }
        tables
    }
}

/// Tables comparing several runs side by side: the maximum-degradation summary per run
/// (thesis Tables 5.3-5.7) over the runs that support degradation; empty when none
/// does.
pub fn compare_tables(runs: &[Run]) -> Result<Vec<Table>, AnalysisError> {
    let mut found = Vec::new();
    for run in runs {
        if let Some(d) = degradation(run)? {
            found.push((run, d));
        }
    }
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let pairs: Vec<(&Run, &Degradation)> = found.iter().map(|(r, d)| (*r, d)).collect();
    Ok(vec![summary_table(&pairs)])
}

/// One measured record, as the analyses read it.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub step: String,
    pub group: StepGroup,
    pub level: f64,
    pub label: String,
    pub tenant: String,
    /// The step's controller-side time, seconds (`elapsed_ms`): at least the job's.
    pub step_s: f64,
    /// The measured job's kind.
    pub job: Option<JobKind>,
    pub metric: Option<Metric>,
    pub value: Option<f64>,
    pub higher_is_better: Option<bool>,
    /// Every metric column.
    pub metrics: MetricValues,
    pub hdr_log: Option<String>,
    /// The qualifiers of the record's result.
    pub quality: Quality,
}

fn polars_err(run: &Run) -> impl FnOnce(polars::error::PolarsError) -> AnalysisError + '_ {
    move |source| AnalysisError::Polars {
        run: run.run_id.clone(),
        source,
    }
}

/// Steps recorded as failed.
fn failed_steps(run: &Run) -> Result<usize, AnalysisError> {
    let df = run
        .samples
        .clone()
        .lazy()
        .filter(col("status").eq(lit(SampleStatus::Failed.name())))
        .select([col("step_index")])
        .collect()
        .map_err(polars_err(run))?;
    let steps: std::collections::HashSet<Option<u64>> = df
        .column("step_index")
        .and_then(|c| Ok(c.u64()?.iter().collect()))
        .map_err(polars_err(run))?;
    Ok(steps.len())
}

/// The group named `name` in a column of the samples (written from a typed record,
/// so an unknown name is an error, never a group of its own).
pub(crate) fn group_named(name: Option<&str>) -> Result<StepGroup, PolarsError> {
    name.and_then(StepGroup::from_name)
        .ok_or_else(|| PolarsError::ComputeError(format!("no step group named {name:?}").into()))
}

/// Every (group, level, label) that `role` has a measuring (not warm-up) record of,
/// whatever its status: the levels the plan had, including the ones that failed.
pub(crate) fn planned_levels(
    run: &Run,
    role: Role,
) -> Result<Vec<(StepGroup, f64, String)>, AnalysisError> {
    let df = run
        .samples
        .clone()
        .lazy()
        .filter(col("role").eq(lit(role.name())).and(col("warmup").not()))
        .select([col("group"), col("level"), col("level_label")])
        .unique(None, Default::default())
        .collect()
        .map_err(polars_err(run))?;
    let read = || -> Result<Vec<(StepGroup, f64, String)>, PolarsError> {
        let group = df.column("group")?.str()?;
        let level = df.column("level")?.f64()?;
        let label = df.column("level_label")?.str()?;
        let mut out = Vec::with_capacity(df.height());
        for i in 0..df.height() {
            if let (Some(level), Some(label)) = (level.get(i), label.get(i)) {
                out.push((group_named(group.get(i))?, level, label.to_string()));
            }
        }
        Ok(out)
    };
    read().map_err(polars_err(run))
}

/// The measured records (ok, not warm-up) of `role`, in plan order.
pub(crate) fn measured(run: &Run, role: Role) -> Result<Vec<Row>, AnalysisError> {
    let err = polars_err(run);
    let df = run
        .samples
        .clone()
        .lazy()
        .filter(
            col("role")
                .eq(lit(role.name()))
                .and(col("warmup").not())
                .and(col("status").eq(lit(SampleStatus::Ok.name()))),
        )
        .sort(
            ["step_index"],
            SortMultipleOptions::default().with_maintain_order(true),
        )
        .collect();
    let df = match df {
        Ok(df) => df,
        Err(e) => return Err(err(e)),
    };
    let text = |name: &str| -> Result<Vec<Option<String>>, polars::error::PolarsError> {
        Ok(df
            .column(name)?
            .str()?
            .iter()
            .map(|v| v.map(str::to_string))
            .collect())
    };
    let num = |name: &str| -> Result<Vec<Option<f64>>, polars::error::PolarsError> {
        Ok(df.column(name)?.f64()?.iter().collect())
    };
    let read = || -> Result<Vec<Row>, polars::error::PolarsError> {
        let step = text("step")?;
        let group = text("group")?
            .iter()
            .map(|g| group_named(g.as_deref()))
            .collect::<Result<Vec<StepGroup>, PolarsError>>()?;
        let level = num("level")?;
        let label = text("level_label")?;
        let tenant = text("tenant")?;
        let step_ms = num("elapsed_ms")?;
        let job: Vec<Option<JobKind>> = text("job")?
            .iter()
            .map(|j| j.as_deref().and_then(JobKind::from_name))
            .collect();
        let metric: Vec<Option<Metric>> = text("metric")?
            .iter()
            .map(|m| m.as_deref().and_then(Metric::from_name))
            .collect();
        let value = num("value")?;
        let higher: Vec<Option<bool>> = df.column("higher_is_better")?.bool()?.iter().collect();
        let columns: Vec<(Metric, Vec<Option<f64>>)> = Metric::ALL
            .into_iter()
            .map(|m| Ok((m, num(m.name())?)))
            .collect::<Result<_, polars::error::PolarsError>>()?;
        let hdr = text("hdr_log")?;
        let record: Vec<Option<u64>> = df.column("record")?.u64()?.iter().collect();
        Ok((0..df.height())
            .map(|i| Row {
                step: step[i].clone().unwrap_or_default(),
                group: group[i],
                level: level[i].unwrap_or(f64::NAN),
                label: label[i].clone().unwrap_or_default(),
                tenant: tenant[i].clone().unwrap_or_default(),
                step_s: step_ms[i].unwrap_or(f64::NAN) / 1e3,
                job: job[i],
                metric: metric[i],
                value: value[i],
                higher_is_better: higher[i],
                metrics: columns
                    .iter()
                    .fold(MetricValues::default(), |mut v, (m, c)| {
                        v.set(*m, c[i]);
                        v
                    }),
                hdr_log: hdr[i].clone(),
                quality: record[i]
                    .and_then(|r| run.qualities.get(usize::try_from(r).ok()?))
                    .cloned()
                    .unwrap_or_default(),
            })
            .collect())
    };
    read().map_err(polars_err(run))
}

/// Records of one level, in plan order.
pub(crate) struct Level<'a> {
    pub level: f64,
    pub label: String,
    pub rows: Vec<&'a Row>,
}

/// Records grouped by `group`, then by level, both in order of first appearance.
pub(crate) fn by_group(rows: &[Row]) -> Vec<(StepGroup, Vec<Level<'_>>)> {
    let mut groups: Vec<(StepGroup, Vec<Level<'_>>)> = Vec::new();
    // Each row's group and level by one look-up, not a scan of the levels (a scan
    // is quadratic in them: reliability review NL4).
    let mut index: std::collections::HashMap<(StepGroup, &str), (usize, usize)> =
        std::collections::HashMap::new();
    for row in rows {
        if let Some(&(gi, li)) = index.get(&(row.group, row.label.as_str())) {
            groups[gi].1[li].rows.push(row);
            continue;
        }
        let gi = match groups.iter().position(|(g, _)| *g == row.group) {
            Some(i) => i,
            None => {
                groups.push((row.group, Vec::new()));
                groups.len() - 1
            }
        };
        let levels = &mut groups[gi].1;
        levels.push(Level {
            level: row.level,
            label: row.label.clone(),
            rows: vec![row],
        });
        index.insert((row.group, &row.label), (gi, levels.len() - 1));
    }
    groups
}

/// Whether the run measured `scenario`.
pub(crate) fn is(run: &Run, scenario: Scenario) -> bool {
    run.manifest.scenario == scenario
}
