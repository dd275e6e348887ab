//! Disk load: a paced random read/write generator, nnb's `fio --rw=randrw
//! --rate_iops=N --direct=1`, for the disk neighbor of seed 004 (Volpert et al.: a
//! set IOPS, a read/write ratio, direct I/O so the page cache absorbs nothing).
//!
//! The generator writes its own scratch file in the directory it is given
//! (`nnb-disk-<pid>-<n>.dat`), filled with written data (not sparse, so reads reach
//! the device), holds an advisory lock on it while it runs, and removes it when it
//! ends, whether it ends normally, on error or on a stop. A generator killed with
//! `-9` cannot; [`sweep_stale`] removes what it left, and every run sweeps its
//! directory first.
//!
//! `queue_depth` worker threads each have one operation in flight (`pread` or
//! `pwrite` of one block at a random aligned offset; a read with probability
//! `read_fraction`). With a target rate the schedule is global and open-loop:
//! operation `k` is due at `t0 + k / iops`, workers claim the next `k` from a shared
//! counter and wait for its time, and a worker that is behind issues at once; how
//! late each operation started against its schedule is recorded, so a disk that
//! cannot keep up shows as lateness and a lower achieved rate, not as a silently
//! slower schedule. No new operation starts after the duration.
//!
//! Latency is the time of one `pread`/`pwrite` call (fio's completion latency for a
//! synchronous engine). Distributions are kept per worker in HDR histograms with two
//! significant digits (percentiles within 1%, finer than fio's own latency buckets;
//! 30 KiB each, so 256 workers stay small); means and maxima are exact.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use nnb_sys::owned::Untrusted;
use serde::{Deserialize, Serialize};

/// Smallest block: the classic sector, the alignment `O_DIRECT` needs at least.
pub const MIN_BLOCK_SIZE: usize = 512;
/// Largest block (fio allows more; nothing a disk neighbor needs).
pub const MAX_BLOCK_SIZE: usize = 16 << 20;
/// Most worker threads (operations in flight).
pub const MAX_QUEUE_DEPTH: usize = 256;
/// Most memory for the workers' buffers together (`queue_depth * block_size`).
pub const MAX_BUFFER_BYTES: usize = 256 << 20;
/// Highest target rate: far beyond any device, low enough that a schedule's time
/// stays exact in nanoseconds.
pub const MAX_IOPS: f64 = 10_000_000.0;
/// Alignment of every I/O buffer: a page, which satisfies `O_DIRECT` on any device.
pub const BUFFER_ALIGN: usize = 4096;
/// An operation that starts more than this after its scheduled time counts as late
/// ([`Pacing::late_ops`]).
pub const LATE_AFTER: Duration = Duration::from_millis(1);
/// Longest sleep between two looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(5);
/// The schedule starts this long after the workers are spawned, so the first
/// operations are not late only because their threads were still starting.
const START_LEAD: Duration = Duration::from_millis(5);
/// Bytes written per call while filling the file (at least one block).
const FILL_CHUNK: usize = 1 << 20;
/// Seed of the offsets and read/write choices: fixed, so runs repeat the same
/// sequence, as fio's `randrepeat=1` default does.
const SEED: u64 = 0x6e6e_622d_6469_736b;
/// Scratch file names: `nnb-disk-<pid>-<n>.dat`.
const FILE_PREFIX: &str = "nnb-disk-";
const FILE_SUFFIX: &str = ".dat";
/// Largest latency or lateness the histograms hold (larger values count as this).
const HIST_MAX_NS: u64 = 60_000_000_000;

/// What the generator does.
#[derive(Debug, Clone, PartialEq)]
pub struct DiskSpec {
    /// Directory for the scratch file: on the disk to load.
    pub dir: PathBuf,
    /// Bytes of the scratch file, a whole number of blocks; the random offsets span it.
    pub file_size: u64,
    /// Bytes per operation: a power of two from [`MIN_BLOCK_SIZE`] to [`MAX_BLOCK_SIZE`].
    pub block_size: usize,
    /// Target operations per second, reads and writes together; None: as fast as the
    /// workers can.
    pub iops: Option<f64>,
    /// Share of the operations that are reads, 0 to 1.
    pub read_fraction: f64,
    /// Worker threads, each with one operation in flight (1 to [`MAX_QUEUE_DEPTH`]).
    pub queue_depth: usize,
    /// Open the file with `O_DIRECT`, past the page cache.
    pub direct: bool,
    /// How long to issue operations.
    pub duration: Duration,
}

