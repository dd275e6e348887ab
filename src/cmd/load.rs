//! `nnb load`: the rate-paced UDP (or TCP) load generator. Prints a line per
//! interval with the achieved payload and wire rates, then the sender's view beside
//! the sink's (received rate, loss, bursts) when the target is an `nnb serve` sink.
//! Without `--target` it starts its own sink on 127.0.0.1 so it works alone.

use nnb_units::wire::{Framing, ETHERNET_OVERHEAD, TCP_HEADER, TCP_MSS, UDP_HEADER};
use std::io::{self, Write};
use std::time::Duration;

use anyhow::Context;
use comfy_table::{Cell, CellAlignment};

use crate::table::table;
use nnb_netlat::grain::FineSettings;
use nnb_netlat::load::{self, LoadConfig, LoadInterval, LoadReport, DEFAULT_BATCH};
use nnb_netlat::sendbatch::GsoUse;
use nnb_units::{format_bits_per_sec, format_si, parse_bytes, parse_duration, parse_rate, Rate};
use serde::Serialize;

use super::common::{
    embedded_server, environment, load_config, resolve, stop_on_signal, stream_cpus, LoadShape,
    Services, WithEnvironment,
};
use crate::exit::usage;
use crate::out::Out;

/// Arguments of `nnb load`.
#[derive(Debug, clap::Args)]
pub(crate) struct LoadArgs {
    /// Sink to load, HOST:PORT (an `nnb serve` UDP sink, or its TCP sink with --tcp).
    /// Default: a sink started inside this command on 127.0.0.1.
    #[arg(long, value_name = "HOST:PORT")]
    target: Option<String>,
    /// Aggregate payload rate: bit/s with SI (k = 1000) suffixes (200M, 1.5G, 10Gbit/s),
    /// bytes/s (8MB/s = 64 Mbit/s), a packet rate (100kpps), or `max` for as fast as
    /// possible.
    #[arg(long, default_value = "1G", value_parser = rate_or_max, value_name = "RATE")]
    rate: RateArg,
    /// Parallel streams, each one pinned thread and one socket; the rate is split evenly.
    #[arg(long, default_value_t = 1, value_name = "P")]
    streams: usize,
    /// UDP payload bytes per datagram, nnb's 32-byte header included. 1400 fits a
    /// 1500-byte MTU with room for cloud tunnel headers.
    #[arg(long, default_value_t = load::DEFAULT_MSG_SIZE, value_parser = parse_bytes, value_name = "BYTES")]
    msg_size: usize,
    /// How long to send (e.g. 10s, 500ms, 2m).
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    duration: Duration,
    /// CPUs for the stream threads, e.g. 0,2-3 (stream i on the i-th, round robin).
    /// Default: the CPUs this process may use, round robin.
    #[arg(long, value_parser = nnb_units::cpu_list_arg, value_name = "CPUS")]
    cpus: Option<nnb_units::CpuList>,
    /// Leave the stream threads unpinned.
    #[arg(long, conflicts_with = "cpus")]
    no_pin: bool,
    /// Send one TCP stream per --streams to a TCP sink instead of UDP datagrams.
    #[arg(long)]
    tcp: bool,
    /// Do not use UDP GSO (UDP_SEGMENT) even where the kernel has it.
    #[arg(long)]
    no_gso: bool,
    /// Messages per sendmmsg system call.
    #[arg(long, default_value_t = DEFAULT_BATCH, value_name = "N")]
    batch: usize,
    /// After a stall, send what fell due at once (default: drop it and count it).
    #[arg(long)]
    catch_up: bool,
    /// Print the achieved rates every INTERVAL (0 for none).
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "INTERVAL")]
    interval: Duration,
    /// The receiver's fine-grained throughput: one rate per GRAIN bytes received
    /// (Wang & Ng: 256K), a multiple of 16K; with --link, buffer bursts too.
    /// Reported per stream as `fine` and `buffer_bursts`.
    #[arg(long, value_parser = parse_bytes, value_name = "GRAIN")]
    grain: Option<usize>,
    /// The full link rate buffer bursts are judged against, bit/s (Wang & Ng: 1G):
    /// a buffer burst period is a run of grains each received above it.
    #[arg(long, value_parser = parse_link, value_name = "RATE")]
    link: Option<f64>,
    /// Stop after this many payload bytes over all streams (Wang & Ng: 800MB), or
    /// at --duration, whichever comes first. Recorded as `bytes_bound`.
    #[arg(long, value_parser = nnb_units::parse_size, value_name = "BYTES")]
    bytes: Option<u64>,
    /// Pacing granularity: each chunk of this many bytes goes out back to back,
    /// then the sender idles to keep the mean rate (Wang & Ng's UDPTest: 128K).
    #[arg(long, value_parser = parse_bytes, value_name = "BYTES")]
    pacing_chunk: Option<usize>,
    /// Socket send buffer to ask for (SO_SNDBUF; TCP: the send window; Wang & Ng:
    /// 128K for UDP, 256K for TCP). Default: 4M for UDP, the kernel's for TCP.
    /// Asked and granted sizes are recorded in `socket`.
    #[arg(long, value_parser = parse_bytes, value_name = "BYTES")]
    send_buffer: Option<usize>,
    /// TCP: the receive window (SO_RCVBUF) the nnb TCP sink sets on its socket,
    /// asked in the connection's hello (Wang & Ng: 256K).
    #[arg(long, value_parser = parse_bytes, value_name = "BYTES")]
    recv_buffer: Option<usize>,
    /// TCP: sample the sender's TCP_INFO every INTERVAL (e.g. 1ms) and find its
    /// quiet periods; reported as `tcp_info` and `quiet`.
    #[arg(long, value_parser = parse_duration, value_name = "INTERVAL")]
    tcp_info: Option<Duration>,
    /// With --tcp-info: the shortest silence (nothing sent, nothing acknowledged)
    /// that counts as a quiet period.
    #[arg(long, default_value = "10ms", value_parser = parse_duration, value_name = "DURATION")]
    quiet: Duration,
    /// One JSON object on stdout instead of tables.
    #[arg(long)]
    json: bool,
}

