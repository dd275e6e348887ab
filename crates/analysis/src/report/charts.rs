//! The charts of a report, built from the typed analyses: what each plot shows, its
//! title, axes and series. Pure data in, chart specs out; drawing is [`crate::plot`]'s.

use nnb_format::{Metric, StepGroup};

use crate::plot::{BoxChart, DisplayUnit, LineChart, PercentileChart, Series};
use crate::read::Run;
use crate::tables::{
    Degradation, Isolation, Knees, LatencyVsLoad, LevelStats, NodeThroughput, Throughput,
};

/// Most series a percentile chart gets; runs with more load levels show an even
/// spread of them, first and last included.
pub(crate) const MAX_PERCENTILE_SERIES: usize = 8;

/// Name and unit of a results-format metric, for axis titles (`value`, no unit, when
/// the run names none).
pub(crate) fn metric_axis(metric: Option<Metric>) -> (String, DisplayUnit) {
    metric.map_or(("value".to_string(), DisplayUnit::NONE), |m| {
        (m.label().to_string(), m.quantity().display_unit())
    })
}

/// The quantity a level measures and each level's value as text, from labels like
/// `neighbors=2`: ("neighbors", ["0", "1", "2"]). Labels without a shared `key=`
/// prefix are kept whole under the name "level".
pub(crate) fn split_levels<'a>(labels: impl IntoIterator<Item = &'a str>) -> (String, Vec<String>) {
    let labels: Vec<&str> = labels.into_iter().collect();
    let key = labels
        .first()
        .and_then(|l| l.split_once('='))
        .map(|(k, _)| k);
    match key {
        Some(k)
            if labels
                .iter()
                .all(|l| l.split_once('=').map(|p| p.0) == Some(k)) =>
        {
            (
                k.to_string(),
                labels
                    .iter()
                    .map(|l| l.split_once('=').map_or(*l, |p| p.1).to_string())
                    .collect(),
            )
        }
        _ => (
            "level".into(),
            labels.iter().map(|l| l.to_string()).collect(),
        ),
    }
}

/// Mean per level with its 95% CI as a band.
fn level_series(name: String, levels: &[LevelStats], x: impl Fn(&LevelStats) -> f64) -> Series {
    Series {
        name,
        points: levels.iter().map(|l| (x(l), l.mean)).collect(),
        band: Some(levels.iter().map(|l| l.ci95).collect()),
    }
}

/// Series name for a staircase group: `busy neighbors (mean, 95% CI)`.
fn group_series_name(prefix: &str, group: StepGroup) -> String {
    let what = match group {
        StepGroup::Busy | StepGroup::Idle => format!("{group} neighbors"),
        other => other.to_string(),
    };
    format!("{prefix}{what} (mean, 95% CI)")
}

/// Runtime (the staircase metric) vs neighbors, one series per group (busy, idle), for
/// one or several runs (series then prefixed with the run's label).
pub(crate) fn staircase(runs: &[(String, &Degradation)]) -> LineChart {
    let (y_label, y_unit) = metric_axis(runs.first().map(|r| r.1.metric));
    let several = runs.len() > 1;
    let series = runs
        .iter()
        .flat_map(|(label, d)| {
            let prefix = if several {
                format!("{label}: ")
            } else {
                String::new()
            };
            d.groups.iter().map(move |g| {
                level_series(group_series_name(&prefix, g.group), &g.levels, |l| l.level)
            })
        })
        .collect();
    let names: Vec<&str> = runs.iter().map(|r| r.0.as_str()).collect();
    LineChart {
        title: format!("{}: test node {y_label} vs neighbors", names.join(" vs ")),
        x_label: "neighbors".into(),
        x_unit: DisplayUnit::NONE,
        y_label: format!("test node {y_label}"),
        y_unit,
        series,
        markers: Vec::new(),
        log_x: false,
        y_from_zero: true,
    }
}