impl DiskSpec {
    /// Checks the settings without touching the filesystem (the directory, its free
    /// space and direct I/O are checked by [`run`]).
    pub fn validate(&self) -> Result<(), DiskError> {
        let bad = |m: String| Err(DiskError::Invalid(m));
        let bs = self.block_size;
        if !bs.is_power_of_two() || !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&bs) {
            return bad(format!(
                "block size {bs} must be a power of two from {MIN_BLOCK_SIZE} to {MAX_BLOCK_SIZE} \
                 bytes (e.g. 4096), as direct I/O needs aligned blocks"
            ));
        }
        if self.file_size < bs as u64 {
            return bad(format!(
                "file size {} is smaller than one {bs}-byte block",
                self.file_size
            ));
        }
        if self.file_size % bs as u64 != 0 {
            return bad(format!(
                "file size {} is not a whole number of {bs}-byte blocks",
                self.file_size
            ));
        }
        if !(1..=MAX_QUEUE_DEPTH).contains(&self.queue_depth) {
            return bad(format!(
                "queue depth {} must be from 1 to {MAX_QUEUE_DEPTH} (one thread each)",
                self.queue_depth
            ));
        }
        if self.queue_depth.saturating_mul(bs) > MAX_BUFFER_BYTES {
            return bad(format!(
                "queue depth {} x {bs}-byte blocks needs more than the {} MiB of buffers \
                 allowed: lower one of them",
                self.queue_depth,
                MAX_BUFFER_BYTES >> 20
            ));
        }
        if let Some(iops) = self.iops {
            if !(iops.is_finite() && iops > 0.0) {
                return bad(format!("target IOPS {iops} must be a number above zero"));
            }
            if iops > MAX_IOPS {
                return bad(format!(
                    "target IOPS {iops} is beyond the {MAX_IOPS} the generator paces"
                ));
            }
        }
        if !(0.0..=1.0).contains(&self.read_fraction) {
            return bad(format!(
                "read fraction {} must be from 0 (all writes) to 1 (all reads)",
                self.read_fraction
            ));
        }
        if self.duration.is_zero() {
            return bad("the duration must be above zero".into());
        }
        if self.duration > nnb_units::MAX_DURATION {
            return bad(format!(
                "the duration {:?} is longer than the {:?} nnb accepts",
                self.duration,
                nnb_units::MAX_DURATION
            ));
        }
        Ok(())
    }

    /// Blocks in the file: the random offsets are `0..blocks` times the block size.
    fn blocks(&self) -> u64 {
        self.file_size / self.block_size as u64
    }
}

/// Why the generator could not run or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    /// The settings are unusable.
    #[error("invalid disk load settings: {0}")]
    Invalid(String),
    /// The directory is not one.
    #[error("{0} is not a directory: the scratch file goes into a directory on the disk to load")]
    NotADirectory(PathBuf),
    /// The file would not fit.
    #[error(
        "{dir} has {free} bytes free, less than the {needed}-byte scratch file: \
         pick a smaller size or another directory"
    )]
    NoSpace {
        /// The directory.
        dir: PathBuf,
        /// Bytes the file needs.
        needed: u64,
        /// Bytes free there.
        free: u64,
    },
    /// The filesystem refuses `O_DIRECT`.
    #[error(
        "O_DIRECT is not supported by the filesystem of {dir} ({fs}): pick a directory on a \
         disk, or turn direct I/O off"
    )]
    DirectUnsupported {
        /// The directory.
        dir: PathBuf,
        /// The filesystem's name, or its magic number.
        fs: String,
    },
    /// The filesystem keeps files in memory: direct I/O there loads no disk.
    #[error(
        "{dir} is on {fs}, which keeps its files in memory: direct I/O there reaches no disk; \
         pick a directory on a disk"
    )]
    InMemory {
        /// The directory.
        dir: PathBuf,
        /// The filesystem's name.
        fs: String,
    },
    /// Direct I/O of blocks this small is refused by the device.
    #[error(
        "direct I/O of {block_size}-byte blocks on {path} was refused (EINVAL): the device's \
         sector is probably larger; use a larger block size"
    )]
    DirectAlignment {
        /// The scratch file.
        path: PathBuf,
        /// The block size asked for.
        block_size: usize,
    },
    /// A file operation failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
    /// A histogram could not be built (a bound hdrhistogram rejects).
    #[error("histogram: {0}")]
    Histogram(String),
    /// A worker thread could not be started or panicked.
    #[error("disk worker {0} failed to start or panicked")]
    Worker(usize),
}

impl DiskError {
    /// Whether the error is the user's to fix (settings, directory, filesystem),
    /// not a failure while measuring.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            DiskError::Invalid(_)
                | DiskError::NotADirectory(_)
                | DiskError::NoSpace { .. }
                | DiskError::DirectUnsupported { .. }
                | DiskError::InMemory { .. }
                | DiskError::DirectAlignment { .. }
        )
    }
}

/// A latency distribution, in nanoseconds as every latency of nnb (format version 6;
/// microseconds, `mean_us` ..., before).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Exact mean.
    pub mean_ns: f64,
    /// Median (within 1%).
    pub p50_ns: u64,
    /// 99th percentile (within 1%).
    pub p99_ns: u64,
    /// Exact maximum.
    pub max_ns: u64,
}