/// A link rate in bit/s (`1G`, `10Gbit/s`): a packet rate says nothing about bits.
fn parse_link(s: &str) -> Result<f64, String> {
    match parse_rate(s).map_err(|e| e.to_string())? {
        Rate::BitsPerSec(bps) if bps.is_finite() && bps > 0.0 => Ok(bps),
        _ => Err("a link rate is bit/s above zero, like 1G or 10Gbit/s".into()),
    }
}

/// A rate, or as fast as possible.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RateArg(pub Option<Rate>);

fn rate_or_max(s: &str) -> Result<RateArg, String> {
    if s.trim().eq_ignore_ascii_case("max") {
        return Ok(RateArg(None));
    }
    let r = parse_rate(s).map_err(|e| e.to_string())?;
    if r.is_zero() {
        return Err("a zero rate sends nothing; use a positive rate or `max`".into());
    }
    Ok(RateArg(Some(r)))
}

#[derive(Serialize)]
struct JsonOut<'a> {
    #[serde(flatten)]
    report: &'a LoadReport,
    intervals: &'a [LoadInterval],
}

/// Runs `nnb load`.
pub(crate) fn run(args: LoadArgs, out: &mut Out) -> anyhow::Result<()> {
    let cpus = stream_cpus("--cpus", args.cpus.as_ref(), args.no_pin)?;
    if args.batch == 0 {
        return Err(usage("--batch must be at least 1"));
    }
    let (server, target) = match &args.target {
        Some(t) => (None, resolve("--target", t)?),
        None => {
            let services = Services {
                reflector: false,
                sink: !args.tcp,
                tcp: args.tcp,
            };
            let s = embedded_server(services, false)?;
            let addr = if args.tcp {
                s.tcp_addr()
            } else {
                s.sink_addr()
            }
            .context("the embedded sink has no address")?;
            (Some(s), addr)
        }
    };
    let mut cfg = load_config(
        target,
        args.rate.0,
        args.duration,
        LoadShape {
            streams: args.streams,
            msg_size: args.msg_size,
            cpus,
            tcp: args.tcp,
            gso: !args.no_gso,
            batch: args.batch,
            catch_up: args.catch_up,
            flag: "nnb load",
        },
    )?;
    if args.grain.is_some() || args.link.is_some() {
        let seed = FineSettings::default();
        let fine = FineSettings {
            grain: args.grain.map_or(seed.grain, |g| g as u64),
            link_bps: args.link.unwrap_or(seed.link_bps),
        };
        fine.validate()
            .map_err(|e| usage(format!("nnb load --grain/--link: {e}")))?;
        cfg.fine = Some(fine);
    }
    cfg.bytes = args.bytes;
    cfg.pacing_chunk = args.pacing_chunk;
    cfg.send_buffer = args.send_buffer;
    cfg.recv_buffer = args.recv_buffer;
    cfg.tcp_info = args.tcp_info;
    cfg.quiet = args.quiet;
    cfg.validate()
        .map_err(|e| usage(format!("nnb load: {e}")))?;
    let stop = stop_on_signal()?;
    let env = environment();
    if !args.json {
        print_header(out, &cfg, server.is_some())?;
        out.flush()?;
    }
    let mut intervals = Vec::new();
    let interval = (!args.interval.is_zero()).then_some(args.interval);
    let json = args.json;
    // A closed stdout stops the run; the error is reported once it has ended.
    let mut written = Ok(());
    let report = load::run_with_intervals(&cfg, &stop, interval, &mut |iv| {
        if !json && written.is_ok() {
            written = print_interval(out, iv).and_then(|()| out.flush());
            if written.is_err() {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        intervals.push(*iv);
    })
    .context("the load run failed")?;
    written?;
    drop(server);
    if args.json {
        let json = JsonOut {
            report: &report,
            intervals: &intervals,
        };
        let json = WithEnvironment::closing(&json, env);
        writeln!(out, "{}", serde_json::to_string_pretty(&json)?)?;
    } else {
        print_report(out, &report)?;
    }
    Ok(())
}

fn print_header(out: &mut Out, cfg: &LoadConfig, embedded: bool) -> io::Result<()> {
    let rate = cfg
        .rate
        .map_or_else(|| "as fast as possible".to_string(), |r| r.to_string());
    writeln!(
        out,
        "nnb load -> {}{} ({}, {} stream{}, {}-byte {}, {rate} for {:?})",
        cfg.target,
        if embedded { " (embedded sink)" } else { "" },
        if cfg.tcp { "tcp" } else { "udp" },
        cfg.streams,
        if cfg.streams == 1 { "" } else { "s" },
        cfg.msg_size,
        if cfg.tcp { "units" } else { "datagrams" },
        cfg.duration,
    )?;
    writeln!(
        out,
        "{:>15}  {:>16}  {:>16}  {:>10}",
        "interval",
        "payload",
        "wire",
        if cfg.tcp { "writes/s" } else { "datagrams/s" }
    )?;
    Ok(())
}

fn print_interval(out: &mut Out, iv: &LoadInterval) -> io::Result<()> {
    writeln!(
        out,
        "{:>15}  {:>16}  {:>16}  {:>10}",
        format!("{:.2}-{:.2}s", iv.start_s, iv.start_s + iv.length_s),
        format_bits_per_sec(iv.payload_bps),
        format_bits_per_sec(iv.wire_bps),
        format_si(iv.datagrams as f64 / iv.length_s.max(1e-9)),
    )?;
    Ok(())
}

/// Per stream, the fine-grained series' extent and the buffer bursts: how many
/// periods, the largest and the total buffer burst data.
fn print_fine(out: &mut Out, r: &LoadReport) -> io::Result<()> {
    for s in &r.streams {
        let (Some(f), Some(b)) = (&s.fine, &s.buffer_bursts) else {
            continue;
        };
        let (low, high) = f
            .points
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), p| {
                (lo.min(p.bps), hi.max(p.bps))
            });
        writeln!(
            out,
            "stream {}: {} grains of {}B received ({} left out), {} to {} per grain; \
             buffer bursts above {}: {} periods, largest {}B, total {}B",
            s.stream,
            f.points.len(),
            format_si(f.grain_bytes as f64),
            f.points_left_out,
            format_bits_per_sec(if f.points.is_empty() { 0.0 } else { low }),
            format_bits_per_sec(high),
            format_bits_per_sec(b.link_bps),
            b.periods.len(),
            format_si(b.largest_burst_bytes as f64),
            format_si(b.total_burst_bytes as f64),
        )?;
    }
    Ok(())
}

