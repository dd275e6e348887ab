//! `nnb latency`: the UDP latency probe. Closed-loop ping-pong by default,
//! open-loop with `--rate`, and stepped neighbor load with `--neighbor-load`.
//! Without `--target` it starts its own reflector on 127.0.0.1 (and, for neighbor
//! load without `--load-target`, its own sink) so it works alone.

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use comfy_table::{Cell, CellAlignment};

use crate::table::styled;
use nnb_netlat::hist::{HistLog, LatencySummary};
use nnb_netlat::neighbor::{self, LevelResult, NeighborConfig};
use nnb_netlat::probe::{self, Interval, ProbeConfig, ProbeLength, ProbeReport};
use nnb_units::{
    format_bits_per_sec, format_ns, parse_bytes, parse_duration, parse_packet_rate,
    parse_rate_steps, RateSteps,
};
use serde::Serialize;

use super::common::{
    embedded_server, environment, load_config, resolve, stop_on_signal, stream_cpus, LoadShape,
    Services, WithEnvironment,
};
use crate::exit::usage;
use crate::out::Out;
use nnb_burn::env::Environment;

/// Arguments of `nnb latency`.
#[derive(Debug, clap::Args)]
pub(crate) struct LatencyArgs {
    /// Reflector to probe, HOST:PORT (an `nnb serve` reflector).
    /// Default: a reflector started inside this command on 127.0.0.1.
    #[arg(long, value_name = "HOST:PORT")]
    target: Option<String>,
    /// Measure for this long after the warm-up (e.g. 10s, 500ms). Default: 5s.
    #[arg(long, value_parser = parse_duration, conflicts_with = "count", value_name = "DURATION")]
    duration: Option<Duration>,
    /// Measure this many pings after the warm-up instead of a duration.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// UDP payload bytes per ping, nnb's 32-byte header included.
    #[arg(long, default_value_t = 64, value_parser = parse_bytes, value_name = "BYTES")]
    msg_size: usize,
    /// Ping for this long first and discard the results (sockperf discards 400 ms).
    #[arg(long, default_value = "400ms", value_parser = parse_duration, value_name = "DURATION")]
    warmup: Duration,
    /// Spin on a non-blocking socket instead of blocking in recv (lower latency,
    /// one CPU busy). The embedded reflector busy-polls too.
    #[arg(long)]
    busy_poll: bool,
    /// Pin the probe thread (the sender, with --rate) to this CPU.
    #[arg(long, value_name = "CPU")]
    pin: Option<usize>,
    /// With --rate: pin the receiver thread to this CPU.
    #[arg(long, value_name = "CPU", requires = "rate")]
    recv_pin: Option<usize>,
    /// Count a ping as lost when its pong has not come back after this long.
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
    timeout: Duration,
    /// Print a line of statistics every INTERVAL (e.g. 1s).
    #[arg(long, value_parser = parse_duration, value_name = "INTERVAL")]
    interval: Option<Duration>,
    /// Open-loop probe: send this many pings per second (e.g. 10000, 50k, 50kpps)
    /// on a fixed schedule, and report latency from the intended send times too.
    #[arg(long, value_parser = parse_packet_rate, value_name = "PPS")]
    rate: Option<f64>,
    /// Write every interval's histogram (1 s intervals unless --interval) as a
    /// standard HdrHistogram interval log.
    #[arg(long, value_name = "FILE")]
    hist_out: Option<PathBuf>,
    /// Neighbor load while probing: one rate (10G) or steps FROM:TO:STEP (0:10G:1G);
    /// each level is probed in turn.
    #[arg(long, value_parser = parse_rate_steps, value_name = "RATE|FROM:TO:STEP")]
    neighbor_load: Option<RateSteps>,
    /// Sink for the neighbor load, HOST:PORT. Default: the embedded sink.
    #[arg(long, value_name = "HOST:PORT", requires = "neighbor_load")]
    load_target: Option<String>,
    /// Parallel streams of the neighbor load.
    #[arg(
        long,
        default_value_t = 1,
        value_name = "P",
        requires = "neighbor_load"
    )]
    load_streams: usize,
    /// Datagram size of the neighbor load.
    #[arg(long, default_value_t = nnb_netlat::load::DEFAULT_MSG_SIZE, value_parser = parse_bytes, value_name = "BYTES", requires = "neighbor_load")]
    load_msg_size: usize,
    /// CPUs for the neighbor load threads, e.g. 0,2-3. Default: all allowed.
    #[arg(
        long,
        value_parser = nnb_units::cpu_list_arg,
        value_name = "CPUS",
        requires = "neighbor_load"
    )]
    load_cpus: Option<nnb_units::CpuList>,
    /// One JSON object on stdout instead of tables.
    #[arg(long)]
    json: bool,
}

