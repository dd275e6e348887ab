//! The typed job protocol between a controller and an agent.
//!
//! Every job an agent can run is a variant of [`JobSpec`]. One of them,
//! [`JobSpec::Command`], runs a program (an argv, never a shell string): an agent
//! runs it only when started with `nnb agent --allow-commands`, and otherwise
//! refuses it (403), so a token holder of an agent without the opt-in can burn CPU
//! or send traffic but not execute programs; `/health` says which
//! ([`Health::commands`]). The JSON form is internally tagged by `kind`
//! (kebab-case), e.g. `{"kind": "burn", "workload": "int", ...}`; unknown kinds and
//! unknown fields are rejected.

use std::collections::BTreeMap;

use nnb_burn::burner::{Duty, Work};
use nnb_format::{AgentJob, BackgroundJob, EventPool, JobKind};
use nnb_netlat::badabing::BadabingConfig;
use serde::{Deserialize, Serialize};

/// What an agent should run. Measuring jobs (`burn`, `steal`, `latency`) finish on
/// their own and return a result; background jobs (`serve`, `busy`, `idle`, and
/// `load` without a duration) run until stopped or until their deadline.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum JobSpec {
    /// A pinned burner run (`nnb cpu`): `threads` threads of `workload`, either a
    /// fixed number of operations (`ops`, per thread or in one shared `pool`) or a
    /// fixed time (`duration_ms`).
    Burn {
        /// Workload name as `nnb cpu --workload` takes it.
        workload: String,
        /// Burner threads.
        threads: usize,
        /// Operations per thread, or in all with `pool = "shared"` (fixed-work mode).
        ops: Option<u64>,
        /// Run time in milliseconds (fixed-time mode).
        duration_ms: Option<u64>,
        /// Pinning strategy: "none", "cores", "smt-sibling", "compact".
        pin: String,
        /// Explicit CPU list (overrides `pin`); `None` = the CPUs of `scope`.
        cpus: Option<Vec<usize>>,
        /// Which CPUs the threads are placed over (and an explicit `cpus` list is
        /// checked against): `tenant` (the default, left out of the JSON) = the
        /// agent's own CPUs; `host` = every online CPU of the machine, beyond the
        /// agent's affinity, for a tenant without set boundaries (Volpert et al.'s
        /// unrestricted state, the isolation matrix's capacity step).
        #[serde(default, skip_serializing_if = "BurnScope::is_tenant")]
        scope: BurnScope,
        /// Each thread busy this share of every period and asleep the rest (0 to 1,
        /// like `stress-ng --cpu-load`); absent = busy all the time. An
        /// undercommitted tenant's demand below its grant.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duty: Option<f64>,
        /// Where a fixed-work burn's threads take their ops: `per-thread` (the
        /// default, left out of the JSON: `ops` each, the thesis' `cpu_burn`) or
        /// `shared` (one pool of `ops` events drawn in small batches, sysbench's
        /// `--events`: the runtime is the pool's). A fixed-time burn is unaffected.
        #[serde(default, skip_serializing_if = "EventPool::is_per_thread")]
        pool: EventPool,
    },
    /// Steal/hiccup detection (`nnb steal`) on the given CPUs.
    Steal {
        /// CPUs to watch; `None` = the agent's own CPUs.
        cpus: Option<Vec<usize>>,
        /// How long to watch, in milliseconds.
        duration_ms: u64,
        /// A gap longer than this (ns) counts as a hiccup; the CPU share is the share
        /// of wall time outside such gaps (Wang & Ng's CPUTest: 1 ms).
        threshold_ns: u64,
        /// Wang & Ng's CPUTest additions (the timestamp trace); default = none.
        #[serde(default, skip_serializing_if = "StealOptions::is_default")]
        options: StealOptions,
    },
    /// A ping-pong latency probe against a reflector (`nnb latency`).
    Latency {
        /// Reflector address "ip:port".
        target: String,
        /// Measuring time in milliseconds (after the warm-up).
        duration_ms: u64,
        /// UDP payload size in bytes (header included).
        msg_size: usize,
        /// Warm-up discarded before measuring, in milliseconds.
        warmup_ms: u64,
        /// Busy-poll the socket instead of blocking.
        busy_poll: bool,
    },
    /// A rate-paced UDP load generator towards a sink (`nnb load`).
    Load {
        /// Sink address "ip:port".
        target: String,
        /// Aggregate payload rate in bits per second.
        rate_bps: f64,
        /// Parallel streams (sockets).
        streams: usize,
        /// UDP payload size in bytes (header included).
        msg_size: usize,
        /// Run time in milliseconds; `None` = until stopped.
        duration_ms: Option<u64>,
        /// Sample the throughput over time, sent and received (a throughput
        /// staircase's nodes); absent = not sampled.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sampling: Option<LoadSampling>,
        /// Wang & Ng's UDPTest/TCPTest settings and measurements (TCP, socket
        /// buffers, a byte bound, pacing granularity, TCP_INFO, fine-grained
        /// throughput and buffer bursts); default = a plain paced UDP load.
        #[serde(default, skip_serializing_if = "LoadOptions::is_default")]
        options: LoadOptions,
    },
    /// A window of the agent's one running UDP load (a continuous throughput
    /// staircase's node at one level): waits `window` intervals of `interval_ms`
    /// (and two of the sink's bins), then reads the sink's arrival series of the
    /// load's streams through the load's own sockets and returns the latest
    /// `window` samples and their mean, in a sampled load's result shape
    /// (`nnb_netlat::window`).
    LoadWindow {
        /// Sampling interval, ms: a whole number of the sink's 100 ms bins.
        interval_ms: u64,
        /// How many of the latest samples the recorded mean averages.
        window: usize,
    },
    /// A reflector and a sink (`nnb serve`) on the agent's address, until stopped.
    Serve {
        /// UDP reflector port (0 = ephemeral).
        reflector_port: u16,
        /// UDP sink port (0 = ephemeral).
        sink_port: u16,
        /// TCP sink port (0 = ephemeral); absent: no TCP sink.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tcp_port: Option<u16>,
        /// UDP sink sockets on its port (`SO_REUSEPORT`), one pinned receiving
        /// thread each (`nnb serve --sink-threads`); absent: one per CPU of the
        /// agent, at most 16.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sink_threads: Option<usize>,
    },
    /// A burner of `workload` on `threads` of the agent's CPUs, until stopped: a
    /// busy neighbor.
    Busy {
        /// Workload name as `nnb cpu --workload` takes it.
        workload: String,
        /// Burner threads.
        threads: usize,
    },
    /// Nothing, until stopped: an idle neighbor that is nonetheless "up".
    Idle,
    /// A paced random read/write generator on its own file in `dir` (`nnb disk`,
    /// like `fio --rw=randrw --rate_iops --direct=1`), for a fixed time.
    Disk {
        /// Directory of the file (on a disk: tmpfs has no direct I/O).
        dir: String,
        /// The file's size, bytes.
        file_size: u64,
        /// Bytes per operation.
        block_size: usize,
        /// Operations per second asked for; `None` = as fast as the device goes.
        iops: Option<f64>,
        /// Share of reads, 0 to 1.
        read_fraction: f64,
        /// Operations in flight (one thread each).
        queue_depth: usize,
        /// Bypass the page cache (`O_DIRECT`).
        direct: bool,
        /// Run time, ms.
        duration_ms: u64,
    },
    /// Memory allocated and kept touched by worker processes (`nnb memory`, like
    /// `stress-ng --vm --vm-keep`), for a fixed time.
    Memory {
        /// Bytes to allocate, over all workers.
        bytes: u64,
        /// Worker processes.
        workers: usize,
        /// `keep` (touch every page, again and again) or `bandwidth` (stream writes).
        mode: String,
        /// Run time, ms.
        duration_ms: u64,
    },
    /// Wang & Ng's RTT series (`nnb rtt`): `probes` probes at `rate_hz`, the first
    /// `skip` dropped, every probe's RTT (or its loss) kept in order.
    Rtt {
        /// Reflector address "ip:port" (UDP), or "ip" / "ip:port" of the host to
        /// echo (ICMP, whose port is ignored).
        target: String,
        /// Probes sent, the dropped first ones included.
        probes: u64,
        /// Probes per second.
        rate_hz: f64,
        /// The first probes sent and left out of the summary (not of the log).
        skip: u64,
        /// Probe size, bytes (UDP payload, or ICMP data).
        msg_size: usize,
        /// ICMP echo instead of UDP ping-pong.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        icmp: bool,
    },
    /// Wang & Ng's Badabing (`nnb badabing`): probes in random slots towards a
    /// reflector, lossy slots judged from losses and one-way delays.
    Badabing {
        /// Reflector address "ip:port".
        target: String,
        /// Probing time, ms.
        duration_ms: u64,
        /// Slot length, µs (seed: 5 ms).
        slot_us: u64,
        /// Probability a slot carries a probe, 0 to 1 (seed: 0.3).
        probability: f64,
        /// Packets per probe (seed: 3).
        packets: u32,
        /// Packet size, bytes.
        msg_size: usize,
        /// A slot within this of a loss is lossy, µs (seed: τ = 50 ms).
        tau_us: u64,
        /// A slot whose one-way delay exceeds max_owd × (1 − alpha) is lossy
        /// (seed: 0.005).
        alpha: f64,
    },
    /// A program run without a shell (version 11): measured until it exits (its
    /// wall time or a value it prints), or in the background until stopped, its
    /// whole process tree stopped and reaped. Only on an agent started with
    /// `--allow-commands`.
    Command(CommandSpec),
}

