//! Memory-touching worker processes, for nnb's memory load (`nnb memory`, like
//! `stress-ng --vm N --vm-bytes X --vm-keep`): [`Toucher::spawn`] forks a child that
//! maps anonymous memory and writes to it, pass after pass, until a deadline.
//!
//! Why processes and not threads: under a tenant's cgroup memory limit the kernel's
//! OOM killer kills the process with the most memory. That must be a worker (which
//! the caller can count and restart, as stress-ng does), never the multi-threaded
//! agent that runs the job. Each child also sets its `oom_score_adj` to 1000, so it is
//! the OOM killer's first choice even while it is still small.
//!
//! # Safety argument
//!
//! `fork` in a multi-threaded process copies only the calling thread; locks that
//! other threads held (the allocator's, stdio's, Rust's) stay locked forever in the
//! child. So the child may only make async-signal-safe calls, and it does: it
//! allocates nothing, takes no lock, cannot panic (no indexing, no unchecked
//! arithmetic, no `unwrap`), uses no Rust std I/O, and never returns (`_exit`, which
//! runs no `atexit` handlers and flushes nothing). Its calls are `prctl`, `getppid`,
//! `open`/`write`/`close`, `mmap`, `clock_gettime` (vDSO) and `_exit`: system-call
//! wrappers that glibc and musl implement without locks or allocation (`mmap` and
//! `prctl` are not on POSIX's list of async-signal-safe functions, but are plain
//! system calls on Linux). Everything it needs (sizes, the deadline, the parent's pid,
//! the shared progress page) is prepared before the fork.
//!
//! The progress page is `MAP_SHARED | MAP_ANONYMOUS`, mapped by the parent before the
//! fork, so parent and child see the same physical page; only the child writes it,
//! with atomic stores (`AtomicU64` is lock-free and address-free on every target nnb
//! builds for, so atomics work across processes).
//!
//! No zombies, no orphans: the parent reaps its child by pid (`waitpid`), kills and
//! reaps it in [`Toucher::kill`] and on drop; the child dies with the thread that
//! forked it (`PR_SET_PDEATHSIG`, set up before it maps anything). Signalling by pid
//! is safe from pid reuse because a child's pid stays reserved (as a zombie) until
//! its parent reaps it, and only [`Toucher`] reaps it.

use std::fmt;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::clock::monotonic_ns;
use crate::cvt;

/// Exit code of a child that could not map its region (e.g. strict overcommit).
const EXIT_MAP_FAILED: libc::c_int = 3;
/// Exit code of a child whose parent died before it could arrange to die with it.
const EXIT_ORPHANED: libc::c_int = 4;
/// The child publishes its progress and checks its deadline after every this many
/// bytes of its region: about a millisecond of page faults, far less of re-touching.
const CHECK_EVERY: usize = 1 << 20;
/// Length of the shared progress mapping (the kernel rounds it up to a page).
const PROGRESS_LEN: usize = 4096;
/// The child's name (`/proc/PID/comm`, `ps`): what tools look for.
pub const WORKER_NAME: &str = "nnb-memload";
/// [`WORKER_NAME`] as the C string `prctl(PR_SET_NAME)` takes (at most 15 bytes).
const WORKER_NAME_C: &std::ffi::CStr = c"nnb-memload";
/// Where the child makes itself the OOM killer's first choice.
const OOM_SCORE_ADJ: &std::ffi::CStr = c"/proc/self/oom_score_adj";

/// The counters the child publishes, in the shared page.
#[repr(C)]
struct Shared {
    /// Bytes of its region the child has covered so far, over all passes.
    touched: AtomicU64,
    /// Complete passes over the region.
    passes: AtomicU64,
}

/// A child's progress as its shared page says it (kept after the child has died).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    /// Bytes of the region covered so far, over all passes (a region of N bytes
    /// counts N per pass, whatever the stride).
    pub touched_bytes: u64,
    /// Complete passes over the region.
    pub passes: u64,
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It reached its deadline and exited 0.
    Finished,
    /// It could not map its region (`mmap` refused: strict overcommit, address space).
    MapFailed,
    /// `SIGKILL`: the (cgroup's) OOM killer, or someone's `kill -9`.
    Killed,
    /// Another signal ended it.
    Signal(i32),
    /// It exited with a code this module's child never uses.
    Code(i32),
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exit::Finished => f.write_str("finished"),
            Exit::MapFailed => f.write_str("could not map its memory"),
            Exit::Killed => f.write_str("killed by SIGKILL"),
            Exit::Signal(s) => write!(f, "killed by signal {s}"),
            Exit::Code(c) => write!(f, "exited with code {c}"),
        }
    }
}

/// The shared progress page: mapped on creation, unmapped on drop.
struct SharedPage(NonNull<Shared>);

impl SharedPage {
    fn map() -> io::Result<SharedPage> {
        // SAFETY: an anonymous mapping at an address the kernel picks touches no
        // existing memory; the result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PROGRESS_LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // Anonymous memory is zero-filled: two zero AtomicU64s, a valid `Shared`.
        NonNull::new(p.cast::<Shared>())
            .map(SharedPage)
            .ok_or_else(|| io::Error::other("mmap returned address 0"))
    }

