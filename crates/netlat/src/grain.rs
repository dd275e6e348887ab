//! Fine-grained throughput and buffer bursts, as Wang & Ng define them (seed 003,
//! §V.A, Figs 5/6 and l.426-441).
//!
//! # Why not the sink's 100 ms bins
//!
//! Their receiver computes a throughput "every time when the receiver receives
//! 256KB of data": one rate per *grain* of bytes. At 1 Gbit/s a 256 KiB grain
//! arrives in about 2.1 ms, so the on/off pattern of a receiver scheduled off for
//! tens of ms, and the bursts above the link rate that follow, are visible only at
//! that scale: a 100 ms bin ([`crate::serve::series::BIN_NS`]) averages a 29 ms hold
//! and its release into the sending rate and hides both.
//!
//! # What a receiver records: arrival checkpoints
//!
//! A receiver does not know the grain a load will ask for, so it records, per stream,
//! [`Arrivals`]: the arrival time at which the stream's received bytes first reached
//! each multiple of [`CHECKPOINT_BYTES`] (16 KiB; checkpoint 0 is the first
//! arrival). Any grain that is a multiple of [`CHECKPOINT_BYTES`] is then exact:
//! the end of grain `k` is checkpoint `k * grain / CHECKPOINT_BYTES`, the arrival of
//! the datagram (UDP, kernel receive timestamp) or read (TCP) that completed it. The
//! newest [`MAX_CHECKPOINTS`] are kept (1 GiB of data, 8.6 s at 1 Gbit/s, more than
//! the seed's 800 MB transfers), 8 bytes each: at most 512 KiB per stream, allocated
//! only as data arrives (1/2048 of the bytes received). Older checkpoints are dropped
//! and their grains counted as left out.
//!
//! # The series and the bursts, from grain ends
//!
//! Grain `k` (`k >= 1`) spans from the end of grain `k - 1` to its own end; its rate
//! is `grain * 8 / span` ([`FineSeries`]). A *buffer burst period* is a maximal run
//! of consecutive grains each received above the full link rate; its *buffer burst
//! data* is the data received in it beyond what the link would have delivered in the
//! period's duration: `bytes - link_bps / 8 * len` ([`BufferBursts`]). It bounds the
//! buffer that held the data from below (the seed's 7.7 MB). The rule compares with
//! the link rate, never with the sending rate: data released at four times the rate
//! it was sent at is no buffer burst while that stays below the link rate.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// Bytes between two arrival checkpoints (16 KiB): grains are whole multiples of it.
pub const CHECKPOINT_BYTES: u64 = 16 * 1024;
/// Most checkpoints a stream keeps (newest first kept): 1 GiB of data.
pub const MAX_CHECKPOINTS: usize = 65_536;
/// The seed's grain: one throughput per 256 KB received.
pub const DEFAULT_GRAIN: u64 = 256 * 1024;
/// Largest grain accepted: 1 GiB, the data [`MAX_CHECKPOINTS`] cover.
pub const MAX_GRAIN: u64 = CHECKPOINT_BYTES * MAX_CHECKPOINTS as u64;
/// The seed's full link rate, bit/s (1 Gbit/s).
pub const DEFAULT_LINK_BPS: f64 = 1e9;

/// What a load measures at the receiver beside its totals: the fine-grained series
/// for `grain` and the buffer bursts against `link_bps` (`nnb load --grain --link`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FineSettings {
    /// Bytes per throughput point (seed: 256 KB), a multiple of [`CHECKPOINT_BYTES`].
    pub grain: u64,
    /// The full link rate, bit/s (seed: 1 Gbit/s).
    pub link_bps: f64,
}

impl Default for FineSettings {
    fn default() -> Self {
        FineSettings {
            grain: DEFAULT_GRAIN,
            link_bps: DEFAULT_LINK_BPS,
        }
    }
}