/// A `command` job: what to run, where, for how long, how much of its output to
/// keep, and what to measure of it. JSON (beside `"kind": "command"`):
/// `{"argv": ["sysbench", "cpu", "run"], "cwd": "/tmp", "env": {"LC_ALL": "C"},
/// "timeout_ms": 60000, "duration_ms": null, "output_limit": 65536, "metric":
/// {"type": "regex", "pattern": "events per second:\\s*([0-9.]+)", "unit":
/// "events/s", "higher_is_better": true}, "preset": "sysbench"}`; every field but
/// `argv` may be left out.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    /// The program and its arguments, never a shell string: `argv[0]` is an
    /// absolute path, or a name looked up on the `PATH` (`env`'s, else the
    /// agent's).
    pub argv: Vec<String>,
    /// Working directory (absolute); absent = the agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Variables added to (or replacing in) the agent's environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// A command still running this long after its start is stopped (its whole
    /// tree) and the job fails, with its stderr's tail; absent = only the job's
    /// deadline bounds it. A measured command should say it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// A fixed run time: the agent stops the command (its whole tree) this long
    /// after its start and the job ends normally. Absent = until it exits on its
    /// own or is stopped (a background command: until stopped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Bytes kept of stdout and of stderr, each: their first `output_limit` bytes
    /// (the head, which the metric reads) and their last
    /// `min(output_limit, limits::COMMAND_TAIL)` bytes (the tail, which the result
    /// and errors quote); what lies between is counted and dropped, never
    /// buffered. At most [`limits::MAX_COMMAND_OUTPUT`].
    #[serde(default = "default_output_limit")]
    pub output_limit: u64,
    /// What is measured: the wall time (the default), or a value the command
    /// prints.
    #[serde(default, skip_serializing_if = "CommandMetric::is_wall")]
    pub metric: CommandMetric,
    /// A known tool the command runs (`argv[0]` is it): the agent checks it is
    /// installed before starting and records its version in the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<Preset>,
}

fn default_output_limit() -> u64 {
    limits::DEFAULT_COMMAND_OUTPUT
}

/// What a `command` job measures. JSON: `{"type": "wall"}`, `{"type": "json",
/// "pointer": "/x", "unit": "ops/s", "higher_is_better": true}`, `{"type": "regex",
/// "pattern": "rate: ([0-9.]+)", "unit": "ops/s", "higher_is_better": true}`; a
/// printed value's `stream` is `stdout` unless it says `stderr`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(
    tag = "type",
    rename_all = "kebab-case",
    deny_unknown_fields,
    from = "MetricWire"
)]
pub enum CommandMetric {
    /// The wall time from its start to its exit, seconds, lower is better.
    #[default]
    Wall,
    /// The number at a JSON pointer (RFC 6901, e.g. `/jobs/0/read/iops`) into the
    /// stream's head read as one JSON document.
    Json {
        /// The JSON pointer.
        pointer: String,
        /// The value's unit, as the results record it.
        unit: String,
        /// Whether a higher value is better.
        higher_is_better: bool,
        /// The stream read.
        #[serde(default, skip_serializing_if = "OutputStream::is_stdout")]
        stream: OutputStream,
    },
    /// The first capture group of the first match of a regex (`regex-lite`
    /// syntax) over the stream's head, then its tail, parsed as a number.
    Regex {
        /// The pattern, with at least one capture group.
        pattern: String,
        /// The value's unit, as the results record it.
        unit: String,
        /// Whether a higher value is better.
        higher_is_better: bool,
        /// The stream read.
        #[serde(default, skip_serializing_if = "OutputStream::is_stdout")]
        stream: OutputStream,
    },
}

