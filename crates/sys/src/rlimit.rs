//! The process's limit on open files (`RLIMIT_NOFILE`): read it, and raise its soft
//! limit to the hard one, which needs no privilege. A server that holds many
//! connections sizes its connection cap from it.

use std::io;

use crate::cvt;

/// The limits on open file descriptors (`getrlimit(RLIMIT_NOFILE)`); an unlimited
/// one reads as `u64::MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFiles {
    /// The limit in force: `open`, `accept` and the like fail with EMFILE beyond it.
    pub soft: u64,
    /// The most the soft limit may be raised to without privilege.
    pub hard: u64,
}

fn from_rlim(v: libc::rlim_t) -> u64 {
    if v == libc::RLIM_INFINITY {
        u64::MAX
    } else {
        v
    }
}

/// This process's limits on open files.
pub fn open_files() -> io::Result<OpenFiles> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit that getrlimit fills; it outlives the call.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    Ok(OpenFiles {
        soft: from_rlim(lim.rlim_cur),
        hard: from_rlim(lim.rlim_max),
    })
}

/// Raises this process's soft limit on open files to its hard limit (a no-op when
/// they are equal) and returns the limits now in force. On failure the limits are
/// unchanged.
pub fn raise_open_files() -> io::Result<OpenFiles> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: as in `open_files`.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    if lim.rlim_cur != lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: `lim` is a valid rlimit read just above, only its soft limit
        // changed; setrlimit reads it during the call.
        cvt(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) })?;
    }
    open_files()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compared with what the kernel shows in `/proc/self/limits`, which is not
    /// read through this module.
    #[test]
    fn the_limits_are_those_the_kernel_shows_and_raising_reaches_the_hard_one() {
        let shown = || {
            let text = std::fs::read_to_string("/proc/self/limits").expect("limits");
            let line = text
                .lines()
                .find(|l| l.starts_with("Max open files"))
                .expect("open files line")
                .to_string();
            let field = |i: usize| -> u64 {
                match line.split_whitespace().nth(i).expect("field") {
                    "unlimited" => u64::MAX,
                    n => n.parse().expect("a number"),
                }
            };
            OpenFiles {
                soft: field(3),
                hard: field(4),
            }
        };
        assert_eq!(open_files().expect("getrlimit"), shown());
        let raised = raise_open_files().expect("raise");
        assert_eq!(raised.soft, raised.hard);
        assert_eq!(raised, shown());
    }
}