impl FineSettings {
    /// Checks both settings.
    pub fn validate(&self) -> Result<(), String> {
        validate_grain(self.grain)?;
        validate_link(self.link_bps)
    }

    /// The series and the bursts of a stream from the ends of its grains as a
    /// receiver reported them (of this grain or a divisor of it); `None` when they
    /// cannot be cut into this grain.
    pub fn measure(&self, ends: &GrainEnds) -> Option<(FineSeries, BufferBursts)> {
        let ends = ends.coarsen(self.grain)?;
        Some((ends.series(), ends.buffer_bursts(self.link_bps)))
    }
}

/// Checks a grain: a whole multiple of [`CHECKPOINT_BYTES`], at most [`MAX_GRAIN`].
pub fn validate_grain(grain: u64) -> Result<(), String> {
    if grain == 0 || grain % CHECKPOINT_BYTES != 0 || grain > MAX_GRAIN {
        return Err(format!(
            "a grain of {grain} bytes: a whole multiple of {CHECKPOINT_BYTES} bytes (16K, the \
             receiver's checkpoints), at most {MAX_GRAIN} (1G)"
        ));
    }
    Ok(())
}

/// Checks a link rate: finite and above zero.
pub fn validate_link(link_bps: f64) -> Result<(), String> {
    if !(link_bps.is_finite() && link_bps > 0.0) {
        return Err(format!(
            "a link rate of {link_bps} bit/s must be above zero"
        ));
    }
    Ok(())
}

/// One stream's arrival checkpoints (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Arrivals {
    /// Bytes received so far.
    bytes: u64,
    /// Arrival of the first byte (checkpoint 0), kept when checkpoint 0 is dropped.
    start_ns: u64,
    /// Index of `times[0]`: checkpoints before it were dropped.
    first: u64,
    /// Arrival time of checkpoint `first + i`, ns of the receiver's clock.
    times: VecDeque<u64>,
}

impl Arrivals {
    /// Adds `len` bytes that arrived at `arrival_ns`.
    pub fn record(&mut self, arrival_ns: u64, len: u64) {
        if len == 0 {
            return;
        }
        if self.bytes == 0 {
            self.start_ns = arrival_ns;
        }
        let next = self.first + self.times.len() as u64;
        self.bytes = self.bytes.saturating_add(len);
        // Checkpoints 0..=bytes / Q are reached now; those from `next` on are new.
        let reached = self.bytes / CHECKPOINT_BYTES + 1;
        let mut new = reached.saturating_sub(next);
        if new > MAX_CHECKPOINTS as u64 {
            self.times.clear();
            self.first = reached - MAX_CHECKPOINTS as u64;
            new = MAX_CHECKPOINTS as u64;
        }
        for _ in 0..new {
            if self.times.len() == MAX_CHECKPOINTS {
                self.times.pop_front();
                self.first += 1;
            }
            self.times.push_back(arrival_ns);
        }
    }

    /// Bytes received.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The ends of whole grains of `grain` bytes still known (`grain` a multiple of
    /// [`CHECKPOINT_BYTES`], checked with [`validate_grain`]): the index of the first
    /// one (grain ends before it were dropped) and each one's arrival time relative
    /// to the stream's first arrival. End 0 is the first arrival itself.
    pub fn grain_ends(&self, grain: u64) -> GrainEnds {
        let step = (grain / CHECKPOINT_BYTES).max(1);
        let first_end = self.first.div_ceil(step);
        let times = (first_end..)
            .map_while(|k| {
                let i = usize::try_from(k.checked_mul(step)? - self.first).ok()?;
                self.times.get(i).copied()
            })
            .map(|t| t.saturating_sub(self.start_ns))
            .collect();
        GrainEnds {
            grain,
            first_end,
            t_ns: times,
        }
    }
}

