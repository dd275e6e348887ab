//! Wang & Ng's instruments (seed 003, "The Impact of Virtualization on Network
//! Performance of Amazon EC2", §III-VI), read from the raw results of a run's
//! `steal` (CPUTest), `rtt`, `load` and `badabing` samples: the CPU share per tenant
//! with its timestamp trace (Fig. 1), the RTT series (Fig. 9), the fine-grained
//! TCP/UDP throughput (Figs 5/6) with its buffer bursts against the link rate, TCP
//! beside UDP with TCP_INFO and quiet periods, Badabing's loss frequency beside its
//! probe loss rate with the one-way delays and max_owd estimate (Figs 10/11), and the
//! per-pair table of the seed's columns.
//!
//! The analyses key on the job kinds present, not on the scenario, so any run with
//! such samples gets them. A result that is not what the format describes (a field
//! missing or of the wrong type) is left out with a note naming its line and field;
//! the rest is still analysed. Tables keep every value; the figures thin long series
//! for drawing ([`crate::plot::trace_chart`]).

mod charts;
mod results;
mod tables;

use nnb_format::job::LoadJobResult;
use nnb_format::{JobKind, Role};
use serde::de::DeserializeOwned;

use crate::plot::TraceChart;
use crate::read::{RawResult, Run, SAMPLES};
use crate::table::Table;
use crate::tables::AnalysisError;

pub use charts::MAX_FIGURES;
pub(crate) use results::{Badabing, Load, Rtt, Steal};
pub(crate) use tables::PairNumbers;

/// The job kinds the analyses read.
pub const KINDS: [JobKind; 4] = [
    JobKind::Steal,
    JobKind::Rtt,
    JobKind::Load,
    JobKind::Badabing,
];

/// Which record a result came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// Line of `samples.jsonl`.
    pub line: usize,
    /// The step id.
    pub step: String,
    /// The repetition (the pair suite's round).
    pub rep: u32,
    /// The tenant the job ran on.
    pub tenant: String,
    /// Its role.
    pub role: Role,
}

/// One measured result, read.
#[derive(Debug, Clone)]
pub(crate) struct Measured<T> {
    pub from: Origin,
    pub result: T,
}

/// A load's result: what the format types (its received rate) and the rest.
#[derive(Debug, Clone)]
pub(crate) struct LoadResult {
    /// Payload rate received, only when every stream's sink report came back.
    pub rate_bps: Option<f64>,
    /// Payload rate sent.
    pub sent_bps: f64,
    /// The Wang & Ng fields.
    pub load: Load,
}

impl LoadResult {
    /// Whether the load was TCP.
    pub(crate) fn tcp(&self) -> bool {
        self.load.protocol.eq_ignore_ascii_case("tcp")
    }

    /// The protocol as tables label it.
    pub(crate) fn protocol(&self) -> &'static str {
        if self.tcp() {
            "TCP"
        } else {
            "UDP"
        }
    }
}

/// Everything the run's Wang & Ng samples hold, read.
#[derive(Debug, Clone, Default)]
pub struct WangNg {
    pub(crate) cputest: Vec<Measured<Steal>>,
    pub(crate) rtt: Vec<Measured<Rtt>>,
    pub(crate) loads: Vec<Measured<LoadResult>>,
    pub(crate) badabing: Vec<Measured<Badabing>>,
    /// Results left out (malformed), each with its line and why.
    pub notes: Vec<String>,
}

impl WangNg {
    /// The tables, the per-pair table first, the notes on left-out results under the
    /// first.
    pub fn tables(&self) -> Vec<Table> {
        tables::all(self)
    }

    /// The seed's numbers of each round (repetition) of the pair suite, in order.
    pub(crate) fn pair_numbers(&self) -> Vec<PairNumbers> {
        tables::pair_numbers(self)
    }

    /// The figures of the run labelled `label`, each as its file stem and chart, and
    /// notes on what they leave out.
    pub fn figures(&self, label: &str) -> (Vec<(String, TraceChart)>, Vec<String>) {
        let (figures, notes) = charts::all(label, self);
        (
            figures.into_iter().map(|f| (f.stem, f.chart)).collect(),
            notes,
        )
    }
}

/// Reads a result as `T`, or says which record and field is wrong.
fn read<T: DeserializeOwned>(raw: &RawResult) -> Result<T, String> {
    T::deserialize(&raw.result).map_err(|e| {
        format!(
            "{SAMPLES}:{}: the {} result of step `{}` ({}) is not what the format describes \
             ({e}): left out of the Wang & Ng tables and figures",
            raw.line,
            raw.job.name(),
            raw.step,
            raw.tenant
        )
    })
}

/// Reads a load's result: the typed figures and the Wang & Ng fields.
fn read_load(raw: &RawResult) -> Result<LoadResult, String> {
    let typed: LoadJobResult = read(raw)?;
    Ok(LoadResult {
        rate_bps: typed.rate_bps(),
        sent_bps: typed.sent.payload_bps,
        load: read(raw)?,
    })
}

/// The Wang & Ng analyses of `run`; `None` when it has no `steal`, `rtt`, `badabing`
/// or Wang & Ng `load` sample (a load counts when it has a fine-grained series, buffer
/// bursts, TCP_INFO, quiet periods or socket sizes, or the run has another of the
/// kinds: a neighbour's plain load is not one of Wang & Ng's measurements).
pub fn wang_ng(run: &Run) -> Result<Option<WangNg>, AnalysisError> {
    let mut w = WangNg::default();
    run.each_result(&KINDS, |raw| {
        let from = Origin {
            line: raw.line,
            step: raw.step.clone(),
            rep: raw.rep,
            tenant: raw.tenant.clone(),
            role: raw.role,
        };
        let kept = match raw.job {
            JobKind::Steal => read(&raw).map(|result| {
                w.cputest.push(Measured {
                    from: from.clone(),
                    result,
                })
            }),
            JobKind::Rtt => read(&raw).map(|result| {
                w.rtt.push(Measured {
                    from: from.clone(),
                    result,
                })
            }),
            JobKind::Badabing => read(&raw).map(|result| {
                w.badabing.push(Measured {
                    from: from.clone(),
                    result,
                })
            }),
            JobKind::Load => read_load(&raw).map(|result| {
                w.loads.push(Measured {
                    from: from.clone(),
                    result,
                })
            }),
            _ => Ok(()),
        };
        if let Err(note) = kept {
            tracing::warn!(run = %run.run_id, "{note}");
            w.notes.push(note);
        }
    })?;
    let others = !(w.cputest.is_empty() && w.rtt.is_empty() && w.badabing.is_empty());
    if !others {
        w.loads.retain(|l| wang_ng_load(&l.result.load));
    }
    let any = others || !w.loads.is_empty() || !w.notes.is_empty();
    Ok(any.then_some(w))
}

/// Whether a load carries any of the Wang & Ng fields.
fn wang_ng_load(l: &Load) -> bool {
    l.socket.is_some()
        || l.tcp_info.is_some()
        || l.quiet.is_some()
        || l.streams
            .iter()
            .any(|s| s.fine.is_some() || s.buffer_bursts.is_some())
}

/// Whether a measured record of this kind belongs to Wang & Ng's instruments and is
/// analysed here, not by the degradation tables (a pair suite's records measure
/// different things one after another; no level degrades another).
pub(crate) fn is_pair_suite_job(job: Option<JobKind>) -> bool {
    matches!(job, Some(JobKind::Steal | JobKind::Rtt | JobKind::Badabing))
}
