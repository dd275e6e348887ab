//! Memory load: worker processes that allocate memory and keep touching it, like
//! `stress-ng --vm N --vm-bytes X --vm-keep` (the memory neighbor of Volpert et al.),
//! or stream writes over it and report the bandwidth.
//!
//! Each worker is a child process ([`nnb_sys::toucher`]), not a thread: under a
//! tenant's cgroup memory limit the OOM killer picks the biggest process, which must
//! be a worker and not the agent running the job. A worker killed by `SIGKILL` (the
//! OOM killer, or anyone's `kill -9`) is counted and, while time remains, restarted,
//! as stress-ng does. The parent samples every worker's `VmRSS` from
//! `/proc/PID/status` every 20 ms: the peak, and when the workers together first
//! held 95% of the target. A worker's `VmRSS` includes the pages it still shares
//! with the parent it was forked from (a few MiB), so it slightly overstates the
//! worker's own memory.
//!
//! Every worker is killed and reaped before [`run`] returns, whether it ends at its
//! deadline, on the stop flag or with an error.

use std::fmt;
use std::io;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nnb_sys::clock::monotonic_ns;
use nnb_sys::toucher::{Exit, Toucher};
use nnb_units::format_bytes;
use serde::{Deserialize, Serialize};

/// The smallest load, and the smallest share of one worker: one page.
pub const MIN_BYTES: u64 = 4096;
/// The most worker processes one load may have.
pub const MAX_WORKERS: usize = 256;
/// How often the parent samples the workers' RSS and reaps the dead.
const SAMPLE_EVERY: Duration = Duration::from_millis(20);
/// The share of the target the workers' RSS must reach to count as reached.
const TARGET_SHARE: f64 = 0.95;
/// After the deadline, how long workers get to exit by themselves before they are
/// killed (they check their deadline about every millisecond).
const GRACE: Duration = Duration::from_secs(1);
/// Write one byte per page: every page resident and re-touched (`--vm-keep`).
const KEEP_STRIDE: usize = 4096;
/// Write one byte per cache line: streaming writes (bandwidth).
const BANDWIDTH_STRIDE: usize = 64;

/// What the workers do with their memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemMode {
    /// Allocate and keep re-touching every page (one write per 4 KiB page per pass),
    /// like `stress-ng --vm --vm-keep`: the memory stays resident and in use.
    Keep,
    /// Stream writes over the region (one write per 64-byte cache line per pass):
    /// `touched_bytes_per_s` is the write bandwidth.
    Bandwidth,
}

impl MemMode {
    /// Every mode's name, as parsed and printed.
    pub const NAMES: [&'static str; 2] = ["keep", "bandwidth"];

    /// Bytes between two writes.
    fn stride(self) -> usize {
        match self {
            MemMode::Keep => KEEP_STRIDE,
            MemMode::Bandwidth => BANDWIDTH_STRIDE,
        }
    }
}

impl fmt::Display for MemMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemMode::Keep => "keep",
            MemMode::Bandwidth => "bandwidth",
        })
    }
}

/// A memory mode name that is not one of [`MemMode::NAMES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown memory mode '{0}' (expected one of: keep, bandwidth)")]
pub struct UnknownMemMode(pub String);

impl FromStr for MemMode {
    type Err = UnknownMemMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "keep" => Ok(MemMode::Keep),
            "bandwidth" => Ok(MemMode::Bandwidth),
            _ => Err(UnknownMemMode(s.to_string())),
        }
    }
}

/// What to load: how much memory, how, in how many processes, for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemSpec {
    /// Bytes in all, split evenly among the workers.
    pub bytes: u64,
    /// What the workers do with their memory.
    pub mode: MemMode,
    /// Worker processes, each with `bytes / workers` (1..=[`MAX_WORKERS`]).
    pub workers: usize,
    /// How long the load runs (positive).
    pub duration: Duration,
}

/// A [`MemSpec`] that cannot be run on this machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Less than a page.
    #[error("a memory load of {} is less than one page ({MIN_BYTES} bytes)", bytes_text(*.0))]
    TooSmall(u64),
    /// More than the machine has.
    #[error(
        "a memory load of {} is more than this machine's memory (MemTotal in /proc/meminfo: {})",
        bytes_text(*.bytes), bytes_text(*.mem_total)
    )]
    TooLarge {
        /// Bytes asked for.
        bytes: u64,
        /// The machine's MemTotal.
        mem_total: u64,
    },
    /// Workers out of 1..=256.
    #[error("a memory load needs 1 to {MAX_WORKERS} workers, not {0}")]
    Workers(usize),
    /// Each worker would get less than a page.
    #[error(
        "{workers} workers would get {} each, less than one page ({MIN_BYTES} bytes): \
         use fewer workers or more memory",
        bytes_text(*.share)
    )]
    ShareTooSmall {
        /// Workers asked for.
        workers: usize,
        /// Bytes each would get.
        share: u64,
    },
    /// A zero duration.
    #[error("a memory load needs a positive duration")]
    ZeroDuration,
}

