//! `command` jobs: a program run without a shell, measured until it exits or in the
//! background until stopped.
//!
//! The agent starts the program (`argv[0]` resolved on the `PATH` to an absolute
//! path before the job is accepted) as the leader of a process group of its own,
//! with stdin from `/dev/null`, its working directory and its environment (the
//! agent's, with the job's `env` and [`tree::MARKER_VAR`] added), and a parent
//! death signal, so an agent that dies takes it along. Two threads read stdout and
//! stderr into bounded [`capture::Capture`]s; a third waits for the process and
//! stamps its exit by the monotonic clock (`wall_s` = exit - start). The job's
//! thread polls its stop flag, the timeout and the duration every [`POLL`].
//!
//! However the command ends (on its own, at its duration, at its timeout, on a stop
//! request or the job's deadline), its whole tree is stopped and reaped
//! ([`tree::Tree::stop`]: `SIGTERM`, then `SIGKILL` after
//! [`limits::COMMAND_STOP_GRACE`]), so nothing it started outlives the job.
//!
//! A measured command fails (the job's error, with the exit status and the stderr's
//! tail) when it exits with a non-zero status or by a signal, when it outlives its
//! `timeout_ms`, or when its metric cannot be read; a command stopped on request
//! (a background one) reports its final result, its value absent if it printed
//! none.

mod capture;
mod tree;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, Once};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nnb_format::{CommandTool, CommandValueSource};
use serde::Serialize;
use serde_json::Value;

use crate::job_table::JobShared;
use crate::jobs::{limits, CommandMetric, CommandSpec, OutputStream};
use capture::Capture;
use tree::Tree;

/// How often a running command's job checks its stop flag, timeout and duration.
const POLL: Duration = Duration::from_millis(20);

/// How long a job waits for its output's readers once its tree is stopped (a
/// process outside the tree that still holds a pipe would keep one open).
const READER_WAIT: Duration = Duration::from_secs(1);

/// How long a job waits for its command's exit once its tree was killed.
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// How long a preset's `TOOL --version` may take.
const VERSION_WAIT: Duration = Duration::from_secs(5);

/// Most bytes of a tool's `--version` read, and of its first line kept.
const VERSION_BYTES: u64 = 4096;
const VERSION_LINE: usize = 200;

/// Most bytes of the stderr's tail an error quotes.
const ERROR_TAIL: usize = 2048;

/// The `PATH` searched when neither the job's `env` nor the agent has one.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A checked command job, ready to run.
#[derive(Debug)]
pub(crate) struct CommandJob {
    spec: CommandSpec,
    /// `argv[0]` resolved: the absolute path of the program.
    program: PathBuf,
    /// The metric's regex, compiled.
    regex: Option<regex_lite::Regex>,
}

/// Checks `spec` against this agent: its program is on the `PATH` (or its absolute
/// path) and executable (a preset's tool: refused with the tool's name when it is
/// not installed), its `cwd` a directory.
pub(crate) fn prepare(spec: &CommandSpec) -> Result<CommandJob, String> {
    adopt_orphans();
    let program = resolve(spec)?;
    if let Some(cwd) = &spec.cwd {
        if !Path::new(cwd).is_dir() {
            return Err(format!("cwd = {cwd:?} is not a directory on this agent"));
        }
    }
    let regex = match &spec.metric {
        CommandMetric::Regex { pattern, .. } => Some(crate::jobs::command_regex(pattern)?),
        CommandMetric::Wall | CommandMetric::Json { .. } => None,
    };
    Ok(CommandJob {
        spec: spec.clone(),
        program,
        regex,
    })
}

/// Makes the agent a child subreaper, once: the orphans of its commands' trees are
/// re-parented to it, where their stop finds and reaps them.
fn adopt_orphans() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if let Err(e) = nnb_sys::process::set_child_subreaper() {
            tracing::warn!(
                "cannot become a child subreaper: a command's orphans re-parent to init: {e}"
            );
        }
    });
}