/// Markers of a sweep: each knee, and where the test tenant's placement expects the
/// SMT knee.
fn knee_markers(k: &Knees, prefix: &str) -> Vec<(f64, String)> {
    let knees = k.steps.iter().filter(|s| s.is_knee).map(|s| {
        let label = format!(
            "{prefix}knee: {} → {} threads ({:+.1}%)",
            s.from, s.to, s.step_pct
        );
        (s.to, label)
    });
    let expected = k
        .expected_knee
        .map(|e| (e, format!("{prefix}expected SMT knee: {e} threads")));
    knees.chain(expected).collect()
}

/// Metric vs threads with knees marked, for one or several sweeps.
pub(crate) fn sweep(runs: &[(String, &Knees, Option<Metric>)]) -> LineChart {
    let (y_label, y_unit) = metric_axis(runs.first().and_then(|r| r.2));
    let several = runs.len() > 1;
    let prefix = |label: &str| {
        if several {
            format!("{label}: ")
        } else {
            String::new()
        }
    };
    let names: Vec<&str> = runs.iter().map(|r| r.0.as_str()).collect();
    LineChart {
        title: format!("{}: thread sweep, {y_label} vs threads", names.join(" vs ")),
        x_label: "threads".into(),
        x_unit: DisplayUnit::NONE,
        y_label: y_label.clone(),
        y_unit,
        series: runs
            .iter()
            .map(|(label, k, _)| {
                level_series(
                    format!("{}{y_label} (mean, 95% CI)", prefix(label)),
                    &k.levels,
                    |l| l.level,
                )
            })
            .collect(),
        markers: runs
            .iter()
            .flat_map(|(label, k, _)| knee_markers(k, &prefix(label)))
            .collect(),
        log_x: false,
        y_from_zero: true,
    }
}

/// The staircase's busy series against a metal thread sweep (thesis 5.6, 5.8, 5.9): x
/// is the number of busy threads on the host ([`crate::tables::busy_threads`]) when the
/// experiment says how many each tenant runs, else the raw level (with a note saying so).
pub(crate) fn staircase_vs_metal(
    stair: (&str, &Run, &Degradation),
    metal: (&str, &Knees),
) -> (LineChart, Option<String>) {
    let (stair_label, stair_run, d) = stair;
    let (y_label, y_unit) = metric_axis(Some(d.metric));
    let threads = crate::tables::busy_threads(stair_run);
    let to_x = |l: &LevelStats| threads.map_or(l.level, |(test, each)| test + l.level * each);
    let busy = d.groups.iter().find(|g| g.group == StepGroup::Busy);
    let mut series: Vec<Series> = busy
        .map(|g| {
            level_series(
                format!("{stair_label}: test node beside busy neighbors"),
                &g.levels,
                to_x,
            )
        })
        .into_iter()
        .collect();
    series.push(level_series(
        format!("{}: threads on metal", metal.0),
        &metal.1.levels,
        |l| l.level,
    ));
    let note = threads.is_none().then(|| {
        format!("{stair_label}: threads per tenant not in the experiment; the staircase is drawn at its neighbor count")
    });
    let chart = LineChart {
        title: format!(
            "{stair_label} beside busy neighbors vs {} threads on metal",
            metal.0
        ),
        x_label: if threads.is_some() {
            "busy threads on the host".into()
        } else {
            "neighbors / threads".into()
        },
        x_unit: DisplayUnit::NONE,
        y_label,
        y_unit,
        series,
        markers: knee_markers(metal.1, &format!("{}: ", metal.0)),
        log_x: false,
        y_from_zero: true,
    };
    (chart, note)
}

