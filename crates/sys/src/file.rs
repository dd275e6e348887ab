//! File locks: an advisory, exclusive lock (`flock`) that one process holds on a file
//! while it writes a directory, released by the kernel when the file is closed or the
//! process dies (even by `kill -9`), so a lock never outlives its holder.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

use crate::cvt;

/// Takes an exclusive advisory lock on `file` without waiting: `Ok(true)` when this
/// process now holds it, `Ok(false)` when another open file description holds it.
pub fn try_lock_exclusive(file: &impl AsFd) -> io::Result<bool> {
    // SAFETY: flock takes a valid fd (borrowed for the call) and flags; no memory.
    match cvt(unsafe { libc::flock(file.as_fd().as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_until_it_closes() {
        let dir = std::env::temp_dir().join(format!("nnb-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("lock");
        let open = || {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .expect("open")
        };
        let first = open();
        assert!(try_lock_exclusive(&first).expect("lock"));
        // A second open file description, as a second process would have.
        let second = open();
        assert!(!try_lock_exclusive(&second).expect("try"));
        drop(first);
        assert!(try_lock_exclusive(&second).expect("lock after close"));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
