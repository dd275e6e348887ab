//! The run's verdict, like hyperfine's warnings: one line per thing that qualifies the
//! run's numbers (noise, a baseline that moved, loss, a clock fallback, missing sink
//! reports, GSO fallbacks, pacer skips, steal and the levels it happened at, a level
//! whose CPUs ran at a lower effective frequency, a neighbor load short of its target,
//! a level whose receiver dropped datagrams, a background job that failed, pongs the
//! reflector could not send, duplicated records, failed steps), or one line saying the
//! run was quiet.

use nnb_format::quality::{StealUse, STEAL_MIN_SHARE, STEAL_QUANTUM_TICKS_PER_CPU};
use nnb_format::stats::{degradation_ci95, spread_known, Summary};
use nnb_format::{BackgroundJob, SampleStatus, StepGroup};
use nnb_format::{Metric, Role};
use nnb_units::DisplayUnit;

use crate::read::{Run, Scenario};
use crate::table::{Cell, Table};

use super::{by_group, measured, Analyses, AnalysisError, Isolation, Row};

/// A coefficient of variation above this (a fraction) marks a level as noisy.
pub const NOISY_CV: f64 = 0.05;
/// Busy and idle baselines (the same setup: the test node alone) further apart than
/// this (percent) mean the machine changed between the passes.
pub const BASELINE_DRIFT_PCT: f64 = 5.0;
/// A neighbor load that achieved less than this fraction of its target did not load
/// the host as the level says.
pub const LOAD_SHORTFALL: f64 = 0.9;
/// A level whose median effective CPU frequency is more than this fraction below the
/// same tenant's fastest level's ran on slower CPUs (throttling, a power cap, turbo
/// lost), which slows it whatever the neighbors do.
pub const FREQ_DROP: f64 = 0.05;

/// The findings about `run`, given its analyses.
pub fn findings(run: &Run, a: &Analyses) -> Result<Vec<String>, AnalysisError> {
    let mut out = Vec::new();
    if let Some(d) = &a.degradation {
        if run.manifest.scenario == Scenario::NeighborStaircase {
            let base = |group: StepGroup| {
                d.groups
                    .iter()
                    .find(|g| g.group == group && !g.reference_missing)
                    .and_then(|g| g.levels.first())
                    .map(|l| l.mean)
            };
            if let (Some(busy), Some(idle)) = (base(StepGroup::Busy), base(StepGroup::Idle)) {
                let pct = (busy - idle).abs() / busy.min(idle) * 100.0;
                if pct > BASELINE_DRIFT_PCT {
                    out.push(format!(
                        "the busy and idle baselines differ by {pct:.0}%: the test node alone \
                         measured differently in the two passes"
                    ));
                }
            }
        }
        let single: Vec<String> = d
            .groups
            .iter()
            .flat_map(|g| {
                g.levels
                    .iter()
                    .filter(|l| !spread_known(l.n))
                    .map(move |l| format!("{}/{}", g.group, l.label))
            })
            .collect();
        out.extend(single_repetition_finding(&single));
        for g in &d.groups {
            for l in &g.levels {
                out.extend(noisy_finding(l.cv(), g.group, &l.label));
            }
            if let Some((level, pct)) = g.max {
                let l = g.levels.iter().find(|l| l.level == level);
                if let Some((lo, hi)) = l.and_then(|l| l.degradation_ci95) {
                    if lo <= 0.0 && hi >= 0.0 && pct != 0.0 {
                        out.push(format!(
                            "{}: the largest degradation ({pct:.2}%) is not significant \
                             (95% interval {lo:.2}..{hi:.2}%)",
                            g.group
                        ));
                    }
                }
            }
        }
    }
    if let Some(iso) = &a.isolation {
        out.extend(isolation_findings(run, iso)?);
    }
    for t in a.technologies.iter().flat_map(|t| &t.per) {
        let only = super::technologies::only(run, t.technology)?;
        let found = isolation_findings(&only, &t.isolation)?;
        out.extend(found.into_iter().map(|f| format!("{}: {f}", t.technology)));
    }
    let mut rows = measured(run, Role::Test)?;
    let tests = rows.len();
    rows.extend(measured(run, Role::Neighbor)?);
    out.extend(qualifier_findings(&rows));
    let (test_rows, neighbor_rows) = rows.split_at(tests);
    for (role, rows) in [(Role::Test, test_rows), (Role::Neighbor, neighbor_rows)] {
        out.extend(load_findings(run.manifest.scenario, role, &Tally::of(rows)));
    }
    out.extend(freq_finding(&freq_drops(&rows)));
    out.extend(background_findings(run, a));
    out.extend(super::credit_findings(a.credits.as_ref()));
    if run.duplicates > 0 {
        out.push(format!(
            "{} duplicated record(s) ignored: the same step, tenant and part written more \
             than once, as two writers appending to one run leave them (the first copy counts)",
            run.duplicates
        ));
    }
    if a.failed > 0 {
        out.push(format!(
            "{} step(s) failed after their retries and are left out",
            a.failed
        ));
    }
    Ok(out)
}

