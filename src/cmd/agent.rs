//! `nnb agent`: serves typed jobs (burn, steal, latency, load, serve, busy, idle, and
//! with `--allow-commands` programs) over HTTP/JSON for a controller, behind a bearer
//! token.
//!
//! The first line on stdout is `listening ADDR` (the bound address, useful with
//! port 0) so a parent process can read where to connect; logs go to stderr.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use nnb_agent::jobs::limits::SHUTDOWN_GRACE;
use nnb_agent::{Agent, AgentConfig, Token};

use crate::out::Out;

/// Arguments of `nnb agent`.
#[derive(Debug, clap::Args)]
pub(crate) struct AgentArgs {
    /// Address to listen on; port 0 picks a free port (printed as `listening ADDR`).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// File whose first line is the bearer token every request must carry
    /// (keep it private: mode 0600).
    #[arg(long)]
    token_file: PathBuf,
    /// Restrict the agent and all its jobs to these CPUs, e.g. "0,2-3".
    #[arg(long)]
    cpus: Option<String>,
    /// Run `command` jobs: programs (an argv, never a shell string) a token
    /// holder names. Without it the agent refuses them (403) and its /health says
    /// `commands: false`.
    #[arg(long)]
    allow_commands: bool,
}

/// Runs `nnb agent` until SIGINT or SIGTERM.
pub(crate) fn run(args: AgentArgs, out: &mut Out) -> anyhow::Result<()> {
    let token = Token::from_file(&args.token_file)?;
    // Every connection takes a file descriptor: take all the process may have, and
    // size the connection cap from it (reliability review NM8).
    if let Err(e) = nnb_agent::raise_open_files() {
        tracing::warn!("cannot raise the open-files limit: {e}");
    }
    let serve_config = nnb_agent::ServeConfig::for_this_process();
    if let Some(list) = &args.cpus {
        let cpus =
            nnb_burn::placement::parse_cpu_list(list).with_context(|| format!("--cpus {list}"))?;
        super::common::check_available("--cpus", &cpus)?;
        nnb_agent::restrict_to_cpus(&cpus)
            .with_context(|| format!("cannot restrict the agent to CPUs {list}"))?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let served = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let addr = listener.local_addr()?;
        let config = AgentConfig {
            allow_commands: args.allow_commands,
        };
        let agent = Agent::with_config(token, addr.ip(), config)?;
        writeln!(out, "listening {addr}")?;
        out.flush()?;
        tracing::info!(
            %addr,
            max_connections = serve_config.max_connections,
            commands = args.allow_commands,
            "agent listening"
        );
        nnb_agent::serve_with(listener, agent, serve_config, shutdown_signal()).await?;
        anyhow::Ok(())
    });
    rt.shutdown_timeout(SHUTDOWN_GRACE);
    served
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!("cannot listen for SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term => {},
    }
    tracing::info!("agent shutting down");
}
