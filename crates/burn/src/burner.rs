//! The pinned burner: T threads, each pinned to its slot's CPU, verified, released
//! together, running a fixed amount of work (the runtime is the result, like the
//! thesis' `cpu_burn`), running for a fixed time (ops/s is the result), or running
//! until told to stop ([`burn_until`]: a steady neighbor load). A fixed-time burn can
//! be duty-cycled ([`burn_duty`], like `stress-ng --cpu-load P`): each thread busy a
//! share of every period and asleep the rest.
//!
//! Truthfulness rules implemented here:
//! - a thread pins itself, then reads back its affinity and the CPU it runs on; a
//!   mismatch is an error, not a footnote;
//! - setup (pinning, allocating the workload's memory) happens before the start gate,
//!   and all threads leave the gate together (a spinning gate: a futex barrier's
//!   wake-ups are staggered by tens of microseconds);
//! - wall time is last end - first start; every thread's own ticks, ops and checksum
//!   are kept, with the CPU it was seen on at start and end;
//! - the timing overhead (start skew plus the cost of the clock reads inside the
//!   measured span) is estimated and reported with the result.
//!
//! A fixed-work burn's threads either do `ops` each ([`EventPool::PerThread`], the
//! thesis' `cpu_burn`) or take batches from one pool of `ops` events
//! ([`EventPool::Shared`], sysbench's `--events`): a thread slowed by a neighbor then
//! does fewer and the runtime is the pool's, not the slowest thread's.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use serde::Serialize;

use nnb_sys::clock::{monotonic_ns, thread_cpu_ns};

use crate::clock::Clock;
use crate::placement::{allowed_cpus, Slot};
use crate::workload::Workload;

pub use nnb_format::EventPool;

/// How much work each thread does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Work {
    /// Fixed work: this many ops per thread, or in all with a shared [`EventPool`];
    /// the runtime is the result.
    Ops(u64),
    /// Fixed time: run this long; ops/s is the result. Serialized as nanoseconds.
    #[serde(rename = "duration_ns", serialize_with = "serialize_ns")]
    Duration(Duration),
}

fn serialize_ns<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

pub use nnb_sys::affinity::{current_cpu, pin_current_thread, PinError};

/// The share of each period a duty-cycled burner thread is busy: `0 < share <= 1`.
///
/// The period ([`Duty::PERIOD`], 100 ms) is cut into [`Duty::SLICES`] slices on an
/// absolute schedule from the thread's start. In each slice the thread works until it
/// has used `share` of the slice in CPU time (its own CPU clock, so time the scheduler
/// or the hypervisor gave to others does not count as busy), then sleeps to the
/// slice's end. Work comes in chunks ([`Workload::check_every`] ops), so a slice's
/// busy time overshoots by up to a chunk: the overshoot is taken from the next slices'
/// busy time, which keeps the long-run share exact. Busy time a slice could not get
/// (the CPU was taken, a late wake-up) is added to the next slices, up to one slice's
/// busy share: a short disturbance does not lower the load, a long one does not make
/// the thread burst.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Duty(f64);

impl Duty {
    /// The duty cycle's period.
    pub const PERIOD: Duration = Duration::from_millis(100);
    /// Slices per period, each busy [`Duty::share`] of its length.
    pub const SLICES: u32 = 10;

    /// A duty cycle busy `share` of the time; `None` unless `0 < share <= 1`.
    pub fn new(share: f64) -> Option<Duty> {
        (share > 0.0 && share <= 1.0).then_some(Duty(share))
    }

    /// The busy share, in (0, 1].
    pub fn share(self) -> f64 {
        self.0
    }
}

/// A burn that could not be run or whose placement did not hold.
#[derive(Debug, thiserror::Error)]
pub enum BurnError {
    /// No slots given.
    #[error("a burn needs at least one thread")]
    NoThreads,
    /// A thread could not be pinned or ran elsewhere.
    #[error("thread {thread}: {source}")]
    Pin {
        /// Thread index.
        thread: usize,
        /// What went wrong.
        source: PinError,
    },
    /// A thread could not be started.
    #[error("cannot start a burner thread: {0}")]
    Spawn(io::Error),
    /// A burner thread panicked.
    #[error("burner thread {0} panicked")]
    Panicked(usize),
}

