//! Tenant b's own degradation in each pair of the isolation matrix, and Krebs'
//! fairness (Volpert et al., seed 004 §2.4, Definition 2.2, clause 2: "Tenants
//! exceeding their quotas more should suffer higher performance degradation than
//! tenants exceeding their quota less").
//!
//! A tenant's **degradation** in a pair is its loss against itself alone in the
//! same state: `loss = (alone - beside) / alone`, I_plr (eq. 3) with its sign, so a
//! tenant that did worse beside the other has a positive loss and a gain is a
//! negative one. Tenant a's `alone` is its baseline (Table 1 ids 1-4); tenant b's is
//! b alone in its state (levels 17-20, recorded from version 11 on; older runs have
//! no b baselines and no fairness table).
//!
//! How far a tenant **exceeds its quota** is its state, a demand against its own
//! grant: undercommitted (half of it) < saturated (all of it) < overcommitted
//! (twice) < unrestricted (far more, the grant lifted). In a pair of different
//! states the tenant in the later one is the one more over its grant.
//!
//! The **margin** of such a pair is the loss of the tenant more over its grant less
//! the other's, in percentage points. Fairness **holds** in the pair when the margin
//! is at least `-FAIRNESS_TOLERANCE_PP` (the tenant exceeding more suffered at
//! least as much, within the tolerance), and **breaks** when it is below: the
//! tenant exceeding its quota less suffered more. A pair of equal states orders
//! neither tenant (clause 2 says nothing of it): it is shown as `equal` and not
//! counted. Clause 1 (an abiding tenant does not suffer) is the isolation table's
//! subject: a's I_plr where a is undercommitted or saturated.

use nnb_format::TenantState;

use crate::table::{Cell, Table};

use super::{Isolation, IsolationPair};

/// Differences of loss within this many percentage points count as equal: two
/// tenants both untouched (losses of ±0.5%, the repetitions' noise on a quiet
/// host) neither keep nor break fairness by chance.
pub const FAIRNESS_TOLERANCE_PP: f64 = 1.0;

/// Which tenant of a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairTenant {
    /// Tenant a (test).
    A,
    /// Tenant b (neighbor).
    B,
}

impl PairTenant {
    /// `a` or `b`.
    pub const fn name(self) -> &'static str {
        match self {
            PairTenant::A => "a",
            PairTenant::B => "b",
        }
    }
}

/// Whether clause 2 of Krebs' fairness held in a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The tenant more over its grant lost at least as much (within the tolerance).
    Holds,
    /// The tenant less over its grant lost more, beyond the tolerance.
    Breaks,
    /// Both tenants in the same state: clause 2 orders neither.
    Equal,
}

impl Verdict {
    /// `holds`, `breaks` or `equal`.
    pub const fn name(self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::Breaks => "breaks",
            Verdict::Equal => "equal",
        }
    }
}

/// One pair's degradations and verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct FairPair {
    /// Table 1 id (5-16).
    pub id: u32,
    /// Short name as in the paper, e.g. `a_s b_o`.
    pub shortname: String,
    /// a's state.
    pub state_a: TenantState,
    /// b's state.
    pub state_b: TenantState,
    /// a's loss against a alone, a fraction (positive: worse beside b).
    pub a_loss: f64,
    /// b alone in its state (mean, b's metric).
    pub b_alone: f64,
    /// b beside a (mean, b's metric).
    pub b_beside: f64,
    /// b's loss against b alone, a fraction.
    pub b_loss: f64,
    /// The tenant more over its grant; `None` when the states are equal.
    pub over: Option<PairTenant>,
    /// Loss of the tenant more over its grant less the other's, percentage points;
    /// `None` when the states are equal.
    pub margin_pp: Option<f64>,
    /// Clause 2's verdict.
    pub verdict: Verdict,
}

/// b's degradation and Krebs' fairness over the pairs with both tenants'
/// degradation known.
#[derive(Debug, Clone, PartialEq)]
pub struct Fairness {
    /// The pairs, in the isolation table's order.
    pub pairs: Vec<FairPair>,
}

/// How far a state is over the tenant's grant, in order.
fn excess(s: TenantState) -> usize {
    TenantState::ALL
        .iter()
        .position(|x| *x == s)
        .unwrap_or_default()
}

