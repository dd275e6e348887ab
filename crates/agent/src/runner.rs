//! Turns a [`JobSpec`] into work on plain threads through `nnb_burn` and
//! `nnb_netlat`, and its outcome into JSON.
//!
//! [`prepare`] checks a spec against this agent (workload names, pinning, addresses)
//! so that a bad spec is a 400 at once rather than a failed job; [`Job::run`] then
//! runs on a thread of its own and polls the job's stop flag where the library
//! allows it (burn, busy, idle, serve, and the probes and load generator, which
//! take a flag; only a steal scan runs to its end, bounded by its duration).
//!
//! Every job's result (a JSON object) also says what the job ran under, read around
//! it on its CPUs ([`nnb_burn::conditions`]): `steal` (the hypervisor's steal ticks,
//! with the counters before and after), `uptime_s` (seconds since the kernel booted),
//! `cpu_busy_s` (the machine's busy CPU-seconds since then), `freq` (the effective
//! frequency and its source, or null) and `ena` (the ENA's allowance counters
//! before and after, [`crate::ena`], or null off EC2).

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use nnb_burn::burner::{self, BurnResult, Duty, EventPool, Work};
use nnb_burn::clock::{Clock, ClockInfo};
use nnb_burn::conditions::ConditionsWatch;
use nnb_burn::disk::{self, DiskError, DiskSpec};
use nnb_burn::memload::{self, MemMode, MemSpec};
use nnb_burn::placement::{self, PinStrategy, Placement};
use nnb_burn::steal;
use nnb_burn::topology::Topology;
use nnb_burn::workload::Workload;
use nnb_netlat::badabing::{self, BadabingConfig};
use nnb_netlat::hist::HistLog;
use nnb_netlat::load::{self, LoadConfig};
use nnb_netlat::probe::series::{self, SeriesConfig, SeriesMode};
use nnb_netlat::probe::{self, ProbeConfig, ProbeLength};
use nnb_netlat::serve::{ServeConfig, Server};
use nnb_netlat::window::{self, LoadTap, LoadTaps};
use nnb_sys::affinity::restrict_to_cpus;
use nnb_units::Rate;
use serde::Serialize;
use serde_json::Value;

use super::job_table::{JobShared, Outcome};
use crate::jobs::{BurnScope, JobSpec};

/// How often an idle or serving job checks its stop flag.
const POLL: Duration = Duration::from_millis(20);
/// Send time of a load job without a duration: it runs until stopped (or until its
/// deadline), so this only bounds it.
const UNTIL_STOPPED: Duration = Duration::from_secs(24 * 3600);

/// What a job may know about the agent it runs in.
#[derive(Debug, Clone)]
pub(super) struct JobEnv {
    /// This machine's CPU topology.
    pub topology: Topology,
    /// CPUs the agent may run on.
    pub cpus: Vec<usize>,
    /// Address network services bind.
    pub bind_ip: IpAddr,
    /// The agent's running UDP loads, which a `load-window` job reads.
    pub taps: Arc<LoadTaps>,
}

impl JobEnv {
    /// The CPUs a burn of `scope` is placed over: the agent's own, or every online
    /// CPU of the host (from the topology's sysfs `online` list).
    fn scope_cpus(&self, scope: BurnScope) -> Vec<usize> {
        match scope {
            BurnScope::Tenant => self.cpus.clone(),
            BurnScope::Host => self.topology.online().map(|c| c.id).collect(),
        }
    }
}

/// A checked job, ready to run, with the CPUs it runs on.
#[derive(Debug)]
pub(super) struct Job {
    /// What it does.
    task: Task,
    /// The CPUs its threads may run on, whose steal and frequency its result
    /// reports: a burn's or busy job's pinned CPUs (all the CPUs its unpinned threads
    /// may use), a steal scan's, else the agent's.
    cpus: Vec<usize>,
}

