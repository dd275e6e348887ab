//! nnb's OS layer: every system call nnb makes (CPU affinity, clocks, the hardware
//! counter, socket options, batched UDP I/O, process setup, cgroups, files only
//! their owner can change), each behind a small safe function, so the rest of the
//! workspace needs no `unsafe` (it is denied there by the workspace lints).
//!
//! The style follows quinn-udp: the raw C structures (`cpu_set_t`, `iovec`,
//! `mmsghdr`, control messages) never leave this crate, errors come back as
//! [`std::io::Error`] (or a typed error where callers need the cases), and the
//! callers decide what a failure means for them. Linux only, like nnb.
#![allow(unsafe_code)]

pub mod affinity;
pub mod cgroup;
pub mod clock;
mod cmsg;
pub mod file;
pub mod icmp;
pub mod mmsg;
pub mod owned;
pub mod process;
pub mod rlimit;
pub mod socket;
pub mod toucher;
pub mod ttl;

/// Turns a C return code into an I/O result: negative means `errno` holds the error.
fn cvt(rc: libc::c_int) -> std::io::Result<libc::c_int> {
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}
