//! Batched UDP receive and send with `recvmmsg`/`sendmmsg`, so one system call moves
//! up to [`BATCH`] datagrams from many clients at once.
//!
//! A [`Batch`] owns its buffers, addresses and control space; the raw `mmsghdr`
//! pointers point into heap allocations that never move, so the batch is reused for
//! every call without allocating.

use std::io;
use std::mem;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};

/// Datagrams per system call.
pub(crate) const BATCH: usize = 32;
/// Receive buffer per datagram: the largest UDP payload, so nothing is truncated.
pub(crate) const BUF_LEN: usize = 65536;
/// Control space per datagram, in u64 words (room for an `SCM_TIMESTAMPNS` and a
/// `UDP_GRO` message).
const CTRL_WORDS: usize = 16;
/// `SO_TIMESTAMPNS` / `SCM_TIMESTAMPNS` (the same value on every Linux arch with a
/// 64-bit `time_t`).
pub(crate) const SO_TIMESTAMPNS: libc::c_int = 35;

/// Buffers and headers for one `recvmmsg`/`sendmmsg` batch.
pub(crate) struct Batch {
    bufs: Vec<u8>,
    iovs: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_storage>,
    ctrl: Vec<[u64; CTRL_WORDS]>,
    hdrs: Vec<libc::mmsghdr>,
    out: Vec<libc::mmsghdr>,
    with_ctrl: bool,
}

impl Batch {
    /// A batch of [`BATCH`] buffers; `with_ctrl` reserves room for receive timestamps.
    pub(crate) fn new(with_ctrl: bool) -> Self {
        let mut bufs = vec![0u8; BATCH * BUF_LEN];
        let base = bufs.as_mut_ptr();
        let iovs: Vec<libc::iovec> = (0..BATCH)
            .map(|i| libc::iovec {
                // SAFETY: i * BUF_LEN < bufs.len(), so the pointer stays in bounds.
                iov_base: unsafe { base.add(i * BUF_LEN) }.cast(),
                iov_len: BUF_LEN,
            })
            .collect();
        // SAFETY: sockaddr_storage and mmsghdr are plain C structs, valid when zeroed.
        let addrs: Vec<libc::sockaddr_storage> =
            (0..BATCH).map(|_| unsafe { mem::zeroed() }).collect();
        let ctrl = vec![[0u64; CTRL_WORDS]; BATCH];
        let hdrs = (0..BATCH).map(|_| unsafe { mem::zeroed() }).collect();
        let mut batch = Batch {
            bufs,
            iovs,
            addrs,
            ctrl,
            hdrs,
            out: Vec::with_capacity(BATCH),
            with_ctrl,
        };
        for i in 0..BATCH {
            let h = &mut batch.hdrs[i].msg_hdr;
            h.msg_name = ptr::addr_of_mut!(batch.addrs[i]).cast();
            h.msg_iov = ptr::addr_of_mut!(batch.iovs[i]);
            h.msg_iovlen = 1;
            if with_ctrl {
                h.msg_control = batch.ctrl[i].as_mut_ptr().cast();
            }
        }
        batch
    }

