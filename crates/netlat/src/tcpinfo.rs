//! Why a TCP load is slower than its UDP twin (Wang & Ng §V.A): the sender's
//! `TCP_INFO` sampled through the transfer, and the *quiet periods* found in it.
//!
//! A [`Sampler`] thread reads `TCP_INFO` of the load's connection every interval
//! (`--tcp-info 1ms`) and keeps each reading (retransmissions, congestion window,
//! smoothed RTT, unacknowledged segments, delivery rate, bytes acknowledged and sent),
//! at most [`MAX_SAMPLES`] of them. A [`QuietFinder`] reads the same samples as they
//! come, over the whole transfer whatever the bound: a quiet period is a run of
//! consecutive samples in which neither the bytes sent (segments sent on kernels
//! before 4.19) nor the bytes acknowledged moved, spanning at least the threshold
//! (`--quiet 10ms`). It starts at the last sample that saw activity and ends at the
//! last sample that saw none, so its length is what the samples prove silent: a lower
//! bound, short of the truth by at most one sampling interval. For each period the
//! finder records the retransmissions counted from its start to the sample that saw
//! activity again (`retrans_during`: a retransmission timeout ending the silence
//! shows here) and in the threshold after that sample (`retrans_after`). The seed
//! found quiet periods of tens of ms with no retransmission in or after them: the
//! sender was descheduled, not recovering from loss.
//!
//! A paced load idles between its units by design: its quiet periods are the pacing,
//! not the network. The seed's TCPTest sends as fast as it can.

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use nnb_sys::socket::TcpInfo;
use serde::Serialize;

use crate::clock::{duration_ns, now_ns, wait_until};

/// Most `TCP_INFO` samples kept (100 s at 1 ms); later ones are counted in
/// [`TcpInfoReport::samples_left_out`] (the quiet periods still see them).
pub const MAX_SAMPLES: usize = 100_000;
/// Most quiet periods kept; later ones are still counted.
pub const MAX_PERIODS: usize = 10_000;
/// The seed's threshold for a quiet period: 10 ms.
pub const DEFAULT_QUIET: Duration = Duration::from_millis(10);

/// One `TCP_INFO` reading.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TcpInfoSample {
    /// When it was read, ns since the load's start.
    pub t_ns: u64,
    /// Segments retransmitted so far.
    pub retrans_total: u64,
    /// Congestion window, segments.
    pub cwnd: u32,
    /// Smoothed round-trip time, µs.
    pub srtt_us: u32,
    /// Segments sent and not yet acknowledged.
    pub unacked: u32,
    /// The kernel's delivery rate estimate, bit/s (`None` before Linux 4.9).
    pub delivery_rate_bps: Option<f64>,
    /// Bytes the peer acknowledged so far (`None` before Linux 4.1).
    pub bytes_acked: Option<u64>,
    /// Data bytes sent so far, retransmissions included (`None` before Linux 4.19).
    pub bytes_sent: Option<u64>,
    /// Segments sent so far: the activity counter where `bytes_sent` is missing.
    #[serde(skip)]
    pub segs_out: Option<u32>,
}

impl TcpInfoSample {
    /// A sample from a `TCP_INFO` reading taken at `t_ns`.
    pub fn new(t_ns: u64, i: &TcpInfo) -> Self {
        TcpInfoSample {
            t_ns,
            retrans_total: u64::from(i.total_retrans),
            cwnd: i.cwnd,
            srtt_us: i.srtt_us,
            unacked: i.unacked,
            delivery_rate_bps: i.delivery_rate.map(|r| r as f64 * 8.0),
            bytes_acked: i.bytes_acked,
            bytes_sent: i.bytes_sent,
            segs_out: i.segs_out,
        }
    }

    /// What moves when the connection sends or is acknowledged.
    fn activity(&self) -> (Option<u64>, Option<u64>) {
        (
            self.bytes_sent.or(self.segs_out.map(u64::from)),
            self.bytes_acked,
        )
    }
}