/// How a [`CommandMetric`] is read from JSON: the same, with the wall time a
/// struct variant, so that serde refuses unknown fields beside `"type": "wall"`
/// too (it ignores them beside a unit variant's tag).
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
enum MetricWire {
    Wall {},
    Json {
        pointer: String,
        unit: String,
        higher_is_better: bool,
        #[serde(default)]
        stream: OutputStream,
    },
    Regex {
        pattern: String,
        unit: String,
        higher_is_better: bool,
        #[serde(default)]
        stream: OutputStream,
    },
}

impl From<MetricWire> for CommandMetric {
    fn from(w: MetricWire) -> CommandMetric {
        match w {
            MetricWire::Wall {} => CommandMetric::Wall,
            MetricWire::Json {
                pointer,
                unit,
                higher_is_better,
                stream,
            } => CommandMetric::Json {
                pointer,
                unit,
                higher_is_better,
                stream,
            },
            MetricWire::Regex {
                pattern,
                unit,
                higher_is_better,
                stream,
            } => CommandMetric::Regex {
                pattern,
                unit,
                higher_is_better,
                stream,
            },
        }
    }
}

impl CommandMetric {
    /// Whether this is the wall time (the default, left out of the JSON).
    pub fn is_wall(&self) -> bool {
        *self == CommandMetric::Wall
    }
}

/// Which of a command's output streams a printed value is read from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum OutputStream {
    /// Standard output.
    #[default]
    Stdout,
    /// Standard error (stress-ng prints its metrics there).
    Stderr,
}

impl OutputStream {
    /// Whether this is stdout (the default, left out of the JSON).
    pub fn is_stdout(&self) -> bool {
        *self == OutputStream::Stdout
    }

    /// The stream's name: `stdout` or `stderr`.
    pub fn name(self) -> &'static str {
        match self {
            OutputStream::Stdout => "stdout",
            OutputStream::Stderr => "stderr",
        }
    }
}

/// The seeds' tools a `command` job may name as its preset: the agent checks the
/// tool is on its `PATH` (and is the job's `argv[0]`) before starting, and records
/// the first line of `TOOL --version` in the result.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// `stress-ng`.
    StressNg,
    /// `fio`.
    Fio,
    /// `sysbench`.
    Sysbench,
    /// `iperf3`.
    Iperf3,
}

impl Preset {
    /// Every preset.
    pub const ALL: [Preset; 4] = [
        Preset::StressNg,
        Preset::Fio,
        Preset::Sysbench,
        Preset::Iperf3,
    ];

    /// The tool's program name, as on the `PATH` and in the JSON: `stress-ng`,
    /// `fio`, `sysbench`, `iperf3`.
    pub const fn name(self) -> &'static str {
        match self {
            Preset::StressNg => "stress-ng",
            Preset::Fio => "fio",
            Preset::Sysbench => "sysbench",
            Preset::Iperf3 => "iperf3",
        }
    }

    /// The preset named `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|p| p.name() == name)
    }
}

impl std::fmt::Display for Preset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl CommandSpec {
    /// A `command` job running `argv` with every other field at its default: the
    /// agent's directory and environment, no timeout, until it exits or is
    /// stopped, [`limits::DEFAULT_COMMAND_OUTPUT`] bytes kept, its wall time
    /// measured, no preset.
    pub fn new(argv: Vec<String>) -> CommandSpec {
        CommandSpec {
            argv,
            cwd: None,
            env: BTreeMap::new(),
            timeout_ms: None,
            duration_ms: None,
            output_limit: limits::DEFAULT_COMMAND_OUTPUT,
            metric: CommandMetric::Wall,
            preset: None,
        }
    }

    /// How a dry run shows it: `command sysbench cpu run (timeout 60000 ms)`.
    pub fn describe(&self) -> String {
        let mut argv = self.argv.join(" ");
        if argv.len() > 80 {
            let cut = (0..=77)
                .rev()
                .find(|i| argv.is_char_boundary(*i))
                .unwrap_or(0);
            argv.truncate(cut);
            argv.push_str("...");
        }
        let mut out = format!("command {argv}");
        if let Some(ms) = self.duration_ms {
            out.push_str(&format!(" for {ms} ms"));
        }
        if let Some(ms) = self.timeout_ms {
            out.push_str(&format!(" (timeout {ms} ms)"));
        }
        match &self.metric {
            CommandMetric::Wall => {}
            CommandMetric::Json { pointer, unit, .. } => {
                out.push_str(&format!(", value at {pointer} in {unit}"))
            }
            CommandMetric::Regex { unit, .. } => {
                out.push_str(&format!(", value by regex in {unit}"))
            }
        }
        out
    }

    /// Checks the spec without the agent's machine: an `argv` (at most
    /// [`limits::MAX_COMMAND_ARGS`], its program a name or an absolute path),
    /// an absolute `cwd`, `env` names without `=`, no NUL byte anywhere, at most
    /// [`limits::MAX_COMMAND_BYTES`] in all, durations within the limits, an
    /// `output_limit` from 1 to [`limits::MAX_COMMAND_OUTPUT`], a metric's pointer,
    /// pattern (compiled, with a capture group) and unit, and a preset's tool as
    /// `argv[0]`. The one statement of these rules: the agent and the experiment
    /// checker call it.
    pub fn check(&self) -> Result<(), String> {
        let program = self
            .argv
            .first()
            .ok_or("a command job needs an `argv` with at least the program")?;
        check_at_most(
            "argv",
            self.argv.len(),
            limits::MAX_COMMAND_ARGS,
            "arguments",
        )?;
        check_at_most("env", self.env.len(), limits::MAX_COMMAND_ENV, "variables")?;
        if program.is_empty() {
            return Err("argv[0] (the program) is empty".into());
        }
        if program.contains('/') && !program.starts_with('/') {
            return Err(format!(
                "argv[0] = {program:?} is a relative path: give an absolute path or a name on the PATH"
            ));
        }
        let strings = self
            .argv
            .iter()
            .chain(self.cwd.iter())
            .chain(self.env.iter().flat_map(|(k, v)| [k, v]));
        let mut bytes = 0usize;
        for s in strings {
            if s.contains('\0') {
                return Err(format!("{s:?} contains a NUL byte"));
            }
            bytes += s.len() + 1;
        }
        check_at_most(
            "argv, env and cwd",
            bytes,
            limits::MAX_COMMAND_BYTES,
            "bytes",
        )?;
        if let Some(name) = self.env.keys().find(|k| k.is_empty() || k.contains('=')) {
            return Err(format!("env name {name:?} is empty or contains '='"));
        }
        if let Some(cwd) = self.cwd.as_deref().filter(|c| !c.starts_with('/')) {
            return Err(format!("cwd = {cwd:?} is not an absolute path"));
        }
        if let Some(ms) = self.timeout_ms {
            check_duration("timeout_ms", ms)?;
        }
        if let Some(ms) = self.duration_ms {
            check_duration("duration_ms", ms)?;
        }
        if self.output_limit == 0 {
            return Err("output_limit must be above zero".into());
        }
        check_at_most(
            "output_limit",
            self.output_limit,
            limits::MAX_COMMAND_OUTPUT,
            "bytes",
        )?;
        match &self.metric {
            CommandMetric::Wall => {}
            CommandMetric::Json { pointer, unit, .. } => {
                check_unit(unit)?;
                if !(pointer.is_empty() || pointer.starts_with('/')) {
                    return Err(format!(
                        "pointer = {pointer:?} is not a JSON pointer: it starts with '/' (e.g. \"/jobs/0/read/iops\")"
                    ));
                }
            }
            CommandMetric::Regex { pattern, unit, .. } => {
                check_unit(unit)?;
                command_regex(pattern)?;
            }
        }
        if let Some(preset) = self.preset {
            let base = program.rsplit('/').next().unwrap_or(program);
            if base != preset.name() {
                return Err(format!(
                    "preset = \"{preset}\" runs {preset}, but argv[0] is {program:?}"
                ));
            }
        }
        Ok(())
    }
}

