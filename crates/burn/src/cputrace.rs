//! Wang & Ng's CPUTest timestamp trace (seed 003, §III.A, Fig. 1), bounded.
//!
//! CPUTest saved every `gettimeofday()` of a 1-million-iteration loop and plotted
//! time against iteration: a straight line where the instance ran, a step where it
//! was scheduled off. A clock loop today does 20 to 50 million reads a second, so
//! every read cannot be kept; what Fig. 1 shows can: every gap longer than the
//! threshold exactly (where it started and how long it was), and the rest as the
//! number of reads in each millisecond since the scan's start. Time against
//! iteration is the running sum of the counts, with the gaps as the steps.
//!
//! Bounds: at most [`MAX_GAPS`] gaps are kept over a scan's CPUs (later ones are
//! counted in `gaps_left_out`), and a traced scan's duration times its CPUs is at
//! most [`MAX_TRACE_DURATION`] (10 min, 600,000 bins of 4 bytes). The bins stop at [`MAX_BINS`] (twice that): a read
//! later than that (only after a gap of minutes at the scan's very end) counts in
//! the last bin, so the counts always sum to the scan's iterations.

use std::time::Duration;

use serde::Serialize;

use crate::clock::Clock;

/// Width of a count bin: Wang & Ng's threshold, so a bin with no reads is a
/// millisecond the loop did not run.
pub const BIN: Duration = Duration::from_millis(1);
/// Most gaps the traces of one scan keep over all its CPUs (about 5 MB of JSON),
/// shared out evenly; later ones are only counted. A job's result is one line of
/// `samples.jsonl`, which `nnb analyze` reads up to 16 MiB.
pub const MAX_GAPS: usize = 200_000;
/// Most CPU time a scan may trace, its duration times its CPUs: 600,000 bins of
/// [`BIN`] (about 4 MB of JSON) over all its CPUs.
pub const MAX_TRACE_DURATION: Duration = Duration::from_secs(600);
/// Most bins a trace holds (see the module documentation).
pub const MAX_BINS: usize = 1_200_000;

/// The trace of one scan as the loop builds it, in clock ticks.
#[derive(Debug, Clone)]
pub struct TraceRecorder {
    /// Tick of the scan's first read.
    start: u64,
    /// Ticks per bin.
    bin_ticks: u64,
    /// First tick past the current bin: a read at or after it starts another bin.
    next_edge: u64,
    /// Index of the first read of the current bin.
    bin_first: u64,
    /// Reads per finished bin.
    counts: Vec<u32>,
    /// Gaps kept: (start offset from `start`, length), ticks.
    gaps: Vec<(u64, u64)>,
    /// Most gaps kept.
    max_gaps: usize,
    /// Gaps past `max_gaps`.
    gaps_left_out: u64,
}

impl TraceRecorder {
    /// A trace of a scan whose first read was at `start`, in bins of `bin_ticks`
    /// (at least 1), keeping at most `max_gaps` gaps.
    pub fn new(start: u64, bin_ticks: u64, max_gaps: usize) -> TraceRecorder {
        let bin_ticks = bin_ticks.max(1);
        TraceRecorder {
            start,
            bin_ticks,
            next_edge: start.saturating_add(bin_ticks),
            bin_first: 0,
            counts: Vec::new(),
            gaps: Vec::new(),
            max_gaps,
            gaps_left_out: 0,
        }
    }

    /// The tick at which the loop must call [`TraceRecorder::cross`]: the loop
    /// compares each read with it, nothing more.
    #[inline]
    pub fn next_edge(&self) -> u64 {
        self.next_edge
    }

    /// Read number `index` (0 = the first after the start) at tick `now` lies past
    /// the current bin (`now >= next_edge()`): closes it (and any empty bins the loop
    /// slept through); at [`MAX_BINS`] the last bin stays open to the end.
    pub fn cross(&mut self, now: u64, index: u64) {
        let bin = ((now.saturating_sub(self.start) / self.bin_ticks) as usize).min(MAX_BINS - 1);
        self.counts.push(saturate(index - self.bin_first));
        self.counts.resize(bin, 0);
        self.bin_first = index;
        self.next_edge = if bin + 1 == MAX_BINS {
            u64::MAX
        } else {
            self.start
                .saturating_add((bin as u64 + 1).saturating_mul(self.bin_ticks))
        };
    }

    /// A gap of `len` ticks after the read at tick `prev`.
    pub fn gap(&mut self, prev: u64, len: u64) {
        if self.gaps.len() < self.max_gaps {
            self.gaps.push((prev.saturating_sub(self.start), len));
        } else {
            self.gaps_left_out += 1;
        }
    }

    /// Closes the last bin of a scan of `iterations` reads.
    pub fn finish(&mut self, iterations: u64) {
        self.counts
            .push(saturate(iterations.saturating_sub(self.bin_first)));
        self.bin_first = iterations;
        self.next_edge = u64::MAX;
    }

    /// The trace in nanoseconds, as results carry it.
    pub fn to_trace(&self, clock: &Clock) -> CpuTrace {
        let ns = |t: u64| clock.ticks_to_ns(t).round() as u64;
        CpuTrace {
            gaps: self
                .gaps
                .iter()
                .map(|&(at, len)| [ns(at), ns(len)])
                .collect(),
            counts_per_ms: self.counts.clone(),
            gaps_left_out: self.gaps_left_out,
        }
    }
}

/// A count as a bin holds it (a millisecond of reads is far below `u32::MAX`).
fn saturate(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The CPUTest trace of one CPU (`cpus[i].trace` of a steal result).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CpuTrace {
    /// Every gap longer than the threshold, `[at_ns, len_ns]`: `at_ns` is the read
    /// before the gap, from the scan's first read.
    pub gaps: Vec<[u64; 2]>,
    /// Reads in each millisecond from the scan's first read (their sum is the scan's
    /// iterations).
    pub counts_per_ms: Vec<u32>,
    /// Gaps past [`MAX_GAPS`], counted only.
    pub gaps_left_out: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bins close at each edge a read crosses, the ones a gap spans stay empty, and
    /// the gaps past the bound are counted.
    #[test]
    fn bins_and_bounded_gaps() {
        let mut t = TraceRecorder::new(100, 10, 1);
        // Reads 0..=2 at ticks 103, 106, 109 fall in bin 0 (ticks 100..110); read 3
        // at 135 in bin 3, read 4 at 140 in bin 4.
        assert_eq!(t.next_edge(), 110);
        t.cross(135, 3);
        assert_eq!(t.next_edge(), 140);
        t.gap(109, 26);
        t.cross(140, 4);
        t.gap(135, 5);
        t.finish(5);
        let clock = Clock::with_choice(crate::clock::ClockChoice::Monotonic).unwrap();
        let trace = t.to_trace(&clock);
        assert_eq!(trace.counts_per_ms, vec![3, 0, 0, 1, 1]);
        assert_eq!(trace.gaps, vec![[9, 26]]);
        assert_eq!(trace.gaps_left_out, 1);
    }
}
