//! `nnb placements`: the blog's comparison in one table (seed 002, l.97 and l.186):
//! one job alone on a CPU, two jobs time-sharing it, on SMT siblings, on separate
//! cores and unpinned, in interleaved rounds of a fixed time each; per-job throughput,
//! relative to one job alone, and the SMT yield (siblings over time-shared, the blog's
//! 79.9 / 60.5 = 1.32), each with a 95% CI over rounds. Which CPUs each placement
//! uses, and which the host cannot offer, is [`nnb_burn::pairs`]'s. Output: a human
//! table, `--json` or `--csv` (one row per job per run), as `nnb cpu`.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use nnb_burn::clock::{Clock, ClockChoice, ClockInfo};
use nnb_burn::env::Environment;
use nnb_burn::pairs::{self, Cores, Offer, PairPlacement, PairRun, PairsTable, PlannedPair};
use nnb_burn::smt_probe::{probe, ProbeConfig};
use nnb_burn::workload::Workload;
use nnb_format::stats::Summary;
use nnb_units::format_per_sec;
use serde::Serialize;

use crate::exit::usage;
use crate::out::Out;
use crate::table::{right, table};

/// A coefficient of variation across rounds above this gets a warning, as `nnb cpu`
/// warns on its repetitions.
const HIGH_CV: f64 = 0.05;
/// The most rounds a comparison may have.
const MAX_ROUNDS: usize = 1000;
/// The longest a placement may run in one round.
const MAX_DURATION: Duration = Duration::from_secs(3600);
/// The blog's SMT yield: 79.9 MB/s per gzip on a shared core over 60.5 MB/s on one
/// shared hyperthread (seed 002, l.97).
const BLOG_YIELD: (f64, f64) = (79.9, 60.5);

