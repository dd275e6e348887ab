//! Volpert et al.'s isolation tables per technology, side by side (issue 28): an
//! isolation matrix over `technologies` runs the same states in each technology,
//! its tenants named `TENANT@TECHNOLOGY` (`a@runc`) and each sample naming its
//! `technology`. Each technology's records are analysed as a run of their own by
//! [`isolation`] (tenants a and b by their roles, whatever their names), and the
//! technologies are put side by side: one row per scenario of the matrix (Table 1
//! ids 0-16), per technology a's figure (alone in ids 0-4, beside b in 5-16),
//! I_ulr and I_plr. The seed compares technologies this way (Podman in §6; KVM,
//! gVisor and Kata named next).

use nnb_format::{MatrixLevel, Runtime, SampleStatus};
use polars::prelude::{col, lit, IntoLazy, SortMultipleOptions};

use crate::read::{Run, Scenario};
use crate::table::{Cell, Table};

use super::{is, isolation, polars_err, AnalysisError, Isolation};

/// An isolation-matrix run over several technologies, analysed per technology.
#[derive(Debug, Clone, PartialEq)]
pub struct Technologies {
    /// Each technology's isolation metrics, in the order the run measured them.
    pub per: Vec<TechnologyIsolation>,
    /// Technologies the run recorded that could not be analysed (no baseline of
    /// tenant a, say, every step failed), with why.
    pub missing: Vec<(Runtime, String)>,
}

/// One technology's isolation matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct TechnologyIsolation {
    /// The technology.
    pub technology: Runtime,
    /// Its isolation metrics, as [`isolation`] computes them for its records alone.
    pub isolation: Isolation,
}

/// The technologies of `run` in the order its records first name them (plan
/// order); empty when its records name none.
fn recorded(run: &Run) -> Result<Vec<Runtime>, AnalysisError> {
    let df = run
        .samples
        .clone()
        .lazy()
        .filter(col("technology").is_not_null())
        .sort(
            ["step_index"],
            SortMultipleOptions::default().with_maintain_order(true),
        )
        .select([col("technology")])
        .collect()
        .map_err(polars_err(run))?;
    let names: Vec<String> = df
        .column("technology")
        .and_then(|c| Ok(c.str()?.iter().flatten().map(str::to_string).collect()))
        .map_err(polars_err(run))?;
    let mut out: Vec<Runtime> = Vec::new();
    for name in names {
        let t = Runtime::from_name(&name).ok_or_else(|| AnalysisError::Data {
            run: run.run_id.clone(),
            message: format!("a record names an unknown technology `{name}`"),
        })?;
        if !out.contains(&t) {
            out.push(t);
        }
    }
    Ok(out)
}

/// `run` with only the records of technology `t` (their `record` indices into
/// the run's qualities stay valid).
pub(super) fn only(run: &Run, t: Runtime) -> Result<Run, AnalysisError> {
    let samples = run
        .samples
        .clone()
        .lazy()
        .filter(col("technology").eq(lit(t.name())))
        .collect()
        .map_err(polars_err(run))?;
    Ok(Run {
        samples,
        ..run.clone()
    })
}

/// Whether `run` has a measured (ok) record.
fn measured_in(run: &Run) -> Result<bool, AnalysisError> {
    let df = run
        .samples
        .clone()
        .lazy()
        .filter(col("status").eq(lit(SampleStatus::Ok.name())))
        .collect()
        .map_err(polars_err(run))?;
    Ok(df.height() > 0)
}

/// The isolation metrics of each technology of an isolation-matrix run over
/// `technologies`; `None` for other runs (and matrices without technologies, which
/// [`isolation`] analyses as one).
pub fn technologies(run: &Run) -> Result<Option<Technologies>, AnalysisError> {
    if !is(run, Scenario::IsolationMatrix) {
        return Ok(None);
    }
    let found = recorded(run)?;
    if found.is_empty() {
        return Ok(None);
    }
    let mut per = Vec::new();
    let mut missing = Vec::new();
    for t in found {
        let sub = only(run, t)?;
        if !measured_in(&sub)? {
            missing.push((t, "no measured step".to_string()));
            continue;
        }
        match isolation(&sub) {
            Ok(Some(isolation)) => per.push(TechnologyIsolation {
                technology: t,
                isolation,
            }),
            Ok(None) => missing.push((t, "not an isolation matrix".to_string())),
            Err(AnalysisError::Data { message, .. }) => missing.push((t, message)),
            Err(e) => return Err(e),
        }
    }
    Ok(Some(Technologies { per, missing }))
}

/// One scenario's figures in one technology: a's figure, I_ulr and I_plr
/// (fractions; none for a alone).
type Figures = (f64, Option<(f64, f64)>);

