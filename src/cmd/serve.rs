//! `nnb serve`: runs the UDP reflector, the UDP sink and the TCP sink until
//! `--duration` passes or Ctrl-C/SIGTERM arrives, printing the bound addresses first,
//! a line per `--interval`, and a final summary (a table, or JSON lines with `--json`).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use comfy_table::Table;
use nnb_netlat::report::StreamReport;
use nnb_netlat::serve::{ServeConfig, ServeSnapshot, Server};
use nnb_units::{format_bits_per_sec, parse_duration};
use serde::Serialize;

use crate::exit::usage;
use crate::out::Out;
use std::io::{self, Write};

/// Arguments of `nnb serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Address every service binds (use 0.0.0.0 to accept other machines).
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// UDP reflector port for `nnb latency` (0 = ephemeral).
    #[arg(long, default_value_t = 11111, value_name = "PORT")]
    reflector_port: u16,
    /// UDP sink port for `nnb load` (0 = ephemeral).
    #[arg(long, default_value_t = 11112, value_name = "PORT")]
    sink_port: u16,
    /// TCP sink port for `nnb load --tcp` (0 = ephemeral).
    #[arg(long, default_value_t = 11113, value_name = "PORT")]
    tcp_port: u16,
    /// Do not run the UDP reflector.
    #[arg(long)]
    no_reflector: bool,
    /// Do not run the UDP sink.
    #[arg(long)]
    no_sink: bool,
    /// Do not run the TCP sink.
    #[arg(long)]
    no_tcp: bool,
    /// Spin on non-blocking receives (lowest latency; keeps a CPU busy per UDP service).
    #[arg(long)]
    busy_poll: bool,
    /// Pin the reflector thread to this CPU.
    #[arg(long, value_name = "CPU")]
    reflector_cpu: Option<usize>,
    /// Pin the sink thread to this CPU (with --sink-threads above 1: the first sink
    /// thread; the others follow over the CPUs this process may use).
    #[arg(long, value_name = "CPU")]
    sink_cpu: Option<usize>,
    /// UDP sink sockets on the sink's port (SO_REUSEPORT: the kernel spreads the
    /// senders over them by their addresses), one receiving thread each, pinned in
    /// turn to the CPUs this process may use. Default: one per such CPU, at most 16.
    /// 1 is a single socket, pinned only with --sink-cpu. With --busy-poll each
    /// thread keeps its CPU busy.
    #[arg(long, value_name = "N")]
    sink_threads: Option<usize>,
    /// Most UDP streams tracked at once (the longest idle are evicted beyond it).
    #[arg(long, default_value_t = nnb_netlat::serve::sink::DEFAULT_MAX_STREAMS, value_name = "N")]
    max_streams: usize,
    /// Print a summary line every INTERVAL (e.g. 1s, 500ms).
    #[arg(long, value_parser = parse_duration, value_name = "INTERVAL")]
    interval: Option<Duration>,
    /// Stop after this long (e.g. 10s, 2m); default: until Ctrl-C or SIGTERM.
    #[arg(long, value_parser = nnb_units::parse_positive_duration, value_name = "DURATION")]
    duration: Option<Duration>,
    /// JSON lines on stdout instead of human-readable text.
    #[arg(long)]
    json: bool,
}

