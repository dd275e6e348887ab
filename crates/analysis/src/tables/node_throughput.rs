//! The throughput staircase (thesis 6.1, Figures 6.2 and 6.3): every node's received
//! rate per level (the mean of its latest `window` samples, averaged over the
//! repetitions), the fair share of an emulated link beside it, and the degradation at
//! the top level against the baseline bandwidth, beside the thesis 6.3 prediction.

use nnb_catalog::Catalog;
use nnb_format::Role;
use nnb_units::wire::Framing;
use nnb_units::DisplayUnit;

use crate::read::{Run, Scenario};
use crate::table::{Cell, Table};

use super::throughput::{emulated_host_bw, msg_size, NodeRates};
use super::{by_group, is, measured, AnalysisError};

/// Every node's throughput per level of a throughput staircase.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeThroughput {
    /// The nodes in the order they joined (the test node first).
    pub nodes: Vec<String>,
    /// The levels in plan order.
    pub levels: Vec<NodeLevel>,
    /// The degradation at the top level, when there is a baseline.
    pub degradation: Option<StaircaseDegradation>,
}

/// One level: k neighbors beside the test node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeLevel {
    /// Neighbors.
    pub level: f64,
    /// Label, e.g. `neighbors=2`.
    pub label: String,
    /// Each node's received payload rate, bit/s, mean over the repetitions, and their
    /// mean, min, max and sum, reached through `Deref` as if they were this level's
    /// fields.
    pub rates: NodeRates,
    /// An emulated link's payload rate shared by the nodes present: `host_bw x
    /// payload share / nodes`.
    pub fair_share_bps: Option<f64>,
}

/// The measured degradation at the top level against the baseline bandwidth, and the
/// thesis 6.3 prediction of it.
#[derive(Debug, Clone, PartialEq)]
pub struct StaircaseDegradation {
    /// The baseline, bit/s of UDP payload (a configured line-rate baseline scaled by
    /// the line's payload share), so that it compares with the sinks' rates.
    pub baseline_bps: f64,
    /// Where it comes from: the experiment's `baseline`, or level 0's rate.
    pub baseline_source: String,
    /// Nodes at the top level.
    pub nodes: usize,
    /// Their mean rate, bit/s.
    pub mean_bps: f64,
    /// `(baseline - mean) / baseline x 100`.
    pub measured_pct: f64,
    /// The host's bandwidth the prediction shares, bit/s of UDP payload, as the
    /// baseline and the measured rates.
    pub host_bw_bps: Option<f64>,
    /// [`predicted_degradation_pct`] for the top level's nodes.
    pub predicted_pct: Option<f64>,
    /// Where the host bandwidth comes from.
    pub host_source: String,
}

/// The thesis' 6.3 prediction of the degradation at full host, %: the host's
/// bandwidth shared by `nodes` gives each `host_bw / nodes`, and "(host_bw / nodes)
/// / baseline x 100" is the share of its baseline a node gets; the degradation is
/// the rest, `100 - that` (0 when the share is above the baseline). The m5 host's
/// 25 Gbit/s over 6 m5.4xlarge at 5 Gbit/s: 16.7%; over 48 m5.large at 0.75: 30.6%.
pub fn predicted_degradation_pct(host_bw_bps: f64, nodes: usize, baseline_bps: f64) -> f64 {
    let share = predicted_share_bps(host_bw_bps, nodes);
    (100.0 - share / baseline_bps * 100.0).max(0.0)
}

/// The thesis 6.3 prediction of what each of `nodes` gets of a host's bandwidth when
/// all push at once: `host_bw / nodes`.
pub(super) fn predicted_share_bps(host_bw_bps: f64, nodes: usize) -> f64 {
    host_bw_bps / nodes.max(1) as f64
}

/// `(baseline - measured) / baseline x 100`: the thesis' 4.12 against 5 Gbit/s is
/// 17.6%.
pub fn measured_degradation_pct(baseline_bps: f64, measured_bps: f64) -> f64 {
    (baseline_bps - measured_bps) / baseline_bps * 100.0
}

