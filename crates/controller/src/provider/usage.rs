//! What each tenant used, seen from the host and not from its load generator (the
//! black-box principle of Volpert et al.): its cgroup's CPU time, resident memory
//! and block I/O operations, and the bytes its network interface sent, sampled at a
//! fixed interval over the measured jobs of a step.
//!
//! Every counter is read every interval (an isolation matrix's `usage_interval`,
//! [`nnb_experiment::DEFAULT_USAGE_INTERVAL`] by default), and the sampling
//! thread's own CPU time is measured over its wall time and recorded beside the
//! interval ([`HostSampler`], seeds-coverage N13). The CPU is its time over the
//! jobs' nominal length (an agent is idle outside its jobs); I/O operations and sent
//! bits are their increase per second over the jobs' nominal length, ending where
//! the jobs' own activity ended: a disk generator's file set-up before is no part
//! of its IOPS, and the small exchanges after (the agent's answer to the
//! controller, a load's sink report, through the same interface) do not move the
//! window; the memory is the level it held (the mean once it reached 90% of its
//! highest), so a worker's ramp up and its exit are left out while an OOM-killed
//! worker that starts again still shows.
//!
//! The bits a tenant's namespace sent are what it offered, counted before the
//! host's shared NIC: on the emulated network what got through that NIC is what
//! the endpoint's sink received (a load job's `rate_bps`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nnb_format::{HostSampler, Metric, MetricValues};
use nnb_sys::cgroup::Cgroup;

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
    /// CPU time per second of the jobs' nominal length, percent of one CPU.
    pub cpu_pct: Option<f64>,
    /// Mean resident memory, bytes.
    pub mem_bytes: Option<f64>,
    /// Block I/O operations per second.
    pub iops: Option<f64>,
    /// Bits per second its interfaces sent (its offered load, before the shared NIC).
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
    interval: Duration,
    thread: Option<JoinHandle<Sampled>>,
}

/// What [`UsageMeter::finish`] found: each tenant's usage, and the sampler's
/// interval and cost (`None` when its thread could not start).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostReadings {
    /// What each tenant used, by name.
    pub usage: HashMap<String, HostUsage>,
    /// The sampler's interval and its own CPU share.
    pub sampler: Option<HostSampler>,
}

/// The sampling thread's series per tenant, its CPU time and wall time.
struct Sampled {
    series: Vec<(String, Series)>,
    cpu: Duration,
    wall: Duration,
}

/// One tenant's readings: (seconds since the start, reading).
type Series = Vec<(f64, Reading)>;

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
    /// Starts reading `sources` now, every `interval`, until
    /// [`UsageMeter::finish`].
    pub fn start(sources: Vec<UsageSource>, interval: Duration) -> UsageMeter {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("nnb-usage".to_string())
            .spawn(move || sample(&sources, interval, &flag))
            .map_err(|e| tracing::warn!("no host-side usage: cannot start its thread: {e}"))
            .ok();
        UsageMeter {
            stop,
            interval,
            thread,
        }
    }

    /// Stops reading and returns what each tenant used since the start, over its
    /// jobs' `nominal` length when known (see the module), and what the sampling
    /// cost.
    pub fn finish(mut self, nominal: Option<Duration>) -> HostReadings {
        self.halt();
        let Some(sampled) = self.thread.take().and_then(|t| t.join().ok()) else {
            return HostReadings::default();
        };
        let nominal = nominal.map(|d| d.as_secs_f64()).filter(|s| *s > 0.0);
        let wall = sampled.wall.as_secs_f64();
        HostReadings {
            usage: sampled
                .series
                .into_iter()
                .map(|(tenant, points)| (tenant, usage(&points, nominal)))
                .collect(),
            sampler: Some(HostSampler {
                interval_ms: self.interval.as_secs_f64() * 1e3,
                cpu_share: if wall > 0.0 {
                    sampled.cpu.as_secs_f64() / wall
                } else {
                    0.0
                },
            }),
        }
    }

    /// Raises the stop flag and wakes the thread from its wait for the next
    /// reading, so it takes its last one now.
    fn halt(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
    }
}

impl Drop for UsageMeter {
    fn drop(&mut self) {
        self.halt();
    }
}