/// A declared unit: up to 32 bytes, no control characters (it is printed in tables).
fn check_unit(unit: &str) -> Result<(), String> {
    if unit.len() > 32 || unit.chars().any(char::is_control) {
        return Err(format!(
            "unit = {unit:?} is not a unit: at most 32 characters, none of them control characters"
        ));
    }
    Ok(())
}

/// A `command` job's metric regex, compiled: at most
/// [`limits::MAX_COMMAND_PATTERN`] bytes, with at least one capture group (whose
/// first match is the value).
pub fn command_regex(pattern: &str) -> Result<regex_lite::Regex, String> {
    check_at_most(
        "pattern",
        pattern.len(),
        limits::MAX_COMMAND_PATTERN,
        "bytes",
    )?;
    let re = regex_lite::Regex::new(pattern)
        .map_err(|e| format!("pattern = {pattern:?} is not a regex: {e}"))?;
    if re.captures_len() < 2 {
        return Err(format!(
            "pattern = {pattern:?} has no capture group: put the number in ( )"
        ));
    }
    Ok(re)
}

/// Wang & Ng's CPUTest additions to a `steal` job.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct StealOptions {
    /// Keep the timestamp trace in the result: every gap at or above the threshold
    /// exactly, the other iterations as counts per ms.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trace: bool,
}

impl StealOptions {
    /// Whether these are the defaults (left out of the JSON).
    pub fn is_default(&self) -> bool {
        *self == StealOptions::default()
    }
}

/// Wang & Ng's UDPTest/TCPTest settings of a `load` job; every field absent =
/// today's paced UDP load.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LoadOptions {
    /// TCP instead of UDP (the target is then a TCP sink).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tcp: bool,
    /// Stop after this many payload bytes (seed: 800 MB), or at the duration,
    /// whichever comes first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// UDP pacing granularity: bytes sent back to back before each idle interval
    /// (seed: 128 KB); absent = per datagram.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_chunk: Option<u64>,
    /// Sender's socket buffer (SO_SNDBUF) asked for, bytes; the result records
    /// what the kernel granted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_buffer: Option<u64>,
    /// Receiver's socket buffer (SO_RCVBUF, TCP's receive window) asked for,
    /// bytes; the result records what the receiver granted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recv_buffer: Option<u64>,
    /// TCP: sample the sender's TCP_INFO every this many ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_info_ms: Option<u64>,
    /// A quiet period: nothing sent or received for longer than this, µs (e.g.
    /// 10 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiet_us: Option<u64>,
    /// The receiver's fine-grained throughput: one rate per this many bytes
    /// received (seed: 256 KB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grain: Option<u64>,
    /// The full link rate buffer bursts are judged against, bit/s (seed: 1 Gbit/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_bps: Option<f64>,
}

impl LoadOptions {
    /// Whether these are the defaults (left out of the JSON).
    pub fn is_default(&self) -> bool {
        *self == LoadOptions::default()
    }
}

/// How a `load` job samples its throughput: its rate every `interval_ms`, as sent
/// and as the sink received it, and the mean of the latest `window` samples.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LoadSampling {
    /// Sampling interval, ms: a whole number of the sink's 100 ms bins.
    pub interval_ms: u64,
    /// How many of the latest samples the recorded mean averages.
    pub window: usize,
}

/// Which CPUs a `burn` job's threads may use.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum BurnScope {
    /// The agent's own CPUs (its affinity mask: a local tenant's carved set).
    #[default]
    Tenant,
    /// Every online CPU of the machine (`/sys/devices/system/cpu/online`): the
    /// agent widens the burner threads' affinity to them before starting them, so
    /// unpinned threads are scheduled over the whole host and pinned ones may take
    /// any online CPU. A CPU outside a cgroup cpuset still cannot be used: pinning
    /// to one fails, and unpinned threads get what the kernel allows (the result's
    /// `cpus` says which).
    Host,
}

impl BurnScope {
    /// Whether this is the default scope, [`BurnScope::Tenant`].
    pub fn is_tenant(&self) -> bool {
        *self == BurnScope::Tenant
    }
}