/// Sizes in messages: the exact byte count, with a binary-prefixed size beside it
/// when that says more.
fn bytes_text(bytes: u64) -> String {
    if bytes < 1024 {
        format!("{bytes} bytes")
    } else {
        format!("{} ({bytes} bytes)", format_bytes(bytes as f64))
    }
}

/// Why a memory load failed.
#[derive(Debug, thiserror::Error)]
pub enum MemError {
    /// The spec cannot be run here.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// `/proc/meminfo` could not be read or has no MemTotal.
    #[error("cannot read MemTotal from /proc/meminfo: {0}")]
    MemInfo(io::Error),
    /// A worker process could not be forked.
    #[error("cannot start a memory worker: {0}")]
    Spawn(io::Error),
    /// A worker could not be waited for or killed.
    #[error("cannot reap memory worker {pid}: {source}")]
    Reap {
        /// The worker's process id.
        pid: u32,
        /// What went wrong.
        source: io::Error,
    },
    /// A worker ended in a way that is not the end of its time nor an OOM kill.
    #[error("memory worker {pid} ({bytes} bytes) {exit}")]
    Worker {
        /// The worker's process id.
        pid: u32,
        /// Its share of the load.
        bytes: u64,
        /// How it ended.
        exit: Exit,
    },
}

impl MemError {
    /// Whether the error is the user's to fix (a spec this machine cannot run), not a
    /// failure while loading memory.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, MemError::Spec(_))
    }
}

/// What a memory load did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemReport {
    /// What the workers did with their memory.
    pub mode: MemMode,
    /// Worker processes (restarts not counted).
    pub workers: usize,
    /// Bytes asked for, all workers together.
    pub target_bytes: u64,
    /// The sum over workers of the highest `VmRSS` each was seen with (sampled every
    /// 20 ms; a restarted worker's peak is the highest of all its lives).
    pub peak_rss_bytes: u64,
    /// Seconds from the start until the workers' RSS together first reached 95% of
    /// the target; `None` if it never did (e.g. held down by a cgroup limit).
    pub time_to_target_s: Option<f64>,
    /// Workers killed by `SIGKILL`: the (cgroup's) OOM killer, or a `kill -9`.
    pub oom_kills: u64,
    /// Workers started again after such a kill.
    pub restarts: u64,
    /// Bytes of their regions the workers covered per second, all passes and workers
    /// together: the write bandwidth in [`MemMode::Bandwidth`].
    pub touched_bytes_per_s: f64,
    /// Seconds from the start until the last worker ended.
    pub elapsed_s: f64,
}

impl MemSpec {
    /// Checks the spec against a machine with `mem_total` bytes of memory.
    pub fn check(&self, mem_total: u64) -> Result<(), SpecError> {
        if self.bytes < MIN_BYTES {
            return Err(SpecError::TooSmall(self.bytes));
        }
        if self.bytes > mem_total {
            return Err(SpecError::TooLarge {
                bytes: self.bytes,
                mem_total,
            });
        }
        if !(1..=MAX_WORKERS).contains(&self.workers) {
            return Err(SpecError::Workers(self.workers));
        }
        let share = self.bytes / self.workers as u64;
        if share < MIN_BYTES {
            return Err(SpecError::ShareTooSmall {
                workers: self.workers,
                share,
            });
        }
        if self.duration.is_zero() {
            return Err(SpecError::ZeroDuration);
        }
        Ok(())
    }

    /// Each worker's bytes: the total split evenly, the remainder spread one byte each
    /// over the first workers.
    fn shares(&self) -> impl Iterator<Item = u64> {
        let n = self.workers as u64;
        let (each, rest) = (self.bytes / n, self.bytes % n);
        (0..n).map(move |i| each + u64::from(i < rest))
    }
}

/// This machine's memory: `MemTotal` from `/proc/meminfo`, in bytes.
pub fn mem_total_bytes() -> io::Result<u64> {
    let text = std::fs::read_to_string("/proc/meminfo")?;
    parse_mem_total(&text)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no MemTotal line"))
}

/// `MemTotal:  24683656 kB` in bytes.
fn parse_mem_total(meminfo: &str) -> Option<u64> {
    kib_field(meminfo, "MemTotal:")
}