/// What a job does.
#[derive(Debug)]
enum Task {
    /// A measured burn.
    Burn {
        /// The workload.
        workload: Workload,
        /// Fixed work or fixed time.
        work: Work,
        /// Where fixed work's ops come from.
        pool: EventPool,
        /// Where the threads go.
        placement: Placement,
        /// Whose CPUs the threads may use.
        scope: BurnScope,
        /// With [`BurnScope::Host`], the host's online CPUs: the job widens its own
        /// affinity to them before starting the threads, which inherit it.
        widen_to: Option<Vec<usize>>,
        /// Each thread busy only this share of the time (fixed-time burns).
        duty: Option<Duty>,
    },
    /// A steady burn until stopped: threads pinned and workload prepared once.
    Busy {
        /// The workload.
        workload: Workload,
        /// Where the threads go.
        placement: Placement,
    },
    /// A steal/hiccup scan.
    Steal {
        /// CPUs scanned.
        cpus: Vec<usize>,
        /// Scan length.
        duration: Duration,
        /// Gap threshold.
        threshold: Duration,
        /// Keep CPUTest's timestamp trace.
        trace: bool,
    },
    /// A latency probe (stops early on request).
    Latency(ProbeConfig),
    /// Wang & Ng's RTT series (stops sending early on request).
    Rtt(SeriesConfig),
    /// A load generator (stops early on request).
    Load(LoadConfig),
    /// A window of the agent's running load (ends early on request).
    LoadWindow {
        /// The load's tap.
        tap: Arc<LoadTap>,
        /// Sampling interval.
        interval: Duration,
        /// Samples averaged.
        window: usize,
    },
    /// A reflector and a sink until stopped.
    Serve(ServeConfig),
    /// Nothing until stopped.
    Idle,
    /// A paced disk load.
    Disk(DiskSpec),
    /// A memory load.
    Memory(MemSpec),
    /// Badabing's loss probe (stops early on request).
    Badabing(BadabingConfig),
    /// A program and its process tree (stopped and reaped on request).
    Command(crate::command::CommandJob),
}

/// The result of a `burn` job: where the threads ran, the clock, and the burn.
#[derive(Debug, Serialize)]
pub(super) struct BurnJobResult {
    /// Planned thread → CPU → core placement.
    pub placement: Placement,
    /// The clock that timed the burn.
    pub clock: ClockInfo,
    /// The burner's own result (per-thread records include the CPUs seen).
    pub burn: BurnResult,
    /// Whose CPUs the threads were placed over: the agent's (`tenant`) or the
    /// host's (`host`).
    pub scope: BurnScope,
    /// The CPUs the threads were allowed on, ascending: the union of their affinity
    /// masks as read back from the kernel (each pinned thread's one CPU; for
    /// unpinned threads the mask they inherited, the host's online CPUs with scope
    /// `host`).
    pub cpus: Vec<usize>,
}

/// The result of a `busy` job: how much it burned until stopped.
#[derive(Debug, Serialize)]
pub(super) struct BusyJobResult {
    /// Planned thread → CPU → core placement.
    pub placement: Placement,
    /// Chunks of work between two checks of the stop flag, summed over the threads
    /// (each [`Workload::check_every`] ops, tens to hundreds of microseconds). The
    /// threads run without pause from one chunk to the next: they are started,
    /// pinned and given their workload's memory once.
    pub slices: u64,
    /// Ops of all threads.
    pub total_ops: u64,
    /// Throughput of all threads from the first start to the last end: the load's
    /// intensity, ops per second.
    pub ops_per_sec: f64,
}

/// What a `serve` job publishes while it runs, so clients know where to send.
#[derive(Debug, Serialize)]
pub(super) struct ServeAddrs {
    /// Bound reflector address.
    pub reflector: Option<SocketAddr>,
    /// Bound sink address.
    pub sink: Option<SocketAddr>,
    /// Bound TCP sink address, when the job asked for one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<SocketAddr>,
}

/// The agent's one calibrated clock, calibrated on first use: [`Agent::with_config`]
/// uses it first, so that no measured job pays the calibration's 100 ms of spinning
/// in its CPU time.
///
/// [`Agent::with_config`]: crate::Agent::with_config
pub(crate) fn clock() -> &'static Clock {
    static CLOCK: OnceLock<Clock> = OnceLock::new();
    CLOCK.get_or_init(Clock::calibrate)
}

fn workload(name: &str) -> Result<Workload, String> {
    name.parse::<Workload>().map_err(|e| e.to_string())
}

/// Checks `spec` against this agent and turns it into a runnable job; the error
/// says what is wrong with the spec.
pub(super) fn prepare(spec: &JobSpec, env: &JobEnv) -> Result<Job, String> {
    let task = task(spec, env)?;
    let cpus = task.cpus().unwrap_or_else(|| env.cpus.clone());
    Ok(Job { task, cpus })
}

/// Share of a filesystem's free space one disk job's file may take, percent: the
/// rest is left to whatever else writes there.
const MAX_DISK_PERCENT_OF_FREE: u64 = 90;

/// Refuses a disk job whose file would take over [`MAX_DISK_PERCENT_OF_FREE`] of its
/// filesystem's free space (reliability review NL3: a token holder filled a tmpfs
/// to 100%). The refusal does not say how much is free. A filesystem that cannot be
/// read is left to the job, which reports it.
fn check_room(spec: &DiskSpec) -> Result<(), String> {
    let Ok(fs) = nnb_sys::file::fs_stats(&spec.dir) else {
        return Ok(());
    };
    if spec.file_size > fs.free_bytes / 100 * MAX_DISK_PERCENT_OF_FREE {
        return Err(format!(
            "file_size = {} would take over {MAX_DISK_PERCENT_OF_FREE}% of the free space \
             of {}'s filesystem: pick a smaller file",
            spec.file_size,
            spec.dir.display()
        ));
    }
    Ok(())
}