/// What one thread did.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadRecord {
    /// Thread index.
    pub thread: usize,
    /// CPU the placement put it on (None: not pinned).
    pub planned_cpu: Option<usize>,
    /// Physical core of the planned CPU.
    pub core: Option<usize>,
    /// Package of the planned CPU.
    pub package: Option<usize>,
    /// Affinity mask read back after pinning.
    pub affinity: Vec<usize>,
    /// CPU seen by `sched_getcpu` just before the first tick.
    pub cpu_start: Option<usize>,
    /// CPU seen just after the last tick.
    pub cpu_end: Option<usize>,
    /// Clock ticks at start and end of the measured span.
    pub start_ticks: u64,
    /// See `start_ticks`.
    pub end_ticks: u64,
    /// end - start in clock ticks (TSC cycles when the clock is the TSC).
    pub cycles: u64,
    /// The span in nanoseconds.
    pub elapsed_ns: f64,
    /// Ops done: with a shared pool, the events this thread took.
    pub ops: u64,
    /// ops / elapsed.
    pub ops_per_sec: f64,
    /// Checksum of the workload's result (proof the work was done).
    pub checksum: u64,
    /// Clock reads inside the measured span (2 for fixed work).
    pub clock_reads: u64,
    /// The thread's own CPU time over its measured span (`CLOCK_THREAD_CPUTIME_ID`,
    /// read just outside it), ns: below `elapsed_ns` by the time the CPU ran
    /// something else (a neighbor on it, steal).
    pub busy_ns: f64,
    /// A duty-cycled thread's achieved busy share: the CPU time it used in the
    /// measured span (its own CPU clock) over the span; absent without a duty cycle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub achieved_duty: Option<f64>,
}

/// The result of one burn.
#[derive(Debug, Clone, Serialize)]
pub struct BurnResult {
    /// The workload run.
    pub workload: Workload,
    /// Fixed work or fixed time.
    pub work: Work,
    /// Where a fixed-work burn's threads took their ops: `per-thread` (`ops` each) or
    /// `shared` (one pool of `ops` events, sysbench's way: the threads' `ops` add up
    /// to it and the wall time ends with the pool's last event). A fixed-time burn's
    /// threads all run until the deadline whichever it is.
    pub pool: EventPool,
    /// One record per thread, in thread order.
    pub threads: Vec<ThreadRecord>,
    /// Last end - first start, nanoseconds: the runtime of a fixed-work burn.
    pub wall_ns: f64,
    /// Ops of all threads.
    pub total_ops: u64,
    /// total_ops / wall: the throughput of a fixed-time burn.
    pub ops_per_sec: f64,
    /// Last start - first start, nanoseconds: how unevenly the gate released.
    pub start_skew_ns: f64,
    /// Estimated time the measurement itself added to the wall time: start skew plus
    /// the clock reads of the busiest thread.
    pub timing_overhead_ns: f64,
    /// `timing_overhead_ns / wall_ns`.
    pub timing_overhead_share: f64,
    /// The busy share a duty-cycled burn ([`burn_duty`]) asked for; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duty: Option<Duty>,
    /// The busy share it got: the mean over threads of each one's CPU time over its
    /// span ([`ThreadRecord::achieved_duty`]). Below `duty` when the CPU was taken
    /// (another task on it, a quota, steal); absent without a duty cycle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub achieved_duty: Option<f64>,
}

/// When a burner thread stops.
#[derive(Debug, Clone, Copy)]
enum Limit<'a> {
    /// After this many ops, or at the first check (every [`Workload::check_every`]
    /// ops) after `stop` was raised.
    Ops {
        n: u64,
        stop: Option<&'a AtomicBool>,
    },
    /// When the shared pool is empty, or at the first check (every batch) after
    /// `stop` was raised.
    Pool {
        events: &'a SharedEvents,
        stop: Option<&'a AtomicBool>,
    },
    /// At the first check (every [`Workload::check_every`] ops) after `duration` has
    /// passed (never without one) or after `stop` was raised; with a duty cycle, the
    /// checks pace the thread.
    Until {
        duration: Option<Duration>,
        stop: Option<&'a AtomicBool>,
        duty: Option<Duty>,
    },
}