/// Ends of consecutive grains of one stream, as a receiver reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrainEnds {
    /// Grain size, bytes.
    pub grain: u64,
    /// Index of the end `t_ns[0]` (0 = the stream's first arrival): the ends before
    /// it were dropped from the receiver's bounded memory.
    pub first_end: u64,
    /// Arrival of each end, ns after the stream's first arrival.
    pub t_ns: Vec<u64>,
}

/// One grain's throughput: `streams[i].fine.points[j]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FinePoint {
    /// Arrival of the grain's last byte, ns after the stream's first arrival.
    pub t_ns: u64,
    /// The grain's bits over its arrival span (from the previous grain's end), bit/s.
    pub bps: f64,
}

/// A stream's fine-grained throughput (`streams[i].fine`): one rate per grain.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FineSeries {
    /// Grain size, bytes (seed: 256 KB).
    pub grain_bytes: u64,
    /// One point per whole grain received, in arrival order.
    pub points: Vec<FinePoint>,
    /// Grains received but not in `points`: those whose ends the receiver's bounded
    /// memory dropped (the oldest).
    pub points_left_out: u64,
}

/// One buffer burst period (`streams[i].buffer_bursts.periods[j]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BurstPeriod {
    /// Start (end of the grain before the period), ns after the stream's first arrival.
    pub start_ns: u64,
    /// Length, ns.
    pub len_ns: u64,
    /// Bytes received in it (whole grains).
    pub bytes: u64,
    /// Buffer burst data: `bytes` less what the link rate delivers in `len_ns`.
    pub burst_bytes: u64,
}

/// A stream's buffer bursts against the full link rate (`streams[i].buffer_bursts`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BufferBursts {
    /// The full link rate, bit/s (seed: 1 Gbit/s).
    pub link_bps: f64,
    /// Every period, in arrival order.
    pub periods: Vec<BurstPeriod>,
    /// The largest buffer burst data of a period (the seed's 7.7 MB); 0 without one.
    pub largest_burst_bytes: u64,
    /// Buffer burst data summed over the periods.
    pub total_burst_bytes: u64,
}

impl GrainEnds {
    /// The span of grain `i` of `t_ns` (from end `i - 1` to end `i`), at least 1 ns:
    /// ends that arrived together (a TCP read holding several grains) or out of
    /// order (receive timestamps of two CPUs) would otherwise divide by zero.
    fn span(&self, i: usize) -> u64 {
        self.t_ns[i].saturating_sub(self.t_ns[i - 1]).max(1)
    }

    /// The ends of grains of `grain` bytes, a whole multiple of this one's (`None`
    /// otherwise): every `grain / self.grain`-th end.
    pub fn coarsen(&self, grain: u64) -> Option<GrainEnds> {
        if self.grain == 0 || grain == 0 || grain % self.grain != 0 {
            return None;
        }
        let step = grain / self.grain;
        let first_end = self.first_end.div_ceil(step);
        let skip = usize::try_from(first_end * step - self.first_end).ok()?;
        let step = usize::try_from(step).ok()?;
        Some(GrainEnds {
            grain,
            first_end,
            t_ns: self.t_ns.iter().skip(skip).step_by(step).copied().collect(),
        })
    }

    /// The fine-grained series: one point per pair of consecutive ends.
    pub fn series(&self) -> FineSeries {
        let points = (1..self.t_ns.len())
            .map(|i| FinePoint {
                t_ns: self.t_ns[i],
                bps: self.grain as f64 * 8e9 / self.span(i) as f64,
            })
            .collect();
        FineSeries {
            grain_bytes: self.grain,
            points,
            points_left_out: self.first_end,
        }
    }

