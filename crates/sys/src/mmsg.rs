//! Batched UDP I/O with `recvmmsg`/`sendmmsg`: one system call moves many datagrams.
//!
//! [`RecvBatch`] receives up to [`BATCH`] datagrams from many senders (with their
//! addresses, kernel receive timestamps and GRO segment sizes). [`SendBatch`] sends
//! the front of one contiguous buffer on a connected socket as a run of messages (each
//! one datagram, or one GSO run of datagrams when the socket has `UDP_SEGMENT` set).
//!
//! Both own their buffers, addresses and control space; the raw `mmsghdr`/`iovec`
//! pointers point into heap allocations that never move and never leave this module,
//! so a batch is reused for every call without allocating.

use std::io;
use std::mem;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd};
use std::ptr;

use crate::socket::SO_TIMESTAMPNS;

/// Datagrams per [`RecvBatch`] system call.
pub const BATCH: usize = 32;
/// Receive buffer per datagram: the largest UDP payload, so nothing is truncated.
pub const BUF_LEN: usize = 65536;
/// Control space per datagram, in u64 words (room for an `SCM_TIMESTAMPNS`, a
/// `UDP_GRO` and an `SO_RXQ_OVFL` message: 32 + 24 + 24 bytes).
const CTRL_WORDS: usize = 16;

/// How [`RecvBatch::recv`] waits for the first datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Block for the first datagram (subject to the socket's receive timeout), then
    /// take what else is queued (`MSG_WAITFORONE`).
    ForOne,
    /// Never block: an empty socket is a `WouldBlock` error (`MSG_DONTWAIT`), for
    /// busy-polling.
    Never,
}

/// Buffers and headers for one `recvmmsg`.
pub struct RecvBatch {
    bufs: Vec<u8>,
    iovs: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_storage>,
    ctrl: Vec<[u64; CTRL_WORDS]>,
    hdrs: Vec<libc::mmsghdr>,
    with_ctrl: bool,
}

