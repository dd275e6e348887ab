//! Throughput sampled over time: a load's rate per sampling interval as its sender
//! counted it (what was sent) and as the sink counted it (what arrived), and the
//! mean of the latest `window` samples of each (the thesis, 6.1.1, averaged each
//! client's latest 20 one-second samples).
//!
//! The sender's samples are its payload bytes per interval of its own schedule. The
//! sink's come from its arrival series ([`crate::serve::series`]): the bins of all
//! the load's streams are added up by bin of the sink's clock, the first and the
//! last bin (partly before the load's first datagram and after its last) left out,
//! and the rest grouped into intervals; a trailing part shorter than an interval is
//! left out too. Both count UDP payload (nnb header included).

use serde::Serialize;

use std::time::Duration;

use crate::report::SeriesPage;
use crate::serve::series::BIN_NS;

/// Most samples one load keeps per side (a day of 1-second samples).
pub const MAX_SAMPLES: usize = 86_400;

/// How many samples a load of `duration` sampled every `interval` has, or why it
/// cannot be sampled so: the interval is a whole number of the sink's bins
/// ([`BIN_NS`]), at most the duration, and the samples at most [`MAX_SAMPLES`]. The
/// one statement of the rule: `nnb load` and experiment files both check it.
pub fn sample_count(duration: Duration, interval: Duration) -> Result<usize, String> {
    let bin = Duration::from_nanos(BIN_NS);
    if interval.is_zero() || interval.as_nanos() % bin.as_nanos() != 0 || interval > duration {
        return Err(format!(
            "the sampling interval {interval:?} must be a multiple of the sink's {bin:?} bins \
             and at most the duration ({duration:?})"
        ));
    }
    let samples = duration.as_nanos() / interval.as_nanos();
    match usize::try_from(samples) {
        Ok(n) if n <= MAX_SAMPLES => Ok(n),
        _ => Err(format!(
            "{duration:?} sampled every {interval:?} is more than {MAX_SAMPLES} samples"
        )),
    }
}

/// A load's rate per sampling interval, sent and received.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThroughputSamples {
    /// Length of a sampling interval, s.
    pub interval_s: f64,
    /// How many of the latest samples the means average.
    pub window: usize,
    /// Payload rate the sender sent in each complete interval, bit/s, oldest first.
    pub sent_bps: Vec<f64>,
    /// Payload rate the sink received in each complete interval, bit/s; `None` when
    /// a stream's arrival series did not come back (a partial sum undercounts).
    pub received_bps: Option<Vec<f64>>,
    /// Mean of the latest `window` of `sent_bps` (fewer when there are fewer).
    pub sent_window_bps: Option<f64>,
    /// Mean of the latest `window` of `received_bps`.
    pub received_window_bps: Option<f64>,
}

impl ThroughputSamples {
    /// The samples of a load with `interval_ns` intervals from the sender's
    /// `sent_bps` and each stream's arrival series (`None` for a stream whose
    /// series did not come back).
    pub fn new(
        interval_ns: u64,
        window: usize,
        sent_bps: Vec<f64>,
        series: &[Option<Vec<SeriesPage>>],
    ) -> ThroughputSamples {
        let received_bps = series
            .iter()
            .map(Option::as_deref)
            .collect::<Option<Vec<&[SeriesPage]>>>()
            .map(|s| received(interval_ns, &s));
        ThroughputSamples {
            interval_s: interval_ns as f64 / 1e9,
            window,
            sent_window_bps: window_mean(&sent_bps, window),
            received_window_bps: received_bps.as_deref().and_then(|r| window_mean(r, window)),
            sent_bps,
            received_bps,
        }
    }
}

/// Mean of the last `window` values (all of them when there are fewer); `None` for
/// none.
pub fn window_mean(values: &[f64], window: usize) -> Option<f64> {
    let latest = &values[values.len().saturating_sub(window.max(1))..];
    (!latest.is_empty()).then(|| latest.iter().sum::<f64>() / latest.len() as f64)
}

/// The received rate per interval from the streams' series pages (see the module
/// documentation), intervals counted from the first whole bin.
fn received(interval_ns: u64, streams: &[&[SeriesPage]]) -> Vec<f64> {
    let Some((bin_ns, whole)) = whole_bins(streams) else {
        return Vec::new();
    };
    let per_interval = usize::try_from(interval_ns / bin_ns).unwrap_or(0).max(1);
    whole
        .chunks_exact(per_interval)
        .take(MAX_SAMPLES)
        .map(|c| rate_of(c, interval_ns))
        .collect()
}

/// The latest `window` received rates per interval (oldest first; fewer when the
/// series holds fewer whole intervals), intervals counted back from the last whole
/// bin: the window of a load that still runs (a continuous throughput staircase's
/// node), read from the streams' series pages while it sends. The bin in progress is
/// left out like any last bin.
pub fn latest_received(interval_ns: u64, window: usize, streams: &[&[SeriesPage]]) -> Vec<f64> {
    let Some((bin_ns, whole)) = whole_bins(streams) else {
        return Vec::new();
    };
    let per_interval = usize::try_from(interval_ns / bin_ns).unwrap_or(0).max(1);
    let mut latest: Vec<f64> = whole
        .rchunks_exact(per_interval)
        .take(window.min(MAX_SAMPLES))
        .map(|c| rate_of(c, interval_ns))
        .collect();
    latest.reverse();
    latest
}

