//! Burst credits (review item 42; thesis §6.1.2 l.437, l.454): network and CPU
//! credits of many EC2 types run out after 5 to 60 minutes, so a long staircase's
//! late levels may measure an instance throttled to its baseline, not its
//! neighbors. Per level and tenant this table shows the three signs of it:
//!
//! - the ENA allowance counters that rose while the level's jobs ran (AWS queued or
//!   dropped the instance's packets: the direct evidence, read by the agent);
//! - for a size with a burst bandwidth (the catalog's `burst_window_s`), a network
//!   load measured longer after its tenant's first measured record than the
//!   shortest documented burst (5 minutes): its credits may be spent. The clock is
//!   the tenant's `uptime_s` since that first record, not since boot: an instance
//!   idle below its baseline while it booted and installed refills its credits;
//! - for a burstable (T) type, the estimated CPU credit balance (the catalog's
//!   credit table and the machine's busy CPU-seconds, `cpu_busy_s`, from boot with
//!   no launch credits, so it errs low) below [`LOW_CREDIT_SHARE`] of the largest:
//!   the instance runs at its baseline once it is spent.
//!
//! Nothing here reads CloudWatch: the balance is an estimate, named so.

use nnb_catalog::{BurstWindow, Catalog, CpuCredits};
use nnb_format::quality::EnaAllowances;
use nnb_format::{JobKind, Role, StepGroup};

use crate::read::Run;
use crate::table::{Cell, Table};

use super::{by_group, measured, AnalysisError, Row};

/// An estimated CPU credit balance below this share of the type's largest balance
/// counts as low: the instance may be at (or near) its baseline.
pub const LOW_CREDIT_SHARE: f64 = 0.1;

/// The credit signs of a run's levels.
#[derive(Debug, Clone, PartialEq)]
pub struct Credits {
    /// The tenants' instance type, when the run names one.
    pub instance_type: Option<String>,
    /// Its network burst window (a size with a burst bandwidth).
    pub window: Option<BurstWindow>,
    /// Its CPU credits (a burstable type).
    pub cpu: Option<CpuCredits>,
    /// One row per level and tenant, in plan order.
    pub levels: Vec<CreditLevel>,
}

/// The credit signs of one tenant at one level.
#[derive(Debug, Clone, PartialEq)]
pub struct CreditLevel {
    /// The step group.
    pub group: StepGroup,
    /// The level's label.
    pub label: String,
    /// The tenant.
    pub tenant: String,
    /// Whether the tenant's records here are network loads (the burst window
    /// concerns them only).
    pub load: bool,
    /// Seconds from the tenant's first measured record to its latest one here (by
    /// its `uptime_s`); `None` without uptimes.
    pub since_first_s: Option<f64>,
    /// How much each ENA allowance counter rose over the level's records; `None`
    /// when none of them read the ENA.
    pub ena_rose: Option<EnaAllowances>,
    /// The lowest estimated CPU credit balance at the level's records; `None` for
    /// a type without CPU credits or without the readings.
    pub cpu_credits_est: Option<f64>,
}

impl CreditLevel {
    /// Whether an allowance counter rose here.
    pub fn allowance_exceeded(&self) -> bool {
        self.ena_rose.is_some_and(|e| e.any())
    }

    /// Whether a network load here ran past the shortest burst window of `window`.
    pub fn past_window(&self, window: Option<BurstWindow>) -> bool {
        match (window, self.since_first_s) {
            (Some(w), Some(s)) => self.load && s > w.shortest_s,
            _ => false,
        }
    }

    /// Whether the estimated CPU credit balance ran low here.
    pub fn credits_low(&self, cpu: Option<&CpuCredits>) -> bool {
        match (cpu, self.cpu_credits_est) {
            (Some(c), Some(b)) => b < LOW_CREDIT_SHARE * c.max_balance,
            _ => false,
        }
    }
}

/// The credit signs of `run`'s measured records (test and neighbor tenants);
/// `None` when there is nothing to show: no record read the ENA and the run's
/// instance type (if any) has neither a burst window nor CPU credits.
pub fn credits(run: &Run) -> Result<Option<Credits>, AnalysisError> {
    let instance_type = run.instance_type();
    let catalog = Catalog::builtin();
    let named = instance_type.as_deref();
    let window = named
        .and_then(|t| catalog.size(t))
        .and_then(|(_, s)| s.burst_window);
    let cpu = named.and_then(|t| catalog.cpu_credits(t)).cloned();
    let mut rows = measured(run, Role::Test)?;
    rows.extend(measured(run, Role::Neighbor)?);
    if window.is_none() && cpu.is_none() && rows.iter().all(|r| r.quality.ena.is_none()) {
        return Ok(None);
    }
    let clocks = TenantClocks::of(&rows, cpu.as_ref());
    let mut levels = Vec::new();
    for (group, group_levels) in by_group(&rows) {
        for level in group_levels {
            let mut tenants: Vec<&str> = Vec::new();
            for r in &level.rows {
                if !tenants.contains(&r.tenant.as_str()) {
                    tenants.push(&r.tenant);
                }
            }
            for tenant in tenants {
                let mine: Vec<&Row> = level
                    .rows
                    .iter()
                    .copied()
                    .filter(|r| r.tenant == tenant)
                    .collect();
                levels.push(clocks.level(group, &level.label, tenant, &mine));
            }
        }
    }
    Ok(Some(Credits {
        instance_type,
        window,
        cpu,
        levels,
    }))
}

