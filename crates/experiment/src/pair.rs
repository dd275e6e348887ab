//! Wang & Ng's pair suite (seed 003, §III.C): the measurements of one pair of
//! instances, one after another so they do not disturb each other. The pair is the
//! test tenant and the endpoint (the agent standing for the other instance). Every
//! setting defaults to the seed's; each default names its line in the seed.

use std::time::Duration;

use serde::Serialize;

use super::file::{
    PairBadabingFile, PairCputestFile, PairRttFile, PairSuiteFile, PairTcpFile, PairUdpFile,
    Spanned,
};
use super::{neighbor_count, values, Checker, ExperimentError, Network, Role, TenantDef};
use nnb_burn::steal::CPUTEST_THRESHOLD;
use nnb_format::StepGroup;
use nnb_netlat::{badabing as bb, probe::series};

/// The seed's full link rate, bit/s: EC2's Gigabit cards (l.199-200).
pub const SEED_LINK_BPS: f64 = nnb_netlat::grain::DEFAULT_LINK_BPS;
/// The seed's bound on each TCP and UDP test, bytes: 800 MB (l.266-267).
pub const SEED_BYTES: u64 = 800_000_000;
/// The seed's TCP send and receive windows, bytes: 256 KB (l.207-208).
pub const SEED_TCP_WINDOW: u64 = 256 << 10;
/// The seed's UDP socket buffer, bytes: 128 KB (l.202).
pub const SEED_UDP_BUFFER: u64 = 128 << 10;
/// The seed's UDP pacing granularity: an idle interval per 128 KB (l.197-198).
pub const SEED_PACING_CHUNK: u64 = 128 << 10;
/// The seed's fine-grained throughput: one rate per 256 KB received (l.380-382).
pub const SEED_GRAIN: u64 = nnb_netlat::grain::DEFAULT_GRAIN;
/// The seed's UDP payload: 1500-byte IP packets less 20 bytes of IP and 8 of UDP
/// header (l.201).
pub const SEED_UDP_PAYLOAD: usize = 1472;
/// Bytes a TCPTest sender writes per call (the job's `msg_size`; a TCP stream has
/// no datagrams).
pub const TCP_WRITE: usize = 1400;
/// A TCPTest sender's default pacing ceiling, in link rates: one it does not reach,
/// so it sends as fast as TCP goes (the seed's TCPTest is not paced).
pub const TCP_CEILING: f64 = 10.0;

/// One measurement of the suite; its steps' group is [`Measurement::group`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Measurement {
    /// CPUTest on the test tenant, then on the endpoint.
    Cputest,
    /// The RTT series.
    Rtt,
    /// TCPTest.
    Tcp,
    /// UDPTest.
    Udp,
    /// Badabing.
    Badabing,
}

impl Measurement {
    /// Every measurement, in the seed's order (§III.C, l.261-269).
    pub const ALL: [Measurement; 5] = [
        Measurement::Cputest,
        Measurement::Rtt,
        Measurement::Tcp,
        Measurement::Udp,
        Measurement::Badabing,
    ];

    /// The group of its steps, whose name is also its name in the file.
    pub const fn group(self) -> StepGroup {
        match self {
            Measurement::Cputest => StepGroup::Cputest,
            Measurement::Rtt => StepGroup::Rtt,
            Measurement::Tcp => StepGroup::Tcp,
            Measurement::Udp => StepGroup::Udp,
            Measurement::Badabing => StepGroup::Badabing,
        }
    }

    /// The measurement named `name` in a file.
    fn from_name(name: &str) -> Option<Measurement> {
        Measurement::ALL
            .into_iter()
            .find(|m| m.group().name() == name)
    }
}

/// CPUTest: a `steal` scan with its timestamp trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cputest {
    /// How long each side is watched.
    #[serde(serialize_with = "values::serialize_ms", rename = "duration_ms")]
    pub duration: Duration,
    /// A gap longer than this is time scheduled off.
    #[serde(rename = "threshold_ns")]
    pub threshold_ns: u64,
    /// Keep the trace.
    pub trace: bool,
}

/// The RTT series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RttSeries {
    /// Probes sent, the dropped ones included.
    pub probes: u64,
    /// Probes per second.
    pub rate_hz: f64,
    /// First probes left out of the summary.
    pub skip: u64,
    /// Probe size, bytes.
    pub msg_size: usize,
    /// ICMP echo instead of UDP.
    pub icmp: bool,
}