/// The task `spec` asks of this agent.
fn task(spec: &JobSpec, env: &JobEnv) -> Result<Task, String> {
    match spec {
        JobSpec::Burn {
            workload: name,
            threads,
            ops,
            duration_ms,
            pin,
            cpus,
            scope,
            duty,
            pool,
        } => {
            let (work, duty) = crate::jobs::burn_work(*ops, *duration_ms, *duty)?;
            let strategy = match cpus {
                Some(list) => PinStrategy::List(list.clone()),
                None => pin.parse::<PinStrategy>().map_err(|e| e.to_string())?,
            };
            // Unpinned threads may outnumber the CPUs (an overcommitted tenant).
            let oversubscribe = strategy == PinStrategy::None;
            let allowed = env.scope_cpus(*scope);
            let placement =
                placement::plan(&env.topology, &strategy, *threads, &allowed, oversubscribe)
                    .map_err(|e| e.to_string())?;
            Ok(Task::Burn {
                workload: workload(name)?,
                work,
                pool: *pool,
                placement,
                scope: *scope,
                widen_to: (*scope == BurnScope::Host).then_some(allowed),
                duty,
            })
        }
        JobSpec::Busy {
            workload: name,
            threads,
        } => {
            let placement = placement::plan(
                &env.topology,
                &PinStrategy::DEFAULT,
                *threads,
                &env.cpus,
                true,
            )
            .map_err(|e| e.to_string())?;
            Ok(Task::Busy {
                workload: workload(name)?,
                placement,
            })
        }
        JobSpec::Serve {
            reflector_port,
            sink_port,
            tcp_port,
            sink_threads,
        } => Ok(Task::Serve(ServeConfig {
            bind: env.bind_ip,
            reflector_port: Some(*reflector_port),
            sink_port: Some(*sink_port),
            tcp_port: *tcp_port,
            sink_threads: *sink_threads,
            ..ServeConfig::default()
        })),
        JobSpec::Idle => Ok(Task::Idle),
        JobSpec::Rtt {
            target,
            probes,
            rate_hz,
            skip,
            msg_size,
            icmp,
        } => {
            let (target, mode) = if *icmp {
                (icmp_host(target)?, SeriesMode::Icmp)
            } else {
                (address(target)?, SeriesMode::Udp)
            };
            let cfg = SeriesConfig {
                probes: *probes,
                rate_hz: *rate_hz,
                skip: *skip,
                msg_size: *msg_size,
                ..SeriesConfig::new(target, mode)
            };
            cfg.validate().map_err(|e| e.to_string())?;
            Ok(Task::Rtt(cfg))
        }
        JobSpec::Badabing { target, .. } => {
            let cfg = spec.badabing_config(address(target)?, badabing::fresh_seed())?;
            Ok(Task::Badabing(BadabingConfig {
                pin: env.cpus.first().copied(),
                ..cfg
            }))
        }
        JobSpec::Steal {
            cpus,
            duration_ms,
            threshold_ns,
            options,
        } => {
            let cpus = cpus.clone().unwrap_or_else(|| env.cpus.clone());
            if let Some(c) = cpus.iter().find(|c| !env.cpus.contains(c)) {
                return Err(format!(
                    "CPU {c} is not one of this agent's CPUs ({})",
                    nnb_burn::topology::format_list(&env.cpus)
                ));
            }
            if cpus.is_empty() || *duration_ms == 0 || *threshold_ns == 0 {
                return Err("a steal job needs CPUs, a duration and a threshold above zero".into());
            }
            let duration = Duration::from_millis(*duration_ms);
            if options.trace {
                steal::check_trace_duration(duration, cpus.len()).map_err(|e| e.to_string())?;
            }
            Ok(Task::Steal {
                cpus,
                duration,
                threshold: Duration::from_nanos(*threshold_ns),
                trace: options.trace,
            })
        }
        JobSpec::Latency {
            target,
            duration_ms,
            msg_size,
            warmup_ms,
            busy_poll,
        } => {
            let cfg = ProbeConfig {
                msg_size: *msg_size,
                length: ProbeLength::Duration(Duration::from_millis(*duration_ms)),
                warmup: Duration::from_millis(*warmup_ms),
                busy_poll: *busy_poll,
                pin: env.cpus.first().copied(),
                ..ProbeConfig::new(address(target)?)
            };
            cfg.validate().map_err(|e| e.to_string())?;
            Ok(Task::Latency(cfg))
        }
        JobSpec::Load {
            target,
            rate_bps,
            streams,
            msg_size,
            duration_ms,
            sampling,
            options,
        } => {
            let size = |v: Option<u64>| v.map(|b| usize::try_from(b).unwrap_or(usize::MAX));
            let fine = (options.grain.is_some() || options.link_bps.is_some()).then(|| {
                let seed = nnb_netlat::grain::FineSettings::default();
                nnb_netlat::grain::FineSettings {
                    grain: options.grain.unwrap_or(seed.grain),
                    link_bps: options.link_bps.unwrap_or(seed.link_bps),
                }
            });
            let cfg = LoadConfig {
                streams: *streams,
                msg_size: *msg_size,
                duration: duration_ms.map_or(UNTIL_STOPPED, Duration::from_millis),
                cpus: env.cpus.clone(),
                sample_interval: sampling.map(|s| Duration::from_millis(s.interval_ms)),
                window: sampling.map_or(load::DEFAULT_WINDOW, |s| s.window),
                tcp: options.tcp,
                bytes: options.bytes,
                pacing_chunk: size(options.pacing_chunk),
                send_buffer: size(options.send_buffer),
                recv_buffer: size(options.recv_buffer),
                tcp_info: options.tcp_info_ms.map(Duration::from_millis),
                quiet: options
                    .quiet_us
                    .map_or(nnb_netlat::tcpinfo::DEFAULT_QUIET, Duration::from_micros),
                fine,
                ..LoadConfig::new(address(target)?, Some(Rate::BitsPerSec(*rate_bps)))
            };
            cfg.validate().map_err(|e| e.to_string())?;
            // A UDP load lends its sockets to the agent's window readers.
            let cfg = if cfg.tcp {
                cfg
            } else {
                let tap = LoadTap::new(cfg.target, cfg.streams);
                env.taps.register(&tap);
                LoadConfig {
                    tap: Some(tap),
                    ..cfg
                }
            };
            Ok(Task::Load(cfg))
        }
        JobSpec::LoadWindow {
            interval_ms,
            window,
        } => {
            crate::jobs::window_span(*interval_ms, *window)?;
            Ok(Task::LoadWindow {
                tap: env.taps.only_running()?,
                interval: Duration::from_millis(*interval_ms),
                window: *window,
            })
        }
        JobSpec::Disk {
            dir,
            file_size,
            block_size,
            iops,
            read_fraction,
            queue_depth,
            direct,
            duration_ms,
        } => {
            let spec = DiskSpec {
                dir: dir.into(),
                file_size: *file_size,
                block_size: *block_size,
                iops: *iops,
                read_fraction: *read_fraction,
                queue_depth: *queue_depth,
                direct: *direct,
                duration: Duration::from_millis(*duration_ms),
            };
            spec.validate().map_err(|e| e.to_string())?;
            check_room(&spec)?;
            Ok(Task::Disk(spec))
        }
        JobSpec::Memory {
            bytes,
            workers,
            mode,
            duration_ms,
        } => {
            let spec = MemSpec {
                bytes: *bytes,
                mode: mode.parse::<MemMode>().map_err(|e| e.to_string())?,
                workers: *workers,
                duration: Duration::from_millis(*duration_ms),
            };
            let total = memload::mem_total_bytes().map_err(|e| e.to_string())?;
            spec.check(total).map_err(|e| e.to_string())?;
            Ok(Task::Memory(spec))
        }
        JobSpec::Command(spec) => Ok(Task::Command(crate::command::prepare(spec)?)),
    }
}

