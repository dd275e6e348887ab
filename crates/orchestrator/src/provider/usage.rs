//! What each tenant used, seen from the host and not from its load generator (the
//! black-box principle of Volpert et al.): its cgroup's CPU time, resident memory
//! and block I/O operations, and the bytes its network interface sent, sampled at a
//! fixed interval over the measured jobs of a step.
//!
//! The rates are the counters' increase over the whole interval (CPU time per wall
//! time, operations and bits per second); the memory is the mean of the resident
//! memory sampled every [`SAMPLE_INTERVAL`], start and end included, so a tenant
//! that takes time to reach its size (or is OOM-killed and starts again) shows it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nnb_format::{Metric, MetricValues};
use nnb_sys::cgroup::Cgroup;

/// How often the resident memory is sampled.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// How often the sampling thread looks at its stop flag.
const POLL: Duration = Duration::from_millis(5);
/// The largest `/proc/PID/net/dev` read (a line per interface).
const MAX_NET_DEV: u64 = 1 << 20;

/// One tenant as the host sees it.
#[derive(Debug, Clone)]
pub struct UsageSource {
    /// The tenant.
    pub tenant: String,
    /// Its cgroup (CPU, memory, I/O accounting).
    pub cgroup: Option<Cgroup>,
    /// A process in the tenant's own network namespace (its agent): that
    /// namespace's interfaces are in `/proc/PID/net/dev`.
    pub netns_pid: Option<u32>,
}

/// What the host saw of one tenant over a step's measured jobs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HostUsage {
    /// CPU time per wall time, percent of one CPU.
    pub cpu_pct: Option<f64>,
    /// Mean resident memory, bytes.
    pub mem_bytes: Option<f64>,
    /// Block I/O operations per second.
    pub iops: Option<f64>,
    /// Bits per second its interfaces sent.
    pub net_bps: Option<f64>,
}

impl HostUsage {
    /// Sets the sample columns of the host-side metrics ([`Metric::HOST`]).
    pub fn write_to(&self, values: &mut MetricValues) {
        values.set(Metric::HostCpuPct, self.cpu_pct);
        values.set(Metric::HostMemBytes, self.mem_bytes);
        values.set(Metric::HostIops, self.iops);
        values.set(Metric::HostNetBps, self.net_bps);
    }
}

/// A sampling thread over some tenants, from [`UsageMeter::start`] to
/// [`UsageMeter::finish`].
#[derive(Debug)]
pub struct UsageMeter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<HashMap<String, HostUsage>>>,
}

/// One reading of one tenant's counters.
#[derive(Debug, Clone, Copy, Default)]
struct Reading {
    cpu_ns: Option<u64>,
    mem_bytes: Option<u64>,
    io_ops: Option<u64>,
    tx_bytes: Option<u64>,
}

impl Reading {
    fn of(s: &UsageSource) -> Reading {
        let usage = s.cgroup.as_ref().and_then(|c| match c.usage() {
            Ok(u) => Some(u),
            Err(e) => {
                tracing::debug!(tenant = %s.tenant, "cgroup usage: {e}");
                None
            }
        });
        Reading {
            cpu_ns: usage.map(|u| u.cpu_ns),
            mem_bytes: usage.map(|u| u.memory_bytes),
            io_ops: usage.map(|u| u.io_ops),
            tx_bytes: s.netns_pid.and_then(tx_bytes),
        }
    }
}

impl UsageMeter {
    /// Starts reading `sources` now, until [`UsageMeter::finish`].
    pub fn start(sources: Vec<UsageSource>) -> UsageMeter {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("nnb-usage".to_string())
            .spawn(move || sample(&sources, &flag))
            .map_err(|e| tracing::warn!("no host-side usage: cannot start its thread: {e}"))
            .ok();
        UsageMeter { stop, thread }
    }

