//! Throughput per node per load level (thesis 6.3): each load-generating neighbor's
//! received rate, their mean, min, max and sum, beside the prediction that `n` nodes
//! sharing a host NIC get `host_bw / n` each, against the size's baseline bandwidth.

use nnb_catalog::Catalog;
use nnb_format::{Metric, NetworkView, Role};
use nnb_units::wire::{Framing, DEFAULT_MSG_SIZE};
use nnb_units::DisplayUnit;

use crate::read::{Run, Scenario};
use crate::table::{Cell, Table};

use super::node_throughput::{measured_degradation_pct, predicted_share_bps};
use super::{by_group, is, measured, AnalysisError, ReceiverDrops, Row};

/// Per-node throughput of a load-steps run.
#[derive(Debug, Clone, PartialEq)]
pub struct Throughput {
    /// Levels with load, in plan order.
    pub levels: Vec<ThroughputLevel>,
    /// The thesis 6.3 prediction, when the host bandwidth is known.
    pub prediction: Option<Prediction>,
}

/// One load level.
#[derive(Debug, Clone, PartialEq)]
pub struct ThroughputLevel {
    /// Aggregate offered load, bit/s.
    pub level: f64,
    /// Level label, e.g. `load=50M`.
    pub label: String,
    /// The nodes' received rates (`per_node_bps`, `mean`, `min`, `max`, `sum`),
    /// reached through `Deref` as if they were this level's fields.
    pub rates: NodeRates,
    /// The payload rate each load-generating node asked for: the level over the
    /// neighbors the plan split it between, bit/s.
    pub asked_per_node_bps: f64,
}

impl ThroughputLevel {
    /// What each node should receive at this level, bit/s of payload: what it asked
    /// for, or its share of the host when the nodes ask for more than the host
    /// carries (`min(asked, prediction's share)`); the asked rate alone without a
    /// prediction.
    pub fn predicted_per_node_bps(&self, prediction: Option<&Prediction>) -> f64 {
        prediction.map_or(self.asked_per_node_bps, |p| {
            self.asked_per_node_bps.min(p.expected_per_node_bps)
        })
    }
}

/// The nodes' received rates at one level and their mean, min, max and sum.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRates {
    /// Each node's mean received rate over the repetitions, bit/s, by tenant name, in
    /// order of first appearance.
    pub per_node_bps: Vec<(String, f64)>,
    /// Mean over the nodes, bit/s.
    pub mean: f64,
    /// Slowest node, bit/s.
    pub min: f64,
    /// Fastest node, bit/s.
    pub max: f64,
    /// Sum over the nodes, bit/s.
    pub sum: f64,
    /// Datagrams the sink's own sockets dropped at this level (the records'
    /// `sink_drops`): the receiver's loss, not the network's.
    pub receiver: ReceiverDrops,
}

impl NodeRates {
    /// Each tenant's mean `rate_bps` over its records in `rows` and their mean, min,
    /// max and sum; `None` when no record has a rate.
    pub(super) fn of(rows: &[&Row]) -> Option<NodeRates> {
        let mut per: Vec<(String, Vec<f64>)> = Vec::new();
        for r in rows {
            let Some(rate) = r.metrics.get(Metric::RateBps) else {
                continue;
            };
            match per.iter_mut().find(|(t, _)| *t == r.tenant) {
                Some((_, v)) => v.push(rate),
                None => per.push((r.tenant.clone(), vec![rate])),
            }
        }
        if per.is_empty() {
            return None;
        }
        let per_node_bps: Vec<(String, f64)> = per
            .into_iter()
            .map(|(t, v)| (t, v.iter().sum::<f64>() / v.len() as f64))
            .collect();
        let rates = per_node_bps.iter().map(|(_, r)| *r);
        let sum: f64 = rates.clone().sum();
        Some(NodeRates {
            receiver: ReceiverDrops::of(rows.iter().copied()),
            mean: sum / per_node_bps.len() as f64,
            min: rates.clone().fold(f64::INFINITY, f64::min),
            max: rates.fold(f64::NEG_INFINITY, f64::max),
            sum,
            per_node_bps,
        })
    }