impl JobSpec {
    /// A short human form of the job, for a dry run's plan ("burn fpadd x2 1000 ops
    /// pin=cores"): stated beside the spec, so a new kind says how it reads.
    pub fn describe(&self) -> String {
        match self {
            JobSpec::Burn {
                workload,
                threads,
                ops,
                duration_ms,
                pin,
                scope,
                duty,
                pool,
                ..
            } => {
                let amount = match (ops, duration_ms, pool) {
                    (Some(n), _, EventPool::Shared) => format!("{n} ops in a shared pool"),
                    (Some(n), _, EventPool::PerThread) => format!("{n} ops"),
                    (_, Some(ms), _) => format!("{ms} ms"),
                    _ => String::new(),
                };
                let over = match scope {
                    BurnScope::Tenant => "",
                    BurnScope::Host => " over the host's CPUs",
                };
                let load = duty.map_or_else(String::new, |d| format!(" at {:.0}% load", d * 100.0));
                format!("burn {workload} x{threads} {amount} pin={pin}{load}{over}")
            }
            JobSpec::Memory {
                bytes,
                mode,
                duration_ms,
                ..
            } => format!(
                "memory {} ({mode}) for {duration_ms} ms",
                nnb_units::format_bytes(*bytes as f64)
            ),
            JobSpec::Disk {
                iops,
                queue_depth,
                read_fraction,
                duration_ms,
                ..
            } => {
                let pace = iops.map_or_else(|| "unpaced".to_string(), |n| format!("{n:.0} IOPS"));
                format!(
                    "disk {pace} qd={queue_depth} reads={:.0}% for {duration_ms} ms",
                    read_fraction * 100.0
                )
            }
            JobSpec::Busy { workload, threads } => format!("busy {workload} x{threads}"),
            JobSpec::Load {
                target,
                rate_bps,
                duration_ms,
                ..
            } => match duration_ms {
                Some(ms) => format!(
                    "load {} to {target} for {ms} ms",
                    nnb_units::format_bits_per_sec(*rate_bps)
                ),
                None => format!(
                    "load {} to {target}",
                    nnb_units::format_bits_per_sec(*rate_bps)
                ),
            },
            JobSpec::Latency {
                target,
                duration_ms,
                ..
            } => format!("latency to {target} for {duration_ms} ms"),
            JobSpec::Steal { duration_ms, .. } => format!("steal scan for {duration_ms} ms"),
            JobSpec::Rtt {
                target,
                probes,
                rate_hz,
                icmp,
                ..
            } => format!(
                "rtt {} x{probes} at {rate_hz}/s to {target}",
                if *icmp { "icmp" } else { "udp" }
            ),
            JobSpec::Badabing {
                target,
                duration_ms,
                ..
            } => format!("badabing to {target} for {duration_ms} ms"),
            JobSpec::LoadWindow {
                interval_ms,
                window,
            } => format!("window of the running load: latest {window} x {interval_ms} ms"),
            JobSpec::Command(c) => c.describe(),
            JobSpec::Serve { .. } | JobSpec::Idle => self.kind().to_string(),
        }
    }

    /// How long the job runs when it says (a fixed-time job): what the host-side
    /// usage of its tenant is per.
    pub fn nominal(&self) -> Option<std::time::Duration> {
        let ms = match self {
            JobSpec::Burn { duration_ms, .. } | JobSpec::Load { duration_ms, .. } => *duration_ms,
            JobSpec::Latency { duration_ms, .. }
            | JobSpec::Disk { duration_ms, .. }
            | JobSpec::Memory { duration_ms, .. }
            | JobSpec::Steal { duration_ms, .. }
            | JobSpec::Badabing { duration_ms, .. } => Some(*duration_ms),
            JobSpec::Rtt {
                probes, rate_hz, ..
            } => {
                let ms = (*probes as f64) * 1000.0 / rate_hz;
                (ms.is_finite() && ms >= 0.0).then_some(ms as u64)
            }
            JobSpec::LoadWindow {
                interval_ms,
                window,
            } => return self::window_span(*interval_ms, *window).ok(),
            JobSpec::Command(c) => c.duration_ms,
            JobSpec::Serve { .. } | JobSpec::Busy { .. } | JobSpec::Idle => None,
        };
        ms.map(std::time::Duration::from_millis)
    }

    /// The measured job kind whose result the results format reads of this job
    /// (`burn`, `latency`, `load`, `disk`, `memory`); none for a job that only runs
    /// in the background or is never measured in a step (`steal`).
    pub fn measured(&self) -> Option<JobKind> {
        self.kind().measured()
    }

    /// The background job kind whose final result the results format reads of this
    /// job (`busy`, `load`, `idle`, `serve`); none for a job that is only measured.
    pub fn background(&self) -> Option<BackgroundJob> {
        self.kind().background()
    }

    /// The job's `kind` tag as it appears on the wire.
    pub fn kind(&self) -> AgentJob {
        match self {
            JobSpec::Burn { .. } => AgentJob::Burn,
            JobSpec::Steal { .. } => AgentJob::Steal,
            JobSpec::Latency { .. } => AgentJob::Latency,
            JobSpec::Load { .. } => AgentJob::Load,
            JobSpec::Serve { .. } => AgentJob::Serve,
            JobSpec::Busy { .. } => AgentJob::Busy,
            JobSpec::Idle => AgentJob::Idle,
            JobSpec::Disk { .. } => AgentJob::Disk,
            JobSpec::Memory { .. } => AgentJob::Memory,
            JobSpec::Rtt { .. } => AgentJob::Rtt,
            JobSpec::Badabing { .. } => AgentJob::Badabing,
            JobSpec::LoadWindow { .. } => AgentJob::LoadWindow,
            JobSpec::Command(_) => AgentJob::Command,
        }
    }
}

/// A request to start a job: the spec and how long it may run. An agent stops a
/// job that outlives its deadline (cooperative jobs through their stop flag; others
/// are marked [`JobState::TimedOut`] and abandoned).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct JobRequest {
    /// What to run.
    pub spec: JobSpec,
    /// Milliseconds after the start at which the agent stops the job.
    pub deadline_ms: u64,
}

/// Bounds on what one agent accepts, checked before anything is allocated or
/// started: a request beyond one is a 400 (or, for the job pool, a 503) whose
/// message names the limit.
pub mod limits {
    use std::time::Duration;