impl FairPair {
    /// The pair's degradations and verdict; `None` without b's baseline or b's
    /// figure beside a.
    fn of(p: &IsolationPair) -> Option<FairPair> {
        let b_alone = p.b_alone?;
        let (b_beside, _) = p.b?;
        let b_loss = -p.b_change()?;
        let a_loss = -p.change();
        let (over, margin) = match excess(p.state_a).cmp(&excess(p.state_b)) {
            std::cmp::Ordering::Equal => (None, None),
            std::cmp::Ordering::Greater => (Some(PairTenant::A), Some(a_loss - b_loss)),
            std::cmp::Ordering::Less => (Some(PairTenant::B), Some(b_loss - a_loss)),
        };
        let margin_pp = margin.map(|m| m * 100.0);
        let verdict = match margin_pp {
            None => Verdict::Equal,
            Some(m) if m >= -FAIRNESS_TOLERANCE_PP => Verdict::Holds,
            Some(_) => Verdict::Breaks,
        };
        Some(FairPair {
            id: p.id,
            shortname: p.shortname.clone(),
            state_a: p.state_a,
            state_b: p.state_b,
            a_loss,
            b_alone,
            b_beside,
            b_loss,
            over,
            margin_pp,
            verdict,
        })
    }
}

impl Fairness {
    /// b's degradation and fairness of `iso`'s pairs; `None` when no pair has b's
    /// baseline (a run before version 11).
    pub fn of(iso: &Isolation) -> Option<Fairness> {
        let pairs: Vec<FairPair> = iso.pairs.iter().filter_map(FairPair::of).collect();
        (!pairs.is_empty()).then_some(Fairness { pairs })
    }

    /// The pairs where clause 2 holds, and those where it breaks.
    pub fn counts(&self) -> (usize, usize) {
        let n = |v: Verdict| self.pairs.iter().filter(|p| p.verdict == v).count();
        (n(Verdict::Holds), n(Verdict::Breaks))
    }

    /// The summary line: in how many pairs of unequal states fairness holds, and
    /// the pairs where it breaks.
    pub fn summary(&self) -> String {
        let (holds, breaks) = self.counts();
        let ordered = holds + breaks;
        let broken: Vec<&str> = self
            .pairs
            .iter()
            .filter(|p| p.verdict == Verdict::Breaks)
            .map(|p| p.shortname.as_str())
            .collect();
        match broken.as_slice() {
            [] => format!(
                "fairness (Krebs, Def. 2.2 (2)) holds in all {ordered} pair(s) of unequal states"
            ),
            _ => format!(
                "fairness (Krebs, Def. 2.2 (2)) holds in {holds} of {ordered} pair(s) of unequal \
                 states and breaks in {breaks}: {}",
                broken.join(", ")
            ),
        }
    }