/// Runs `nnb latency`.
pub(crate) fn run(args: LatencyArgs, out: &mut Out) -> anyhow::Result<()> {
    for (flag, cpu) in [("--pin", args.pin), ("--recv-pin", args.recv_pin)] {
        if let Some(cpu) = cpu {
            super::common::check_available(flag, &[cpu])?;
        }
    }
    // The embedded reflector busy-polls with --busy-poll; the embedded sink for the
    // neighbor load never does (a second spinning thread would starve the probe).
    let reflector_server = match args.target {
        Some(_) => None,
        None => Some(embedded_server(
            Services {
                reflector: true,
                sink: false,
                tcp: false,
            },
            args.busy_poll,
        )?),
    };
    let sink_server = match (&args.neighbor_load, &args.load_target) {
        (Some(_), None) => Some(embedded_server(
            Services {
                reflector: false,
                sink: true,
                tcp: false,
            },
            false,
        )?),
        _ => None,
    };
    let target = match (&args.target, &reflector_server) {
        (Some(t), _) => resolve("--target", t)?,
        (_, Some(s)) => s
            .reflector_addr()
            .context("the embedded reflector has no address")?,
        (None, None) => return Err(usage("--target is needed")),
    };
    let interval = args
        .interval
        .or(args.hist_out.as_ref().map(|_| Duration::from_secs(1)));
    let cfg = ProbeConfig {
        target,
        msg_size: args.msg_size,
        length: match (args.count, args.duration) {
            (Some(n), _) => ProbeLength::Count(n),
            (None, d) => ProbeLength::Duration(d.unwrap_or(Duration::from_secs(5))),
        },
        warmup: args.warmup,
        busy_poll: args.busy_poll,
        pin: args.pin,
        recv_pin: args.recv_pin,
        timeout: args.timeout,
        interval,
        rate_pps: args.rate,
    };
    cfg.validate()?;
    let mut hist_log = args
        .hist_out
        .as_ref()
        .map(|p| {
            HistLog::create(p, &format!("nnb latency -> {target}, values in ns"))
                .with_context(|| format!("cannot write {}", p.display()))
        })
        .transpose()?;
    let stop = stop_on_signal()?;
    let env = environment();
    let mut lines = IntervalPrinter {
        print: !args.json && args.interval.is_some(),
        out: &mut *out,
        written: Ok(()),
        stop: &stop,
        log: hist_log.as_mut(),
        level: args.neighbor_load.is_some().then_some(0),
        errors: 0,
        header_done: false,
    };
    let result = match args.neighbor_load {
        None => {
            let report = probe::run(&cfg, &stop, &mut |iv| lines.interval(iv));
            let IntervalPrinter {
                written, errors, ..
            } = lines;
            log_errors(errors);
            written?;
            let report = report.context("the probe failed")?;
            if args.json {
                let json = WithEnvironment::closing(&report, env);
                writeln!(out, "{}", serde_json::to_string_pretty(&json)?)?;
            } else {
                print_probe(out, &report, reflector_server.is_some())?;
            }
            Ok(())
        }
        Some(steps) => {
            let load_target = match (&args.load_target, &sink_server) {
                (Some(t), _) => resolve("--load-target", t)?,
                (_, Some(s)) => s.sink_addr().context("the embedded sink has no address")?,
                (None, None) => return Err(usage("--load-target is needed")),
            };
            let load = load_config(
                load_target,
                None,
                Duration::from_secs(1),
                LoadShape {
                    streams: args.load_streams,
                    msg_size: args.load_msg_size,
                    cpus: stream_cpus("--load-cpus", args.load_cpus.as_ref(), false)?,
                    tcp: false,
                    gso: true,
                    batch: nnb_netlat::load::DEFAULT_BATCH,
                    catch_up: false,
                    flag: "--neighbor-load",
                },
            )?;
            let ncfg = NeighborConfig {
                probe: cfg,
                load,
                levels: steps.levels(),
            };
            run_neighbor(&ncfg, &stop, args.json, lines, env)
        }
    };
    if let Some(log) = hist_log {
        log.finish().context("cannot finish the histogram log")?;
    }
    result
}

