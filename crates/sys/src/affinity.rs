//! CPU affinity: which CPUs this thread may run on, restricting it to a set, pinning
//! it to one CPU (verified), and the CPU it runs on now.

use std::io;
use std::mem;

use crate::cvt;

/// Pinning a thread failed, or the thread is not where it was put.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// `sched_setaffinity` refused (or the CPU number is beyond `cpu_set_t`).
    #[error("cannot pin to CPU {cpu}: {source}")]
    SetAffinity {
        /// The CPU asked for.
        cpu: usize,
        /// The OS error.
        source: io::Error,
    },
    /// The affinity could not be read back after pinning.
    #[error("pinned to CPU {cpu} but cannot read the affinity back: {source}")]
    ReadBack {
        /// The CPU asked for.
        cpu: usize,
        /// The OS error.
        source: io::Error,
    },
    /// The affinity read back is not exactly the one CPU asked for.
    #[error("pinned to CPU {cpu} but the affinity read back is {actual:?}")]
    AffinityMismatch {
        /// The CPU asked for.
        cpu: usize,
        /// The mask read back.
        actual: Vec<usize>,
    },
    /// `sched_getcpu` reports another CPU than the pinned one.
    #[error("pinned to CPU {cpu} but running on CPU {observed:?} ({when})")]
    WrongCpu {
        /// The CPU asked for.
        cpu: usize,
        /// The CPU seen (None if sched_getcpu failed).
        observed: Option<usize>,
        /// When it was seen: "after pinning", "at start", "at end".
        when: &'static str,
    },
}

impl From<PinError> for io::Error {
    /// Keeps the OS error's kind where there is one, so callers that deal in
    /// `io::Error` still tell "no such CPU" from "not permitted".
    fn from(e: PinError) -> io::Error {
        let kind = match &e {
            PinError::SetAffinity { source, .. } | PinError::ReadBack { source, .. } => {
                source.kind()
            }
            PinError::AffinityMismatch { .. } | PinError::WrongCpu { .. } => io::ErrorKind::Other,
        };
        io::Error::new(kind, e)
    }
}

/// Largest CPU number plus one that a `cpu_set_t` holds (1024).
const SET_SIZE: usize = libc::CPU_SETSIZE as usize;

/// A `cpu_set_t` holding `cpus`; InvalidInput for a CPU beyond [`SET_SIZE`].
fn cpu_set(cpus: &[usize]) -> io::Result<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { mem::zeroed() };
    for &cpu in cpus {
        if cpu >= SET_SIZE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is beyond the largest CPU number this system supports"),
            ));
        }
        // SAFETY: cpu < SET_SIZE (checked above), so the bit is inside `set`.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    Ok(set)
}

/// The CPUs the calling thread may run on (`sched_getaffinity`), ascending. An error
/// when the kernel refuses to say; what that means is the caller's decision. CPUs
/// numbered 1024 and above are not seen (`cpu_set_t` holds 1024).
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let mut set = cpu_set(&[])?;
    // SAFETY: the pointer and size describe `set`, which lives across the call; pid 0
    // is the calling thread.
    cvt(unsafe { libc::sched_getaffinity(0, mem::size_of::<libc::cpu_set_t>(), &mut set) })?;
    Ok((0..SET_SIZE)
        // SAFETY: cpu < SET_SIZE, the capacity of `set`.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Restricts the calling thread (and every thread it creates afterwards) to `cpus`
/// (`sched_setaffinity`). Fails with InvalidInput for a CPU number beyond
/// `cpu_set_t`, and with the kernel's error when no CPU of the set is usable.
pub fn restrict_to_cpus(cpus: &[usize]) -> io::Result<()> {
    let set = cpu_set(cpus)?;
    // SAFETY: the pointer and size describe `set`; pid 0 is the calling thread.
    cvt(unsafe { libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), &set) })?;
    Ok(())
}

/// Pins the calling thread to `cpu`, then verifies: the affinity read back is exactly
/// `{cpu}` and `sched_getcpu` says `cpu` (the kernel migrates the thread before
/// `sched_setaffinity` returns).
pub fn pin_current_thread(cpu: usize) -> Result<(), PinError> {
    restrict_to_cpus(&[cpu]).map_err(|source| PinError::SetAffinity { cpu, source })?;
    let actual = allowed_cpus().map_err(|source| PinError::ReadBack { cpu, source })?;
    if actual != [cpu] {
        return Err(PinError::AffinityMismatch { cpu, actual });
    }
    let observed = current_cpu();
    if observed != Some(cpu) {
        return Err(PinError::WrongCpu {
            cpu,
            observed,
            when: "after pinning",
        });
    }
    Ok(())
}

/// The CPU the calling thread runs on now (`sched_getcpu`), None if it fails.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no arguments and no memory effects.
    usize::try_from(unsafe { libc::sched_getcpu() }).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a fresh thread so affinity changes do not leak into other tests.
    fn on_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().expect("test thread")
    }

    #[test]
    fn allowed_cpus_includes_the_current_cpu() {
        let allowed = allowed_cpus().expect("sched_getaffinity");
        assert!(!allowed.is_empty());
        assert!(allowed.windows(2).all(|w| w[0] < w[1]), "{allowed:?}");
        let now = current_cpu().expect("sched_getcpu");
        assert!(allowed.contains(&now), "{now} not in {allowed:?}");
    }

    #[test]
    fn pinning_moves_the_thread_and_narrows_the_affinity() {
        let last = *allowed_cpus().expect("affinity").last().expect("a CPU");
        on_thread(move || {
            pin_current_thread(last).expect("pin to an allowed CPU");
            assert_eq!(allowed_cpus().expect("affinity"), vec![last]);
            assert_eq!(current_cpu(), Some(last));
        });
    }

    #[test]
    fn restricting_shows_in_the_allowed_set() {
        let allowed = allowed_cpus().expect("affinity");
        let first = allowed[0];
        on_thread(move || {
            restrict_to_cpus(&[first]).expect("restrict");
            assert_eq!(allowed_cpus().expect("affinity"), vec![first]);
            // A thread started now inherits the restriction.
            let child = on_thread(|| allowed_cpus().expect("affinity"));
            assert_eq!(child, vec![first]);
            // Widening back to the original set works (the set is the thread's own).
            restrict_to_cpus(&allowed).expect("widen");
            assert_eq!(allowed_cpus().expect("affinity"), allowed);
        });
    }

    #[test]
    fn refuses_missing_cpus() {
        on_thread(|| {
            let err = pin_current_thread(100_000).unwrap_err();
            assert!(
                matches!(err, PinError::SetAffinity { cpu: 100_000, .. }),
                "{err}"
            );
            assert_eq!(io::Error::from(err).kind(), io::ErrorKind::InvalidInput);
            // A CPU inside cpu_set_t that is not allowed: the kernel refuses (EINVAL).
            let err = pin_current_thread(SET_SIZE - 1).unwrap_err();
            assert!(matches!(err, PinError::SetAffinity { .. }), "{err}");
            assert!(restrict_to_cpus(&[]).is_err());
        });
    }
}