/// RTT mean, p90 and p99.9 vs aggregate load, each the mean of the level's runs
/// (the thesis' definition, the latency table's "mean of runs") with its 95% CI as a
/// band; for several runs, mean and p99.9 each.
pub(crate) fn latency(runs: &[(String, &LatencyVsLoad)]) -> LineChart {
    let several = runs.len() > 1;
    type Pick = fn(&crate::tables::RunMeans) -> &nnb_format::stats::Summary;
    let stats: &[(&str, Pick)] = if several {
        &[("mean", |r| &r.mean_ns), ("p99.9", |r| &r.p999_ns)]
    } else {
        &[
            ("mean", |r| &r.mean_ns),
            ("p90", |r| &r.p90_ns),
            ("p99.9", |r| &r.p999_ns),
        ]
    };
    let series = runs
        .iter()
        .flat_map(|(label, l)| {
            stats.iter().map(move |(name, pick)| {
                let at: Vec<(f64, &nnb_format::stats::Summary)> = l
                    .levels
                    .iter()
                    .filter_map(|v| Some((v.load_bps, pick(v.runs.as_ref()?))))
                    .collect();
                Series {
                    name: if several {
                        format!("{label}: {name}, mean of runs")
                    } else {
                        format!("{name}, mean of runs")
                    },
                    points: at.iter().map(|(x, s)| (*x, s.mean)).collect(),
                    band: Some(at.iter().map(|(_, s)| (s.ci95_low, s.ci95_high)).collect()),
                }
            })
        })
        .collect();
    let names: Vec<&str> = runs.iter().map(|r| r.0.as_str()).collect();
    LineChart {
        title: format!(
            "{}: round-trip time vs aggregate neighbor load",
            names.join(" vs ")
        ),
        x_label: "aggregate neighbor load".into(),
        x_unit: DisplayUnit::BITS_PER_SECOND,
        y_label: "round-trip time".into(),
        y_unit: DisplayUnit::NANOSECONDS,
        series,
        markers: Vec::new(),
        log_x: false,
        y_from_zero: true,
    }
}

/// Indices of at most `most` items out of `n`, evenly spread, first and last included.
pub(crate) fn spread(n: usize, most: usize) -> Vec<usize> {
    if n <= most {
        return (0..n).collect();
    }
    let mut picked: Vec<usize> = (0..most)
        .map(|i| (i * (n - 1) + (most - 1) / 2) / (most - 1))
        .collect();
    picked.dedup();
    picked
}

/// The HDR percentile plot, one series per load level (at most
/// [`MAX_PERCENTILE_SERIES`]); None when the run has no HDR logs. The note says which
/// levels were left out.
pub(crate) fn percentiles(
    label: &str,
    l: &LatencyVsLoad,
) -> Option<(PercentileChart, Option<String>)> {
    let with_hdr: Vec<_> = l
        .levels
        .iter()
        .filter(|v| !v.percentiles.is_empty())
        .collect();
    if with_hdr.is_empty() {
        return None;
    }
    let picked = spread(with_hdr.len(), MAX_PERCENTILE_SERIES);
    let series = picked
        .iter()
        .map(|i| {
            let v = with_hdr[*i];
            (
                format!("load {}", DisplayUnit::BITS_PER_SECOND.format(v.load_bps)),
                v.percentiles.clone(),
            )
        })
        .collect();
    let note = (picked.len() < with_hdr.len()).then(|| {
        format!(
            "{label}: the percentile plot shows {} of {} load levels, evenly spread",
            picked.len(),
            with_hdr.len()
        )
    });
    let chart = PercentileChart {
        title: format!("{label}: round-trip time by percentile, per neighbor load"),
        y_label: "round-trip time".into(),
        y_unit: DisplayUnit::NANOSECONDS,
        series,
    };
    Some((chart, note))
}

