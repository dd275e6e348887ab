//! Loss, duplicate and reordering accounting from sequence numbers, in bounded memory.
//!
//! A [`SeqTracker`] remembers which of the last [`WINDOW`] sequence numbers it has
//! seen. A number behind the highest seen is a late arrival (reordered) unless it
//! was already seen (duplicate); numbers that fall out of the window unseen are lost.
//! Anything older than the window cannot be told apart and counts as `too_old`.

use serde::{Deserialize, Serialize};

/// How many sequence numbers behind the newest one are remembered.
pub const WINDOW: u64 = 4096;

/// Counters from one stream's sequence numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqStats {
    /// Distinct datagrams received.
    pub received: u64,
    /// Datagrams received more than once (extra copies).
    pub duplicates: u64,
    /// Datagrams that arrived after a higher sequence number.
    pub reordered: u64,
    /// Datagrams older than the window: neither counted as loss nor as received.
    pub too_old: u64,
    /// Highest sequence number seen plus one (what the sender sent at least).
    pub expected: u64,
}

impl SeqStats {
    /// Datagrams never received among those up to the highest seen sequence number.
    pub fn lost(&self) -> u64 {
        self.expected.saturating_sub(self.received)
    }

    /// Lost share of expected datagrams, 0.0 when nothing was expected.
    pub fn loss_ratio(&self) -> f64 {
        if self.expected == 0 {
            0.0
        } else {
            self.lost() as f64 / self.expected as f64
        }
    }

    /// Adds another stream's counters to this one (for totals over streams).
    pub fn merge(&mut self, other: &SeqStats) {
        self.received = self.received.saturating_add(other.received);
        self.duplicates = self.duplicates.saturating_add(other.duplicates);
        self.reordered = self.reordered.saturating_add(other.reordered);
        self.too_old = self.too_old.saturating_add(other.too_old);
        self.expected = self.expected.saturating_add(other.expected);
    }
}

/// Tracks one stream's sequence numbers with a fixed-size bitmap.
#[derive(Debug, Clone)]
pub struct SeqTracker {
    bits: Box<[u64; (WINDOW / 64) as usize]>,
    stats: SeqStats,
}

impl Default for SeqTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl SeqTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        SeqTracker {
            bits: Box::new([0; (WINDOW / 64) as usize]),
            stats: SeqStats::default(),
        }
    }

    fn slot(seq: u64) -> (usize, u64) {
        let i = seq % WINDOW;
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    /// Records one received sequence number.
    pub fn record(&mut self, seq: u64) {
        let next = self.stats.expected;
        if seq >= next {
            // Clear the slots of numbers skipped over (and of the new one): they now
            // stand for sequence numbers (seq - WINDOW, seq].
            let clear_from = next.max(seq.saturating_sub(WINDOW - 1));
            for s in clear_from..=seq {
                let (w, b) = Self::slot(s);
                self.bits[w] &= !b;
            }
            let (w, b) = Self::slot(seq);
            self.bits[w] |= b;
            self.stats.expected = seq.saturating_add(1);
            self.stats.received += 1;
        } else if next - seq > WINDOW {
            self.stats.too_old += 1;
        } else {
            let (w, b) = Self::slot(seq);
            if self.bits[w] & b != 0 {
                self.stats.duplicates += 1;
            } else {
                self.bits[w] |= b;
                self.stats.received += 1;
                self.stats.reordered += 1;
            }
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> SeqStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_no_loss() {
        let mut t = SeqTracker::new();
        (0..10_000).for_each(|s| t.record(s));
        let s = t.stats();
        assert_eq!(
            (s.received, s.lost(), s.duplicates, s.reordered),
            (10_000, 0, 0, 0)
        );
    }

    #[test]
    fn loss_duplicates_reordering() {
        let mut t = SeqTracker::new();
        for s in [0, 1, 3, 2, 2, 5, 7, 7, 6] {
            t.record(s);
        }
        let s = t.stats();
        assert_eq!(s.expected, 8);
        assert_eq!(s.received, 7); // 0 1 2 3 5 6 7
        assert_eq!(s.lost(), 1); // 4
        assert_eq!(s.duplicates, 2); // 2, 7
        assert_eq!(s.reordered, 2); // 2, 6
        assert!((s.loss_ratio() - 1.0 / 8.0).abs() < 1e-12);
    }

    #[test]
    fn big_jump_and_too_old() {
        let mut t = SeqTracker::new();
        t.record(0);
        t.record(10 * WINDOW);
        t.record(1); // far behind the window
        let s = t.stats();
        assert_eq!(s.too_old, 1);
        assert_eq!(s.received, 2);
        assert_eq!(s.lost(), 10 * WINDOW + 1 - 2);
        // A number inside the window after the jump is a late arrival, not a duplicate.
        t.record(10 * WINDOW - 5);
        assert_eq!(t.stats().reordered, 1);
        assert_eq!(t.stats().duplicates, 0);
    }
}