/// Arguments of `nnb placements`.
#[derive(Debug, clap::Args)]
pub(crate) struct PlacementsArgs {
    /// Workload of every job: int (a chain of integer multiply, rotate, xor and 64-bit
    /// division: CPU-bound integer work like the blog's gzip), primes, fpadd,
    /// cpu-burn-o0, fma or mem. The SMT yield depends on it.
    #[arg(short, long, default_value = "int")]
    pub workload: String,
    /// primes: count primes below this (sysbench's --cpu-max-prime).
    #[arg(long, default_value_t = nnb_burn::workload::DEFAULT_MAX_PRIME)]
    pub max_prime: u64,
    /// How long each placement runs in each round, e.g. 5s.
    #[arg(short, long, default_value = "5s", value_parser = nnb_units::parse_positive_duration)]
    pub duration: Duration,
    /// Rounds: each runs every placement once, starting one later in the list than
    /// the round before.
    #[arg(short, long, default_value_t = 5)]
    pub rounds: usize,
    /// The CPU every pinned placement starts from [default: the first allowed CPU with
    /// an allowed SMT sibling, else the first allowed CPU].
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Only these placements, comma-separated: one, time-shared, siblings,
    /// non-siblings, unpinned [default: all].
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Group CPUs into cores by the SMT probe (`nnb topo --probe`: pairs timed alone
    /// and together) instead of sysfs, for a hypervisor that mislabels its vCPUs.
    #[arg(long, conflicts_with = "sysfs_root")]
    pub probe: bool,
    /// Print which CPUs each placement uses and exit without running.
    #[arg(long)]
    pub dry_run: bool,
    /// Read the topology under this root instead of / (with --dry-run: plan for a
    /// fixture machine).
    #[arg(long)]
    pub sysfs_root: Option<PathBuf>,
    /// Machine-readable JSON on stdout.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// CSV on stdout: one row per job per run, the environment and the unavailable
    /// placements in # comments.
    #[arg(long)]
    pub csv: bool,
    /// Clock: auto (TSC when invariant, else clock_gettime), tsc, monotonic.
    #[arg(long, default_value = "auto")]
    pub clock: String,
}

/// Everything `--json` prints.
#[derive(Debug, Serialize)]
struct Report {
    environment: Environment,
    clock: ClockInfo,
    workload: Workload,
    /// Each run's length, nanoseconds.
    duration_ns: u64,
    rounds: usize,
    /// The CPUs this process may use.
    allowed: Vec<usize>,
    /// Which CPUs share a core, and whether sysfs or the probe says so.
    cores: Cores,
    /// Each placement's CPUs, or why the host cannot offer it.
    planned: Vec<PlannedPair>,
    /// The table: per placement, per-job throughput and relative to one job alone.
    table: PairsTable,
    /// Every run, in the order they ran.
    runs: Vec<PairRun>,
}

/// Runs `nnb placements`.
pub(crate) fn run(args: PlacementsArgs, out: &mut Out) -> anyhow::Result<()> {
    let (topo, allowed) = super::common::topology(args.sysfs_root.as_deref(), args.dry_run)?;
    let (workload, kinds) = validate(&args)?;
    let cores = if args.probe {
        let report = probe(&topo, &ProbeConfig::new(allowed.clone())).context("SMT probe")?;
        Cores::probed(report.sibling_groups)
    } else {
        Cores::sysfs(&topo)
    };
    let planned = pairs::choose(&topo, &allowed, &cores, args.cpu, &kinds)?;
    if args.dry_run {
        return print_plan(out, &args, &planned, &allowed);
    }
    let clock = Clock::with_choice(args.clock.parse::<ClockChoice>().context("--clock")?)?;
    if let Some(w) = &clock.info().warning {
        eprintln!("warning: {w}");
    }
    let mut env = Environment::capture(&topo, env!("CARGO_PKG_VERSION"));
    let runs = measure(&args, &clock, &workload, &planned)?;
    env.record_steal_after();
    let per_job: Vec<(usize, PairPlacement, f64)> = runs
        .iter()
        .map(|r| (r.round, r.kind, r.per_job()))
        .collect();
    let report = Report {
        environment: env,
        clock: clock.info(),
        workload,
        duration_ns: u64::try_from(args.duration.as_nanos()).unwrap_or(u64::MAX),
        rounds: args.rounds,
        table: pairs::table(&planned, &allowed, &per_job),
        allowed,
        cores,
        planned,
        runs,
    };
    warn_about_noise(&report.table);
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else if args.csv {
        print_csv(out, &report)?;
    } else {
        print_human(out, &report)?;
    }
    Ok(())
}

/// Checks what the library does not: the workload, the counts, the placement names.
fn validate(args: &PlacementsArgs) -> anyhow::Result<(Workload, Vec<PairPlacement>)> {
    if !(1..=MAX_ROUNDS).contains(&args.rounds) {
        return Err(usage(format!("--rounds must be 1 to {MAX_ROUNDS}")));
    }
    if args.duration > MAX_DURATION {
        return Err(usage("--duration must be at most 1h"));
    }
    if args.max_prime < 3 {
        return Err(usage(
            "--max-prime must be at least 3 (primes are counted from 3)",
        ));
    }
    let mut workload: Workload = args.workload.parse()?;
    if let Workload::Primes { max_prime } = &mut workload {
        *max_prime = args.max_prime;
    }
    let mut kinds = Vec::new();
    for name in &args.only {
        let kind: PairPlacement = name
            .trim()
            .parse()
            .map_err(|e| usage(format!("--only: {e}")))?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    if kinds.is_empty() {
        kinds = PairPlacement::ALL.to_vec();
    }
    // The blog's order, whatever the order typed.
    kinds.sort_by_key(|k| PairPlacement::ALL.iter().position(|a| a == k));
    Ok((workload, kinds))
}

/// `--dry-run`: each placement's CPUs, or why it is unavailable.
fn print_plan(
    out: &mut Out,
    args: &PlacementsArgs,
    planned: &[PlannedPair],
    allowed: &[usize],
) -> anyhow::Result<()> {
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(planned)?)?;
        return Ok(());
    }
    let mut t = table(["placement", "jobs", "CPUs"]);
    for p in planned {
        t.add_row(vec![
            comfy_table::Cell::new(p.kind),
            right(p.kind.jobs()),
            comfy_table::Cell::new(match &p.offer {
                Offer::Available(_) => p.cpus(allowed),
                Offer::Unavailable(why) => format!("unavailable: {why}"),
            }),
        ]);
    }
    writeln!(out, "{t}")?;
    Ok(())
}

/// Every round's runs, with a progress bar on a terminal.
fn measure(
    args: &PlacementsArgs,
    clock: &Clock,
    workload: &Workload,
    planned: &[PlannedPair],
) -> anyhow::Result<Vec<PairRun>> {
    let available = planned
        .iter()
        .filter(|p| matches!(p.offer, Offer::Available(_)))
        .count();
    let bar = if crate::term::stderr_is_terminal() {
        let bar = ProgressBar::new((available * args.rounds) as u64);
        if let Ok(style) = ProgressStyle::with_template("{bar:30.cyan/blue} {pos}/{len} {msg}") {
            bar.set_style(style);
        }
        bar
    } else {
        ProgressBar::hidden()
    };
    let runs = pairs::run(
        clock,
        workload,
        args.duration,
        args.rounds,
        planned,
        &mut |round, kind| {
            bar.inc(1);
            bar.set_message(format!("round {round}: {kind}"));
        },
    )?;
    bar.finish_and_clear();
    Ok(runs)
}

/// On stderr: a placement whose per-job throughput varies across rounds by more than
/// [`HIGH_CV`]: something else ran on its CPUs (other tasks, steal), and ratios to the
/// same round's one job alone are then only as good as that round's luck.
fn warn_about_noise(table: &PairsTable) {
    for row in &table.rows {
        if let Some(s) = row.per_job.as_ref().filter(|s| s.n > 1 && s.cv > HIGH_CV) {
            eprintln!(
                "warning: {}: per-job throughput varies by {:.1}% (CV) across rounds: \
                 something else runs on these CPUs or their host; try more --rounds, a \
                 longer --duration, or an idle machine",
                row.placement,
                s.cv * 100.0
            );
        }
    }
}