/// How late operations started against their schedule (paced runs only), in
/// nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pacing {
    /// Median lateness (within 1%).
    pub p50_ns: u64,
    /// 99th percentile (within 1%).
    pub p99_ns: u64,
    /// Exact maximum.
    pub max_ns: u64,
    /// Operations that started more than [`LATE_AFTER`] (1 ms) after their time.
    pub late_ops: u64,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskReport {
    /// The target rate, reads and writes together; None when unpaced.
    pub target_iops: Option<f64>,
    /// Operations completed.
    pub ops: u64,
    /// Reads completed.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Bytes read and written.
    pub bytes: u64,
    /// Seconds from the schedule's start to the end of the run (the duration, unless
    /// stopped early or the last operation ended after it).
    pub elapsed_s: f64,
    /// Achieved operations per second: `ops / elapsed_s`.
    pub iops: f64,
    /// Achieved reads per second.
    pub read_iops: f64,
    /// Achieved writes per second.
    pub write_iops: f64,
    /// Achieved bandwidth in bits per second (as every `_bps` of nnb; bytes per
    /// second are an eighth of it).
    pub bandwidth_bps: f64,
    /// Latency of all operations; None when none completed.
    pub latency: Option<Latency>,
    /// Latency of the reads; None when none completed.
    pub read_latency: Option<Latency>,
    /// Latency of the writes; None when none completed.
    pub write_latency: Option<Latency>,
    /// Lateness against the schedule; None when unpaced.
    pub pacing: Option<Pacing>,
    /// The scratch file (removed by now).
    pub file: PathBuf,
    /// Whether the file was opened with `O_DIRECT`.
    pub direct: bool,
    /// Bytes of the scratch file.
    pub file_size: u64,
    /// Bytes per operation.
    pub block_size: usize,
    /// Worker threads.
    pub queue_depth: usize,
    /// Share of reads asked for.
    pub read_fraction: f64,
    /// Seconds spent writing the file before the measurement.
    pub fill_s: f64,
    /// Whether the stop flag ended the run before its duration.
    pub stopped: bool,
}

/// Runs the generator for `spec.duration` (or until `stop` is raised: within about
/// 5 ms, and between two chunks of the fill) and reports what it did. The scratch
/// file is removed before this returns, whatever the outcome.
pub fn run(spec: &DiskSpec, stop: &AtomicBool) -> Result<DiskReport, DiskError> {
    spec.validate()?;
    let fs = check_dir(spec)?;
    match sweep_stale(&spec.dir) {
        Ok(0) => {}
        Ok(n) => tracing::warn!(
            "removed {n} scratch file(s) that killed nnb disk generators left in {}",
            spec.dir.display()
        ),
        Err(e) => tracing::warn!("cannot sweep {} for stale files: {e}", spec.dir.display()),
    }
    let scratch = Scratch::create(spec, &fs)?;
    let fill_start = Instant::now();
    scratch.fill(spec, stop)?;
    let fill_s = fill_start.elapsed().as_secs_f64();
    tracing::debug!(
        "filled {} ({} bytes) in {fill_s:.2} s",
        scratch.path.display(),
        spec.file_size
    );
    let Measured {
        tally: m,
        elapsed,
        stopped,
    } = measure(spec, &scratch, stop)?;
    let elapsed_s = elapsed.as_secs_f64();
    let per_s = |n: u64| {
        if elapsed_s > 0.0 {
            n as f64 / elapsed_s
        } else {
            0.0
        }
    };
    let ops = m.reads + m.writes;
    let bytes = ops * spec.block_size as u64;
    let mut all = m.read.clone();
    all.add(&m.write)?;
    Ok(DiskReport {
        target_iops: spec.iops,
        ops,
        reads: m.reads,
        writes: m.writes,
        bytes,
        elapsed_s,
        iops: per_s(ops),
        read_iops: per_s(m.reads),
        write_iops: per_s(m.writes),
        bandwidth_bps: per_s(bytes) * 8.0,
        latency: all.latency(),
        read_latency: m.read.latency(),
        write_latency: m.write.latency(),
        pacing: spec.iops.map(|_| {
            let late = m.lateness.latency();
            Pacing {
                p50_ns: late.map_or(0, |l| l.p50_ns),
                p99_ns: late.map_or(0, |l| l.p99_ns),
                max_ns: late.map_or(0, |l| l.max_ns),
                late_ops: m.late_ops,
            }
        }),
        file: scratch.path.clone(),
        direct: spec.direct,
        file_size: spec.file_size,
        block_size: spec.block_size,
        queue_depth: spec.queue_depth,
        read_fraction: spec.read_fraction,
        fill_s,
        stopped,
    })
}