    /// A table row: `label`, the nodes, their mean, min, max and sum (Mbit/s), the
    /// `reference` rate per node (Mbit/s) and the mean against it, %.
    pub(super) fn row(&self, label: &str, reference_bps: Option<f64>) -> Vec<Cell> {
        let mbit = DisplayUnit::BITS_PER_SECOND.table();
        let mbps = |bps: f64| Cell::num(mbit.value(bps), 2);
        vec![
            Cell::text(label),
            Cell::Int(self.per_node_bps.len() as i64),
            mbps(self.mean),
            mbps(self.min),
            mbps(self.max),
            mbps(self.sum),
            reference_bps.map_or(Cell::Empty, mbps),
            Cell::opt(reference_bps.map(|r| self.mean / r * 100.0), 1),
        ]
    }

    /// The columns of [`NodeRates::row`]: the reference rate's column is
    /// `"{reference} (Mbit/s)"`, the mean against it `"mean vs {against} %"`.
    pub(super) fn columns(reference: &str, against: &str) -> Vec<String> {
        let mbit = DisplayUnit::BITS_PER_SECOND.table();
        let mut columns = vec!["level".to_string(), "nodes".to_string()];
        columns.extend(["mean", "min", "max", "sum", reference].map(|c| mbit.title(c)));
        columns.push(format!("mean vs {against} %"));
        columns
    }
}

/// What a node should get when every node on the host pushes at once, as UDP payload
/// (the measured rates are the sinks' payload rates).
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    /// The host's bandwidth, bit/s, as its link counts it (shaped or line rate).
    pub host_bw_bps: f64,
    /// The share of `host_bw_bps` that is UDP payload at the run's datagram size.
    pub payload_share: f64,
    /// Nodes sharing it (the most at any level).
    pub max_nodes: usize,
    /// `host_bw * payload_share / max_nodes`: the payload rate per node, bit/s, so a
    /// fairly shared, saturated link reads 100%.
    pub expected_per_node_bps: f64,
    /// The instance size's advertised baseline bandwidth, when known.
    pub baseline_bps: Option<f64>,
    /// `(baseline - expected) / baseline * 100` when the baseline is known.
    pub shortfall_pct: Option<f64>,
    /// Where the numbers come from, e.g. `emulated network host_bw`.
    pub source: String,
}

/// Per-node throughput of a load-steps run (the neighbors' load records); `None` for
/// other scenarios or when no neighbor reported a rate.
pub fn throughput(run: &Run) -> Result<Option<Throughput>, AnalysisError> {
    if !is(run, Scenario::LoadSteps) {
        return Ok(None);
    }
    let rows = measured(run, Role::Neighbor)?;
    // The plan splits each level evenly between every neighbor of the experiment.
    let neighbors = run
        .manifest
        .experiment
        .tenants
        .iter()
        .filter(|t| t.role == Role::Neighbor)
        .count();
    let mut levels = Vec::new();
    for (_, group) in by_group(&rows) {
        for l in group {
            let Some(rates) = NodeRates::of(&l.rows) else {
                continue;
            };
            let split = if neighbors > 0 {
                neighbors
            } else {
                rates.per_node_bps.len()
            };
            levels.push(ThroughputLevel {
                level: l.level,
                label: l.label.clone(),
                asked_per_node_bps: l.level / split as f64,
                rates,
            });
        }
    }
    if levels.is_empty() {
        return Ok(None);
    }
    let nodes = levels
        .iter()
        .map(|l| l.rates.per_node_bps.len())
        .max()
        .unwrap_or(0);
    Ok(Some(Throughput {
        prediction: prediction(run, nodes),
        levels,
    }))
}

