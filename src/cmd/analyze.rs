//! `nnb analyze`: tables (and with `--out`, a report with plots) from one or more run
//! directories written by `nnb run`, from a campaign directory (its rounds'
//! distributions), or from runs given together with `--across` (as the rounds of one
//! ad-hoc campaign).
//!
//! The tables go to stdout in the chosen format; logs, notes about what loading
//! tolerated and the list of files written go to stderr, so `--format csv` or `json`
//! output can be piped.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, ValueEnum};
use nnb_analysis::campaign::{across, is_campaign, read_campaign, Campaign, CampaignError};
use nnb_analysis::read::{read_run, Run, MANIFEST};
use nnb_analysis::report::{write_campaign_report, write_report, ReportOptions, ReportSummary};
use nnb_analysis::table::Table;
use nnb_analysis::tables::{compare_tables, metal_gap_tables, run_tables, tidy};

use crate::exit::usage;
use crate::out::Out;
use std::io::Write;

/// How the tables are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// Ruled tables for people.
    Terminal,
    /// GitHub-flavoured Markdown tables.
    Markdown,
    /// CSV, one block per table under a `# name: title` line, blank lines between.
    Csv,
    /// One JSON document: `{"runs": [...], "tables": [...]}`.
    Json,
    /// CSV in long form instead of the tables: one row per run × role × group ×
    /// level × metric with n, mean, sd, 95% CI and the degradation with its interval.
    Tidy,
}

/// Arguments of `nnb analyze`.
#[derive(Debug, Args)]
pub(crate) struct AnalyzeArgs {
    /// Run directories (`results/<run-id>`), or run ids under `results/`; or one
    /// campaign directory (`results/<campaign-id>`, with `campaign.json` and
    /// `rounds.jsonl`): the distributions across its recorded rounds.
    #[arg(required = true, value_name = "RUN")]
    pub runs: Vec<PathBuf>,
    /// Also write every table (.md, .csv, .json), every plot (.svg) and index.md /
    /// index.html to this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Put the runs side by side (e.g. m5 against m6g): a summary table of maximum
    /// degradation per run, and shared plots in the report.
    #[arg(long)]
    pub compare: bool,
    /// Read the runs together as the rounds of one spatial campaign (a lane per
    /// instance type): per-round, per-pair and spread tables, and with --out a CDF
    /// per measure. A run that cannot be read is left out with a note.
    #[arg(long, conflicts_with = "compare")]
    pub across: bool,
    /// Output format of the tables on stdout.
    #[arg(long, value_enum, default_value_t = Format::Terminal)]
    pub format: Format,
}

/// Resolves a RUN argument: a run directory, else a run id under `results/`; it must
/// have a `manifest.json`.
fn run_dir(arg: &Path) -> anyhow::Result<PathBuf> {
    let candidates = [arg.to_path_buf(), Path::new("results").join(arg)];
    let Some(dir) = candidates.iter().find(|d| d.is_dir()) else {
        return Err(usage(format!(
            "no run directory at {} (give a directory written by `nnb run`, e.g. results/<run-id>)",
            arg.display()
        )));
    };
    // Only whether it is there: what else is wrong with it (a FIFO, a directory, too
    // large) `read_run` says (reliability review NL6).
    if !dir.join(MANIFEST).exists() {
        return Err(usage(format!(
            "{} is not an nnb run: it has no {MANIFEST}",
            dir.display()
        )));
    }
    Ok(dir.clone())
}

/// The directory a RUN argument names when it is a campaign directory (itself, else
/// under `results/`).
fn campaign_dir(arg: &Path) -> Option<PathBuf> {
    [arg.to_path_buf(), Path::new("results").join(arg)]
        .into_iter()
        .find(|d| d.is_dir() && is_campaign(d))
}

/// A campaign error as `nnb analyze` reports it: bad input exits 2.
fn campaign_error(e: CampaignError) -> anyhow::Error {
    if e.is_bad_input() {
        usage(e.to_string())
    } else {
        anyhow::Error::new(e)
    }
}