/// Whether `path` is a file someone may execute.
fn executable(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The absolute path of the job's program: `argv[0]` itself, or the first
/// executable of that name on the `PATH` (the job's `env` one, else the agent's).
fn resolve(spec: &CommandSpec) -> Result<PathBuf, String> {
    let name = &spec.argv[0];
    let missing = |where_: String| match spec.preset {
        Some(p) => {
            format!("preset \"{p}\": {p} is not installed on this agent ({name} is not {where_})")
        }
        None => format!("argv[0] = {name:?} is not {where_} on this agent"),
    };
    if name.starts_with('/') {
        let path = PathBuf::from(name);
        return if executable(&path) {
            Ok(path)
        } else {
            Err(missing("an executable file".into()))
        };
    }
    let search = spec
        .env
        .get("PATH")
        .cloned()
        .or_else(|| std::env::var("PATH").ok())
        .unwrap_or_else(|| DEFAULT_PATH.to_string());
    search
        .split(':')
        .filter(|dir| dir.starts_with('/'))
        .map(|dir| Path::new(dir).join(name))
        .find(|p| executable(p))
        .ok_or_else(|| missing(format!("on the PATH {search}")))
}

/// The first line `program --version` prints, bounded; none when it prints nothing
/// on stdout within [`VERSION_WAIT`].
fn tool_version(program: &Path) -> Option<String> {
    let mut child = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let out = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(out, VERSION_BYTES), &mut text)
            .map(|_| text)
    });
    let deadline = Instant::now() + VERSION_WAIT;
    while child.try_wait().ok()?.is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let text = reader.join().ok()?.ok()?;
    let text = String::from_utf8_lossy(&text);
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.chars().take(VERSION_LINE).collect())
}

/// How the command's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Its process exited on its own.
    Exited,
    /// A stop request, or the job's deadline.
    Stopped,
    /// Its `duration_ms` passed: a normal end.
    Duration,
    /// Its `timeout_ms` passed: a failure.
    TimedOut,
}

/// A `command` job's result (`docs/results-format.md`, version 11).
#[derive(Debug, Serialize)]
struct CommandResult {
    /// What ran.
    argv: Vec<String>,
    /// Its process's pid (its process group's id).
    pid: u32,
    /// Its exit code; none when a signal ended it.
    exit_code: Option<i32>,
    /// The signal that ended it.
    signal: Option<i32>,
    /// Start to exit, s, by the monotonic clock.
    wall_s: f64,
    /// Where `value` came from.
    source: CommandValueSource,
    /// The measured value; none when a stopped command printed none.
    value: Option<f64>,
    /// Its unit.
    unit: String,
    /// Its direction.
    higher_is_better: bool,
    /// Ended by a stop, its deadline or its duration rather than on its own.
    stopped: bool,
    /// Bytes it wrote to stdout.
    stdout_bytes: u64,
    /// Bytes it wrote to stderr.
    stderr_bytes: u64,
    /// Bytes of stdout kept neither in the head nor in the tail.
    stdout_dropped: u64,
    /// Bytes of stderr kept neither in the head nor in the tail.
    stderr_dropped: u64,
    /// The last bytes of stdout (at most [`limits::COMMAND_TAIL`]), as text.
    stdout_tail: String,
    /// The last bytes of stderr (at most [`limits::COMMAND_TAIL`]), as text.
    stderr_tail: String,
    /// The preset's tool and its version.
    tool: Option<CommandTool>,
    /// Processes of its tree signalled when it ended (its own included; 0 when it
    /// exited on its own leaving nothing behind).
    killed: usize,
    /// Of those, the ones that needed `SIGKILL` after the grace.
    sigkilled: usize,
}

/// A counter making each command job's marker unique within the agent.
static JOBS: AtomicU64 = AtomicU64::new(0);

/// A started command's output streams, by their readers.
struct Outputs {
    stdout: capture::Shared,
    stderr: capture::Shared,
    readers: Vec<JoinHandle<()>>,
}

