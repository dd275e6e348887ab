//! The pair suite's steps (seed 003, §III.C): per round, each measurement once, one
//! after another; CPUTest twice (the test tenant, then the endpoint, the pair's
//! other side). Ids are `GROUP/LABEL/rep=N` (`warmup=N` for warm-up rounds), e.g.
//! `cputest/on=test/rep=1`, `cputest/on=endpoint/rep=1`, `rtt/pair=test,endpoint/rep=1`:
//! the rounds go one after another (the seed's temporal experiment measured "round
//! by round", l.278-279), so a resumed run continues within its round.

use std::time::Duration;

use super::{Assignment, Builder, Step, REFLECTOR, SINK, TCP_SINK};
use crate::pair::{Measurement, PairSuite, TCP_WRITE};
use crate::tenant::ENDPOINT;
use nnb_agent::jobs::{JobSpec, LoadOptions, StealOptions};

/// One measured job of a round: its label, who runs it, what, and for how long.
struct Job {
    label: String,
    tenant: String,
    job: JobSpec,
    estimate: Duration,
}

impl Builder<'_> {
    /// The pair suite: warm-up rounds, then `repetitions` rounds, each running the
    /// suite's measurements in order, one job per step.
    pub(super) fn pair_suite(&mut self, s: &PairSuite) {
        let test = self.test().name.clone();
        let present: Vec<String> = self.exp.tenants.iter().map(|t| t.name.clone()).collect();
        let round: Vec<(Measurement, Job)> = s
            .measurements
            .iter()
            .flat_map(|&m| jobs(s, m, &test).into_iter().map(move |j| (m, j)))
            .collect();
        let rounds = (1..=self.exp.warmup)
            .map(|r| (r, true))
            .chain((1..=self.exp.repetitions).map(|r| (r, false)));
        for (rep, warmup) in rounds {
            let kind = if warmup { "warmup" } else { "rep" };
            for (position, (m, j)) in round.iter().enumerate() {
                let group = m.group();
                self.steps.push(Step {
                    id: format!("{group}/{}/{kind}={rep}", j.label),
                    group,
                    level: (position + 1) as f64,
                    level_label: j.label.clone(),
                    rep,
                    warmup,
                    present: present.clone(),
                    lifted: Vec::new(),
                    background: Vec::new(),
                    continuous: false,
                    measure: vec![Assignment {
                        tenant: j.tenant.clone(),
                        job: j.job.clone(),
                    }],
                    estimate: Some(j.estimate),
                    technology: None,
                    start: None,
                });
            }
        }
    }
}

/// The jobs of measurement `m` in one round, `test` being the test tenant.
fn jobs(s: &PairSuite, m: Measurement, test: &str) -> Vec<Job> {
    let pair = format!("pair={test},{ENDPOINT}");
    let from_test = |job: JobSpec, estimate: Duration| Job {
        label: pair.clone(),
        tenant: test.to_string(),
        job,
        estimate,
    };
    match m {
        Measurement::Cputest => [test, ENDPOINT]
            .into_iter()
            .map(|side| Job {
                label: format!("on={side}"),
                tenant: side.to_string(),
                job: JobSpec::Steal {
                    cpus: None,
                    duration_ms: nnb_units::millis(s.cputest.duration),
                    threshold_ns: s.cputest.threshold_ns,
                    options: StealOptions {
                        trace: s.cputest.trace,
                    },
                },
                estimate: s.cputest.duration,
            })
            .collect(),
        Measurement::Rtt => {
            let r = &s.rtt;
            vec![from_test(
                JobSpec::Rtt {
                    target: REFLECTOR.to_string(),
                    probes: r.probes,
                    rate_hz: r.rate_hz,
                    skip: r.skip,
                    msg_size: r.msg_size,
                    icmp: r.icmp,
                },
                r.length(),
            )]
        }
        Measurement::Tcp => {
            let t = &s.tcp;
            vec![from_test(
                JobSpec::Load {
                    target: TCP_SINK.to_string(),
                    rate_bps: t.rate_bps,
                    streams: 1,
                    msg_size: TCP_WRITE,
                    duration_ms: Some(nnb_units::millis(t.duration)),
                    sampling: None,
                    options: LoadOptions {
                        tcp: true,
                        bytes: Some(t.bytes),
                        send_buffer: Some(t.window),
                        recv_buffer: Some(t.window),
                        tcp_info_ms: Some(nnb_units::millis(t.tcp_info)),
                        quiet_us: Some(micros(t.quiet)),
                        grain: Some(t.grain),
                        link_bps: Some(t.link_bps),
                        ..LoadOptions::default()
                    },
                },
                bounded(t.duration, t.bytes, t.rate_bps.min(t.link_bps)),
            )]
        }
        Measurement::Udp => {
            let u = &s.udp;
            vec![from_test(
                JobSpec::Load {
                    target: SINK.to_string(),
                    rate_bps: u.rate_bps,
                    streams: 1,
                    msg_size: u.msg_size,
                    duration_ms: Some(nnb_units::millis(u.duration)),
                    sampling: None,
                    options: LoadOptions {
                        bytes: Some(u.bytes),
                        pacing_chunk: Some(u.pacing_chunk),
                        send_buffer: Some(u.socket_buffer),
                        recv_buffer: Some(u.socket_buffer),
                        grain: Some(u.grain),
                        link_bps: Some(u.link_bps),
                        ..LoadOptions::default()
                    },
                },
                bounded(u.duration, u.bytes, u.rate_bps),
            )]
        }
        Measurement::Badabing => {
            let b = &s.badabing;
            vec![from_test(
                JobSpec::Badabing {
                    target: REFLECTOR.to_string(),
                    duration_ms: nnb_units::millis(b.duration),
                    slot_us: micros(b.slot),
                    probability: b.probability,
                    packets: b.packets,
                    msg_size: b.msg_size,
                    tau_us: micros(b.tau),
                    alpha: b.alpha,
                },
                b.duration,
            )]
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// How long a transfer bounded by `duration` and by `bytes` takes at `bps`: the
/// shorter of the two.
fn bounded(duration: Duration, bytes: u64, bps: f64) -> Duration {
    let at_rate = bytes as f64 * 8.0 / bps;
    if at_rate.is_finite() && at_rate < duration.as_secs_f64() {
        Duration::from_secs_f64(at_rate)
    } else {
        duration
    }
}
