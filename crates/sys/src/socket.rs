//! Socket options (integer `setsockopt`/`getsockopt`, buffer sizes, UDP GSO and GRO,
//! kernel receive timestamps), a TCP socket's `TCP_INFO`, and waiting for a socket to
//! become readable.

use std::io;
use std::mem;
use std::os::fd::{AsFd, AsRawFd};
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