impl RttSeries {
    /// How long the series takes: probes over the rate.
    pub fn length(&self) -> Duration {
        Duration::from_secs_f64(self.probes as f64 / self.rate_hz)
    }
}

/// TCPTest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TcpTest {
    /// Byte bound.
    pub bytes: u64,
    /// Time bound.
    #[serde(serialize_with = "values::serialize_ms", rename = "duration_ms")]
    pub duration: Duration,
    /// Send and receive windows, bytes.
    pub window: u64,
    /// TCP_INFO sampling interval.
    #[serde(serialize_with = "values::serialize_ms", rename = "tcp_info_ms")]
    pub tcp_info: Duration,
    /// Quiet-period threshold.
    #[serde(serialize_with = "values::serialize_ms", rename = "quiet_ms")]
    pub quiet: Duration,
    /// Fine-grained throughput grain, bytes.
    pub grain: u64,
    /// Full link rate, bit/s.
    pub link_bps: f64,
    /// The sender's pacing ceiling, bit/s.
    pub rate_bps: f64,
}

/// UDPTest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UdpTest {
    /// Byte bound.
    pub bytes: u64,
    /// Time bound.
    #[serde(serialize_with = "values::serialize_ms", rename = "duration_ms")]
    pub duration: Duration,
    /// Sending rate, bit/s.
    pub rate_bps: f64,
    /// Payload bytes.
    pub msg_size: usize,
    /// Bytes sent back to back before each idle interval.
    pub pacing_chunk: u64,
    /// Socket buffer of both ends, bytes.
    pub socket_buffer: u64,
    /// Fine-grained throughput grain, bytes.
    pub grain: u64,
    /// Full link rate, bit/s.
    pub link_bps: f64,
}

/// Badabing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BadabingProbe {
    /// Probing time.
    #[serde(serialize_with = "values::serialize_ms", rename = "duration_ms")]
    pub duration: Duration,
    /// Slot length.
    #[serde(serialize_with = "serialize_us", rename = "slot_us")]
    pub slot: Duration,
    /// Probability of a probe per slot.
    pub probability: f64,
    /// Packets per probe.
    pub packets: u32,
    /// Packet size, bytes.
    pub msg_size: usize,
    /// Loss neighbourhood τ.
    #[serde(serialize_with = "serialize_us", rename = "tau_us")]
    pub tau: Duration,
    /// The delay criterion's α.
    pub alpha: f64,
}

fn serialize_us<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// One pair's suite.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairSuite {
    /// What runs, in order (each once per round).
    pub measurements: Vec<Measurement>,
    /// CPUTest's settings.
    pub cputest: Cputest,
    /// The RTT series' settings.
    pub rtt: RttSeries,
    /// TCPTest's settings.
    pub tcp: TcpTest,
    /// UDPTest's settings.
    pub udp: UdpTest,
    /// Badabing's settings.
    pub badabing: BadabingProbe,
}