/// Runs `nnb serve`.
pub(crate) fn run(args: ServeArgs, out: &mut Out) -> anyhow::Result<()> {
    let cfg = config(&args)?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("cannot install the Ctrl-C/SIGTERM handler")?;
    let server = Server::start(&cfg)?;
    let output = Output { json: args.json };
    output.listening(out, &server)?;
    let started = Instant::now();
    let mut last = server.snapshot();
    let mut next_tick = args.interval.map(|i| started + i);
    loop {
        let now = Instant::now();
        if stop.load(Ordering::Relaxed) || args.duration.is_some_and(|d| now >= started + d) {
            break;
        }
        if let (Some(tick), Some(every)) = (next_tick, args.interval) {
            if now >= tick {
                let snap = server.snapshot();
                output.interval(out, started.elapsed(), &last, &snap)?;
                last = snap;
                next_tick = Some(tick + every);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = started.elapsed();
    output.summary(out, elapsed, &server.stop())?;
    Ok(())
}

/// Checks the arguments and turns them into the library's configuration.
fn config(args: &ServeArgs) -> anyhow::Result<ServeConfig> {
    if args.no_reflector && args.no_sink && args.no_tcp {
        return Err(usage(
            "nothing to serve: --no-reflector, --no-sink and --no-tcp turn off every service",
        ));
    }
    if args.interval.is_some_and(|i| i.is_zero()) {
        return Err(usage("--interval must be longer than zero"));
    }
    if args.max_streams == 0 {
        return Err(usage("--max-streams must be at least 1"));
    }
    if let Some(n) = args.sink_threads {
        nnb_netlat::serve::check_sink_threads(n)
            .map_err(|e| usage(format!("--sink-threads: {e}")))?;
    }
    let on = |off: bool, port: u16| (!off).then_some(port);
    Ok(ServeConfig {
        bind: args.bind,
        reflector_port: on(args.no_reflector, args.reflector_port),
        sink_port: on(args.no_sink, args.sink_port),
        tcp_port: on(args.no_tcp, args.tcp_port),
        busy_poll: args.busy_poll,
        reflector_cpu: args.reflector_cpu,
        sink_cpu: args.sink_cpu,
        sink_threads: args.sink_threads,
        max_streams: args.max_streams,
        ..ServeConfig::default()
    })
}

/// One stream's counters over an interval.
#[derive(Debug, Serialize)]
struct StreamDelta<'a> {
    peer: &'a str,
    stream: u32,
    rate_bps: f64,
    received: u64,
    lost: u64,
    duplicates: u64,
    reordered: u64,
    garbage: u64,
}

/// What changed between two snapshots.
#[derive(Debug, Serialize)]
struct IntervalLine<'a> {
    event: &'static str,
    elapsed_s: f64,
    interval_s: f64,
    reflected: u64,
    garbage: u64,
    tcp_bytes: u64,
    tcp_rate_bps: f64,
    streams: Vec<StreamDelta<'a>>,
}

impl<'a> IntervalLine<'a> {
    fn new(elapsed: Duration, a: &ServeSnapshot, b: &'a ServeSnapshot) -> Self {
        let secs = b.taken_ns.saturating_sub(a.taken_ns) as f64 / 1e9;
        let per_s = |bytes: u64| {
            if secs > 0.0 {
                bytes as f64 * 8.0 / secs
            } else {
                0.0
            }
        };
        let before: HashMap<(&str, u32), &StreamReport> = a
            .sink
            .iter()
            .flat_map(|s| &s.streams)
            .map(|r| ((r.peer.as_str(), r.stream), r))
            .collect();
        let empty = StreamReport::empty(String::new(), 0);
        let streams = b
            .sink
            .iter()
            .flat_map(|s| &s.streams)
            .filter_map(|r| {
                let p = before
                    .get(&(r.peer.as_str(), r.stream))
                    .copied()
                    .unwrap_or(&empty);
                let received = r.seq.received.saturating_sub(p.seq.received);
                let duplicates = r.seq.duplicates.saturating_sub(p.seq.duplicates);
                let garbage = r.garbage.saturating_sub(p.garbage);
                (received + duplicates + garbage > 0).then(|| StreamDelta {
                    peer: &r.peer,
                    stream: r.stream,
                    rate_bps: per_s(r.bytes.saturating_sub(p.bytes)),
                    received,
                    lost: r.seq.lost().saturating_sub(p.seq.lost()),
                    duplicates,
                    reordered: r.seq.reordered.saturating_sub(p.seq.reordered),
                    garbage,
                })
            })
            .collect();
        let reflected = |s: &ServeSnapshot| s.reflector.map_or(0, |r| r.reflected);
        let tcp_bytes = |s: &ServeSnapshot| s.tcp.as_ref().map_or(0, |t| t.bytes);
        let tcp = tcp_bytes(b).saturating_sub(tcp_bytes(a));
        IntervalLine {
            event: "interval",
            elapsed_s: elapsed.as_secs_f64(),
            interval_s: secs,
            reflected: reflected(b).saturating_sub(reflected(a)),
            garbage: b.garbage().total().saturating_sub(a.garbage().total()),
            tcp_bytes: tcp,
            tcp_rate_bps: per_s(tcp),
            streams,
        }
    }
}

/// The final summary as one JSON object.
#[derive(Debug, Serialize)]
struct SummaryLine<'a> {
    event: &'static str,
    elapsed_s: f64,
    #[serde(flatten)]
    snapshot: &'a ServeSnapshot,
}

/// Prints to stdout as text or JSON lines.
struct Output {
    json: bool,
}

impl Output {
    /// One JSON line, flushed at once: a reader acts on each as it comes.
    fn json_line(out: &mut Out, value: &impl Serialize) -> io::Result<()> {
        serde_json::to_writer(&mut *out, value)?;
        writeln!(out)?;
        out.flush()
    }

    fn listening(&self, out: &mut Out, server: &Server) -> io::Result<()> {
        let show = |a: Option<SocketAddr>| a.map_or_else(|| "off".to_string(), |a| a.to_string());
        if self.json {
            Self::json_line(
                out,
                &serde_json::json!({
                    "event": "listening",
                    "reflector": server.reflector_addr().map(|a| a.to_string()),
                    "sink": server.sink_addr().map(|a| a.to_string()),
                    "tcp": server.tcp_addr().map(|a| a.to_string()),
                }),
            )
        } else {
            writeln!(
                out,
                "listening reflector={} sink={} tcp={}",
                show(server.reflector_addr()),
                show(server.sink_addr()),
                show(server.tcp_addr())
            )?;
            out.flush()
        }
    }