/// The value of a `NAME:  N kB` line (as /proc/meminfo and /proc/PID/status have
/// them) in bytes.
fn kib_field(text: &str, name: &str) -> Option<u64> {
    let rest = text.lines().find_map(|l| l.strip_prefix(name))?;
    let mut words = rest.split_whitespace();
    let kib: u64 = words.next()?.parse().ok()?;
    if words.next() != Some("kB") {
        return None;
    }
    kib.checked_mul(1024)
}

/// A process's resident memory (`VmRSS`), None once it has exited.
fn vm_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    kib_field(&status, "VmRSS:")
}

/// One worker's place in the load: its share, its current process, what earlier
/// lives did.
struct Worker {
    bytes: u64,
    toucher: Option<Toucher>,
    peak_rss: u64,
    rss: u64,
    /// Bytes touched by earlier lives of this worker.
    touched_before: u64,
}

impl Worker {
    fn start(bytes: u64, mode: MemMode, deadline_ns: u64) -> Result<Worker, MemError> {
        let mut w = Worker {
            bytes,
            toucher: None,
            peak_rss: 0,
            rss: 0,
            touched_before: 0,
        };
        w.spawn(mode, deadline_ns)?;
        Ok(w)
    }

    fn spawn(&mut self, mode: MemMode, deadline_ns: u64) -> Result<(), MemError> {
        // Checked against MemTotal, so it fits this machine's address space.
        let bytes = usize::try_from(self.bytes).unwrap_or(usize::MAX);
        let t = Toucher::spawn(bytes, mode.stride(), deadline_ns).map_err(MemError::Spawn)?;
        tracing::debug!(pid = t.pid(), bytes, %mode, "memory worker started");
        self.toucher = Some(t);
        Ok(())
    }

    /// Reaps the worker if it has ended, returning how; its progress is kept.
    fn reap(&mut self) -> Result<Option<Exit>, MemError> {
        let Some(t) = &mut self.toucher else {
            return Ok(None);
        };
        let pid = t.pid();
        let Some(exit) = t
            .try_wait()
            .map_err(|source| MemError::Reap { pid, source })?
        else {
            return Ok(None);
        };
        tracing::debug!(pid, %exit, "memory worker ended");
        self.touched_before += t.progress().touched_bytes;
        self.toucher = None;
        self.rss = 0;
        match exit {
            Exit::Finished | Exit::Killed => Ok(Some(exit)),
            exit => Err(MemError::Worker {
                pid,
                bytes: self.bytes,
                exit,
            }),
        }
    }

    /// Samples the running worker's RSS.
    fn sample(&mut self) {
        self.rss = self
            .toucher
            .as_ref()
            .and_then(|t| vm_rss(t.pid()))
            .unwrap_or(0);
        self.peak_rss = self.peak_rss.max(self.rss);
    }

    /// Bytes touched by all of this worker's lives so far.
    fn touched(&self) -> u64 {
        let now = self
            .toucher
            .as_ref()
            .map_or(0, |t| t.progress().touched_bytes);
        self.touched_before + now
    }
}