/// One tenant's records walked in plan order.
struct Walk {
    /// The uptime of its first record (since the last reboot).
    first: f64,
    /// The uptime of its latest record.
    last: f64,
    /// (uptime, busy CPU-seconds, estimated balance) at its latest estimate.
    credit: Option<(f64, f64, f64)>,
}

/// What each record's tenant had behind it when it ran: the seconds since the
/// tenant's first record and the estimated credit balance, by record (in the order
/// of the rows given).
struct TenantClocks<'a> {
    /// (row, seconds since its tenant's first record, estimated balance).
    by_row: Vec<(&'a Row, Option<f64>, Option<f64>)>,
}

impl<'a> TenantClocks<'a> {
    /// Walks each tenant's records in plan order: the clock restarts where its
    /// uptime went back (a new instance, a resumed run on a fresh fleet), and the
    /// balance is carried from record to record ([`CpuCredits::balance_after`]),
    /// from zero at boot.
    fn of(rows: &'a [Row], cpu: Option<&CpuCredits>) -> TenantClocks<'a> {
        let mut walks: Vec<(&str, Walk)> = Vec::new();
        let mut by_row = Vec::with_capacity(rows.len());
        for r in rows {
            let Some(up) = r.quality.uptime_s else {
                by_row.push((r, None, None));
                continue;
            };
            let i = match walks.iter().position(|(t, _)| *t == r.tenant) {
                Some(i) => i,
                None => {
                    let walk = Walk {
                        first: up,
                        last: up,
                        credit: None,
                    };
                    walks.push((&r.tenant, walk));
                    walks.len() - 1
                }
            };
            let w = &mut walks[i].1;
            if up < w.last {
                // Rebooted or replaced: a new instance's clock and credits.
                w.first = up;
                w.credit = None;
            }
            w.last = up;
            let estimate = cpu.zip(r.quality.cpu_busy_s).map(|(c, busy)| {
                let (from_up, from_busy, from) = w.credit.unwrap_or((0.0, 0.0, 0.0));
                let balance = c.balance_after(from, up - from_up, busy - from_busy);
                w.credit = Some((up, busy, balance));
                balance
            });
            by_row.push((r, Some(up - w.first), estimate));
        }
        TenantClocks { by_row }
    }

    /// The row of `tenant` at one level from its records there.
    fn level(&self, group: StepGroup, label: &str, tenant: &str, rows: &[&Row]) -> CreditLevel {
        let mine = || {
            self.by_row
                .iter()
                .filter(|(r, _, _)| rows.iter().any(|x| std::ptr::eq(*x, *r)))
        };
        let since_first_s = mine().filter_map(|(_, s, _)| *s).reduce(f64::max);
        let cpu_credits_est = mine().filter_map(|(_, _, b)| *b).reduce(f64::min);
        let ena_rose = rows
            .iter()
            .filter_map(|r| r.quality.ena.as_ref().map(|e| e.rose()))
            .reduce(|a, b| a.plus(&b));
        CreditLevel {
            group,
            label: label.to_string(),
            tenant: tenant.to_string(),
            load: rows.iter().any(|r| r.job == Some(JobKind::Load)),
            since_first_s,
            ena_rose,
            cpu_credits_est,
        }
    }
}

impl Credits {
    /// The levels flagged, each once, as `group/label` in plan order, by `flagged`.
    fn flagged(&self, flagged: impl Fn(&CreditLevel) -> bool) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for l in self.levels.iter().filter(|l| flagged(l)) {
            let name = format!("{}/{}", l.group, l.label);
            if !out.contains(&name) {
                out.push(name);
            }
        }
        out
    }