    /// The buffer burst periods against `link_bps` (see the module documentation).
    pub fn buffer_bursts(&self, link_bps: f64) -> BufferBursts {
        let above = |i: usize| self.grain as f64 * 8e9 > link_bps * self.span(i) as f64;
        let mut bursts = BufferBursts {
            link_bps,
            ..BufferBursts::default()
        };
        let mut i = 1;
        while i < self.t_ns.len() {
            if !above(i) {
                i += 1;
                continue;
            }
            let first = i;
            while i < self.t_ns.len() && above(i) {
                i += 1;
            }
            let start_ns = self.t_ns[first - 1];
            let len_ns = self.t_ns[i - 1].saturating_sub(start_ns);
            let bytes = (i - first) as u64 * self.grain;
            let link_bytes = link_bps / 8.0 * len_ns as f64 / 1e9;
            let burst_bytes = (bytes as f64 - link_bytes).max(0.0).round() as u64;
            bursts.largest_burst_bytes = bursts.largest_burst_bytes.max(burst_bytes);
            bursts.total_burst_bytes += burst_bytes;
            bursts.periods.push(BurstPeriod {
                start_ns,
                len_ns,
                bytes,
                burst_bytes,
            });
        }
        bursts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: u64 = CHECKPOINT_BYTES;

    /// Feeds `n` datagrams of `len` bytes `gap` ns apart from `t`; returns the next time.
    fn feed(a: &mut Arrivals, n: u64, len: u64, t: u64, gap: u64) -> u64 {
        for i in 0..n {
            a.record(t + i * gap, len);
        }
        t + n * gap
    }

    #[test]
    fn grain_ends_are_the_arrivals_that_complete_each_grain() {
        let mut a = Arrivals::default();
        // 1 KiB every 1 us from t = 1000: byte 64 KiB is completed by datagram 64,
        // which arrives at 1000 + 63 * 1000.
        feed(&mut a, 200, 1024, 1000, 1000);
        let ends = a.grain_ends(4 * Q);
        assert_eq!(ends.first_end, 0);
        assert_eq!(ends.t_ns, vec![0, 63_000, 127_000, 191_000]);
        let s = ends.series();
        // 64 KiB over 64 us: 8.192 Gbit/s.
        assert_eq!(s.points.len(), 3);
        assert_eq!(s.points[1].t_ns, 127_000);
        assert!((s.points[1].bps - 65_536.0 * 8e9 / 64_000.0).abs() < 1e-3);
        assert_eq!(s.points_left_out, 0);
    }

    #[test]
    fn one_datagram_crossing_several_checkpoints_ends_them_all() {
        let mut a = Arrivals::default();
        a.record(5, 100);
        a.record(9, 3 * Q);
        assert_eq!(a.grain_ends(Q).t_ns, vec![0, 4, 4, 4]);
        // Grains ending together: the span is held to 1 ns, never zero.
        let s = a.grain_ends(Q).series();
        assert!(s.points.iter().all(|p| p.bps.is_finite()));
    }

    #[test]
    fn coarser_grains_are_every_nth_end_of_the_checkpoints() {
        let mut a = Arrivals::default();
        feed(&mut a, MAX_CHECKPOINTS as u64 + 40, Q, 0, 10);
        let checkpoints = a.grain_ends(Q);
        for grain in [Q, 4 * Q, 16 * Q, 48 * Q] {
            assert_eq!(
                checkpoints.coarsen(grain),
                Some(a.grain_ends(grain)),
                "{grain}"
            );
        }
        assert_eq!(checkpoints.coarsen(Q + 1), None);
        assert_eq!(checkpoints.coarsen(0), None);
    }

    #[test]
    fn memory_is_bounded_and_dropped_grains_are_counted() {
        let mut a = Arrivals::default();
        feed(&mut a, MAX_CHECKPOINTS as u64 + 40, Q, 0, 10);
        assert_eq!(a.times.len(), MAX_CHECKPOINTS);
        assert_eq!(a.first, 41);
        let ends = a.grain_ends(16 * Q);
        // Ends 0, 1 and 2 (checkpoints 0, 16 and 32) are gone, end 3 is checkpoint 48.
        assert_eq!(ends.first_end, 3);
        assert_eq!(ends.t_ns[0], 47 * 10);
        assert_eq!(ends.series().points_left_out, 3);
        // A huge read stays bounded too.
        a.record(1 << 40, u64::MAX / 2);
        assert_eq!(a.times.len(), MAX_CHECKPOINTS);
    }

    #[test]
    fn a_release_above_the_link_is_one_period_with_the_data_beyond_the_link() {
        // Worked by hand: 256 KiB grains, link 1 Gbit/s (125 bytes/us). Grains 1-3
        // at 200 Mbit/s (10,485.76 us each), then 3 grains released at 4 Gbit/s
        // (524.288 us each), then 2 more at 200 Mbit/s.
        let g = 256 * 1024;
        let slow = 10_485_760;
        let fast = 524_288;
        let mut t = vec![0u64];
        for gap in [slow, slow, slow, fast, fast, fast, slow, slow] {
            t.push(t.last().unwrap() + gap);
        }
        let ends = GrainEnds {
            grain: g,
            first_end: 0,
            t_ns: t.clone(),
        };
        let b = ends.buffer_bursts(1e9);
        assert_eq!(b.periods.len(), 1);
        let p = b.periods[0];
        assert_eq!((p.start_ns, p.len_ns, p.bytes), (t[3], 3 * fast, 3 * g));
        // 786,432 bytes less 125 bytes/us * 1572.864 us = 196,608: 589,824.
        assert_eq!(p.burst_bytes, 589_824);
        assert_eq!(
            (b.largest_burst_bytes, b.total_burst_bytes),
            (589_824, 589_824)
        );
    }

    #[test]
    fn data_far_faster_than_sent_but_below_the_link_is_no_buffer_burst() {
        // The old rule (arrival more than twice as fast as sent) called this a burst:
        // sent at 200 Mbit/s, released at 800 Mbit/s. Against a 1 Gbit/s link it is
        // none; against a 500 Mbit/s link it is one.
        let g = 256 * 1024;
        let t: Vec<u64> = [0, 10_485_760, 13_107_200, 15_728_640, 26_214_400].to_vec();
        let ends = GrainEnds {
            grain: g,
            first_end: 0,
            t_ns: t,
        };
        assert!(ends.buffer_bursts(1e9).periods.is_empty());
        let b = ends.buffer_bursts(5e8);
        assert_eq!(b.periods.len(), 1);
        // 524,288 bytes less 62.5 bytes/us * 5242.88 us = 327,680: 196,608.
        assert_eq!(b.largest_burst_bytes, 196_608);
    }

    #[test]
    fn hundred_ms_bins_hide_a_burst_that_grains_show() {
        // 97 ms: 29 ms held, then 725,000 bytes released in 1.45 ms (4 Gbit/s),
        // then 200 Mbit/s. The 100 ms mean is 200 Mbit/s, far below the link.
        let mut a = Arrivals::default();
        let mut t = 0;
        // 1450-byte datagrams: 500 in the release, 58 us apart at 200 Mbit/s.
        t = feed(&mut a, 500, 1450, t + 29_000_000, 2_900);
        feed(&mut a, 1172, 1450, t, 58_000);
        let bytes_in_100ms = a.bytes() as f64;
        assert!(bytes_in_100ms * 8.0 / 0.1 < 0.3e9);
        let b = a.grain_ends(DEFAULT_GRAIN).buffer_bursts(DEFAULT_LINK_BPS);
        assert_eq!(b.periods.len(), 1, "{b:?}");
    }

    #[test]
    fn grains_must_be_whole_checkpoints() {
        assert!(validate_grain(DEFAULT_GRAIN).is_ok());
        assert!(validate_grain(Q).is_ok());
        for bad in [0, Q + 1, 1000, MAX_GRAIN + Q] {
            assert!(validate_grain(bad).is_err(), "{bad}");
        }
        assert!(validate_link(1e9).is_ok());
        assert!(validate_link(0.0).is_err());
        assert!(validate_link(f64::NAN).is_err());
    }
}
