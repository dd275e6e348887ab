//! Everything the runs support, written to one directory: each table as Markdown, CSV
//! and JSON, each plot as SVG, and an `index.md` plus a self-contained `index.html`
//! that show them together, with the runs, their notes and warnings at the top.
//!
//! One run is written flat into the output directory; several runs each get a
//! sub-directory named by run id (made safe and short: `run_name`). Cross-run results
//! (a staircase beside a metal thread sweep, `--compare`) go to the top level and
//! `compare/`. The output directory must be the caller's alone (module `out`).

mod charts;
mod index;
mod out;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use nnb_format::Metric;

use crate::plot::{self, PlotError};
use crate::read::{Run, Scenario};
use crate::table::Table;
use crate::tables::{self, Analyses, AnalysisError, Degradation, Knees, LatencyVsLoad, Throughput};
use out::OutDir;

/// What to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportOptions {
    /// Output directory: created if missing, else it must be the caller's and only
    /// theirs to change (see [`ReportError::UnsafeOut`]); files in it are replaced.
    pub out: PathBuf,
    /// Also put the runs side by side: plots with series from every run, and the
    /// comparison tables.
    pub compare: bool,
}

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// An analysis failed (e.g. an unreadable HDR log).
    #[error(transparent)]
    Analysis(#[from] AnalysisError),
    /// A file or directory could not be written.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The output directory is not one only the caller can change (another user's,
    /// writable by others, reached through another user's link or directory), so
    /// writing into it could overwrite whatever files its owner's links point at.
    #[error("refusing to write the report into {path}: {why}")]
    UnsafeOut {
        /// The directory (or sub-directory) refused.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// Nothing to report on.
    #[error("no runs to report on")]
    NoRuns,
}

impl ReportError {
    /// Whether the error is the user's to fix: a run that cannot be analysed as it
    /// is (see [`AnalysisError`]), an output directory that is not safe to write, or
    /// no runs; not a failure of the machine.
    pub fn is_bad_input(&self) -> bool {
        match self {
            ReportError::Analysis(a) => a.is_bad_input(),
            ReportError::UnsafeOut { .. } | ReportError::NoRuns => true,
            ReportError::Io { .. } => false,
        }
    }
}

/// A run as the report names it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    /// The run id.
    pub run_id: String,
    /// Short name (instance type, else experiment name, else run id).
    pub label: String,
    /// The experiment's name, when it has one.
    pub experiment_name: Option<String>,
    /// The scenario, as the results format spells it (`neighbor-staircase`).
    pub scenario: &'static str,
    /// The run directory that was read.
    pub dir: PathBuf,
}

/// A plot written by the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlotFile {
    /// The chart's title.
    pub title: String,
    /// The SVG, relative to the output directory.
    pub file: PathBuf,
}

/// One part of the report: a run, the cross-run plots, or the comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// Heading.
    pub title: String,
    /// Runs it is about.
    pub runs: Vec<RunInfo>,
    /// Notes: torn tails, left-out levels, plots that could not be drawn.
    pub notes: Vec<String>,
    /// Its tables, in order.
    pub tables: Vec<Table>,
    /// Its plots, in order.
    pub plots: Vec<PlotFile>,
}

/// What was written: the sections (the CLI prints their tables) and every file.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportSummary {
    /// Sections in index order.
    pub sections: Vec<Section>,
    /// Every file written, relative to the output directory, index files last.
    pub files: Vec<PathBuf>,
}

/// The typed analyses of one run that its plots are drawn from.
struct Analysed<'r> {
    run: &'r Run,
    /// Its name in the report's files ([`run_name`]).
    name: String,
    info: RunInfo,
    analyses: Analyses,
}

impl<'r> Analysed<'r> {
    fn of(run: &'r Run, name: String) -> Result<Self, AnalysisError> {
        Ok(Analysed {
            run,
            name,
            info: RunInfo {
                run_id: run.run_id.clone(),
                label: run.label(),
                experiment_name: run.manifest.experiment_name.clone(),
                scenario: run.manifest.scenario.name(),
                dir: run.dir.clone(),
            },
            analyses: Analyses::of(run)?,
        })
    }

    fn label(&self) -> &str {
        &self.info.label
    }

    /// The metric of the run's degradation analysis (what its levels measure).
    fn metric(&self) -> Option<Metric> {
        self.analyses.degradation.as_ref().map(|d| d.metric)
    }
}

/// Collects one section's files while it is written.
struct Writer<'o> {
    out: &'o OutDir,
    /// Sub-directory of `out` for this section ("" for the top level).
    dir: PathBuf,
    section: Section,
    files: Vec<PathBuf>,
    /// Each plot's SVG text by file, for the self-contained `index.html`.
    svgs: Vec<(PathBuf, String)>,
}

