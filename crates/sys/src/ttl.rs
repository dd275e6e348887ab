//! The IP TTL (IPv4) or hop limit (IPv6) each received datagram arrived with: where
//! its sender is in the network (every router on the way took one off), Wang & Ng's
//! network-location check (seed 003, §V.B: the hop count between a pair).
//!
//! [`set_recv_ttl`] asks the kernel to pass the value along (`IP_RECVTTL`,
//! `IPV6_RECVHOPLIMIT`); [`recv`] then receives one datagram with `recvmsg` and
//! reads it from the datagram's control messages (`IP_TTL`, `IPV6_HOPLIMIT`).

use std::io;
use std::mem;
use std::net::UdpSocket;
use std::os::fd::{AsFd, AsRawFd};

use crate::cmsg::read_control;
use crate::socket::{get_int, set_int};

/// Control space for one datagram, in u64 words: room for an `IP_TTL` and an
/// `IPV6_HOPLIMIT` message (`CMSG_SPACE(4)` = 24 bytes each) with room to spare.
const CTRL_WORDS: usize = 8;

/// Turns reporting of each received datagram's TTL (hop limit) on or off. An IPv6
/// socket gets both options, so IPv4 datagrams it receives (from IPv4-mapped peers)
/// carry theirs too; only its IPv6 option's failure is an error.
pub fn set_recv_ttl(sock: &impl AsFd, on: bool) -> io::Result<()> {
    let on = libc::c_int::from(on);
    match get_int(sock, libc::SOL_SOCKET, libc::SO_DOMAIN)? {
        libc::AF_INET6 => {
            set_int(sock, libc::IPPROTO_IPV6, libc::IPV6_RECVHOPLIMIT, on)?;
            // Best effort: only IPv4-mapped peers need it.
            let _ = set_int(sock, libc::IPPROTO_IP, libc::IP_RECVTTL, on);
            Ok(())
        }
        _ => set_int(sock, libc::IPPROTO_IP, libc::IP_RECVTTL, on),
    }
}

/// Receives one datagram on `sock` into `buf` (`recvmsg`; the socket's timeout and
/// blocking mode apply, and errors are those of [`UdpSocket::recv`]); returns its
/// length (at most `buf.len()`: a longer datagram is cut) and the TTL (hop limit) it
/// arrived with, `None` when the socket does not report it ([`set_recv_ttl`] off) or
/// the kernel's value is not one (outside 0-255).
pub fn recv(sock: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, Option<u8>)> {
    let mut control = [0u64; CTRL_WORDS];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: a zeroed msghdr is valid (no name, no control); the pointers are set
    // below to live buffers of the lengths declared.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = mem::size_of_val(&control) as _;
    // SAFETY: a valid fd; the kernel writes at most iov_len bytes into `buf` and at
    // most msg_controllen bytes into `control`, both live across the call.
    let n = unsafe { libc::recvmsg(sock.as_fd().as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let len = (n as usize).min(buf.len());
    let ttl = read_control(
        &msg,
        mem::size_of_val(&control),
        libc::IPPROTO_IP,
        libc::IP_TTL,
    )
    .or_else(|| {
        read_control(
            &msg,
            mem::size_of_val(&control),
            libc::IPPROTO_IPV6,
            libc::IPV6_HOPLIMIT,
        )
    })
    .and_then(|v: libc::c_int| u8::try_from(v).ok());
    Ok((len, ttl))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A receiving socket on `ip` and a sender connected to it.
    fn pair(ip: &str) -> Option<(UdpSocket, UdpSocket)> {
        let rx = UdpSocket::bind(format!("{ip}:0")).ok()?;
        rx.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let tx = UdpSocket::bind(format!("{ip}:0")).expect("bind");
        tx.connect(rx.local_addr().expect("addr")).expect("connect");
        Some((rx, tx))
    }

    #[test]
    fn an_ipv4_datagram_carries_the_ttl_it_was_sent_with() {
        let (rx, tx) = pair("127.0.0.1").expect("IPv4 loopback");
        let mut buf = [0u8; 16];
        // Off: the datagram comes, without a TTL.
        tx.send(b"a").expect("send");
        assert_eq!(recv(&rx, &mut buf).expect("recv"), (1, None));
        set_recv_ttl(&rx, true).expect("IP_RECVTTL");
        // Loopback crosses no router: the sender's TTL as it was set.
        for ttl in [1u8, 64, 100, 255] {
            tx.set_ttl(u32::from(ttl)).expect("IP_TTL");
            tx.send(b"ping").expect("send");
            assert_eq!(recv(&rx, &mut buf).expect("recv"), (4, Some(ttl)));
            assert_eq!(&buf[..4], b"ping");
        }
        // A datagram longer than the buffer is cut to it.
        tx.send(&[7u8; 40]).expect("send");
        assert_eq!(recv(&rx, &mut buf).expect("recv"), (16, Some(255)));
        // The socket's timeout applies.
        rx.set_read_timeout(Some(Duration::from_millis(10)))
            .expect("timeout");
        let e = recv(&rx, &mut buf).expect_err("nothing was sent");
        assert!(
            matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "{e}"
        );
    }

    #[test]
    fn an_ipv6_datagram_carries_its_hop_limit() {
        let Some((rx, tx)) = pair("[::1]") else {
            eprintln!("no IPv6 loopback here");
            return;
        };
        set_recv_ttl(&rx, true).expect("IPV6_RECVHOPLIMIT");
        crate::socket::set_int(&tx, libc::IPPROTO_IPV6, libc::IPV6_UNICAST_HOPS, 99)
            .expect("IPV6_UNICAST_HOPS");
        tx.send(b"six").expect("send");
        let mut buf = [0u8; 16];
        assert_eq!(recv(&rx, &mut buf).expect("recv"), (3, Some(99)));
    }

    #[test]
    fn a_control_length_beyond_the_buffer_is_bounded() {
        let (rx, tx) = pair("127.0.0.1").expect("IPv4 loopback");
        set_recv_ttl(&rx, true).expect("IP_RECVTTL");
        tx.set_ttl(42).expect("IP_TTL");
        tx.send(b"x").expect("send");
        let mut control = [0u64; CTRL_WORDS];
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        // SAFETY: as in `recv`.
        let mut msg: libc::msghdr = unsafe { mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = mem::size_of_val(&control) as _;
        // SAFETY: as in `recv`.
        assert_eq!(unsafe { libc::recvmsg(rx.as_raw_fd(), &mut msg, 0) }, 1);
        let cap = mem::size_of_val(&control);
        let read = |m: &libc::msghdr, cap| {
            read_control::<libc::c_int>(m, cap, libc::IPPROTO_IP, libc::IP_TTL)
        };
        assert_eq!(read(&msg, cap), Some(42));
        // A length claimed past the buffer reads only the buffer.
        msg.msg_controllen = 1 << 20;
        assert_eq!(read(&msg, cap), Some(42));
        // A capacity too small for the message finds nothing (never reads past it).
        assert_eq!(read(&msg, 8), None);
        // A message too short for its type is passed over.
        assert_eq!(
            read_control::<[u8; 64]>(&msg, cap, libc::IPPROTO_IP, libc::IP_TTL),
            None
        );
    }
}