    fn interval(
        &self,
        out: &mut Out,
        elapsed: Duration,
        a: &ServeSnapshot,
        b: &ServeSnapshot,
    ) -> io::Result<()> {
        let line = IntervalLine::new(elapsed, a, b);
        if self.json {
            return Self::json_line(out, &line);
        }
        writeln!(
            out,
            "[{:>7.2}s] pings {:>8}  garbage {:>6}  tcp {:>14}  streams {}",
            line.elapsed_s,
            line.reflected,
            line.garbage,
            format_bits_per_sec(line.tcp_rate_bps),
            line.streams.len()
        )?;
        for s in &line.streams {
            writeln!(
                out,
                "    {}#{:<4} {:>14}  rx {:>8}  lost {:>6}  dup {:>4}  reord {:>4}  garbage {}",
                s.peer,
                s.stream,
                format_bits_per_sec(s.rate_bps),
                s.received,
                s.lost,
                s.duplicates,
                s.reordered,
                s.garbage
            )?;
        }
        out.flush()
    }

    fn summary(&self, out: &mut Out, elapsed: Duration, snap: &ServeSnapshot) -> io::Result<()> {
        if self.json {
            return Self::json_line(
                out,
                &SummaryLine {
                    event: "summary",
                    elapsed_s: elapsed.as_secs_f64(),
                    snapshot: snap,
                },
            );
        }
        writeln!(out, "served for {:.2} s", elapsed.as_secs_f64())?;
        if let Some(r) = &snap.reflector {
            writeln!(
                out,
                "reflector: {} pings answered, {} send failures, {} dropped",
                r.reflected,
                r.send_failures,
                r.garbage.total()
            )?;
        }
        if let Some(s) = &snap.sink {
            let t = &s.totals;
            writeln!(

                out,
                "sink: {} streams ({} evicted), {} datagrams, {} lost ({:.3}%), {} dup, {} reordered, {} reports ({} short requests unanswered)",
                t.streams_seen,
                t.evicted_streams,
                t.seq.received,
                t.seq.lost(),
                t.seq.loss_ratio() * 100.0,
                t.seq.duplicates,
                t.seq.reordered,
                t.reports_sent,
                t.short_report_requests
            )?;
            let per_socket: Vec<String> = s
                .sockets
                .iter()
                .map(|k| {
                    let cpu = k.cpu.map_or_else(|| "-".to_string(), |c| c.to_string());
                    format!("cpu {cpu}: {} rx, {} dropped", k.datagrams, k.drops)
                })
                .collect();
            writeln!(
                out,
                "sink sockets: {} ({}); {} datagrams dropped by the sink's own sockets \
                 (receive buffer full: the receiver's loss, not the network's; a buffer of \
                 datagrams coalesced on receive counts once)",
                s.sockets.len(),
                per_socket.join("; "),
                s.drops
            )?;
            if let Some(h) = &snap.host_udp_errors {
                writeln!(
                    out,
                    "host UDP receive errors while serving (every socket): {} buffer overflows, {} in errors",
                    h.rcvbuf_errors, h.in_errors
                )?;
            }
            if !s.streams.is_empty() {
                writeln!(out, "{}", stream_table(&s.streams))?;
            }
        }
        let g = snap.garbage();
        if g.total() > 0 {
            writeln!(

                out,
                "dropped: {} truncated, {} foreign magic, {} bad version, {} unknown kind, {} bad length, {} wrong kind",
                g.truncated, g.bad_magic, g.bad_version, g.unknown_kind, g.length_mismatch, g.wrong_kind
            )?;
        }
        if let Some(t) = &snap.tcp {
            writeln!(
                out,
                "tcp: {} connections ({} refused), {} bytes",
                t.accepted, t.refused, t.bytes
            )?;
        }
        Ok(())
    }
}

/// The sink's streams as a table.
fn stream_table(streams: &[StreamReport]) -> Table {
    let mut table = crate::table::table([
        "peer", "stream", "received", "lost", "loss %", "dup", "reord", "bytes", "rate", "garbage",
        "drops",
    ]);
    for r in streams {
        table.add_row([
            r.peer.clone(),
            r.stream.to_string(),
            r.seq.received.to_string(),
            r.seq.lost().to_string(),
            format!("{:.3}", r.seq.loss_ratio() * 100.0),
            r.seq.duplicates.to_string(),
            r.seq.reordered.to_string(),
            r.bytes.to_string(),
            format_bits_per_sec(r.rate_bps),
            r.garbage.to_string(),
            r.socket_drops
                .map_or_else(|| "-".to_string(), |d| d.to_string()),
        ]);
    }
    table
}