// SAFETY: the raw pointers in `iovs` and `hdrs` point into heap buffers the batch
// owns and never reallocates; nothing else holds them, so moving the batch to another
// thread moves sole access with it.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// A batch of [`BATCH`] buffers of [`BUF_LEN`] bytes; `with_ctrl` reserves room
    /// for receive timestamps and GRO segment sizes.
    pub fn new(with_ctrl: bool) -> Self {
        let mut bufs = vec![0u8; BATCH * BUF_LEN];
        let base = bufs.as_mut_ptr();
        let iovs: Vec<libc::iovec> = (0..BATCH)
            .map(|i| libc::iovec {
                // SAFETY: i * BUF_LEN < bufs.len(), so the pointer stays in bounds.
                iov_base: unsafe { base.add(i * BUF_LEN) }.cast(),
                iov_len: BUF_LEN,
            })
            .collect();
        // SAFETY: sockaddr_storage is a plain C struct, valid when zeroed.
        let addrs: Vec<libc::sockaddr_storage> =
            (0..BATCH).map(|_| unsafe { mem::zeroed() }).collect();
        let ctrl = vec![[0u64; CTRL_WORDS]; BATCH];
        // SAFETY: mmsghdr is a plain C struct; all-zero is "no buffers, no name".
        let hdrs = (0..BATCH).map(|_| unsafe { mem::zeroed() }).collect();
        let mut batch = RecvBatch {
            bufs,
            iovs,
            addrs,
            ctrl,
            hdrs,
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

    /// Receives up to [`BATCH`] datagrams from `sock`, waiting as `wait` says;
    /// returns how many arrived.
    pub fn recv(&mut self, sock: &impl AsFd, wait: Wait) -> io::Result<usize> {
        for h in &mut self.hdrs {
            h.msg_len = 0;
            h.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_hdr.msg_controllen = if self.with_ctrl {
                mem::size_of::<[u64; CTRL_WORDS]>() as _
            } else {
                0
            };
            h.msg_hdr.msg_flags = 0;
        }
        let flags = match wait {
            Wait::ForOne => libc::MSG_WAITFORONE,
            Wait::Never => libc::MSG_DONTWAIT,
        };
        // SAFETY: every header points at live buffers of the lengths it declares.
        let n = unsafe {
            libc::recvmmsg(
                sock.as_fd().as_raw_fd(),
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
    pub fn datagram(&self, i: usize) -> &[u8] {
        let len = (self.hdrs[i].msg_len as usize).min(BUF_LEN);
        &self.bufs[i * BUF_LEN..i * BUF_LEN + len]
    }

    /// The sender of the `i`-th datagram; `None` for an address family other than
    /// IPv4/IPv6 (impossible on a UDP/IP socket).
    pub fn peer(&self, i: usize) -> Option<SocketAddr> {
        sockaddr_to_std(&self.addrs[i])
    }

    /// The kernel's receive timestamp of the `i`-th datagram (`CLOCK_REALTIME`
    /// nanoseconds), when the socket has `SO_TIMESTAMPNS` on.
    pub fn kernel_timestamp_ns(&self, i: usize) -> Option<u64> {
        self.control(i, libc::SOL_SOCKET, SO_TIMESTAMPNS, |ts: libc::timespec| {
            ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
        })
    }

    /// The segment size of the `i`-th datagram when the kernel coalesced several
    /// same-sized datagrams into it (`UDP_GRO` on); `None` for a single datagram.
    pub fn gro_segment_size(&self, i: usize) -> Option<usize> {
        self.control(i, libc::SOL_UDP, libc::UDP_GRO, |size: libc::c_int| size)
            .and_then(|size| usize::try_from(size).ok())
            .filter(|&size| size > 0)
    }

    /// How many datagrams the socket had dropped when the `i`-th datagram was queued
    /// (its `sk_drops`, cumulative since the socket was made, wrapping at 2^32), when
    /// the socket has `SO_RXQ_OVFL` on ([`crate::socket::set_rxq_overflow`]). The
    /// kernel sends no count while it is 0, so on such a socket `None` means none yet.
    pub fn drop_count(&self, i: usize) -> Option<u32> {
        self.control(i, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, |n: u32| n)
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
        if !self.with_ctrl {
            return None;
        }
        crate::cmsg::read_control(
            &self.hdrs[i].msg_hdr,
            mem::size_of::<[u64; CTRL_WORDS]>(),
            level,
            kind,
        )
        .map(map)
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

/// One contiguous send buffer cut into equal message slots, sent with `sendmmsg` on
/// a connected socket: the caller writes datagrams into [`SendBatch::buffer_mut`] and
/// sends its front with [`SendBatch::send`].
pub struct SendBatch {
    buf: Vec<u8>,
    slot: usize,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers in `iovs` and `hdrs` point into `buf` and `iovs`, which
// the batch owns and never reallocates; nothing else holds them.
unsafe impl Send for SendBatch {}

impl SendBatch {
    /// A buffer of `messages` slots of `slot_len` bytes each (both at least 1).
    pub fn new(messages: usize, slot_len: usize) -> Self {
        let (messages, slot) = (messages.max(1), slot_len.max(1));
        let mut batch = SendBatch {
            buf: vec![0u8; messages * slot],
            slot,
            iovs: Vec::with_capacity(messages),
            hdrs: Vec::with_capacity(messages),
        };
        let base = batch.buf.as_mut_ptr();
        batch.iovs.extend((0..messages).map(|k| libc::iovec {
            // SAFETY: k * slot < buf.len() by construction of `buf`.
            iov_base: unsafe { base.add(k * slot) }.cast(),
            iov_len: slot,
        }));
        let iov_base = batch.iovs.as_mut_ptr();
        batch.hdrs.extend((0..messages).map(|k| {
            // SAFETY: msghdr is plain data; all-zero is "no name, no control".
            let mut h: libc::mmsghdr = unsafe { mem::zeroed() };
            // SAFETY: k < iovs.len(), and `iovs` is never reallocated.
            h.msg_hdr.msg_iov = unsafe { iov_base.add(k) };
            h.msg_hdr.msg_iovlen = 1;
            h
        }));
        batch
    }

    /// Messages per send at most.
    pub fn messages(&self) -> usize {
        self.hdrs.len()
    }

    /// Bytes per message slot.
    pub fn slot_len(&self) -> usize {
        self.slot
    }

    /// Bytes [`SendBatch::send`] can carry at most (messages x slot).
    pub fn capacity(&self) -> usize {
        self.messages() * self.slot
    }

    /// The buffer to write datagrams into, [`SendBatch::capacity`] bytes long.
    pub fn buffer_mut(&mut self) -> &mut [u8] {
        let cap = self.capacity();
        &mut self.buf[..cap]
    }

    /// Cuts the buffer into smaller slots of `slot_len` bytes (clamped to 1..=the
    /// current slot): after GSO is refused a slot holds one datagram, not a run.
    pub fn shrink_slots(&mut self, slot_len: usize) {
        self.slot = slot_len.clamp(1, self.slot);
        let base = self.buf.as_mut_ptr();
        for (k, iov) in self.iovs.iter_mut().enumerate() {
            // SAFETY: k * slot < messages * old slot = buf.len().
            iov.iov_base = unsafe { base.add(k * self.slot) }.cast();
            iov.iov_len = self.slot;
        }
    }

    /// Sends the first `len` bytes of the buffer (capped at
    /// [`SendBatch::capacity`]) on the connected `sock` as one `sendmmsg` of
    /// `len / slot` full messages and a shorter last one; returns how many messages
    /// the kernel took (fewer on a partial send).
    pub fn send(&mut self, sock: &impl AsFd, len: usize) -> io::Result<usize> {
        let len = len.min(self.capacity());
        let msgs = len.div_ceil(self.slot);
        for (k, iov) in self.iovs[..msgs].iter_mut().enumerate() {
            iov.iov_len = (len - k * self.slot).min(self.slot);
        }
        // SAFETY: hdrs[..msgs] point at iovecs and buffer bytes owned by self, sized
        // just above within the buffer.
        let rc = unsafe {
            libc::sendmmsg(
                sock.as_fd().as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                msgs as libc::c_uint,
                0,
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(rc as usize)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::Duration;

    fn pair() -> (UdpSocket, UdpSocket) {
        let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        rx.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        tx.connect(rx.local_addr().expect("addr")).expect("connect");
        (rx, tx)
    }

    #[test]
    fn send_batch_sends_one_datagram_per_slot() {
        let (rx, tx) = pair();
        let mut b = SendBatch::new(4, 10);
        assert_eq!((b.messages(), b.slot_len(), b.capacity()), (4, 10, 40));
        for (i, byte) in b.buffer_mut().iter_mut().enumerate() {
            *byte = i as u8;
        }
        // 25 bytes: two full 10-byte datagrams and a 5-byte one.
        assert_eq!(b.send(&tx, 25).expect("send"), 3);
        let mut buf = [0u8; 64];
        let lens: Vec<usize> = (0..3).map(|_| rx.recv(&mut buf).expect("recv")).collect();
        assert_eq!(lens, [10, 10, 5]);
        assert_eq!(&buf[..5], &[20, 21, 22, 23, 24]);
        // More than the capacity is capped at it.
        assert_eq!(b.send(&tx, 1000).expect("send"), 4);
        b.shrink_slots(3);
        assert_eq!((b.slot_len(), b.capacity()), (3, 12));
        assert_eq!(b.send(&tx, 7).expect("send"), 3);
        let lens: Vec<usize> = (0..7).map(|_| rx.recv(&mut buf).expect("recv")).collect();
        assert_eq!(lens, [10, 10, 10, 10, 3, 3, 1]);
        assert_eq!(&buf[..1], &[6]);
    }

    #[test]
    fn recv_batch_receives_and_stamps() {
        let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        rx.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        crate::socket::set_timestamps_ns(&rx, true).expect("timestamps");
        let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let to = rx.local_addr().expect("addr");
        let mut batch = RecvBatch::new(true);
        assert!(batch
            .recv(&rx, Wait::Never)
            .is_err_and(|e| e.kind() == io::ErrorKind::WouldBlock));
        let before = crate::clock::realtime_ns();
        for i in 0..3u8 {
            tx.send_to(&[i; 7], to).expect("send");
        }
        let mut got = Vec::new();
        while got.len() < 3 {
            let n = batch.recv(&rx, Wait::ForOne).expect("recv");
            for i in 0..n {
                assert_eq!(batch.peer(i), Some(tx.local_addr().expect("addr")));
                assert!(batch.kernel_timestamp_ns(i).is_some_and(|t| t >= before));
                assert_eq!(batch.gro_segment_size(i), None);
                got.push(batch.datagram(i).to_vec());
            }
        }
        assert_eq!(got, [vec![0u8; 7], vec![1; 7], vec![2; 7]]);
    }

    #[test]
    fn drop_counts_come_with_the_datagrams_after_an_overflow() {
        let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        rx.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        crate::socket::set_rxq_overflow(&rx, true).expect("SO_RXQ_OVFL");
        // The smallest buffer the kernel grants (a few KiB) overflows in a burst.
        crate::socket::set_buffer(&rx, crate::socket::Direction::Receive, 1).expect("rcvbuf");
        let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let to = rx.local_addr().expect("addr");
        const BURST: u64 = 500;
        for _ in 0..BURST {
            tx.send_to(&[0u8; 1000], to).expect("send");
        }
        let mut batch = RecvBatch::new(true);
        let mut received = 0u64;
        let mut counts = Vec::new();
        while let Ok(n) = batch.recv(&rx, Wait::Never) {
            for i in 0..n {
                counts.push(batch.drop_count(i));
            }
            received += n as u64;
        }
        assert!(received > 0 && received < BURST, "{received} of {BURST}");
        // Queued before any drop: no count.
        assert_eq!(counts[0], None);
        // One more datagram after the burst carries every drop of it.
        tx.send_to(&[1u8; 10], to).expect("send");
        assert_eq!(batch.recv(&rx, Wait::ForOne).expect("recv"), 1);
        assert_eq!(batch.drop_count(0).map(u64::from), Some(BURST - received));
    }

    #[test]
    fn ipv6_peers_convert() {
        let Ok(rx) = UdpSocket::bind("[::1]:0") else {
            eprintln!("no IPv6 loopback here");
            return;
        };
        rx.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let tx = UdpSocket::bind("[::1]:0").expect("bind");
        tx.send_to(b"six", rx.local_addr().expect("addr"))
            .expect("send");
        let mut batch = RecvBatch::new(false);
        assert_eq!(batch.recv(&rx, Wait::ForOne).expect("recv"), 1);
        assert_eq!(batch.peer(0), Some(tx.local_addr().expect("addr")));
        assert_eq!(batch.datagram(0), b"six");
        assert_eq!(batch.kernel_timestamp_ns(0), None);
    }
}