/// The sampled `TCP_INFO` of one connection (a load result's `tcp_info`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TcpInfoReport {
    /// Sampling interval, ms (fractions for sub-millisecond intervals).
    pub interval_ms: f64,
    /// The samples, in time order (at most [`MAX_SAMPLES`]).
    pub samples: Vec<TcpInfoSample>,
    /// Samples taken beyond [`MAX_SAMPLES`], not kept.
    pub samples_left_out: u64,
    /// Segments retransmitted over the transfer: the last sample's count less the
    /// first's.
    pub retransmissions: u64,
}

/// One quiet period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QuietPeriod {
    /// Its start, ns since the load's start: the last sample that saw activity.
    pub start_ns: u64,
    /// How long the samples saw nothing sent and nothing acknowledged, ns.
    pub len_ns: u64,
    /// Retransmissions from its start to the sample that saw activity again.
    pub retrans_during: u64,
    /// Retransmissions in the threshold after that sample.
    pub retrans_after: u64,
}

/// The quiet periods of one connection (a load result's `quiet`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuietReport {
    /// The threshold, ns: a quiet period is at least this long.
    pub threshold_ns: u64,
    /// The periods, in time order (at most [`MAX_PERIODS`]).
    pub periods: Vec<QuietPeriod>,
    /// How many periods there were (kept or not).
    pub count: u64,
    /// The longest, ns (0 when none).
    pub longest_ns: u64,
    /// Their total length, ns.
    pub total_ns: u64,
}

impl QuietReport {
    /// Periods with a retransmission in or right after them.
    pub fn with_retransmission(&self) -> usize {
        self.periods
            .iter()
            .filter(|p| p.retrans_during + p.retrans_after > 0)
            .count()
    }
}

/// Finds quiet periods in samples fed in time order (see the module documentation).
#[derive(Debug)]
pub struct QuietFinder {
    threshold_ns: u64,
    /// The last sample that saw activity (or the first sample).
    active: Option<TcpInfoSample>,
    /// The latest sample.
    last: Option<TcpInfoSample>,
    /// Periods whose `retrans_after` is still being counted: (index, end sample's
    /// time, its retransmissions).
    pending: Vec<(usize, u64, u64)>,
    report: QuietReport,
}

impl QuietFinder {
    /// A finder of periods of at least `threshold`.
    pub fn new(threshold: Duration) -> Self {
        let threshold_ns = duration_ns(threshold);
        QuietFinder {
            threshold_ns,
            active: None,
            last: None,
            pending: Vec::new(),
            report: QuietReport {
                threshold_ns,
                periods: Vec::new(),
                count: 0,
                longest_ns: 0,
                total_ns: 0,
            },
        }
    }

    /// Reads the next sample.
    pub fn push(&mut self, s: &TcpInfoSample) {
        let threshold = self.threshold_ns;
        let periods = &mut self.report.periods;
        self.pending.retain(|&(i, end_ns, retrans)| {
            let done = s.t_ns >= end_ns.saturating_add(threshold);
            // Counted up to the first sample a threshold past the end, that one included.
            periods[i].retrans_after = s.retrans_total.saturating_sub(retrans);
            !done
        });
        let (Some(active), Some(last)) = (self.active, self.last) else {
            self.active = Some(*s);
            self.last = Some(*s);
            return;
        };
        if s.activity() != last.activity() {
            let len_ns = last.t_ns.saturating_sub(active.t_ns);
            if len_ns >= threshold && threshold > 0 {
                let kept = self.record(QuietPeriod {
                    start_ns: active.t_ns,
                    len_ns,
                    retrans_during: s.retrans_total.saturating_sub(active.retrans_total),
                    retrans_after: 0,
                });
                if let Some(i) = kept {
                    self.pending.push((i, s.t_ns, s.retrans_total));
                }
            }
            self.active = Some(*s);
        }
        self.last = Some(*s);
    }

