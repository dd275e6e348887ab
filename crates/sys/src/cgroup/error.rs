//! What can go wrong with cgroups, each case naming the file involved and, where
//! the cause is a common one, what to do about it.

use std::io;
use std::path::PathBuf;

/// A cgroup operation failed: which file or directory, and why.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// Neither a cgroup v2 mount with the cpu, memory and io controllers nor this
    /// v1 controller is mounted, so nnb cannot enforce grants here.
    #[error(
        "cgroup v1 controller `{controller}` is not mounted and no cgroup v2 mount offers cpu, memory and io \
         (mount it: `mount -t cgroup -o {controller} {controller} /sys/fs/cgroup/{controller}`)"
    )]
    NotMounted {
        /// The first missing v1 controller.
        controller: &'static str,
    },
    /// A cgroup v2 directory does not offer a controller nnb needs.
    #[error(
        "the cgroup v2 controller `{controller}` is not available in {} (it must be listed in cgroup.controllers \
         there; enable it in the parent's cgroup.subtree_control)",
        .dir.display()
    )]
    ControllerMissing {
        /// The controller.
        controller: &'static str,
        /// The cgroup directory that lacks it.
        dir: PathBuf,
    },
    /// A file or directory could not be read.
    #[error("reading {}: {source}{}", .path.display(), hint(.source))]
    Read {
        /// What was read.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A cgroup file refused a value.
    #[error("writing {value} to {}: {source}{}", .path.display(), hint(.source))]
    Write {
        /// The file written.
        path: PathBuf,
        /// What was written.
        value: String,
        /// The OS error.
        source: io::Error,
    },
    /// A cgroup directory could not be created.
    #[error("creating the cgroup {}: {source}{}", .path.display(), hint(.source))]
    Create {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A cgroup directory could not be removed.
    #[error("removing the cgroup {}: {source}{}", .path.display(), hint(.source))]
    Remove {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A file's content is not what the kernel writes there (or it is too large).
    #[error("{}: {what}", .path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// The cgroup path is not a plain relative path below the hierarchy.
    #[error("invalid cgroup path {}: {what}", .path.display())]
    InvalidPath {
        /// The path given.
        path: PathBuf,
        /// Why it is refused.
        what: &'static str,
    },
    /// The grant cannot be enforced as asked (checked before anything is written).
    #[error("invalid grant: {0}")]
    InvalidGrant(String),
    /// A process could not be killed.
    #[error("sending SIGKILL to process {pid} in {}: {source}{}", .path.display(), hint(.source))]
    Kill {
        /// The process.
        pid: u32,
        /// The cgroup it is in.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Processes outlived SIGKILL and the wait (stuck in the kernel, e.g. on I/O).
    #[error("{} still holds processes {pids:?} after SIGKILL and {waited_ms} ms of waiting", .path.display())]
    Busy {
        /// The cgroup.
        path: PathBuf,
        /// The processes still there.
        pids: Vec<u32>,
        /// How long nnb waited.
        waited_ms: u64,
    },
    /// The calling process itself is in the cgroup to remove; it would kill itself.
    #[error("this process ({pid}) is in {}: move it out before removing the cgroup", .path.display())]
    HoldsSelf {
        /// The calling process.
        pid: u32,
        /// The cgroup.
        path: PathBuf,
    },
    /// The filesystem has no block device to limit (tmpfs, overlay, btrfs, NFS...).
    #[error(
        "{} is on a filesystem without a block device (device {major}:{minor}, e.g. tmpfs or overlay): \
         io limits need a directory on a disk",
        .path.display()
    )]
    NoBlockDevice {
        /// The path asked about.
        path: PathBuf,
        /// Its filesystem's device major number (0: anonymous).
        major: u32,
        /// Its filesystem's device minor number.
        minor: u32,
    },
}

/// What to do about the common causes: cgroup files are root's to write.
fn hint(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::PermissionDenied => " (run as root)",
        _ => "",
    }
}