    /// Stops reading and returns what each tenant used since the start.
    pub fn finish(mut self) -> HashMap<String, HostUsage> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for UsageMeter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The sampling loop: a first reading, a memory sample every [`SAMPLE_INTERVAL`],
/// a last reading once `stop` is raised.
fn sample(sources: &[UsageSource], stop: &AtomicBool) -> HashMap<String, HostUsage> {
    let t0 = Instant::now();
    let first: Vec<Reading> = sources.iter().map(Reading::of).collect();
    let mut mem: Vec<Vec<u64>> = first
        .iter()
        .map(|r| r.mem_bytes.into_iter().collect())
        .collect();
    let mut next = t0 + SAMPLE_INTERVAL;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(POLL);
        if Instant::now() >= next {
            next += SAMPLE_INTERVAL;
            for (s, m) in sources.iter().zip(&mut mem) {
                let usage = s.cgroup.as_ref().and_then(|c| c.usage().ok());
                m.extend(usage.map(|u| u.memory_bytes));
            }
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    let last: Vec<Reading> = sources.iter().map(Reading::of).collect();
    sources
        .iter()
        .zip(first.iter().zip(&last))
        .zip(&mut mem)
        .map(|((s, (a, b)), m)| {
            m.extend(b.mem_bytes);
            let rate = |x: Option<u64>, y: Option<u64>| match (x, y) {
                (Some(x), Some(y)) if wall > 0.0 => Some(y.saturating_sub(x) as f64 / wall),
                _ => None,
            };
            let usage = HostUsage {
                cpu_pct: rate(a.cpu_ns, b.cpu_ns).map(|ns_per_s| ns_per_s / 1e9 * 100.0),
                mem_bytes: (!m.is_empty())
                    .then(|| m.iter().map(|&v| v as f64).sum::<f64>() / m.len() as f64),
                iops: rate(a.io_ops, b.io_ops),
                net_bps: rate(a.tx_bytes, b.tx_bytes).map(|bytes| bytes * 8.0),
            };
            (s.tenant.clone(), usage)
        })
        .collect()
}

/// Bytes sent by the interfaces of `pid`'s network namespace, loopback left out.
fn tx_bytes(pid: u32) -> Option<u64> {
    use std::io::Read;
    let file = std::fs::File::open(format!("/proc/{pid}/net/dev")).ok()?;
    let mut text = String::new();
    file.take(MAX_NET_DEV).read_to_string(&mut text).ok()?;
    parse_tx_bytes(&text)
}

/// The sum of the transmitted bytes of every interface but `lo` in the text of
/// `/proc/net/dev`: after each `NAME:` come 8 receive counters, then the
/// transmitted bytes. `None` when a line does not read so.
fn parse_tx_bytes(text: &str) -> Option<u64> {
    let mut total = 0u64;
    for line in text.lines().skip(2) {
        let (name, counters) = line.split_once(':')?;
        if name.trim() == "lo" {
            continue;
        }
        let tx: u64 = counters.split_whitespace().nth(8)?.parse().ok()?;
        total = total.saturating_add(tx);
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_bytes_sum_every_interface_but_loopback() {
        let text = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  999999     100    0    0    0     0          0         0   999999     100    0    0    0     0       0          0
  eth0: 1000 10 0 0 0 0 0 0 125000 90 0 0 0 0 0 0
  eth1: 0 0 0 0 0 0 0 0 5 1 0 0 0 0 0 0
";
        // 125000 + 5 sent; loopback's 999999 not counted.
        assert_eq!(parse_tx_bytes(text), Some(125_005));
        assert_eq!(parse_tx_bytes("h\nh\n  eth0: 1 2 3\n"), None);
    }

    #[test]
    fn a_meter_without_sources_reports_nothing() {
        let m = UsageMeter::start(Vec::new());
        assert!(m.finish().is_empty());
    }

    #[test]
    fn a_tenant_without_counters_has_no_figures() {
        let m = UsageMeter::start(vec![UsageSource {
            tenant: "a".into(),
            cgroup: None,
            netns_pid: None,
        }]);
        std::thread::sleep(Duration::from_millis(20));
        let got = m.finish();
        assert_eq!(got.get("a"), Some(&HostUsage::default()));
    }
}