/// Removes the scratch files that generators killed with `-9` left in `dir`: those
/// named `nnb-disk-<pid>-<n>.dat` whose pid is not a live process and whose lock
/// nobody holds (a live generator in another pid namespace holds its file's lock).
/// Only regular files of this user's (or of the directory's owner) are touched,
/// opened without following links or blocking ([`nnb_sys::owned::open_own`]): a
/// FIFO, a device, a link or another user's file planted under such a name is left
/// and logged, never opened. Returns how many it removed; a file it cannot remove is
/// logged and left.
pub fn sweep_stale(dir: &Path) -> io::Result<usize> {
    let own = std::process::id();
    let mut removed = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(owner_pid) else {
            continue;
        };
        if pid == own || nnb_sys::process::process_exists(pid) {
            continue;
        }
        let path = entry.path();
        match remove_if_unlocked(&path) {
            Ok(true) => removed += 1,
            Ok(false) => {}
            Err(e) if e.is_not_found() => {}
            Err(e @ Untrusted::Io { .. }) => {
                tracing::warn!("cannot remove stale {}: {e}", path.display())
            }
            Err(e) => tracing::warn!("left {}: not a scratch file of nnb's: {e}", path.display()),
        }
    }
    Ok(removed)
}

/// The owner pid of a scratch file name `nnb-disk-<pid>-<n>.dat`, None for any
/// other name.
fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(FILE_PREFIX)?.strip_suffix(FILE_SUFFIX)?;
    let (pid, n) = rest.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(n) {
        return None;
    }
    pid.parse().ok().filter(|_| digits(pid))
}

/// Removes `path`, a file of this user's, unless another open file holds its lock;
/// true when removed.
fn remove_if_unlocked(path: &Path) -> Result<bool, Untrusted> {
    let io = |what| {
        move |source| Untrusted::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    };
    let file = nnb_sys::owned::open_own(path, false)?;
    if !nnb_sys::file::try_lock_exclusive(&file).map_err(io("cannot lock"))? {
        return Ok(false);
    }
    std::fs::remove_file(path).map_err(io("cannot remove"))?;
    Ok(true)
}

/// Checks the directory: it is one, the file fits, and direct I/O there would
/// reach a disk. Returns what `statfs` says of it.
fn check_dir(spec: &DiskSpec) -> Result<nnb_sys::file::FsStats, DiskError> {
    if !spec.dir.is_dir() {
        return Err(DiskError::NotADirectory(spec.dir.clone()));
    }
    let fs = nnb_sys::file::fs_stats(&spec.dir).map_err(|source| DiskError::Io {
        what: "cannot read the filesystem of",
        path: spec.dir.clone(),
        source,
    })?;
    if spec.direct && fs.in_memory() {
        return Err(DiskError::InMemory {
            dir: spec.dir.clone(),
            fs: fs_name(&fs),
        });
    }
    if spec.file_size > fs.free_bytes {
        return Err(DiskError::NoSpace {
            dir: spec.dir.clone(),
            needed: spec.file_size,
            free: fs.free_bytes,
        });
    }
    Ok(fs)
}

/// The filesystem's name, or its magic number in hex.
fn fs_name(fs: &nnb_sys::file::FsStats) -> String {
    fs.name().map_or_else(
        || format!("filesystem type {:#x}", fs.magic),
        str::to_string,
    )
}

/// Most scratch file names one generator tries before it gives up (each taken by
/// a file that was there before).
const MAX_NAME_TRIES: u32 = 1000;

/// Scratch files this process made so far: the `<n>` of their names.
static SCRATCH_FILES: AtomicU64 = AtomicU64::new(0);

/// The generator's own file, locked while open and removed when dropped.
struct Scratch {
    path: PathBuf,
    file: File,
}

impl Scratch {
    /// Creates and locks `nnb-disk-<pid>-<n>.dat` in the spec's directory, with the
    /// next `n` whose name is free: another user of a shared directory can take the
    /// names this process would use (reliability review NM10). Gives up after
    /// [`MAX_NAME_TRIES`] taken names.
    fn create(spec: &DiskSpec, fs: &nnb_sys::file::FsStats) -> Result<Scratch, DiskError> {
        let mut tries = 0;
        let (path, created) = loop {
            let n = SCRATCH_FILES.fetch_add(1, Ordering::Relaxed);
            let name = format!("{FILE_PREFIX}{}-{n}{FILE_SUFFIX}", std::process::id());
            let path = spec.dir.join(name);
            // O_EXCL: whatever holds the name (a file, a FIFO, a link) is never opened.
            match nnb_sys::file::create_new_rw(&path, spec.direct) {
                Err(e)
                    if e.kind() == io::ErrorKind::AlreadyExists && tries + 1 < MAX_NAME_TRIES =>
                {
                    tries += 1;
                }
                created => break (path, created),
            }
        };
        if tries > 0 {
            tracing::warn!(
                "{tries} scratch file name(s) of this process were taken in {}: someone \
                 created them beforehand",
                spec.dir.display()
            );
        }
        let file = match created {
            Ok(f) => f,
            Err(e) if spec.direct && nnb_sys::file::is_invalid_argument(&e) => {
                // Some kernels create the file before they refuse O_DIRECT on it.
                let _ = std::fs::remove_file(&path);
                return Err(DiskError::DirectUnsupported {
                    dir: spec.dir.clone(),
                    fs: fs_name(fs),
                });
            }
            Err(source) => {
                return Err(DiskError::Io {
                    what: "cannot create",
                    path,
                    source,
                })
            }
        };
        let scratch = Scratch { path, file };
        // Taken at once: the file is new and nobody else opened it.
        nnb_sys::file::try_lock_exclusive(&scratch.file)
            .map_err(|e| scratch.io("cannot lock", e))?;
        Ok(scratch)
    }

