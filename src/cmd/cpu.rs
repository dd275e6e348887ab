//! `nnb cpu`: the pinned, TSC-timed CPU burner.
//!
//! Plans where the threads go (`--pin`, `--cpus`), runs warm-ups and repetitions of a
//! fixed-work (`--ops`, runtime is the result; `--pool shared` draws the ops from one
//! pool as sysbench does) or fixed-time (`--duration`, ops/s is the result) burn, verifies every thread ran where it was put, and reports the
//! repetitions' statistics; `--load P` keeps each thread busy only P% of the time
//! (`stress-ng --cpu-load`); `--sweep` repeats this for a range of thread counts and
//! marks the knees. Output: a human table, `--json` or `--csv`, the latter two with the
//! environment, the clock and the verified placement.

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use comfy_table::Cell;

use crate::table::{right, table};
use indicatif::{ProgressBar, ProgressStyle};
use nnb_agent::jobs::limits::MAX_THREADS;
use nnb_burn::burner::{BurnResult, Duty, EventPool, Work};
use nnb_burn::clock::{Clock, ClockChoice, ClockInfo};
use nnb_burn::env::Environment;
use nnb_burn::placement::{parse_cpu_list, plan, render_placement, PinStrategy, Placement};
use nnb_burn::session::{Session, Step};
use nnb_burn::sweep::{analyze, SweepAnalysis, SweepSpec};
use nnb_burn::topology::{Topology, TopologySummary};
use nnb_burn::workload::Workload;
use nnb_format::knee::expected_smt_knee;
use nnb_format::stats::Summary;
use nnb_format::Metric;
use nnb_units::{format_per_sec, format_secs};
use serde::Serialize;

use crate::exit::usage;
use crate::out::Out;

/// A coefficient of variation above this gets a warning, as hyperfine warns on outliers.
const HIGH_CV: f64 = 0.05;
/// A `--load` burn whose threads got less than this share of the busy time asked for
/// gets a warning: the CPU was taken (another task on it, a CPU quota, steal).
const LOW_ACHIEVED_DUTY: f64 = 0.9;

/// Arguments of `nnb cpu`.
#[derive(Debug, clap::Args)]
pub(crate) struct CpuArgs {
    /// Number of threads [default: one per allowed CPU, or per CPU of --cpus].
    #[arg(short, long, conflicts_with = "sweep")]
    pub threads: Option<usize>,
    /// Placement: none, cores (one per physical core first), smt-sibling (fill a core's
    /// SMT threads first) or compact (logical CPU order).
    #[arg(long, default_value = PinStrategy::DEFAULT_NAME, conflicts_with = "cpus")]
    pub pin: String,
    /// Explicit CPUs, in thread order, e.g. 0,2,4-7.
    #[arg(long)]
    pub cpus: Option<String>,
    /// Allow more threads than CPUs (they wrap around and share CPUs).
    #[arg(long)]
    pub oversubscribe: bool,
    /// Workload: fpadd (cpu_burn's FP add chain, optimised: x and i in registers),
    /// cpu-burn-o0 (the thesis' cpu_burn as built with gcc -O0: x and i in memory,
    /// about 4x fpadd's time per op; compare runtimes with the thesis' on this one),
    /// primes (sysbench's cpu event), fma, int, mem.
    #[arg(short, long, default_value = Workload::DEFAULT.name())]
    pub workload: String,
    /// Fixed work: ops per thread, or in all with --pool shared (the runtime is the
    /// result) [default: about 1 s of one thread on a 3 GHz Zen 3: fpadd 1G,
    /// cpu-burn-o0 250M, primes 4000 events, fma 500M, int 200M, mem 250M].
    #[arg(long, conflicts_with = "duration")]
    pub ops: Option<u64>,
    /// Where a fixed-work burn's threads take their ops: per-thread (each does --ops,
    /// like the thesis' cpu_burn; the runtime is the slowest thread's) or shared (one
    /// pool of --ops events that the threads draw from in small batches, like
    /// sysbench's --events; a thread slowed by a neighbor does fewer, and the runtime
    /// ends with the pool's last event). A --duration burn is unaffected: every thread
    /// runs until the deadline either way.
    #[arg(long, default_value = "per-thread")]
    pub pool: EventPool,
    /// Fixed time, e.g. 10s, 500ms or 1h (ops/s is the result).
    #[arg(short, long, value_parser = nnb_units::parse_positive_duration)]
    pub duration: Option<Duration>,
    /// Keep each thread busy only this percentage of the time (1-100), like
    /// `stress-ng --cpu-load`: busy then asleep in 10 ms slices. Needs --duration.
    #[arg(long, requires = "duration", value_parser = clap::value_parser!(u8).range(1..=100))]
    pub load: Option<u8>,
    /// primes: count primes below this (sysbench's --cpu-max-prime).
    #[arg(long, default_value_t = nnb_burn::workload::DEFAULT_MAX_PRIME)]
    pub max_prime: u64,
    /// Measured repetitions per thread count.
    #[arg(short, long, default_value_t = 5)]
    pub reps: usize,
    /// Warm-up runs per thread count, discarded.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Thread sweep START..END[:STEP], e.g. 1..96:4.
    #[arg(long)]
    pub sweep: Option<String>,
    /// Print the placement plan and exit without running.
    #[arg(long)]
    pub dry_run: bool,
    /// Read the topology under this root instead of / (with --dry-run: plan for a
    /// fixture machine).
    #[arg(long)]
    pub sysfs_root: Option<PathBuf>,
    /// Machine-readable JSON on stdout.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// CSV on stdout: one row per thread per repetition, environment in # comments.
    #[arg(long)]
    pub csv: bool,
    /// Clock: auto (TSC when invariant, else clock_gettime), tsc, monotonic.
    #[arg(long, default_value = "auto")]
    pub clock: String,
}