/// The throughput staircase of `run`; `None` for other scenarios or when no node
/// reported a rate.
pub fn node_throughput(run: &Run) -> Result<Option<NodeThroughput>, AnalysisError> {
    if !is(run, Scenario::ThroughputStaircase) {
        return Ok(None);
    }
    let mut rows = measured(run, Role::Test)?;
    rows.extend(measured(run, Role::Neighbor)?);
    // Both roles' records are in plan order: a stable sort by level keeps it.
    rows.sort_by(|a, b| a.level.total_cmp(&b.level));
    let link = emulated_payload_bps(run);
    let mut nodes: Vec<String> = Vec::new();
    let mut levels = Vec::new();
    for (_, group) in by_group(&rows) {
        for l in group {
            let Some(rates) = NodeRates::of(&l.rows) else {
                continue;
            };
            for (n, _) in &rates.per_node_bps {
                if !nodes.contains(n) {
                    nodes.push(n.clone());
                }
            }
            let count = l.level as usize + 1;
            levels.push(NodeLevel {
                level: l.level,
                label: l.label.clone(),
                fair_share_bps: link.map(|bw| bw / count as f64),
                rates,
            });
        }
    }
    if levels.is_empty() {
        return Ok(None);
    }
    let degradation = degradation(run, &levels, link);
    Ok(Some(NodeThroughput {
        nodes,
        levels,
        degradation,
    }))
}

/// An emulated network's link as UDP payload at the run's datagram size: tc's token
/// bucket counts each datagram's Ethernet frame without preamble and FCS (payload +
/// 8 UDP + 20 IPv4 + 14 Ethernet header bytes).
fn emulated_payload_bps(run: &Run) -> Option<f64> {
    emulated_host_bw(run).map(|bw| bw * Framing::Shaped.payload_share(msg_size(run), false))
}

/// The top level's degradation against the configured baseline or level 0's rate,
/// and the thesis 6.3 prediction of it, both in one framing: UDP payload, what the
/// sinks measured. A configured baseline (AWS's baseline bandwidth) and a catalog
/// host's bandwidth are Ethernet line rates, so each is scaled by the line's payload
/// share at the run's datagram size; level 0's rate and an emulated link's payload
/// already are payload. A host that shares its bandwidth exactly fairly then reads
/// measured = predicted.
fn degradation(
    run: &Run,
    levels: &[NodeLevel],
    link_payload: Option<f64>,
) -> Option<StaircaseDegradation> {
    let top = levels.last()?;
    let mbit = DisplayUnit::BITS_PER_SECOND.table();
    let line_share = Framing::Line.payload_share(msg_size(run), false);
    let as_payload = |line_bps: f64, what: &str| {
        (
            line_bps * line_share,
            format!(
                "{what}, {:.2} {} line rate x {:.2}% UDP payload at {} B datagrams",
                mbit.value(line_bps),
                mbit.symbol(),
                line_share * 100.0,
                msg_size(run)
            ),
        )
    };
    let configured = run.manifest.experiment.scenario.baseline_bps;
    let (baseline_bps, baseline_source) = match configured {
        Some(b) => as_payload(b, "the experiment's baseline"),
        None => {
            let alone = levels.iter().find(|l| l.level == 0.0)?;
            (
                alone.rates.mean,
                "the test node alone (level 0), as UDP payload".to_string(),
            )
        }
    };
    let nodes = top.rates.per_node_bps.len();
    let catalog = || {
        let instance = run.instance_type()?;
        let (family, _) = Catalog::builtin().size(&instance)?;
        Some(as_payload(
            family.host_bandwidth_bps,
            &format!("nnb-catalog: the {} host's bandwidth", family.name),
        ))
    };
    let emulated = link_payload.map(|l| (l, "the emulated link, as UDP payload".to_string()));
    let host = match configured {
        Some(_) => catalog().or(emulated),
        None => emulated.or_else(catalog),
    };
    Some(StaircaseDegradation {
        baseline_bps,
        baseline_source,
        nodes,
        mean_bps: top.rates.mean,
        measured_pct: measured_degradation_pct(baseline_bps, top.rates.mean),
        host_bw_bps: host.as_ref().map(|h| h.0),
        predicted_pct: host
            .as_ref()
            .map(|h| predicted_degradation_pct(h.0, nodes, baseline_bps)),
        host_source: host.map_or_else(|| "unknown: no prediction".to_string(), |h| h.1),
    })
}

