//! Latency statistics: an HDR histogram (1 ns to 10 s, 3 significant digits), its
//! serializable summary, and the standard HdrHistogram interval log for `--hist-out`.
//!
//! Memory stays fixed however long a probe runs (sockperf keeps every sample, its
//! issues #133 and #223). Values above 10 s are clamped to 10 s and counted.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Lowest value the histogram tells apart (1 ns).
pub const LOWEST_NS: u64 = 1;
/// Highest value the histogram holds (10 s); larger values are clamped.
pub const HIGHEST_NS: u64 = 10_000_000_000;
/// Significant decimal digits kept for every value.
pub const SIGFIG: u8 = 3;

/// Latencies in nanoseconds, recorded into an HDR histogram of fixed size.
#[derive(Debug, Clone)]
pub struct LatencyHist {
    hist: Histogram<u64>,
    clamped: u64,
}

impl Default for LatencyHist {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHist {
    /// An empty histogram covering [`LOWEST_NS`]..=[`HIGHEST_NS`] at [`SIGFIG`] digits.
    pub fn new() -> Self {
        LatencyHist {
            hist: Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGFIG)
                .expect("constant histogram bounds are valid"),
            clamped: 0,
        }
    }

    /// Records one latency; values above [`HIGHEST_NS`] count as [`HIGHEST_NS`].
    pub fn record(&mut self, ns: u64) {
        if ns > HIGHEST_NS {
            self.clamped += 1;
        }
        self.hist.saturating_record(ns.min(HIGHEST_NS));
    }

    /// Adds all of `other`'s values (same bounds, so it cannot fail).
    pub fn add(&mut self, other: &LatencyHist) {
        // Both histograms have the same fixed bounds: addition never overflows a bucket range.
        let _ = self.hist.add(&other.hist);
        self.clamped += other.clamped;
    }

    /// Forgets every value (for per-interval histograms).
    pub fn reset(&mut self) {
        self.hist.reset();
        self.clamped = 0;
    }

    /// Number of recorded values.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// How many values were above [`HIGHEST_NS`] and clamped.
    pub fn clamped(&self) -> u64 {
        self.clamped
    }

    /// The underlying histogram (for serialization or custom quantiles).
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.hist
    }

    /// Nanoseconds at quantile `q` (0.0..=1.0); 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.value_at_quantile(q)
        }
    }

    /// The summary statistics of everything recorded so far.
    pub fn summary(&self) -> LatencySummary {
        let h = &self.hist;
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: h.len(),
            min_ns: h.min(),
            p50_ns: h.value_at_quantile(0.50),
            p90_ns: h.value_at_quantile(0.90),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            p9999_ns: h.value_at_quantile(0.9999),
            max_ns: h.max(),
            mean_ns: h.mean(),
            stddev_ns: h.stdev(),
        }
    }
}

/// Summary statistics of a set of latencies, in nanoseconds.
///
/// Percentiles are HDR values (within 0.1% of the true sample). Which quantity the
/// values are (RTT, RTT/2, corrected or not) is said by the field holding the summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Number of values.
    pub count: u64,
    /// Smallest value.
    pub min_ns: u64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// 99.99th percentile.
    pub p9999_ns: u64,
    /// Largest value.
    pub max_ns: u64,
    /// Arithmetic mean.
    pub mean_ns: f64,
    /// Standard deviation.
    pub stddev_ns: f64,
}

impl LatencySummary {
    /// Every figure divided by two: the one-way estimate RTT/2, valid only for a
    /// symmetric path (sockperf's convention); always shown labelled as RTT/2.
    pub fn halved(&self) -> LatencySummary {
        LatencySummary {
            count: self.count,
            min_ns: self.min_ns / 2,
            p50_ns: self.p50_ns / 2,
            p90_ns: self.p90_ns / 2,
            p99_ns: self.p99_ns / 2,
            p999_ns: self.p999_ns / 2,
            p9999_ns: self.p9999_ns / 2,
            max_ns: self.max_ns / 2,
            mean_ns: self.mean_ns / 2.0,
            stddev_ns: self.stddev_ns / 2.0,
        }
    }

    /// The percentile rows shown in tables: (label, value in ns).
    pub fn rows(&self) -> [(&'static str, f64); 9] {
        [
            ("min", self.min_ns as f64),
            ("p50", self.p50_ns as f64),
            ("p90", self.p90_ns as f64),
            ("p99", self.p99_ns as f64),
            ("p99.9", self.p999_ns as f64),
            ("p99.99", self.p9999_ns as f64),
            ("max", self.max_ns as f64),
            ("mean", self.mean_ns),
            ("stddev", self.stddev_ns),
        ]
    }
}

/// Why the histogram log could not be written.
#[derive(Debug, Error)]
pub enum HistLogError {
    /// The file could not be created or written.
    #[error("histogram log: {0}")]
    Io(#[from] io::Error),
    /// Encoding a histogram failed.
    #[error("histogram log: encoding an interval failed: {0}")]
    Encode(String),
}

/// A standard HdrHistogram interval log (format 1.3, compressed V2 histograms, values
/// in ns), readable by HdrHistogram's `HistogramLogProcessor` and the Rust/Python/Go
/// log readers. Timestamps are seconds since the `BaseTime` written in the header.
///
/// It writes to a file ([`HistLog::create`]) or to any writer ([`HistLog::new`]), e.g.
/// a `Vec<u8>` when an agent returns the log to its controller.
pub struct HistLog<W: Write = BufWriter<File>> {
    out: W,
    serializer: V2DeflateSerializer,
    base: SystemTime,
}

impl HistLog {
    /// Creates (truncates) `path` and writes the log header with `comment`.
    pub fn create(path: &Path, comment: &str) -> Result<HistLog, HistLogError> {
        HistLog::new(BufWriter::new(File::create(path)?), comment)
    }
}

impl<W: Write> HistLog<W> {
    /// Starts a log on `out`, writing its header with `comment`.
    pub fn new(mut out: W, comment: &str) -> Result<HistLog<W>, HistLogError> {
        let mut serializer = V2DeflateSerializer::new();
        let now = SystemTime::now();
        IntervalLogWriterBuilder::new()
            .add_comment(comment)
            .add_comment("[Histogram log format version 1.3]")
            .with_start_time(now)
            .with_base_time(now)
            .begin_log_with(&mut out, &mut serializer)?;
        writeln!(
            out,
            "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
        )?;
        Ok(HistLog {
            out,
            serializer,
            base: now,
        })
    }

