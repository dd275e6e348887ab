//! `nnb`: measures how much noisy neighbors slow a machine's CPU and network.
//!
//! Each subcommand lives in its own module under `cmd/`; this file only parses the
//! command line, sets up logging, hands every command the one stdout writer
//! ([`out::Out`]) and maps errors to exit codes once ([`exit::code`]: 2 for bad
//! input, as clap does for a bad flag; 3 for a run with failed steps; 130 when interrupted; 1 for a failure while measuring; 0 when
//! the reader of stdout went away).

mod cmd;
mod exit;
mod out;
#[cfg(feature = "controller")]
mod progress;
mod stdio;
mod table;
mod term;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Measure noisy-neighbor degradation of CPU and network, precisely.
#[derive(Debug, Parser)]
#[command(name = "nnb", version, about, long_about = None, propagate_version = true)]
struct Cli {
    /// More log output (-v: debug, -vv: trace). RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Pinned-thread CPU burner timed by the TSC (fixed work or fixed time, sweeps).
    Cpu(cmd::cpu::CpuArgs),
    /// The blog's placements of two jobs (one CPU, time-shared, SMT siblings, separate cores, unpinned) and the SMT yield.
    Placements(cmd::placements::PlacementsArgs),
    /// Memory load: worker processes that allocate and keep touching memory (stress-ng --vm).
    Memory(cmd::memory::MemoryArgs),
    /// Print the CPU topology; --probe finds SMT siblings empirically.
    Topo(cmd::topo::TopoArgs),
    /// Detect time stolen from pinned threads (scheduling gaps) beside /proc/stat steal.
    Steal(cmd::steal::StealArgs),
    /// Serve a UDP reflector, a UDP sink and a TCP sink for probes and load.
    Serve(cmd::serve::ServeArgs),
    /// UDP latency probe: ping-pong, open-loop (--rate), or under neighbor load.
    Latency(cmd::latency::LatencyArgs),
    /// Wang & Ng's RTT series: every probe's RTT in order, and its statistics (UDP or --icmp).
    Rtt(cmd::rtt::RttArgs),
    /// Badabing's loss probe: loss frequency beside probe loss, one-way delays and max_owd.
    Badabing(cmd::badabing::BadabingArgs),
    /// Rate-paced UDP (or TCP) load generator.
    Load(cmd::load::LoadArgs),
    /// Paced random read/write disk load (fio randrw at a set IOPS, direct I/O).
    Disk(cmd::disk::DiskArgs),
    /// Serve typed jobs to a controller over HTTP/JSON behind a bearer token.
    Agent(cmd::agent::AgentArgs),
    /// Run an experiment file (neighbor staircase, thread sweep, load steps, isolation matrix).
    #[cfg(feature = "controller")]
    Run(cmd::run::RunArgs),
    /// Print the JSON Schema of experiment files, for editors.
    #[cfg(feature = "controller")]
    Schema(cmd::schema::SchemaArgs),
    /// AWS housekeeping: `nnb aws sweep` removes what a dead run left in EC2.
    #[cfg(feature = "aws")]
    Aws(cmd::aws::AwsArgs),
    /// Bring a run uploaded to S3 back into results/ (checksums verified).
    #[cfg(feature = "aws")]
    Fetch(cmd::fetch::FetchArgs),
    /// Tables and a report (plots, index.html) from run directories.
    #[cfg(feature = "analysis")]
    Analyze(cmd::analyze::AnalyzeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    let mut out = out::Out::stdout();
    if cli.command.prints_its_result() && stdio::stdout_was_closed() {
        // A warning, not an error: a launcher that hands nnb a read-write /dev/null on
        // purpose (Python's subprocess.DEVNULL, a neighbor started only for its load)
        // looks the same as a closed stdout.
        tracing::warn!(
            "stdout is closed (or a read-write /dev/null): this command's output is lost; \
             redirect it (>/dev/null to discard it on purpose)"
        );
    }
    let result = dispatch(cli.command, &mut out).and_then(|()| Ok(out.flush()?));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // `nnb topo | head -1`: the reader has what it wanted.
        Err(err) if out::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            // What was written before the error still goes out (best effort: the
            // error below is the news).
            let _ = out.flush();
            eprintln!("error: {}", exit::message(&err));
            exit::code(&err)
        }
    }
}

impl Command {
    /// Whether the command's result is what it prints on stdout, so that a closed
    /// stdout is worth a warning (the agent and `serve` are services: their stdout
    /// only says where they listen).
    fn prints_its_result(&self) -> bool {
        !matches!(self, Command::Agent(_) | Command::Serve(_))
    }
}

/// Runs the subcommand, writing its output to `out`.
fn dispatch(command: Command, out: &mut out::Out) -> anyhow::Result<()> {
    match command {
        Command::Cpu(args) => cmd::cpu::run(args, out),
        Command::Memory(args) => cmd::memory::run(args, out),
        Command::Placements(args) => cmd::placements::run(args, out),
        Command::Topo(args) => cmd::topo::run(args, out),
        Command::Steal(args) => cmd::steal::run(args, out),
        Command::Serve(args) => cmd::serve::run(args, out),
        Command::Latency(args) => cmd::latency::run(args, out),
        Command::Rtt(args) => cmd::rtt::run(args, out),
        Command::Badabing(args) => cmd::badabing::run(args, out),
        Command::Load(args) => cmd::load::run(args, out),
        Command::Disk(args) => cmd::disk::run(args, out),
        Command::Agent(args) => cmd::agent::run(args, out),
        #[cfg(feature = "controller")]
        Command::Run(args) => cmd::run::run(args, out),
        #[cfg(feature = "controller")]
        Command::Schema(args) => cmd::schema::run(args, out),
        #[cfg(feature = "aws")]
        Command::Aws(args) => cmd::aws::run(args, out),
        #[cfg(feature = "aws")]
        Command::Fetch(args) => cmd::fetch::run(args, out),
        #[cfg(feature = "analysis")]
        Command::Analyze(args) => cmd::analyze::run(args, out),
    }
}

/// Logs go to stderr so that `--json` and `--csv` output on stdout stays clean;
/// colour only on a terminal and without `NO_COLOR`. `-v` turns on nnb's own debug
/// events, not those of the HTTP and AWS libraries (RUST_LOG can still ask for them).
fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn".to_string(),
        1 => NNB_CRATES.map(|c| format!("{c}=debug")).join(",") + ",warn",
        _ => NNB_CRATES.map(|c| format!("{c}=trace")).join(",") + ",warn",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(term::stderr_colour())
        .init();
}

/// nnb's own crates, as tracing names their targets.
const NNB_CRATES: [&str; 12] = [
    "nnb",
    "nnb_sys",
    "nnb_units",
    "nnb_format",
    "nnb_burn",
    "nnb_netlat",
    "nnb_agent",
    "nnb_experiment",
    "nnb_controller",
    "nnb_analysis",
    "nnb_aws",
    "nnb_catalog",
];