impl<'o> Writer<'o> {
    fn new(out: &'o OutDir, dir: impl Into<PathBuf>, title: String, runs: Vec<RunInfo>) -> Self {
        Writer {
            out,
            dir: dir.into(),
            section: Section {
                title,
                runs,
                notes: Vec::new(),
                tables: Vec::new(),
                plots: Vec::new(),
            },
            files: Vec::new(),
            svgs: Vec::new(),
        }
    }

    fn write(&mut self, name: &str, contents: &str) -> Result<PathBuf, ReportError> {
        let rel = self.dir.join(name);
        self.out.write(&rel, contents)?;
        self.files.push(rel.clone());
        Ok(rel)
    }

    /// Writes a table as `.md`, `.csv` and `.json`.
    fn table(&mut self, table: Table) -> Result<(), ReportError> {
        self.write(&format!("{}.md", table.name), &table.markdown())?;
        self.write(&format!("{}.csv", table.name), &table.csv())?;
        let json = serde_json::to_string_pretty(&table.json())
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
        self.write(&format!("{}.json", table.name), &json)?;
        self.section.tables.push(table);
        Ok(())
    }

    /// Writes a drawn plot as `<stem>.svg`; a plot that could not be drawn becomes a
    /// note (the rest of the report is still worth having).
    fn plot(
        &mut self,
        stem: &str,
        title: &str,
        drawn: Result<String, PlotError>,
    ) -> Result<(), ReportError> {
        match drawn {
            Ok(svg) => {
                let file = self.write(&format!("{stem}.svg"), &svg)?;
                self.section.plots.push(PlotFile {
                    title: title.to_string(),
                    file: file.clone(),
                });
                self.svgs.push((file, svg));
            }
            Err(e) => {
                tracing::warn!("{e}");
                self.section
                    .notes
                    .push(format!("plot {stem} not drawn: {e}"));
            }
        }
        Ok(())
    }

    fn note(&mut self, note: Option<String>) {
        self.section.notes.extend(note);
    }
}

/// The sub-directory of the comparison (`--compare`).
const COMPARE_DIR: &str = "compare";
/// The most characters of a run id a run's directory name keeps: a longer id is cut
/// and a hash of the whole id appended, so the name stays far below the file system's
/// limit (255 bytes) and two long ids alike in their first characters stay apart.
const MAX_RUN_NAME: usize = 64;

/// Whether the report's top level uses `name` itself: the comparison's directory,
/// the index files, the cross-run plots.
fn reserved(name: &str) -> bool {
    name == COMPARE_DIR || name.starts_with("index.") || name.ends_with(".svg")
}

/// The 64-bit FNV-1a hash of `text`: stable across builds and platforms, unlike std's
/// hasher, so a long run id always gets the same directory.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The name of the `index`-th run in the report (its sub-directory of `--out` when
/// there are several runs, and part of the cross-run plots' file names): its run id
/// with every character other than `[A-Za-z0-9._-]` replaced by `_`, so a manifest's
/// run id can never name a path outside `--out` (`/abs`, `../x`); `run-N` when nothing
/// usable is left (`..`); cut to [`MAX_RUN_NAME`] characters and a hash when longer;
/// `-run` appended to a name the report uses itself (`compare`); and a `-N` suffix
/// when two runs come out alike.
fn run_name(run_id: &str, index: usize, taken: &mut HashSet<String>) -> String {
    let clean: String = run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut name = if clean.trim_matches('.').is_empty() {
        format!("run-{}", index + 1)
    } else if clean.len() > MAX_RUN_NAME {
        // ASCII only, so any byte is a character boundary.
        format!("{}-{:016x}", &clean[..MAX_RUN_NAME], fnv1a(run_id))
    } else {
        clean
    };
    if reserved(&name) {
        name.push_str("-run");
    }
    let base = name.clone();
    let mut n = 2;
    while !taken.insert(name.clone()) {
        name = format!("{base}-{n}");
        n += 1;
    }
    name
}

/// Writes every table and plot the runs support, the cross-run plots, the comparison
/// when asked, and the index files; returns what was written.
pub fn write_report(runs: &[Run], opts: &ReportOptions) -> Result<ReportSummary, ReportError> {
    if runs.is_empty() {
        return Err(ReportError::NoRuns);
    }
    let mut taken = HashSet::new();
    let analysed = runs
        .iter()
        .enumerate()
        .map(|(i, run)| Analysed::of(run, run_name(&run.run_id, i, &mut taken)))
        .collect::<Result<Vec<_>, _>>()?;
    let out = OutDir::prepare(&opts.out)?;
    let mut writers = Vec::new();
    for a in &analysed {
        let dir = if runs.len() == 1 { "" } else { a.name.as_str() };
        writers.push(run_section(&out, PathBuf::from(dir), a)?);
    }
    if let Some(w) = metal_section(&out, &analysed)? {
        writers.push(w);
    }
    if opts.compare && runs.len() > 1 {
        writers.push(compare_section(&out, runs, &analysed)?);
    }
    let mut files = Vec::new();
    let mut svgs = Vec::new();
    let mut sections = Vec::new();
    for w in writers {
        files.extend(w.files);
        svgs.extend(w.svgs);
        sections.push(w.section);
    }
    for (name, text) in [
        ("index.md", index::markdown(&sections)),
        ("index.html", index::html(&sections, &svgs)),
    ] {
        out.write(Path::new(name), &text)?;
        files.push(PathBuf::from(name));
    }
    Ok(ReportSummary { sections, files })
}

