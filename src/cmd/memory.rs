//! `nnb memory`: the memory load generator, like `stress-ng --vm N --vm-bytes X
//! --vm-keep`. Worker processes allocate `--size` between them and keep touching it
//! (`keep`) or stream writes over it (`bandwidth`) for `--duration`; the summary says
//! how much became resident (the workers' peak RSS), how soon, and how many workers
//! the OOM killer took (each restarted while time remained). `--json` prints the
//! report with the environment.

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use nnb_burn::memload::{self, MemMode, MemReport, MemSpec};
use nnb_units::{format_bytes, format_secs, parse_size};

use super::common::{environment, stop_on_signal, WithEnvironment};
use crate::out::Out;

/// Arguments of `nnb memory`.
#[derive(Debug, clap::Args)]
pub(crate) struct MemoryArgs {
    /// Memory to load, all workers together: 256M, 1G or 512k (binary, as stress-ng
    /// writes them; also 256MiB), or 1GB (decimal). At least 4 KiB, at most this
    /// machine's MemTotal.
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    size: u64,
    /// Worker processes, each with an equal share of --size (1-256).
    #[arg(long, default_value_t = 1, value_name = "N")]
    workers: usize,
    /// keep: allocate and keep re-touching every page (stress-ng --vm-keep);
    /// bandwidth: stream writes over the memory and report the bytes per second.
    #[arg(long, default_value = "keep", value_parser = parse_mode, value_name = "MODE")]
    mode: MemMode,
    /// How long to hold the load, e.g. 10s, 500ms, 2m.
    #[arg(long, value_parser = nnb_units::parse_positive_duration, value_name = "DURATION")]
    duration: Duration,
    /// One JSON object on stdout instead of the summary.
    #[arg(long)]
    json: bool,
}

fn parse_mode(s: &str) -> Result<MemMode, String> {
    s.parse()
        .map_err(|e: memload::UnknownMemMode| e.to_string())
}

/// Runs `nnb memory`.
pub(crate) fn run(args: MemoryArgs, out: &mut Out) -> anyhow::Result<()> {
    let spec = MemSpec {
        bytes: args.size,
        mode: args.mode,
        workers: args.workers,
        duration: args.duration,
    };
    let stop = stop_on_signal()?;
    let env = environment();
    let report = memload::run(&spec, &stop).context("nnb memory")?;
    if args.json {
        let json = WithEnvironment::closing(&report, env);
        writeln!(out, "{}", serde_json::to_string_pretty(&json)?)?;
    } else {
        print_summary(out, &spec, &report)?;
    }
    Ok(())
}

fn print_summary(out: &mut Out, spec: &MemSpec, r: &MemReport) -> std::io::Result<()> {
    let target = r.target_bytes as f64;
    writeln!(
        out,
        "memory load: {} in {} worker{} ({}) for {:?}",
        format_bytes(target),
        r.workers,
        if r.workers == 1 { "" } else { "s" },
        r.mode,
        spec.duration
    )?;
    writeln!(
        out,
        "RSS reached    {} at the peak (the workers' VmRSS every 20 ms, which counts the \
         pages each still shares with nnb)",
        format_bytes(r.peak_rss_bytes as f64),
    )?;
    match r.time_to_target_s {
        Some(s) => writeln!(out, "time to reach  {} (95% of the target)", format_secs(s))?,
        None => writeln!(
            out,
            "time to reach  never: the workers never held 95% of the target \
             (a memory limit, or OOM kills)"
        )?,
    }
    writeln!(
        out,
        "OOM kills      {} (workers killed by SIGKILL; {} restarted)",
        r.oom_kills, r.restarts
    )?;
    match (r.touched_bytes_per_s, r.mode) {
        (Some(rate), MemMode::Bandwidth) => writeln!(
            out,
            "write rate     {}/s (after every worker's first pass)",
            format_bytes(rate)
        )?,
        (Some(rate), MemMode::Keep) => writeln!(
            out,
            "re-touched     {}/s of pages (after every worker's first pass)",
            format_bytes(rate)
        )?,
        (None, _) => writeln!(
            out,
            "write rate     n/a: the load ended before every worker had covered its memory \
             once ({} touched in all); give it a longer --duration",
            format_bytes(r.touched_bytes as f64)
        )?,
    }
    writeln!(out, "elapsed        {}", format_secs(r.elapsed_s))?;
    Ok(())
}
