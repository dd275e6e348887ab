//! Reading the control messages (`cmsg`) the kernel returns with a received
//! datagram, bounded by the control buffer they were written into.

use std::mem;
use std::ptr;

/// Reads the data of the first control message of `level`/`kind` in `msg` (as the
/// kernel filled it from a control buffer of `capacity` bytes) as a `T`. The length
/// the kernel wrote back is bounded by `capacity`, and a message shorter than a `T`
/// is passed over.
pub(crate) fn read_control<T: Copy>(
    msg: &libc::msghdr,
    capacity: usize,
    level: libc::c_int,
    kind: libc::c_int,
) -> Option<T> {
    if msg.msg_control.is_null() || msg.msg_controllen == 0 {
        return None;
    }
    let mut bounded = *msg;
    bounded.msg_controllen = msg.msg_controllen.min(capacity as _);
    let end = msg.msg_control as usize + bounded.msg_controllen;
    // SAFETY: msg_control points at `capacity` bytes the kernel filled with cmsgs
    // up to msg_controllen, which is bounded by them; the CMSG macros stay within
    // msg_controllen (CMSG_FIRSTHDR and CMSG_NXTHDR return null for a header that
    // does not fit), and a T is read only when the message's length says it holds
    // one and the T ends within msg_controllen; it is read unaligned.
    unsafe {
        let need = libc::CMSG_LEN(mem::size_of::<T>() as libc::c_uint) as usize;
        let mut c = libc::CMSG_FIRSTHDR(&bounded);
        while !c.is_null() {
            let data = libc::CMSG_DATA(c);
            let fits = (*c).cmsg_len as usize >= need && data as usize + mem::size_of::<T>() <= end;
            if (*c).cmsg_level == level && (*c).cmsg_type == kind && fits {
                return Some(ptr::read_unaligned(data.cast::<T>()));
            }
            c = libc::CMSG_NXTHDR(&bounded, c);
        }
    }
    None
}