/// A campaign (or runs given together, `nnb analyze --across`): its notes, the
/// per-round, per-pair, spread and long-form tables, a CDF per measure and, for a
/// temporal campaign, each measure over time; and the index files.
pub fn write_campaign_report(
    campaign: &crate::campaign::Campaign,
    out: &Path,
) -> Result<ReportSummary, ReportError> {
    let out = OutDir::prepare(out)?;
    let title = format!(
        "Campaign {} ({}, {} rounds)",
        campaign.id,
        campaign.kind.name(),
        campaign.rounds.len()
    );
    let runs = campaign
        .rounds
        .iter()
        .filter_map(|r| r.run.clone())
        .collect();
    let mut w = Writer::new(&out, "", title, runs);
    for table in campaign.tables() {
        w.table(table)?;
    }
    w.table(campaign.tidy())?;
    let (figures, notes) = campaign.figures();
    for f in figures {
        w.plot(&f.stem, &f.chart.title, plot::line_chart(&f.chart))?;
    }
    w.section.notes.extend(notes);
    let mut files = w.files;
    let sections = vec![w.section];
    for (name, text) in [
        ("index.md", index::markdown(&sections)),
        ("index.html", index::html(&sections, &w.svgs)),
    ] {
        out.write(Path::new(name), &text)?;
        files.push(PathBuf::from(name));
    }
    Ok(ReportSummary { sections, files })
}

/// One run: its notes, every table and plot it supports.
fn run_section<'o>(out: &'o OutDir, dir: PathBuf, a: &Analysed) -> Result<Writer<'o>, ReportError> {
    let title = format!(
        "{} — run {} ({})",
        a.label(),
        a.info.run_id,
        a.info.scenario
    );
    let mut w = Writer::new(out, dir, title, vec![a.info.clone()]);
    w.section.notes.extend(
        a.run
            .notes
            .iter()
            .map(|n| format!("{}: {n}", a.info.run_id)),
    );
    for table in a.analyses.tables(a.run) {
        w.table(table)?;
    }
    w.table(crate::tables::tidy(a.run)?)?;
    let label = a.label().to_string();
    if let Some(d) = &a.analyses.degradation {
        if a.run.manifest.scenario == Scenario::NeighborStaircase {
            let chart = charts::staircase(&[(label.clone(), d)]);
            w.plot(
                "runtime_vs_neighbors",
                &chart.title,
                plot::line_chart(&chart),
            )?;
        }
    }
    if let Some(k) = &a.analyses.knees {
        let chart = charts::sweep(&[(label.clone(), k, a.metric())]);
        w.plot("thread_sweep", &chart.title, plot::line_chart(&chart))?;
    }
    if let Some(l) = &a.analyses.latency {
        let chart = charts::latency(&[(label.clone(), l)]);
        w.plot("latency_vs_load", &chart.title, plot::line_chart(&chart))?;
        if let Some((chart, note)) = charts::percentiles(&label, l) {
            w.plot(
                "latency_percentiles",
                &chart.title,
                plot::percentile_chart(&chart),
            )?;
            w.note(note);
        }
    }
    if let Some(t) = &a.analyses.node_throughput {
        let chart = charts::node_lines(&label, t);
        w.plot(
            "throughput_per_node_lines",
            &chart.title,
            plot::line_chart(&chart),
        )?;
        let chart = charts::node_boxes(&label, t);
        w.plot(
            "throughput_per_node_boxes",
            &chart.title,
            plot::box_chart(&chart),
        )?;
    }
    if let Some(t) = &a.analyses.throughput {
        let chart = charts::throughput(&label, t);
        w.plot("throughput_per_node", &chart.title, plot::box_chart(&chart))?;
    }
    if let Some(iso) = &a.analyses.isolation {
        let chart = charts::isolation(&label, iso);
        w.plot("isolation", &chart.title, plot::line_chart(&chart))?;
    }
    for t in a.analyses.technologies.iter().flat_map(|t| &t.per) {
        let chart = charts::isolation(&format!("{label} in {}", t.technology), &t.isolation);
        let stem = format!("isolation-{}", t.technology);
        w.plot(&stem, &chart.title, plot::line_chart(&chart))?;
    }
    if let Some(wn) = &a.analyses.wang_ng {
        let (figures, notes) = wn.figures(&label);
        for (stem, chart) in figures {
            w.plot(&stem, &chart.title, plot::trace_chart(&chart))?;
        }
        w.section.notes.extend(notes);
    }
    Ok(w)
}