/// The byte bound, the socket buffers asked for and granted, and the `TCP_INFO`
/// summary: retransmissions, quiet periods and whether a retransmission came with
/// any of them.
fn print_wang_ng(out: &mut Out, r: &LoadReport) -> io::Result<()> {
    let b = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| format_si(v as f64) + "B");
    if let Some(bound) = r.bytes_bound {
        writeln!(
            out,
            "byte bound: {} ({} sent)",
            b(Some(bound)),
            b(Some(r.sent.bytes))
        )?;
    }
    if let Some(s) = &r.socket {
        writeln!(
            out,
            "socket buffers (asked / granted as getsockopt reads it, Linux doubles): send {} / {}, receive {} / {}",
            b(s.send_buffer_requested),
            b(s.send_buffer_granted),
            b(s.recv_buffer_requested),
            b(s.recv_buffer_granted)
        )?;
    }
    if let (Some(info), Some(q)) = (&r.tcp_info, &r.quiet) {
        writeln!(
            out,
            "TCP_INFO every {} ms: {} samples, {} retransmissions; quiet periods (>= {:.1} ms): {}, longest {:.1} ms, total {:.1} ms, {} with a retransmission in or after",
            info.interval_ms,
            info.samples.len() as u64 + info.samples_left_out,
            info.retransmissions,
            q.threshold_ns as f64 / 1e6,
            q.count,
            q.longest_ns as f64 / 1e6,
            q.total_ns as f64 / 1e6,
            q.with_retransmission()
        )?;
    }
    Ok(())
}

