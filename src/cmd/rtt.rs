//! `nnb rtt`: Wang & Ng's RTT series (seed 003, §III.A, §V.B). Probes at a fixed
//! rate (10/s), a fixed number of them (5,000), every probe's RTT or loss printed
//! and kept in order, and min (the propagation delay), median, mean, max and
//! standard deviation of the series after its first probes (50) are dropped. UDP to
//! an `nnb serve` reflector, or ICMP echo with `--icmp`; every line says which.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use nnb_netlat::probe::series::{
    self, ProbeRecord, SeriesConfig, SeriesMode, SeriesReport, DEFAULT_PROBES, DEFAULT_RATE_HZ,
    DEFAULT_SKIP,
};
use nnb_units::{format_ns, parse_bytes, parse_packet_rate, parse_positive_duration};

use super::common::{environment, resolve, stop_on_signal, WithEnvironment};
use crate::exit::usage;
use crate::out::Out;

/// Arguments of `nnb rtt`.
#[derive(Debug, clap::Args)]
pub(crate) struct RttArgs {
    /// The `nnb serve` reflector, HOST:PORT; with --icmp the host to echo, HOST
    /// (a port is ignored).
    #[arg(value_name = "TARGET")]
    target: String,
    /// Probes to send, the dropped first ones included (the seed's 5,000).
    #[arg(long, default_value_t = DEFAULT_PROBES, value_name = "N")]
    probes: u64,
    /// Probes per second, e.g. 10, 50, 1k (the seed's 10).
    #[arg(long, default_value_t = DEFAULT_RATE_HZ, value_parser = parse_packet_rate, value_name = "PPS")]
    rate: f64,
    /// First probes left out of the statistics, not of the log (the seed's 50).
    #[arg(long, default_value_t = DEFAULT_SKIP, value_name = "N")]
    skip: u64,
    /// Bytes per probe: UDP payload or ICMP echo data, nnb's 32-byte header included.
    #[arg(long, default_value_t = 64, value_parser = parse_bytes, value_name = "BYTES")]
    msg_size: usize,
    /// A probe unanswered after this long is lost.
    #[arg(long, default_value = "1s", value_parser = parse_positive_duration, value_name = "DURATION")]
    timeout: Duration,
    /// ICMP echo instead of UDP (a kernel ping socket if this user's group is in
    /// net.ipv4.ping_group_range, else a raw socket, as root).
    #[arg(long)]
    icmp: bool,
    /// Write every probe to FILE as CSV, like sockperf --full-log: mode, sequence,
    /// send time (s from the series' start), RTT (ms) or "lost".
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// No line per probe: only the summary.
    #[arg(long, short)]
    quiet: bool,
    /// One JSON object on stdout (the result, with the log) instead of lines.
    #[arg(long)]
    json: bool,
}

