//! Deadline pacing for the load generator: unit `k` (a datagram, or a byte for
//! TCP) is due at `start + k / rate`. The sender asks how many units are due now,
//! sends at most one batch of them, and waits for the next deadline when none is.
//!
//! A late wake-up or a slow send leaves the sender a little behind: up to one
//! quantum's group plus [`STALL_SLACK_NS`] of the schedule, whatever is due goes
//! out (in as many batches as it takes; at least [`STALL_SLACK_UNITS`] units), so
//! ordinary jitter costs no units. Being
//! further behind is a *stall* (the thread was descheduled, a send blocked). Without
//! catch-up the pacer then releases one quantum's group (`min_units`, see
//! [`Pacer::with_quantum`]) and drops every other overdue slot from the schedule,
//! counting it as skipped: a stall shows up as a lower achieved rate and a `skipped`
//! count, never as a burst at line rate that the measured neighbor would feel. With
//! catch-up it sends them all, one batch at a time, as fast as it can.
//!
//! With a chunk ([`Pacer::with_chunk`], Wang & Ng's UDPTest pacing granularity:
//! 128 KB) the schedule is one of chunks instead of units: chunk `j` (units
//! `j * c` to `j * c + c - 1`) is due whole at `start + j * c / rate`, goes out back
//! to back, and the sender idles until the next chunk; the mean rate is the same.

use crate::clock::wait_until;

/// The sender sleeps until this close to a deadline, then spins. Short, because
/// batching absorbs a late wake-up: whatever fell due meanwhile goes in one batch.
pub const LOAD_SPIN_NS: u64 = 20_000;
/// Default pacing quantum of the load generator: units are released in groups of at
/// least this much of the rate's time (at most one batch), so a high rate is sent in
/// batches a system call (and a GSO message) can carry instead of one datagram per
/// call. At 10 Gbit/s and 1400-byte datagrams, 50 us is 45 datagrams: one GSO message.
pub const LOAD_QUANTUM_NS: u64 = 50_000;
/// How far behind its schedule, beyond one quantum's group, the sender may fall
/// before it counts as a stall (see the module documentation), but never less than
/// [`STALL_SLACK_UNITS`]. 1 ms: wake-up latency and a slow `sendmmsg` stay below
/// it, and what it lets through at once is at most 1 ms of the rate's traffic.
pub const STALL_SLACK_NS: u64 = 1_000_000;
/// The fewest units of slack before a stall: at a low rate, where 1 ms is less than
/// a unit, a wake-up a few periods late still sends its few units.
pub const STALL_SLACK_UNITS: u64 = 4;

/// A schedule of units at a fixed rate, or unlimited.
#[derive(Debug, Clone)]
pub struct Pacer {
    start_ns: u64,
    /// Units per nanosecond; `None` for as fast as possible.
    per_ns: Option<f64>,
    catch_up: bool,
    /// Schedule slots consumed: units sent plus units skipped.
    slots: u64,
    skipped: u64,
    /// Fewest units released at once (see [`LOAD_QUANTUM_NS`]).
    min_units: u64,
    /// Units of the schedule in [`STALL_SLACK_NS`], at least [`STALL_SLACK_UNITS`].
    slack_units: u64,
    /// Units due together (see [`Pacer::with_chunk`]); 1 without chunks.
    chunk: u64,
}

impl Pacer {
    /// A schedule starting at `start_ns` at `rate_per_s` units per second (`None`:
    /// unlimited).
    pub fn new(start_ns: u64, rate_per_s: Option<f64>, catch_up: bool) -> Self {
        let per_ns = rate_per_s.map(|r| r / 1e9);
        Pacer {
            start_ns,
            per_ns,
            catch_up,
            slots: 0,
            skipped: 0,
            min_units: 1,
            slack_units: per_ns.map_or(0, |p| {
                ((p * STALL_SLACK_NS as f64) as u64).max(STALL_SLACK_UNITS)
            }),
            chunk: 1,
        }
    }

    /// Schedules chunks of `units` units, each due whole at its first unit's
    /// deadline and sent back to back (see the module documentation). Replaces a
    /// quantum: a chunk is the group. A stall is being more than one chunk plus the
    /// slack behind.
    pub fn with_chunk(mut self, units: u64) -> Self {
        let units = units.max(1);
        if self.per_ns.is_some() && units > 1 {
            self.min_units = 1;
            self.slack_units += units;
            self.chunk = units;
        }
        self
    }