/// `mean (lo..hi)` of a summary, `n/a` for the interval of one round.
fn with_ci(s: &Summary, fmt: impl Fn(f64) -> String) -> (String, String) {
    let ci = if nnb_format::stats::spread_known(s.n) {
        format!("{} .. {}", fmt(s.ci95_low), fmt(s.ci95_high))
    } else {
        "n/a".to_string()
    };
    (fmt(s.mean), ci)
}

fn print_human(out: &mut Out, report: &Report) -> anyhow::Result<()> {
    let env = &report.environment;
    writeln!(
        out,
        "workload {} | {:?} per placement per round | {} interleaved rounds",
        report.workload,
        Duration::from_nanos(report.duration_ns),
        report.rounds
    )?;
    writeln!(
        out,
        "cpu {} | kernel {} | hypervisor {} | governor {}\n",
        env.cpu_model,
        env.kernel,
        env.hypervisor.as_deref().unwrap_or("unknown"),
        env.governor.as_deref().unwrap_or("none"),
    )?;
    let ops = |v: f64| format_per_sec(v, "ops");
    let ratio = |v: f64| format!("{v:.3}");
    let mut t = table([
        "placement",
        "CPUs",
        "jobs",
        "per job",
        "95% CI",
        "vs one alone",
        "95% CI",
    ]);
    for row in &report.table.rows {
        let (job, job_ci) = row
            .per_job
            .as_ref()
            .map_or(("unavailable".into(), String::new()), |s| with_ci(s, ops));
        let (rel, rel_ci) = row
            .relative
            .as_ref()
            .map_or(("-".into(), String::new()), |s| with_ci(s, ratio));
        t.add_row(vec![
            comfy_table::Cell::new(row.placement),
            comfy_table::Cell::new(&row.cpus),
            right(row.jobs),
            right(job),
            right(job_ci),
            right(rel),
            right(rel_ci),
        ]);
    }
    writeln!(out, "{t}")?;
    for row in &report.table.rows {
        if let Some(why) = &row.unavailable {
            writeln!(out, "{}: unavailable: {why}", row.placement)?;
        }
    }
    let blog = BLOG_YIELD.0 / BLOG_YIELD.1;
    match &report.table.smt_yield {
        Some(y) => {
            let (mean, ci) = with_ci(y, ratio);
            writeln!(
                out,
                "SMT yield (a job on SMT siblings over a job time-shared on one CPU, per \
                 round): {mean} (95% CI {ci}); the blog's gzip: {} / {} = {blog:.2}",
                BLOG_YIELD.0, BLOG_YIELD.1
            )?;
        }
        None => writeln!(
            out,
            "SMT yield: not measured (needs both siblings and time-shared); the blog's gzip: \
             {} / {} = {blog:.2}",
            BLOG_YIELD.0, BLOG_YIELD.1
        )?,
    }
    writeln!(
        out,
        "per job = the mean of the jobs' own ops/s in a run; vs one alone = that over the \
         same round's one job alone; 95% CIs over rounds (Student's t)"
    )?;
    if let Some(d) = env.steal_delta().filter(|&d| d > 0) {
        writeln!(
            out,
            "warning: the hypervisor reported {d} ticks of steal time during the run"
        )?;
    }
    Ok(())
}

/// CSV: `#` comment lines with the environment, the clock, the workload and each
/// unavailable placement, then one row per job per run.
fn print_csv(out: &mut Out, report: &Report) -> anyhow::Result<()> {
    writeln!(
        out,
        "# environment: {}",
        serde_json::to_string(&report.environment)?
    )?;
    writeln!(out, "# clock: {}", serde_json::to_string(&report.clock)?)?;
    writeln!(
        out,
        "# workload: {} duration_ns: {}",
        serde_json::to_string(&report.workload)?,
        report.duration_ns
    )?;
    for p in &report.planned {
        if let Offer::Unavailable(why) = &p.offer {
            writeln!(out, "# unavailable {}: {}", p.kind, why.replace('\n', " "))?;
        }
    }
    writeln!(
        out,
        "placement,round,job,planned_cpu,cpu_start,cpu_end,ops,elapsed_ns,ops_per_sec"
    )?;
    let opt = |v: Option<usize>| v.map_or(String::new(), |v| v.to_string());
    for r in &report.runs {
        for t in &r.result.threads {
            writeln!(
                out,
                "{},{},{},{},{},{},{},{:.1},{:.3}",
                r.kind,
                r.round,
                t.thread,
                opt(t.planned_cpu),
                opt(t.cpu_start),
                opt(t.cpu_end),
                t.ops,
                t.elapsed_ns,
                t.ops_per_sec
            )?;
        }
    }
    Ok(())
}
