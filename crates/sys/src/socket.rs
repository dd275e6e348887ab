//! Socket options (integer `setsockopt`/`getsockopt`, buffer sizes, UDP GSO and GRO,
//! kernel receive timestamps) and waiting for a socket to become readable.

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
