//! Helpers that several subcommands share: resolving addresses, checking stream
//! CPUs, the embedded `nnb serve`, the Ctrl-C stop flag, the load settings shared by
//! `nnb load` and `nnb latency --neighbor-load`, and the environment their JSON
//! reports carry.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use nnb_burn::env::Environment;
use nnb_burn::placement::allowed_cpus;
use nnb_burn::topology::Topology;
use nnb_netlat::load::LoadConfig;
use nnb_netlat::serve::{ServeConfig, Server};
use nnb_units::Rate;

use crate::exit::usage;

/// A JSON report with the environment it was measured in (CPU model, topology,
/// kernel, clocksource, hypervisor, steal before and after), like `nnb cpu --json`.
#[derive(serde::Serialize)]
pub(crate) struct WithEnvironment<'a, T: serde::Serialize> {
    /// The report's own fields.
    #[serde(flatten)]
    pub report: &'a T,
    /// `None` when this machine's topology cannot be read.
    pub environment: Option<Environment>,
}

impl<'a, T: serde::Serialize> WithEnvironment<'a, T> {
    /// `report` with `env` (from [`environment`]), its steal counter closed now that
    /// the measurement has ended.
    pub(crate) fn closing(report: &'a T, env: Option<Environment>) -> Self {
        WithEnvironment {
            report,
            environment: env.map(|mut e| {
                e.record_steal_after();
                e
            }),
        }
    }
}

/// This machine's environment now, to be closed by [`WithEnvironment::closing`] when
/// the measurement ends.
pub(crate) fn environment() -> Option<Environment> {
    let topo = Topology::host().ok()?;
    Some(Environment::capture(&topo, env!("CARGO_PKG_VERSION")))
}

/// Resolves HOST:PORT, saying which part is wrong when it fails.
pub(crate) fn resolve(flag: &str, s: &str) -> anyhow::Result<SocketAddr> {
    s.to_socket_addrs()
        .map_err(|e| usage(format!("{flag} {s}: not a HOST:PORT address ({e})")))?
        .next()
        .ok_or_else(|| usage(format!("{flag} {s}: the name resolves to no address")))
}

/// The CPUs stream threads go to: the given list, checked, or all allowed ones.
pub(crate) fn stream_cpus(
    flag: &str,
    given: Option<&nnb_units::CpuList>,
    no_pin: bool,
) -> anyhow::Result<Vec<usize>> {
    if no_pin {
        return Ok(Vec::new());
    }
    let Some(nnb_units::CpuList(given)) = given else {
        return Ok(allowed_cpus());
    };
    check_available(flag, given)?;
    Ok(given.to_vec())
}

/// Refuses, as bad input (exit 2), a CPU given to `flag` that this process may not
/// run on, naming the ones it may: better than the kernel's bare EINVAL later.
pub(crate) fn check_available(flag: &str, cpus: &[usize]) -> anyhow::Result<()> {
    let allowed = allowed_cpus();
    match cpus.iter().find(|c| !allowed.contains(c)) {
        Some(bad) => Err(usage(format!(
            "{flag}: CPU {bad} is not available to this process (available: {})",
            nnb_units::format_cpu_list(&allowed)
        ))),
        None => Ok(()),
    }
}

/// Which services the embedded `serve` runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Services {
    pub reflector: bool,
    pub sink: bool,
    pub tcp: bool,
}

/// Starts the embedded `serve` on 127.0.0.1 with only the services needed (a
/// busy-polling service left idle would still take a CPU).
pub(crate) fn embedded_server(services: Services, busy_poll: bool) -> anyhow::Result<Server> {
    let cfg = ServeConfig {
        reflector_port: services.reflector.then_some(0),
        sink_port: services.sink.then_some(0),
        tcp_port: services.tcp.then_some(0),
        busy_poll,
        // One sink socket: a local load's few streams need no more, and busy-polling
        // threads would take the senders' CPUs.
        sink_threads: Some(1),
        ..ServeConfig::default()
    };
    let server = Server::start(&cfg).context("cannot start the embedded nnb serve")?;
    tracing::info!(
        "embedded serve: reflector {:?}, sink {:?}, tcp {:?}",
        server.reflector_addr(),
        server.sink_addr(),
        server.tcp_addr()
    );
    Ok(server)
}

/// A stop flag set by Ctrl-C or SIGTERM, so a run ends cleanly with its results.
pub(crate) fn stop_on_signal() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("cannot install the Ctrl-C/SIGTERM handler")?;
    Ok(stop)
}

/// The settings shared by `nnb load` and `nnb latency --neighbor-load`.
pub(crate) struct LoadShape<'a> {
    pub streams: usize,
    pub msg_size: usize,
    pub cpus: Vec<usize>,
    pub tcp: bool,
    pub gso: bool,
    pub batch: usize,
    pub catch_up: bool,
    pub flag: &'a str,
}

/// Builds and checks a load configuration, reporting bad input as usage errors.
pub(crate) fn load_config(
    target: SocketAddr,
    rate: Option<Rate>,
    duration: Duration,
    shape: LoadShape<'_>,
) -> anyhow::Result<LoadConfig> {
    let cfg = LoadConfig {
        streams: shape.streams,
        msg_size: shape.msg_size,
        duration,
        cpus: shape.cpus,
        tcp: shape.tcp,
        gso: shape.gso,
        batch: shape.batch,
        catch_up: shape.catch_up,
        ..LoadConfig::new(target, rate)
    };
    cfg.validate()
        .map_err(|e| usage(format!("{}: {e}", shape.flag)))?;
    Ok(cfg)
}

/// The CPU topology a CPU command plans on and the CPUs it may use: this machine's
/// (online and in this process's affinity), or the sysfs tree at `sysfs_root`
/// (another machine's, every online CPU; only for a dry run).
pub(crate) fn topology(
    sysfs_root: Option<&std::path::Path>,
    dry_run: bool,
) -> anyhow::Result<(Topology, Vec<usize>)> {
    let topo = match sysfs_root {
        Some(root) => {
            if !dry_run {
                return Err(usage(
                    "--sysfs-root describes another machine: it only works with --dry-run",
                ));
            }
            Topology::read(root).map_err(|e| usage(format!("--sysfs-root: {e}")))?
        }
        None => Topology::host().context("reading this machine's CPU topology")?,
    };
    let online = topo.online().map(|c| c.id);
    let allowed = if sysfs_root.is_some() {
        online.collect()
    } else {
        let mine = allowed_cpus();
        online.filter(|c| mine.contains(c)).collect()
    };
    Ok((topo, allowed))
}