/// Per-node throughput as boxplots per level, with the `host_bw / max_nodes`
/// prediction as a reference line.
pub(crate) fn throughput(label: &str, t: &Throughput) -> BoxChart {
    let (x_label, names) = split_levels(t.levels.iter().map(|l| l.label.as_str()));
    BoxChart {
        title: format!("{label}: throughput per node by level"),
        x_label,
        y_label: "throughput per node".into(),
        y_unit: DisplayUnit::BITS_PER_SECOND,
        groups: names
            .into_iter()
            .zip(&t.levels)
            .map(|(name, l)| (name, l.rates.per_node_bps.iter().map(|p| p.1).collect()))
            .collect(),
        reference: t.prediction.as_ref().map(|p| {
            (
                format!("predicted payload: host bw / {} nodes", p.max_nodes),
                p.expected_per_node_bps,
            )
        }),
        y_from_zero: true,
    }
}

/// Nodes per boxplot step of a large throughput staircase (thesis Figure 6.3).
pub(crate) const BOX_STEP_NODES: usize = 8;

/// Every node's throughput over the levels, one line per node (thesis Figure 6.2;
/// the thesis drew each node in a graph of its own): x is the nodes present.
pub(crate) fn node_lines(label: &str, t: &NodeThroughput) -> LineChart {
    LineChart {
        title: format!("{label}: UDP throughput of each node as nodes join"),
        x_label: "nodes on the host".into(),
        x_unit: DisplayUnit::NONE,
        y_label: "throughput per node".into(),
        y_unit: DisplayUnit::BITS_PER_SECOND,
        series: t
            .nodes
            .iter()
            .map(|n| Series {
                name: n.clone(),
                points: t
                    .levels
                    .iter()
                    .filter_map(|l| {
                        let (_, r) = l.rates.per_node_bps.iter().find(|(t, _)| t == n)?;
                        Some((l.level + 1.0, *r))
                    })
                    .collect(),
                band: None,
            })
            .collect(),
        markers: Vec::new(),
        log_x: false,
        y_from_zero: true,
    }
}

/// Volpert et al.'s Fig. 5: the utilisation of tenants a and b in every scenario
/// of the isolation matrix (Table 1 ids 1-16: a alone, then a beside b), as a
/// share of the resource maximum `p_max`, each with its standard deviation over the
/// repetitions as a band.
pub(crate) fn isolation(label: &str, iso: &Isolation) -> LineChart {
    let shares = iso.shares();
    let band = |m: f64, sd: f64| (m - sd, m + sd);
    let a = Series {
        name: "tenant a (mean ± sd)".into(),
        points: shares.iter().map(|s| (f64::from(s.id), s.a.0)).collect(),
        band: Some(shares.iter().map(|s| band(s.a.0, s.a.1)).collect()),
    };
    let b_shares: Vec<(u32, (f64, f64))> =
        shares.iter().filter_map(|s| Some((s.id, s.b?))).collect();
    let b = Series {
        name: "tenant b (mean ± sd)".into(),
        points: b_shares
            .iter()
            .map(|(id, (m, _))| (f64::from(*id), *m))
            .collect(),
        band: Some(b_shares.iter().map(|(_, (m, sd))| band(*m, *sd)).collect()),
    };
    let seen = if iso.host_side {
        "seen from the host"
    } else {
        "as generated"
    };
    LineChart {
        title: format!("{label}: {} per scenario ({seen})", iso.metric.label()),
        x_label: "scenario (Volpert et al. Table 1 id; 1-4 a alone)".into(),
        x_unit: DisplayUnit::NONE,
        y_label: "share of the resource maximum".into(),
        y_unit: DisplayUnit::PERCENT,
        series: [a, b]
            .into_iter()
            .filter(|s| !s.points.is_empty())
            .collect(),
        markers: vec![(4.5, "a beside b →".to_string())],
        log_x: false,
        y_from_zero: true,
    }
}