    /// Most threads of one `burn` or `busy` job (placements allocate one slot per
    /// thread, and unpinned threads may outnumber the CPUs).
    pub const MAX_THREADS: usize = 1024;
    /// Most operations in flight of one `disk` job (one thread each).
    pub const MAX_QUEUE_DEPTH: usize = nnb_burn::disk::MAX_QUEUE_DEPTH;
    /// Most worker processes of one `memory` job.
    pub const MAX_WORKERS: usize = nnb_burn::memload::MAX_WORKERS;
    /// Most streams of one `load` job (one socket and one thread each).
    pub const MAX_STREAMS: usize = nnb_netlat::load::MAX_STREAMS;
    /// Longest duration (run time or warm-up) a job may ask for, in milliseconds:
    /// 7 days. Longer runs go on until stopped or until their deadline instead.
    pub const MAX_DURATION_MS: u64 = nnb_units::MAX_DURATION.as_millis() as u64;
    /// Highest aggregate rate of a `load` job, bits per second (1 Tbit/s).
    pub const MAX_RATE_BPS: f64 = nnb_netlat::load::MAX_RATE_BPS;
    /// Most jobs whose threads run at once on one agent (idle ones included); a
    /// start beyond it is a 503 "busy".
    pub const MAX_RUNNING_JOBS: usize = 64;
    /// Finished jobs an agent remembers for collection; the oldest are forgotten
    /// first (running jobs are always kept).
    pub const MAX_FINISHED_JOBS: usize = 1024;
    /// Largest file of one `disk` job, bytes (64 GiB); the experiment checker
    /// bounds a disk load's `file_size` by it too.
    pub const MAX_DISK_FILE: u64 = 64 << 30;
    /// Most HTTP connections an agent holds open; a connection beyond it makes the
    /// agent close its oldest one (so a flood of idle connections cannot lock out
    /// a controller's new one). Fewer under a low open-files limit: see
    /// [`FD_RESERVE`].
    pub const MAX_CONNECTIONS: usize = 1024;
    /// File descriptors an agent keeps out of its connection cap, for its jobs
    /// (one `load` job at its most streams holds 256 sockets; disk files, memory
    /// workers' pipes and the agent's own listener and runtime take a few): under
    /// an open-files limit of N the agent holds at most N - 256 connections, so it
    /// closes its oldest connection before `accept` runs out of descriptors.
    pub const FD_RESERVE: usize = 256;
    /// Fewest connections an agent holds whatever its open-files limit; below
    /// `FD_RESERVE + MIN_CONNECTIONS` descriptors it relies on closing the oldest
    /// connection whenever `accept` finds none left.
    pub const MIN_CONNECTIONS: usize = 16;
    /// A connection must send a request's whole header within this time, and an
    /// idle keep-alive connection is closed after it.
    pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
    /// A request's body must have arrived within this time after its header; a
    /// body still missing then is answered 408 and its connection closed.
    pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);
    /// How long an agent that was told to shut down (or that closes a connection
    /// over [`MAX_CONNECTIONS`]) lets requests in flight finish before it closes
    /// their connections, and waits for its jobs' threads to end.
    pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
    /// Most bytes a `command` job keeps of its stdout's and of its stderr's head
    /// (its `output_limit`, each): 4 MiB.
    pub const MAX_COMMAND_OUTPUT: u64 = 4 << 20;
    /// A `command` job's `output_limit` when it does not say: 64 KiB.
    pub const DEFAULT_COMMAND_OUTPUT: u64 = 64 << 10;
    /// Most bytes a `command` job keeps of each stream's tail (after its head),
    /// which its result and its errors quote: 4 KiB.
    pub const COMMAND_TAIL: u64 = 4 << 10;
    /// Most arguments of a `command` job (`argv`, the program included).
    pub const MAX_COMMAND_ARGS: usize = 4096;
    /// Most bytes of a `command` job's `argv`, `env` and `cwd` together: 256 KiB
    /// (the kernel's own bound on arguments and environment is larger).
    pub const MAX_COMMAND_BYTES: usize = 256 << 10;
    /// Most variables of a `command` job's `env`.
    pub const MAX_COMMAND_ENV: usize = 1024;
    /// Longest regex of a `command` job's metric, bytes.
    pub const MAX_COMMAND_PATTERN: usize = 1024;
    /// How long a stopped `command` job's processes have between `SIGTERM` and
    /// `SIGKILL`: 1 s, so that the whole stop ends within the 3 s a stop request
    /// waits for a job and within the agent's own [`SHUTDOWN_GRACE`].
    pub const COMMAND_STOP_GRACE: Duration = Duration::from_secs(1);
}

/// Why a `POST /jobs` body is not a job request the agent accepts (a 400).
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// Not JSON, or not the shape of a [`JobRequest`].
    #[error("invalid job request: {0}")]
    Json(#[from] serde_json::Error),
    /// Valid JSON but a value out of bounds.
    #[error("{0}")]
    Invalid(String),
}

impl JobRequest {
    /// Decodes and checks a `POST /jobs` body: it must be a JSON object (not the
    /// array form serde would take), its `spec` an object without unknown fields
    /// (the unit variant `idle` included), its deadline above zero and every number
    /// within [`limits`].
    pub fn from_json(body: &[u8]) -> Result<JobRequest, RequestError> {
        let value: serde_json::Value = serde_json::from_slice(body)?;
        let spec = match &value {
            serde_json::Value::Object(map) => map.get("spec"),
            _ => return Err(invalid("a job request must be a JSON object")),
        };
        if let Some(serde_json::Value::Object(spec)) = spec {
            if let Some(extra) = spec.keys().find(|k| *k != "kind").filter(|_| {
                spec.get("kind").and_then(|k| k.as_str()) == Some(AgentJob::Idle.name())
            }) {
                return Err(invalid(&format!(
                    "unknown field `{extra}`: an idle job takes no fields"
                )));
            }
        } else if spec.is_some() {
            return Err(invalid("`spec` must be a JSON object"));
        }
        // Typed decoding from the bytes, not the value: it refuses duplicate keys.
        let req: JobRequest = serde_json::from_slice(body)?;
        if req.deadline_ms == 0 {
            return Err(invalid("deadline_ms must be above zero"));
        }
        req.spec.check_limits().map_err(RequestError::Invalid)?;
        Ok(req)
    }
}

fn invalid(message: &str) -> RequestError {
    RequestError::Invalid(message.to_string())
}

/// Checks that a duration field is above zero and at most [`limits::MAX_DURATION_MS`].
fn check_duration(field: &str, ms: u64) -> Result<(), String> {
    if ms == 0 {
        return Err(format!("{field} must be above zero"));
    }
    check_at_most(field, ms, limits::MAX_DURATION_MS, "ms (7 days)")
}

fn check_at_most<T: PartialOrd + std::fmt::Display>(
    field: &str,
    value: T,
    max: T,
    unit: &str,
) -> Result<(), String> {
    if value > max {
        return Err(format!(
            "{field} = {value} is above the agent's limit of {max} {unit}"
        ));
    }
    Ok(())
}