    /// Receives up to [`BATCH`] datagrams; `flags` is `MSG_WAITFORONE` (block for the
    /// first, subject to the socket's receive timeout) or `MSG_DONTWAIT` (busy-poll).
    pub(crate) fn recv(&mut self, fd: RawFd, flags: libc::c_int) -> io::Result<usize> {
        for i in 0..BATCH {
            self.iovs[i].iov_len = BUF_LEN;
            let h = &mut self.hdrs[i];
            h.msg_len = 0;
            h.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_hdr.msg_controllen = if self.with_ctrl {
                mem::size_of::<[u64; CTRL_WORDS]>() as _
            } else {
                0
            };
            h.msg_hdr.msg_flags = 0;
        }
        // SAFETY: every header points at live buffers of the lengths it declares.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                BATCH as libc::c_uint,
                flags,
                ptr::null_mut(),
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// The `i`-th received datagram.
    pub(crate) fn datagram(&self, i: usize) -> &[u8] {
        let len = (self.hdrs[i].msg_len as usize).min(BUF_LEN);
        &self.bufs[i * BUF_LEN..i * BUF_LEN + len]
    }

    /// The `i`-th received datagram, writable (a reflector rewrites it in place).
    pub(crate) fn datagram_mut(&mut self, i: usize) -> &mut [u8] {
        let len = (self.hdrs[i].msg_len as usize).min(BUF_LEN);
        &mut self.bufs[i * BUF_LEN..i * BUF_LEN + len]
    }

    /// The sender of the `i`-th datagram; `None` for an address family other than
    /// IPv4/IPv6 (impossible on a UDP/IP socket).
    pub(crate) fn peer(&self, i: usize) -> Option<SocketAddr> {
        sockaddr_to_std(&self.addrs[i])
    }

    /// The kernel's receive timestamp of the `i`-th datagram (`CLOCK_REALTIME`
    /// nanoseconds), when the socket has `SO_TIMESTAMPNS` on.
    pub(crate) fn kernel_timestamp_ns(&self, i: usize) -> Option<u64> {
        self.control(i, libc::SOL_SOCKET, SO_TIMESTAMPNS, |ts: libc::timespec| {
            ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
        })
    }

    /// The segment size of the `i`-th datagram when the kernel coalesced several
    /// same-sized datagrams into it (`UDP_GRO` on); `None` for a single datagram.
    pub(crate) fn gro_segment_size(&self, i: usize) -> Option<usize> {
        self.control(i, libc::SOL_UDP, libc::UDP_GRO, |size: libc::c_int| size)
            .and_then(|size| usize::try_from(size).ok())
            .filter(|&size| size > 0)
    }

    /// Reads the data of the `i`-th datagram's control message of `level`/`kind` as
    /// a `T` and maps it.
    fn control<T: Copy, R>(
        &self,
        i: usize,
        level: libc::c_int,
        kind: libc::c_int,
        map: impl FnOnce(T) -> R,
    ) -> Option<R> {
        let mhdr = &self.hdrs[i].msg_hdr;
        if !self.with_ctrl || mhdr.msg_controllen == 0 {
            return None;
        }
        // SAFETY: the kernel filled msg_control with msg_controllen bytes of cmsgs;
        // the CMSG macros stay within them, the length is checked before reading a
        // T, and the data is read unaligned.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(mhdr);
            while !c.is_null() {
                let fits = (*c).cmsg_len as usize
                    >= libc::CMSG_LEN(std::mem::size_of::<T>() as libc::c_uint) as usize;
                if (*c).cmsg_level == level && (*c).cmsg_type == kind && fits {
                    return Some(map(ptr::read_unaligned(libc::CMSG_DATA(c).cast::<T>())));
                }
                c = libc::CMSG_NXTHDR(mhdr, c);
            }
        }
        None
    }

    /// Sends the datagrams at `indices` back to their senders, as they now stand in
    /// the buffers; returns how many the kernel took. A datagram the kernel refuses
    /// is skipped (logged at debug level) so the rest still go out.
    pub(crate) fn send_back(&mut self, fd: RawFd, indices: &[usize]) -> usize {
        self.out.clear();
        for &i in indices {
            self.iovs[i].iov_len = self.hdrs[i].msg_len as usize;
            let mut h = self.hdrs[i];
            h.msg_hdr.msg_control = ptr::null_mut();
            h.msg_hdr.msg_controllen = 0;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
            self.out.push(h);
        }
        let (mut next, mut sent) = (0, 0);
        while next < self.out.len() {
            // SAFETY: the headers point at live buffers, addresses and iovecs.
            let n = unsafe {
                libc::sendmmsg(
                    fd,
                    self.out[next..].as_mut_ptr(),
                    (self.out.len() - next) as libc::c_uint,
                    0,
                )
            };
            if n < 0 {
                let err = io::Error::last_os_error();
                if err.kind() != io::ErrorKind::Interrupted {
                    tracing::debug!("sendmmsg refused a datagram: {err}");
                    next += 1;
                }
                continue;
            }
            next += n as usize;
            sent += n as usize;
        }
        sent
    }
}

/// Converts a kernel socket address into a std one.
fn sockaddr_to_std(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says this storage holds a sockaddr_in.
            let a: libc::sockaddr_in =
                unsafe { ptr::read_unaligned(ptr::from_ref(ss).cast::<libc::sockaddr_in>()) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this storage holds a sockaddr_in6.
            let a: libc::sockaddr_in6 =
                unsafe { ptr::read_unaligned(ptr::from_ref(ss).cast::<libc::sockaddr_in6>()) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// True for the errors a receive timeout or an empty non-blocking socket give.
pub(crate) fn is_idle(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// The receive loop a batched UDP server runs: fills `batch` from `fd` (blocking for
/// the first datagram, or busy-polling with `busy_poll`) and hands it with the number
/// of datagrams received to `handle`, until `stop` is set. An idle wake-up (receive
/// timeout, empty socket, signal) just loops; any other receive error is logged
/// under `role` and ends the loop.
pub(crate) fn serve_batches(
    fd: RawFd,
    batch: &mut Batch,
    busy_poll: bool,
    stop: &AtomicBool,
    role: &str,
    mut handle: impl FnMut(&mut Batch, usize),
) {
    let flags = if busy_poll {
        libc::MSG_DONTWAIT
    } else {
        libc::MSG_WAITFORONE
    };
    while !stop.load(Ordering::Relaxed) {
        match batch.recv(fd, flags) {
            Ok(n) => handle(batch, n),
            Err(e) if is_idle(&e) => std::hint::spin_loop(),
            Err(e) => {
                tracing::error!("{role} receive failed, {role} stops: {e}");
                return;
            }
        }
    }
}