impl TechnologyIsolation {
    /// Tenant a's figure per Table 1 id (0 the capacity step, 1-4 alone, 5-16
    /// beside b) with the pair's I_ulr and I_plr, and each scenario's short name.
    fn scenarios(&self) -> Vec<(u32, String, Figures)> {
        let iso = &self.isolation;
        let capacity = iso
            .capacity
            .as_ref()
            .map(|c| (0, MatrixLevel::Capacity.to_string(), (c.mean, None)));
        let alone = iso
            .baselines
            .iter()
            .map(|b| (b.id, format!("a_{}", b.state.letter()), (b.mean, None)));
        let beside = iso
            .pairs
            .iter()
            .map(|p| (p.id, p.shortname.clone(), (p.p_b, Some((p.i_ulr, p.i_plr)))));
        capacity.into_iter().chain(alone).chain(beside).collect()
    }

    /// This technology's own isolation table (seed 004 Table 2), named for it.
    fn table(&self) -> Table {
        let mut t = self.isolation.table();
        t.name = format!("isolation-{}", self.technology);
        t.title = format!("{} in {}", t.title, self.technology);
        t
    }
}

impl Technologies {
    /// The technologies side by side: a row per scenario (Table 1 id and short
    /// name), then per technology a's figure (alone in ids 0-4, a' beside b in
    /// 5-16), I_ulr % and I_plr %; `-` where a technology lacks the scenario.
    pub fn table(&self) -> Table {
        let each: Vec<Vec<(u32, String, Figures)>> = self
            .per
            .iter()
            .map(TechnologyIsolation::scenarios)
            .collect();
        let mut ids: Vec<(u32, String)> = Vec::new();
        for (id, name, _) in each.iter().flatten() {
            if !ids.iter().any(|(i, _)| i == id) {
                ids.push((*id, name.clone()));
            }
        }
        ids.sort_by_key(|(id, _)| *id);
        let mut columns = vec!["id".to_string(), "shortname".to_string()];
        let mut notes = vec![
            "a: tenant a alone in its state (ids 0-4); a': tenant a beside b (ids 5-16); \
             each technology's own tenants (a@T, b@T), never present together"
                .to_string(),
            "I_plr = |a - a'| / a; I_ulr = |a - a'| / p_max, each technology's own \
             resource maximum (Volpert et al. eq. 3-4)"
                .to_string(),
        ];
        for t in &self.per {
            let (unit, _) = t.isolation.shown();
            columns.push(unit.title(&format!("{} a, a'", t.technology)));
            columns.push(format!("{} I_ulr %", t.technology));
            columns.push(format!("{} I_plr %", t.technology));
            notes.push(format!(
                "{}: {}; {}",
                t.technology,
                t.isolation.metric.label(),
                t.isolation.p_max_note()
            ));
        }
        notes.extend(
            self.missing
                .iter()
                .map(|(t, why)| format!("{t}: left out, {why}")),
        );
        let rows = ids
            .iter()
            .map(|(id, name)| {
                let mut cells = vec![Cell::Int(i64::from(*id)), Cell::text(name)];
                for (t, scenarios) in self.per.iter().zip(&each) {
                    let (unit, decimals) = t.isolation.shown();
                    match scenarios.iter().find(|(i, _, _)| i == id) {
                        Some((_, _, (a, i))) => {
                            cells.push(Cell::num(unit.value(*a), decimals));
                            cells.push(Cell::opt(i.map(|(ulr, _)| ulr * 100.0), 2));
                            cells.push(Cell::opt(i.map(|(_, plr)| plr * 100.0), 2));
                        }
                        None => cells.extend([Cell::Empty, Cell::Empty, Cell::Empty]),
                    }
                }
                cells
            })
            .collect();
        let names: Vec<&str> = self.per.iter().map(|t| t.technology.name()).collect();
        Table {
            name: "technologies".to_string(),
            title: format!("Isolation matrix per technology ({})", names.join(" | ")),
            columns,
            rows,
            notes,
        }
    }