impl JobSpec {
    /// Checks the spec's numbers against [`limits`] (durations above zero and at
    /// most 7 days, thread and stream counts, load rates whose datagram period
    /// fits between 1 ns and the longest duration); the error names the field and
    /// the limit. Checks that need the agent's machine (CPUs, addresses, workload
    /// names) come after, when the agent prepares the job.
    pub fn check_limits(&self) -> Result<(), String> {
        match self {
            JobSpec::Burn {
                threads,
                ops,
                duration_ms,
                duty,
                ..
            } => {
                check_at_most("threads", *threads, limits::MAX_THREADS, "threads")?;
                burn_work(*ops, *duration_ms, *duty).map(drop)
            }
            JobSpec::Disk {
                file_size,
                queue_depth,
                duration_ms,
                ..
            } => {
                check_at_most("file_size", *file_size, limits::MAX_DISK_FILE, "bytes")?;
                check_at_most(
                    "queue_depth",
                    *queue_depth,
                    limits::MAX_QUEUE_DEPTH,
                    "operations",
                )?;
                check_duration("duration_ms", *duration_ms)
            }
            JobSpec::Memory {
                workers,
                duration_ms,
                ..
            } => {
                check_at_most("workers", *workers, limits::MAX_WORKERS, "processes")?;
                check_duration("duration_ms", *duration_ms)
            }
            JobSpec::Busy { threads, .. } => {
                check_at_most("threads", *threads, limits::MAX_THREADS, "threads")
            }
            JobSpec::Steal { duration_ms, .. } => check_duration("duration_ms", *duration_ms),
            JobSpec::Badabing { duration_ms, .. } => {
                check_duration("duration_ms", *duration_ms)?;
                let any = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
                self.badabing_config(any, 0).map(drop)
            }
            JobSpec::Rtt {
                probes,
                rate_hz,
                skip,
                msg_size,
                ..
            } => nnb_netlat::probe::series::check_shape(*probes, *rate_hz, *skip, *msg_size),
            JobSpec::Latency {
                duration_ms,
                warmup_ms,
                ..
            } => {
                check_duration("duration_ms", *duration_ms)?;
                check_at_most(
                    "warmup_ms",
                    *warmup_ms,
                    limits::MAX_DURATION_MS,
                    "ms (7 days)",
                )
            }
            JobSpec::Load {
                rate_bps,
                streams,
                msg_size,
                duration_ms,
                ..
            } => {
                check_at_most("streams", *streams, limits::MAX_STREAMS, "streams")?;
                check_at_most("rate_bps", *rate_bps, limits::MAX_RATE_BPS, "bit/s")?;
                // Each stream sends one `msg_size` datagram per period: a period
                // under a nanosecond or beyond the longest duration cannot be paced.
                let period_ns = *msg_size as f64 * 8.0 * *streams as f64 / *rate_bps * 1e9;
                if *rate_bps > 0.0
                    && !(1.0..=limits::MAX_DURATION_MS as f64 * 1e6).contains(&period_ns)
                {
                    return Err(format!(
                        "rate_bps = {rate_bps} gives one {msg_size}-byte datagram per stream every {period_ns} ns, \
                         outside the agent's limits of 1 ns to {} ms",
                        limits::MAX_DURATION_MS
                    ));
                }
                duration_ms.map_or(Ok(()), |ms| check_duration("duration_ms", ms))
            }
            JobSpec::LoadWindow {
                interval_ms,
                window,
            } => window_span(*interval_ms, *window).map(drop),
            JobSpec::Serve { sink_threads, .. } => {
                sink_threads.map_or(Ok(()), nnb_netlat::serve::check_sink_threads)
            }
            JobSpec::Command(c) => c.check(),
            JobSpec::Idle => Ok(()),
        }
    }
}

/// How long a `load-window` job of `window` samples of `interval_ms` waits, or why
/// it cannot be read ([`nnb_netlat::window::window_span`]).
pub fn window_span(interval_ms: u64, window: usize) -> Result<std::time::Duration, String> {
    nnb_netlat::window::window_span(std::time::Duration::from_millis(interval_ms), window)
}

impl JobSpec {
    /// A `badabing` job's settings towards `target` with `seed`, checked by
    /// [`BadabingConfig::validate`] (slots at most [`nnb_netlat::badabing::MAX_SLOTS`],
    /// packets per probe, probability, α, τ, packet size): the one statement of its
    /// rules, which the limits check and the runner both call. An error for another
    /// kind of job.
    pub fn badabing_config(
        &self,
        target: std::net::SocketAddr,
        seed: u64,
    ) -> Result<BadabingConfig, String> {
        let JobSpec::Badabing {
            duration_ms,
            slot_us,
            probability,
            packets,
            msg_size,
            tau_us,
            alpha,
            ..
        } = self
        else {
            return Err(format!("a {} job is not a badabing job", self.kind()));
        };
        let cfg = BadabingConfig {
            duration: std::time::Duration::from_millis(*duration_ms),
            slot: std::time::Duration::from_micros(*slot_us),
            probability: *probability,
            packets: *packets,
            msg_size: *msg_size,
            tau: std::time::Duration::from_micros(*tau_us),
            alpha: *alpha,
            ..BadabingConfig::new(target, seed)
        };
        cfg.validate().map_err(|e| e.to_string())?;
        Ok(cfg)
    }
}

/// What a `burn` job asks for, checked: exactly one of fixed work (`ops`, above
/// zero) and fixed time (`duration_ms`, within the agent's longest duration), and a
/// duty cycle (a busy share, as [`Duty::new`] accepts) only with fixed time. The one
/// statement of these rules: the agent's limits check and its runner both call it.
pub fn burn_work(
    ops: Option<u64>,
    duration_ms: Option<u64>,
    duty: Option<f64>,
) -> Result<(Work, Option<Duty>), String> {
    let work = match (ops, duration_ms) {
        (Some(0), None) => return Err("ops must be above zero".into()),
        (Some(n), None) => Work::Ops(n),
        (None, Some(ms)) => {
            check_duration("duration_ms", ms)?;
            Work::Duration(std::time::Duration::from_millis(ms))
        }
        _ => return Err("a burn job needs exactly one of `ops` and `duration_ms`".into()),
    };
    let duty = match (duty, work) {
        (None, _) => None,
        (Some(d), Work::Duration(_)) => Some(
            Duty::new(d)
                .ok_or_else(|| format!("duty = {d} is not a share above 0 and at most 1"))?,
        ),
        (Some(_), Work::Ops(_)) => {
            return Err("a duty cycle needs a fixed-time burn (`duration_ms`)".into())
        }
    };
    Ok((work, duty))
}

/// Identifier an agent gives a started job (unique within that agent).
pub type JobId = String;

/// The answer to `POST /jobs`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Started {
    /// The new job's id.
    pub id: JobId,
}

/// Where a job is in its life.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum JobState {
    /// Still running.
    Running,
    /// Finished on its own; `result` holds what it measured.
    Done,
    /// Finished with an error; `error` says why.
    Failed,
    /// Stopped on request; background jobs report their final snapshot as `result`.
    Stopped,
    /// Outlived its deadline and was stopped (or abandoned if it cannot be stopped).
    TimedOut,
}