impl CommandJob {
    /// Runs the command until it ends (see the module's documentation) and returns
    /// its result.
    pub(crate) fn run(self, shared: &JobShared) -> Result<Value, String> {
        let spec = &self.spec;
        let tool = spec.preset.map(|p| CommandTool {
            preset: p.name().to_string(),
            path: self.program.display().to_string(),
            version: tool_version(&self.program),
        });
        let marker = format!(
            "{}.{}",
            std::process::id(),
            JOBS.fetch_add(1, Ordering::Relaxed)
        );
        let mut cmd = Command::new(&self.program);
        cmd.arg0(&spec.argv[0])
            .args(&spec.argv[1..])
            .envs(&spec.env)
            .env(tree::MARKER_VAR, &marker)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some(cwd) = &spec.cwd {
            cmd.current_dir(cwd);
        }
        nnb_sys::process::kill_with_parent(&mut cmd);
        let start = Instant::now();
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", spec.argv[0]))?;
        let pid = child.id();
        let mut tree = Tree::new(pid, &marker);
        shared.publish(serde_json::json!({ "pid": pid }));
        let head = usize::try_from(spec.output_limit).unwrap_or(usize::MAX);
        let tail = head.min(limits::COMMAND_TAIL as usize);
        let stdout = Arc::new(Mutex::new(Capture::new(head, tail)));
        let stderr = Arc::new(Mutex::new(Capture::new(head, tail)));
        let mut readers = Vec::new();
        for (pipe, capture) in [
            (
                child
                    .stdout
                    .take()
                    .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
                &stdout,
            ),
            (
                child
                    .stderr
                    .take()
                    .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
                &stderr,
            ),
        ] {
            if let Some(pipe) = pipe {
                match capture::read_into(pipe, Arc::clone(capture)) {
                    Ok(handle) => readers.push(handle),
                    Err(e) => tracing::warn!("cannot read a command's output: {e}"),
                }
            }
        }
        let outputs = Outputs {
            stdout,
            stderr,
            readers,
        };
        let (exited, exit) = mpsc::channel();
        std::thread::Builder::new()
            .name("command-wait".into())
            .spawn(move || {
                let status = child.wait();
                let _ = exited.send((status, Instant::now()));
            })
            .map_err(|e| {
                tree.stop(limits::COMMAND_STOP_GRACE);
                format!("cannot start the thread that waits for the command: {e}")
            })?;
        let ms = |v: Option<u64>| v.map(Duration::from_millis);
        let (timeout, duration) = (ms(spec.timeout_ms), ms(spec.duration_ms));
        let mut exit_now = None;
        let end = loop {
            match exit.recv_timeout(POLL) {
                Ok(e) => {
                    exit_now = Some(e);
                    break End::Exited;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break End::Stopped,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            let ran = start.elapsed();
            if shared.should_stop() {
                break End::Stopped;
            }
            if timeout.is_some_and(|t| ran >= t) {
                break End::TimedOut;
            }
            if duration.is_some_and(|d| ran >= d) {
                break End::Duration;
            }
        };
        // Whatever ended it, nothing of its tree is left running.
        let stopped = tree.stop(limits::COMMAND_STOP_GRACE);
        let (status, at) = match exit_now {
            Some(e) => e,
            None => exit
                .recv_timeout(EXIT_WAIT)
                .map_err(|_| format!("{}: its process did not end", spec.describe()))?,
        };
        let status = status.map_err(|e| format!("cannot wait for {}: {e}", spec.argv[0]))?;
        let wall_s = at.duration_since(start).as_secs_f64();
        self.finish(end, status, wall_s, pid, stopped, outputs, tool)
    }

    /// The job's outcome once the command and its tree ended.
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &self,
        end: End,
        status: ExitStatus,
        wall_s: f64,
        pid: u32,
        stopped: tree::Stopped,
        outputs: Outputs,
        tool: Option<CommandTool>,
    ) -> Result<Value, String> {
        let spec = &self.spec;
        let waited = Instant::now() + READER_WAIT;
        for reader in &outputs.readers {
            while !reader.is_finished() && Instant::now() < waited {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let out = capture::lock(&outputs.stdout);
        let err = capture::lock(&outputs.stderr);
        let tail_of = |c: &Capture, n: usize| String::from_utf8_lossy(&c.last(n)).into_owned();
        let stderr_says = || {
            let t = tail_of(&err, ERROR_TAIL);
            match t.trim() {
                "" => "its stderr is empty".to_string(),
                t => format!("its stderr ends: {t}"),
            }
        };
        if end == End::TimedOut {
            return Err(format!(
                "{} timed out after {} ms and was stopped ({} processes); {}",
                spec.argv[0],
                spec.timeout_ms.unwrap_or_default(),
                stopped.signalled,
                stderr_says()
            ));
        }
        if end == End::Exited && !status.success() {
            let how = match (status.code(), status.signal()) {
                (Some(code), _) => format!("exited with status {code}"),
                (None, Some(sig)) => format!("was ended by signal {sig}"),
                (None, None) => format!("ended with {status}"),
            };
            return Err(format!("{} {how}; {}", spec.argv[0], stderr_says()));
        }
        let (source, unit, higher_is_better) = match &spec.metric {
            CommandMetric::Wall => (CommandValueSource::Wall, "s".to_string(), false),
            CommandMetric::Json {
                unit,
                higher_is_better,
                ..
            } => (CommandValueSource::Json, unit.clone(), *higher_is_better),
            CommandMetric::Regex {
                unit,
                higher_is_better,
                ..
            } => (CommandValueSource::Regex, unit.clone(), *higher_is_better),
        };
        let value = match self.value(wall_s, &out, &err) {
            Ok(v) => Some(v),
            // A background command stopped on request may not have printed it yet.
            Err(_) if end == End::Stopped => None,
            Err(e) => return Err(format!("{}: {e}", spec.argv[0])),
        };
        let result = CommandResult {
            argv: spec.argv.clone(),
            pid,
            exit_code: status.code(),
            signal: status.signal(),
            wall_s,
            source,
            value,
            unit,
            higher_is_better,
            stopped: end != End::Exited,
            stdout_bytes: out.total(),
            stderr_bytes: err.total(),
            stdout_dropped: out.dropped(),
            stderr_dropped: err.dropped(),
            stdout_tail: tail_of(&out, limits::COMMAND_TAIL as usize),
            stderr_tail: tail_of(&err, limits::COMMAND_TAIL as usize),
            tool,
            killed: stopped.signalled,
            sigkilled: stopped.killed,
        };
        serde_json::to_value(&result).map_err(|e| format!("cannot encode the result: {e}"))
    }

    /// The measured value: the wall time, or the number the metric reads from the
    /// stream's kept output.
    fn value(&self, wall_s: f64, out: &Capture, err: &Capture) -> Result<f64, String> {
        let (stream, read) = match &self.spec.metric {
            CommandMetric::Wall => return Ok(wall_s),
            CommandMetric::Json {
                pointer, stream, ..
            } => (*stream, Read::Json(pointer)),
            CommandMetric::Regex { stream, .. } => (*stream, Read::Regex),
        };
        let (c, name) = match stream {
            OutputStream::Stdout => (out, stream.name()),
            OutputStream::Stderr => (err, stream.name()),
        };
        match read {
            Read::Json(pointer) => {
                let whole = c.whole().ok_or_else(|| {
                    format!(
                        "its {name} ({} bytes) is longer than output_limit ({} bytes): \
                         its JSON was not kept whole; raise output_limit",
                        c.total(),
                        self.spec.output_limit
                    )
                })?;
                let doc: Value = serde_json::from_slice(whole)
                    .map_err(|e| format!("its {name} is not one JSON document: {e}"))?;
                let at = doc
                    .pointer(pointer)
                    .ok_or_else(|| format!("its {name}'s JSON has nothing at {pointer:?}"))?;
                let v = match at {
                    Value::Number(n) => n.as_f64(),
                    Value::String(s) => s.trim().parse::<f64>().ok(),
                    _ => None,
                };
                v.filter(|v| v.is_finite()).ok_or_else(|| {
                    format!("the value at {pointer:?} in its {name}'s JSON is not a number: {at}")
                })
            }
            Read::Regex => {
                let re = self
                    .regex
                    .as_ref()
                    .ok_or("the metric's regex was not compiled")?;
                let head = String::from_utf8_lossy(c.head());
                let tail = String::from_utf8_lossy(&c.tail()).into_owned();
                let group = [&head[..], &tail[..]]
                    .into_iter()
                    .find_map(|text| Some(re.captures(text)?.get(1)?.as_str().to_string()))
                    .ok_or_else(|| {
                        format!(
                            "the pattern {:?} matched nothing in its {name} ({} bytes, {} of them kept)",
                            re.as_str(),
                            c.total(),
                            c.total() - c.dropped()
                        )
                    })?;
                group
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .ok_or_else(|| {
                        format!("the pattern's first group matched {group:?} in its {name}: not a number")
                    })
            }
        }
    }
}

/// How a printed value is read.
enum Read<'a> {
    /// At this JSON pointer.
    Json(&'a str),
    /// By the job's regex.
    Regex,
}

#[cfg(test)]
mod tests;