/// The thesis 6.3 prediction: from the emulated network's `host_bw` shared by the
/// `nodes` load generators; for a cloud run from the catalog's host bandwidth shared by
/// as many instances of the test node's size as a host holds, against that size's
/// baseline bandwidth. Both in payload terms: a shaped link (tc counts the IP packet
/// and the Ethernet header) or an Ethernet line rate (the whole frame) carries
/// `msg_size / (msg_size + headers)` of its rate as UDP payload over IPv4.
fn prediction(run: &Run, nodes: usize) -> Option<Prediction> {
    let (host_bw_bps, framing, max_nodes, baseline_bps, source) = match emulated_host_bw(run) {
        Some(bw) if nodes > 0 => (
            bw,
            Framing::Shaped,
            nodes,
            None,
            format!("emulated network host_bw shared by the {nodes} load-generating nodes"),
        ),
        _ => {
            let instance = run.instance_type()?;
            let (family, size) = Catalog::builtin().size(&instance)?;
            (
                family.host_bandwidth_bps,
                Framing::Line,
                usize::try_from(size.instances_per_host).ok()?,
                Some(size.baseline_bandwidth_bps),
                format!(
                    "nnb-catalog: {} host bandwidth shared by {} {instance} per host, against its baseline",
                    family.name, size.instances_per_host
                ),
            )
        }
    };
    if max_nodes == 0 {
        return None;
    }
    let payload_share = framing.payload_share(msg_size(run), false);
    let expected = predicted_share_bps(host_bw_bps * payload_share, max_nodes);
    Some(Prediction {
        host_bw_bps,
        payload_share,
        max_nodes,
        expected_per_node_bps: expected,
        baseline_bps,
        shortfall_pct: baseline_bps.map(|b| measured_degradation_pct(b * payload_share, expected)),
        source,
    })
}

/// The run's UDP datagram payload size: the scenario's `msg_size`, else the default.
pub(super) fn msg_size(run: &Run) -> usize {
    run.manifest
        .experiment
        .scenario
        .msg_size
        .unwrap_or(DEFAULT_MSG_SIZE)
}

/// An emulated network's `host_bw`, bit/s, as its link counts it; `None` for other
/// networks.
pub(super) fn emulated_host_bw(run: &Run) -> Option<f64> {
    match run.manifest.experiment.network {
        NetworkView::Emulated { host_bw_bps } => Some(host_bw_bps),
        NetworkView::None => None,
    }
}

impl Throughput {
    /// One row per level: nodes, mean, min, max, sum (Mbit/s), the predicted rate per
    /// node (what it asked for, or its share of a saturated host) and the measured
    /// mean against it.
    pub fn table(&self) -> Table {
        let rows = self
            .levels
            .iter()
            .map(|l| {
                let predicted = l.predicted_per_node_bps(self.prediction.as_ref());
                l.rates.row(&l.label, Some(predicted))
            })
            .collect();
        let mbit = DisplayUnit::BITS_PER_SECOND.table();
        let mbps = mbit.symbol();
        let mut notes = vec![
            format!("received payload rate per load-generating node, {mbps}"),
            "predicted/node: the payload rate each node asked for (the level split between \
             the neighbors), or its share of the host when they ask for more than it carries"
                .to_string(),
        ];
        match &self.prediction {
            Some(p) => {
                notes.push(format!(
                    "share of a saturated host (thesis 6.3): host_bw {:.2} {mbps} x {:.2}% \
                     payload / {} nodes = {:.2} {mbps} of payload per node ({})",
                    mbit.value(p.host_bw_bps),
                    p.payload_share * 100.0,
                    p.max_nodes,
                    mbit.value(p.expected_per_node_bps),
                    p.source
                ));
                if let (Some(b), Some(s)) = (p.baseline_bps, p.shortfall_pct) {
                    notes.push(format!(
                        "baseline {:.2} {mbps}: the prediction is {s:.2}% below it",
                        mbit.value(b)
                    ));
                }
            }
            None => notes
                .push("host bandwidth unknown: predicted/node is the asked rate alone".to_string()),
        }
        notes.extend(
            self.levels
                .iter()
                .filter_map(|l| l.rates.receiver.finding(&l.label)),
        );
        Table {
            name: "throughput".to_string(),
            title: "Throughput per node per level".to_string(),
            columns: NodeRates::columns("predicted/node", "predicted"),
            rows,
            notes,
        }
    }
}