/// The sampling loop: a reading of every source every `interval` from now until
/// `stop` is raised (the thread parked in between, woken by its timer or by
/// [`UsageMeter::halt`]), and one more then; with the thread's CPU time and wall
/// time over it.
fn sample(sources: &[UsageSource], interval: Duration, stop: &AtomicBool) -> Sampled {
    let cpu0 = nnb_sys::clock::thread_cpu_ns();
    let t0 = Instant::now();
    let mut series: Vec<Series> = sources
        .iter()
        .map(|s| vec![(0.0, Reading::of(s))])
        .collect();
    let mut next = t0 + interval;
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        let now = Instant::now();
        if stopping || now >= next {
            // A late wake-up skips the readings it missed rather than bunching them.
            while next <= now {
                next += interval;
            }
            let t = t0.elapsed().as_secs_f64();
            for (s, points) in sources.iter().zip(&mut series) {
                points.push((t, Reading::of(s)));
            }
        }
        if stopping {
            break;
        }
        std::thread::park_timeout(next.saturating_duration_since(Instant::now()));
    }
    let cpu = nnb_sys::clock::thread_cpu_ns().saturating_sub(cpu0);
    Sampled {
        series: sources
            .iter()
            .map(|s| s.tenant.clone())
            .zip(series)
            .collect(),
        cpu: Duration::from_nanos(cpu),
        wall: t0.elapsed(),
    }
}

/// What one tenant's series says it used, its jobs lasting `nominal` seconds.
fn usage(points: &Series, nominal: Option<f64>) -> HostUsage {
    let of = |f: fn(&Reading) -> Option<u64>| -> Vec<(f64, u64)> {
        points
            .iter()
            .filter_map(|(t, r)| Some((*t, f(r)?)))
            .collect()
    };
    HostUsage {
        cpu_pct: busy_rate(&of(|r| r.cpu_ns), nominal).map(|ns_per_s| ns_per_s / 1e9 * 100.0),
        mem_bytes: plateau_mean(&of(|r| r.mem_bytes)),
        iops: active_rate(&of(|r| r.io_ops), nominal),
        net_bps: active_rate(&of(|r| r.tx_bytes), nominal).map(|bytes| bytes * 8.0),
    }
}

/// CPU time per second of the jobs: the whole series' increase (an agent is idle
/// outside its jobs) over the jobs' `nominal` length, or over the series' span
/// when that is shorter or unknown, so the controller's start and collection
/// around the jobs do not dilute it.
fn busy_rate(points: &[(f64, u64)], nominal: Option<f64>) -> Option<f64> {
    let (&(t0, v0), &(t1, v1)) = (points.first()?, points.last()?);
    let span = nominal.map_or(t1 - t0, |n| n.min(t1 - t0));
    (span > 0.0).then(|| v1.saturating_sub(v0) as f64 / span)
}

/// The value of a counter at `t`, linear between readings.
fn value_at(points: &[(f64, u64)], t: f64) -> f64 {
    let after = points
        .iter()
        .position(|p| p.0 >= t)
        .unwrap_or(points.len() - 1);
    if after == 0 {
        return points[0].1 as f64;
    }
    let ((ta, va), (tb, vb)) = (points[after - 1], points[after]);
    let share = if tb > ta { (t - ta) / (tb - ta) } else { 1.0 };
    va as f64 + (vb as f64 - va as f64) * share.clamp(0.0, 1.0)
}

/// A counter's increase per second over the whole series (`(seconds, value)`).
fn window_rate(points: &[(f64, u64)]) -> Option<f64> {
    let (&(t0, v0), &(t1, v1)) = (points.first()?, points.last()?);
    (t1 > t0).then(|| v1.saturating_sub(v0) as f64 / (t1 - t0))
}

/// A trailing burst of increases this small a share of the counter's whole
/// increase is no part of the jobs' activity when an idle gap longer than any
/// between the earlier increases stands before it (the agent's answer, a sink
/// report).
const BLIP_SHARE: f64 = 0.01;
/// Most trailing bursts left out as such.
const MAX_BLIPS: usize = 4;