fn address(target: &str) -> Result<SocketAddr, String> {
    target
        .parse()
        .map_err(|_| format!("target {target:?} is not an address like 10.0.0.5:9000"))
}

/// Runs a latency probe and returns its report with the raw RTTs as a standard
/// HdrHistogram interval log (one histogram per second, tag `rtt`, and
/// `rtt_intended` in open-loop mode) in the field `hdr_log`, which the controller
/// stores beside the run's samples.
fn latency_with_hdr_log(cfg: &ProbeConfig, shared: &JobShared) -> Outcome {
    let cfg = ProbeConfig {
        interval: cfg.interval.or(Some(Duration::from_secs(1))),
        ..cfg.clone()
    };
    let comment = format!("nnb agent latency -> {}, values in ns", cfg.target);
    let mut log = HistLog::new(Vec::new(), &comment).map_err(|e| e.to_string())?;
    let mut log_error = None;
    let report = probe::run(&cfg, &shared.stop, &mut |iv| {
        if let Err(e) = iv.write_to(&mut log, None) {
            log_error.get_or_insert(e.to_string());
        }
    })
    .map_err(|e| e.to_string())?;
    let mut json = to_json(&report)?;
    // A broken log loses only the log: the summary is still the measurement.
    match (log_error, log.finish().map_err(|e| e.to_string())) {
        (None, Ok(bytes)) => {
            if let Value::Object(map) = &mut json {
                map.insert(
                    "hdr_log".into(),
                    Value::String(String::from_utf8_lossy(&bytes).into_owned()),
                );
            }
        }
        (Some(e), _) | (None, Err(e)) => {
            tracing::warn!("latency job: the HDR log is incomplete and was dropped: {e}")
        }
    }
    Ok(json)
}