    /// One row per pair: id, shortname, a's loss, b alone, b beside a, b's loss,
    /// the tenant more over its grant, the margin and the verdict; b's figures in
    /// `iso`'s units (b's metric is the same resource's as a's).
    pub fn table(&self, iso: &Isolation) -> Table {
        let (unit, d) = iso.shown();
        let rows = self
            .pairs
            .iter()
            .map(|p| {
                vec![
                    Cell::Int(i64::from(p.id)),
                    Cell::text(&p.shortname),
                    Cell::num(p.a_loss * 100.0, 2),
                    Cell::num(unit.value(p.b_alone), d),
                    Cell::num(unit.value(p.b_beside), d),
                    Cell::num(p.b_loss * 100.0, 2),
                    p.over.map_or(Cell::Empty, |t| Cell::text(t.name())),
                    p.margin_pp.map_or(Cell::Empty, |m| Cell::num(m, 2)),
                    Cell::text(p.verdict.name()),
                ]
            })
            .collect();
        Table {
            name: "fairness".to_string(),
            title: "Fairness: each tenant's degradation in each pair (Krebs)".to_string(),
            columns: vec![
                "id".to_string(),
                "shortname".to_string(),
                "a loss %".to_string(),
                unit.title("b"),
                unit.title("b'"),
                "b loss %".to_string(),
                "more over".to_string(),
                "margin pp".to_string(),
                "fairness".to_string(),
            ],
            rows,
            notes: vec![
                "loss = (alone - beside) / alone: a against a alone in its state (ids 1-4), b \
                 against b alone in its state (ids 17-20); positive = worse beside the other"
                    .to_string(),
                "more over: the tenant whose state asks more of its grant (u < s < o < f); \
                 margin = its loss less the other's, in percentage points"
                    .to_string(),
                format!(
                    "Krebs' fairness (Volpert et al. Def. 2.2 (2)): a tenant exceeding its quota \
                     more should suffer more; holds: margin >= -{FAIRNESS_TOLERANCE_PP} pp, \
                     breaks: below; equal: both in the same state (not ordered)"
                ),
                self.summary(),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use nnb_format::{MatrixLevel, Metric, Role};
    use serde_json::{json, Value};
    use TenantState::*;

    use super::*;
    use crate::read::{read_run, Run};
    use crate::tables::PmaxSource;

    fn baseline(id: u32, state: TenantState, mean: f64) -> crate::tables::IsolationBaseline {
        crate::tables::IsolationBaseline {
            id,
            state,
            mean,
            sd: 0.0,
            n: 1,
        }
    }

    fn pair(
        id: u32,
        a: TenantState,
        b: TenantState,
        p_a: f64,
        p_b: f64,
        b_use: f64,
    ) -> IsolationPair {
        IsolationPair {
            id,
            shortname: format!("a_{} b_{}", a.letter(), b.letter()),
            state_a: a,
            state_b: b,
            p_a,
            p_b,
            i_plr: (p_a - p_b).abs() / p_a,
            i_ulr: (p_a - p_b).abs() / 200.0,
            n: 1,
            p_b_sd: 0.0,
            b: Some((b_use, 0.0)),
            b_alone: None,
        }
    }

    /// A CPU matrix on 2 CPUs (p_max 200%), both tenants granted 0.5 CPU: alone, a
    /// and b each use 25% undercommitted, 50% saturated, 50% overcommitted (the
    /// quota holds them), b 190% unrestricted (its grant lifted).
    ///
    /// - a_s b_o (id 11): a 50 -> 49 (loss 1/50 = 2%), b 50 -> 45 (loss 5/50 =
    ///   10%). b is more over (o > s): margin 10 - 2 = +8 pp: holds.
    /// - a_o b_s (id 14): a 50 -> 40 (loss 10/50 = 20%), b 50 -> 50 (loss 0). a is
    ///   more over: margin 20 - 0 = +20 pp: holds.
    /// - a_u b_f (id 8): a 25 -> 20 (loss 5/25 = 20%), b 190 -> 171 (loss 19/190 =
    ///   10%). b is more over (f > u): margin 10 - 20 = -10 pp < -1: breaks.
    /// - a_s b_s (id 10): a 50 -> 45 (10%), b 50 -> 46 (8%): equal states, not
    ///   ordered.
    /// - a_u b_s (id 6): a 25 -> 25.1 (a gain: loss -0.4%), b 50 -> 50.3 (loss
    ///   -0.6%). b is more over: margin -0.6 - (-0.4) = -0.2 pp, within the 1 pp
    ///   tolerance: holds.
    /// - a_o b_u (id 13): b's figure beside a is missing: left out.
    ///
    /// Of the 4 pairs of unequal states counted, fairness holds in 3 and breaks in 1
    /// (a_u b_f).
    #[test]
    fn fairness_orders_the_tenant_more_over_its_grant() {
        let mut pairs = vec![
            pair(6, Undercommitted, Saturated, 25.0, 25.1, 50.3),
            pair(8, Undercommitted, Unrestricted, 25.0, 20.0, 171.0),
            pair(10, Saturated, Saturated, 50.0, 45.0, 46.0),
            pair(11, Saturated, Overcommitted, 50.0, 49.0, 45.0),
            pair(13, Overcommitted, Undercommitted, 50.0, 49.0, 0.0),
            pair(14, Overcommitted, Saturated, 50.0, 40.0, 50.0),
        ];
        let b_baselines = vec![
            baseline(17, Undercommitted, 25.0),
            baseline(18, Saturated, 50.0),
            baseline(19, Overcommitted, 50.0),
            baseline(20, Unrestricted, 190.0),
        ];
        for p in &mut pairs {
            p.b_alone = b_baselines
                .iter()
                .find(|b| b.state == p.state_b)
                .map(|b| b.mean);
        }
        pairs[4].b = None;
        let iso = Isolation {
            metric: Metric::HostCpuPct,
            host_side: true,
            p_max: 200.0,
            p_max_source: PmaxSource::Cpus { cpus: 2 },
            capacity: None,
            baselines: vec![
                baseline(1, Undercommitted, 25.0),
                baseline(2, Saturated, 50.0),
                baseline(3, Overcommitted, 50.0),
            ],
            b_baselines,
            pairs,
        };
        let f = Fairness::of(&iso).unwrap();
        let ids: Vec<u32> = f.pairs.iter().map(|p| p.id).collect();
        assert_eq!(ids, [6, 8, 10, 11, 14]);
        let by = |id: u32| f.pairs.iter().find(|p| p.id == id).unwrap();
        let close = |got: f64, want: f64| assert!((got - want).abs() < 1e-9, "{got} vs {want}");

        let p = by(11);
        close(p.a_loss, 0.02);
        close(p.b_loss, 0.10);
        assert_eq!(p.over, Some(PairTenant::B));
        close(p.margin_pp.unwrap(), 8.0);
        assert_eq!(p.verdict, Verdict::Holds);

        let p = by(14);
        close(p.a_loss, 0.20);
        close(p.b_loss, 0.0);
        assert_eq!(p.over, Some(PairTenant::A));
        close(p.margin_pp.unwrap(), 20.0);
        assert_eq!(p.verdict, Verdict::Holds);

        let p = by(8);
        close(p.a_loss, 0.20);
        close(p.b_loss, 0.10);
        close(p.b_alone, 190.0);
        close(p.b_beside, 171.0);
        close(p.margin_pp.unwrap(), -10.0);
        assert_eq!(p.verdict, Verdict::Breaks);

        let p = by(10);
        assert_eq!(
            (p.over, p.margin_pp, p.verdict),
            (None, None, Verdict::Equal)
        );
        close(p.b_loss, 0.08);

        let p = by(6);
        close(p.a_loss, -0.004);
        close(p.b_loss, -0.006);
        close(p.margin_pp.unwrap(), -0.2);
        assert_eq!(p.verdict, Verdict::Holds);

        assert_eq!(f.counts(), (3, 1));
        assert_eq!(
            f.summary(),
            "fairness (Krebs, Def. 2.2 (2)) holds in 3 of 4 pair(s) of unequal states and \
             breaks in 1: a_u b_f"
        );
        let t = f.table(&iso);
        assert_eq!(t.rows.len(), 5);
        let row = &t.rows[1];
        assert_eq!(row[1], Cell::text("a_u b_f"));
        assert_eq!(row[6], Cell::text("b"));
        assert_eq!(row[8], Cell::text("breaks"));
        assert_eq!(t.notes.last().unwrap(), &f.summary());
    }

    /// A step of a written run: its level label, level id, and per record its
    /// tenant, role and host CPU %.
    type Step<'a> = (&'a str, u32, &'a [(&'a str, Role, f64)]);