    /// A row's flags, short.
    fn flags(&self, l: &CreditLevel) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(rose) = l.ena_rose {
            out.extend(
                rose.named()
                    .into_iter()
                    .filter(|(_, v)| *v > 0)
                    .map(|(name, v)| format!("{name} +{v}")),
            );
        }
        if l.past_window(self.window) {
            out.push("past the burst window".to_string());
        }
        if l.credits_low(self.cpu.as_ref()) {
            out.push("CPU credits low (est.)".to_string());
        }
        out
    }

    /// The `credits` table: one row per level and tenant.
    pub fn table(&self) -> Table {
        let rows = self
            .levels
            .iter()
            .map(|l| {
                let rose = l.ena_rose.map_or(Cell::Empty, |e| {
                    let total: u64 = e.named().iter().map(|(_, v)| v).sum();
                    Cell::Int(i64::try_from(total).unwrap_or(i64::MAX))
                });
                vec![
                    Cell::text(l.group.to_string()),
                    Cell::text(l.label.clone()),
                    Cell::text(l.tenant.clone()),
                    Cell::opt(l.since_first_s, 0),
                    rose,
                    Cell::opt(l.cpu_credits_est, 1),
                    Cell::text(self.flags(l).join(", ")),
                ]
            })
            .collect();
        let mut notes = vec![
            "since first s: seconds from the tenant's first measured record to its latest \
             one at the level (by the agent's uptime_s)"
                .to_string(),
            "allowance exceeded: packets the ENA's allowance counters (bw_in, bw_out, pps, \
             conntrack, linklocal _allowance_exceeded) counted while the level's jobs ran, \
             summed; '-' where the agent read no ENA (not EC2, no ethtool)"
                .to_string(),
        ];
        let name = self.instance_type.as_deref().unwrap_or("the instance type");
        match self.window {
            Some(w) => notes.push(format!(
                "{name} bursts above its baseline bandwidth on network I/O credits for \
                 {:.0} to {:.0} min (AWS; nnb-catalog): a network load measured more than \
                 {:.0} min after its tenant's first record is flagged 'past the burst window'",
                w.shortest_s / 60.0,
                w.longest_s / 60.0,
                w.shortest_s / 60.0
            )),
            None => notes.push(format!("{name}: no network burst window in the catalog")),
        }
        match &self.cpu {
            Some(c) => notes.push(format!(
                "CPU credits est.: an ESTIMATE of {name}'s CPU credit balance (CloudWatch's \
                 CPUCreditBalance is not read): {} credits/h earned, one spent per busy \
                 CPU-minute (the agent's cpu_busy_s), from 0 at boot, at most {}; 'low' \
                 below {:.0}% of that",
                c.credits_per_hour,
                c.max_balance,
                LOW_CREDIT_SHARE * 100.0
            )),
            None => notes.push(format!("{name}: no CPU credits (not a burstable type)")),
        }
        Table {
            name: "credits".to_string(),
            title: "Burst credits per level".to_string(),
            columns: [
                "group",
                "level",
                "tenant",
                "since first s",
                "allowance exceeded",
                "CPU credits est.",
                "flags",
            ]
            .map(String::from)
            .to_vec(),
            rows,
            notes,
        }
    }
}

/// The verdict's lines on credits (`None` = nothing to say): levels where an ENA
/// allowance counter rose, where a network load ran past the shortest burst window,
/// where the estimated CPU credits ran low.
pub fn credit_findings(c: Option<&Credits>) -> Vec<String> {
    let Some(c) = c else {
        return Vec::new();
    };
    let name = c.instance_type.as_deref().unwrap_or("the instance");
    let mut out = Vec::new();
    let exceeded = c.flagged(CreditLevel::allowance_exceeded);
    if !exceeded.is_empty() {
        out.push(format!(
            "ENA allowance exceeded at {}: AWS queued or dropped the instance's packets \
             there (see the credits table), so a lower rate or more loss at those levels \
             is the instance's allowance, not (only) the neighbors",
            exceeded.join(", ")
        ));
    }
    let past = c.flagged(|l| l.past_window(c.window));
    if let (Some(first), Some(w)) = (past.first(), c.window) {
        out.push(format!(
            "{} level(s) from {first} measured a network load more than {:.0} min after its \
             tenant's first record, past the shortest burst window of {name} ({:.0}-{:.0} \
             min, AWS): its network credits may be spent, so it may run on its baseline \
             bandwidth there; throttling can pass for contention{}",
            past.len(),
            w.shortest_s / 60.0,
            w.shortest_s / 60.0,
            w.longest_s / 60.0,
            if c.levels.iter().any(|l| l.ena_rose.is_some()) {
                " (the ENA counters say whether it was)"
            } else {
                " (no ENA counters were read to tell)"
            }
        ));
    }
    let low = c.flagged(|l| l.credits_low(c.cpu.as_ref()));
    if !low.is_empty() {
        out.push(format!(
            "estimated CPU credits of {name} below {:.0}% of its largest balance at {}: \
             the instance may run at its baseline CPU there (an estimate from its busy \
             CPU time, from zero at boot)",
            LOW_CREDIT_SHARE * 100.0,
            low.join(", ")
        ));
    }
    out
}