    /// The log's `BaseTime`: interval start offsets count from it.
    pub fn base_time(&self) -> SystemTime {
        self.base
    }

    /// Appends one interval: `start` is its offset from the log's base time, `tag`
    /// names the series (letters, digits, `_` only; e.g. "rtt", "rtt_intended").
    pub fn write(
        &mut self,
        hist: &LatencyHist,
        start: Duration,
        length: Duration,
        tag: Option<&str>,
    ) -> Result<(), HistLogError> {
        // A builder without headers writes nothing of its own: this only borrows the
        // writer and serializer for one interval line.
        let mut w =
            IntervalLogWriterBuilder::new().begin_log_with(&mut self.out, &mut self.serializer)?;
        w.write_histogram(&hist.hist, start, length, tag.and_then(Tag::new))
            .map_err(|e| HistLogError::Encode(e.to_string()))
    }

    /// Flushes the log and hands back its writer.
    pub fn finish(mut self) -> Result<W, HistLogError> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;

    #[test]
    fn summary_of_known_values() {
        let mut h = LatencyHist::new();
        (1..=1000u64).for_each(|v| h.record(v * 1000));
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert_eq!(s.min_ns, 1000);
        assert!(
            (s.p50_ns as f64 - 500_000.0).abs() / 500_000.0 < 0.001,
            "{s:?}"
        );
        assert!(
            (s.p99_ns as f64 - 990_000.0).abs() / 990_000.0 < 0.001,
            "{s:?}"
        );
        assert!((s.max_ns as f64 - 1_000_000.0).abs() / 1e6 < 0.001, "{s:?}");
        assert!((s.mean_ns - 500_500.0).abs() / 500_500.0 < 0.001, "{s:?}");
        let half = s.halved();
        assert_eq!(half.p50_ns, s.p50_ns / 2);
        assert_eq!(half.count, s.count);
        assert_eq!(LatencyHist::new().summary(), LatencySummary::default());
    }

    #[test]
    fn clamps_and_merges() {
        let mut a = LatencyHist::new();
        a.record(20_000_000_000);
        assert_eq!(a.clamped(), 1);
        assert!(a.summary().max_ns >= HIGHEST_NS);
        let mut b = LatencyHist::new();
        b.record(5);
        b.add(&a);
        assert_eq!((b.count(), b.clamped()), (2, 1));
        b.reset();
        assert_eq!((b.count(), b.quantile(0.5)), (0, 0));
    }

    #[test]
    fn interval_log_round_trip() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("rtt.hlog");
        let mut log = HistLog::create(&path, "nnb test").expect("create log");
        let mut h = LatencyHist::new();
        for v in [10_000u64, 20_000, 30_000] {
            h.record(v);
        }
        log.write(
            &h,
            Duration::from_secs(1),
            Duration::from_secs(1),
            Some("rtt"),
        )
        .expect("write interval");
        log.finish().expect("flush");
        let text = std::fs::read(&path).expect("read log");
        let mut intervals = 0;
        for entry in IntervalLogIterator::new(&text) {
            if let Ok(LogEntry::Interval(iv)) = entry {
                intervals += 1;
                assert_eq!(iv.tag().map(|t| t.as_str()), Some("rtt"));
                let raw = base64_decode(iv.encoded_histogram());
                let back: Histogram<u64> = Deserializer::new()
                    .deserialize(&mut raw.as_slice())
                    .expect("decodes");
                assert_eq!(back.len(), 3);
                assert!(back.equivalent(back.max(), 30_000));
            } else {
                assert!(entry.is_ok(), "log line does not parse: {entry:?}");
            }
        }
        assert_eq!(intervals, 1);
    }

    /// Standard base64 decoding, enough for the test's round trip.
    fn base64_decode(s: &str) -> Vec<u8> {
        let val = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            _ => 63,
        };
        let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=').map(val).collect();
        bytes
            .chunks(4)
            .flat_map(|c| {
                let n = c.iter().fold(0u32, |acc, &v| acc << 6 | v as u32) << (6 * (4 - c.len()));
                let b = n.to_be_bytes();
                b[1..c.len()].to_vec()
            })
            .collect()
    }
}