/// Prints a campaign's notes (what was left out) to stderr, its tables to stdout,
/// and writes its report when `--out` is given.
fn campaign_output(c: &Campaign, args: &AnalyzeArgs, out: &mut Out) -> anyhow::Result<()> {
    for note in &c.notes {
        eprintln!("note: {note}");
    }
    let tables = c.tables();
    let text = match args.format {
        Format::Tidy => c.tidy().csv(),
        Format::Json => {
            let campaign = serde_json::json!({
                "id": c.id,
                "kind": c.kind.name(),
                "adhoc": c.adhoc,
                "lanes": c.lanes,
                "rounds": c.rounds.iter().map(|r| &r.run_id).collect::<Vec<_>>(),
                "notes": c.notes,
            });
            let tables: Vec<serde_json::Value> = tables.iter().map(Table::json).collect();
            serde_json::to_string_pretty(
                &serde_json::json!({ "campaign": campaign, "tables": tables }),
            )? + "\n"
        }
        other => text_tables(&tables, other),
    };
    write!(out, "{text}")?;
    if let Some(dir) = &args.out {
        let summary = write_campaign_report(c, dir)
            .with_context(|| format!("writing the report to {}", dir.display()))?;
        wrote(&summary, dir);
    }
    Ok(())
}

/// Says on stderr what the report wrote.
fn wrote(summary: &ReportSummary, dir: &Path) {
    eprintln!(
        "wrote {} files to {} (open {})",
        summary.files.len(),
        dir.display(),
        dir.join("index.html").display()
    );
}

/// `nnb analyze` of one campaign directory, or of runs `--across`.
fn run_campaign(args: &AnalyzeArgs, out: &mut Out) -> anyhow::Result<bool> {
    let campaigns: Vec<PathBuf> = args.runs.iter().filter_map(|r| campaign_dir(r)).collect();
    let campaign = match (campaigns.as_slice(), args.across) {
        ([], false) => return Ok(false),
        ([dir], false) if args.runs.len() == 1 => {
            if args.compare {
                return Err(usage(
                    "--compare puts runs side by side, not a campaign's rounds",
                ));
            }
            read_campaign(dir).map_err(campaign_error)?
        }
        ([], true) => {
            let mut dirs = Vec::new();
            for r in &args.runs {
                match run_dir(r) {
                    Ok(d) => dirs.push(d),
                    Err(e) => eprintln!("note: {e}; left out"),
                }
            }
            across(&dirs).map_err(campaign_error)?
        }
        _ => {
            return Err(usage(
                "a campaign directory is analysed alone: give it as the only argument, \
                 without --across",
            ))
        }
    };
    campaign_output(&campaign, args, out)?;
    Ok(true)
}

/// Loads every run, then prints its tables (a staircase beside a metal sweep adds the
/// gap table; `--compare` the comparison) and
/// writes the report when `--out` is given.
pub(crate) fn run(args: AnalyzeArgs, out: &mut Out) -> anyhow::Result<()> {
    if run_campaign(&args, out)? {
        return Ok(());
    }
    let dirs = args
        .runs
        .iter()
        .map(|r| run_dir(r))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if args.compare && dirs.len() < 2 {
        return Err(usage("--compare needs at least two runs"));
    }
    let runs = dirs
        .iter()
        .map(|d| read_run(d).with_context(|| format!("cannot load run {}", d.display())))
        .collect::<anyhow::Result<Vec<Run>>>()?;
    let mut tables = Vec::new();
    for run in &runs {
        let found = run_tables(run).with_context(|| format!("analysing run {}", run.run_id))?;
        if found.is_empty() {
            tracing::warn!(run = %run.run_id, "no measured samples to analyse");
        }
        tables.extend(found);
    }
    // A staircase beside a metal sweep: the gap at equal busy threads (the report's
    // metal section), with or without --compare.
    tables.extend(metal_gap_tables(&runs).context("the test node vs metal")?);
    if args.compare {
        tables.extend(compare_tables(&runs).context("comparing the runs")?);
    }
    write!(out, "{}", render(&runs, &tables, args.format)?)?;
    if let Some(dir) = &args.out {
        let summary = write_report(
            &runs,
            &ReportOptions {
                out: dir.clone(),
                compare: args.compare,
            },
        )
        .with_context(|| format!("writing the report to {}", dir.display()))?;
        wrote(&summary, dir);
    }
    Ok(())
}