fn print_report(out: &mut Out, r: &LoadReport) -> io::Result<()> {
    let mut t = table(["", "sender", "sink (received)"]);
    let sink = r.sink.as_ref();
    let na = || "-".to_string();
    let rows: Vec<(&str, String, String)> = vec![
        (
            "payload rate",
            format_bits_per_sec(r.sent.payload_bps),
            sink.map_or_else(na, |s| format_bits_per_sec(s.rate_bps)),
        ),
        ("wire rate", format_bits_per_sec(r.sent.wire_bps), na()),
        (
            "bytes",
            format_si(r.sent.bytes as f64) + "B",
            sink.map_or_else(na, |s| format_si(s.bytes as f64) + "B"),
        ),
        (
            if r.protocol == "tcp" {
                "writes"
            } else {
                "datagrams"
            },
            r.sent.datagrams.to_string(),
            sink.filter(|_| r.protocol == "udp")
                .map_or_else(na, |s| (s.expected - s.lost).to_string()),
        ),
        (
            "lost",
            na(),
            sink.filter(|_| r.protocol == "udp").map_or_else(na, |s| {
                format!("{} ({:.3}%)", s.lost, s.loss_ratio() * 100.0)
            }),
        ),
        (
            "duplicates / reordered",
            na(),
            sink.filter(|_| r.protocol == "udp")
                .map_or_else(na, |s| format!("{} / {}", s.duplicates, s.reordered)),
        ),
        ("skipped after stalls", r.sent.skipped.to_string(), na()),
        ("send errors", r.sent.send_errors.to_string(), na()),
    ];
    for (name, sender, sink) in rows {
        t.add_row([
            Cell::new(name),
            Cell::new(sender).set_alignment(CellAlignment::Right),
            Cell::new(sink).set_alignment(CellAlignment::Right),
        ]);
    }
    writeln!(out, "{t}")?;
    print_fine(out, r)?;
    print_wang_ng(out, r)?;
    if let Some(target) = r.target_bps {
        writeln!(
            out,
            "target {} payload: sender achieved {:.2}%",
            format_bits_per_sec(target),
            r.sent.payload_bps / target * 100.0
        )?;
    }
    match r.streams.first().and_then(|s| s.gso.as_ref()) {
        Some(GsoUse::On { segments }) => {
            writeln!(out, "UDP GSO: on, up to {segments} datagrams per send")?
        }
        Some(GsoUse::Fallback { reason }) => {
            writeln!(out, "UDP GSO: refused, plain datagrams ({reason})")?
        }
        Some(GsoUse::Off) => writeln!(out, "UDP GSO: off")?,
        None => {}
    }
    let capped: Vec<_> = r
        .streams
        .iter()
        .filter_map(|s| s.send_buffer.filter(|b| b.capped()))
        .collect();
    if let Some(b) = capped.first() {
        writeln!(
            out,
            "send buffer: the kernel granted {} of the {} asked for on {} stream(s) \
             (net.core.wmem_max; run as root to lift it): bursts may be dropped before the wire",
            format_si(b.granted.unwrap_or(0) as f64) + "B",
            format_si(b.asked as f64) + "B",
            capped.len()
        )?;
    }
    match &r.sink {
        Some(s) if s.streams_reported < r.streams.len() => writeln!(
            out,
            "sink view: {} of {} streams answered",
            s.streams_reported,
            r.streams.len()
        )?,
        Some(_) => {}
        None => writeln!(
            out,
            "sink view unavailable: {} did not answer the report request (not an nnb serve sink?)",
            r.target
        )?,
    }
    let ipv6 = r
        .target
        .parse::<std::net::SocketAddr>()
        .is_ok_and(|a| a.is_ipv6());
    let ip = Framing::ip_header(ipv6);
    let (tcp, udp, eth) = (TCP_HEADER, UDP_HEADER, ETHERNET_OVERHEAD);
    if r.protocol == "tcp" {
        writeln!(
            out,
            "wire rate = payload + TCP {tcp} + IP {ip} + Ethernet {eth} bytes per {TCP_MSS}-byte segment"
        )?;
    } else {
        writeln!(out, "wire rate = payload + UDP {udp} + IP {ip} + Ethernet {eth} (header, FCS, preamble, gap) bytes per datagram")?;
    }
    Ok(())
}