    fn get(&self) -> &Shared {
        // SAFETY: the page stays mapped (readable, writable, zero-initialised or
        // written only through atomics) until `self` is dropped.
        unsafe { self.0.as_ref() }
    }
}

impl Drop for SharedPage {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping `map` made, which nothing refers to any more.
        unsafe { libc::munmap(self.0.as_ptr().cast(), PROGRESS_LEN) };
    }
}

/// A forked child that touches memory until its deadline; killed and reaped when
/// dropped.
pub struct Toucher {
    pid: libc::pid_t,
    page: SharedPage,
    exit: Option<Exit>,
}

impl Toucher {
    /// Forks a child that maps `bytes` of private anonymous memory (`MAP_NORESERVE`:
    /// only what it touches counts) and writes one byte every `stride` bytes of it, in
    /// passes, until `CLOCK_MONOTONIC` ([`monotonic_ns`]) reaches `deadline_ns`; then
    /// it exits 0. A stride of the page size keeps every page resident and re-touched
    /// (`--vm-keep`), a stride of a cache line streams writes (bandwidth).
    ///
    /// The child is named [`WORKER_NAME`], has `oom_score_adj` 1000 and gets
    /// `SIGKILL` when the calling thread exits: spawn from a thread that outlives it.
    /// `bytes` and `stride` must be positive; the caller bounds `bytes`.
    pub fn spawn(bytes: usize, stride: usize, deadline_ns: u64) -> io::Result<Toucher> {
        if bytes == 0 || stride == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a toucher needs a positive size and stride",
            ));
        }
        let page = SharedPage::map()?;
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        let shared: *const Shared = page.get();
        // SAFETY: fork has no memory preconditions; what the child may do after it
        // is argued in the module documentation and kept to in `child`.
        let pid = cvt(unsafe { libc::fork() })?;
        if pid == 0 {
            // SAFETY: we are the freshly forked child; `shared` points into the page
            // mapped above, which the child inherited (MAP_SHARED) and never unmaps.
            unsafe { child(parent, bytes, stride, deadline_ns, &*shared) }
        }
        Ok(Toucher {
            pid,
            page,
            exit: None,
        })
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.pid.unsigned_abs()
    }

    /// The child's progress so far (its last published counters, also after it died).
    pub fn progress(&self) -> Progress {
        let s = self.page.get();
        Progress {
            touched_bytes: s.touched.load(Ordering::Acquire),
            passes: s.passes.load(Ordering::Acquire),
        }
    }

    /// How the child ended, reaping it (`waitpid(WNOHANG)`); `None` while it runs.
    pub fn try_wait(&mut self) -> io::Result<Option<Exit>> {
        if self.exit.is_some() {
            return Ok(self.exit);
        }
        let mut status = 0;
        // SAFETY: waitpid writes the status through a valid pointer to `status`.
        let rc = cvt(unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) })?;
        if rc == 0 {
            return Ok(None);
        }
        self.exit = Some(decode(status));
        Ok(self.exit)
    }

    /// Kills the child (`SIGKILL`) and reaps it, returning how it ended (it may have
    /// ended by itself first); once reaped, only returns that.
    pub fn kill(&mut self) -> io::Result<Exit> {
        if let Some(exit) = self.exit {
            return Ok(exit);
        }
        // SAFETY: kill takes a pid and a signal; the pid is our unreaped child's.
        cvt(unsafe { libc::kill(self.pid, libc::SIGKILL) })?;
        let mut status = 0;
        loop {
            // SAFETY: as in `try_wait`; blocking, the child is dying.
            match cvt(unsafe { libc::waitpid(self.pid, &mut status, 0) }) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
                Ok(_) => break,
            }
        }
        let exit = decode(status);
        self.exit = Some(exit);
        Ok(exit)
    }
}

impl Drop for Toucher {
    fn drop(&mut self) {
        // Nothing to report to: a failure here means the child is already gone.
        let _ = self.kill();
    }
}

impl fmt::Debug for Toucher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Toucher")
            .field("pid", &self.pid)
            .field("progress", &self.progress())
            .field("exit", &self.exit)
            .finish()
    }
}

/// Decodes a `waitpid` status. Without `WUNTRACED`/`WCONTINUED` only ended children
/// are reported: exited or killed by a signal.
fn decode(status: libc::c_int) -> Exit {
    if libc::WIFEXITED(status) {
        match libc::WEXITSTATUS(status) {
            0 => Exit::Finished,
            EXIT_MAP_FAILED => Exit::MapFailed,
            code => Exit::Code(code),
        }
    } else {
        match libc::WTERMSIG(status) {
            libc::SIGKILL => Exit::Killed,
            sig => Exit::Signal(sig),
        }
    }
}