/// Runs the memory load until its duration has passed or `stop` is raised, and
/// reports it. Every worker process is killed and reaped before this returns.
pub fn run(spec: &MemSpec, stop: &AtomicBool) -> Result<MemReport, MemError> {
    spec.check(mem_total_bytes().map_err(MemError::MemInfo)?)?;
    let duration_ns = u64::try_from(spec.duration.as_nanos()).unwrap_or(u64::MAX);
    let grace_ns = u64::try_from(GRACE.as_nanos()).unwrap_or(0);
    let start = monotonic_ns();
    let deadline = start.saturating_add(duration_ns);
    // On an error below, dropping `workers` kills and reaps every one.
    let mut workers = spec
        .shares()
        .map(|bytes| Worker::start(bytes, spec.mode, deadline))
        .collect::<Result<Vec<_>, _>>()?;
    let target = spec.bytes as f64 * TARGET_SHARE;
    let (mut oom_kills, mut restarts, mut time_to_target) = (0u64, 0u64, None);
    let end = loop {
        std::thread::sleep(SAMPLE_EVERY);
        let now = monotonic_ns();
        for w in &mut workers {
            if w.reap()? == Some(Exit::Killed) {
                oom_kills += 1;
                if now < deadline {
                    w.spawn(spec.mode, deadline)?;
                    restarts += 1;
                }
            }
            w.sample();
        }
        let rss: u64 = workers.iter().map(|w| w.rss).sum();
        if time_to_target.is_none() && rss as f64 >= target {
            time_to_target = Some(secs(now - start));
        }
        let running = workers.iter().any(|w| w.toucher.is_some());
        if !running || stop.load(Ordering::Relaxed) || now >= deadline.saturating_add(grace_ns) {
            break now;
        }
    };
    for w in &mut workers {
        if let Some(t) = &mut w.toucher {
            let pid = t.pid();
            t.kill().map_err(|source| MemError::Reap { pid, source })?;
        }
    }
    let elapsed_s = secs(end - start);
    let touched: u64 = workers.iter().map(Worker::touched).sum();
    Ok(MemReport {
        mode: spec.mode,
        workers: spec.workers,
        target_bytes: spec.bytes,
        peak_rss_bytes: workers.iter().map(|w| w.peak_rss).sum(),
        time_to_target_s: time_to_target,
        oom_kills,
        restarts,
        touched_bytes_per_s: if elapsed_s > 0.0 {
            touched as f64 / elapsed_s
        } else {
            0.0
        },
        elapsed_s,
    })
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn spec(bytes: u64, workers: usize) -> MemSpec {
        MemSpec {
            bytes,
            mode: MemMode::Keep,
            workers,
            duration: Duration::from_secs(1),
        }
    }

    #[test]
    fn modes_parse_and_print() {
        assert_eq!("keep".parse(), Ok(MemMode::Keep));
        assert_eq!(" Bandwidth ".parse(), Ok(MemMode::Bandwidth));
        for name in MemMode::NAMES {
            assert_eq!(name.parse::<MemMode>().unwrap().to_string(), name);
        }
        let err = "stream".parse::<MemMode>().unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown memory mode 'stream' (expected one of: keep, bandwidth)"
        );
        assert_eq!(
            serde_json::to_value(MemMode::Bandwidth).unwrap(),
            "bandwidth"
        );
    }

    #[test]
    fn a_spec_is_checked_against_the_machine() {
        assert_eq!(spec(4096, 1).check(GIB), Ok(()));
        assert_eq!(spec(GIB, 256).check(GIB), Ok(()));
        assert_eq!(spec(4095, 1).check(GIB), Err(SpecError::TooSmall(4095)));
        assert_eq!(
            spec(GIB + 1, 1).check(GIB),
            Err(SpecError::TooLarge {
                bytes: GIB + 1,
                mem_total: GIB
            })
        );
        assert_eq!(spec(GIB, 0).check(GIB), Err(SpecError::Workers(0)));
        assert_eq!(spec(GIB, 257).check(GIB), Err(SpecError::Workers(257)));
        // 8 KiB in 3 workers: 2730 bytes each, under a page.
        assert_eq!(
            spec(8192, 3).check(GIB),
            Err(SpecError::ShareTooSmall {
                workers: 3,
                share: 2730
            })
        );
        let zero = MemSpec {
            duration: Duration::ZERO,
            ..spec(GIB, 1)
        };
        assert_eq!(zero.check(GIB), Err(SpecError::ZeroDuration));
    }

    #[test]
    fn errors_name_sizes_and_memtotal() {
        assert_eq!(
            SpecError::TooSmall(1024).to_string(),
            "a memory load of 1.0 KiB (1024 bytes) is less than one page (4096 bytes)"
        );
        let too_large = SpecError::TooLarge {
            bytes: 2 * GIB,
            mem_total: GIB,
        };
        assert_eq!(
            too_large.to_string(),
            "a memory load of 2.0 GiB (2147483648 bytes) is more than this machine's \
             memory (MemTotal in /proc/meminfo: 1.0 GiB (1073741824 bytes))"
        );
    }

    /// 10 bytes over 4 workers: 3, 3, 2, 2 (the remainder goes one byte each to the
    /// first), 10 in all.
    #[test]
    fn shares_split_the_total() {
        let shares: Vec<u64> = spec(10, 4).shares().collect();
        assert_eq!(shares, [3, 3, 2, 2]);
        let shares: Vec<u64> = spec(GIB, 3).shares().collect();
        assert_eq!(shares.iter().sum::<u64>(), GIB);
    }

    #[test]
    fn meminfo_and_status_lines_parse() {
        let meminfo = "MemTotal:       24683656 kB\nMemFree:         1000 kB\n";
        assert_eq!(parse_mem_total(meminfo), Some(24_683_656 * 1024));
        assert_eq!(parse_mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(parse_mem_total("MemTotal: 12 MB\n"), None);
        let status = "Name:\tnnb-memload\nVmRSS:\t   65812 kB\n";
        assert_eq!(kib_field(status, "VmRSS:"), Some(65_812 * 1024));
        // This process has a MemTotal and a VmRSS.
        assert!(mem_total_bytes().unwrap() > 0);
        assert!(vm_rss(std::process::id()).unwrap() > 0);
    }
}