/// One pool of events for all threads of a burn: each thread takes a batch at a
/// time until all `total` are taken, the last batch cut to what is left, so exactly
/// `total` are handed out. A batch is [`Workload::check_every`] ops (about 60 to
/// 250 us of work; one `primes` event, as sysbench takes them). A take is one
/// compare-and-swap: 8 ns alone, 85 ns with two CPUs taking back to back (measured
/// on the 2-CPU build VM), so at most about 0.1% of the shortest batch.
#[derive(Debug)]
pub(crate) struct SharedEvents {
    total: u64,
    taken: AtomicU64,
}

impl SharedEvents {
    /// A pool of `total` events.
    pub(crate) fn new(total: u64) -> SharedEvents {
        SharedEvents {
            total,
            taken: AtomicU64::new(0),
        }
    }

    /// Takes up to `batch` (at least 1) events; `None` once the pool is empty.
    pub(crate) fn take(&self, batch: u64) -> Option<u64> {
        let batch = batch.max(1);
        self.taken
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                (t < self.total).then(|| t + batch.min(self.total - t))
            })
            .ok()
            .map(|t| batch.min(self.total - t))
    }
}

/// Runs `workload` on one thread per slot and measures it; a fixed-work burn takes
/// its ops from `pool`.
pub fn burn(
    clock: &Clock,
    workload: &Workload,
    work: Work,
    pool: EventPool,
    slots: &[Slot],
) -> Result<BurnResult, BurnError> {
    burn_limited(clock, workload, work, pool, slots, None)
}

/// [`burn`] that also ends early once `stop` is raised: every thread checks the flag
/// every [`Workload::check_every`] ops (tens to hundreds of microseconds, one relaxed
/// load each) and leaves, so a stopped or timed-out burn leaves no thread behind.
/// A fixed-work burn stopped early reports the ops it did (fewer than asked).
pub fn burn_stoppable(
    clock: &Clock,
    workload: &Workload,
    work: Work,
    pool: EventPool,
    slots: &[Slot],
    stop: &AtomicBool,
) -> Result<BurnResult, BurnError> {
    burn_limited(clock, workload, work, pool, slots, Some(stop))
}

fn burn_limited(
    clock: &Clock,
    workload: &Workload,
    work: Work,
    pool: EventPool,
    slots: &[Slot],
    stop: Option<&AtomicBool>,
) -> Result<BurnResult, BurnError> {
    let events = SharedEvents::new(match work {
        Work::Ops(n) => n,
        Work::Duration(_) => 0,
    });
    let limit = match (work, pool) {
        (Work::Ops(n), EventPool::PerThread) => Limit::Ops { n, stop },
        (Work::Ops(_), EventPool::Shared) => Limit::Pool {
            events: &events,
            stop,
        },
        (Work::Duration(d), _) => Limit::Until {
            duration: Some(d),
            stop,
            duty: None,
        },
    };
    let threads = run_threads(clock, workload, limit, slots, "burn")?;
    Ok(summarize(clock, workload, work, pool, None, threads))
}

/// A fixed-time burn of `duration` ([`burn`] with [`Work::Duration`]) in which every
/// thread is busy only `duty` of each period and sleeps the rest (see [`Duty`]), like
/// `stress-ng --cpu-load`. It ends at the first check after the deadline or after
/// `stop` is raised, and a thread asleep then wakes at its slice's end: within a
/// slice (10 ms) plus any overshoot it still owes. The result records the duty.
pub fn burn_duty(
    clock: &Clock,
    workload: &Workload,
    duration: Duration,
    duty: Duty,
    slots: &[Slot],
    stop: Option<&AtomicBool>,
) -> Result<BurnResult, BurnError> {
    let limit = Limit::Until {
        duration: Some(duration),
        stop,
        duty: Some(duty),
    };
    let threads = run_threads(clock, workload, limit, slots, "burn")?;
    let work = Work::Duration(duration);
    let pool = EventPool::PerThread;
    Ok(summarize(clock, workload, work, pool, Some(duty), threads))
}