/// The verdict's line on a level whose coefficient of variation `cv` is above
/// [`NOISY_CV`], if it is.
fn noisy_finding(cv: f64, group: StepGroup, label: &str) -> Option<String> {
    (cv > NOISY_CV).then(|| {
        format!(
            "CV {:.1}% at {group}/{label}: the machine was noisy",
            cv * 100.0
        )
    })
}

/// What the repetitions of an isolation matrix say (tenant a's values of the metric
/// the matrix compares): levels above the CV rule, levels measured once, and pairs
/// whose I_plr is within the noise (Welch's 95% interval of a' against a's baseline
/// in the same state includes 0).
fn isolation_findings(run: &Run, iso: &Isolation) -> Result<Vec<String>, AnalysisError> {
    let rows = measured(run, Role::Test)?;
    let mut levels: Vec<(StepGroup, f64, String, Summary)> = Vec::new();
    for (group, group_levels) in by_group(&rows) {
        for l in group_levels {
            let values: Vec<f64> = l
                .rows
                .iter()
                .filter_map(|r| r.metrics.get(iso.metric))
                .collect();
            if let Some(s) = Summary::of(&values) {
                levels.push((group, l.level, l.label.clone(), s));
            }
        }
    }
    let mut out: Vec<String> = levels
        .iter()
        .filter(|(_, _, _, s)| spread_known(s.n))
        .filter_map(|(group, _, label, s)| noisy_finding(s.cv, *group, label))
        .collect();
    let single: Vec<String> = levels
        .iter()
        .filter(|(_, _, _, s)| !spread_known(s.n))
        .map(|(group, _, label, _)| format!("{group}/{label}"))
        .collect();
    out.extend(single_repetition_finding(&single));
    let summary = |group: StepGroup, id: u32| {
        levels
            .iter()
            .find(|(g, level, _, _)| *g == group && *level == f64::from(id))
            .map(|l| &l.3)
    };
    let higher = iso.metric.direction().higher_is_better();
    let within: Vec<String> = iso
        .pairs
        .iter()
        .filter_map(|p| {
            let base = iso.baselines.iter().find(|b| b.state == p.state_a)?;
            let a = summary(StepGroup::Baseline, base.id)?;
            let a_beside = summary(StepGroup::Pair, p.id)?;
            let (lo, hi) = degradation_ci95(a, a_beside, higher)?;
            (lo <= 0.0 && hi >= 0.0).then(|| {
                format!(
                    "{} (I_plr {:.2}%, a' against a 95% interval {lo:.2}..{hi:.2}%)",
                    p.shortname,
                    p.i_plr * 100.0
                )
            })
        })
        .collect();
    if !within.is_empty() {
        out.push(format!(
            "I_plr within the noise in {} pair(s): {}: a' does not differ significantly \
             from a's baseline there",
            within.len(),
            within.join(", ")
        ));
    }
    Ok(out)
}

/// The verdict's line on levels measured once (`group/label` or a scenario's name),
/// if any: their spread is unknown, so the CV rule and the significance check say
/// nothing about them, and the run must not read as quiet.
fn single_repetition_finding(levels: &[String]) -> Option<String> {
    let first = levels.first()?;
    let more = match levels.len() {
        1 => String::new(),
        n => format!(" and {} more", n - 1),
    };
    Some(format!(
        "n = 1 at {} level(s) ({first}{more}): a single repetition shows no spread, so it \
         allows no noise (CV) or significance judgement there; measure 2 or more repetitions",
        levels.len()
    ))
}