impl JobState {
    /// Whether the job has ended (any state but `Running`).
    pub fn is_final(self) -> bool {
        self != JobState::Running
    }
}

/// A job's state and, once it ended, its result or error.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct JobStatus {
    /// The job's id.
    pub id: JobId,
    /// The job's `kind` tag.
    pub kind: AgentJob,
    /// Where the job is.
    pub state: JobState,
    /// The result as JSON, by kind: `burn` `{placement, clock, burn, steal, scope,
    /// cpus}` (placement, `ClockInfo` and `BurnResult` of nnb_burn, the steal on
    /// the pinned CPUs, the job's [`BurnScope`], and the CPUs its threads were
    /// allowed on, read back from the kernel); `busy` `{placement, slices,
    /// total_ops, ops_per_sec}` of one steady burn (`slices`: stop checks over all
    /// threads); `steal` a `StealReport`; `latency` a netlat
    /// `ProbeReport`; `load` a netlat `LoadReport`; `serve` `{reflector, sink}`
    /// (bound addresses) while running, its final `ServeSnapshot` once stopped;
    /// `idle` `null`; `command` `{argv, pid, exit_code, signal, wall_s, source,
    /// value, unit, higher_is_better, stopped, stdout_bytes, stderr_bytes,
    /// stdout_dropped, stderr_dropped, stdout_tail, stderr_tail, tool, killed,
    /// sigkilled}` once ended, `{pid}` while it runs.
    pub result: Option<serde_json::Value>,
    /// Why the job failed or was cut short.
    pub error: Option<String>,
}

/// What `GET /health` says about an agent.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Health {
    /// The agent's nnb version.
    pub version: String,
    /// The agent host's CPU topology.
    pub topology: nnb_burn::topology::TopologySummary,
    /// CPUs the agent may run on (its affinity mask).
    pub cpus: Vec<usize>,
    /// Jobs currently running.
    pub running_jobs: usize,
    /// The agent's machine as it captured it when it started: CPU model, kernel,
    /// clocksource, governor, hypervisor, topology, steal ticks (absent from an older
    /// agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<nnb_burn::env::Environment>,
    /// Whether the agent runs `command` jobs: started with `--allow-commands`
    /// (version 11; false from an older agent, which has no command jobs).
    #[serde(default)]
    pub commands: bool,
}

/// The JSON body of every error answer (4xx/5xx) of an agent.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ErrorBody {
    /// What went wrong, for a person.
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_badabing_job_is_bounded_by_its_slots_and_netlats_rules() {
        let spec = |duration_ms, slot_us, probability, msg_size| JobSpec::Badabing {
            target: "10.0.0.5:9000".into(),
            duration_ms,
            slot_us,
            probability,
            packets: 3,
            msg_size,
            tau_us: 50_000,
            alpha: 0.005,
        };
        // The seed's settings: one minute of 5 ms slots.
        assert_eq!(spec(60_000, 5_000, 0.3, 600).check_limits(), Ok(()));
        for (s, why) in [
            // A day of 5 ms slots is 17,280,000 slots: the series would be unbounded.
            (
                spec(86_400_000, 5_000, 0.3, 600),
                "above the limit of 1000000",
            ),
            (spec(60_000, 5_000, 0.0, 600), "probability"),
            (spec(60_000, 5_000, 0.3, 39), "receive stamp"),
            (spec(60_000, 0, 0.3, 600), "slot"),
            (spec(0, 5_000, 0.3, 600), "duration_ms must be above zero"),
        ] {
            let err = s.check_limits().expect_err(why);
            assert!(err.contains(why), "{s:?}: {err}");
        }
    }

    #[test]
    fn a_burn_is_fixed_work_or_fixed_time_and_only_fixed_time_has_a_duty() {
        assert_eq!(burn_work(Some(5), None, None), Ok((Work::Ops(5), None)));
        let (work, duty) = burn_work(None, Some(250), Some(0.5)).expect("fixed time at half");
        assert_eq!(work, Work::Duration(std::time::Duration::from_millis(250)));
        assert_eq!(duty.map(Duty::share), Some(0.5));
        for (ops, ms, duty, why) in [
            (Some(5), Some(250), None, "exactly one"),
            (None, None, None, "exactly one"),
            (Some(0), None, None, "ops must be above zero"),
            (None, Some(0), None, "duration_ms must be above zero"),
            (
                None,
                Some(limits::MAX_DURATION_MS + 1),
                None,
                "above the agent's limit",
            ),
            (Some(5), None, Some(0.5), "needs a fixed-time burn"),
            (None, Some(250), Some(0.0), "not a share"),
            (None, Some(250), Some(1.5), "not a share"),
            (None, Some(250), Some(f64::NAN), "not a share"),
        ] {
            let err = burn_work(ops, ms, duty).expect_err(why);
            assert!(err.contains(why), "{ops:?} {ms:?} {duty:?}: {err}");
        }
        // The limits check states no rule of its own: it refuses what burn_work does.
        let spec = |ops, duration_ms, duty| JobSpec::Burn {
            workload: "fpadd".into(),
            threads: 1,
            ops,
            duration_ms,
            pin: "cores".into(),
            cpus: None,
            scope: BurnScope::Tenant,
            duty,
            pool: EventPool::PerThread,
        };
        assert!(spec(Some(5), Some(250), None).check_limits().is_err());
        assert!(spec(Some(5), None, Some(0.5)).check_limits().is_err());
        assert!(spec(None, Some(250), Some(0.5)).check_limits().is_ok());
        // How a dry run shows it.
        assert_eq!(
            spec(Some(5), None, None).describe(),
            "burn fpadd x1 5 ops pin=cores"
        );
        assert_eq!(
            spec(None, Some(250), Some(0.5)).describe(),
            "burn fpadd x1 250 ms pin=cores at 50% load"
        );
        let mut shared = spec(Some(4000), None, None);
        if let JobSpec::Burn { pool, .. } = &mut shared {
            *pool = EventPool::Shared;
        }
        assert_eq!(
            shared.describe(),
            "burn fpadd x1 4000 ops in a shared pool pin=cores"
        );
        // The default pool stays out of the JSON, as older agents read it.
        let json = |s: &JobSpec| serde_json::to_value(s).expect("a spec serializes");
        assert!(json(&spec(Some(5), None, None)).get("pool").is_none());
        assert_eq!(json(&shared)["pool"], "shared");
        assert_eq!(JobSpec::Idle.describe(), "idle");
    }
}