/// Says how many intervals the histogram log missed.
fn log_errors(errors: u64) {
    if errors > 0 {
        tracing::warn!("{errors} histogram log intervals could not be written");
    }
}

/// Prints interval lines and writes them to the histogram log.
struct IntervalPrinter<'a> {
    print: bool,
    out: &'a mut Out,
    /// The first failed write to stdout; it stops the measurement.
    written: io::Result<()>,
    stop: &'a AtomicBool,
    log: Option<&'a mut HistLog>,
    /// Neighbor-load runs tag each level's intervals apart in the log: the index
    /// of the level being measured, counted up as the library reports each level
    /// done.
    level: Option<usize>,
    errors: u64,
    header_done: bool,
}

impl IntervalPrinter<'_> {
    fn interval(&mut self, iv: &Interval<'_>) {
        if let Some(log) = self.log.as_deref_mut() {
            let written = iv.write_to(log, self.level);
            if let Err(e) = written {
                tracing::debug!("{e}");
                self.errors += 1;
            }
        }
        if self.print {
            self.write(|p| p.print_line(iv));
        }
    }

    /// A neighbor-load level is done: its line (unless `json`), and later
    /// intervals belong to the next level.
    fn level_done(&mut self, l: &LevelResult, levels: usize, json: bool) {
        let done = self.level.map_or(0, |n| n + 1);
        self.level = Some(done);
        if !json {
            let (series, s) = l.latency();
            self.write(|p| {
                writeln!(
                    p.out,
                    "level {done}/{levels}: load {} -> {} mean {}, p90 {}, p99.9 {}",
                    format_bits_per_sec(l.sent_bps),
                    series_label(series),
                    format_ns(s.mean_ns),
                    format_ns(s.p90_ns as f64),
                    format_ns(s.p999_ns as f64),
                )
            });
        }
    }

    /// Writes and flushes unless an earlier write failed; a failed write (stdout
    /// closed) stops the measurement and is returned when it has ended.
    fn write(&mut self, f: impl FnOnce(&mut Self) -> io::Result<()>) {
        if self.written.is_ok() {
            self.written = f(self).and_then(|()| self.out.flush());
            if self.written.is_err() {
                self.stop.store(true, Ordering::Relaxed);
            }
        }
    }

    fn print_line(&mut self, iv: &Interval<'_>) -> io::Result<()> {
        let out = &mut *self.out;
        if !self.header_done {
            writeln!(
                out,
                "{:>15}  {:>7}  {:>8}  {:>10}  {:>10}  {:>10}  {:>10}",
                "interval", "sent", "answered", "p50", "p99", "max", "p99 (int.)"
            )?;
            self.header_done = true;
        }
        let s = iv.rtt.summary();
        let intended = iv
            .rtt_intended
            .map_or_else(|| "-".to_string(), |h| format_ns(h.summary().p99_ns as f64));
        writeln!(
            out,
            "{:>15}  {:>7}  {:>8}  {:>10}  {:>10}  {:>10}  {:>10}",
            format!(
                "{:.2}-{:.2}s",
                iv.start.as_secs_f64(),
                (iv.start + iv.length).as_secs_f64()
            ),
            iv.sent,
            iv.answered,
            format_ns(s.p50_ns as f64),
            format_ns(s.p99_ns as f64),
            format_ns(s.max_ns as f64),
            intended,
        )?;
        Ok(())
    }
}

