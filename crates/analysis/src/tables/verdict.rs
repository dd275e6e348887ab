//! The run's verdict, like hyperfine's warnings: one line per thing that qualifies the
//! run's numbers (noise, a baseline that moved, loss, a clock fallback, missing sink
//! reports, GSO fallbacks, pacer skips, steal, a neighbor load short of its target, a
//! background job that failed, pongs the reflector could not send, failed steps), or
//! one line saying the run was quiet.

use nnb_format::Role;
use nnb_format::{BackgroundJob, SampleStatus};

use crate::read::{Run, Scenario};
use crate::table::{Cell, Table};

use super::{measured, Analyses, AnalysisError, Row};

/// A coefficient of variation above this (a fraction) marks a level as noisy.
pub const NOISY_CV: f64 = 0.05;
/// Busy and idle baselines (the same setup: the test node alone) further apart than
/// this (percent) mean the machine changed between the passes.
pub const BASELINE_DRIFT_PCT: f64 = 5.0;
/// A neighbor load that achieved less than this fraction of its target did not load
/// the host as the level says.
pub const LOAD_SHORTFALL: f64 = 0.9;

/// The findings about `run`, given its analyses.
pub fn findings(run: &Run, a: &Analyses) -> Result<Vec<String>, AnalysisError> {
    let mut out = Vec::new();
    if let Some(d) = &a.degradation {
        if run.manifest.scenario == Scenario::NeighborStaircase {
            let base = |name: &str| {
                d.groups
                    .iter()
                    .find(|g| g.group == name && !g.reference_missing)
                    .and_then(|g| g.levels.first())
                    .map(|l| l.mean)
            };
            if let (Some(busy), Some(idle)) = (base("busy"), base("idle")) {
                let pct = (busy - idle).abs() / busy.min(idle) * 100.0;
                if pct > BASELINE_DRIFT_PCT {
                    out.push(format!(
                        "the busy and idle baselines differ by {pct:.0}%: the test node alone \
                         measured differently in the two passes"
                    ));
                }
            }
        }
        for g in &d.groups {
            for l in &g.levels {
                let cv = l.cv();
                if cv > NOISY_CV {
                    out.push(format!(
                        "CV {:.1}% at {}/{}: the machine was noisy",
                        cv * 100.0,
                        g.group,
                        l.label
                    ));
                }
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
    let mut rows = measured(run, Role::Test)?;
    rows.extend(measured(run, Role::Neighbor)?);
    out.extend(qualifier_findings(&rows));
    out.extend(background_findings(run, a));
    if a.failed > 0 {
        out.push(format!(
            "{} step(s) failed after their retries and are left out",
            a.failed
        ));
    }
    Ok(out)
}

/// The qualifiers of one level's records, short, for the level's row of a table:
/// the same findings as the verdict's, where they happened.
pub(crate) fn level_flags(rows: &[&Row]) -> Vec<String> {
    let mut out = Vec::new();
    let (sent, lost) = rows
        .iter()
        .filter_map(|r| r.quality.counts)
        .fold((0u64, 0u64), |(s, l), c| (s + c.sent, l + c.lost));
    if lost > 0 {
        out.push(format!(
            "loss {:.2}%",
            lost as f64 / sent.max(1) as f64 * 100.0
        ));
    }
    let clamped: u64 = rows.iter().filter_map(|r| r.quality.clamped).sum();
    if clamped > 0 {
        out.push(format!("{clamped} clamped"));
    }
    if rows.iter().any(|r| r.quality.clock_warning().is_some()) {
        out.push("clock fallback".to_string());
    }
    let stolen: f64 = rows
        .iter()
        .filter_map(|r| r.quality.steal)
        .map(|s| s.seconds())
        .sum();
    if stolen > 0.0 {
        out.push(format!("steal {stolen:.2} s"));
    }
    let loads: Vec<&&Row> = rows.iter().filter(|r| r.quality.sent.is_some()).collect();
    if loads.iter().any(|r| !r.quality.sink_complete()) {
        out.push("sink gaps".to_string());
    }
    if loads.iter().any(|r| r.quality.gso_fallback()) {
        out.push("GSO fallback".to_string());
    }
    let (skipped, errors) = loads
        .iter()
        .filter_map(|r| r.quality.sent)
        .fold((0u64, 0u64), |(s, e), x| (s + x.skipped, e + x.send_errors));
    if skipped > 0 {
        out.push(format!("{skipped} skipped"));
    }
    if errors > 0 {
        out.push(format!("{errors} send errors"));
    }
    if rows.iter().any(|r| r.quality.buffer_capped()) {
        out.push("buffer capped".to_string());
    }
    out
}

/// What the records' qualifiers say, counted over the run.
fn qualifier_findings(rows: &[Row]) -> Vec<String> {
    let mut out = Vec::new();
    let count = |f: &dyn Fn(&Row) -> bool| rows.iter().filter(|r| f(r)).count();
    let clock = count(&|r| r.quality.clock_warning().is_some());
    if clock > 0 {
        let example = rows
            .iter()
            .find_map(|r| r.quality.clock_warning())
            .unwrap_or_default();
        out.push(format!(
            "clock fallback in {clock} record(s) ({example}): their times are less precise"
        ));
    }
    let stolen: Vec<f64> = rows
        .iter()
        .filter_map(|r| r.quality.steal)
        .filter(|s| s.ticks > 0)
        .map(|s| s.seconds())
        .collect();
    if !stolen.is_empty() {
        out.push(format!(
            "steal in {} record(s), {:.2} s in all: the hypervisor ran something else on \
             the test CPUs",
            stolen.len(),
            stolen.iter().sum::<f64>()
        ));
    }
    let (sent, lost) = rows
        .iter()
        .filter_map(|r| r.quality.counts)
        .fold((0u64, 0u64), |(s, l), c| (s + c.sent, l + c.lost));
    if lost > 0 {
        out.push(format!(
            "probe loss: {lost} of {sent} pings ({:.2}%) unanswered; RTTs describe the \
             answered ones",
            lost as f64 / sent.max(1) as f64 * 100.0
        ));
    }
    // A load's result has its sender's totals.
    let loads: Vec<&Row> = rows.iter().filter(|r| r.quality.sent.is_some()).collect();
    let partial = loads.iter().filter(|r| !r.quality.sink_complete()).count();
    if partial > 0 {
        out.push(format!(
            "sink reports missing for {partial} load record(s): no received rate there"
        ));
    }
    let gso = loads.iter().filter(|r| r.quality.gso_fallback()).count();
    if gso > 0 {
        out.push(format!(
            "GSO fallback in {gso} load record(s): plain sends, higher CPU cost per datagram"
        ));
    }
    let (skipped, errors) = loads
        .iter()
        .filter_map(|r| r.quality.sent)
        .fold((0u64, 0u64), |(s, e), x| (s + x.skipped, e + x.send_errors));
    if skipped > 0 {
        out.push(format!(
            "the load pacer dropped {skipped} datagram slot(s) after stalls: the neighbor load \
             was below its target there"
        ));
    }
    if errors > 0 {
        out.push(format!("{errors} send error(s) in the neighbor load"));
    }
    let capped = rows.iter().filter(|r| r.quality.buffer_capped()).count();
    if capped > 0 {
        out.push(format!(
            "socket buffer smaller than asked for in {capped} record(s) (net.core.wmem_max / \
             rmem_max; run the agents as root): loss there may be the buffer's, not the path's"
        ));
    }
    out
}

/// What the neighbors' and the endpoint's jobs say: loads short of their target
/// (background loads from their records, a load-steps level from the latency table's
/// achieved load), background jobs that failed, and the endpoint's send failures and
/// dropped datagrams.
fn background_findings(run: &Run, a: &Analyses) -> Vec<String> {
    let mut out = Vec::new();
    let mbit = |bps: f64| bps / 1e6;
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
             {:.1} of {:.1} Mbit/s ({:.0}%): those levels loaded the host less than they say",
            LOAD_SHORTFALL * 100.0,
            short.len(),
            mbit(*got),
            mbit(*target),
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
        .filter(|b| BackgroundJob::from_name(&b.job) == Some(BackgroundJob::Serve));
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
