//! Socket options (integer `setsockopt`/`getsockopt`, buffer sizes, UDP GSO and GRO,
//! kernel receive timestamps, receive-queue drop counts), UDP sockets that share a
//! port (`SO_REUSEPORT`), a TCP socket's `TCP_INFO`, and waiting for a socket to
//! become readable.

use std::io;
use std::mem;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use crate::cvt;

/// `SO_TIMESTAMPNS` / `SCM_TIMESTAMPNS` (the same value on every Linux arch with a
/// 64-bit `time_t`).
pub(crate) const SO_TIMESTAMPNS: libc::c_int = 35;

/// Sets one integer socket option (`setsockopt(level, opt, &value)`).
pub fn set_int(
    sock: &impl AsFd,
    level: libc::c_int,
    opt: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: a valid fd (borrowed for the call) and a pointer to an int of the
    // declared size.
    cvt(unsafe {
        libc::setsockopt(
            sock.as_fd().as_raw_fd(),
            level,
            opt,
            std::ptr::from_ref(&value).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Reads one integer socket option (`getsockopt(level, opt)`).
pub fn get_int(sock: &impl AsFd, level: libc::c_int, opt: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a valid fd and a pointer to an int whose size `len` declares; the
    // kernel writes at most `len` bytes.
    cvt(unsafe {
        libc::getsockopt(
            sock.as_fd().as_raw_fd(),
            level,
            opt,
            std::ptr::from_mut(&mut value).cast(),
            &mut len,
        )
    })?;
    Ok(value)
}

/// Which socket buffer to size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The send buffer (`SO_SNDBUF`).
    Send,
    /// The receive buffer (`SO_RCVBUF`).
    Receive,
}

impl Direction {
    /// The privileged option (beyond the sysctl cap) and the plain one.
    fn options(self) -> (libc::c_int, libc::c_int) {
        match self {
            Direction::Send => (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
            Direction::Receive => (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        }
    }
}

/// Asks for a socket buffer of `bytes` (capped at `i32::MAX`): the `...FORCE` option
/// when privileged (`CAP_NET_ADMIN`), else the plain one, which the kernel caps at
/// `net.core.wmem_max`/`rmem_max`. The error is the plain option's.
pub fn set_buffer(sock: &impl AsFd, dir: Direction, bytes: usize) -> io::Result<()> {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    let (force, plain) = dir.options();
    set_int(sock, libc::SOL_SOCKET, force, v).or_else(|_| set_int(sock, libc::SOL_SOCKET, plain, v))
}

/// The socket buffer's size as the kernel reports it (twice the size asked for: the
/// kernel doubles it for bookkeeping).
pub fn buffer_size(sock: &impl AsFd, dir: Direction) -> io::Result<usize> {
    let v = get_int(sock, libc::SOL_SOCKET, dir.options().1)?;
    Ok(usize::try_from(v).unwrap_or(0))
}

/// Bytes still in the socket's send queue (`SIOCOUTQ`): for TCP, written but not yet
/// acknowledged by the peer; for UDP, not yet handed to the device.
pub fn send_queue_bytes(sock: &impl AsFd) -> io::Result<usize> {
    let mut value: libc::c_int = 0;
    // SAFETY: a valid fd and a pointer to an int, which SIOCOUTQ (TIOCOUTQ) fills.
    cvt(unsafe { libc::ioctl(sock.as_fd().as_raw_fd(), libc::TIOCOUTQ, &mut value) })?;
    Ok(usize::try_from(value).unwrap_or(0))
}

/// Sets the UDP GSO segment size (`UDP_SEGMENT`): each send is cut into datagrams of
/// `size` bytes by the kernel or the NIC; 0 turns GSO off. Kernels before 4.18 refuse.
pub fn set_udp_segment(sock: &impl AsFd, size: u16) -> io::Result<()> {
    set_int(
        sock,
        libc::SOL_UDP,
        libc::UDP_SEGMENT,
        libc::c_int::from(size),
    )
}

/// Sends `buf` on a connected UDP socket as one datagram whatever GSO segment size
/// the socket has: a `UDP_SEGMENT` control message of 0 overrides the socket's
/// setting for this send only, so a thread may send a datagram longer than the
/// segment size on a socket another thread sends segmented batches on, without
/// turning GSO off under it. A kernel without UDP GSO (which refuses the control
/// message) gets a plain `send`.
pub fn send_unsegmented(sock: &impl AsFd, buf: &[u8]) -> io::Result<usize> {
    const SPACE: usize = 32;
    // CMSG_SPACE of a u16, within SPACE bytes on every Linux arch.
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(mem::size_of::<u16>() as libc::c_uint) } as usize;
    debug_assert!(space <= SPACE);
    let mut control = [0u64; SPACE / 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr().cast_mut().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: a zeroed msghdr is valid; its pointers are set below to live buffers.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space.min(SPACE) as _;
    // SAFETY: msg_control points at `space` zeroed, aligned bytes, room for one cmsg
    // of a u16 (CMSG_FIRSTHDR is non-null for such a buffer); the kernel only reads
    // the iovec's `buf.len()` bytes.
    let sent = unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_UDP;
        (*c).cmsg_type = libc::UDP_SEGMENT;
        (*c).cmsg_len = libc::CMSG_LEN(mem::size_of::<u16>() as libc::c_uint) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), 0);
        libc::sendmsg(sock.as_fd().as_raw_fd(), &msg, 0)
    };
    if sent >= 0 {
        return Ok(sent as usize);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EINVAL | libc::ENOPROTOOPT | libc::EOPNOTSUPP) => {
            // SAFETY: a valid fd and the caller's buffer of `buf.len()` bytes.
            let sent =
                unsafe { libc::send(sock.as_fd().as_raw_fd(), buf.as_ptr().cast(), buf.len(), 0) };
            if sent < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(sent as usize)
            }
        }
        _ => Err(e),
    }
}

