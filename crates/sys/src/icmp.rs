//! ICMP echo (ping) sockets: the kernel's unprivileged ping sockets (`SOCK_DGRAM`,
//! `IPPROTO_ICMP`/`IPPROTO_ICMPV6`, allowed to the groups in
//! `net.ipv4.ping_group_range`), or a raw socket where the process may open one
//! (root, `CAP_NET_RAW`). Either way the socket is connected to one host, sends
//! echo requests and hands back only the data of that host's echo replies to this
//! socket's identifier, so `nnb rtt --icmp` measures what `ping` measures.
//!
//! The only `unsafe` is the `socket(2)` call; the socket is then a datagram socket
//! that std's [`UdpSocket`] drives (connect, send, recv and timeouts are the same
//! system calls for any datagram socket).

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{FromRawFd, OwnedFd};
use std::time::Duration;

/// ICMP echo request type (IPv4).
const ECHO_REQUEST_V4: u8 = 8;
/// ICMP echo reply type (IPv4).
const ECHO_REPLY_V4: u8 = 0;
/// ICMPv6 echo request type.
const ECHO_REQUEST_V6: u8 = 128;
/// ICMPv6 echo reply type.
const ECHO_REPLY_V6: u8 = 129;
/// Bytes of the echo header: type, code, checksum, identifier, sequence number.
pub const ECHO_HEADER_LEN: usize = 8;

/// Which kind of socket carries the echoes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EchoSocketKind {
    /// A kernel ping socket: the kernel sets the identifier and the checksum and
    /// delivers only this socket's replies.
    Ping,
    /// A raw ICMP socket (root): this side sets the identifier (and the IPv4
    /// checksum) and filters the replies.
    Raw,
}

impl EchoSocketKind {
    /// The kind's name as results print it ("ping" or "raw").
    pub fn name(self) -> &'static str {
        match self {
            EchoSocketKind::Ping => "ping",
            EchoSocketKind::Raw => "raw",
        }
    }
}

/// An ICMP echo socket connected to one host.
#[derive(Debug)]
pub struct EchoSocket {
    sock: UdpSocket,
    kind: EchoSocketKind,
    v6: bool,
    ident: u16,
}

