//! The Elastic Network Adapter's allowance counters around a job (review item 42):
//! on EC2, `ethtool -S` of an ENA interface counts the packets the instance's
//! allowances queued or dropped (`bw_in_allowance_exceeded`,
//! `bw_out_allowance_exceeded`, `pps_allowance_exceeded`,
//! `conntrack_allowance_exceeded`, `linklocal_allowance_exceeded`; ENA driver 2.2.10
//! or later). A counter that rose while a job ran means AWS shaped the instance's
//! traffic then: a throughput level measured past the network burst credits shows
//! the allowance, not the neighbors.
//!
//! The interfaces read are those carrying a default route (/proc/net/route and
//! /proc/net/ipv6_route). `ethtool` is run as a child process, its output and time
//! bounded; where it is missing, fails, or the NIC is not an ENA (no allowance
//! counters), the job's `ena` is null, never an error.
//! Source of the counters' meaning:
//! <https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/monitoring-network-performance-ena.html>.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use nnb_format::quality::{EnaAllowances, EnaUse};

/// The most of `ethtool -S`'s output read (an ENA with 32 queues prints about
/// 40 KiB; the allowance counters come before the queues').
const MAX_OUTPUT: u64 = 1 << 20;
/// How long one `ethtool -S` may take before it is killed and read as absent.
const ETHTOOL_TIMEOUT: Duration = Duration::from_secs(2);
/// The most default-route interfaces read (an instance has a few ENIs at most).
const MAX_INTERFACES: usize = 8;
/// The most of a /proc/net route table read.
const MAX_ROUTE_TABLE: u64 = 1 << 20;

/// The allowance counters in `ethtool -S` output (`     name: value` lines), when
/// all five are there; `None` for another NIC's statistics, an older ENA driver's,
/// an error message, or a counter that is not a number.
pub(crate) fn parse(text: &str) -> Option<EnaAllowances> {
    let names = EnaAllowances::default().named().map(|(name, _)| name);
    let mut found = [None; 5];
    for line in text.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if let Some(slot) = names.iter().position(|n| *n == name.trim()) {
            found[slot] = Some(value.trim().parse::<u64>().ok()?);
        }
    }
    let [bw_in, bw_out, pps, conntrack, linklocal] = found;
    Some(EnaAllowances::from_values([
        bw_in?, bw_out?, pps?, conntrack?, linklocal?,
    ]))
}

/// The counters read when a job starts, finished by [`EnaWatch::finish`].
#[derive(Debug)]
pub(crate) struct EnaWatch {
    interfaces: Vec<String>,
    before: EnaAllowances,
}

impl EnaWatch {
    /// Reads the default-route interfaces' counters; `None` where there is none
    /// to read (no default route, no `ethtool`, no ENA).
    pub(crate) fn start() -> Option<EnaWatch> {
        let interfaces = default_route_interfaces();
        let before = read(&interfaces)?;
        Some(EnaWatch { interfaces, before })
    }

    /// Reads the same interfaces again; `None` if they can no longer be read.
    pub(crate) fn finish(self) -> Option<EnaUse> {
        let after = read(&self.interfaces)?;
        Some(EnaUse {
            interfaces: self.interfaces,
            before: self.before,
            after,
        })
    }
}

/// The counters of `interfaces` summed; `None` when any of them has none (a
/// partial sum would read as a counter going down later).
fn read(interfaces: &[String]) -> Option<EnaAllowances> {
    let mut sum: Option<EnaAllowances> = None;
    for iface in interfaces {
        let one = parse(&ethtool_stats(iface)?)?;
        sum = Some(sum.map_or(one, |s| s.plus(&one)));
    }
    sum
}

/// `ethtool -S IFACE`'s standard output (at most [`MAX_OUTPUT`] bytes), or `None`
/// when it cannot run or outlives [`ETHTOOL_TIMEOUT`] (then it is killed). Its exit
/// status is not asked: an error prints no counters.
fn ethtool_stats(iface: &str) -> Option<String> {
    let mut child = Command::new("ethtool")
        .arg("-S")
        .arg(iface)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let stdout = child.stdout.take()?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let read = stdout.take(MAX_OUTPUT).read_to_end(&mut out).map(|_| out);
        let _ = tx.send(read);
    });
    let out = rx.recv_timeout(ETHTOOL_TIMEOUT);
    // Past the bound or the timeout the child may still be writing: end it (a
    // child that already exited is only reaped).
    let _ = child.kill();
    let _ = child.wait();
    String::from_utf8(out.ok()?.ok()?).ok()
}