    /// A tiny CPU-matrix run written to disk and read back as `nnb analyze` reads
    /// it: per step `(level label, level id, [(tenant, role, host CPU %)])`, one
    /// record per tenant (parts 1..n of the step), from the isolation fixture's first
    /// record (a burn) with those fields set, and with `shares` each step's host-side
    /// sampler at 20 ms costing that CPU share.
    fn written(steps: &[Step<'_>], shares: Option<&[f64]>) -> (tempfile::TempDir, Run) {
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/isolation-matrix");
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(from.join("manifest.json"), dir.path().join("manifest.json")).unwrap();
        let text = std::fs::read_to_string(from.join("samples.jsonl")).unwrap();
        let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        let mut samples = String::new();
        for (index, (label, id, records)) in steps.iter().enumerate() {
            let level: MatrixLevel = label.parse().unwrap();
            for (part, (tenant, role, cpu)) in records.iter().enumerate() {
                let mut r = first.clone();
                r["step"] = json!(format!("{}/{label}/rep=1", level.group()));
                r["step_index"] = json!(index);
                r["part"] = json!(part + 1);
                r["parts"] = json!(records.len());
                r["group"] = json!(level.group().to_string());
                r["level"] = json!(f64::from(*id));
                r["level_label"] = json!(label);
                r["tenant"] = json!(tenant);
                r["role"] = json!(role.name());
                r["host_cpu_pct"] = json!(cpu);
                if let Some(shares) = shares {
                    r["sampler"] = json!({"interval_ms": 20.0, "cpu_share": shares[index]});
                }
                samples += &format!("{r}\n");
            }
        }
        std::fs::write(dir.path().join("samples.jsonl"), samples).unwrap();
        let run = read_run(dir.path()).unwrap();
        (dir, run)
    }

    /// N12 end to end: b's baselines (levels 17-20) give b's own degradation and
    /// the fairness verdict. Host CPU %: a alone saturated 50, overcommitted 50; b
    /// alone saturated 50, overcommitted 50. a_s b_o: a 48 (loss 2/50 = 4%), b 40
    /// (loss 10/50 = 20%); b more over: margin +16 pp, holds. a_o b_s: a 50 (loss
    /// 0), b 45 (loss 5/50 = 10%); a more over: margin 0 - 10 = -10 pp, breaks.
    /// Without the b= levels (a run before version 11) the same pairs give no
    /// fairness, and the analyses run as before.
    #[test]
    fn b_baselines_read_from_a_run_give_b_its_degradation() {
        let (a, b) = (Role::Test, Role::Neighbor);
        let baselines: [Step<'_>; 4] = [
            ("a=saturated", 2, &[("a", a, 50.0)]),
            ("a=overcommitted", 3, &[("a", a, 50.0)]),
            ("b=saturated", 18, &[("b", b, 50.0)]),
            ("b=overcommitted", 19, &[("b", b, 50.0)]),
        ];
        let pairs: [Step<'_>; 2] = [
            (
                "a=saturated,b=overcommitted",
                11,
                &[("a", a, 48.0), ("b", b, 40.0)],
            ),
            (
                "a=overcommitted,b=saturated",
                14,
                &[("a", a, 50.0), ("b", b, 45.0)],
            ),
        ];
        let steps: Vec<_> = baselines.iter().chain(&pairs).cloned().collect();
        // N13: the sampler's cost per step (both records of a pair carry their
        // step's): mean (0.001 + 0.002 + 0.003 + 0.004 + 0.005 + 0.003) / 6 = 0.3%,
        // at most 0.5%.
        let shares = [0.001, 0.002, 0.003, 0.004, 0.005, 0.003];
        let (_d, run) = written(&steps, Some(&shares));
        let analyses = crate::tables::Analyses::of(&run).unwrap();
        let iso = analyses.isolation.as_ref().unwrap();
        let b_ids: Vec<(u32, TenantState)> =
            iso.b_baselines.iter().map(|x| (x.id, x.state)).collect();
        assert_eq!(b_ids, [(18, Saturated), (19, Overcommitted)]);
        assert_eq!(iso.pairs[0].b_alone, Some(50.0));
        let f = analyses
            .fairness
            .as_ref()
            .expect("fairness with b's baselines");
        let close = |got: f64, want: f64| assert!((got - want).abs() < 1e-9, "{got} vs {want}");
        close(f.pairs[0].a_loss, 0.04);
        close(f.pairs[0].b_loss, 0.20);
        close(f.pairs[0].margin_pp.unwrap(), 16.0);
        assert_eq!(f.pairs[0].verdict, Verdict::Holds);
        close(f.pairs[1].b_loss, 0.10);
        close(f.pairs[1].margin_pp.unwrap(), -10.0);
        assert_eq!(f.pairs[1].verdict, Verdict::Breaks);
        let tables = analyses.tables(&run);
        let t = tables.iter().find(|t| t.name == "fairness").unwrap();
        assert!(t.notes.iter().any(|n| n.ends_with("breaks in 1: a_o b_s")));
        // The sampler's line, under the isolation tables (the fairness table last).
        let sampler = analyses.sampler.as_ref().expect("the sampler's cost");
        assert_eq!(
            (sampler.intervals_ms.clone(), sampler.steps),
            (vec![20.0], 6)
        );
        close(sampler.mean_share, 0.003);
        close(sampler.max_share, 0.005);
        assert_eq!(
            t.notes.last().unwrap(),
            "host-side sampler: a reading every 20 ms; its thread used 0.300% of one CPU \
             (mean over 6 step(s), at most 0.500%)"
        );
        // The same run without b's baselines: no fairness, a's table as before.
        let (_d, old) = written(&[baselines[0], baselines[1], pairs[0], pairs[1]], None);
        let analyses = crate::tables::Analyses::of(&old).unwrap();
        let iso = analyses.isolation.as_ref().unwrap();
        assert!(iso.b_baselines.is_empty());
        assert_eq!(iso.pairs[0].b_alone, None);
        assert_eq!(analyses.fairness, None);
        assert!(analyses.tables(&old).iter().all(|t| t.name != "fairness"));
        assert_eq!(analyses.sampler, None);
    }

    /// A run before version 11 has no b baselines: no fairness.
    #[test]
    fn without_b_baselines_there_is_no_fairness() {
        let iso = Isolation {
            metric: Metric::HostCpuPct,
            host_side: true,
            p_max: 200.0,
            p_max_source: PmaxSource::Cpus { cpus: 2 },
            capacity: None,
            baselines: vec![baseline(2, Saturated, 50.0)],
            b_baselines: Vec::new(),
            pairs: vec![pair(11, Saturated, Overcommitted, 50.0, 49.0, 45.0)],
        };
        assert_eq!(Fairness::of(&iso), None);
    }
}
