//! A sink stream's arrival series: UDP payload bytes received per fixed bin of the
//! sink's clock ([`BIN_NS`]), the newest [`MAX_BINS`] bins kept. A load generator
//! that samples its throughput over time reads it back after sending (a series
//! request, [`crate::report::encode_series_request`]) and groups the bins into its
//! sampling intervals: the receiver's count of each interval, taken where the data
//! arrived, so a congested link's drops are not counted as throughput.

use std::collections::VecDeque;

/// Width of a bin, ns of the sink's clock (100 ms): sampling intervals are whole
/// multiples of it.
pub const BIN_NS: u64 = 100_000_000;
/// Most bins a stream keeps (2 minutes); older bins are dropped first. Bounds a
/// stream's series to 4.8 KB, whatever it sends.
pub const MAX_BINS: usize = 1200;

/// Bytes received per bin by one stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArrivalSeries {
    /// Bin index (arrival ns / [`BIN_NS`]) of `bytes[0]`.
    first_bin: u64,
    /// Payload bytes per bin, oldest first; saturating (4 GB per 100 ms is 343 Gbit/s).
    bytes: VecDeque<u32>,
}

impl ArrivalSeries {
    /// Adds a datagram of `len` payload bytes that arrived at `arrival_ns`. An arrival
    /// stamped before the first bin kept (timestamps from another CPU a little behind)
    /// counts in that first bin.
    pub fn record(&mut self, arrival_ns: u64, len: u64) {
        let bin = arrival_ns / BIN_NS;
        if self.bytes.is_empty() {
            self.first_bin = bin;
        }
        let newest_allowed_first = (bin + 1).saturating_sub(MAX_BINS as u64);
        if newest_allowed_first > self.first_bin {
            let drop = newest_allowed_first - self.first_bin;
            let drop = usize::try_from(drop).map_or(self.bytes.len(), |d| d.min(self.bytes.len()));
            self.bytes.drain(..drop);
            self.first_bin = newest_allowed_first;
        }
        let index = usize::try_from(bin.saturating_sub(self.first_bin)).unwrap_or(0);
        if self.bytes.len() <= index {
            self.bytes.resize(index + 1, 0);
        }
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        self.bytes[index] = self.bytes[index].saturating_add(len);
    }

    /// Bin index of the oldest bin kept.
    pub fn first_bin(&self) -> u64 {
        self.first_bin
    }

    /// How many bins are kept.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether nothing arrived.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// At most `most` bins from `offset` on (an empty list past the end).
    pub fn page(&self, offset: usize, most: usize) -> Vec<u32> {
        self.bytes.iter().skip(offset).take(most).copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_land_in_their_bins() {
        let mut s = ArrivalSeries::default();
        // Bin 10 gets 100 + 50, bin 11 nothing, bin 12 gets 7.
        s.record(10 * BIN_NS + 5, 100);
        s.record(10 * BIN_NS + BIN_NS - 1, 50);
        s.record(12 * BIN_NS, 7);
        // Behind the first bin: counted in it.
        s.record(9 * BIN_NS, 3);
        assert_eq!(s.first_bin(), 10);
        assert_eq!(s.page(0, 10), vec![153, 0, 7]);
        assert_eq!(s.page(1, 1), vec![0]);
        assert!(s.page(5, 3).is_empty());
    }

    #[test]
    fn only_the_newest_bins_are_kept() {
        let mut s = ArrivalSeries::default();
        s.record(0, 1);
        s.record((MAX_BINS as u64 + 4) * BIN_NS, 2);
        assert_eq!(s.len(), MAX_BINS);
        assert_eq!(s.first_bin(), 5);
        assert_eq!(s.page(MAX_BINS - 1, 5), vec![2]);
        // A jump far ahead keeps nothing of the past and stays bounded.
        s.record(u64::MAX, 9);
        assert_eq!(s.len(), MAX_BINS);
        assert_eq!(s.page(MAX_BINS - 1, 1), vec![9]);
        assert_eq!(s.page(0, MAX_BINS).iter().sum::<u32>(), 9);
    }
}
