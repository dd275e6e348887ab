//! Files: an advisory, exclusive lock (`flock`) that one process holds on a file
//! while it writes a directory (or uses a scratch file), released by the kernel when
//! the file is closed or the process dies (even by `kill -9`), so a lock never
//! outlives its holder; files opened for direct I/O (`O_DIRECT`), dropping a file's
//! cached pages, and what a filesystem is and how much room it has (`statfs`), for
//! the disk load generator.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

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

/// Creates `path`, which must not exist yet, for reading and writing (mode 0600);
/// with `direct`, opened with `O_DIRECT`, so reads and writes go to the device
/// without the page cache (their buffers, offsets and lengths must then be aligned to
/// the device's logical block size). A filesystem without direct I/O refuses with
/// `EINVAL`.
pub fn create_new_rw(path: &Path, direct: bool) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create_new(true).mode(0o600);
    if direct {
        options.custom_flags(libc::O_DIRECT);
    }
    options.open(path)
}

/// Whether `e` is `EINVAL`: what a filesystem without direct I/O answers to an
/// `O_DIRECT` open, and a device to a direct read or write that is not aligned to
/// its logical block size.
pub fn is_invalid_argument(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINVAL)
}

/// Asks the kernel to drop `file`'s clean pages from the page cache
/// (`posix_fadvise(POSIX_FADV_DONTNEED)`), so that buffered reads that follow reach
/// the device, as fio's `invalidate=1` does. Dirty pages stay: sync the file first.
pub fn drop_cached_pages(file: &impl AsFd) -> io::Result<()> {
    // SAFETY: posix_fadvise takes a valid fd (borrowed for the call), offsets and a
    // flag; offset 0 and length 0 mean the whole file. No memory is touched.
    let rc =
        unsafe { libc::posix_fadvise(file.as_fd().as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    // posix_fadvise returns the error number itself instead of setting errno.
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// What `statfs` says of the filesystem holding a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsStats {
    /// Bytes an unprivileged user may still write there (`f_bavail * f_bsize`).
    pub free_bytes: u64,
    /// The filesystem's magic number (`f_type`, see `statfs(2)`).
    pub magic: u64,
}

impl FsStats {
    /// The filesystem's name for the common magic numbers (`ext4` for ext2/3/4,
    /// which share one), None for the others.
    pub fn name(&self) -> Option<&'static str> {
        Some(match self.magic {
            0xEF53 => "ext4",
            0x5846_5342 => "xfs",
            0x9123_683E => "btrfs",
            0x0102_1994 => "tmpfs",
            0x8584_58F6 => "ramfs",
            0x794C_7630 => "overlayfs",
            0x6969 => "nfs",
            0x2FC1_2FC1 => "zfs",
            0xF2F5_2010 => "f2fs",
            0x0102_1997 => "9p",
            0x6573_5546 => "fuse",
            0x4d44 => "vfat",
            _ => return None,
        })
    }

    /// Whether the filesystem keeps its files in memory (tmpfs, ramfs): I/O there
    /// reaches no disk, direct or not.
    pub fn in_memory(&self) -> bool {
        matches!(self.name(), Some("tmpfs" | "ramfs"))
    }
}

/// The filesystem holding `path` (`statfs`): its free space and its kind.
pub fn fs_stats(path: &Path) -> io::Result<FsStats> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    // SAFETY: statfs is plain data; all-zero is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c_path is a NUL-terminated string and `st` a valid statfs, both alive
    // across the call, which fills `st`.
    cvt(unsafe { libc::statfs(c_path.as_ptr(), &mut st) })?;
    // The field types differ between architectures (signed on some): go through
    // i128 so no value is cut.
    let bsize = u64::try_from(i128::from(st.f_bsize)).unwrap_or(0);
    let bavail = u64::try_from(i128::from(st.f_bavail)).unwrap_or(0);
    Ok(FsStats {
        free_bytes: bavail.saturating_mul(bsize),
        // f_type is signed on x86_64: a magic above i32::MAX reads negative there.
        magic: u64::from(st.f_type as u32),
    })
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

    #[test]
    fn direct_files_and_filesystem_facts() {
        let dir = std::env::temp_dir().join(format!("nnb-direct-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("f");
        // /tmp is ext4 on the build machines; wherever direct I/O is refused
        // (EINVAL) the buffered file still has to work.
        let file = match create_new_rw(&path, true) {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                create_new_rw(&path, false).expect("buffered")
            }
            Err(e) => panic!("create {}: {e}", path.display()),
        };
        let again = create_new_rw(&path, false).expect_err("the file exists");
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        drop_cached_pages(&file).expect("fadvise");
        let st = fs_stats(&dir).expect("statfs");
        assert!(st.free_bytes > 0, "{st:?}");
        // /proc is always procfs (magic 0x9fa0, not a named one) and never in memory
        // as tmpfs is.
        let proc = fs_stats(Path::new("/proc")).expect("statfs /proc");
        assert_eq!(proc.magic, 0x9fa0);
        assert_eq!(proc.name(), None);
        assert!(!proc.in_memory());
        let tmpfs = FsStats {
            free_bytes: 0,
            magic: 0x0102_1994,
        };
        assert_eq!(tmpfs.name(), Some("tmpfs"));
        assert!(tmpfs.in_memory());
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
