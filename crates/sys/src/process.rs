//! Process and thread setup: privileges, kernel facts (`uname`, clock ticks), timer
//! slack, tying a child process's life to its parent, and signalling, reaping and
//! adopting (as a subreaper) the processes a child leaves behind.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::cvt;

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    effective_uid() == 0
}

/// This process's effective user id: the owner of the files it creates, and the
/// user whose files it may trust ([`crate::owned`]).
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and no memory effects.
    unsafe { libc::geteuid() }
}

/// Whether a process `pid` exists in this pid namespace (`kill(pid, 0)`; EPERM
/// means it exists and belongs to another user). Pid 0 and pids beyond `pid_t`
/// never name one process: false.
pub fn process_exists(pid: u32) -> bool {
    let Some(pid) = libc::pid_t::try_from(pid).ok().filter(|&p| p > 0) else {
        return false;
    };
    // SAFETY: kill with signal 0 sends nothing: it only checks that the positive
    // pid (one process, never a group) exists; it touches no memory of ours.
    match crate::cvt(unsafe { libc::kill(pid, 0) }) {
        Ok(_) => true,
        Err(e) => e.raw_os_error() == Some(libc::EPERM),
    }
}

/// Asks process `pid` to end (`SIGTERM`), so it can clean up first, which
/// [`std::process::Child::kill`]'s `SIGKILL` does not let it do. Pid 0 and pids
/// beyond `pid_t` never name one process: ESRCH.
pub fn terminate(pid: u32) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: kill takes a positive pid (one process, never a group) and a signal
    // number; it touches no memory of ours.
    cvt(unsafe { libc::kill(pid, libc::SIGTERM) })?;
    Ok(())
}

/// A signal that ends a process: asked ([`Signal::Term`]) or forced
/// ([`Signal::Kill`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// `SIGTERM`: the process may clean up, or ignore it.
    Term,
    /// `SIGKILL`: it cannot be caught or ignored.
    Kill,
}

impl Signal {
    fn raw(self) -> libc::c_int {
        match self {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        }
    }
}

/// A positive `pid_t` of `pid`, or ESRCH: pid 0 and pids beyond `pid_t` never name
/// one process (nor one group).
fn one_pid(pid: u32) -> io::Result<libc::pid_t> {
    libc::pid_t::try_from(pid)
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))
}

/// Sends `signal` to process `pid` (ESRCH when it is gone).
pub fn signal(pid: u32, signal: Signal) -> io::Result<()> {
    let pid = one_pid(pid)?;
    // SAFETY: kill takes a positive pid (one process, never a group) and a signal
    // number; it touches no memory of ours.
    cvt(unsafe { libc::kill(pid, signal.raw()) })?;
    Ok(())
}

/// Sends `signal` to every process of process group `pgid` (ESRCH when none is
/// left).
pub fn signal_group(pgid: u32, signal: Signal) -> io::Result<()> {
    let pgid = one_pid(pgid)?;
    // SAFETY: killpg takes a positive group id (never 0, this process's own group)
    // and a signal number; it touches no memory of ours.
    cvt(unsafe { libc::killpg(pgid, signal.raw()) })?;
    Ok(())
}

/// Reaps child `pid` if it has ended (`waitpid(pid, WNOHANG)`): true when it was
/// reaped, false while it runs; ECHILD when it is not this process's child.
pub fn reap(pid: u32) -> io::Result<bool> {
    let pid = one_pid(pid)?;
    let mut status: libc::c_int = 0;
    // SAFETY: waitpid writes the exit status into `status`, a live c_int of ours;
    // the pid is positive, so it waits for that one child only.
    let got = cvt(unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) })?;
    Ok(got == pid)
}

/// Makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`): a process
/// orphaned below it (its parent ended, e.g. after a double fork and `setsid`) is
/// re-parented to it rather than to init, so it can still be found by its parent
/// links, stopped and reaped. It must then reap such orphans itself.
pub fn set_child_subreaper() -> io::Result<()> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer flag and touches no
    // memory of ours.
    cvt(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })?;
    Ok(())
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, the unit of `/proc/stat`), None
/// when the system does not say.
pub fn clock_ticks_per_second() -> Option<u64> {
    // SAFETY: sysconf has no memory effects.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(v).ok().filter(|&v| v > 0)
}

/// The running kernel as `uname` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelName {
    /// The release, e.g. `6.8.0-1019-aws`.
    pub release: String,
    /// The machine (architecture), e.g. `x86_64`.
    pub machine: String,
}

/// The running kernel's release and machine (`uname`).
pub fn uname() -> io::Result<KernelName> {
    // SAFETY: utsname is plain data; all-zero is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer refers to `u`, alive across the call; uname fills it with
    // NUL-terminated strings.
    cvt(unsafe { libc::uname(&mut u) })?;
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Ok(KernelName {
        release: field(&u.release),
        machine: field(&u.machine),
    })
}