/// The child after `fork`: only async-signal-safe calls (see the module
/// documentation), never returns.
///
/// # Safety
///
/// Call only in a freshly forked child, with `shared` pointing into a `MAP_SHARED`
/// page that stays mapped.
unsafe fn child(
    parent: libc::pid_t,
    bytes: usize,
    stride: usize,
    deadline_ns: u64,
    shared: &Shared,
) -> ! {
    // Die with the thread that forked us; if the parent is already gone, no signal
    // would ever come.
    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 || libc::getppid() != parent
    {
        libc::_exit(EXIT_ORPHANED);
    }
    libc::prctl(libc::PR_SET_NAME, WORKER_NAME_C.as_ptr(), 0, 0, 0);
    // Best effort: without it the worker is still the biggest process once it grows.
    let fd = libc::open(OOM_SCORE_ADJ.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd >= 0 {
        libc::write(fd, b"1000".as_ptr().cast(), 4);
        libc::close(fd);
    }
    let region = libc::mmap(
        std::ptr::null_mut(),
        bytes,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
        -1,
        0,
    );
    if region == libc::MAP_FAILED {
        libc::_exit(EXIT_MAP_FAILED);
    }
    let region = region.cast::<u8>();
    let (mut touched, mut pass) = (0u64, 0u64);
    loop {
        pass = pass.wrapping_add(1);
        // Never 0: every pass changes what the last one wrote.
        let value = (pass as u8) | 1;
        let mut off = 0usize;
        while off < bytes {
            let from = off;
            let end = off.saturating_add(CHECK_EVERY).min(bytes);
            while off < end {
                // In bounds: off < end <= bytes, the length of the mapping.
                region.add(off).write_volatile(value);
                off = off.saturating_add(stride);
            }
            touched = touched.wrapping_add((end - from) as u64);
            shared.touched.store(touched, Ordering::Release);
            // A pass is complete once its last part is touched: publish it before
            // the deadline can end the child (leaving it for after the loop once
            // showed a whole pass more touched than passed, on a loaded machine).
            if off >= bytes {
                shared.passes.store(pass, Ordering::Release);
            }
            if monotonic_ns() >= deadline_ns {
                libc::_exit(0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm_rss_kib(pid: u32) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    fn soon(ms: u64) -> u64 {
        monotonic_ns() + ms * 1_000_000
    }

    /// A child touching 16 MiB page by page becomes resident (at least 16 MiB of
    /// VmRSS), is named, publishes whole passes of 16 MiB each, and exits 0 at its
    /// deadline.
    #[test]
    fn a_toucher_keeps_its_pages_and_finishes_at_its_deadline() {
        const BYTES: usize = 16 << 20;
        let mut t = Toucher::spawn(BYTES, 4096, soon(400)).expect("spawn");
        let (mut rss, mut named) = (0, false);
        let exit = loop {
            if let Some(exit) = t.try_wait().expect("waitpid") {
                break exit;
            }
            rss = rss.max(vm_rss_kib(t.pid()).unwrap_or(0));
            let comm = std::fs::read_to_string(format!("/proc/{}/comm", t.pid()));
            named |= comm.is_ok_and(|c| c.trim() == WORKER_NAME);
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert_eq!(exit, Exit::Finished);
        assert!(named, "the child never showed the name {WORKER_NAME}");
        assert!(rss >= 16 << 10, "VmRSS peaked at {rss} KiB");
        let p = t.progress();
        assert!(p.passes >= 1, "{p:?}");
        // Every pass covers the region: touched is whole passes plus part of the next.
        assert!(p.touched_bytes >= p.passes * BYTES as u64, "{p:?}");
        assert!(p.touched_bytes < (p.passes + 1) * BYTES as u64, "{p:?}");
        assert_eq!(t.kill().expect("already reaped"), Exit::Finished);
    }

    /// Killing a running child reaps it: it reports SIGKILL, and its pid is gone.
    #[test]
    fn kill_reaps_the_child() {
        let mut t = Toucher::spawn(1 << 20, 64, soon(60_000)).expect("spawn");
        let pid = t.pid();
        assert_eq!(t.try_wait().expect("waitpid"), None);
        assert_eq!(t.kill().expect("kill"), Exit::Killed);
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
        drop(t);
        // Dropping a running toucher kills and reaps it too.
        let t = Toucher::spawn(1 << 20, 64, soon(60_000)).expect("spawn");
        let pid = t.pid();
        drop(t);
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    }

    /// A region the kernel cannot map is reported as such (2^62 bytes is beyond any
    /// x86_64 or aarch64 address space).
    #[test]
    fn an_unmappable_region_is_reported() {
        let mut t = Toucher::spawn(1 << 62, 4096, soon(60_000)).expect("spawn");
        let exit = loop {
            if let Some(exit) = t.try_wait().expect("waitpid") {
                break exit;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        assert_eq!(exit, Exit::MapFailed);
        assert!(Toucher::spawn(0, 64, 0).is_err());
        assert!(Toucher::spawn(4096, 0, 0).is_err());
    }

    #[test]
    fn exits_read_as_text() {
        assert_eq!(Exit::Killed.to_string(), "killed by SIGKILL");
        assert_eq!(Exit::Signal(11).to_string(), "killed by signal 11");
        assert_eq!(Exit::Code(5).to_string(), "exited with code 5");
    }
}