    /// Writes the whole file with pseudo-random data (so it is allocated, not sparse,
    /// and no device can compress it away), syncs it, and drops its cached pages so
    /// buffered reads too start from the device. Ends early when `stop` is raised.
    fn fill(&self, spec: &DiskSpec, stop: &AtomicBool) -> Result<(), DiskError> {
        let chunk = FILL_CHUNK.max(spec.block_size);
        let mut buf = AlignedBuf::new(chunk);
        let mut rng = Rng::new(SEED);
        let mut offset = 0u64;
        while offset < spec.file_size && !stop.load(Ordering::Relaxed) {
            // A whole number of blocks: the file size is one, and so is `chunk`.
            let len = chunk.min(usize::try_from(spec.file_size - offset).unwrap_or(chunk));
            let data = &mut buf.as_mut_slice()[..len];
            rng.fill(data);
            self.file
                .write_all_at(data, offset)
                .map_err(|e| self.op_error(spec, "cannot fill", e))?;
            offset += len as u64;
        }
        self.file
            .sync_data()
            .map_err(|e| self.io("cannot sync", e))?;
        if let Err(e) = nnb_sys::file::drop_cached_pages(&self.file) {
            tracing::debug!(
                "cannot drop the cached pages of {}: {e}",
                self.path.display()
            );
        }
        Ok(())
    }

    fn io(&self, what: &'static str, source: io::Error) -> DiskError {
        DiskError::Io {
            what,
            path: self.path.clone(),
            source,
        }
    }

    /// The error of a read or write: EINVAL under direct I/O is a block the device
    /// will not take.
    fn op_error(&self, spec: &DiskSpec, what: &'static str, e: io::Error) -> DiskError {
        if spec.direct && nnb_sys::file::is_invalid_argument(&e) {
            DiskError::DirectAlignment {
                path: self.path.clone(),
                block_size: spec.block_size,
            }
        } else {
            self.io(what, e)
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            tracing::warn!(
                "cannot remove the scratch file {}: {e}",
                self.path.display()
            );
        }
    }
}

/// The global schedule: operation `k` is due `k / iops` seconds after the start,
/// for as long as that is before the end of the duration.
#[derive(Debug, Clone, Copy)]
struct Schedule {
    iops: Option<f64>,
    duration_ns: u64,
}

impl Schedule {
    fn new(spec: &DiskSpec) -> Self {
        Schedule {
            iops: spec.iops,
            duration_ns: u64::try_from(spec.duration.as_nanos()).unwrap_or(u64::MAX),
        }
    }

    /// Nanoseconds after the start at which operation `k` is due; None when it falls
    /// at or after the end. Unpaced, every operation is due at once (0).
    fn due_ns(&self, k: u64) -> Option<u64> {
        let Some(iops) = self.iops else {
            return Some(0);
        };
        // k * 1e9 is exact below 2^53 (k below 9e6); one rounding in the division.
        let due = k as f64 * 1e9 / iops;
        (due < self.duration_ns as f64).then_some(due as u64)
    }
}

/// splitmix64 (Steele, Lea and Flood; Vigna's reference code): tiny, fast, and every
/// seed gives a full-period sequence, so each worker seeds its own from its index.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; the bias is below n / 2^64).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`, 53 random bits.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// One operation: a read or a write of one block at a byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Op {
    read: bool,
    offset: u64,
}

/// A worker's sequence of operations: uniform random blocks of the file, reads with
/// probability `read_fraction`.
#[derive(Debug, Clone)]
struct OpStream {
    rng: Rng,
    blocks: u64,
    block_size: u64,
    read_fraction: f64,
}

impl OpStream {
    fn new(spec: &DiskSpec, worker: usize) -> Self {
        OpStream {
            rng: Rng::new(SEED ^ (worker as u64).wrapping_mul(0xA076_1D64_78BD_642F)),
            blocks: spec.blocks(),
            block_size: spec.block_size as u64,
            read_fraction: spec.read_fraction,
        }
    }

    fn next_op(&mut self) -> Op {
        let offset = self.rng.below(self.blocks) * self.block_size;
        // unit() < 1 always: a fraction of 1 reads only, 0 writes only.
        let read = self.rng.unit() < self.read_fraction;
        Op { read, offset }
    }
}