/// Turns coalesced UDP receive (`UDP_GRO`) on or off: same-sized datagrams from one
/// sender arrive as one buffer with their segment size in a control message
/// ([`crate::mmsg::RecvBatch::gro_segment_size`]). Kernels before 5.0 refuse.
pub fn set_udp_gro(sock: &impl AsFd, on: bool) -> io::Result<()> {
    set_int(sock, libc::SOL_UDP, libc::UDP_GRO, libc::c_int::from(on))
}

/// Turns kernel receive timestamps (`SO_TIMESTAMPNS`, `CLOCK_REALTIME` nanoseconds)
/// on or off; [`crate::mmsg::RecvBatch::kernel_timestamp_ns`] reads them.
pub fn set_timestamps_ns(sock: &impl AsFd, on: bool) -> io::Result<()> {
    set_int(
        sock,
        libc::SOL_SOCKET,
        SO_TIMESTAMPNS,
        libc::c_int::from(on),
    )
}

/// Turns the receive-queue drop count on or off (`SO_RXQ_OVFL`): each datagram then
/// carries, in a control message, how many datagrams the socket had dropped when it
/// was queued (a full receive buffer, above all);
/// [`crate::mmsg::RecvBatch::drop_count`] reads it. The count is the kernel's
/// `sk_drops`, the `drops` column of `/proc/net/udp`.
pub fn set_rxq_overflow(sock: &impl AsFd, on: bool) -> io::Result<()> {
    set_int(
        sock,
        libc::SOL_SOCKET,
        libc::SO_RXQ_OVFL,
        libc::c_int::from(on),
    )
}

/// Binds `count` UDP sockets (at least 1) to one address with `SO_REUSEPORT`, so the
/// kernel spreads arriving datagrams over them by a hash of their addresses (one
/// sender's datagrams all reach one socket while the group stays the same), and a
/// receiver can read each on its own CPU.
///
/// The port must be free: it is first bound by a plain socket (no `SO_REUSEPORT`),
/// which fails like any bind when something holds the port, and, for port 0, has the
/// kernel pick a port nothing holds; that socket is closed and the group bound to the
/// port. So the group never joins another process's sockets on the port (which
/// `SO_REUSEPORT` would allow a process of the same user) and never shares an
/// ephemeral port with one. Only a bind in the moment between the two can take the
/// port; then the group's bind fails with `AddrInUse`.
pub fn bind_udp_group(addr: SocketAddr, count: usize) -> io::Result<Vec<UdpSocket>> {
    let probe = UdpSocket::bind(addr)?;
    let addr = probe.local_addr()?;
    drop(probe);
    (0..count.max(1)).map(|_| bind_reuseport(addr)).collect()
}

