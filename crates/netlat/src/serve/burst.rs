//! Buffer-burst detection (seed 003, "buffer burst period"): intervals in which a
//! stream's data arrives much faster than it was sent, because something on the path
//! (a hypervisor's driver domain, a descheduled receiver's queue) held it and then
//! released it at once.
//!
//! # The rule
//!
//! Each stream's in-order datagrams (those raising the highest sequence number) are
//! cut into consecutive *windows*. A window closes at the first datagram at which it
//! spans at least [`WINDOW_SEND_NS`] of the sender's clock (the headers' send
//! timestamps) **and** holds at least [`WINDOW_MIN_PACKETS`] datagrams; that datagram
//! also opens the next window. A closed window is a *burst window* when its arrival
//! span (receiver's clock) is shorter than its send span divided by [`BURST_FACTOR`]:
//! the data arrived more than `BURST_FACTOR` times faster than it was sent. A *buffer
//! burst* is a maximal run of consecutive burst windows; `bursts` counts runs, and
//! `burst_bytes` the bytes of all burst windows (seed 003's "buffer burst data" is the
//! part of these bytes beyond the sending rate).
//!
//! Only spans (differences) of each clock are compared, so the sender's and the
//! receiver's clocks need no synchronisation. Senders must stamp the actual send time;
//! a datagram whose send timestamp goes backwards is left out of the windows.

/// Minimum sender-clock span of a window, in nanoseconds (1 ms): long enough to smooth
/// over a sender's `sendmmsg` batches, which share one timestamp.
pub const WINDOW_SEND_NS: u64 = 1_000_000;
/// Minimum datagrams per window, so one delayed datagram among a few is not a burst.
pub const WINDOW_MIN_PACKETS: u32 = 8;
/// How many times faster than sent data must arrive for a burst window.
pub const BURST_FACTOR: u64 = 2;

/// Per-stream burst state.
#[derive(Debug, Clone, Default)]
pub struct BurstDetector {
    started: bool,
    start_send_ns: u64,
    start_arrival_ns: u64,
    last_send_ns: u64,
    packets: u32,
    bytes: u64,
    in_burst: bool,
    bursts: u64,
    burst_bytes: u64,
}

impl BurstDetector {
    /// Feeds one in-order datagram: its send timestamp, arrival time and size.
    pub fn on_datagram(&mut self, send_ns: u64, arrival_ns: u64, bytes: u64) {
        if !self.started {
            self.started = true;
            self.open(send_ns, arrival_ns);
            return;
        }
        if send_ns < self.last_send_ns {
            return;
        }
        self.last_send_ns = send_ns;
        self.packets = self.packets.saturating_add(1);
        self.bytes += bytes;
        let send_span = send_ns - self.start_send_ns;
        if send_span < WINDOW_SEND_NS || self.packets < WINDOW_MIN_PACKETS {
            return;
        }
        let arrival_span = arrival_ns.saturating_sub(self.start_arrival_ns);
        let burst = arrival_span.saturating_mul(BURST_FACTOR) < send_span;
        if burst {
            if !self.in_burst {
                self.bursts += 1;
            }
            self.burst_bytes += self.bytes;
        }
        self.in_burst = burst;
        self.open(send_ns, arrival_ns);
    }

    fn open(&mut self, send_ns: u64, arrival_ns: u64) {
        self.start_send_ns = send_ns;
        self.start_arrival_ns = arrival_ns;
        self.last_send_ns = send_ns;
        self.packets = 0;
        self.bytes = 0;
    }

    /// Buffer bursts seen so far.
    pub fn bursts(&self) -> u64 {
        self.bursts
    }

    /// Bytes received in burst windows so far.
    pub fn burst_bytes(&self) -> u64 {
        self.burst_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `n` datagrams sent every `send_gap` ns and arriving every `arr_gap` ns,
    /// continuing from `(t_send, t_arr)`; returns the new times.
    fn feed(
        d: &mut BurstDetector,
        n: u32,
        (mut ts, mut ta): (u64, u64),
        send_gap: u64,
        arr_gap: u64,
    ) -> (u64, u64) {
        for _ in 0..n {
            d.on_datagram(ts, ta, 1000);
            ts += send_gap;
            ta += arr_gap;
        }
        (ts, ta)
    }

    #[test]
    fn steady_stream_has_no_burst() {
        let mut d = BurstDetector::default();
        feed(&mut d, 100_000, (0, 5), 10_000, 10_000);
        assert_eq!(d.bursts(), 0);
    }

    #[test]
    fn held_then_released_data_is_one_burst() {
        let mut d = BurstDetector::default();
        let t = feed(&mut d, 1000, (0, 0), 10_000, 10_000);
        // 5 ms of sending (500 datagrams) held, then delivered 1 us apart.
        let t = feed(&mut d, 500, (t.0, t.1 + 5_000_000), 10_000, 1_000);
        let t = feed(&mut d, 1000, t, 10_000, 10_000);
        assert_eq!(d.bursts(), 1);
        assert!(d.burst_bytes() >= 400 * 1000, "{}", d.burst_bytes());
        // A second, separate episode counts again.
        feed(&mut d, 500, (t.0, t.1 + 5_000_000), 10_000, 1_000);
        assert_eq!(d.bursts(), 2);
    }

    #[test]
    fn few_datagrams_or_backwards_clock_are_no_burst() {
        let mut d = BurstDetector::default();
        // 5 datagrams 10 ms apart arriving together: fewer than the window minimum.
        feed(&mut d, 5, (0, 0), 10_000_000, 0);
        assert_eq!(d.bursts(), 0);
        let mut d = BurstDetector::default();
        for i in 0..100u64 {
            d.on_datagram(1_000_000_000 - i * 100_000, i, 1000);
        }
        assert_eq!(d.bursts(), 0);
    }
}