/// A byte buffer whose start is aligned to [`BUFFER_ALIGN`], as `O_DIRECT` needs: a
/// vector one alignment longer, used from its first aligned byte (it never grows, so
/// it never moves).
struct AlignedBuf {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    fn new(len: usize) -> Self {
        let storage = vec![0u8; len + BUFFER_ALIGN];
        let addr = storage.as_ptr() as usize;
        let start = (BUFFER_ALIGN - addr % BUFFER_ALIGN) % BUFFER_ALIGN;
        AlignedBuf {
            storage,
            start,
            len,
        }
    }

    fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

/// A distribution in nanoseconds: an HDR histogram (two significant digits) with the
/// exact sum and maximum beside it.
#[derive(Debug, Clone)]
struct Dist {
    hist: Histogram<u64>,
    sum_ns: u128,
    max_ns: u64,
}

impl Dist {
    fn new() -> Result<Self, DiskError> {
        Ok(Dist {
            hist: Histogram::new_with_bounds(1, HIST_MAX_NS, 2)
                .map_err(|e| DiskError::Histogram(e.to_string()))?,
            sum_ns: 0,
            max_ns: 0,
        })
    }

    fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.hist.saturating_record(ns);
        self.sum_ns += u128::from(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    fn add(&mut self, other: &Dist) -> Result<(), DiskError> {
        self.hist
            .add(&other.hist)
            .map_err(|e| DiskError::Histogram(format!("{e:?}")))?;
        self.sum_ns += other.sum_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
        Ok(())
    }

    fn latency(&self) -> Option<Latency> {
        let n = self.hist.len();
        (n > 0).then(|| Latency {
            mean_ns: self.sum_ns as f64 / n as f64,
            p50_ns: self.hist.value_at_quantile(0.5),
            p99_ns: self.hist.value_at_quantile(0.99),
            max_ns: self.max_ns,
        })
    }
}

/// What one worker measured, or all of them together.
struct Tally {
    reads: u64,
    writes: u64,
    read: Dist,
    write: Dist,
    lateness: Dist,
    late_ops: u64,
}

impl Tally {
    fn new() -> Result<Self, DiskError> {
        Ok(Tally {
            reads: 0,
            writes: 0,
            read: Dist::new()?,
            write: Dist::new()?,
            lateness: Dist::new()?,
            late_ops: 0,
        })
    }

    fn add(&mut self, other: &Tally) -> Result<(), DiskError> {
        self.reads += other.reads;
        self.writes += other.writes;
        self.read.add(&other.read)?;
        self.write.add(&other.write)?;
        self.lateness.add(&other.lateness)?;
        self.late_ops += other.late_ops;
        Ok(())
    }
}

/// What the workers measured together, and how long they ran.
struct Measured {
    tally: Tally,
    elapsed: Duration,
    stopped: bool,
}

/// What the workers share.
struct Shared<'a> {
    spec: &'a DiskSpec,
    scratch: &'a Scratch,
    schedule: Schedule,
    t0: Instant,
    end: Instant,
    next: AtomicU64,
    stop: &'a AtomicBool,
    /// Raised by a worker that failed, so the others end too.
    failed: AtomicBool,
}

impl Shared<'_> {
    fn halted(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.failed.load(Ordering::Relaxed)
    }

    /// Sleeps until `t`, looking at the stop flags every [`STOP_POLL`]; false when
    /// they were raised.
    fn sleep_until(&self, t: Instant) -> bool {
        loop {
            if self.halted() {
                return false;
            }
            let now = Instant::now();
            if now >= t {
                return true;
            }
            std::thread::sleep((t - now).min(STOP_POLL));
        }
    }
}

/// Runs the workers over the schedule and merges what they measured.
fn measure(spec: &DiskSpec, scratch: &Scratch, stop: &AtomicBool) -> Result<Measured, DiskError> {
    let t0 = Instant::now() + START_LEAD;
    let shared = Shared {
        spec,
        scratch,
        schedule: Schedule::new(spec),
        t0,
        end: t0 + spec.duration,
        next: AtomicU64::new(0),
        stop,
        failed: AtomicBool::new(false),
    };
    let results: Vec<Result<Tally, DiskError>> = std::thread::scope(|s| {
        let mut results = Vec::with_capacity(spec.queue_depth);
        let mut handles = Vec::with_capacity(spec.queue_depth);
        for i in 0..spec.queue_depth {
            let shared = &shared;
            let spawned = std::thread::Builder::new()
                .name(format!("nnb-disk-{i}"))
                .spawn_scoped(s, move || worker(shared, i));
            match spawned {
                Ok(h) => handles.push((i, h)),
                Err(e) => {
                    tracing::warn!("cannot start disk worker {i}: {e}");
                    shared.failed.store(true, Ordering::Relaxed);
                    results.push(Err(DiskError::Worker(i)));
                    break;
                }
            }
        }
        for (i, h) in handles {
            results.push(h.join().unwrap_or(Err(DiskError::Worker(i))));
        }
        results
    });
    // A paced run lasts its duration even when its last operation is due a period
    // before the end; a stopped one ends now.
    if !shared.halted() {
        shared.sleep_until(shared.end);
    }
    let stopped = stop.load(Ordering::Relaxed) && Instant::now() < shared.end;
    let elapsed = Instant::now().saturating_duration_since(t0);
    let mut tally = Tally::new()?;
    for r in results {
        tally.add(&r?)?;
    }
    Ok(Measured {
        tally,
        elapsed,
        stopped,
    })
}

