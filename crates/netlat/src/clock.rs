//! The client's clock: `CLOCK_MONOTONIC_RAW` in nanoseconds.
//!
//! Round trips are timed on the client only, so one monotonic clock is all a probe
//! needs. The raw clock is not slewed by NTP, so an interval measured across an NTP
//! adjustment keeps its true length; on a machine whose clocksource is the TSC the
//! kernel answers it from the vDSO in a few tens of nanoseconds, without a syscall.

use std::time::{Duration, SystemTime};

/// Nanoseconds of `CLOCK_MONOTONIC_RAW` (arbitrary origin, never goes back).
#[inline]
pub fn now_ns() -> u64 {
    nnb_sys::clock::monotonic_raw_ns()
}

/// Nanoseconds in `d`, saturating at `u64::MAX` (584 years).
pub fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The wall-clock time (`SystemTime`) at which [`now_ns`] reads (or will read)
/// `t_ns`, for stamping logs: the two clocks read together, `t_ns` placed from there.
pub fn wall_time_of(t_ns: u64) -> SystemTime {
    let (wall, now) = (SystemTime::now(), now_ns());
    if t_ns >= now {
        wall + Duration::from_nanos(t_ns - now)
    } else {
        wall - Duration::from_nanos(now - t_ns)
    }
}

/// Waits until [`now_ns`] reaches `deadline_ns`: sleeps while more than `spin_ns`
/// remain, then spins, so the wake-up is precise without burning a core for long
/// waits. Returns the time at which it stopped waiting.
pub fn wait_until(deadline_ns: u64, spin_ns: u64) -> u64 {
    loop {
        let now = now_ns();
        if now >= deadline_ns {
            return now;
        }
        let left = deadline_ns - now;
        if left > spin_ns {
            std::thread::sleep(Duration::from_nanos(left - spin_ns));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Makes the calling thread's sleeps end within microseconds of their deadline by
/// shrinking its timer slack from the default 50 us to 1 ns (`PR_SET_TIMERSLACK`), so
/// pacing threads can sleep most of a gap instead of spinning through it.
pub fn precise_sleeps() {
    if let Err(e) = nnb_sys::process::set_timer_slack_ns(1) {
        tracing::debug!("cannot shrink the timer slack, sleeps end up to 50 us late: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_and_waits() {
        let a = now_ns();
        let woke = wait_until(a + 2_000_000, 200_000);
        assert!(woke >= a + 2_000_000);
        assert!(now_ns() >= woke);
        assert_eq!(duration_ns(Duration::from_millis(3)), 3_000_000);
        assert_eq!(duration_ns(Duration::MAX), u64::MAX);
    }

    #[test]
    fn wall_time_of_places_monotonic_instants() {
        let (wall, now) = (SystemTime::now(), now_ns());
        let later = wall_time_of(now + 300_000_000);
        let earlier = wall_time_of(now - 200_000_000);
        let ms = |a: SystemTime, b: SystemTime| match a.duration_since(b) {
            Ok(d) => d.as_secs_f64() * 1e3,
            Err(e) => -e.duration().as_secs_f64() * 1e3,
        };
        assert!((ms(later, wall) - 300.0).abs() < 5.0, "{}", ms(later, wall));
        assert!(
            (ms(earlier, wall) + 200.0).abs() < 5.0,
            "{}",
            ms(earlier, wall)
        );
    }
}