/// Each staircase run beside every thread-sweep run (test node vs metal), when the
/// runs include both: the chart and the gap table ([`tables::metal_gap`]).
fn metal_section<'o>(
    out: &'o OutDir,
    analysed: &[Analysed],
) -> Result<Option<Writer<'o>>, ReportError> {
    let stairs: Vec<(&Analysed, &Degradation)> = analysed
        .iter()
        .filter(|a| a.run.manifest.scenario == Scenario::NeighborStaircase)
        .filter_map(|a| Some((a, a.analyses.degradation.as_ref()?)))
        .collect();
    let sweeps: Vec<(&Analysed, &Knees)> = analysed
        .iter()
        .filter_map(|a| Some((a, a.analyses.knees.as_ref()?)))
        .collect();
    if stairs.is_empty() || sweeps.is_empty() {
        return Ok(None);
    }
    let stair_runs = stairs.iter().map(|(a, _)| a.info.clone());
    let runs: Vec<RunInfo> = stair_runs
        .chain(sweeps.iter().map(|(a, _)| a.info.clone()))
        .collect();
    let mut w = Writer::new(out, "", "Test node vs metal".into(), runs);
    let many = stairs.len() * sweeps.len() > 1;
    for (stair, d) in &stairs {
        for (sweep, k) in &sweeps {
            let (chart, note) =
                charts::staircase_vs_metal((stair.label(), stair.run, d), (sweep.label(), k));
            let stem = tables::pair_name("staircase_vs_metal", many, &stair.name, &sweep.name);
            w.plot(&stem, &chart.title, plot::line_chart(&chart))?;
            w.note(note);
            let gap = tables::metal_gap((stair.label(), stair.run, d), (sweep.label(), k));
            w.table(gap.table(&tables::pair_name(
                "metal_gap",
                many,
                &stair.name,
                &sweep.name,
            )))?;
        }
    }
    Ok(Some(w))
}

/// The runs side by side: the comparison tables, and one plot per kind with series
/// from every run that supports it.
fn compare_section<'o>(
    out: &'o OutDir,
    runs: &[Run],
    analysed: &[Analysed],
) -> Result<Writer<'o>, ReportError> {
    let labels: Vec<&str> = analysed.iter().map(|a| a.label()).collect();
    let infos = analysed.iter().map(|a| a.info.clone()).collect();
    let mut w = Writer::new(
        out,
        COMPARE_DIR,
        format!("Comparison: {}", labels.join(" vs ")),
        infos,
    );
    for table in tables::compare_tables(runs)? {
        w.table(table)?;
    }
    let stairs: Vec<(String, &Degradation)> = analysed
        .iter()
        .filter(|a| a.run.manifest.scenario == Scenario::NeighborStaircase)
        .filter_map(|a| Some((a.label().to_string(), a.analyses.degradation.as_ref()?)))
        .collect();
    if stairs.len() > 1 {
        let chart = charts::staircase(&stairs);
        w.plot(
            "compare_runtime_vs_neighbors",
            &chart.title,
            plot::line_chart(&chart),
        )?;
    }
    let sweeps: Vec<(String, &Knees, Option<Metric>)> = analysed
        .iter()
        .filter_map(|a| {
            Some((
                a.label().to_string(),
                a.analyses.knees.as_ref()?,
                a.metric(),
            ))
        })
        .collect();
    if sweeps.len() > 1 {
        let chart = charts::sweep(&sweeps);
        w.plot(
            "compare_thread_sweep",
            &chart.title,
            plot::line_chart(&chart),
        )?;
    }
    let latencies: Vec<(String, &LatencyVsLoad)> = analysed
        .iter()
        .filter_map(|a| Some((a.label().to_string(), a.analyses.latency.as_ref()?)))
        .collect();
    if latencies.len() > 1 {
        let chart = charts::latency(&latencies);
        w.plot(
            "compare_latency_vs_load",
            &chart.title,
            plot::line_chart(&chart),
        )?;
    }
    let throughputs: Vec<(String, &Throughput)> = analysed
        .iter()
        .filter_map(|a| Some((a.label().to_string(), a.analyses.throughput.as_ref()?)))
        .collect();
    if throughputs.len() > 1 {
        let chart = charts::throughput_compare(&throughputs);
        w.plot(
            "compare_throughput_per_node",
            &chart.title,
            plot::line_chart(&chart),
        )?;
    }
    Ok(w)
}