/// The validated command line.
struct Config {
    workload: Workload,
    work: Work,
    pool: EventPool,
    duty: Option<Duty>,
    strategy: PinStrategy,
    counts: Vec<usize>,
    sweep: bool,
    clock: ClockChoice,
}

/// The sweep part of the report.
#[derive(Debug, Serialize)]
struct SweepReport {
    /// What the sweep's values are: the runtime ([`Metric::RuntimeS`]) or `s_per_op_per_thread`.
    metric: &'static str,
    analysis: SweepAnalysis,
    expected_smt_knee: Option<usize>,
}

/// Everything `--json` prints.
#[derive(Debug, Serialize)]
struct Report {
    environment: Environment,
    clock: ClockInfo,
    workload: Workload,
    work: Work,
    /// Where a fixed-work burn's threads took their ops (`--pool`).
    pool: EventPool,
    /// The busy share of `--load` (absent without it).
    #[serde(skip_serializing_if = "Option::is_none")]
    duty: Option<Duty>,
    pin: String,
    warmup: usize,
    reps: usize,
    steps: Vec<Step>,
    sweep: Option<SweepReport>,
}

/// `--dry-run --json` output.
#[derive(Debug, Serialize)]
struct DryRun {
    sysfs_root: PathBuf,
    topology: TopologySummary,
    placements: Vec<Placement>,
}

/// Runs `nnb cpu`.
pub(crate) fn run(args: CpuArgs, out: &mut Out) -> anyhow::Result<()> {
    let (topo, allowed) = super::common::topology(args.sysfs_root.as_deref(), args.dry_run)?;
    let cfg = validate(&args, allowed.len())?;
    let placements = cfg
        .counts
        .iter()
        .map(|&t| plan(&topo, &cfg.strategy, t, &allowed, args.oversubscribe))
        .collect::<Result<Vec<_>, _>>()?;

    if args.dry_run {
        return print_dry_run(out, &args, &topo, placements);
    }

    let clock = Clock::with_choice(cfg.clock)?;
    if let Some(w) = &clock.info().warning {
        eprintln!("warning: {w}");
    }
    let mut env = Environment::capture(&topo, env!("CARGO_PKG_VERSION"));
    let steps = measure(&args, &cfg, &clock, placements)?;
    env.record_steal_after();

    let sweep = cfg.sweep.then(|| sweep_report(&cfg, &steps));
    let report = Report {
        environment: env,
        clock: clock.info(),
        workload: cfg.workload,
        work: cfg.work,
        pool: cfg.pool,
        duty: cfg.duty,
        pin: cfg.strategy.to_string(),
        warmup: args.warmup,
        reps: args.reps,
        steps,
        sweep,
    };
    warn_about_noise(&report);
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else if args.csv {
        print_csv(out, &report)?;
    } else {
        print_human(out, &report)?;
    }
    Ok(())
}

