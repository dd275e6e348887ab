//! `nnb steal`: is something taking this VM's CPUs away? Pinned tight clock loops on
//! the chosen CPUs (seed 003's CPUTest, sysjitter) count every gap above a threshold;
//! the share of time each thread actually ran is printed beside the hypervisor's own
//! /proc/stat steal counter. `--cputest` takes Wang & Ng's threshold (1 ms: the share
//! printed is then their CPU share) and `--trace FILE` writes their timestamp trace.

use anyhow::Context;
use std::time::Duration;

use nnb_burn::clock::Clock;
use nnb_burn::env::Environment;
use nnb_burn::placement::{allowed_cpus, parse_cpu_list, plan, PinStrategy};
use nnb_burn::steal::{
    check_trace_duration, measure, StealReport, CPUTEST_THRESHOLD, DEFAULT_THRESHOLD,
};
use nnb_burn::topology::Topology;
use nnb_units::format_ns;
use serde::Serialize;

use crate::exit::usage;
use crate::out::Out;
use crate::table::{right, table};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Arguments of `nnb steal`.
#[derive(Debug, clap::Args)]
pub(crate) struct StealArgs {
    /// CPUs to watch, e.g. 0,2,4-7 [default: every allowed CPU].
    #[arg(long)]
    pub cpus: Option<String>,
    /// How long to watch, e.g. 10s, 500ms.
    #[arg(short, long, default_value = "10s", value_parser = nnb_units::parse_positive_duration)]
    pub duration: Duration,
    /// Gaps longer than this count as time not run [default: 5us; far above one loop
    /// iteration, below a host interrupt or a short VM exit].
    #[arg(long, value_parser = nnb_units::parse_positive_duration)]
    pub threshold: Option<Duration>,
    /// Wang & Ng's CPUTest: the threshold is theirs, 1 ms (a longer gap is a
    /// "schedule off period"), so the share printed is their CPU share.
    #[arg(long, conflicts_with = "threshold")]
    pub cputest: bool,
    /// Write CPUTest's timestamp trace here: one JSON line per CPU, {"cpu",
    /// "threshold_ns", "gaps": [[at_ns, len_ns], ...], "counts_per_ms": [...],
    /// "gaps_left_out"} (every gap longer than the threshold exactly, the other reads
    /// counted per ms from the scan's start; at most 10 min).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `--json` output: the measurement, the clock and the environment.
#[derive(Debug, Serialize)]
struct Output {
    environment: Environment,
    clock: nnb_burn::clock::ClockInfo,
    steal: StealReport,
}

/// Runs `nnb steal`.
pub(crate) fn run(args: StealArgs, out: &mut Out) -> anyhow::Result<()> {
    let duration = args.duration;
    let threshold = match (args.cputest, args.threshold) {
        (true, _) => CPUTEST_THRESHOLD,
        (false, t) => t.unwrap_or(DEFAULT_THRESHOLD),
    };
    if threshold >= duration {
        return Err(usage("--threshold must be shorter than --duration"));
    }
    let topo = Topology::host().context("reading this machine's CPU topology")?;
    let mine = allowed_cpus();
    let allowed: Vec<usize> = topo
        .online()
        .map(|c| c.id)
        .filter(|c| mine.contains(c))
        .collect();
    let cpus = match &args.cpus {
        Some(list) => parse_cpu_list(list).context("--cpus")?,
        None => allowed.clone(),
    };
    // Validates the list (absent, offline, not allowed, repeated) with placement's messages.
    let placement = plan(
        &topo,
        &PinStrategy::List(cpus.clone()),
        cpus.len(),
        &allowed,
        false,
    )
    .context("--cpus")?;
    let cpus: Vec<usize> = placement.slots.iter().filter_map(|s| s.cpu).collect();
    if args.trace.is_some() {
        check_trace_duration(duration, cpus.len()).map_err(|e| usage(format!("--trace: {e}")))?;
    }

    let clock = Clock::calibrate();
    if let Some(w) = &clock.info().warning {
        eprintln!("warning: {w}");
    }
    let mut environment = Environment::capture(&topo, env!("CARGO_PKG_VERSION"));
    if !args.json {
        eprintln!(
            "watching CPUs {cpus:?} for {duration:?} (gaps longer than {threshold:?} count as not run)"
        );
    }
    let never = std::sync::atomic::AtomicBool::new(false);
    let mut report = measure(
        &clock,
        &cpus,
        duration,
        threshold,
        args.trace.is_some(),
        &never,
    )
    .context("steal measurement")?;
    if let Some(path) = &args.trace {
        write_trace(path, &mut report)
            .with_context(|| format!("writing the trace to {}", path.display()))?;
    }
    environment.record_steal_after();
    if args.json {
        let json = Output {
            environment,
            clock: clock.info(),
            steal: report,
        };
        writeln!(out, "{}", serde_json::to_string_pretty(&json)?)?;
    } else {
        print_human(out, &report)?;
    }
    Ok(())
}

/// One line of the `--trace` file: a CPU's trace with what it needs to be read alone.
#[derive(Serialize)]
struct TraceLine<'a> {
    cpu: usize,
    threshold_ns: u64,
    #[serde(flatten)]
    trace: &'a nnb_burn::cputrace::CpuTrace,
}