/// A counter's increase per second over the `nominal` seconds (the jobs' length;
/// all of its moving when shorter or unknown) that end at the first reading after
/// the jobs' last increase. Trailing blips (see [`BLIP_SHARE`]) are not the jobs':
/// a window ending on one would drop the start of the load and add idle time. A
/// job's set-up before (a disk generator filling its file) does not count. A
/// counter that never moved is 0.
fn active_rate(points: &[(f64, u64)], nominal: Option<f64>) -> Option<f64> {
    let moved = |w: &[(f64, u64)]| w[1].1 > w[0].1;
    // Indices of the readings' windows (w = points[k..=k + 1]) in which it moved.
    let moves: Vec<usize> = points
        .windows(2)
        .enumerate()
        .filter(|(_, w)| moved(w))
        .map(|(k, _)| k)
        .collect();
    let Some(&i) = moves.first() else {
        return window_rate(points).map(|_| 0.0);
    };
    let mut last = moves.len() - 1;
    for _ in 0..MAX_BLIPS {
        // The trailing burst: the moving windows from `burst` to `last`, no idle
        // window between them.
        let mut burst = last;
        while burst > 0 && moves[burst - 1] + 1 == moves[burst] {
            burst -= 1;
        }
        if burst == 0 {
            break;
        }
        let gap = |a: usize, b: usize| points[moves[b]].0 - points[moves[a] + 1].0;
        let widest = (1..burst).map(|k| gap(k - 1, k)).fold(0.0, f64::max);
        let size = points[moves[last] + 1].1 - points[moves[burst]].1;
        let total = points[moves[last] + 1].1 - points[i].1;
        if gap(burst - 1, burst) > widest && (size as f64) < BLIP_SHARE * total as f64 {
            last = burst - 1;
        } else {
            break;
        }
    }
    let (start, end) = (points[i].0, points[moves[last] + 1].0);
    let from = nominal.map_or(start, |n| start.max(end - n));
    (end > from).then(|| (value_at(points, end) - value_at(points, from)) / (end - from))
}