/// The qualifiers of a set of records, counted once: the run verdict words them in
/// full over the run, a table row in short over one level.
#[derive(Debug, Default)]
struct Tally {
    /// Records timed with a clock other than the TSC, and one such warning.
    clock: usize,
    clock_example: Option<String>,
    /// Records with steal, and the seconds stolen in all.
    stolen_records: usize,
    stolen_s: f64,
    /// Probe pings sent, lost and (open loop) never sent, and RTT samples clamped.
    sent: u64,
    lost: u64,
    unsent: u64,
    clamped: u64,
    /// Load records without a complete sink report, and with a GSO fallback.
    partial: usize,
    gso: usize,
    /// Pacer slots skipped and sends refused over the load records.
    skipped: u64,
    errors: u64,
    /// Records whose socket buffer was capped below the size asked for.
    capped: usize,
    /// The sink's own drops ([`ReceiverDrops`]).
    receiver: ReceiverDrops,
}

impl Tally {
    fn of<'a>(rows: impl IntoIterator<Item = &'a Row>) -> Tally {
        let mut t = Tally::default();
        for r in rows {
            let q = &r.quality;
            if let Some(w) = q.clock_warning() {
                t.clock += 1;
                t.clock_example.get_or_insert(w);
            }
            if let Some(s) = steal_of(r) {
                t.stolen_records += 1;
                t.stolen_s += s.seconds();
            }
            if let Some(c) = q.counts {
                t.sent += c.sent;
                t.lost += c.lost;
                t.unsent += c.unsent;
            }
            t.clamped += q.clamped.unwrap_or(0);
            // A load's result has its sender's totals.
            if let Some(x) = q.sent {
                t.partial += usize::from(!q.sink_complete());
                t.gso += usize::from(q.gso_fallback());
                t.skipped += x.skipped;
                t.errors += x.send_errors;
            }
            t.capped += usize::from(q.buffer_capped());
            t.receiver.add(r);
        }
        t
    }

    fn loss_pct(&self) -> f64 {
        self.lost as f64 / self.sent.max(1) as f64 * 100.0
    }
}

/// The qualifiers of one level's records, short, for the level's row of a table:
/// the same findings as the verdict's, where they happened.
pub(crate) fn level_flags(rows: &[&Row]) -> Vec<String> {
    let t = Tally::of(rows.iter().copied());
    let mut out = Vec::new();
    if t.lost > 0 {
        out.push(format!("loss {:.2}%", t.loss_pct()));
    }
    if t.unsent > 0 {
        out.push(format!("{} unsent", t.unsent));
    }
    if t.clamped > 0 {
        out.push(format!("{} clamped", t.clamped));
    }
    if t.clock > 0 {
        out.push("clock fallback".to_string());
    }
    if t.stolen_records > 0 {
        out.push(format!("steal {:.2} s", t.stolen_s));
    }
    if t.partial > 0 {
        out.push("sink gaps".to_string());
    }
    if t.gso > 0 {
        out.push("GSO fallback".to_string());
    }
    if t.skipped > 0 {
        out.push(format!("{} skipped", t.skipped));
    }
    if t.errors > 0 {
        out.push(format!("{} send errors", t.errors));
    }
    if t.capped > 0 {
        out.push("buffer capped".to_string());
    }
    if t.receiver.records > 0 {
        out.push(format!("receiver dropped >= {}", t.receiver.most));
    }
    out
}

/// The datagrams the sink's own sockets dropped (`sink_drops`) over some load
/// records: how many records had any, and the most one of them had. Each record's
/// count is drops that happened at the receiver while that load ran; records of one
/// level share the sink's sockets, so their sum could count a drop twice, and the
/// largest is what the level surely lost at the receiver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverDrops {
    /// Records with drops.
    pub records: usize,
    /// The most drops of one record.
    pub most: u64,
}