/// Writes the CPUs' traces to `path` (JSON lines) and takes them out of the report,
/// so the report printed stays small.
fn write_trace(path: &Path, report: &mut StealReport) -> anyhow::Result<()> {
    let mut w = BufWriter::new(std::fs::File::create(path)?);
    for c in &mut report.cpus {
        if let Some(trace) = c.trace.take() {
            let line = TraceLine {
                cpu: c.cpu,
                threshold_ns: report.threshold_ns,
                trace: &trace,
            };
            serde_json::to_writer(&mut w, &line)?;
            writeln!(w)?;
        }
    }
    w.flush()?;
    Ok(())
}

fn print_human(out: &mut Out, r: &StealReport) -> io::Result<()> {
    let mut t = table([
        "cpu", "ran", "gaps", "> 1 ms", "p50", "p99", "p99.9", "longest", "lost", "in-guest",
        "loop", "steal",
    ]);
    let pct = |c: &nnb_burn::steal::CpuSteal, p: f64| {
        c.percentiles
            .iter()
            .find(|(q, _)| *q == p)
            .map_or("-".to_string(), |(_, v)| format_ns(*v as f64))
    };
    let ticks = |t: Option<u64>| {
        t.map_or("?".to_string(), |t| {
            format!("{} ms", t * 1000 / r.user_hz.max(1))
        })
    };
    for c in &r.cpus {
        t.add_row(vec![
            right(c.cpu),
            right(format!("{:.4}%", c.ran_share * 100.0)),
            right(c.gaps),
            right(c.scheduled_off_gaps),
            right(pct(c, 50.0)),
            right(pct(c, 99.0)),
            right(pct(c, 99.9)),
            right(format_ns(c.longest_gap_ns as f64)),
            right(format_ns(c.gap_total_ns)),
            right(format_ns(c.preempted_ns)),
            right(format!("{:.1} ns", c.iteration_ns)),
            right(ticks(c.proc_steal_ticks)),
        ]);
    }
    writeln!(out, "{t}")?;
    writeln!(
        out,
        "ran: share of the time the pinned loop ran (gaps longer than {} subtracted; with \
         Wang & Ng's 1 ms, --cputest, their CPU share); in-guest: the \
         part of the time lost while this machine's own kernel had switched the thread out \
         (not steal): it ran another thread there, or held the thread back for its cgroup's \
         CPU quota (throttled, below); the rest is interrupts and the hypervisor; steal: \
         /proc/stat steal of that CPU during the run (all CPUs: {})",
        format_ns(r.threshold_ns as f64),
        ticks(r.proc_steal_ticks_all)
    )?;
    match r.throttled_ns {
        Some(0) => writeln!(
            out,
            "throttled: 0 (this process's cgroup was not held back by a CPU quota)"
        ),
        Some(ns) => writeln!(
            out,
            "throttled: {} by this process's cgroup CPU quota (cpu.stat, summed over CPUs): \
             part of the in-guest time, during which the CPU sat idle and no other thread ran",
            format_ns(ns as f64)
        ),
        None => writeln!(
            out,
            "throttled: unknown (no CPU quota counter in this process's cgroup)"
        ),
    }
}