/// The tables in `format`.
fn render(runs: &[Run], tables: &[Table], format: Format) -> anyhow::Result<String> {
    Ok(match format {
        Format::Tidy => {
            let mut all: Option<Table> = None;
            for run in runs {
                let t = tidy(run).with_context(|| format!("the long form of {}", run.run_id))?;
                match all.as_mut() {
                    Some(a) => a.rows.extend(t.rows),
                    None => all = Some(t),
                }
            }
            all.map_or_else(String::new, |t| t.csv())
        }
        Format::Terminal | Format::Markdown | Format::Csv => text_tables(tables, format),
        Format::Json => {
            let runs: Vec<serde_json::Value> = runs
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "run_id": r.run_id,
                        "label": r.label(),
                        "dir": r.dir,
                        "scenario": r.manifest.scenario.name(),
                        "notes": r.notes,
                    })
                })
                .collect();
            let tables: Vec<serde_json::Value> = tables.iter().map(Table::json).collect();
            serde_json::to_string_pretty(&serde_json::json!({ "runs": runs, "tables": tables }))?
                + "\n"
        }
    })
}

/// The tables as text: terminal tables, Markdown, or CSV blocks under a `# name:
/// title` line (the long form and JSON are each caller's own).
fn text_tables(tables: &[Table], format: Format) -> String {
    let one: fn(&Table) -> String = match format {
        Format::Markdown => Table::markdown,
        Format::Csv | Format::Tidy | Format::Json => {
            |t: &Table| format!("# {}: {}\n{}", t.name, t.title, t.csv())
        }
        Format::Terminal => terminal,
    };
    tables.iter().map(one).collect::<Vec<_>>().join("\n")
}

/// Width, in columns, a one-column table of sentences wraps to.
const TEXT_TABLE_WIDTH: u16 = 120;

/// A table as nnb prints tables on a terminal: title, the shared table style (numeric
/// columns right-aligned), notes indented below (also `nnb run`'s summary).
pub(crate) fn terminal(table: &Table) -> String {
    let mut t = crate::table::table(&table.columns);
    if table.columns.len() == 1 {
        // A table of sentences (the run verdict): wrapped, not one line as wide as
        // its longest finding.
        t.set_content_arrangement(comfy_table::ContentArrangement::Dynamic)
            .set_width(TEXT_TABLE_WIDTH);
    }
    // Once per column, not per cell: per cell it is quadratic in the rows (NL4).
    let numeric: Vec<bool> = (0..table.columns.len())
        .map(|c| table.numeric_column(c))
        .collect();
    for row in &table.rows {
        t.add_row(row.iter().enumerate().map(|(c, cell)| {
            if numeric.get(c).copied().unwrap_or(false) {
                crate::table::right(cell.display())
            } else {
                comfy_table::Cell::new(cell.display())
            }
        }));
    }
    let mut out = format!("{}\n{t}\n", table.title);
    for note in &table.notes {
        out.push_str(&format!("  {note}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use nnb_analysis::table::{Cell, Table};

    #[test]
    fn terminal_tables_have_the_shared_look() {
        let table = Table {
            name: "t".into(),
            title: "A | table".into(),
            columns: vec!["name".into(), "n".into(), "x".into()],
            rows: vec![
                vec![Cell::text("plain"), Cell::Int(3), Cell::num(1.23456, 2)],
                vec![Cell::text("other"), Cell::Int(-1), Cell::Empty],
            ],
            notes: vec!["a note".into()],
        };
        let out = super::terminal(&table);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "A | table");
        assert!(lines[1].starts_with('─'), "{out}");
        assert!(out.contains("1.23") && !out.contains("1.234"), "{out}");
        assert!(
            lines.iter().any(|l| l.trim_end().ends_with('-')),
            "Empty shows as -: {out}"
        );
        assert_eq!(lines.last().copied(), Some("  a note"));
        // Numbers right-aligned: "3" and "-1" end in the same column.
        let end = |needle: &str| {
            lines
                .iter()
                .find_map(|l| l.find(needle).map(|i| i + needle.trim_end().len()))
        };
        assert_eq!(end(" 3 "), end("-1 "));
    }

    /// A one-column table of long sentences (the run verdict) wraps within the text
    /// width instead of making every line as wide as its longest finding.
    #[test]
    fn sentence_tables_wrap() {
        let long = "word ".repeat(100);
        let table = Table {
            name: "verdict".into(),
            title: "Run verdict".into(),
            columns: vec!["finding".into()],
            rows: vec![vec![Cell::text(long.trim())], vec![Cell::text("short")]],
            notes: vec![],
        };
        let out = super::terminal(&table);
        let widest = out.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        assert!(
            widest <= usize::from(super::TEXT_TABLE_WIDTH),
            "{widest}: {out}"
        );
        assert_eq!(out.matches("word").count(), 100, "{out}");
    }
}