impl ReceiverDrops {
    /// The drops of `rows`.
    pub(crate) fn of<'a>(rows: impl IntoIterator<Item = &'a Row>) -> ReceiverDrops {
        let mut d = ReceiverDrops::default();
        for r in rows {
            d.add(r);
        }
        d
    }

    fn add(&mut self, r: &Row) {
        let n = r.metrics.get(Metric::SinkDrops).unwrap_or(0.0) as u64;
        if n > 0 {
            self.records += 1;
            self.most = self.most.max(n);
        }
    }

    /// What the drops at `level` (`group/label`) say, if there were any: the level's
    /// loss, and a received rate at it, are the endpoint's, not the network's.
    pub(crate) fn finding(&self, level: &str) -> Option<String> {
        (self.records > 0).then(|| {
            format!(
                "the receiver dropped {} datagrams at {level} (the most of its {} load \
                 record(s) with drops; a buffer of datagrams coalesced on receive counts \
                 once): this level's loss is the endpoint's, not the network's",
                self.most, self.records
            )
        })
    }
}

/// What the records' qualifiers say, counted over the run.
fn qualifier_findings(rows: &[Row]) -> Vec<String> {
    let t = Tally::of(rows);
    let mut out = Vec::new();
    if t.clock > 0 {
        out.push(format!(
            "clock fallback in {} record(s) ({}): their times are less precise",
            t.clock,
            t.clock_example.as_deref().unwrap_or_default()
        ));
    }
    if t.stolen_records > 0 {
        let levels: Vec<String> = steal_by_level(rows)
            .iter()
            .map(|(level, s)| format!("{level} ({s:.2} s)"))
            .collect();
        out.push(format!(
            "steal in {} record(s), {:.2} s in all, during {}: the hypervisor ran \
             something else on the measured jobs' CPUs (counted where it is above {} ticks \
             per CPU and {:.0}% of the job's CPU time, the counter's quantisation)",
            t.stolen_records,
            t.stolen_s,
            levels.join(", "),
            STEAL_QUANTUM_TICKS_PER_CPU,
            STEAL_MIN_SHARE * 100.0
        ));
    }
    if t.lost > 0 {
        out.push(format!(
            "probe loss: {} of {} pings ({:.2}%) unanswered; RTTs describe the answered ones",
            t.lost,
            t.sent,
            t.loss_pct()
        ));
    }
    if t.unsent > 0 {
        out.push(format!(
            "{} open-loop ping(s) never sent: the probe fell behind its rate",
            t.unsent
        ));
    }
    if t.clamped > 0 {
        out.push(format!(
            "{} RTT sample(s) above the histogram's ceiling, clamped to it",
            t.clamped
        ));
    }
    if t.partial > 0 {
        out.push(format!(
            "sink reports missing for {} load record(s): no received rate there",
            t.partial
        ));
    }
    if t.gso > 0 {
        out.push(format!(
            "GSO fallback in {} load record(s): plain sends, higher CPU cost per datagram",
            t.gso
        ));
    }
    if t.capped > 0 {
        out.push(format!(
            "socket buffer smaller than asked for in {} record(s) (net.core.wmem_max / \
             rmem_max; run the agents as root): loss there may be the buffer's, not the path's",
            t.capped
        ));
    }
    if t.receiver.records > 0 {
        let mut levels: Vec<(String, Vec<&Row>)> = Vec::new();
        for r in rows {
            let level = format!("{}/{}", r.group, r.label);
            match levels.iter_mut().find(|(l, _)| *l == level) {
                Some((_, rs)) => rs.push(r),
                None => levels.push((level, vec![r])),
            }
        }
        out.extend(
            levels
                .iter()
                .filter_map(|(l, rs)| ReceiverDrops::of(rs.iter().copied()).finding(l)),
        );
    }
    out
}

/// A record's steal, when it stands above the counter's quantisation
/// ([`StealUse::significant`]) for the job's time: its runtime, else the time its
/// result gives, else its step's (which contains the job).
fn steal_of(r: &Row) -> Option<StealUse> {
    let seconds = r
        .metrics
        .get(Metric::RuntimeS)
        .or(r.quality.elapsed_s)
        .unwrap_or(r.step_s);
    r.quality.steal.filter(|s| s.significant(seconds))
}