fn print_probe(out: &mut Out, r: &ProbeReport, embedded: bool) -> io::Result<()> {
    writeln!(

        out,
        "nnb latency -> {}{}: {}{}, {}-byte pings, {} receive, {:.2} s measured after {} warm-up pings",
        r.target,
        if embedded { " (embedded reflector)" } else { "" },
        r.mode,
        r.rate_pps.map_or_else(String::new, |p| format!(" at {p:.0} pings/s")),
        r.msg_size,
        if r.busy_poll { "busy-poll" } else { "blocking" },
        r.elapsed_s,
        r.warmup_pings,
    )?;
    let mut t = styled();
    let mut columns: Vec<(&str, &LatencySummary)> = Vec::new();
    if let Some(intended) = &r.rtt_intended {
        columns.push(("RTT from intended send (CO-corrected)", intended));
        columns.push(("RTT from actual send", &r.rtt));
    } else {
        columns.push(("RTT", &r.rtt));
    }
    columns.push(("RTT/2 (one-way estimate)", &r.rtt_half));
    let mut header = vec![""];
    header.extend(columns.iter().map(|c| c.0));
    t.set_header(header);
    for (i, (name, _)) in r.rtt.rows().iter().enumerate() {
        let mut row = vec![Cell::new(name)];
        row.extend(
            columns.iter().map(|(_, s)| {
                Cell::new(format_ns(s.rows()[i].1)).set_alignment(CellAlignment::Right)
            }),
        );
        t.add_row(row);
    }
    writeln!(out, "{t}")?;
    let c = r.counts;
    writeln!(

        out,
        "sent {}  answered {}  lost {} ({:.3}%)  late {}  duplicates {}  reordered {}  garbage {}{}",
        c.sent,
        c.answered,
        c.lost,
        c.loss_ratio() * 100.0,
        c.late,
        c.duplicates,
        c.reordered,
        c.garbage,
        if r.clamped > 0 {
            format!("  ({} samples above 10 s clamped)", r.clamped)
        } else {
            String::new()
        }
    )?;
    if c.unsent > 0 {
        writeln!(
            out,
            "unsent {}: the sender fell behind its schedule and stopped when the schedule's \
             time was over",
            c.unsent
        )?;
    }
    if let Some(t) = r.reply_ttl {
        writeln!(out, "{t}")?;
    }
    Ok(())
}

#[derive(Serialize)]
struct NeighborJson<'a> {
    levels: &'a [LevelResult],
}

fn run_neighbor(
    cfg: &NeighborConfig,
    stop: &AtomicBool,
    json: bool,
    mut lines: IntervalPrinter<'_>,
    env: Option<Environment>,
) -> anyhow::Result<()> {
    let mut table = crate::table::table([
        "load target",
        "sent",
        "received",
        "mean",
        "p50",
        "p90",
        "p99",
        "p99.9",
        "p50-mean",
        "p90-mean",
        "p99-mean",
        "p99.9-mean",
        "loss",
    ]);
    if !json {
        writeln!(
            lines.out,
            "nnb latency -> {} under neighbor load -> {} ({} levels)",
            cfg.probe.target,
            cfg.load.target,
            cfg.levels.len()
        )?;
    }
    let levels = {
        let printer = std::sync::Mutex::new(&mut lines);
        let lock = || printer.lock().unwrap_or_else(|e| e.into_inner());
        let total = cfg.levels.len();
        neighbor::run(
            cfg,
            stop,
            &mut |l| lock().level_done(l, total, json),
            &mut |iv| lock().interval(iv),
        )
    };
    let IntervalPrinter {
        out,
        written,
        errors,
        ..
    } = lines;
    log_errors(errors);
    written?;
    let levels = levels.context("the probe under neighbor load failed")?;
    if json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&WithEnvironment::closing(
                &NeighborJson { levels: &levels },
                env
            ))?
        )?;
        return Ok(());
    }
    for l in &levels {
        let (_, s) = l.latency();
        let a = l.above_mean;
        let right = |v: String| Cell::new(v).set_alignment(CellAlignment::Right);
        let signed = |v: f64| {
            if v < 0.0 {
                format!("-{}", format_ns(-v))
            } else {
                format!("+{}", format_ns(v))
            }
        };
        table.add_row([
            right(format_bits_per_sec(l.target_bps)),
            right(format_bits_per_sec(l.sent_bps)),
            right(l.received_bps.map_or("-".into(), format_bits_per_sec)),
            right(format_ns(s.mean_ns)),
            right(format_ns(s.p50_ns as f64)),
            right(format_ns(s.p90_ns as f64)),
            right(format_ns(s.p99_ns as f64)),
            right(format_ns(s.p999_ns as f64)),
            right(signed(a.p50_ns)),
            right(signed(a.p90_ns)),
            right(signed(a.p99_ns)),
            right(signed(a.p999_ns)),
            right(format!("{:.3}%", l.probe.counts.loss_ratio() * 100.0)),
        ]);
    }
    writeln!(out, "{table}")?;
    let series = levels.first().map_or("rtt", |l| l.latency().0);
    writeln!(
        out,
        "{} figures; sent = achieved aggregate neighbor payload rate, received = as the sink saw it",
        series_label(series)
    )?;
    Ok(())
}

/// How a level's latency series (`LevelResult::latency`) is labelled for people.
fn series_label(series: &str) -> &'static str {
    if series == "rtt_intended" {
        "RTT from intended send (CO-corrected)"
    } else {
        "RTT"
    }
}