/// Payload bit/s of an interval's bins.
fn rate_of(bins: &[u64], interval_ns: u64) -> f64 {
    bins.iter().sum::<u64>() as f64 * 8e9 / interval_ns as f64
}

/// The streams' bins added up by bin of the sink's clock, the first and the last bin
/// left out (partial), with the bin width; `None` when no page has bins.
fn whole_bins(streams: &[&[SeriesPage]]) -> Option<(u64, Vec<u64>)> {
    let pages = || streams.iter().flat_map(|p| p.iter());
    let bin_ns = pages().map(|p| p.bin_ns).find(|&b| b > 0)?;
    let start = |p: &SeriesPage| p.first_bin.saturating_add(p.offset as u64);
    let lo = pages().filter(|p| !p.bytes.is_empty()).map(start).min()?;
    let hi = pages()
        .map(|p| start(p).saturating_add(p.bytes.len() as u64))
        .max()?;
    // The sink bounds its series, so this span is at most its bins per stream times
    // the streams: bounded by what came back.
    let span = usize::try_from(hi.saturating_sub(lo)).unwrap_or(0);
    let mut bins = vec![0u64; span];
    for p in pages().filter(|p| p.bin_ns == bin_ns) {
        for (i, b) in p.bytes.iter().enumerate() {
            if let Some(slot) = usize::try_from(start(p) - lo)
                .ok()
                .and_then(|s| bins.get_mut(s + i))
            {
                *slot += u64::from(*b);
            }
        }
    }
    let whole = bins.get(1..bins.len().saturating_sub(1)).unwrap_or(&[]);
    Some((bin_ns, whole.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_is_whole_bins_within_the_duration_and_few_enough() {
        let ms = Duration::from_millis;
        assert_eq!(sample_count(ms(1200), ms(300)), Ok(4));
        assert_eq!(sample_count(ms(1250), ms(300)), Ok(4));
        for (d, i) in [(ms(1000), ms(250)), (ms(1000), ms(0)), (ms(200), ms(300))] {
            let e = sample_count(d, i).expect_err("refused");
            assert!(e.contains("multiple of the sink's 100ms bins"), "{e}");
        }
        // A day and a tenth of 1 s samples: beyond MAX_SAMPLES (one day).
        let e = sample_count(Duration::from_secs(95_040), ms(1000)).expect_err("too many");
        assert!(e.contains("more than 86400 samples"), "{e}");
    }

    fn page(stream: u32, first_bin: u64, offset: usize, bytes: Vec<u32>) -> SeriesPage {
        SeriesPage {
            stream,
            bin_ns: 100_000_000,
            first_bin,
            total: offset + bytes.len(),
            offset,
            bytes,
        }
    }

    #[test]
    fn streams_add_up_by_bin_and_partial_ends_are_left_out() {
        // Stream 0: bins 10..=15 (two pages); stream 1: bins 11..=15. Bin 10 is the
        // first (partial) and bin 15 the last: left out. Bins 11..=14 hold
        // 1000 + 500 bytes each; 200 ms intervals: two of 3000 bytes,
        // 3000 * 8 / 0.2 s = 120 kbit/s.
        let s0 = vec![
            page(0, 10, 0, vec![9, 1000, 1000]),
            page(0, 10, 3, vec![1000, 1000, 7]),
        ];
        let s1 = vec![page(1, 11, 0, vec![500, 500, 500, 500, 3])];
        let t = ThroughputSamples::new(200_000_000, 1, vec![1.0, 2.0, 3.0], &[Some(s0), Some(s1)]);
        assert_eq!(t.received_bps, Some(vec![120_000.0, 120_000.0]));
        assert_eq!(t.received_window_bps, Some(120_000.0));
        assert_eq!(t.sent_window_bps, Some(3.0));
        assert_eq!(t.interval_s, 0.2);
    }

    #[test]
    fn a_missing_series_means_no_received_samples() {
        let s0 = vec![page(0, 10, 0, vec![1, 2, 3, 4])];
        let t = ThroughputSamples::new(100_000_000, 20, vec![4.0, 6.0], &[Some(s0), None]);
        assert_eq!((t.received_bps, t.received_window_bps), (None, None));
        // Fewer samples than the window: the mean of all.
        assert_eq!(t.sent_window_bps, Some(5.0));
    }

    #[test]
    fn window_means_take_the_latest() {
        assert_eq!(window_mean(&[1.0, 2.0, 3.0, 5.0], 2), Some(4.0));
        assert_eq!(window_mean(&[], 20), None);
        assert_eq!(window_mean(&[7.0], 0), Some(7.0));
        // 300 ms of bins into 200 ms intervals: one whole interval, the rest left out.
        let s = vec![page(0, 0, 0, vec![0, 10, 10, 10, 0])];
        let t = ThroughputSamples::new(200_000_000, 5, Vec::new(), &[Some(s)]);
        assert_eq!(t.received_bps, Some(vec![20.0 * 8.0 / 0.2]));
    }
}