/// Runs `f` on a thread of its own whose affinity is first widened to `cpus`, so
/// that the threads `f` starts inherit it while the calling thread (one of the
/// runtime's pooled threads, confined to the agent's CPUs) keeps its own.
fn widened<T: Send>(cpus: &[usize], f: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|s| {
        s.spawn(|| {
            restrict_to_cpus(cpus).map_err(|e| {
                format!(
                    "cannot widen the burn to the host's CPUs ({}): {e}",
                    nnb_burn::topology::format_list(cpus)
                )
            })?;
            Ok(f())
        })
        .join()
        .unwrap_or_else(|_| Err("the burn's host-scope thread panicked".to_string()))
    })
}

/// The host an ICMP `rtt` job echoes: "ip" or "ip:port" (the port is ignored).
fn icmp_host(target: &str) -> Result<SocketAddr, String> {
    target
        .parse::<IpAddr>()
        .map(|ip| SocketAddr::new(ip, 0))
        .or_else(|_| address(target))
        .map_err(|_| format!("target {target:?} is not an address like 10.0.0.5"))
}

fn to_json<T: Serialize>(v: &T) -> Outcome {
    serde_json::to_value(v).map_err(|e| format!("cannot encode the result as JSON: {e}"))
}

impl Job {
    /// Runs the job on the calling (blocking) thread until it ends or `shared`'s stop
    /// flag is raised, and returns its result as JSON, with what it ran under (the
    /// fields of [`nnb_burn::conditions::JobConditions`]) added to a result object.
    pub(super) fn run(self, shared: &JobShared) -> Outcome {
        let ena = crate::ena::EnaWatch::start();
        let watch = ConditionsWatch::start(&self.cpus);
        let mut result = self.task.run(shared)?;
        // MPERF counts at the TSC's rate; the clock is calibrated only if needed.
        let conditions = watch.finish(|| {
            let info = clock().info();
            (info.source == "tsc").then_some(info.freq_hz)
        });
        if let (Value::Object(map), Value::Object(more)) = (&mut result, to_json(&conditions)?) {
            map.extend(more);
            map.insert("ena".into(), to_json(&ena.and_then(|w| w.finish()))?);
        }
        Ok(result)
    }
}

impl Task {
    /// The CPUs the task's threads are confined to, when they are not the agent's: a
    /// burn's or busy job's pinned CPUs (a host-scope burn's unpinned threads: the
    /// host's online CPUs), a steal scan's.
    fn cpus(&self) -> Option<Vec<usize>> {
        let pinned = |p: &Placement| -> Option<Vec<usize>> {
            let cpus: BTreeSet<usize> = p.slots.iter().filter_map(|s| s.cpu).collect();
            (!cpus.is_empty()).then(|| cpus.into_iter().collect())
        };
        match self {
            Task::Burn {
                placement,
                widen_to,
                ..
            } => pinned(placement).or_else(|| widen_to.clone()),
            Task::Busy { placement, .. } => pinned(placement),
            Task::Steal { cpus, .. } => Some(cpus.clone()),
            Task::Latency(_)
            | Task::Rtt(_)
            | Task::Load(_)
            | Task::LoadWindow { .. }
            | Task::Serve(_)
            | Task::Idle
            | Task::Disk(_)
            | Task::Memory(_)
            | Task::Badabing(_)
            | Task::Command(_) => None,
        }
    }