/// Checks the flags that the library does not check (placement errors come later).
fn validate(args: &CpuArgs, allowed: usize) -> anyhow::Result<Config> {
    if args.ops == Some(0) {
        return Err(usage("--ops must be at least 1"));
    }
    if args.reps == 0 {
        return Err(usage("--reps must be at least 1"));
    }
    if args.threads == Some(0) {
        return Err(usage("--threads must be at least 1"));
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
    let work = match (&args.duration, args.ops) {
        (Some(d), _) => Work::Duration(*d),
        (None, Some(n)) => Work::Ops(n),
        (None, None) => Work::Ops(workload.default_ops()),
    };
    let strategy = match &args.cpus {
        Some(list) => PinStrategy::List(parse_cpu_list(list).context("--cpus")?),
        None => args.pin.parse::<PinStrategy>().context("--pin")?,
    };
    let (counts, sweep) = match &args.sweep {
        Some(s) => {
            let spec: SweepSpec = s.parse().context("--sweep")?;
            (spec.counts(), true)
        }
        None => {
            let default = match &strategy {
                PinStrategy::List(cpus) => cpus.len(),
                _ => allowed,
            };
            (vec![args.threads.unwrap_or(default)], false)
        }
    };
    // Placements allocate a slot per thread: bounded as the agent bounds a burn job.
    if let Some(&most) = counts.iter().max().filter(|&&n| n > MAX_THREADS) {
        let flag = if sweep { "--sweep" } else { "--threads" };
        return Err(usage(format!(
            "{flag}: {most} threads is more than {MAX_THREADS}, the most one burn may have"
        )));
    }
    let clock = args.clock.parse::<ClockChoice>().context("--clock")?;
    // clap keeps --load in 1..=100, so the share is in (0, 1].
    let duty = args.load.and_then(|p| Duty::new(f64::from(p) / 100.0));
    Ok(Config {
        workload,
        work,
        pool: args.pool,
        duty,
        strategy,
        counts,
        sweep,
        clock,
    })
}

fn print_dry_run(
    out: &mut Out,
    args: &CpuArgs,
    topo: &Topology,
    placements: Vec<Placement>,
) -> anyhow::Result<()> {
    if args.json {
        let plan = DryRun {
            sysfs_root: topo.sysfs_root.clone(),
            topology: topo.summary(),
            placements,
        };
        writeln!(out, "{}", serde_json::to_string_pretty(&plan)?)?;
    } else {
        for p in &placements {
            writeln!(out, "{}", render_placement(p, topo))?;
        }
    }
    Ok(())
}

/// The session's warm-ups and repetitions, with a progress bar on a terminal.
fn measure(
    args: &CpuArgs,
    cfg: &Config,
    clock: &Clock,
    placements: Vec<Placement>,
) -> anyhow::Result<Vec<Step>> {
    let runs = ((args.warmup + args.reps) * placements.len()) as u64;
    let bar = if crate::term::stderr_is_terminal() {
        let bar = ProgressBar::new(runs);
        if let Ok(style) = ProgressStyle::with_template("{bar:30.cyan/blue} {pos}/{len} {msg}") {
            bar.set_style(style);
        }
        bar
    } else {
        ProgressBar::hidden()
    };
    let session = Session {
        clock,
        workload: &cfg.workload,
        work: cfg.work,
        pool: cfg.pool,
        warmup: args.warmup,
        reps: args.reps,
        duty: cfg.duty,
    };
    let steps = session.run(placements, &mut |r| {
        let what = if r.warmup { "warm-up" } else { "rep" };
        bar.set_position(r.done as u64);
        bar.set_message(format!("{} threads, {what} {}", r.threads, r.number));
    })?;
    bar.finish_and_clear();
    Ok(steps)
}

/// The sweep analysis: runtime for fixed work; seconds per op per thread for fixed time
/// (the inverse of per-thread throughput, so larger is slower in both), per repetition.
/// The SMT knee is expected where the placement of the largest step first puts a thread
/// on a core that already has one ([`nnb_format::knee::expected_smt_knee`]): the CPUs
/// this process may use, their cores and the pin strategy decide it, not the host's
/// totals.
fn sweep_report(cfg: &Config, steps: &[Step]) -> SweepReport {
    let (metric, value): (&'static str, fn(usize, &BurnResult) -> f64) = match cfg.work {
        Work::Ops(_) => (Metric::RuntimeS.name(), |_, r| r.wall_ns / 1e9),
        Work::Duration(_) => ("s_per_op_per_thread", |threads, r| {
            threads as f64 / r.ops_per_sec
        }),
    };
    let points: Vec<(usize, Summary)> = steps
        .iter()
        .filter_map(|s| {
            let values: Vec<f64> = s.runs.iter().map(|r| value(s.threads, r)).collect();
            Some((s.threads, Summary::of(&values)?))
        })
        .collect();
    let expected = steps.iter().max_by_key(|s| s.threads).and_then(|s| {
        let slots: Vec<(Option<usize>, Option<usize>)> = s
            .placement
            .slots
            .iter()
            .map(|slot| (slot.cpu, slot.core))
            .collect();
        expected_smt_knee(&slots)
    });
    SweepReport {
        metric,
        analysis: analyze(&points),
        expected_smt_knee: expected,
    }
}

/// Warnings on stderr: high variation between repetitions, a `--load` not achieved,
/// steal during the run.
fn warn_about_noise(report: &Report) {
    for step in &report.steps {
        let lowest = step
            .runs
            .iter()
            .filter_map(|r| r.achieved_duty)
            .reduce(f64::min);
        if let (Some(duty), Some(got)) = (report.duty, lowest) {
            if got < duty.share() * LOW_ACHIEVED_DUTY {
                eprintln!(
                    "warning: {} threads: asked for {:.0}% load, got {:.1}% (CPU time over \
                     wall time, mean over threads, lowest repetition): something else took \
                     the CPU (another task on it, a CPU quota or steal)",
                    step.threads,
                    duty.share() * 100.0,
                    got * 100.0
                );
            }
        }
        let s = match report.work {
            Work::Ops(_) => &step.runtime_s,
            Work::Duration(_) => &step.ops_per_sec,
        };
        if s.n > 1 && s.cv > HIGH_CV {
            eprintln!(
                "warning: {} threads: repetitions vary by {:.1}% (CV; min {:.4}, max {:.4}). \
                 Something else may be running on this machine or its host; try more \
                 --warmup or --reps, or look at `nnb steal`.",
                step.threads,
                s.cv * 100.0,
                s.min,
                s.max
            );
        }
    }
    if let Some(d) = report.environment.steal_delta().filter(|&d| d > 0) {
        eprintln!(
            "warning: the hypervisor reported {d} ticks ({:.2} s) of steal time during the run",
            d as f64 / report.environment.user_hz as f64
        );
    }
}

/// Operations per second with an SI prefix (`2.50 Mops/s`).
fn fmt_ops(r: f64) -> String {
    format_per_sec(r, "ops")
}

fn print_human(out: &mut Out, report: &Report) -> io::Result<()> {
    let env = &report.environment;
    let clock = &report.clock;
    let work = match (report.work, report.pool) {
        (Work::Ops(n), EventPool::PerThread) => {
            format!("{n} ops ({}) per thread", report.workload.op_unit())
        }
        (Work::Ops(n), EventPool::Shared) => format!(
            "{n} ops ({}) in one pool the threads share",
            report.workload.op_unit()
        ),
        (Work::Duration(d), _) => format!("{d:?} per run"),
    };
    let work = match report.duty {
        Some(d) => format!("{work} at {:.0}% load", d.share() * 100.0),
        None => work,
    };
    writeln!(
        out,
        "workload {} | {work} | pin {} | {} warm-up + {} reps",
        report.workload, report.pin, report.warmup, report.reps
    )?;
    writeln!(
        out,
        "cpu {} | kernel {} | clocksource {} | hypervisor {} | governor {}",
        env.cpu_model,
        env.kernel,
        env.clocksource,
        env.hypervisor.as_deref().unwrap_or("unknown"),
        env.governor.as_deref().unwrap_or("none"),
    )?;
    writeln!(
        out,
        "clock {} at {:.3} MHz (calibration repeatability {}, read {:.1} ns){}",
        clock.source,
        clock.freq_hz / 1e6,
        clock
            .calibration_repeatability_ppm
            .map_or_else(|| "none".to_string(), |p| format!("{p:.3} ppm")),
        clock.read_cost_ns,
        clock
            .warning
            .as_ref()
            .map_or(String::new(), |w| format!(" - {w}"))
    )?;
    writeln!(out)?;

    if let Some(last) = report.steps.last() {
        print_verified_placement(out, last)?;
    }
    match &report.sweep {
        None => {
            for step in &report.steps {
                print_reps(out, report.work, report.pool, step)?;
            }
        }
        Some(sweep) => print_sweep(out, report, sweep)?,
    }
    let overhead = report
        .steps
        .iter()
        .map(|s| s.timing_overhead_share_max)
        .fold(0.0, f64::max);
    let steal = env
        .steal_delta()
        .map_or("unknown".to_string(), |d| format!("{d} ticks"));
    writeln!(out,
        "\ntiming overhead (start skew + clock reads) <= {:.4}% of the wall time | steal during the run: {steal}",
        overhead * 100.0
    )?;
    Ok(())
}

/// The placement as observed by the threads of the step's first repetition.
fn print_verified_placement(out: &mut Out, step: &Step) -> io::Result<()> {
    let Some(run) = step.runs.first() else {
        return Ok(());
    };
    let mut t = table([
        "thread",
        "cpu",
        "seen at start",
        "seen at end",
        "core",
        "package",
    ]);
    let opt = |v: Option<usize>| v.map_or("-".to_string(), |v| v.to_string());
    for th in &run.threads {
        t.add_row(vec![
            right(th.thread),
            right(opt(th.planned_cpu)),
            right(opt(th.cpu_start)),
            right(opt(th.cpu_end)),
            right(opt(th.core)),
            right(opt(th.package)),
        ]);
    }
    writeln!(
        out,
        "placement ({}, {} threads, verified by sched_getaffinity/sched_getcpu)\n{t}\n",
        step.placement.strategy, step.threads
    )?;
    Ok(())
}

fn print_reps(out: &mut Out, work: Work, pool: EventPool, step: &Step) -> io::Result<()> {
    let duty_cycled = step.runs.iter().any(|r| r.achieved_duty.is_some());
    let shared = pool == EventPool::Shared && matches!(work, Work::Ops(_));
    let mut header = vec!["rep", "wall", "ops/s", "start skew", "overhead"];
    if duty_cycled {
        header.push("busy (achieved load)");
    }
    if shared {
        header.push("ops per thread");
    }
    let mut t = table(header);
    for (i, r) in step.runs.iter().enumerate() {
        let mut row = vec![
            right(i + 1),
            right(format_secs(r.wall_ns / 1e9)),
            right(fmt_ops(r.ops_per_sec)),
            right(format_secs(r.start_skew_ns / 1e9)),
            right(format!("{:.5}%", r.timing_overhead_share * 100.0)),
        ];
        if duty_cycled {
            row.push(right(
                r.achieved_duty
                    .map_or("-".to_string(), |a| format!("{:.1}%", a * 100.0)),
            ));
        }
        if shared {
            let ops: Vec<String> = r.threads.iter().map(|t| t.ops.to_string()).collect();
            row.push(right(ops.join(" / ")));
        }
        t.add_row(row);
    }
    writeln!(out, "{} threads\n{t}\n", step.threads)?;
    let (label, s, fmt): (&str, &Summary, fn(f64) -> String) = match work {
        Work::Ops(_) => ("runtime", &step.runtime_s, format_secs),
        Work::Duration(_) => ("ops/s", &step.ops_per_sec, fmt_ops),
    };
    let mut st = table(["", "mean", "median", "min", "max", "stddev", "CV", "95% CI"]);
    st.add_row(vec![
        Cell::new(label),
        right(fmt(s.mean)),
        right(fmt(s.median)),
        right(fmt(s.min)),
        right(fmt(s.max)),
        right(fmt(s.stddev)),
        right(format!("{:.2}%", s.cv * 100.0)),
        right(format!("{} .. {}", fmt(s.ci95_low), fmt(s.ci95_high))),
    ]);
    writeln!(out, "{st}")?;
    Ok(())
}

fn print_sweep(out: &mut Out, report: &Report, sweep: &SweepReport) -> io::Result<()> {
    let value_label = if sweep.metric == Metric::RuntimeS.name() {
        Metric::RuntimeS.label()
    } else {
        "time/op/thread"
    };
    let mut t = table([
        "threads",
        value_label,
        "95% CI +-",
        "CV",
        "ops/s",
        "degradation",
        "step",
        "",
    ]);
    for (step, a) in report.steps.iter().zip(&sweep.analysis.steps) {
        let s = match report.work {
            Work::Ops(_) => &step.runtime_s,
            Work::Duration(_) => &step.ops_per_sec,
        };
        let ci_rel = if s.mean != 0.0 {
            (s.ci95_high - s.mean) / s.mean
        } else {
            0.0
        };
        let mark = match (a.knee, sweep.expected_smt_knee == Some(a.threads)) {
            (true, true) => "<- knee (expected SMT knee)",
            (true, false) => "<- knee",
            (false, true) => "(expected SMT knee)",
            (false, false) => "",
        };
        t.add_row(vec![
            right(a.threads),
            right(format_secs(a.value)),
            right(format!("{:.2}%", ci_rel * 100.0)),
            right(format!("{:.2}%", s.cv * 100.0)),
            right(fmt_ops(step.ops_per_sec.mean)),
            right(format!("{:+.2}%", a.degradation_pct)),
            right(format!("{:+.2}", a.increment_pct)),
            Cell::new(mark),
        ]);
    }
    writeln!(
        out,
        "sweep ({value_label}; degradation vs {} threads)\n{t}",
        report.steps[0].threads
    )?;
    writeln!(out, "{}", sweep.analysis.noise.note())?;
    match sweep.expected_smt_knee {
        Some(k) => writeln!(
            out,
            "expected SMT knee: {k} threads (the first thread placed on a core that already \
             has one)"
        )?,
        None => writeln!(
            out,
            "no SMT knee expected: no two threads of this placement share a core"
        )?,
    }
    Ok(())
}

/// CSV: `#` comment lines with the environment, clock and placement as JSON, then one
/// row per thread per repetition.
fn print_csv(out: &mut Out, report: &Report) -> anyhow::Result<()> {
    writeln!(
        out,
        "# environment: {}",
        serde_json::to_string(&report.environment)?
    )?;
    writeln!(out, "# clock: {}", serde_json::to_string(&report.clock)?)?;
    writeln!(
        out,
        "# workload: {} work: {} pool: {}",
        serde_json::to_string(&report.workload)?,
        serde_json::to_string(&report.work)?,
        report.pool
    )?;
    for step in &report.steps {
        writeln!(
            out,
            "# placement {} threads: {}",
            step.threads,
            serde_json::to_string(&step.placement)?
        )?;
    }
    writeln!(
        out,
        "threads,rep,thread,planned_cpu,cpu_start,cpu_end,core,package,ops,elapsed_ns,\
         ops_per_sec,cycles,checksum,wall_ns,run_ops_per_sec,start_skew_ns,busy_ns"
    )?;
    let opt = |v: Option<usize>| v.map_or(String::new(), |v| v.to_string());
    for step in &report.steps {
        for (rep, r) in step.runs.iter().enumerate() {
            for t in &r.threads {
                writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{},{:.1},{:.3},{},{},{:.1},{:.3},{:.1},{:.0}",
                    step.threads,
                    rep + 1,
                    t.thread,
                    opt(t.planned_cpu),
                    opt(t.cpu_start),
                    opt(t.cpu_end),
                    opt(t.core),
                    opt(t.package),
                    t.ops,
                    t.elapsed_ns,
                    t.ops_per_sec,
                    t.cycles,
                    t.checksum,
                    r.wall_ns,
                    r.ops_per_sec,
                    r.start_skew_ns,
                    t.busy_ns
                )?;
            }
        }
    }
    Ok(())
}
