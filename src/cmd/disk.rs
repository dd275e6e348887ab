//! `nnb disk`: the paced random read/write disk load generator, nnb's
//! `fio --rw=randrw --rate_iops=N --direct=1` (seed 004's disk neighbor). Prints the
//! achieved IOPS against the target, how late operations started against their
//! schedule, and the read and write latencies; `--json` prints the report with the
//! environment it was measured in.

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use comfy_table::Cell;
use nnb_burn::disk::{self, DiskReport, DiskSpec, Latency, LATE_AFTER};
use nnb_units::{format_bytes, format_ns, parse_bytes, parse_positive_duration, parse_size};

use super::common::{environment, stop_on_signal, WithEnvironment};
use crate::out::Out;
use crate::table::{right, table};

/// Arguments of `nnb disk`.
#[derive(Debug, clap::Args)]
pub(crate) struct DiskArgs {
    /// Directory for the scratch file (nnb-disk-<pid>-<n>.dat, removed at the end):
    /// on the disk to load.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Target operations per second, reads and writes together (fio's --rate_iops
    /// counts each direction separately), or `max` for as fast as the queue allows.
    #[arg(long, default_value = "max", value_parser = iops_or_max, allow_negative_numbers = true, value_name = "N|max")]
    iops: IopsArg,
    /// Share of operations that are reads, 0 (all writes) to 1 (all reads); fio's
    /// --rwmixread divided by 100.
    #[arg(
        long,
        default_value_t = 0.5,
        allow_negative_numbers = true,
        value_name = "F"
    )]
    read_fraction: f64,
    /// Bytes per operation: a power of two from 512 bytes to 16MiB (4k = 4KiB).
    #[arg(long, default_value = "4KiB", value_parser = parse_bytes, value_name = "SIZE")]
    block_size: usize,
    /// Operations in flight: one worker thread each (fio: --numjobs with a
    /// synchronous engine, or --iodepth with libaio).
    #[arg(long, default_value_t = 4, value_name = "Q")]
    queue_depth: usize,
    /// Size of the scratch file, written in full before the run; the random offsets
    /// span it.
    #[arg(long, default_value = "256MiB", value_parser = parse_size, value_name = "SIZE")]
    size: u64,
    /// How long to run (e.g. 10s, 2m).
    #[arg(long, default_value = "10s", value_parser = parse_positive_duration, value_name = "DURATION")]
    duration: Duration,
    /// Go through the page cache instead of O_DIRECT (reads may then never reach
    /// the disk).
    #[arg(long)]
    buffered: bool,
    /// One JSON object on stdout instead of the summary.
    #[arg(long)]
    json: bool,
}

/// A target rate, or as fast as possible.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IopsArg(Option<f64>);

fn iops_or_max(s: &str) -> Result<IopsArg, String> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("max") {
        return Ok(IopsArg(None));
    }
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(IopsArg(Some(v))),
        Ok(_) => Err(format!(
            "bad IOPS `{s}`: the target must be a number above zero, or `max`"
        )),
        Err(_) => Err(format!(
            "bad IOPS `{s}`: not a number; expected operations per second like 1000, or `max`"
        )),
    }
}

/// Runs `nnb disk`.
pub(crate) fn run(args: DiskArgs, out: &mut Out) -> anyhow::Result<()> {
    let spec = DiskSpec {
        dir: args.dir,
        file_size: args.size,
        block_size: args.block_size,
        iops: args.iops.0,
        read_fraction: args.read_fraction,
        queue_depth: args.queue_depth,
        direct: !args.buffered,
        duration: args.duration,
    };
    // Bad settings are refused before anything is measured or written.
    spec.validate()?;
    let stop = stop_on_signal()?;
    let env = environment();
    let report = disk::run(&spec, &stop).context("the disk load run failed")?;
    if args.json {
        let json = WithEnvironment::closing(&report, env);
        writeln!(out, "{}", serde_json::to_string_pretty(&json)?)?;
    } else {
        print_report(out, &report)?;
    }
    Ok(())
}

fn print_report(out: &mut Out, r: &DiskReport) -> io::Result<()> {
    let target = r.target_iops.map_or_else(
        || "as fast as possible".to_string(),
        |t| format!("{t} IOPS"),
    );
    writeln!(
        out,
        "nnb disk -> {} ({} file, {} blocks, {:.0}% reads, queue depth {}, {}), target {target}",
        r.file.display(),
        format_bytes(r.file_size as f64),
        format_bytes(r.block_size as f64),
        r.read_fraction * 100.0,
        r.queue_depth,
        if r.direct { "direct I/O" } else { "buffered" },
    )?;
    let vs_target = r.target_iops.map_or(String::new(), |t| {
        format!(" ({:.2}% of the target)", r.iops / t * 100.0)
    });
    writeln!(
        out,
        "achieved {:.1} IOPS{vs_target}: {:.1} reads/s + {:.1} writes/s, {}/s; {} ops in {:.3} s \
         (file written in {:.2} s before)",
        r.iops,
        r.read_iops,
        r.write_iops,
        format_bytes(r.bandwidth_bps / 8.0),
        r.ops,
        r.elapsed_s,
        r.fill_s,
    )?;
    let mut t = table(["latency", "ops", "mean", "p50", "p99", "max"]);
    let rows: [(&str, u64, Option<Latency>); 3] = [
        ("all", r.ops, r.latency),
        ("read", r.reads, r.read_latency),
        ("write", r.writes, r.write_latency),
    ];
    for (name, ops, lat) in rows {
        let ns = |f: fn(&Latency) -> f64| lat.map_or("-".into(), |l| format_ns(f(&l)));
        t.add_row(vec![
            Cell::new(name),
            right(ops),
            right(ns(|l| l.mean_ns)),
            right(ns(|l| l.p50_ns as f64)),
            right(ns(|l| l.p99_ns as f64)),
            right(ns(|l| l.max_ns as f64)),
        ]);
    }
    writeln!(out, "{t}")?;
    if let Some(p) = &r.pacing {
        writeln!(
            out,
            "pacing: operations started after their scheduled time by p50 {}, p99 {}, max {}; \
             {} ({:.2}%) more than {} ms late",
            format_ns(p.p50_ns as f64),
            format_ns(p.p99_ns as f64),
            format_ns(p.max_ns as f64),
            p.late_ops,
            p.late_ops as f64 / r.ops.max(1) as f64 * 100.0,
            LATE_AFTER.as_millis(),
        )?;
    }
    if r.stopped {
        writeln!(out, "stopped early: the numbers cover the time it ran")?;
    }
    Ok(())
}