/// Runs `nnb rtt`.
pub(crate) fn run(args: RttArgs, out: &mut Out) -> anyhow::Result<()> {
    let mode = if args.icmp {
        SeriesMode::Icmp
    } else {
        SeriesMode::Udp
    };
    let target = match mode {
        SeriesMode::Udp => resolve("TARGET", &args.target)?,
        SeriesMode::Icmp => icmp_host(&args.target)?,
    };
    let cfg = SeriesConfig {
        probes: args.probes,
        rate_hz: args.rate,
        skip: args.skip,
        msg_size: args.msg_size,
        timeout: args.timeout,
        ..SeriesConfig::new(target, mode)
    };
    cfg.validate()?;
    // Opened first: a path that cannot be written fails before the probing.
    let log_file = args
        .log
        .as_ref()
        .map(|p| File::create(p).with_context(|| format!("cannot write {}", p.display())))
        .transpose()?;
    let stop = stop_on_signal()?;
    let env = environment();
    let label = mode.name();
    let print = !args.json && !args.quiet;
    if !args.json {
        writeln!(
            out,
            "{label} rtt to {}: {} probes of {} bytes at {}/s, the first {} left out of the \
             statistics",
            cfg.target_label(),
            cfg.probes,
            cfg.msg_size,
            cfg.rate_hz,
            cfg.skip
        )?;
        out.flush()?;
    }
    let mut written: io::Result<()> = Ok(());
    let report = series::run(&cfg, &stop, &mut |p| {
        if print && written.is_ok() {
            written = writeln!(out, "{}", probe_line(label, p)).and_then(|()| out.flush());
            // stdout is gone: stop probing, and say so below.
            if written.is_err() {
                stop.store(true, Ordering::Relaxed);
            }
        }
    });
    written?;
    let report = report.with_context(|| format!("the {label} rtt series failed"))?;
    if let (Some(file), Some(path)) = (log_file, &args.log) {
        write_log(file, &report).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if args.json {
        let json = WithEnvironment::closing(&report, env);
        writeln!(out, "{}", serde_json::to_string_pretty(&json)?)?;
    } else {
        print_summary(out, &report)?;
    }
    Ok(())
}

/// The host of an ICMP target, HOST or HOST:PORT (the port is ignored).
fn icmp_host(s: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(a) = resolve("TARGET", s) {
        return Ok(a);
    }
    // A bare IPv6 address has colons but no port.
    let host = s.trim_start_matches('[').trim_end_matches(']');
    (host, 0)
        .to_socket_addrs()
        .map_err(|e| usage(format!("TARGET {s}: not a host ({e})")))?
        .next()
        .ok_or_else(|| usage(format!("TARGET {s}: the name resolves to no address")))
}

/// One probe's printed line, labelled with the mode.
fn probe_line(label: &str, p: &ProbeRecord) -> String {
    let at = p.sent_ns as f64 / 1e9;
    match p.rtt_ns {
        Some(rtt) => format!(
            "{label} seq={} sent={at:.3}s rtt={:.3} ms",
            p.seq,
            rtt as f64 / 1e6
        ),
        None => format!("{label} seq={} sent={at:.3}s lost", p.seq),
    }
}

/// Writes the per-probe CSV: `mode,seq,sent_s,rtt_ms`, "lost" for a lost probe.
fn write_log(file: File, r: &SeriesReport) -> io::Result<()> {
    let mut w = BufWriter::new(file);
    writeln!(w, "mode,seq,sent_s,rtt_ms")?;
    let label = r.mode.name();
    for p in &r.log {
        let rtt = p.rtt_ns.map_or_else(
            || "lost".to_string(),
            |ns| format!("{:.6}", ns as f64 / 1e6),
        );
        writeln!(w, "{label},{},{:.9},{rtt}", p.seq, p.sent_ns as f64 / 1e9)?;
    }
    w.flush()
}

fn print_summary(out: &mut Out, r: &SeriesReport) -> io::Result<()> {
    let label = r.mode.name();
    let socket = r
        .icmp_socket
        .map_or_else(String::new, |s| format!(" ({s} socket)"));
    writeln!(
        out,
        "{label} rtt to {}{socket}: sent {} of {}, lost {} ({} late), {} garbage, {:.2} s",
        r.target, r.sent, r.probes, r.lost, r.late, r.garbage, r.elapsed_s
    )?;
    match &r.summary {
        Some(s) => writeln!(
            out,
            "{label} rtt after the first {}: min {}  median {}  mean {}  max {}  std {}  \
             ({} RTTs, {} lost)",
            r.skip,
            format_ns(s.min_ns as f64),
            format_ns(s.p50_ns as f64),
            format_ns(s.mean_ns),
            format_ns(s.max_ns as f64),
            format_ns(s.std_ns),
            s.kept,
            s.lost
        ),
        None => writeln!(
            out,
            "{label} rtt after the first {}: no probe answered",
            r.skip
        ),
    }?;
    match r.reply_ttl {
        Some(t) => writeln!(out, "{label} {t}"),
        None => Ok(()),
    }
}