    /// Releases units in groups spanning at least `quantum_ns` of the schedule.
    pub fn with_quantum(mut self, quantum_ns: u64) -> Self {
        if let Some(per_ns) = self.per_ns {
            self.min_units = ((per_ns * quantum_ns as f64) as u64).max(1);
        }
        self
    }

    /// How many units to send at `now_ns`, at most `max_batch`; 0 when the next one
    /// is not due yet. Without catch-up, after a stall (more than `min_units` plus
    /// [`STALL_SLACK_NS`] of units, or [`STALL_SLACK_UNITS`], overdue) it releases only `min_units` and counts
    /// the other overdue slots as skipped.
    pub fn due(&mut self, now_ns: u64, max_batch: u64) -> u64 {
        let Some(per_ns) = self.per_ns else {
            return max_batch;
        };
        let elapsed = now_ns.saturating_sub(self.start_ns) as f64;
        // Units whose deadline has come, rounded up to whole chunks.
        let due_total = ((elapsed * per_ns) as u64 / self.chunk + 1) * self.chunk;
        let mut behind = due_total.saturating_sub(self.slots);
        if !self.catch_up && behind > self.min_units + self.slack_units {
            let drop = behind - self.min_units;
            self.skipped += drop;
            self.slots += drop;
            behind = self.min_units;
        }
        let n = behind.min(max_batch);
        if n < self.min_units.min(max_batch) {
            0
        } else {
            n
        }
    }

    /// Records that `n` units were sent.
    pub fn sent(&mut self, n: u64) {
        self.slots += n;
    }

    /// When the next group of units is due (for [`Pacer::wait`]); `None` when
    /// unlimited.
    pub fn next_due_ns(&self) -> Option<u64> {
        self.per_ns.map(|per_ns| {
            let last_of_group = self.slots + self.min_units - 1;
            // A chunk is due at its first unit's deadline.
            let unit = last_of_group / self.chunk * self.chunk;
            self.start_ns + (unit as f64 / per_ns).ceil() as u64
        })
    }

    /// Waits for the next unit's deadline, but not past `end_ns`.
    pub fn wait(&self, end_ns: u64) {
        if let Some(t) = self.next_due_ns() {
            wait_until(t.min(end_ns), LOAD_SPIN_NS);
        }
    }