    /// Counts a period and keeps it while there is room; its index when kept.
    fn record(&mut self, p: QuietPeriod) -> Option<usize> {
        let r = &mut self.report;
        r.count += 1;
        r.longest_ns = r.longest_ns.max(p.len_ns);
        r.total_ns += p.len_ns;
        (r.periods.len() < MAX_PERIODS).then(|| {
            r.periods.push(p);
            r.periods.len() - 1
        })
    }

    /// The periods found. Silence after the last activity is the transfer's end,
    /// not a period.
    pub fn finish(self) -> QuietReport {
        self.report
    }
}

/// What a [`Sampler`] hands back.
#[derive(Debug, Clone)]
pub struct Sampled {
    /// The samples.
    pub tcp_info: TcpInfoReport,
    /// The quiet periods in them.
    pub quiet: QuietReport,
}

/// A thread reading `TCP_INFO` of one connection every interval until
/// [`Sampler::finish`].
#[derive(Debug)]
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Sampled>,
}

impl Sampler {
    /// Starts sampling `conn` (a clone of its descriptor) every `interval` from
    /// `start_ns` (the load's start: sample times count from it), finding quiet
    /// periods of at least `quiet`.
    pub fn start(
        conn: &TcpStream,
        interval: Duration,
        quiet: Duration,
        start_ns: u64,
    ) -> std::io::Result<Sampler> {
        let conn = conn.try_clone()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let step = duration_ns(interval).max(1);
        let thread = std::thread::Builder::new()
            .name("nnb-tcp-info".into())
            .spawn(move || {
                let mut samples = Vec::new();
                let mut left_out = 0u64;
                let mut finder = QuietFinder::new(quiet);
                let (mut first, mut last) = (None, None);
                let mut next = start_ns;
                loop {
                    // The last reading is taken after the stop, so it sees the end.
                    let stopping = stop2.load(Ordering::Relaxed);
                    wait_until(next, 0);
                    let Ok(info) = nnb_sys::socket::tcp_info(&conn) else {
                        break;
                    };
                    let s = TcpInfoSample::new(now_ns().saturating_sub(start_ns), &info);
                    first.get_or_insert(s.retrans_total);
                    last = Some(s.retrans_total);
                    finder.push(&s);
                    if samples.len() < MAX_SAMPLES {
                        samples.push(s);
                    } else {
                        left_out += 1;
                    }
                    if stopping {
                        break;
                    }
                    // A late reading skips the slots it missed, not catching up.
                    next = next.saturating_add(step).max(now_ns());
                }
                Sampled {
                    tcp_info: TcpInfoReport {
                        interval_ms: step as f64 / 1e6,
                        samples,
                        samples_left_out: left_out,
                        retransmissions: last.unwrap_or(0).saturating_sub(first.unwrap_or(0)),
                    },
                    quiet: finder.finish(),
                }
            })?;
        Ok(Sampler { stop, thread })
    }

    /// Takes one last reading, stops and returns what was sampled.
    pub fn finish(self) -> Option<Sampled> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample at `ms` with `sent` and `acked` bytes and `retrans` retransmissions.
    fn s(ms: u64, sent: u64, acked: u64, retrans: u64) -> TcpInfoSample {
        TcpInfoSample {
            t_ns: ms * 1_000_000,
            retrans_total: retrans,
            cwnd: 10,
            srtt_us: 100,
            unacked: 0,
            delivery_rate_bps: None,
            bytes_acked: Some(acked),
            bytes_sent: Some(sent),
            segs_out: None,
        }
    }

    fn find(samples: &[TcpInfoSample], threshold_ms: u64) -> QuietReport {
        let mut f = QuietFinder::new(Duration::from_millis(threshold_ms));
        for x in samples {
            f.push(x);
        }
        f.finish()
    }