/// Runs `workload` on one thread per slot until `stop` is raised: a steady load. The
/// threads are started and pinned once and prepare their workload once (the `mem`
/// buffer is allocated and faulted in once), then run without pause, checking the
/// flag every [`Workload::check_every`] ops (tens to hundreds of microseconds). Each
/// thread's `clock_reads - 1` is the number of such chunks it ran. The result is that
/// of a fixed-time burn whose duration is the time it ran. Threads are named
/// `steady-N`.
pub fn burn_until(
    clock: &Clock,
    workload: &Workload,
    slots: &[Slot],
    stop: &AtomicBool,
) -> Result<BurnResult, BurnError> {
    let limit = Limit::Until {
        duration: None,
        stop: Some(stop),
        duty: None,
    };
    let threads = run_threads(clock, workload, limit, slots, "steady")?;
    let mut r = summarize(
        clock,
        workload,
        Work::Duration(Duration::ZERO),
        EventPool::PerThread,
        None,
        threads,
    );
    r.work = Work::Duration(Duration::from_nanos(r.wall_ns as u64));
    Ok(r)
}

/// Starts one thread per slot, named `{name}-{thread}`, and collects their records.
fn run_threads(
    clock: &Clock,
    workload: &Workload,
    limit: Limit<'_>,
    slots: &[Slot],
    name: &str,
) -> Result<Vec<ThreadRecord>, BurnError> {
    if slots.is_empty() {
        return Err(BurnError::NoThreads);
    }
    let gate = Gate::new(slots.len());
    let outcomes: Vec<Result<ThreadRecord, BurnError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = slots
            .iter()
            .map(|slot| {
                let gate = &gate;
                std::thread::Builder::new()
                    .name(format!("{name}-{}", slot.thread))
                    .spawn_scoped(scope, move || {
                        run_thread(clock, workload, limit, slot, gate)
                    })
            })
            .collect();
        if handles.iter().any(Result::is_err) {
            // A thread that never started cannot reach the gate: release the others.
            gate.abort();
        }
        handles
            .into_iter()
            .zip(slots)
            .map(|(h, slot)| match h {
                Err(e) => Err(BurnError::Spawn(e)),
                Ok(h) => h.join().unwrap_or(Err(BurnError::Panicked(slot.thread))),
            })
            .collect()
    });
    outcomes.into_iter().collect()
}

fn summarize(
    clock: &Clock,
    workload: &Workload,
    work: Work,
    pool: EventPool,
    duty: Option<Duty>,
    threads: Vec<ThreadRecord>,
) -> BurnResult {
    let first_start = threads.iter().map(|t| t.start_ticks).min().unwrap_or(0);
    let last_start = threads.iter().map(|t| t.start_ticks).max().unwrap_or(0);
    let last_end = threads.iter().map(|t| t.end_ticks).max().unwrap_or(0);
    let wall_ns = clock.ticks_to_ns(last_end.saturating_sub(first_start));
    let total_ops = threads.iter().map(|t| t.ops).sum();
    let start_skew_ns = clock.ticks_to_ns(last_start - first_start);
    let reads = threads.iter().map(|t| t.clock_reads).max().unwrap_or(0);
    let timing_overhead_ns = start_skew_ns + reads as f64 * clock.info().read_cost_ns;
    let achieved: Option<Vec<f64>> = threads.iter().map(|t| t.achieved_duty).collect();
    let achieved_duty = achieved
        .filter(|a| !a.is_empty())
        .map(|a| a.iter().sum::<f64>() / a.len() as f64);
    BurnResult {
        workload: *workload,
        work,
        pool,
        wall_ns,
        total_ops,
        ops_per_sec: per_sec(total_ops, wall_ns),
        start_skew_ns,
        timing_overhead_ns,
        timing_overhead_share: if wall_ns > 0.0 {
            timing_overhead_ns / wall_ns
        } else {
            0.0
        },
        threads,
        duty,
        achieved_duty,
    }
}