    /// Slots dropped from the schedule after stalls.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// How much of the schedule the slots used so far (sent or skipped) occupy, ns;
    /// `None` when unlimited. Unit `k` owns the period from its deadline
    /// `start + k / rate` to the next one, so `n` units span `n / rate`: ten units
    /// at 10 per second span one second, although the tenth leaves at 900 ms.
    pub fn span_ns(&self) -> Option<u64> {
        self.per_ns
            .map(|per_ns| (self.slots as f64 / per_ns).round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paces_by_deadline() {
        // 1000 units/s: one per millisecond.
        let mut p = Pacer::new(0, Some(1000.0), false);
        assert_eq!(p.due(0, 32), 1);
        p.sent(1);
        assert_eq!(p.due(500_000, 32), 0);
        assert_eq!(p.next_due_ns(), Some(1_000_000));
        assert_eq!(p.due(3_000_000, 32), 3); // units 1, 2, 3
        p.sent(3);
        assert_eq!(p.skipped(), 0);
    }

    #[test]
    fn skips_after_a_stall_unless_catching_up() {
        let mut p = Pacer::new(0, Some(1000.0), false);
        let first = p.due(0, 8);
        p.sent(first);
        // A 100 ms stall: 100 units due (1 to 100), far beyond one unit plus 4 units
        // of slack (1 ms is only one unit). One unit goes, the other 99 are dropped.
        assert_eq!(p.due(100_000_000, 8), 1);
        p.sent(1);
        assert_eq!(p.skipped(), 99);
        assert_eq!(p.due(100_000_000, 8), 0);
        assert_eq!(p.next_due_ns(), Some(101_000_000));

        let mut c = Pacer::new(0, Some(1000.0), true);
        let first = c.due(0, 8);
        c.sent(first);
        let mut total = 0;
        loop {
            let n = c.due(100_000_000, 8);
            if n == 0 {
                break;
            }
            c.sent(n);
            total += n;
        }
        assert_eq!((total, c.skipped()), (100, 0));
    }

    #[test]
    fn a_stall_is_no_line_rate_burst() {
        // The audit's case (M2): 8929 datagrams/s (100 Mbit/s of 1400-byte
        // datagrams) with the load's quantum, batches of up to 1472 datagrams, and a
        // 100 ms stall after the first datagram: 892 are overdue (1 to 892), beyond
        // the 1 + 8 (1 ms) that a late wake-up may leave. One
        // quantum's group (50 us at 8929/s is under one datagram: 1) goes out, the
        // other 891 are skipped, instead of 892 datagrams at once.
        let mut p = Pacer::new(0, Some(8929.0), false).with_quantum(LOAD_QUANTUM_NS);
        let n = p.due(0, 1472);
        assert_eq!(n, 1);
        p.sent(n);
        let b = p.due(100_000_000, 1472);
        assert_eq!(b, 1);
        p.sent(b);
        assert_eq!(p.skipped(), 892 - b);
        // Back on schedule: the next datagram (893) is due at 893/8929 s
        // (100 011 199.46 ns, rounded up).
        assert_eq!(p.due(100_000_000, 1472), 0);
        assert_eq!(p.next_due_ns(), Some(100_011_200));
    }

    #[test]
    fn lateness_within_the_slack_is_sent_not_skipped() {
        // 1 unit per us, groups of 10, 1 ms of slack (1000 units).
        let mut p = Pacer::new(0, Some(1e6), false).with_quantum(10_000);
        // 500 us late: units 0..=508 are due (509), within 10 + 1000: all go, a
        // batch at a time, and none is skipped.
        let mut total = 0;
        loop {
            let n = p.due(508_000, 64);
            if n == 0 {
                break;
            }
            p.sent(n);
            total += n;
        }
        assert_eq!((total, p.skipped()), (509, 0));
        // 1.2 ms later: 1200 more are due (509 to 1708), past 10 + 1000: a stall. One
        // group goes, 1190 are skipped.
        assert_eq!(p.due(1_708_000, 64), 10);
        p.sent(10);
        assert_eq!(p.skipped(), 1190);
        assert_eq!(p.due(1_708_000, 64), 0);
    }

    #[test]
    fn quantum_groups_units() {
        // 1 unit per us with a 10 us quantum: groups of 10.
        let mut p = Pacer::new(0, Some(1e6), false).with_quantum(10_000);
        assert_eq!(p.due(0, 64), 0);
        assert_eq!(p.next_due_ns(), Some(9_000));
        assert_eq!(p.due(9_000, 64), 10);
        p.sent(10);
        assert_eq!(p.due(15_000, 64), 0);
        // A batch smaller than the quantum still goes when full.
        assert_eq!(p.due(15_000, 4), 4);
    }

    #[test]
    fn span_counts_one_period_per_unit() {
        // 10 units/s: unit k is due at k * 100 ms; the tenth leaves at 900 ms and
        // the ten span 1 s.
        let mut p = Pacer::new(0, Some(10.0), false);
        assert_eq!(p.span_ns(), Some(0));
        for k in 0..10 {
            assert_eq!(p.due(k * 100_000_000 + 1_000, 32), 1);
            p.sent(1);
        }
        assert_eq!(p.span_ns(), Some(1_000_000_000));
        assert_eq!(Pacer::new(0, None, false).span_ns(), None);
    }

    #[test]
    fn chunks_go_back_to_back_then_idle() {
        // 1000 units/s in chunks of 10: chunk j is due at j * 10 ms, whole.
        let mut p = Pacer::new(0, Some(1000.0), false).with_chunk(10);
        // At 0 the whole first chunk is due, in batches of 4: 4, 4, 2.
        let mut sizes = Vec::new();
        loop {
            let n = p.due(0, 4);
            if n == 0 {
                break;
            }
            p.sent(n);
            sizes.push(n);
        }
        assert_eq!(sizes, vec![4, 4, 2]);
        // Nothing more until 10 ms, although unit 5's own deadline was 5 ms.
        assert_eq!(p.due(9_999_999, 32), 0);
        assert_eq!(p.next_due_ns(), Some(10_000_000));
        assert_eq!(p.due(10_000_000, 32), 10);
        p.sent(10);
        assert_eq!(p.skipped(), 0);
        // Twenty chunks span 200 ms: the mean rate is unchanged.
        for j in 2..20u64 {
            assert_eq!(p.due(j * 10_000_000, 32), 10);
            p.sent(10);
        }
        assert_eq!(p.span_ns(), Some(200_000_000));
        assert_eq!(p.skipped(), 0);
    }

    #[test]
    fn unlimited_sends_full_batches() {
        let mut p = Pacer::new(0, None, false);
        assert_eq!(p.due(0, 16), 16);
        assert_eq!(p.next_due_ns(), None);
    }
}
