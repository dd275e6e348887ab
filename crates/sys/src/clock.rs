//! Clocks: the kernel's clocks in nanoseconds (`clock_gettime`, answered from the
//! vDSO without a system call for the monotonic and realtime clocks), the hardware
//! counter (TSC on x86_64, `cntvct_el0` on aarch64) and the x86 `cpuid` instruction
//! that says whether the TSC can be trusted.

/// A kernel clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockId {
    /// `CLOCK_MONOTONIC`: never goes back, slewed by NTP like the realtime clock.
    Monotonic,
    /// `CLOCK_MONOTONIC_RAW`: never goes back, not slewed by NTP (intervals keep
    /// their true length across an adjustment).
    MonotonicRaw,
    /// `CLOCK_REALTIME`: wall-clock time since the Unix epoch (kernel receive
    /// timestamps use it).
    Realtime,
    /// `CLOCK_THREAD_CPUTIME_ID`: CPU time the calling thread has consumed.
    ThreadCpuTime,
}

impl ClockId {
    #[inline(always)]
    fn raw(self) -> libc::clockid_t {
        match self {
            ClockId::Monotonic => libc::CLOCK_MONOTONIC,
            ClockId::MonotonicRaw => libc::CLOCK_MONOTONIC_RAW,
            ClockId::Realtime => libc::CLOCK_REALTIME,
            ClockId::ThreadCpuTime => libc::CLOCK_THREAD_CPUTIME_ID,
        }
    }
}

/// Nanoseconds of `clock` (`clock_gettime`). Every [`ClockId`] exists on every Linux
/// nnb runs on (2.6.28 and later), so the call cannot fail.
#[inline]
pub fn clock_ns(clock: ClockId) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer to `ts`.
    unsafe { libc::clock_gettime(clock.raw(), &mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

/// Nanoseconds of `CLOCK_MONOTONIC_RAW` (arbitrary origin, not slewed by NTP).
#[inline]
pub fn monotonic_raw_ns() -> u64 {
    clock_ns(ClockId::MonotonicRaw)
}

/// Nanoseconds of `CLOCK_MONOTONIC` (arbitrary origin, slewed like realtime).
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(ClockId::Monotonic)
}

/// Nanoseconds of `CLOCK_REALTIME` since the Unix epoch.
#[inline]
pub fn realtime_ns() -> u64 {
    clock_ns(ClockId::Realtime)
}

/// CPU time consumed by the calling thread, in nanoseconds.
#[inline]
pub fn thread_cpu_ns() -> u64 {
    clock_ns(ClockId::ThreadCpuTime)
}

/// Reads the TSC, ordered after the preceding instructions (`lfence; rdtsc`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn read_counter() -> u64 {
    // SAFETY: lfence and rdtsc are available on every x86_64 CPU and touch no memory.
    unsafe {
        core::arch::x86_64::_mm_lfence();
        core::arch::x86_64::_rdtsc()
    }
}

/// Reads the TSC to start a measured span: `lfence; rdtsc; lfence`. The leading
/// fence orders the read after the preceding instructions, the trailing one keeps the
/// following instructions (the measured work) from starting before the read. End
/// stamps need only the leading fence ([`read_counter`]).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn read_counter_start() -> u64 {
    // SAFETY: lfence and rdtsc are available on every x86_64 CPU and touch no memory.
    unsafe {
        core::arch::x86_64::_mm_lfence();
        let t = core::arch::x86_64::_rdtsc();
        core::arch::x86_64::_mm_lfence();
        t
    }
}

/// Reads the virtual counter, ordered after the preceding instructions (`isb`).
#[cfg(target_arch = "aarch64")]
#[inline(always)]
pub fn read_counter() -> u64 {
    let v: u64;
    // SAFETY: cntvct_el0 is readable from EL0 on Linux; the asm touches no memory.
    unsafe { core::arch::asm!("isb", "mrs {v}, cntvct_el0", v = out(reg) v, options(nostack)) };
    v
}

/// Reads the virtual counter to start a measured span (`isb; mrs; isb`): ordered after
/// the preceding instructions and before the following ones.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
pub fn read_counter_start() -> u64 {
    let v: u64;
    // SAFETY: cntvct_el0 is readable from EL0 on Linux; the asm touches no memory.
    unsafe {
        core::arch::asm!("isb", "mrs {v}, cntvct_el0", "isb", v = out(reg) v, options(nostack))
    };
    v
}

/// No counter on this architecture: `CLOCK_MONOTONIC_RAW` stands in.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
#[inline(always)]
pub fn read_counter() -> u64 {
    monotonic_raw_ns()
}

/// No counter on this architecture: `CLOCK_MONOTONIC_RAW` stands in.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
#[inline(always)]
pub fn read_counter_start() -> u64 {
    monotonic_raw_ns()
}

/// The `cpuid` instruction's answer for `leaf` (sub-leaf 0). Callers check the
/// highest supported leaf (leaf 0 or 0x8000_0000) before asking for others.
#[cfg(target_arch = "x86_64")]
// `__cpuid` is safe from Rust 1.87 on and unsafe before; the block serves both.
#[allow(unused_unsafe)]
pub fn cpuid(leaf: u32) -> core::arch::x86_64::CpuidResult {
    // SAFETY: cpuid exists on every x86_64 CPU; an unsupported leaf returns data of
    // the highest basic leaf, never faults.
    unsafe { core::arch::x86_64::__cpuid(leaf) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_advance() {
        for clock in [ClockId::Monotonic, ClockId::MonotonicRaw, ClockId::Realtime] {
            let a = clock_ns(clock);
            std::thread::sleep(std::time::Duration::from_millis(2));
            let b = clock_ns(clock);
            assert!(b >= a + 2_000_000, "{clock:?}: {a} then {b}");
        }
        // Realtime is after 2020-01-01 (1_577_836_800 s since the epoch).
        assert!(realtime_ns() > 1_577_836_800 * 1_000_000_000);
        assert!(monotonic_ns() > 0 && monotonic_raw_ns() > 0);
    }

    #[test]
    fn thread_cpu_time_counts_work_not_sleep() {
        let a = thread_cpu_ns();
        let mut x = 1u64;
        while thread_cpu_ns() < a + 1_000_000 {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005));
        }
        assert!(thread_cpu_ns() >= a + 1_000_000);
    }

    #[test]
    fn the_counter_moves_forward() {
        let a = read_counter();
        std::thread::sleep(std::time::Duration::from_millis(1));
        assert!(read_counter() > a);
        let b = read_counter_start();
        assert!(b > a && read_counter() >= b);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn cpuid_names_a_vendor() {
        // Leaf 0: the highest basic leaf (at least 1 on any x86_64 CPU) and the
        // vendor string in ebx, edx, ecx.
        let r = cpuid(0);
        assert!(r.eax >= 1);
        let vendor: Vec<u8> = [r.ebx, r.edx, r.ecx]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert!(vendor.iter().all(u8::is_ascii), "{vendor:?}");
    }
}