/// The level a tenant's memory held: the mean of the samples from the first one at
/// 90% of the highest or more to the last one at 90% or more. The ramp up (a worker
/// faulting its pages in) and the release at the end are left out; a level that
/// falls in between (an OOM-killed worker starting again) is kept.
fn plateau_mean(points: &[(f64, u64)]) -> Option<f64> {
    let peak = points.iter().map(|p| p.1).max()?;
    let high = |p: &(f64, u64)| p.1 as f64 >= 0.9 * peak as f64;
    let i = points.iter().position(high)?;
    let j = points.iter().rposition(high)?;
    let held = &points[i..=j];
    Some(held.iter().map(|p| p.1 as f64).sum::<f64>() / held.len() as f64)
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
    fn rates_count_while_the_counter_moved() {
        // Idle 0.0-0.4 s, 100 ops per 0.1 s from 0.4 to 1.4 s, idle again to 2.0 s:
        // 1000 ops in the second they moved = 1000/s, not 1000/2 s.
        let mut points = vec![(0.0, 5), (0.2, 5), (0.4, 5)];
        points.extend((1..=10).map(|k| (0.4 + 0.1 * k as f64, 5 + 100 * k)));
        points.extend([(1.7, 1005), (2.0, 1005)]);
        assert!((active_rate(&points, None).unwrap() - 1000.0).abs() < 1e-6);
        assert!((window_rate(&points).unwrap() - 500.0).abs() < 1e-6);
        // Over the jobs' last 0.5 s: 1405 - 0.9 -> 505 ... 1005 = 500 ops, 1000/s.
        assert!((active_rate(&points, Some(0.5)).unwrap() - 1000.0).abs() < 1e-6);
        // A set-up burst first (100 ops at 0.1-0.2 s), then 200/s for 1 s to 2.2 s:
        // over the nominal 1 s only the steady rate counts.
        let setup = [
            (0.0, 0),
            (0.1, 0),
            (0.2, 100),
            (1.2, 100),
            (2.2, 300),
            (2.5, 300),
        ];
        assert!((active_rate(&setup, Some(1.0)).unwrap() - 200.0).abs() < 1e-6);
        // Without it, from the last reading before the first rise (0.1 s) to the
        // first after the last (2.2 s): 300 ops / 2.1 s.
        assert!((active_rate(&setup, None).unwrap() - 300.0 / 2.1).abs() < 1e-6);
        // A counter that never moved is 0; a single reading says nothing.
        assert_eq!(active_rate(&[(0.0, 7), (1.0, 7)], None), Some(0.0));
        assert_eq!(active_rate(&[(0.0, 7)], None), None);
    }

    /// T2: the sink-report and HTTP answer after a load are not its end. Readings
    /// every 20 ms; a load sends 50 Mbit/s (6.25 MB/s) from 6.77 s to 8.80 s, then
    /// 3.5 kB go at 9.0 s. Over the 2 s job the rate is 50 Mbit/s; a window ending
    /// after the 3.5 kB ([7.0, 9.0]) holds 1.8 s of data: 45 Mbit/s.
    #[test]
    fn a_blip_after_the_load_does_not_move_the_window() {
        let sent = |t: f64| (6.25e6 * (t - 6.77).clamp(0.0, 2.03)).round() as u64;
        let points: Vec<(f64, u64)> = (0..=465)
            .map(|k| {
                let t = f64::from(k) * 0.02;
                (t, sent(t) + if t >= 8.99 { 3500 } else { 0 })
            })
            .collect();
        let bps = active_rate(&points, Some(2.0)).unwrap() * 8.0;
        assert!((bps / 50e6 - 1.0).abs() < 0.01, "{bps}");
        // A last burst too large to be a blip is kept: 200 kB more at 9.0 s, so the
        // window is [7.0, 9.0] with 1.8 s of the load in it.
        let mut late = points.clone();
        for p in late.iter_mut().filter(|p| p.0 >= 8.99) {
            p.1 += 200_000;
        }
        let bps = active_rate(&late, Some(2.0)).unwrap() * 8.0;
        let want = (6.25e6 * 1.8 + 203_500.0) * 8.0 / 2.0;
        assert!((bps / want - 1.0).abs() < 0.01, "{bps} vs {want}");
        // A slow, steady counter (a paced disk job: 1 op every 100 ms for 10 s)
        // keeps its last increase: its gaps are all alike.
        let ops: Vec<(f64, u64)> = (0..=600)
            .map(|k| {
                let t = f64::from(k) * 0.02;
                (t, ((t + 1e-9) * 10.0).floor().min(100.0) as u64)
            })
            .collect();
        assert!((active_rate(&ops, Some(10.0)).unwrap() - 10.0).abs() < 0.2);
    }

    #[test]
    fn cpu_is_per_second_of_the_jobs() {
        // 0.5 s of CPU over a 1.2 s series around a 1 s job: 50% of one CPU.
        let points = [(0.0, 0), (0.6, 250_000_000), (1.2, 500_000_000)];
        assert!((busy_rate(&points, Some(1.0)).unwrap() - 5e8).abs() < 1e-3);
        // Without the jobs' length, or a longer one, the series' span.
        assert!((busy_rate(&points, None).unwrap() - 5e8 / 1.2).abs() < 1e-3);
        assert!((busy_rate(&points, Some(5.0)).unwrap() - 5e8 / 1.2).abs() < 1e-3);
    }

    #[test]
    fn memory_is_the_level_it_held() {
        // Ramp 0 -> 200, held at 200 and 180 (>= 90% of 200), a dip to 50 in between
        // (kept: an OOM restart), the exit to 0 (left out): (200+180+50+200) / 4.
        let points: Vec<(f64, u64)> = [0, 100, 200, 180, 50, 200, 0]
            .iter()
            .enumerate()
            .map(|(i, &v)| (i as f64, v))
            .collect();
        assert_eq!(plateau_mean(&points), Some(157.5));
        assert_eq!(plateau_mean(&[]), None);
    }

    #[test]
    fn a_meter_without_sources_reports_nothing() {
        let m = UsageMeter::start(Vec::new(), Duration::from_millis(20));
        assert!(m.finish(None).usage.is_empty());
    }

    #[test]
    fn a_tenant_without_counters_has_no_figures() {
        let m = UsageMeter::start(
            vec![UsageSource {
                tenant: "a".into(),
                cgroup: None,
                netns_pid: None,
            }],
            Duration::from_millis(20),
        );
        std::thread::sleep(Duration::from_millis(20));
        let got = m.finish(None);
        assert_eq!(got.usage.get("a"), Some(&HostUsage::default()));
    }

    /// N13: the sampler's own cost is measured and recorded beside its interval.
    /// Reading this process's `/proc/PID/net/dev` every 5 ms for 200 ms (about 40
    /// readings) costs its thread some CPU time, and far less than the wall time
    /// (the thread is parked between readings): 0 < share < 1; the interval
    /// recorded is the one set.
    #[test]
    fn the_sampler_reports_its_interval_and_its_own_cpu_share() {
        let m = UsageMeter::start(
            vec![UsageSource {
                tenant: "a".into(),
                cgroup: None,
                netns_pid: Some(std::process::id()),
            }],
            Duration::from_millis(5),
        );
        std::thread::sleep(Duration::from_millis(200));
        let got = m.finish(None);
        let sampler = got.sampler.expect("the sampler's cost");
        assert_eq!(sampler.interval_ms, 5.0);
        assert!(
            sampler.cpu_share > 0.0 && sampler.cpu_share < 1.0,
            "{sampler:?}"
        );
        // The readings it took: its interface counters moved or not, it has a figure.
        assert!(got.usage["a"].net_bps.is_some());
    }
}