/// How often the scheduler has taken the CPU from the calling thread against its
/// will (`getrusage(RUSAGE_THREAD)`'s `ru_nivcsw`): each count is the guest kernel
/// running another of its threads there. The hypervisor's steal does not count
/// here, which is how `nnb steal` tells the two apart.
pub fn thread_involuntary_switches() -> io::Result<u64> {
    // SAFETY: rusage is plain data; all-zero is a valid value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer refers to `u`, alive across the call, which fills it.
    cvt(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) })?;
    Ok(u64::try_from(u.ru_nivcsw).unwrap_or(0))
}

/// Sets the calling thread's timer slack (`PR_SET_TIMERSLACK`, 50 us by default):
/// its sleeps end within `ns` of their deadline. 0 restores the default.
pub fn set_timer_slack_ns(ns: u64) -> io::Result<()> {
    let ns = libc::c_ulong::try_from(ns).unwrap_or(libc::c_ulong::MAX);
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and affects only this thread.
    cvt(unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns) })?;
    Ok(())
}

/// The calling thread's timer slack in nanoseconds (`PR_GET_TIMERSLACK`).
pub fn timer_slack_ns() -> io::Result<u64> {
    // SAFETY: PR_GET_TIMERSLACK takes no argument and returns the slack.
    let v = cvt(unsafe { libc::prctl(libc::PR_GET_TIMERSLACK) })?;
    Ok(u64::try_from(v).unwrap_or(0))
}

/// Makes the child that `cmd` spawns die (SIGKILL) when this process dies
/// (`PR_SET_PDEATHSIG` in the child before `exec`), so no orphan outlives a crashed
/// parent. A parent that died between fork and the `prctl` makes the child exit at
/// once, since no signal would ever come.
pub fn kill_with_parent(cmd: &mut Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe calls (prctl, getppid, _exit); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_facts() {
        let k = uname().expect("uname");
        assert!(!k.release.is_empty() && !k.machine.is_empty(), "{k:?}");
        assert_eq!(k.machine, std::env::consts::ARCH);
        assert!(clock_ticks_per_second().is_some_and(|hz| hz > 0));
        let uid_file = std::fs::read_to_string("/proc/self/status").expect("status");
        let euid = uid_file
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|v| v.split_whitespace().nth(1))
            .expect("Uid line");
        assert_eq!(is_root(), euid == "0");
        assert_eq!(effective_uid().to_string(), euid);
    }

    #[test]
    fn only_live_processes_exist() {
        assert!(process_exists(std::process::id()));
        // pid 1 exists in every pid namespace (EPERM for a non-root caller).
        assert!(process_exists(1));
        // Above the kernel's largest pid_max (2^22), and beyond pid_t.
        assert!(!process_exists(4_194_304));
        assert!(!process_exists(u32::MAX));
        assert!(!process_exists(0));
    }

    #[test]
    fn timer_slack_reads_back() {
        std::thread::spawn(|| {
            set_timer_slack_ns(1).expect("set slack");
            assert_eq!(timer_slack_ns().expect("get slack"), 1);
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn involuntary_switches_count_a_preemption() {
        // Two threads pinned to the same CPU, both spinning: the scheduler must take
        // the CPU from each against its will (a time slice is a few ms), so the
        // count rises while a thread that only sleeps counts none.
        let cpu = crate::affinity::allowed_cpus().expect("allowed")[0];
        let spin = move || {
            crate::affinity::pin_current_thread(cpu).expect("pin");
            let before = thread_involuntary_switches().expect("getrusage");
            let end = std::time::Instant::now() + std::time::Duration::from_millis(300);
            while std::time::Instant::now() < end {
                std::hint::spin_loop();
            }
            thread_involuntary_switches().expect("getrusage") - before
        };
        let (a, b) = (std::thread::spawn(spin), std::thread::spawn(spin));
        let switched = a.join().expect("a") + b.join().expect("b");
        assert!(
            switched > 0,
            "two spinners on CPU {cpu} never preempted each other"
        );
        let sleeper = std::thread::spawn(|| {
            let before = thread_involuntary_switches().expect("getrusage");
            std::thread::sleep(std::time::Duration::from_millis(50));
            thread_involuntary_switches().expect("getrusage") - before
        });
        assert_eq!(sleeper.join().expect("sleeper"), 0);
    }

    #[test]
    fn a_signalled_child_is_reaped_once() {
        let mut child = Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("spawn sleep");
        let pid = child.id();
        assert!(!reap(pid).expect("a running child"));
        signal_group(pid, Signal::Term).expect("its group");
        let reaped = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            reap(pid).expect("our child")
        });
        assert!(reaped, "sleep outlived SIGTERM");
        assert!(reap(pid).is_err(), "reaped twice");
        assert!(signal(pid, Signal::Kill).is_err(), "a reaped pid is gone");
        drop(child.try_wait());
        assert!(signal(0, Signal::Kill).is_err() && signal_group(0, Signal::Kill).is_err());
    }

    #[test]
    fn a_child_with_a_parent_death_signal_runs() {
        let mut cmd = Command::new("true");
        kill_with_parent(&mut cmd);
        assert!(cmd.status().expect("spawn true").success());
    }
}