fn per_sec(ops: u64, ns: f64) -> f64 {
    if ns > 0.0 {
        ops as f64 / ns * 1e9
    } else {
        0.0
    }
}

/// One burner thread: pin and verify, prepare, wait at the gate, work, verify again.
fn run_thread(
    clock: &Clock,
    workload: &Workload,
    limit: Limit<'_>,
    slot: &Slot,
    gate: &Gate,
) -> Result<ThreadRecord, BurnError> {
    let pin_err = |source| BurnError::Pin {
        thread: slot.thread,
        source,
    };
    let pinned = match slot.cpu {
        Some(cpu) => pin_current_thread(cpu),
        None => Ok(()),
    };
    let affinity = allowed_cpus();
    let mut runner = workload.runner();
    if pinned.is_err() {
        gate.abort();
    }
    let released = gate.wait();
    pinned.map_err(pin_err)?;
    if !released {
        // Another thread failed; its error is the one reported.
        return Ok(empty_record(slot, affinity));
    }

    let cpu_start = current_cpu();
    let cpu_at_start = thread_cpu_ns();
    let start = clock.start_now();
    let stopped = |stop: Option<&AtomicBool>| stop.is_some_and(|f| f.load(Ordering::Relaxed));
    let (end, ops, checksum, clock_reads) = match limit {
        Limit::Ops { n, stop: None } => {
            let checksum = runner.run_ops(n);
            (clock.now(), n, checksum, 2)
        }
        Limit::Ops {
            n,
            stop: Some(stop),
        } => {
            let (ops, checksum) =
                runner.run_ops_until(n, workload.check_every(), || stop.load(Ordering::Relaxed));
            (clock.now(), ops, checksum, 2)
        }
        Limit::Pool { events, stop } => {
            let batch = workload.check_every();
            let (ops, checksum) =
                runner.run_chunks(|| (!stopped(stop)).then(|| events.take(batch)).flatten());
            (clock.now(), ops, checksum, 2)
        }
        Limit::Until {
            duration,
            stop,
            duty,
        } => {
            let deadline = duration.map_or(u64::MAX, |d| {
                start.saturating_add(clock.duration_to_ticks(d))
            });
            let chunk = workload.check_every();
            // A thread busy all the time needs no pacing (and no CPU clock reads).
            let mut pacer = duty.filter(|d| d.share() < 1.0).map(Pacer::new);
            let (mut ops, mut checksum, mut reads) = (0u64, 0u64, 1u64);
            loop {
                checksum = checksum.wrapping_add(runner.run_ops(chunk));
                ops += chunk;
                let now = clock.now();
                reads += 1;
                if now >= deadline || stopped(stop) {
                    break (now, ops, checksum, reads);
                }
                if let Some(p) = &mut pacer {
                    p.pace();
                }
            }
        }
    };
    let busy_ns = thread_cpu_ns().saturating_sub(cpu_at_start) as f64;
    let cpu_end = current_cpu();
    if let Some(cpu) = slot.cpu {
        for (observed, when) in [(cpu_start, "at start"), (cpu_end, "at end")] {
            if observed != Some(cpu) {
                return Err(pin_err(PinError::WrongCpu {
                    cpu,
                    observed,
                    when,
                }));
            }
        }
    }
    let cycles = end.saturating_sub(start);
    let elapsed_ns = clock.ticks_to_ns(cycles);
    Ok(ThreadRecord {
        thread: slot.thread,
        planned_cpu: slot.cpu,
        core: slot.core,
        package: slot.package,
        affinity,
        cpu_start,
        cpu_end,
        start_ticks: start,
        end_ticks: end,
        cycles,
        elapsed_ns,
        ops,
        ops_per_sec: per_sec(ops, elapsed_ns),
        checksum,
        clock_reads,
        busy_ns,
        // A duty-cycled thread's CPU time over its span: the busy share it got.
        achieved_duty: matches!(limit, Limit::Until { duty: Some(_), .. })
            .then_some(busy_ns / elapsed_ns)
            .filter(|_| elapsed_ns > 0.0),
    })
}