impl NodeThroughput {
    /// The per-level table (one column per node) and the degradation table.
    pub fn tables(&self) -> Vec<Table> {
        let mbit = DisplayUnit::BITS_PER_SECOND.table();
        let mbps = |bps: f64| Cell::num(mbit.value(bps), 2);
        let rows = self
            .levels
            .iter()
            .map(|l| {
                let mut row = l.rates.row(&l.label, l.fair_share_bps);
                row.extend(self.nodes.iter().map(|n| {
                    l.rates
                        .per_node_bps
                        .iter()
                        .find(|(t, _)| t == n)
                        .map_or(Cell::Empty, |(_, r)| mbps(*r))
                }));
                row
            })
            .collect();
        let mut columns = NodeRates::columns("fair share", "fair share");
        columns.extend(self.nodes.iter().map(|n| mbit.title(n)));
        let mut notes = vec![
            "each node's UDP payload rate as the sink received it: the mean of its latest \
             `window` samples, averaged over the repetitions; the sender's samples are in \
             each record's result.samples"
                .to_string(),
            "fair share: an emulated link's payload rate (tc shapes Ethernet frames: \
             payload + 42 header bytes) over the nodes present"
                .to_string(),
        ];
        notes.extend(
            self.levels
                .iter()
                .filter_map(|l| l.rates.receiver.finding(&l.label)),
        );
        let mut tables = vec![Table {
            name: "throughput_staircase".to_string(),
            title: "Throughput per node as nodes join (thesis 6.1)".to_string(),
            columns,
            rows,
            notes,
        }];
        tables.extend(self.degradation.as_ref().map(StaircaseDegradation::table));
        tables
    }
}

impl StaircaseDegradation {
    /// One row: the top level's mean against the baseline, and the 6.3 prediction.
    fn table(&self) -> Table {
        let mbit = DisplayUnit::BITS_PER_SECOND.table();
        let mbps = |bps: f64| Cell::num(mbit.value(bps), 2);
        Table {
            name: "throughput_degradation".to_string(),
            title: "Degradation at the top level against the baseline (thesis 6.3)".to_string(),
            columns: vec![
                "nodes".to_string(),
                mbit.title("mean"),
                mbit.title("baseline"),
                "measured degradation %".to_string(),
                mbit.title("host bandwidth"),
                "predicted degradation %".to_string(),
            ],
            rows: vec![vec![
                Cell::Int(self.nodes as i64),
                mbps(self.mean_bps),
                mbps(self.baseline_bps),
                Cell::num(self.measured_pct, 1),
                self.host_bw_bps.map_or(Cell::Empty, mbps),
                Cell::opt(self.predicted_pct, 1),
            ]],
            notes: vec![
                "every rate here is UDP payload, as the sinks count it: a line rate (AWS's \
                 baseline, a catalog host) is scaled by its payload share, so that the \
                 measured and the predicted degradation compare in one framing"
                    .to_string(),
                format!("baseline: {}", self.baseline_source),
                format!(
                    "prediction (thesis 6.3): 100 - (host bandwidth / nodes) / baseline x 100; \
                     host bandwidth from {}",
                    self.host_source
                ),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thesis_numbers_by_hand() {
        // 6.3: 25 Gbit/s over 6 m5.4xlarge is 4.1667 each, 83.33% of 5 Gbit/s: 16.67%.
        assert!((predicted_degradation_pct(25e9, 6, 5e9) - 16.6667).abs() < 1e-3);
        // Over 48 m5.large: 0.52083 each, 69.44% of 0.75 Gbit/s: 30.56%.
        assert!((predicted_degradation_pct(25e9, 48, 0.75e9) - 30.5556).abs() < 1e-3);
        // A host with room for everyone: no degradation.
        assert_eq!(predicted_degradation_pct(25e9, 2, 5e9), 0.0);
        // Measured: 4.12 against 5 Gbit/s is 17.6% (Figure 6.2's 6 nodes).
        assert!((measured_degradation_pct(5e9, 4.12e9) - 17.6).abs() < 1e-9);
        // 0.51 against 0.75 is 32.0%; the thesis' 30.7% is a mean of 0.52 (0.5198),
        // which it printed as 0.51.
        assert!((measured_degradation_pct(0.75e9, 0.51e9) - 32.0).abs() < 1e-9);
        assert!((measured_degradation_pct(0.75e9, 0.5198e9) - 30.69).abs() < 0.01);
    }
}