/// One UDP socket bound to `addr` with `SO_REUSEPORT` set before the bind.
fn bind_reuseport(addr: SocketAddr) -> io::Result<UdpSocket> {
    let family = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    // SAFETY: socket(2) with constant arguments; the result is checked below.
    let fd = cvt(unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` is a new socket this function owns and nothing else refers to.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    set_int(&sock, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    let (storage, len) = sockaddr_of(addr);
    // SAFETY: a valid fd and a sockaddr of `len` bytes that lives across the call.
    cvt(unsafe { libc::bind(sock.as_raw_fd(), std::ptr::from_ref(&storage).cast(), len) })?;
    Ok(UdpSocket::from(sock))
}

/// A std socket address as the kernel's `sockaddr_storage` and its length.
fn sockaddr_of(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; all-zero is a valid (empty) address.
    let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in and suitably
            // aligned for it.
            unsafe { std::ptr::write(std::ptr::from_mut(&mut storage).cast(), sin) };
            mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { std::ptr::write(std::ptr::from_mut(&mut storage).cast(), sin6) };
            mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// Whether `e`, from a send or a receive on a connected UDP socket, is the loss of one
/// datagram and not a broken socket: the kernel reports an ICMP error for an earlier
/// datagram (`ECONNREFUSED`: nothing listens on the port; `EHOSTUNREACH`,
/// `ENETUNREACH`: no route), or the device queue is full (`ENOBUFS`). The socket still
/// works; the sender counts the datagram lost and goes on.
pub fn is_datagram_lost(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ECONNREFUSED | libc::EHOSTUNREACH | libc::ENETUNREACH | libc::ENOBUFS)
    )
}

/// True when `sock` (a socket, a listener) is readable within `timeout` (`poll`):
/// data, a pending connection, or an error waits. A signal or an error of `poll`
/// itself reads as "not readable" (the caller polls again).
pub fn wait_readable(sock: &impl AsFd, timeout: Duration) -> bool {
    let mut pfd = libc::pollfd {
        fd: sock.as_fd().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one valid pollfd for the duration of the call.
    let r = unsafe { libc::poll(&mut pfd, 1, ms) };
    r > 0 && pfd.revents & libc::POLLIN != 0
}

/// The kernel's `struct tcp_info` (linux/tcp.h) up to `tcpi_bytes_retrans` (Linux
/// 4.19): the fields this crate reads, at their offsets; older kernels fill a prefix.
#[repr(C)]
#[derive(Default)]
struct RawTcpInfo {
    state: [u8; 8],
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
    delivered: u32,
    delivered_ce: u32,
    bytes_sent: u64,
    bytes_retrans: u64,
}

/// One reading of a TCP socket's `TCP_INFO`: the sender's state that explains its
/// throughput. A field the running kernel does not fill (it returns a shorter struct)
/// is `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Segments retransmitted over the connection's life (`tcpi_total_retrans`).
    pub total_retrans: u32,
    /// Congestion window, segments (`tcpi_snd_cwnd`).
    pub cwnd: u32,
    /// Smoothed round-trip time, µs (`tcpi_rtt`).
    pub srtt_us: u32,
    /// Segments sent and not yet acknowledged (`tcpi_unacked`).
    pub unacked: u32,
    /// Segments sent (`tcpi_segs_out`, Linux 4.2).
    pub segs_out: Option<u32>,
    /// Bytes the peer acknowledged (`tcpi_bytes_acked`, Linux 4.1).
    pub bytes_acked: Option<u64>,
    /// The kernel's delivery rate estimate, bytes/s (`tcpi_delivery_rate`, 4.9).
    pub delivery_rate: Option<u64>,
    /// Data bytes sent, retransmissions included (`tcpi_bytes_sent`, 4.19).
    pub bytes_sent: Option<u64>,
}

/// Reads `TCP_INFO` of a TCP socket (`getsockopt(IPPROTO_TCP, TCP_INFO)`).
pub fn tcp_info(sock: &impl AsFd) -> io::Result<TcpInfo> {
    let mut raw = RawTcpInfo::default();
    let mut len = mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: a valid fd and a pointer to a plain-old-data struct of `len` bytes;
    // the kernel writes at most `len` bytes and says how many in `len`.
    cvt(unsafe {
        libc::getsockopt(
            sock.as_fd().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            std::ptr::from_mut(&mut raw).cast(),
            &mut len,
        )
    })?;
    let len = len as usize;
    // A field is filled when the kernel's struct reaches past its end.
    macro_rules! filled {
        ($f:ident) => {
            (len >= mem::offset_of!(RawTcpInfo, $f) + mem::size_of_val(&raw.$f)).then_some(raw.$f)
        };
    }
    Ok(TcpInfo {
        total_retrans: raw.total_retrans,
        cwnd: raw.snd_cwnd,
        srtt_us: raw.rtt,
        unacked: raw.unacked,
        segs_out: filled!(segs_out),
        bytes_acked: filled!(bytes_acked),
        delivery_rate: filled!(delivery_rate),
        bytes_sent: filled!(bytes_sent),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream, UdpSocket};

    fn udp() -> UdpSocket {
        UdpSocket::bind("127.0.0.1:0").expect("bind")
    }

    #[test]
    fn int_options_read_back() {
        let s = udp();
        set_int(&s, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1).expect("set");
        assert_eq!(
            get_int(&s, libc::SOL_SOCKET, libc::SO_REUSEADDR).expect("get"),
            1
        );
        set_int(&s, libc::SOL_SOCKET, libc::SO_REUSEADDR, 0).expect("set");
        assert_eq!(
            get_int(&s, libc::SOL_SOCKET, libc::SO_REUSEADDR).expect("get"),
            0
        );
        // An option that does not exist at that level is the kernel's error.
        assert!(set_int(&s, libc::SOL_SOCKET, 100_000, 1).is_err());
    }

    #[test]
    fn buffers_are_set_and_read_back() {
        let s = udp();
        // 16 KiB is above the kernel minimum (SOCK_MIN_RCVBUF 2 KiB) and below any
        // sysctl cap, so root and non-root alike get it, doubled.
        for dir in [Direction::Send, Direction::Receive] {
            set_buffer(&s, dir, 16_384).expect("set buffer");
            assert_eq!(buffer_size(&s, dir).expect("read"), 32_768, "{dir:?}");
        }
    }

    #[test]
    fn udp_options() {
        let s = udp();
        match set_udp_segment(&s, 1000) {
            Ok(()) => {
                assert_eq!(
                    get_int(&s, libc::SOL_UDP, libc::UDP_SEGMENT).expect("get"),
                    1000
                );
                set_udp_segment(&s, 0).expect("GSO off");
            }
            Err(e) => eprintln!("UDP_SEGMENT unsupported here: {e}"),
        }
        if set_udp_gro(&s, true).is_ok() {
            assert_eq!(get_int(&s, libc::SOL_UDP, libc::UDP_GRO).expect("get"), 1);
        }
        set_timestamps_ns(&s, true).expect("SO_TIMESTAMPNS");
        assert_eq!(
            get_int(&s, libc::SOL_SOCKET, SO_TIMESTAMPNS).expect("get"),
            1
        );
    }

    #[test]
    fn a_reuseport_group_shares_one_free_port_and_nothing_else_joins() {
        let group = bind_udp_group("127.0.0.1:0".parse().expect("addr"), 3).expect("group");
        let addr = group[0].local_addr().expect("addr");
        assert_ne!(addr.port(), 0);
        for s in &group {
            assert_eq!(s.local_addr().expect("addr"), addr);
            assert_eq!(
                get_int(s, libc::SOL_SOCKET, libc::SO_REUSEPORT).expect("get"),
                1
            );
        }
        // A second group on the held port fails like a plain bind does.
        let e = bind_udp_group(addr, 2).expect_err("the port is held");
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        assert!(UdpSocket::bind(addr).is_err());
        // Datagrams from many senders reach the group, each on one socket.
        let mut seen = 0;
        for _ in 0..32 {
            udp().send_to(b"x", addr).expect("send");
        }
        for s in &group {
            s.set_nonblocking(true).expect("nonblocking");
        }
        for _ in 0..200 {
            for s in &group {
                while s.recv(&mut [0u8; 8]).is_ok() {
                    seen += 1;
                }
            }
            if seen == 32 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(seen, 32);
        set_rxq_overflow(&group[0], true).expect("SO_RXQ_OVFL");
        assert_eq!(
            get_int(&group[0], libc::SOL_SOCKET, libc::SO_RXQ_OVFL).expect("get"),
            1
        );
        drop(group);
        assert!(
            UdpSocket::bind(addr).is_ok(),
            "closing the group frees the port"
        );
    }

    #[test]
    fn the_send_queue_holds_what_the_peer_did_not_read() {
        use std::io::Write;
        let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
        let mut tx = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (rx, _) = listener.accept().expect("accept");
        // A small receive window and a peer that never reads: once its buffer is
        // full the rest stays queued at the sender, unacknowledged.
        set_buffer(&rx, Direction::Receive, 4096).expect("rcvbuf");
        assert_eq!(send_queue_bytes(&tx).expect("empty queue"), 0);
        tx.set_nonblocking(true).expect("nonblocking");
        let chunk = [0u8; 65_536];
        let mut written = 0usize;
        for _ in 0..64 {
            match tx.write(&chunk) {
                Ok(n) => written += n,
                Err(_) => break,
            }
        }
        std::thread::sleep(Duration::from_millis(100));
        let queued = send_queue_bytes(&tx).expect("queue");
        let received = {
            let mut buf = vec![0u8; 1 << 20];
            rx.set_nonblocking(true).expect("nonblocking");
            let mut n = 0;
            while let Ok(k) = std::io::Read::read(&mut &rx, &mut buf) {
                if k == 0 {
                    break;
                }
                n += k;
                if n >= written {
                    break;
                }
            }
            n
        };
        assert!(queued > 0 && queued <= written, "{queued} of {written}");
        assert!(
            received >= written - queued,
            "{received} read, {written} - {queued}"
        );
        assert!(send_queue_bytes(&udp()).is_ok());
    }

    #[test]
    fn tcp_info_counts_what_the_peer_acknowledged() {
        use std::io::{Read, Write};
        let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
        let mut tx = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (mut rx, _) = listener.accept().expect("accept");
        let before = tcp_info(&tx).expect("TCP_INFO");
        tx.write_all(&[7u8; 100_000]).expect("write");
        let mut got = vec![0u8; 100_000];
        rx.read_exact(&mut got).expect("read");
        // The acknowledgment may trail the data by a moment.
        let mut after = tcp_info(&tx).expect("TCP_INFO");
        for _ in 0..100 {
            if after.bytes_acked.unwrap_or(0) >= 100_000 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            after = tcp_info(&tx).expect("TCP_INFO");
        }
        assert!(after.cwnd > 0 && after.srtt_us > 0, "{after:?}");
        assert_eq!(after.total_retrans, 0, "loopback loses nothing");
        if let (Some(a0), Some(a1)) = (before.bytes_acked, after.bytes_acked) {
            // The handshake's SYN counts one acknowledged byte on some kernels.
            assert_eq!(a1 - a0, 100_000, "{before:?} {after:?}");
        }
        if let Some(sent) = after.bytes_sent {
            assert_eq!(sent, 100_000);
        }
        assert!(tcp_info(&udp()).is_err(), "UDP has no TCP_INFO");
    }

    #[test]
    fn a_lost_datagram_is_told_from_a_broken_socket() {
        for errno in [
            libc::ECONNREFUSED,
            libc::EHOSTUNREACH,
            libc::ENETUNREACH,
            libc::ENOBUFS,
        ] {
            assert!(
                is_datagram_lost(&io::Error::from_raw_os_error(errno)),
                "{errno}"
            );
        }
        for errno in [libc::EBADF, libc::EINVAL, libc::EMSGSIZE, libc::EAGAIN] {
            assert!(
                !is_datagram_lost(&io::Error::from_raw_os_error(errno)),
                "{errno}"
            );
        }
        assert!(!is_datagram_lost(&io::Error::other("no errno")));

        // The real thing: a datagram to a port nobody listens on draws an ICMP port
        // unreachable, which the connected socket reports on its next call.
        let closed = udp().local_addr().expect("addr");
        let s = udp();
        s.connect(closed).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        s.send(b"x").expect("the first send goes out");
        let e = s.recv(&mut [0u8; 8]).expect_err("nothing can answer");
        assert!(is_datagram_lost(&e), "{e}");
    }

    #[test]
    fn readable_when_data_or_a_connection_waits() {
        let rx = udp();
        assert!(!wait_readable(&rx, Duration::ZERO));
        udp()
            .send_to(b"x", rx.local_addr().expect("addr"))
            .expect("send");
        assert!(wait_readable(&rx, Duration::from_secs(5)));

        let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
        assert!(!wait_readable(&listener, Duration::ZERO));
        let _c = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        assert!(wait_readable(&listener, Duration::from_secs(5)));
    }
}
