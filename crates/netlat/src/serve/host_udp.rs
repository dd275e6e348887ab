//! The host's UDP receive errors (`/proc/net/snmp` `Udp: RcvbufErrors InErrors`,
//! `/proc/net/snmp6` `Udp6RcvbufErrors Udp6InErrors`): a cross-check of the sink's
//! own drop counts from outside its code path. They count every UDP socket of the
//! network namespace, so they bound the sink's drops from above.

use serde::{Deserialize, Serialize};

/// UDP receive errors over IPv4 and IPv6, since boot or over a span.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdpErrors {
    /// Datagrams dropped because a socket's receive buffer was full
    /// (`RcvbufErrors` + `Udp6RcvbufErrors`).
    pub rcvbuf_errors: u64,
    /// Datagrams not delivered for any reason but a closed port, buffer overflows
    /// included (`InErrors` + `Udp6InErrors`).
    pub in_errors: u64,
}

impl UdpErrors {
    /// The counters now; `None` when `/proc/net/snmp` cannot be read or parsed (no
    /// procfs, or a kernel without IPv4 counters). IPv6 counts 0 when
    /// `/proc/net/snmp6` is absent (IPv6 off).
    pub fn read() -> Option<UdpErrors> {
        let v4 = parse_snmp(&std::fs::read_to_string("/proc/net/snmp").ok()?)?;
        let v6 = std::fs::read_to_string("/proc/net/snmp6")
            .ok()
            .and_then(|t| parse_snmp6(&t))
            .unwrap_or_default();
        Some(UdpErrors {
            rcvbuf_errors: v4.rcvbuf_errors + v6.rcvbuf_errors,
            in_errors: v4.in_errors + v6.in_errors,
        })
    }

    /// What rose from `before` to `self` (0 where a counter went back).
    pub fn since(&self, before: &UdpErrors) -> UdpErrors {
        UdpErrors {
            rcvbuf_errors: self.rcvbuf_errors.saturating_sub(before.rcvbuf_errors),
            in_errors: self.in_errors.saturating_sub(before.in_errors),
        }
    }
}

/// The `Udp:` counters of `/proc/net/snmp`: a line of names, then a line of values.
fn parse_snmp(text: &str) -> Option<UdpErrors> {
    let mut lines = text.lines().filter(|l| l.starts_with("Udp:"));
    let names: Vec<&str> = lines.next()?.split_whitespace().collect();
    let values: Vec<&str> = lines.next()?.split_whitespace().collect();
    let get = |name: &str| {
        let i = names.iter().position(|n| *n == name)?;
        values.get(i)?.parse::<u64>().ok()
    };
    Some(UdpErrors {
        rcvbuf_errors: get("RcvbufErrors")?,
        in_errors: get("InErrors")?,
    })
}

/// The `Udp6` counters of `/proc/net/snmp6`: one `name value` pair a line.
fn parse_snmp6(text: &str) -> Option<UdpErrors> {
    let get = |name: &str| {
        text.lines().find_map(|l| {
            let mut f = l.split_whitespace();
            if f.next()? != name {
                return None;
            }
            f.next()?.parse::<u64>().ok()
        })
    };
    Some(UdpErrors {
        rcvbuf_errors: get("Udp6RcvbufErrors")?,
        in_errors: get("Udp6InErrors")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_udp_lines_of_snmp_and_snmp6() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
            Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
            Udp: 1000 3 57 900 50 0 0 0 0\n\
            UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
            UdpLite: 0 0 9 0 9 0 0 0 0\n";
        assert_eq!(
            parse_snmp(snmp),
            Some(UdpErrors {
                rcvbuf_errors: 50,
                in_errors: 57
            })
        );
        assert_eq!(parse_snmp("Ip: 1\n"), None);
        assert_eq!(parse_snmp("Udp: InErrors\nUdp: x\n"), None);
        let snmp6 = "Udp6InDatagrams                 \t10\nUdp6InErrors 4\nUdp6RcvbufErrors  3\n";
        assert_eq!(
            parse_snmp6(snmp6),
            Some(UdpErrors {
                rcvbuf_errors: 3,
                in_errors: 4
            })
        );
        let later = UdpErrors {
            rcvbuf_errors: 60,
            in_errors: 50,
        };
        assert_eq!(
            later.since(&UdpErrors {
                rcvbuf_errors: 50,
                in_errors: 57
            }),
            UdpErrors {
                rcvbuf_errors: 10,
                in_errors: 0
            }
        );
        assert!(UdpErrors::read().is_some(), "this Linux has /proc/net/snmp");
    }
}