/// Opens an ICMP socket of `ty` for `ip`'s family.
fn icmp_socket(ip: IpAddr, ty: libc::c_int) -> io::Result<UdpSocket> {
    let (domain, proto) = match ip {
        IpAddr::V4(_) => (libc::AF_INET, libc::IPPROTO_ICMP),
        IpAddr::V6(_) => (libc::AF_INET6, libc::IPPROTO_ICMPV6),
    };
    // SAFETY: socket(2) takes no pointers.
    let fd = crate::cvt(unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) })?;
    // SAFETY: a new fd that nothing else owns; the OwnedFd takes it over.
    Ok(UdpSocket::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

impl EchoSocket {
    /// An echo socket connected to `host`: a kernel ping socket when this process's
    /// group may open one, else a raw socket (root); the error of the ping socket
    /// (with what to change) when neither can be opened.
    pub fn open(host: IpAddr) -> io::Result<EchoSocket> {
        let (sock, kind) = match icmp_socket(host, libc::SOCK_DGRAM) {
            Ok(s) => (s, EchoSocketKind::Ping),
            Err(ping) => match icmp_socket(host, libc::SOCK_RAW) {
                Ok(s) => (s, EchoSocketKind::Raw),
                Err(_) => {
                    return Err(io::Error::new(
                        ping.kind(),
                        format!(
                            "cannot open an ICMP ping socket ({ping}): add this user's group \
                             to net.ipv4.ping_group_range, or run as root for a raw socket"
                        ),
                    ))
                }
            },
        };
        // Connecting binds a ping socket, which picks its identifier (its "port").
        sock.connect(SocketAddr::new(host, 0))?;
        let ident = match kind {
            EchoSocketKind::Ping => sock.local_addr()?.port(),
            // Any value: replies to other raw pingers of this host are told apart
            // by it (and by the peer address the connected socket filters on).
            EchoSocketKind::Raw => (std::process::id() as u16) ^ 0x6e6e,
        };
        Ok(EchoSocket {
            sock,
            kind,
            v6: host.is_ipv6(),
            ident,
        })
    }

    /// Which kind of socket this is.
    pub fn kind(&self) -> EchoSocketKind {
        self.kind
    }

    /// A second handle on the same socket (one thread sends, another receives).
    pub fn try_clone(&self) -> io::Result<EchoSocket> {
        Ok(EchoSocket {
            sock: self.sock.try_clone()?,
            ..*self
        })
    }

    /// How long [`EchoSocket::recv_reply`] waits for a datagram (`None`: forever).
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.sock.set_read_timeout(timeout)
    }

    /// Sends one echo request carrying `data`, with sequence number `seq`. `buf`
    /// is scratch space, grown as needed.
    pub fn send_echo(&self, seq: u16, data: &[u8], buf: &mut Vec<u8>) -> io::Result<()> {
        buf.clear();
        buf.push(if self.v6 {
            ECHO_REQUEST_V6
        } else {
            ECHO_REQUEST_V4
        });
        buf.push(0);
        buf.extend_from_slice(&[0, 0]);
        buf.extend_from_slice(&self.ident.to_be_bytes());
        buf.extend_from_slice(&seq.to_be_bytes());
        buf.extend_from_slice(data);
        // A ping socket and a raw ICMPv6 socket have the kernel fill the checksum.
        if self.kind == EchoSocketKind::Raw && !self.v6 {
            let sum = checksum(buf);
            buf[2..4].copy_from_slice(&sum.to_be_bytes());
        }
        self.sock.send(buf).map(drop)
    }

    /// Receives one datagram into `buf`: the range of `buf` holding the data of an
    /// echo reply to this socket, or `None` for anything else the socket saw (a
    /// raw socket sees other ICMP messages too, its own requests on loopback among
    /// them). Errors are those of `recv` (a timeout is `WouldBlock` or `TimedOut`).
    pub fn recv_reply(&self, buf: &mut [u8]) -> io::Result<Option<std::ops::Range<usize>>> {
        let n = self.sock.recv(buf)?;
        // A raw IPv4 socket receives the IP header in front of the ICMP message.
        let start = if self.kind == EchoSocketKind::Raw && !self.v6 {
            match buf.first() {
                Some(b) if b >> 4 == 4 => usize::from(b & 0x0f) * 4,
                _ => return Ok(None),
            }
        } else {
            0
        };
        Ok(parse_reply(
            &buf[..n],
            start,
            if self.v6 {
                ECHO_REPLY_V6
            } else {
                ECHO_REPLY_V4
            },
            self.ident,
        ))
    }
}

/// The data range of `msg` (an ICMP message from `start`) when it is an echo reply
/// of type `reply` to identifier `ident`.
fn parse_reply(msg: &[u8], start: usize, reply: u8, ident: u16) -> Option<std::ops::Range<usize>> {
    let icmp = msg.get(start..)?;
    if icmp.len() < ECHO_HEADER_LEN || icmp[0] != reply || icmp[1] != 0 {
        return None;
    }
    (u16::from_be_bytes([icmp[4], icmp[5]]) == ident).then_some(start + ECHO_HEADER_LEN..msg.len())
}

/// The Internet checksum (RFC 1071) of `bytes`.
fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)])))
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_matches_rfc_1071s_example() {
        // RFC 1071 section 3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (folded).
        assert_eq!(
            checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            !0xddf2
        );
        // A message carrying its checksum sums to zero.
        let mut msg = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1, b'a', b'b', b'c'];
        let sum = checksum(&msg);
        msg[2..4].copy_from_slice(&sum.to_be_bytes());
        assert_eq!(checksum(&msg), 0);
    }

    #[test]
    fn only_echo_replies_to_our_identifier_are_kept() {
        let reply = [0, 0, 0xab, 0xcd, 0x12, 0x34, 0, 7, 1, 2, 3];
        assert_eq!(parse_reply(&reply, 0, 0, 0x1234), Some(8..11));
        assert_eq!(parse_reply(&reply, 0, 0, 0x1235), None);
        // Our own request (type 8) seen by a raw socket on loopback.
        let mut request = reply;
        request[0] = 8;
        assert_eq!(parse_reply(&request, 0, 0, 0x1234), None);
        // Behind a 20-byte IPv4 header.
        let mut with_ip = vec![0x45; 20];
        with_ip.extend_from_slice(&reply);
        assert_eq!(parse_reply(&with_ip, 20, 0, 0x1234), Some(28..31));
        assert_eq!(parse_reply(&reply[..7], 0, 0, 0x1234), None);
    }
}