    #[test]
    fn a_silence_of_the_threshold_is_a_period() {
        // Activity every ms to 5, nothing from 5 to 17 (samples 6..=17 equal to 5's),
        // activity again at 18: silent from 5 to 17, 12 ms.
        let mut v: Vec<_> = (0..=5).map(|k| s(k, k * 1000, k * 1000, 0)).collect();
        v.extend((6..=17).map(|k| s(k, 5000, 5000, 0)));
        v.extend((18..=40).map(|k| s(k, k * 1000, k * 1000, 0)));
        let r = find(&v, 10);
        assert_eq!(r.count, 1);
        assert_eq!(
            r.periods,
            vec![QuietPeriod {
                start_ns: 5_000_000,
                len_ns: 12_000_000,
                retrans_during: 0,
                retrans_after: 0,
            }]
        );
        assert_eq!((r.longest_ns, r.total_ns), (12_000_000, 12_000_000));
        assert_eq!(r.with_retransmission(), 0);
        // 13 ms is more than it was: none.
        assert_eq!(find(&v, 13).count, 0);
    }

    #[test]
    fn acknowledgments_alone_break_the_silence() {
        // Nothing sent from 0 to 30 ms, but acknowledgments arrive every 5 ms: no
        // silence is 10 ms long.
        let v: Vec<_> = (0..=30).map(|k| s(k, 1000, (k / 5) * 100, 0)).collect();
        assert_eq!(find(&v, 10).count, 0);
    }

    #[test]
    fn retransmissions_in_and_after_a_period() {
        // Silent from 0 to 20 ms; at 21 a retransmission timeout sends again (one
        // retransmission during); at 25 another (after: within 10 ms of 21); at 40 a
        // third, too late to count.
        let mut v: Vec<_> = (0..=20).map(|k| s(k, 100, 0, 0)).collect();
        v.push(s(21, 200, 0, 1));
        v.extend((22..=24).map(|k| s(k, 200 + k, 0, 1)));
        v.extend((25..=39).map(|k| s(k, 200 + k, 0, 2)));
        v.extend((40..=45).map(|k| s(k, 200 + k, 0, 3)));
        let r = find(&v, 10);
        assert_eq!(r.count, 1);
        let p = r.periods[0];
        assert_eq!((p.start_ns, p.len_ns), (0, 20_000_000));
        assert_eq!((p.retrans_during, p.retrans_after), (1, 1));
        assert_eq!(r.with_retransmission(), 1);
    }

    #[test]
    fn segments_stand_in_for_bytes_sent_on_old_kernels() {
        let mut v: Vec<_> = (0..=15)
            .map(|k| TcpInfoSample {
                bytes_sent: None,
                segs_out: Some(if k < 3 { k as u32 } else { 3 }),
                ..s(k, 0, 0, 0)
            })
            .collect();
        v.push(TcpInfoSample {
            bytes_sent: None,
            segs_out: Some(4),
            ..s(16, 0, 0, 0)
        });
        let r = find(&v, 10);
        assert_eq!(r.count, 1);
        assert_eq!(r.periods[0].len_ns, 12_000_000); // 3 to 15 ms
    }

    #[test]
    fn real_connection_samples() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
        let mut tx = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (mut rx, _) = listener.accept().expect("accept");
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            let mut n = 0;
            while let Ok(k) = rx.read(&mut buf) {
                if k == 0 {
                    break;
                }
                n += k;
            }
            n
        });
        let sampler = Sampler::start(&tx, Duration::from_millis(1), DEFAULT_QUIET, now_ns())
            .expect("sampler");
        tx.write_all(&vec![1u8; 1 << 20]).expect("write");
        std::thread::sleep(Duration::from_millis(20));
        let got = sampler.finish().expect("sampled");
        tx.shutdown(std::net::Shutdown::Write).expect("shutdown");
        assert_eq!(reader.join().expect("reader"), 1 << 20);
        let info = got.tcp_info;
        assert!(info.samples.len() >= 2, "{}", info.samples.len());
        assert_eq!(info.retransmissions, 0);
        let last = info.samples.last().expect("a sample");
        if let Some(acked) = last.bytes_acked {
            assert!(acked >= 1 << 20, "{acked}");
        }
        assert!(info.samples.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
    }
}