/// One worker: claims operations off the schedule until it ends, the duration is
/// over, or the run is stopped.
fn worker(sh: &Shared<'_>, index: usize) -> Result<Tally, DiskError> {
    let result = worker_loop(sh, index);
    if result.is_err() {
        sh.failed.store(true, Ordering::Relaxed);
    }
    result
}

fn worker_loop(sh: &Shared<'_>, index: usize) -> Result<Tally, DiskError> {
    // Sleeps end within microseconds of their deadline instead of the default 50.
    if let Err(e) = nnb_sys::process::set_timer_slack_ns(1) {
        tracing::debug!("cannot shrink the timer slack of disk worker {index}: {e}");
    }
    let spec = sh.spec;
    let mut ops = OpStream::new(spec, index);
    let mut buf = AlignedBuf::new(spec.block_size);
    Rng::new(SEED.wrapping_add(index as u64)).fill(buf.as_mut_slice());
    let mut t = Tally::new()?;
    let paced = sh.schedule.iops.is_some();
    loop {
        let k = sh.next.fetch_add(1, Ordering::Relaxed);
        let Some(due_ns) = sh.schedule.due_ns(k) else {
            break;
        };
        let due = sh.t0 + Duration::from_nanos(due_ns);
        if !sh.sleep_until(due) {
            break;
        }
        let start = Instant::now();
        if start >= sh.end {
            break;
        }
        if paced {
            let late = start - due;
            t.lateness.record(late);
            t.late_ops += u64::from(late > LATE_AFTER);
        }
        let op = ops.next_op();
        let file = &sh.scratch.file;
        let done = if op.read {
            file.read_exact_at(buf.as_mut_slice(), op.offset)
        } else {
            file.write_all_at(buf.as_slice(), op.offset)
        };
        let took = start.elapsed();
        done.map_err(|e| {
            let what = if op.read {
                "cannot read"
            } else {
                "cannot write"
            };
            sh.scratch.op_error(spec, what, e)
        })?;
        if op.read {
            t.reads += 1;
            t.read.record(took);
        } else {
            t.writes += 1;
            t.write.record(took);
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> DiskSpec {
        DiskSpec {
            dir: PathBuf::from("/tmp"),
            file_size: 1 << 20,
            block_size: 4096,
            iops: Some(200.0),
            read_fraction: 0.5,
            queue_depth: 4,
            direct: true,
            duration: Duration::from_secs(2),
        }
    }

    /// splitmix64 from seed 0, as Vigna's splitmix64.c prints it (also computed
    /// with Python's integers: x += 0x9E3779B97F4A7C15, then the two multiplies).
    #[test]
    fn rng_is_splitmix64() {
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
    }

    /// Every offset is a whole block inside the file, every block is drawn about
    /// equally often, and the read share follows the fraction.
    #[test]
    fn offsets_are_aligned_blocks_inside_the_file() {
        let s = DiskSpec {
            file_size: 8 * 4096,
            read_fraction: 0.3,
            ..spec()
        };
        let mut ops = OpStream::new(&s, 3);
        let mut hits = [0u32; 8];
        let mut reads = 0;
        let n = 80_000;
        for _ in 0..n {
            let op = ops.next_op();
            assert_eq!(op.offset % 4096, 0, "{op:?}");
            assert!(op.offset + 4096 <= s.file_size, "{op:?}");
            hits[(op.offset / 4096) as usize] += 1;
            reads += u32::from(op.read);
        }
        // 10,000 expected per block; the binomial sd is ~94, so +-600 is > 6 sd.
        for (b, h) in hits.iter().enumerate() {
            assert!((9_400..=10_600).contains(h), "block {b}: {h} hits");
        }
        // 24,000 expected reads, sd ~130.
        assert!((23_200..=24_800).contains(&reads), "{reads} reads");
        // The extremes: all reads, all writes.
        for (fraction, want) in [(1.0, true), (0.0, false)] {
            let mut ops = OpStream::new(
                &DiskSpec {
                    read_fraction: fraction,
                    ..s.clone()
                },
                0,
            );
            assert!((0..1000).all(|_| ops.next_op().read == want));
        }
        // Workers draw different sequences.
        let mut a = OpStream::new(&s, 0);
        let mut b = OpStream::new(&s, 1);
        assert!((0..16).any(|_| a.next_op() != b.next_op()));
    }

    /// 200 IOPS for 2 s: 400 operations, 5 ms apart, the last at 1.995 s. A third
    /// of a second apart at 3 IOPS for 1 s: 0, 333,333,333 ns, 666,666,666 ns, and
    /// the fourth (at 1 s) falls at the end. Unpaced, all are due at once.
    #[test]
    fn schedule_math() {
        let s = Schedule::new(&spec());
        assert_eq!(s.due_ns(0), Some(0));
        assert_eq!(s.due_ns(1), Some(5_000_000));
        assert_eq!(s.due_ns(399), Some(1_995_000_000));
        assert_eq!(s.due_ns(400), None);
        let third = Schedule {
            iops: Some(3.0),
            duration_ns: 1_000_000_000,
        };
        let dues: Vec<_> = (0..4).map(|k| third.due_ns(k)).collect();
        assert_eq!(dues, [Some(0), Some(333_333_333), Some(666_666_666), None]);
        let unpaced = Schedule {
            iops: None,
            duration_ns: 1,
        };
        assert_eq!(unpaced.due_ns(1 << 40), Some(0));
    }

    #[test]
    fn spec_validation_names_the_problem() {
        assert!(spec().validate().is_ok());
        type Change = fn(&mut DiskSpec);
        let with = |change: Change| {
            let mut s = spec();
            change(&mut s);
            s
        };
        let cases: [(Change, &str); 17] = [
            (|s| s.block_size = 1000, "power of two"),
            (|s| s.block_size = 256, "power of two from 512"),
            (|s| s.block_size = 32 << 20, "16777216"),
            (|s| s.file_size = 2048, "smaller than one 4096-byte block"),
            (
                |s| s.file_size = 4096 * 3 + 1,
                "whole number of 4096-byte blocks",
            ),
            (|s| s.queue_depth = 0, "queue depth 0"),
            (|s| s.queue_depth = 257, "queue depth 257"),
            (
                |s| (s.queue_depth, s.block_size, s.file_size) = (256, 2 << 20, 4 << 20),
                "MiB of buffers",
            ),
            (|s| s.iops = Some(-3.0), "above zero"),
            (|s| s.iops = Some(0.0), "above zero"),
            (|s| s.iops = Some(f64::NAN), "above zero"),
            (|s| s.iops = Some(f64::INFINITY), "above zero"),
            (|s| s.iops = Some(2e7), "beyond"),
            (|s| s.read_fraction = 1.5, "read fraction 1.5"),
            (|s| s.read_fraction = f64::NAN, "read fraction"),
            (
                |s| s.duration = Duration::ZERO,
                "duration must be above zero",
            ),
            (
                |s| s.duration = Duration::from_secs(30 * 24 * 3600),
                "longer",
            ),
        ];
        for (change, needle) in cases {
            let err = with(change).validate().expect_err(needle);
            assert!(matches!(err, DiskError::Invalid(_)));
            assert!(err.is_bad_input());
            let msg = err.to_string();
            assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
        }
        // The edges are allowed.
        let edges: [Change; 5] = [
            |s| (s.block_size, s.file_size) = (512, 512),
            |s| (s.block_size, s.file_size, s.queue_depth) = (16 << 20, 16 << 20, 16),
            |s| s.queue_depth = 256,
            |s| (s.iops, s.read_fraction) = (None, 0.0),
            |s| s.read_fraction = 1.0,
        ];
        for change in edges {
            let ok = with(change);
            assert!(ok.validate().is_ok(), "{ok:?}");
        }
    }

    #[test]
    fn scratch_names_carry_the_owner_pid() {
        assert_eq!(owner_pid("nnb-disk-4242-0.dat"), Some(4242));
        assert_eq!(owner_pid("nnb-disk-1-17.dat"), Some(1));
        for other in [
            "nnb-disk-4242.dat",
            "nnb-disk--0.dat",
            "nnb-disk-42-x.dat",
            "nnb-disk-+42-0.dat",
            "nnb-disk-42-0.dat.tmp",
            "fio-4242-0.dat",
            "nnb-disk-99999999999-0.dat",
        ] {
            assert_eq!(owner_pid(other), None, "{other}");
        }
    }

    #[test]
    fn buffers_are_page_aligned() {
        for len in [512, 4096, 65536] {
            let mut b = AlignedBuf::new(len);
            assert_eq!(b.as_slice().as_ptr() as usize % BUFFER_ALIGN, 0);
            assert_eq!(b.as_mut_slice().len(), len);
        }
    }

    /// Exact mean and maximum; percentiles within the histogram's 1%.
    #[test]
    fn dist_summarises_in_nanoseconds() {
        let mut d = Dist::new().expect("hist");
        assert_eq!(d.latency(), None);
        for us in 1..=100u64 {
            d.record(Duration::from_micros(us));
        }
        d.record(Duration::ZERO);
        let l = d.latency().expect("some");
        // 1 + 2 + ... + 100 µs = 5050 µs over 101 operations.
        assert!((l.mean_ns - 5_050_000.0 / 101.0).abs() < 1e-6, "{l:?}");
        assert_eq!(l.max_ns, 100_000);
        assert!(l.p50_ns.abs_diff(50_000) <= 500, "{l:?}");
        assert!(l.p99_ns.abs_diff(99_000) <= 1_000, "{l:?}");
    }
}