    /// The side-by-side table, then each technology's own isolation table.
    pub fn tables(&self) -> Vec<Table> {
        std::iter::once(self.table())
            .chain(self.per.iter().map(TechnologyIsolation::table))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::{json, Value};

    use super::*;
    use crate::read::read_run;

    /// A CPU matrix over process and runc made from the isolation fixture's first
    /// record: per technology, `(level label, Table 1 id, role, host CPU %)`, one
    /// repetition each, the tenants named `a@T` and `b@T` and every record naming
    /// its technology.
    fn run(levels: &[(Runtime, &str, u32, Role, f64)]) -> (tempfile::TempDir, Run) {
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/isolation-matrix");
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(from.join("manifest.json"), dir.path().join("manifest.json")).unwrap();
        let text = std::fs::read_to_string(from.join("samples.jsonl")).unwrap();
        let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        let mut samples = String::new();
        for (index, (t, label, id, role, pct)) in levels.iter().enumerate() {
            let level: MatrixLevel = label.parse().unwrap();
            let mut r = first.clone();
            r["step"] = json!(format!("{t}/{}/{label}/rep=1", level.group()));
            r["step_index"] = json!(index);
            r["group"] = json!(level.group().to_string());
            r["level"] = json!(f64::from(*id));
            r["level_label"] = json!(label);
            r["technology"] = json!(t.name());
            let base = if *role == Role::Test { "a" } else { "b" };
            r["tenant"] = json!(format!("{base}@{t}"));
            r["role"] = json!(role.name());
            r["host_cpu_pct"] = json!(pct);
            samples += &format!("{r}\n");
        }
        std::fs::write(dir.path().join("samples.jsonl"), samples).unwrap();
        let run = read_run(dir.path()).unwrap();
        (dir, run)
    }

    use nnb_format::Role;

    fn num(cell: &Cell) -> f64 {
        match cell {
            Cell::Num { value, .. } => *value,
            other => panic!("not a number: {other:?}"),
        }
    }

    /// Worked by hand. process: capacity 200%, a_o alone 50%, beside b_o 49%:
    /// I_plr = 1 / 50 = 2%, I_ulr = 1 / 200 = 0.5%. runc: capacity 200%, a_o alone
    /// 50%, beside b_o 45%: I_plr = 5 / 50 = 10%, I_ulr = 5 / 200 = 2.5%. Had the
    /// technologies been pooled, a_o would be 50 and a' 47 (I_plr 6%), neither.
    #[test]
    fn each_technology_is_its_own_matrix_side_by_side() {
        use Runtime::{Process, Runc};
        let (_d, run) = run(&[
            (Process, "capacity", 0, Role::Test, 200.0),
            (Process, "a=overcommitted", 3, Role::Test, 50.0),
            (
                Process,
                "a=overcommitted,b=overcommitted",
                15,
                Role::Test,
                49.0,
            ),
            (
                Process,
                "a=overcommitted,b=overcommitted",
                15,
                Role::Neighbor,
                50.0,
            ),
            (Runc, "capacity", 0, Role::Test, 200.0),
            (Runc, "a=overcommitted", 3, Role::Test, 50.0),
            (
                Runc,
                "a=overcommitted,b=overcommitted",
                15,
                Role::Test,
                45.0,
            ),
            (
                Runc,
                "a=overcommitted,b=overcommitted",
                15,
                Role::Neighbor,
                52.0,
            ),
        ]);
        let t = technologies(&run).unwrap().expect("a technologies run");
        let names: Vec<Runtime> = t.per.iter().map(|p| p.technology).collect();
        assert_eq!(names, [Process, Runc]);
        assert!(t.missing.is_empty());
        let close = |got: f64, want: f64| assert!((got - want).abs() < 1e-9, "{got} vs {want}");
        let process = &t.per[0].isolation;
        close(process.pairs[0].i_plr, 0.02);
        close(process.pairs[0].i_ulr, 0.005);
        let runc = &t.per[1].isolation;
        close(runc.pairs[0].i_plr, 0.10);
        close(runc.pairs[0].i_ulr, 0.025);
        assert_eq!(runc.pairs[0].b.map(|b| b.0), Some(52.0));
        let table = t.table();
        assert_eq!(
            table.columns,
            [
                "id",
                "shortname",
                "process a, a' (% CPU)",
                "process I_ulr %",
                "process I_plr %",
                "runc a, a' (% CPU)",
                "runc I_ulr %",
                "runc I_plr %",
            ]
        );
        let ids: Vec<Cell> = table.rows.iter().map(|r| r[0].clone()).collect();
        assert_eq!(ids, [Cell::Int(0), Cell::Int(3), Cell::Int(15)]);
        let pair = &table.rows[2];
        assert_eq!(pair[1], Cell::text("a_o b_o"));
        close(num(&pair[2]), 49.0);
        close(num(&pair[3]), 0.5);
        close(num(&pair[4]), 2.0);
        close(num(&pair[5]), 45.0);
        close(num(&pair[6]), 2.5);
        close(num(&pair[7]), 10.0);
        // a alone has no I: its cells are empty.
        close(num(&table.rows[1][2]), 50.0);
        assert_eq!(table.rows[1][3..5], [Cell::Empty, Cell::Empty]);
        // Each technology's own Table 2 follows, named for it.
        let names: Vec<String> = t.tables().into_iter().map(|t| t.name).collect();
        assert_eq!(
            names,
            ["technologies", "isolation-process", "isolation-runc"]
        );
        // The run's analyses: per technology, not one pooled isolation table.
        let a = super::super::Analyses::of(&run).unwrap();
        assert!(a.isolation.is_none() && a.technologies.is_some());
    }

    /// A matrix without technologies is not this analysis' (its records name none).
    #[test]
    fn a_matrix_without_technologies_is_analysed_as_one() {
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/isolation-matrix");
        let run = read_run(&from).unwrap();
        assert_eq!(technologies(&run).unwrap(), None);
        let a = super::super::Analyses::of(&run).unwrap();
        assert!(a.isolation.is_some() && a.technologies.is_none());
    }
}
