//! Payload and wire rates of UDP traffic: the header bytes each datagram carries on a
//! link, so a payload rate and a link rate are compared in one framing. The load
//! generator reports its wire rate with these, and the analysis states a link's share
//! in payload terms with them.

/// Default datagram size: 1400 bytes of UDP payload, which fits a 1500-byte MTU with
/// room for tunnel headers (VXLAN, WireGuard) that clouds add.
pub const DEFAULT_MSG_SIZE: usize = 1400;
/// UDP header bytes.
pub const UDP_HEADER: usize = 8;
/// IPv4 header bytes (no options).
pub const IPV4_HEADER: usize = 20;
/// IPv6 header bytes.
pub const IPV6_HEADER: usize = 40;
/// TCP segment payload assumed for a TCP wire rate (a 1500-byte MTU less IPv4, TCP and
/// the timestamps option).
pub const TCP_MSS: usize = 1448;
/// TCP header with the timestamps option.
pub const TCP_HEADER: usize = 32;
/// The Ethernet header alone: what Linux `tc` (tbf) counts of a frame on a veth.
pub const ETHERNET_HEADER: usize = 14;
/// Ethernet framing on the wire: header 14, FCS 4, preamble and SFD 8, gap 12.
pub const ETHERNET_OVERHEAD: usize = 38;

/// Which bytes of a frame a link's rate counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// A shaped Linux link (`tc` tbf on a veth): IP packet plus the Ethernet header.
    Shaped,
    /// A physical Ethernet line rate: the whole frame, preamble and gap included.
    Line,
}

impl Framing {
    /// Bytes a link of this framing carries per UDP datagram of `msg_size` payload
    /// bytes over IPv4 (`ipv6`: IPv6).
    pub fn bytes_per_datagram(self, msg_size: usize, ipv6: bool) -> usize {
        let ip = Framing::ip_header(ipv6);
        let l2 = match self {
            Framing::Shaped => ETHERNET_HEADER,
            Framing::Line => ETHERNET_OVERHEAD,
        };
        msg_size + UDP_HEADER + ip + l2
    }

    /// Bytes a link of this framing carries per full TCP segment of [`TCP_MSS`]
    /// payload bytes.
    pub fn bytes_per_tcp_segment(self, ipv6: bool) -> usize {
        self.bytes_per_datagram(TCP_MSS, ipv6) - UDP_HEADER + TCP_HEADER
    }

    /// The IP header bytes of `ipv6` or IPv4.
    pub fn ip_header(ipv6: bool) -> usize {
        if ipv6 {
            IPV6_HEADER
        } else {
            IPV4_HEADER
        }
    }

    /// The share of this link's rate that is UDP payload with `msg_size`-byte
    /// datagrams: a link of `r` bit/s carries at most `r * payload_share` payload.
    /// 0 for an empty datagram size.
    pub fn payload_share(self, msg_size: usize, ipv6: bool) -> f64 {
        if msg_size == 0 {
            return 0.0;
        }
        msg_size as f64 / self.bytes_per_datagram(msg_size, ipv6) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1400-byte datagrams: a shaped link carries 1400 + 8 + 20 + 14 = 1442 bytes each
    /// (97.09% payload), an Ethernet line 1400 + 66 = 1466 (95.50%); 200 bytes: 82.64%
    /// and 75.19%.
    #[test]
    fn shares_by_hand() {
        assert_eq!(Framing::Shaped.bytes_per_datagram(1400, false), 1442);
        assert_eq!(Framing::Line.bytes_per_datagram(1400, false), 1466);
        assert_eq!(Framing::Line.bytes_per_datagram(1400, true), 1486);
        assert!((Framing::Shaped.payload_share(1400, false) - 1400.0 / 1442.0).abs() < 1e-12);
        assert!((Framing::Shaped.payload_share(200, false) - 0.8264).abs() < 1e-4);
        // 200 / (200 + 8 + 20 + 38) = 200 / 266 (the audit's "72.5%" is a slip)
        assert!((Framing::Line.payload_share(200, false) - 200.0 / 266.0).abs() < 1e-12);
        assert_eq!(Framing::Line.payload_share(0, false), 0.0);
        // TCP: 1448 + 32 + 20 + 38 = 1538 bytes of line per full segment
        assert_eq!(Framing::Line.bytes_per_tcp_segment(false), 1538);
    }
}