/// Paces a duty-cycled thread between chunks of work (see [`Duty`]): slices on an
/// absolute `CLOCK_MONOTONIC` schedule, busy time from the thread's CPU clock.
struct Pacer {
    /// A slice's length, ns.
    slice_ns: u64,
    /// A slice's busy share, ns of CPU time (at least 1).
    busy_ns: i64,
    /// When the current slice ends (monotonic ns).
    slice_end: u64,
    /// The thread's CPU time when the current slice started.
    cpu_at_start: u64,
    /// The current slice's busy budget: `busy_ns` less `debt`.
    budget: u64,
    /// CPU time the slices so far used beyond their busy share (negative: short of
    /// it), to be paid back by the next budgets; a shortfall counts at most one
    /// slice's busy share.
    debt: i64,
}

impl Pacer {
    /// Starts the first slice now.
    fn new(duty: Duty) -> Pacer {
        let slice_ns = u64::try_from((Duty::PERIOD / Duty::SLICES).as_nanos()).unwrap_or(1);
        let busy_ns = ((slice_ns as f64 * duty.share()) as u64).clamp(1, slice_ns);
        Pacer {
            slice_ns,
            busy_ns: i64::try_from(busy_ns).unwrap_or(i64::MAX),
            slice_end: monotonic_ns().saturating_add(slice_ns),
            cpu_at_start: thread_cpu_ns(),
            budget: busy_ns,
            debt: 0,
        }
    }

    /// Returns at once while the slice's budget and time last; else settles the
    /// slice's debt, sleeps to the end of the slice (and of the whole slices an
    /// overshoot pays for) and starts the next slice on the schedule.
    fn pace(&mut self) {
        let cpu = thread_cpu_ns();
        let used = cpu.saturating_sub(self.cpu_at_start);
        if used < self.budget && monotonic_ns() < self.slice_end {
            return;
        }
        let busy = self.busy_ns;
        let used = i64::try_from(used).unwrap_or(i64::MAX);
        let mut debt = self.debt.saturating_add(used.saturating_sub(busy));
        let skipped = (debt / busy).max(0);
        debt -= skipped * busy;
        let wake = self
            .slice_end
            .saturating_add(skipped.unsigned_abs().saturating_mul(self.slice_ns));
        let now = monotonic_ns();
        if now < wake {
            std::thread::sleep(Duration::from_nanos(wake - now));
        }
        // The first slice boundary after now: a late start (wake-up latency, or the
        // CPU taken away) shortens that slice, it does not shift the schedule; slices
        // that passed meanwhile were not busy.
        let now = monotonic_ns().max(wake);
        let missed = (now - wake) / self.slice_ns;
        debt = debt.saturating_sub(
            i64::try_from(missed)
                .unwrap_or(i64::MAX)
                .saturating_mul(busy),
        );
        self.debt = debt.max(-busy);
        self.slice_end = wake + (missed + 1) * self.slice_ns;
        // debt is in [-busy, busy): the budget is in (0, 2 busy], at most the slice.
        self.budget = (busy - self.debt).unsigned_abs().min(self.slice_ns);
        // What going to sleep and waking cost counts in the next slice.
        self.cpu_at_start = cpu;
    }
}

/// The record of a thread that did not run because another failed (never returned
/// to the caller: the failing thread's error is).
fn empty_record(slot: &Slot, affinity: Vec<usize>) -> ThreadRecord {
    ThreadRecord {
        thread: slot.thread,
        planned_cpu: slot.cpu,
        core: slot.core,
        package: slot.package,
        affinity,
        cpu_start: None,
        cpu_end: None,
        start_ticks: 0,
        end_ticks: 0,
        cycles: 0,
        elapsed_ns: 0.0,
        ops: 0,
        ops_per_sec: 0.0,
        checksum: 0,
        clock_reads: 0,
        busy_ns: 0.0,
        achieved_duty: None,
    }
}

/// A spinning start gate: threads arrive, spin until all have, and leave together.
/// Spinning threads yield now and then so an oversubscribed burn still gets every
/// thread to the gate.
pub(crate) struct Gate {
    arrived: AtomicUsize,
    aborted: AtomicBool,
    n: usize,
}