/// The levels a boxplot shows (thesis Figure 6.3): 1 node and every
/// [`BOX_STEP_NODES`]th node count; every level when fewer than that many nodes ran.
pub(crate) fn box_levels(t: &NodeThroughput) -> Vec<usize> {
    let nodes = |i: usize| t.levels[i].level as usize + 1;
    let all: Vec<usize> = (0..t.levels.len()).collect();
    if t.levels
        .iter()
        .all(|l| (l.level as usize) + 1 < BOX_STEP_NODES)
    {
        return all;
    }
    all.into_iter()
        .filter(|&i| nodes(i) == 1 || nodes(i) % BOX_STEP_NODES == 0)
        .collect()
}

/// The distribution of the nodes' throughput at the levels of [`box_levels`], with
/// the baseline as the reference line.
pub(crate) fn node_boxes(label: &str, t: &NodeThroughput) -> BoxChart {
    BoxChart {
        title: format!("{label}: throughput of the nodes, in steps of {BOX_STEP_NODES} nodes"),
        x_label: "nodes on the host".into(),
        y_label: "throughput per node".into(),
        y_unit: DisplayUnit::BITS_PER_SECOND,
        groups: box_levels(t)
            .into_iter()
            .map(|i| {
                let l = &t.levels[i];
                (
                    format!("{}", l.level as usize + 1),
                    l.rates.per_node_bps.iter().map(|p| p.1).collect(),
                )
            })
            .collect(),
        reference: t
            .degradation
            .as_ref()
            .map(|d| (format!("baseline ({})", d.baseline_source), d.baseline_bps)),
        y_from_zero: true,
    }
}

/// Mean per-node throughput per level of several runs, the band spanning the slowest
/// to the fastest node.
pub(crate) fn throughput_compare(runs: &[(String, &Throughput)]) -> LineChart {
    let names: Vec<&str> = runs.iter().map(|r| r.0.as_str()).collect();
    LineChart {
        title: format!("{}: mean throughput per node by level", names.join(" vs ")),
        x_label: "aggregate offered load".into(),
        x_unit: DisplayUnit::BITS_PER_SECOND,
        y_label: "throughput per node".into(),
        y_unit: DisplayUnit::BITS_PER_SECOND,
        series: runs
            .iter()
            .map(|(label, t)| Series {
                name: format!("{label}: mean (band: slowest to fastest node)"),
                points: t.levels.iter().map(|l| (l.level, l.rates.mean)).collect(),
                band: Some(
                    t.levels
                        .iter()
                        .map(|l| (l.rates.min, l.rates.max))
                        .collect(),
                ),
            })
            .collect(),
        markers: Vec::new(),
        log_x: false,
        y_from_zero: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_keeps_first_and_last_and_spaces_the_rest_evenly() {
        assert_eq!(spread(5, 8), vec![0, 1, 2, 3, 4]);
        let picked = spread(20, 8);
        assert_eq!(picked.len(), 8);
        assert_eq!((picked[0], picked[7]), (0, 19));
        let gaps: Vec<usize> = picked.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().all(|g| (2..=3).contains(g)), "{picked:?}");
    }

    #[test]
    fn level_labels_split_into_quantity_and_values() {
        let (name, values) = split_levels(["load=0", "load=50M", "load=1G"]);
        assert_eq!(name, "load");
        assert_eq!(values, vec!["0", "50M", "1G"]);
        let (name, values) = split_levels(["a=saturated,b=idle", "threads=2"]);
        assert_eq!(name, "level");
        assert_eq!(values, vec!["a=saturated,b=idle", "threads=2"]);
    }

    #[test]
    fn metrics_name_their_axis_and_unit() {
        assert_eq!(
            metric_axis(Some(Metric::RuntimeS)),
            ("runtime".to_string(), DisplayUnit::SECONDS)
        );
        assert_eq!(
            metric_axis(Some(Metric::RttMeanNs)).1,
            DisplayUnit::NANOSECONDS
        );
        assert_eq!(
            metric_axis(Some(Metric::OpsPerSec)).1,
            DisplayUnit::OPS_PER_SECOND
        );
        assert_eq!(metric_axis(None), ("value".to_string(), DisplayUnit::NONE));
    }
}
