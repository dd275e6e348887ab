//! Pinning the calling thread to one CPU (`sched_setaffinity`), and listing the CPUs
//! this process may run on, so probe and load threads stay where they were put.

use std::io;

/// Pins the calling thread to `cpu`. Fails with the kernel's error when the CPU does
/// not exist or is outside this process's allowed set (cgroup, taskset).
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {cpu} is beyond the largest CPU number this system supports"),
        ));
    }
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set, CPU_SET stays in
    // bounds (checked above), and pid 0 means the calling thread.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        let err = io::Error::last_os_error();
        Err(io::Error::new(
            err.kind(),
            format!("cannot pin to CPU {cpu}: {err}"),
        ))
    }
}

/// The CPUs the calling thread may run on, in ascending order (at least one).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: as above; sched_getaffinity writes at most size_of::<cpu_set_t>() bytes.
    let cpus: Vec<usize> = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    };
    if cpus.is_empty() {
        vec![0]
    } else {
        cpus
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_to_an_allowed_cpu_and_refuses_a_missing_one() {
        let cpus = allowed_cpus();
        let last = *cpus.last().unwrap_or(&0);
        std::thread::spawn(move || {
            pin_current_thread(last).expect("pin to an allowed CPU");
            assert_eq!(allowed_cpus(), vec![last]);
            assert!(pin_current_thread(100_000).is_err());
        })
        .join()
        .expect("pinning thread");
    }
}