/// What the pacer skips and send errors of `role`'s measured loads say, worded by
/// what those loads are in `scenario`: the measured tenants' own loads in an
/// isolation matrix, nodes meant to ask twice the link in a throughput staircase,
/// the test tenant's or the neighbors' load elsewhere.
fn load_findings(scenario: Scenario, role: Role, t: &Tally) -> Vec<String> {
    let (whose, short) = match (scenario, role) {
        (Scenario::IsolationMatrix, Role::Test) => (
            "tenant a's load (a measured tenant)",
            "it offered less than its state asks there",
        ),
        (Scenario::IsolationMatrix, _) => (
            "tenant b's load (a measured tenant)",
            "it offered less than its state asks there",
        ),
        (Scenario::ThroughputStaircase, Role::Test) => (
            "the test node's full-rate load",
            "it sent below its full rate (twice the link) there, which may still have \
             filled the link",
        ),
        (Scenario::ThroughputStaircase, _) => (
            "the other nodes' full-rate loads",
            "they sent below their full rate (twice the link) there, which may still \
             have filled the link",
        ),
        (_, Role::Test) => ("the test tenant's load", "it was below its target there"),
        _ => ("the neighbor load", "it was below its target there"),
    };
    let mut out = Vec::new();
    if t.skipped > 0 {
        out.push(format!(
            "the load pacer dropped {} datagram slot(s) after stalls in {whose}: {short}",
            t.skipped
        ));
    }
    if t.errors > 0 {
        out.push(format!("{} send error(s) in {whose}", t.errors));
    }
    out
}

/// The seconds stolen from the measured jobs of each level that had steal, as
/// `group/label`, in order of first appearance.
fn steal_by_level(rows: &[Row]) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for r in rows {
        let Some(s) = steal_of(r) else {
            continue;
        };
        let level = format!("{}/{}", r.group, r.label);
        match out.iter_mut().find(|(l, _)| *l == level) {
            Some((_, total)) => *total += s.seconds(),
            None => out.push((level, s.seconds())),
        }
    }
    out
}

/// A level at which a tenant's CPUs ran more than [`FREQ_DROP`] slower than at its
/// fastest level (medians of the records' effective frequency).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FreqDrop {
    /// The tenant.
    pub tenant: String,
    /// The level's group and label.
    pub group: StepGroup,
    pub label: String,
    /// The level's median effective frequency, MHz.
    pub mhz: f64,
    /// The tenant's fastest level's median, MHz.
    pub fastest_mhz: f64,
    /// Where the frequency was read (`aperf-mperf`, `scaling-cur-freq`, `cpuinfo`).
    pub source: String,
}

impl FreqDrop {
    /// How far below the fastest level, percent.
    fn pct(&self) -> f64 {
        (self.fastest_mhz - self.mhz) / self.fastest_mhz * 100.0
    }
}

/// The levels whose records' median effective frequency is more than [`FREQ_DROP`]
/// below the same tenant's highest level median, in order of first appearance.
pub(crate) fn freq_drops(rows: &[Row]) -> Vec<FreqDrop> {
    // (tenant, group, label, source) -> the records' MHz
    let mut levels: Vec<(&str, StepGroup, &str, &str, Vec<f64>)> = Vec::new();
    for r in rows {
        let Some(f) = r
            .quality
            .freq
            .as_ref()
            .filter(|f| f.mhz.is_finite() && f.mhz > 0.0)
        else {
            continue;
        };
        let key = (r.tenant.as_str(), r.group, r.label.as_str());
        match levels.iter_mut().find(|l| (l.0, l.1, l.2) == key) {
            Some(l) => l.4.push(f.mhz),
            None => levels.push((key.0, key.1, key.2, &f.source, vec![f.mhz])),
        }
    }
    let medians: Vec<(&str, StepGroup, &str, &str, f64)> = levels
        .into_iter()
        .map(|(t, g, l, s, mhz)| (t, g, l, s, nnb_format::stats::median(&mhz)))
        .collect();
    medians
        .iter()
        .filter_map(|&(tenant, group, label, source, mhz)| {
            let fastest = medians
                .iter()
                .filter(|m| m.0 == tenant)
                .map(|m| m.4)
                .fold(f64::MIN, f64::max);
            (mhz < (1.0 - FREQ_DROP) * fastest).then(|| FreqDrop {
                tenant: tenant.to_string(),
                group,
                label: label.to_string(),
                mhz,
                fastest_mhz: fastest,
                source: source.to_string(),
            })
        })
        .collect()
}

/// The flag of a level of `group` labelled `label` among `drops`, for its table row.
pub(crate) fn freq_flag(drops: &[FreqDrop], group: StepGroup, label: &str) -> Option<String> {
    drops
        .iter()
        .find(|d| d.group == group && d.label == label)
        .map(|d| format!("freq -{:.1}%", d.pct()))
}

