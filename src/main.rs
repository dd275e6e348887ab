//! `nnb`: measures how much noisy neighbors slow a machine's CPU and network.
//!
//! Each subcommand lives in its own module under `cmd/`; this file only parses the
//! command line, sets up logging and maps errors to exit codes (2 for bad input, as
//! clap does for a bad flag; 1 for a failure while measuring).

mod cmd;
mod table;
mod usage;

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
    /// Print the CPU topology; --probe finds SMT siblings empirically.
    Topo(cmd::topo::TopoArgs),
    /// Detect time stolen from pinned threads (scheduling gaps) beside /proc/stat steal.
    Steal(cmd::steal::StealArgs),
    /// Serve a UDP reflector, a UDP sink and a TCP sink for probes and load.
    Serve(cmd::serve::ServeArgs),
    /// UDP latency probe: ping-pong, open-loop (--rate), or under neighbor load.
    Latency(cmd::latency::LatencyArgs),
    /// Rate-paced UDP (or TCP) load generator.
    Load(cmd::load::LoadArgs),
    /// Serve typed jobs to a controller over HTTP/JSON behind a bearer token.
    Agent(cmd::agent::AgentArgs),
    /// Run an experiment file (neighbor staircase, thread sweep, load steps, isolation matrix).
    Run(cmd::run::RunArgs),
    /// Print the JSON Schema of experiment files, for editors.
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
    let result = match cli.command {
        Command::Cpu(args) => cmd::cpu::run(args),
        Command::Topo(args) => cmd::topo::run(args),
        Command::Steal(args) => cmd::steal::run(args),
        Command::Serve(args) => cmd::serve::run(args),
        Command::Latency(args) => cmd::latency::run(args),
        Command::Load(args) => cmd::load::run(args),
        Command::Agent(args) => cmd::agent::run(args),
        Command::Run(args) => cmd::run::run(args),
        Command::Schema(args) => cmd::schema::run(args),
        #[cfg(feature = "aws")]
        Command::Aws(args) => cmd::aws::run(args),
        #[cfg(feature = "aws")]
        Command::Fetch(args) => cmd::fetch::run(args),
        #[cfg(feature = "analysis")]
        Command::Analyze(args) => cmd::analyze::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            if usage::is_usage_error(&err) {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Logs go to stderr so that `--json` and `--csv` output on stdout stays clean.
fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