impl Checker<'_> {
    /// The pair suite; `network` sets the default link rate (an emulated link's).
    pub(super) fn pair_suite(
        &self,
        tenants: &[TenantDef],
        s: PairSuiteFile,
        network: Network,
    ) -> Result<PairSuite, ExperimentError> {
        if neighbor_count(tenants) > 0 {
            return Err(self.scenario_error(format!(
                "a pair suite measures the test tenant and the endpoint (the pair's other \
                 side): remove the tenants with role = \"{}\"",
                Role::Neighbor
            )));
        }
        let link_default = match network {
            Network::Emulated { host_bw_bps, .. } => host_bw_bps,
            Network::None => SEED_LINK_BPS,
        };
        Ok(PairSuite {
            measurements: self.measurements(&s.measurements)?,
            cputest: self.cputest(s.cputest.unwrap_or_default())?,
            rtt: self.rtt_series(s.rtt.unwrap_or_default())?,
            tcp: self.tcp_test(s.tcp.unwrap_or_default(), link_default)?,
            udp: self.udp_test(s.udp.unwrap_or_default(), link_default)?,
            badabing: self.badabing(s.badabing.unwrap_or_default())?,
        })
    }

    fn measurements(
        &self,
        v: &Option<Spanned<Vec<String>>>,
    ) -> Result<Vec<Measurement>, ExperimentError> {
        let Some(v) = v else {
            return Ok(Measurement::ALL.to_vec());
        };
        let names = Measurement::ALL.map(|m| m.group().name()).join(", ");
        let mut out = Vec::new();
        for name in v.get_ref() {
            let m = Measurement::from_name(name).ok_or_else(|| {
                self.error(
                    v.span(),
                    format!("unknown measurement `{name}`: expected some of {names}"),
                )
            })?;
            if out.contains(&m) {
                return Err(self.error(v.span(), format!("`{name}` is listed twice")));
            }
            out.push(m);
        }
        if out.is_empty() {
            return Err(self.error(v.span(), format!("the list is empty: name some of {names}")));
        }
        Ok(out)
    }

    fn cputest(&self, f: PairCputestFile) -> Result<Cputest, ExperimentError> {
        let threshold = self.duration(&f.threshold, CPUTEST_THRESHOLD)?;
        let threshold_ns = u64::try_from(threshold.as_nanos()).unwrap_or(u64::MAX);
        if let (Some(v), 0) = (&f.threshold, threshold_ns) {
            return Err(self.error(v.span(), "threshold must be above zero"));
        }
        Ok(Cputest {
            duration: self.nonzero_duration(&f.duration, Duration::from_secs(3), "duration")?,
            threshold_ns,
            trace: f.trace.unwrap_or(true),
        })
    }

    fn rtt_series(&self, f: PairRttFile) -> Result<RttSeries, ExperimentError> {
        let probes = self.opt_positive(&f.probes, "probes", series::DEFAULT_PROBES)?;
        let rate_hz = match &f.rate {
            None => series::DEFAULT_RATE_HZ,
            Some(v) => {
                let r = *v.get_ref();
                if !(r.is_finite() && (0.001..=1e6).contains(&r)) {
                    return Err(self.error(
                        v.span(),
                        format!("rate is probes per second, 0.001 to 1000000, got {r}"),
                    ));
                }
                r
            }
        };
        let skip = f
            .skip
            .as_ref()
            .map_or(series::DEFAULT_SKIP, |v| *v.get_ref());
        if skip >= probes {
            let at = f.skip.as_ref().or(f.probes.as_ref()).map(Spanned::span);
            return Err(self.error(
                at.unwrap_or(self.scenario_span.clone()),
                format!("skip = {skip} drops every one of the {probes} probes"),
            ));
        }
        Ok(RttSeries {
            probes,
            rate_hz,
            skip,
            msg_size: self.msg_size(&f.msg_size, 64)?,
            icmp: f.icmp.unwrap_or(false),
        })
    }

    fn tcp_test(&self, f: PairTcpFile, link_default: f64) -> Result<TcpTest, ExperimentError> {
        let link_bps = self.rate_or(&f.link, link_default)?;
        Ok(TcpTest {
            rate_bps: self.rate_or(&f.rate, TCP_CEILING * link_bps)?,
            bytes: self.bytes(&f.bytes, SEED_BYTES, "bytes", (1, u64::MAX))?,
            duration: self.nonzero_duration(&f.duration, Duration::from_secs(60), "duration")?,
            window: self.buffer(&f.window, SEED_TCP_WINDOW, "window")?,
            tcp_info: self.nonzero_duration(&f.tcp_info, Duration::from_millis(10), "tcp_info")?,
            quiet: self.nonzero_duration(&f.quiet, nnb_netlat::tcpinfo::DEFAULT_QUIET, "quiet")?,
            grain: self.grain(&f.grain)?,
            link_bps,
        })
    }

    fn udp_test(&self, f: PairUdpFile, link_default: f64) -> Result<UdpTest, ExperimentError> {
        let link_bps = self.rate_or(&f.link, link_default)?;
        Ok(UdpTest {
            bytes: self.bytes(&f.bytes, SEED_BYTES, "bytes", (1, u64::MAX))?,
            duration: self.nonzero_duration(&f.duration, Duration::from_secs(60), "duration")?,
            rate_bps: self.rate_or(&f.rate, link_bps)?,
            msg_size: self.msg_size(&f.msg_size, SEED_UDP_PAYLOAD)?,
            pacing_chunk: self.bytes(
                &f.pacing_chunk,
                SEED_PACING_CHUNK,
                "pacing_chunk",
                (1, nnb_netlat::load::MAX_BUFFER as u64),
            )?,
            socket_buffer: self.buffer(&f.socket_buffer, SEED_UDP_BUFFER, "socket_buffer")?,
            grain: self.grain(&f.grain)?,
            link_bps,
        })
    }

    fn badabing(&self, f: PairBadabingFile) -> Result<BadabingProbe, ExperimentError> {
        let slot = self.duration(&f.slot, bb::DEFAULT_SLOT)?;
        if let Some(v) = f.slot.as_ref().filter(|_| slot < Duration::from_micros(1)) {
            return Err(self.error(v.span(), "slot must be at least 1us"));
        }
        let probability = self.share(
            &f.probability,
            bb::DEFAULT_PROBABILITY,
            "probability",
            false,
        )?;
        let alpha = self.share(&f.alpha, bb::DEFAULT_ALPHA, "alpha", true)?;
        Ok(BadabingProbe {
            duration: self.nonzero_duration(&f.duration, bb::DEFAULT_DURATION, "duration")?,
            slot,
            probability,
            packets: self.opt_positive(&f.packets, "packets", bb::DEFAULT_PACKETS)?,
            msg_size: self.msg_size(&f.msg_size, bb::DEFAULT_MSG_SIZE)?,
            tau: self.duration(&f.tau, bb::DEFAULT_TAU)?,
            alpha,
        })
    }

    /// A size in bytes ("256K", "800MB") within `least..=most`, or `default`.
    fn bytes(
        &self,
        v: &Option<Spanned<String>>,
        default: u64,
        what: &str,
        (least, most): (u64, u64),
    ) -> Result<u64, ExperimentError> {
        let Some(v) = v else { return Ok(default) };
        let n = self.at(
            v,
            nnb_units::parse_size(v.get_ref()).map_err(|e| e.to_string()),
        )?;
        if !(least..=most).contains(&n) {
            return Err(self.error(
                v.span(),
                format!("{what} = {n} bytes: between {least} and {most}"),
            ));
        }
        Ok(n)
    }

    /// A socket buffer or window: what a load's socket may ask for.
    fn buffer(
        &self,
        v: &Option<Spanned<String>>,
        default: u64,
        what: &str,
    ) -> Result<u64, ExperimentError> {
        use nnb_netlat::load::{MAX_BUFFER, MIN_BUFFER};
        self.bytes(v, default, what, (MIN_BUFFER as u64, MAX_BUFFER as u64))
    }

    /// The fine-grained throughput's grain, as the receiver accepts it.
    fn grain(&self, v: &Option<Spanned<String>>) -> Result<u64, ExperimentError> {
        let g = self.bytes(v, SEED_GRAIN, "grain", (1, u64::MAX))?;
        match v {
            Some(v) => self.at(v, nnb_netlat::grain::validate_grain(g).map(|()| g)),
            None => Ok(g),
        }
    }

    /// A bit rate above zero, or `default`.
    fn rate_or(&self, v: &Option<Spanned<String>>, default: f64) -> Result<f64, ExperimentError> {
        v.as_ref().map_or(Ok(default), |v| {
            self.at(v, values::positive_rate(v.get_ref()))
        })
    }

    /// A share: above 0 (or at 0 when `zero_ok`) and at most 1, or `default`.
    fn share(
        &self,
        v: &Option<Spanned<f64>>,
        default: f64,
        what: &str,
        zero_ok: bool,
    ) -> Result<f64, ExperimentError> {
        let Some(v) = v else { return Ok(default) };
        let x = *v.get_ref();
        let low_ok = if zero_ok { x >= 0.0 } else { x > 0.0 };
        if x.is_finite() && low_ok && x <= 1.0 {
            Ok(x)
        } else {
            let low = if zero_ok { "0" } else { "above 0" };
            Err(self.error(v.span(), format!("{what} is a share, {low} to 1, got {x}")))
        }
    }

    /// Refuses a suite one of whose measurements would outlast `step_timeout` (its
    /// job's deadline): the RTT series alone takes 500 s at the seed's settings.
    /// `at` is where the file sets `step_timeout`.
    pub(super) fn pair_fits_timeout(
        &self,
        plan: &crate::plan::Plan,
        step_timeout: Duration,
        at: Option<std::ops::Range<usize>>,
    ) -> Result<(), ExperimentError> {
        let longest = plan
            .steps
            .iter()
            .filter_map(|s| s.estimate.map(|e| (e, s)))
            .max_by_key(|(e, _)| *e);
        match longest {
            Some((e, s)) if e >= step_timeout => Err(self.error(
                at.unwrap_or(self.scenario_span.clone()),
                format!(
                    "step {} takes {} but step_timeout is {}: set step_timeout above it, \
                     e.g. step_timeout = \"{}s\"",
                    s.id,
                    nnb_units::format_duration(e),
                    nnb_units::format_duration(step_timeout),
                    (e.as_secs_f64() * 1.2).ceil() as u64 + 30
                ),
            )),
            _ => Ok(()),
        }
    }
}