/// The interfaces with a default route (IPv4 or IPv6), in table order, each once,
/// loopback left out.
fn default_route_interfaces() -> Vec<String> {
    let table = |path: &str| -> String {
        let mut text = String::new();
        if let Ok(f) = std::fs::File::open(path) {
            let _ = f.take(MAX_ROUTE_TABLE).read_to_string(&mut text);
        }
        text
    };
    defaults_in(&table("/proc/net/route"), &table("/proc/net/ipv6_route"))
}

/// The default-route interfaces of /proc/net/route's text (destination and mask
/// `00000000`) and /proc/net/ipv6_route's (destination all zeros, prefix length 0,
/// the interface last), each once, `lo` left out, at most [`MAX_INTERFACES`].
pub(crate) fn defaults_in(route: &str, ipv6_route: &str) -> Vec<String> {
    let v4 = route.lines().skip(1).filter_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() >= 8 && f[1] == "00000000" && f[7] == "00000000").then(|| f[0])
    });
    let v6 = ipv6_route.lines().filter_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let zero = f
            .first()
            .is_some_and(|d| d.len() == 32 && d.bytes().all(|b| b == b'0'));
        (f.len() >= 10 && zero && f[1] == "00").then(|| f[9])
    });
    let mut out: Vec<String> = Vec::new();
    for iface in v4.chain(v6) {
        if iface != "lo" && !out.iter().any(|i| i == iface) && out.len() < MAX_INTERFACES {
            out.push(iface.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ethtool -S eth0` of an ENA, as AWS's monitoring page and its users show it
    /// (driver 2.2.10+, the allowance counters after the global ones, then the
    /// queues'); the allowance values are those an x2gd.medium's owner posted
    /// (re:Post, "Network traffic limits on x2gd.medium": 314 in, 281794 out).
    const ENA: &str = "NIC statistics:
     tx_timeout: 0
     suspend: 0
     resume: 0
     wd_expired: 0
     interface_up: 1
     interface_down: 0
     admin_q_pause: 0
     bw_in_allowance_exceeded: 314
     bw_out_allowance_exceeded: 281794
     pps_allowance_exceeded: 7
     conntrack_allowance_exceeded: 0
     linklocal_allowance_exceeded: 2
     conntrack_allowance_available: 136812
     queue_0_tx_cnt: 16452163
     queue_0_tx_bytes: 5227347815
     queue_0_tx_queue_stop: 0
     queue_0_rx_cnt: 17316935
     queue_0_rx_bytes: 10977839187
     ena_admin_q_aborted_cmd: 0
     ena_admin_q_submitted_cmd: 27
";

    #[test]
    fn an_ena_s_counters_are_read() {
        assert_eq!(
            parse(ENA),
            Some(EnaAllowances {
                bw_in_allowance_exceeded: 314,
                bw_out_allowance_exceeded: 281794,
                pps_allowance_exceeded: 7,
                conntrack_allowance_exceeded: 0,
                linklocal_allowance_exceeded: 2,
            })
        );
    }

    /// A virtio NIC's statistics, an older ENA driver's (no allowance counters),
    /// ethtool's error for a device without statistics, and a garbled counter are
    /// all "no counters".
    #[test]
    fn no_ena_no_counters() {
        let virtio = "NIC statistics:\n     rx_queue_0_packets: 1234\n     rx_queue_0_bytes: 99\n";
        assert_eq!(parse(virtio), None);
        let old_driver: String = ENA.lines().filter(|l| !l.contains("allowance")).collect();
        assert_eq!(parse(&old_driver), None);
        assert_eq!(parse("no stats available\n"), None);
        assert_eq!(parse(""), None);
        let garbled = ENA.replace("pps_allowance_exceeded: 7", "pps_allowance_exceeded: x");
        assert_eq!(parse(&garbled), None);
    }

    /// The tables of a machine with an IPv4 default route on eth0 and an IPv6 one
    /// on eth0 and ens6 (and the kernel's unreachable default on lo).
    #[test]
    fn default_route_interfaces_from_the_tables() {
        let route =
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
";
        let v6 = "fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000003 00000000 00000003     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000003 00000000 00000003     ens6
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo
";
        assert_eq!(defaults_in(route, v6), ["eth0", "ens6"]);
        assert_eq!(defaults_in("", ""), Vec::<String>::new());
    }
}