impl Gate {
    /// A gate for `n` threads.
    pub(crate) fn new(n: usize) -> Gate {
        Gate {
            arrived: AtomicUsize::new(0),
            aborted: AtomicBool::new(false),
            n,
        }
    }

    /// Opens the gate for everyone and tells them not to run.
    pub(crate) fn abort(&self) {
        self.aborted.store(true, Ordering::Release);
    }

    /// Waits for all `n` threads; false when the gate was aborted.
    pub(crate) fn wait(&self) -> bool {
        self.arrived.fetch_add(1, Ordering::AcqRel);
        let mut spins = 0u32;
        while self.arrived.load(Ordering::Acquire) < self.n {
            if self.aborted.load(Ordering::Acquire) {
                return false;
            }
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins % 4096 == 0 {
                std::thread::yield_now();
            }
        }
        !self.aborted.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(thread: usize, cpu: Option<usize>) -> Slot {
        Slot {
            thread,
            cpu,
            core: None,
            package: None,
        }
    }

    /// Threads pinned to every allowed CPU run there, do all their ops and return the
    /// checksum a single-threaded run of the same ops gives.
    #[test]
    fn fixed_work_runs_where_pinned() {
        let clock = Clock::calibrate();
        let cpus = allowed_cpus();
        let slots: Vec<Slot> = cpus
            .iter()
            .enumerate()
            .map(|(t, &c)| slot(t, Some(c)))
            .collect();
        let w = Workload::FpAdd;
        let r = burn(&clock, &w, Work::Ops(200_000), EventPool::PerThread, &slots).unwrap();
        let expected = w.runner().run_ops(200_000);
        assert_eq!(r.threads.len(), cpus.len());
        for (t, &cpu) in r.threads.iter().zip(&cpus) {
            assert_eq!(t.cpu_start, Some(cpu));
            assert_eq!(t.cpu_end, Some(cpu));
            assert_eq!(t.affinity, vec![cpu]);
            assert_eq!(t.ops, 200_000);
            assert_eq!(t.checksum, expected);
            assert!(t.cycles > 0 && t.end_ticks > t.start_ticks);
        }
        assert_eq!(r.total_ops, 200_000 * cpus.len() as u64);
        let longest = r.threads.iter().map(|t| t.elapsed_ns).fold(0.0, f64::max);
        assert!(r.wall_ns >= longest);
        assert!(r.timing_overhead_ns >= r.start_skew_ns);
    }

    /// A fixed-time burn stops at its deadline: elapsed is at least the duration and
    /// (generously) under 10x it.
    #[test]
    fn fixed_time_stops_after_the_duration() {
        let clock = Clock::calibrate();
        let d = Duration::from_millis(30);
        let per_thread = EventPool::PerThread;
        let r = burn(
            &clock,
            &Workload::Int,
            Work::Duration(d),
            per_thread,
            &[slot(0, None)],
        )
        .unwrap();
        let t = &r.threads[0];
        assert!(t.elapsed_ns >= 30e6, "{}", t.elapsed_ns);
        assert!(t.elapsed_ns < 300e6, "{}", t.elapsed_ns);
        assert_eq!(t.ops % Workload::Int.check_every(), 0);
        assert!(t.clock_reads >= 2 && r.ops_per_sec > 0.0);
    }

    /// A steady burn runs until its flag is raised (here about 100 ms in), pinned, and
    /// reports the time it ran as its duration.
    #[test]
    fn a_steady_burn_runs_until_stopped() {
        let clock = Clock::calibrate();
        let cpu = allowed_cpus()[0];
        let stop = AtomicBool::new(false);
        let r = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                stop.store(true, Ordering::Relaxed);
            });
            burn_until(&clock, &Workload::Int, &[slot(0, Some(cpu))], &stop)
        })
        .unwrap();
        let t = &r.threads[0];
        assert_eq!((t.cpu_start, t.cpu_end), (Some(cpu), Some(cpu)));
        // The stop comes 100 ms after the stopper starts, less the burner's start-up.
        assert!(
            t.elapsed_ns >= 50e6 && t.elapsed_ns < 2e9,
            "{}",
            t.elapsed_ns
        );
        assert_eq!(t.ops, (t.clock_reads - 1) * Workload::Int.check_every());
        let Work::Duration(ran) = r.work else {
            panic!("{:?}", r.work);
        };
        assert!((ran.as_nanos() as f64 - r.wall_ns).abs() < 1.0);
    }

    /// A stoppable burn ends promptly when its flag is raised, in both modes: a
    /// fixed-work burn of about a minute of ops and a one-hour fixed-time burn each
    /// end within seconds of a stop raised 100 ms in, with the ops they did.
    #[test]
    fn a_stoppable_burn_ends_at_its_stop_flag() {
        let clock = Clock::calibrate();
        for work in [
            Work::Ops(100_000_000_000),
            Work::Duration(Duration::from_secs(3600)),
        ] {
            let stop = AtomicBool::new(false);
            let started = std::time::Instant::now();
            let r = std::thread::scope(|s| {
                s.spawn(|| {
                    std::thread::sleep(Duration::from_millis(100));
                    stop.store(true, Ordering::Relaxed);
                });
                burn_stoppable(
                    &clock,
                    &Workload::Int,
                    work,
                    EventPool::PerThread,
                    &[slot(0, None)],
                    &stop,
                )
            })
            .unwrap();
            assert!(started.elapsed() < Duration::from_secs(10), "{work:?}");
            let t = &r.threads[0];
            assert!(t.ops > 0 && t.ops < 100_000_000_000, "{work:?}: {}", t.ops);
        }
    }

    /// A duty is a share in (0, 1]; a duty-cycled burn records it (in its JSON too),
    /// a plain burn has none.
    #[test]
    fn a_duty_is_a_share_and_is_recorded() {
        for bad in [0.0, -0.5, 1.01, f64::NAN] {
            assert_eq!(Duty::new(bad), None, "{bad}");
        }
        assert_eq!(Duty::new(1.0).map(Duty::share), Some(1.0));
        let clock = Clock::calibrate();
        let half = Duty::new(0.5).expect("0.5 is a share");
        let d = Duration::from_millis(50);
        let r = burn_duty(&clock, &Workload::Int, d, half, &[slot(0, None)], None).unwrap();
        assert_eq!(r.duty, Some(half));
        assert_eq!(r.work, Work::Duration(d));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["duty"], 0.5);
        let pool = EventPool::PerThread;
        let plain = burn(
            &clock,
            &Workload::Int,
            Work::Duration(d),
            pool,
            &[slot(0, None)],
        )
        .unwrap();
        assert_eq!(plain.duty, None);
        assert!(serde_json::to_value(&plain).unwrap().get("duty").is_none());
    }

    /// A pool hands out whole batches and cuts the last to what is left: 10 events in
    /// batches of 4 are 4, 4, 2, then none; a batch of 0 takes 1.
    #[test]
    fn a_pool_hands_out_exactly_its_events() {
        let pool = SharedEvents::new(10);
        let taken: Vec<Option<u64>> = (0..5).map(|_| pool.take(4)).collect();
        assert_eq!(taken, [Some(4), Some(4), Some(2), None, None]);
        let pool = SharedEvents::new(1);
        assert_eq!((pool.take(0), pool.take(0)), (Some(1), None));
        assert_eq!(SharedEvents::new(0).take(4), None);
    }

    #[test]
    fn pinning_to_an_absent_cpu_is_an_error() {
        let clock = Clock::calibrate();
        let absent = allowed_cpus().last().copied().unwrap_or(0) + 1000;
        let err = burn(
            &clock,
            &Workload::FpAdd,
            Work::Ops(10),
            EventPool::PerThread,
            &[slot(0, Some(0)), slot(1, Some(absent))],
        )
        .unwrap_err();
        assert!(matches!(err, BurnError::Pin { thread: 1, .. }), "{err}");
        assert!(burn(
            &clock,
            &Workload::FpAdd,
            Work::Ops(1),
            EventPool::PerThread,
            &[]
        )
        .is_err());
    }
}
