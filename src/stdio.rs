//! Whether stdout was closed when nnb started (`nnb topo >&-`).
//!
//! Rust's runtime, before `main`, opens `/dev/null` read-write on each of the
//! standard descriptors it finds closed, so that a closed stdout swallows every
//! write without an error: a command run so would exit 0 with its output lost. A
//! shell's `>/dev/null` opens it write-only, so `/dev/null` opened read-write on
//! descriptor 1 is what the runtime left in place of a closed stdout.

use std::path::Path;

/// The access-mode bits of a descriptor's flags (`O_ACCMODE`) and their read-write
/// value (`O_RDWR`), as `/proc/self/fdinfo` shows them in octal.
const ACCESS_MODE: u32 = 0o3;
const READ_WRITE: u32 = 0o2;

/// Whether stdout is the `/dev/null` Rust's runtime opened because descriptor 1 was
/// closed at start (false when `/proc` cannot tell).
pub(crate) fn stdout_was_closed() -> bool {
    let on_null = std::fs::read_link("/proc/self/fd/1").is_ok_and(|t| t == Path::new("/dev/null"));
    on_null
        && std::fs::read_to_string("/proc/self/fdinfo/1").is_ok_and(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
                .is_some_and(|flags| flags & ACCESS_MODE == READ_WRITE)
        })
}