/// The verdict's line on frequency drops, if any.
fn freq_finding(drops: &[FreqDrop]) -> Option<String> {
    let each: Vec<String> = drops
        .iter()
        .map(|d| {
            format!(
                "{} at {}/{}: {:.0} of {:.0} MHz (-{:.1}%, {})",
                d.tenant,
                d.group,
                d.label,
                d.mhz,
                d.fastest_mhz,
                d.pct(),
                d.source
            )
        })
        .collect();
    (!each.is_empty()).then(|| {
        format!(
            "effective CPU frequency more than {:.0}% below the tenant's fastest level in {} \
             level(s): {}: those CPUs ran slower, whatever the neighbors did",
            FREQ_DROP * 100.0,
            each.len(),
            each.join("; ")
        )
    })
}

/// What the neighbors' and the endpoint's jobs say: loads short of their target
/// (background loads from their records, a load-steps level from the latency table's
/// achieved load), background jobs that failed, and the endpoint's send failures and
/// dropped datagrams.
fn background_findings(run: &Run, a: &Analyses) -> Vec<String> {
    let mut out = Vec::new();
    let mbit = DisplayUnit::BITS_PER_SECOND.table();
    let short: Vec<(String, f64, f64)> = run
        .background
        .iter()
        .filter_map(|b| {
            let target = b.target_bps.filter(|t| *t > 0.0)?;
            let got = b.achieved.rate_bps.or(b.achieved.sent_bps)?;
            let at = b.steps.first().map_or("", String::as_str);
            (got < LOAD_SHORTFALL * target).then(|| (format!("{} at {at}", b.tenant), got, target))
        })
        .chain(a.latency.iter().flat_map(|l| &l.levels).filter_map(|l| {
            let got = l.achieved_bps?;
            (l.load_bps > 0.0 && got < LOAD_SHORTFALL * l.load_bps)
                .then(|| (format!("the neighbors at {}", l.label), got, l.load_bps))
        }))
        .collect();
    if let Some((who, got, target)) = short
        .iter()
        .min_by(|x, y| (x.1 / x.2).total_cmp(&(y.1 / y.2)))
    {
        out.push(format!(
            "neighbor load below {:.0}% of its target in {} case(s), lowest {who}: \
             {:.1} of {:.1} {} ({:.0}%): those levels loaded the host less than they say",
            LOAD_SHORTFALL * 100.0,
            short.len(),
            mbit.value(*got),
            mbit.value(*target),
            mbit.symbol(),
            got / target * 100.0
        ));
    }
    let failed: Vec<_> = run
        .background
        .iter()
        .filter(|b| b.status == SampleStatus::Failed)
        .collect();
    if let Some(first) = failed.first() {
        out.push(format!(
            "{} background job(s) failed or could not be stopped (e.g. {} {} on {}: {}): \
             what they did is unknown or cut short",
            failed.len(),
            first.role,
            first.job,
            first.tenant,
            first.error.as_deref().unwrap_or("no reason given")
        ));
    }
    let serve = run
        .background
        .iter()
        .filter(|b| b.job == BackgroundJob::Serve);
    let (send_failures, garbage) = serve.fold((0, 0), |(f, g), b| {
        (
            f + b.achieved.send_failures.unwrap_or(0),
            g + b.achieved.garbage.unwrap_or(0),
        )
    });
    if send_failures > 0 {
        out.push(format!(
            "the reflector could not send {send_failures} pong(s): the probe counted them lost"
        ));
    }
    if garbage > 0 {
        out.push(format!(
            "the endpoint dropped {garbage} datagram(s) that were not nnb's: something else \
             sent to its ports"
        ));
    }
    out
}

/// The verdict as a table: one finding per row, or one row saying the run was quiet.
pub fn verdict_table(findings: &[String]) -> Table {
    let rows = if findings.is_empty() {
        vec![vec![Cell::text(
            "quiet: no noise above 5% CV, no loss, no clock fallback, no missing reports",
        )]]
    } else {
        findings.iter().map(|f| vec![Cell::text(f)]).collect()
    };
    Table {
        name: "verdict".to_string(),
        title: "Run verdict".to_string(),
        columns: vec!["finding".to_string()],
        rows,
        notes: Vec::new(),
    }
}