    /// Runs the task (see [`Job::run`]).
    fn run(self, shared: &JobShared) -> Outcome {
        match self {
            Task::Burn {
                workload,
                work,
                pool,
                placement,
                scope,
                widen_to,
                duty,
            } => {
                let clock = clock();
                let run = || match (duty, work) {
                    (Some(d), Work::Duration(t)) => burner::burn_duty(
                        clock,
                        &workload,
                        t,
                        d,
                        &placement.slots,
                        Some(&shared.stop),
                    ),
                    _ => burner::burn_stoppable(
                        clock,
                        &workload,
                        work,
                        pool,
                        &placement.slots,
                        &shared.stop,
                    ),
                };
                let burn = match widen_to {
                    None => run(),
                    Some(host) => widened(&host, run)?,
                }
                .map_err(|e| e.to_string())?;
                let cpus: BTreeSet<usize> = burn
                    .threads
                    .iter()
                    .flat_map(|t| t.affinity.iter().copied())
                    .collect();
                to_json(&BurnJobResult {
                    placement,
                    clock: clock.info(),
                    burn,
                    scope,
                    cpus: cpus.into_iter().collect(),
                })
            }
            Task::Busy {
                workload,
                placement,
            } => {
                let r = burner::burn_until(clock(), &workload, &placement.slots, &shared.stop)
                    .map_err(|e| e.to_string())?;
                to_json(&BusyJobResult {
                    placement,
                    slices: r
                        .threads
                        .iter()
                        .map(|t| t.clock_reads.saturating_sub(1))
                        .sum(),
                    total_ops: r.total_ops,
                    ops_per_sec: r.ops_per_sec,
                })
            }
            Task::Steal {
                cpus,
                duration,
                threshold,
                trace,
            } => {
                let report =
                    steal::measure(clock(), &cpus, duration, threshold, trace, &shared.stop)
                        .map_err(|e| e.to_string())?;
                to_json(&report)
            }
            Task::Latency(cfg) => latency_with_hdr_log(&cfg, shared),
            Task::Rtt(cfg) => {
                let report =
                    series::run(&cfg, &shared.stop, &mut |_| {}).map_err(|e| e.to_string())?;
                to_json(&report)
            }
            Task::Load(cfg) => {
                let report = load::run(&cfg, &shared.stop).map_err(|e| e.to_string())?;
                to_json(&report)
            }
            Task::LoadWindow {
                tap,
                interval,
                window,
            } => {
                let report = window::read_window(
                    &tap,
                    interval,
                    window,
                    load::DEFAULT_REPORT_WAIT,
                    &shared.stop,
                )
                .map_err(|e| e.to_string())?;
                to_json(&report)
            }
            Task::Serve(cfg) => {
                let server = Server::start(&cfg).map_err(|e| e.to_string())?;
                shared.publish(to_json(&ServeAddrs {
                    reflector: server.reflector_addr(),
                    sink: server.sink_addr(),
                    tcp: server.tcp_addr(),
                })?);
                while !shared.should_stop() {
                    std::thread::sleep(POLL);
                }
                to_json(&server.stop())
            }
            Task::Idle => {
                while !shared.should_stop() {
                    std::thread::sleep(POLL);
                }
                Ok(Value::Null)
            }
            Task::Disk(spec) => {
                let report = disk::run(&spec, &shared.stop).map_err(|e| match e {
                    // Not the host's free bytes: the token holder learns only that
                    // the file does not fit (the room shrank since `check_room`).
                    DiskError::NoSpace { dir, .. } => format!(
                        "the file does not fit in {}: pick a smaller file_size",
                        dir.display()
                    ),
                    e => e.to_string(),
                })?;
                to_json(&report)
            }
            Task::Badabing(cfg) => {
                let report = badabing::run(&cfg, &shared.stop).map_err(|e| e.to_string())?;
                to_json(&report)
            }
            Task::Memory(spec) => {
                let report = memload::run(&spec, &shared.stop).map_err(|e| e.to_string())?;
                let mut result = to_json(&report)?;
                // The isolation matrix's p_max for memory: the machine's memory.
                if let (Value::Object(map), Ok(total)) = (&mut result, memload::mem_total_bytes()) {
                    map.insert("mem_total_bytes".to_string(), total.into());
                }
                Ok(result)
            }
            Task::Command(job) => job.run(shared),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::net::Ipv4Addr;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    use super::*;

    /// Thread ids of this process's threads named `name`, with each one's minor page
    /// faults (`/proc/self/task/TID/stat` field 10).
    fn tasks_named(name: &str) -> Vec<(u64, u64)> {
        let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
            return Vec::new();
        };
        dir.filter_map(|e| {
            let path = e.ok()?.path();
            let comm = std::fs::read_to_string(path.join("comm")).ok()?;
            if comm.trim() != name {
                return None;
            }
            let tid = path.file_name()?.to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(path.join("stat")).ok()?;
            // Fields after the ")" that ends the command: state is field 3, minflt 10.
            let minflt = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(7)?
                .parse()
                .ok()?;
            Some((tid, minflt))
        })
        .collect()
    }

    /// A host-scope burn started by an agent confined to CPU 0 (a local tenant's
    /// carved set) runs beyond it: two pinned threads take CPUs 0 and 1 and run
    /// there, and unpinned threads inherit the host's online CPUs, 1 included. The
    /// same burn in tenant scope has only CPU 0 for its two pinned threads, and the
    /// agent's own thread is still confined afterwards.
    #[test]
    fn a_host_scope_burn_uses_cpus_beyond_the_agents() {
        let topology = Topology::host().expect("topology");
        let allowed = placement::allowed_cpus();
        if !nnb_testkit::require(
            allowed.contains(&0) && allowed.contains(&1),
            &format!("needs CPUs 0 and 1 allowed, this process has {allowed:?}"),
        ) {
            return;
        }
        let (pinned, unpinned, tenant, after) = std::thread::spawn(move || {
            restrict_to_cpus(&[0]).expect("confine the agent to CPU 0");
            let env = JobEnv {
                topology,
                cpus: placement::allowed_cpus(),
                bind_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
                taps: Default::default(),
            };
            assert_eq!(env.cpus, [0]);
            let burn = |pin: &str, scope| {
                let spec = JobSpec::Burn {
                    workload: "int".into(),
                    threads: 2,
                    ops: None,
                    duration_ms: Some(50),
                    pin: pin.into(),
                    cpus: None,
                    scope,
                    duty: None,
                    pool: EventPool::PerThread,
                };
                prepare(&spec, &env).map(|job| job.run(&JobShared::default()))
            };
            (
                burn("compact", BurnScope::Host),
                burn("none", BurnScope::Host),
                burn("compact", BurnScope::Tenant),
                placement::allowed_cpus(),
            )
        })
        .join()
        .expect("agent thread");
        let pinned = pinned.expect("a valid job").expect("a pinned host burn");
        let at = |v: &Value, ptr: &str| -> Vec<u64> {
            v.pointer(ptr)
                .and_then(Value::as_array)
                .unwrap_or_else(|| panic!("no {ptr} in {v}"))
                .iter()
                .filter_map(Value::as_u64)
                .collect()
        };
        let slots: Vec<u64> = (0..2)
            .map(|i| {
                pinned["placement"]["slots"][i]["cpu"]
                    .as_u64()
                    .expect("cpu")
            })
            .collect();
        assert_eq!(slots, [0, 1], "{pinned}");
        let seen: Vec<u64> = (0..2)
            .map(|i| {
                pinned["burn"]["threads"][i]["cpu_start"]
                    .as_u64()
                    .expect("cpu")
            })
            .collect();
        assert_eq!(seen, [0, 1], "{pinned}");
        assert_eq!(at(&pinned, "/cpus"), [0, 1]);
        assert_eq!(pinned["scope"], "host");

        let unpinned = unpinned
            .expect("a valid job")
            .expect("an unpinned host burn");
        let cpus = at(&unpinned, "/cpus");
        assert!(cpus.contains(&0) && cpus.contains(&1), "{unpinned}");
        for i in 0..2 {
            let mask = at(&unpinned, &format!("/burn/threads/{i}/affinity"));
            assert_eq!(mask, cpus, "{unpinned}");
        }

        let err = tenant.expect_err("two pinned threads on the agent's one CPU");
        assert!(err.contains("2 threads but only 1 usable CPUs"), "{err}");
        assert_eq!(after, [0], "the widening leaked to the agent's thread");
    }

    /// Every job kind's result says what the job ran under, on its CPUs: a pinned
    /// burn's one CPU, a steal scan's and a latency probe's the agent's. The steal
    /// counters after are not below those before and differ by the ticks; the uptime
    /// at the start is positive and not past the uptime read after the job; the
    /// frequency is read from a known source or is null.
    #[test]
    fn every_job_kind_reports_steal_uptime_and_frequency() {
        let env = JobEnv {
            topology: Topology::host().expect("topology"),
            cpus: placement::allowed_cpus(),
            bind_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            taps: Default::default(),
        };
        let server = Server::start(&ServeConfig {
            sink_port: None,
            tcp_port: None,
            ..ServeConfig::default()
        })
        .expect("a local reflector");
        let reflector = server.reflector_addr().expect("reflector address");
        let burn = JobSpec::Burn {
            workload: "int".into(),
            threads: 1,
            ops: Some(100_000),
            duration_ms: None,
            pin: "compact".into(),
            cpus: None,
            scope: BurnScope::Tenant,
            duty: None,
            pool: EventPool::PerThread,
        };
        let steal = JobSpec::Steal {
            cpus: None,
            duration_ms: 20,
            threshold_ns: 10_000,
            options: Default::default(),
        };
        let latency = JobSpec::Latency {
            target: reflector.to_string(),
            duration_ms: 100,
            msg_size: 64,
            warmup_ms: 0,
            busy_poll: false,
        };
        for (spec, cpus) in [
            (burn, vec![env.cpus[0]]),
            (steal, env.cpus.clone()),
            (latency, env.cpus.clone()),
        ] {
            let job = prepare(&spec, &env).expect("a valid job");
            let result = job.run(&JobShared::default()).expect("a result");
            let uptime_after = nnb_burn::env::uptime_s().expect("/proc/uptime");
            let kind = spec.kind();
            let steal = &result["steal"];
            let cpus_seen: Vec<u64> = steal["cpus"]
                .as_array()
                .unwrap_or_else(|| panic!("{kind}: no steal in {result}"))
                .iter()
                .filter_map(Value::as_u64)
                .collect();
            let want: Vec<u64> = cpus.iter().map(|&c| c as u64).collect();
            assert_eq!(cpus_seen, want, "{kind}");
            let (before, after) = (steal["before"].as_u64(), steal["after"].as_u64());
            let (before, after) = before.zip(after).expect("steal counters");
            assert!(after >= before, "{kind}: {steal}");
            assert_eq!(steal["ticks"].as_u64(), Some(after - before), "{kind}");
            let uptime = result["uptime_s"].as_f64().expect("uptime_s");
            assert!(uptime > 0.0 && uptime <= uptime_after, "{kind}: {uptime}");
            let freq = result.get("freq").expect("a freq field");
            if !freq.is_null() {
                assert!(freq["mhz"].as_f64().is_some_and(|m| m > 0.0), "{freq}");
                let source = freq["source"].as_str().unwrap_or_default();
                assert!(
                    ["aperf-mperf", "scaling-cur-freq", "cpuinfo"].contains(&source),
                    "{freq}"
                );
            }
        }
        server.stop();
    }

    /// A busy `mem` neighbor is one steady load: over a second its one thread keeps
    /// its thread id (200 ms slices started a new thread five times a second) and,
    /// once its buffer is faulted in, takes no more page faults (each slice allocated
    /// and faulted in 4x the LLC again); its result counts ops and stop checks.
    #[test]
    fn a_busy_job_keeps_its_threads_and_memory_until_stopped() {
        let env = JobEnv {
            topology: Topology::host().expect("topology"),
            cpus: placement::allowed_cpus(),
            bind_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            taps: Default::default(),
        };
        let spec = JobSpec::Busy {
            workload: "mem".into(),
            threads: 1,
        };
        let job = prepare(&spec, &env).expect("a valid busy job");
        let shared = Arc::new(JobShared::default());
        let runner = std::thread::spawn({
            let shared = Arc::clone(&shared);
            move || job.run(&shared)
        });
        // Watch the thread for at least a second after it appears, and until its
        // buffer is faulted in (a while in a debug build on a busy machine): its page
        // faults stay flat over the last half second.
        let mut seen = BTreeSet::new();
        let mut faults = Vec::new();
        let settled = |f: &[u64]| f.len() >= 50 && f[f.len() - 1].abs_diff(f[f.len() - 25]) < 100;
        for _ in 0..500 {
            std::thread::sleep(Duration::from_millis(20));
            let tasks = tasks_named("steady-0");
            seen.extend(tasks.iter().map(|t| t.0));
            faults.extend(tasks.iter().map(|t| t.1));
            if settled(&faults) {
                break;
            }
        }
        shared.stop.store(true, Ordering::Relaxed);
        let result = runner.join().expect("job thread").expect("busy result");
        assert_eq!(seen.len(), 1, "thread ids seen: {seen:?}");
        assert!(settled(&faults), "page faults kept growing: {faults:?}");
        let slices = result["slices"].as_u64().expect("slices");
        let ops = result["total_ops"].as_u64().expect("total_ops");
        assert!(slices > 10, "{result}");
        assert_eq!(ops, slices * Workload::Mem { bytes: 0 }.check_every());
        assert!(result["ops_per_sec"].as_f64().expect("ops_per_sec") > 0.0);
    }

    /// NL3 (reliability review A14): a disk job's file is bounded like the
    /// experiment checker's (64 GiB) and may take at most 90% of its filesystem's
    /// free space; the refusal does not tell the token holder how much is free. The
    /// free space is `df`'s, not nnb's.
    #[test]
    fn a_disk_file_is_bounded_and_leaves_room_on_its_filesystem() {
        let dir = tempfile::tempdir().expect("tempdir");
        let disk = |file_size: u64| JobSpec::Disk {
            dir: dir.path().display().to_string(),
            file_size,
            block_size: 4096,
            iops: Some(10.0),
            read_fraction: 0.5,
            queue_depth: 1,
            direct: false,
            duration_ms: 1000,
        };
        let err = disk(1_000_000_000_000_000 / 4096 * 4096)
            .check_limits()
            .unwrap_err();
        assert!(
            err.contains("file_size") && err.contains("68719476736"),
            "{err}"
        );
        assert!(disk(64 << 30).check_limits().is_ok());

        let df = std::process::Command::new("df")
            .args(["-B1", "--output=avail"])
            .arg(dir.path())
            .output()
            .expect("df runs");
        let free: u64 = String::from_utf8_lossy(&df.stdout)
            .lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .expect("df prints the free bytes");
        let env = JobEnv {
            topology: Topology::host().expect("topology"),
            cpus: placement::allowed_cpus(),
            bind_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            taps: Default::default(),
        };
        // All the free space, and 95% of it, are refused; half of it is not.
        for share in [100, 95] {
            let size = free / 100 * share / 4096 * 4096;
            let Err(err) = prepare(&disk(size), &env) else {
                panic!("{share}% of the free space is not refused");
            };
            assert!(err.contains("over 90% of the free space"), "{err}");
            if share != 100 {
                assert!(!err.contains(&free.to_string()), "{err}");
            }
        }
        assert!(prepare(&disk(free / 2 / 4096 * 4096), &env).is_ok());
    }
}
