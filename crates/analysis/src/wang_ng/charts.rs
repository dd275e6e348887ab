//! The Wang & Ng figures as chart specs: Fig. 1 (a CPUTest timestamp trace), Fig. 9
//! (an RTT series, log y), Figs 5/6 (one second of fine-grained TCP and UDP
//! throughput) and Figs 10/11 (Badabing's one-way delays with the max_owd estimate).
//! Each is built bounded: a trace's points are cut to [`MAX_TRACE_GAPS`] gaps and
//! [`TRACE_BIN_POINTS`] bin ends before the chart thins what remains.

use nnb_units::DisplayUnit;

use super::results::{Badabing, Trace};
use super::tables::BIN_NS;
use super::{LoadResult, Measured, Rtt, Steal, WangNg};
use crate::plot::{TraceChart, TraceLine, TraceMarks};

/// Most figures of one kind a run gets (the first ones in plan order); a note says
/// how many were left out.
pub const MAX_FIGURES: usize = 6;
/// Most gaps of a CPUTest trace a figure draws exactly: the figure shows the trace
/// up to the next one.
pub(crate) const MAX_TRACE_GAPS: usize = 400;
/// Bin ends of a CPUTest trace a figure draws between the gaps (evenly spread).
pub(crate) const TRACE_BIN_POINTS: usize = 1000;
/// The window of a fine-grained throughput figure: one second, as the seed's.
const FINE_WINDOW_NS: u64 = 1_000_000_000;

/// A figure: file stem, the chart, and a note (what was left out of it).
pub(crate) struct Figure {
    pub stem: String,
    pub chart: TraceChart,
    pub note: Option<String>,
}

/// Iterations before time `t_ns` of a trace (cumulative counts, `cum[i]` = iterations
/// in bins `0..i`), spread evenly within its bin.
fn iterations_at(cum: &[u64], counts: &[u32], t_ns: u64) -> f64 {
    let bin = usize::try_from(t_ns / BIN_NS).unwrap_or(usize::MAX);
    match counts.get(bin) {
        Some(&c) => cum[bin] as f64 + f64::from(c) * ((t_ns % BIN_NS) as f64 / BIN_NS as f64),
        None => cum[cum.len() - 1] as f64,
    }
}

/// The (iteration, time ns) points of Fig. 1 for one CPU's trace, and the end of the
/// window drawn when the trace has more than [`MAX_TRACE_GAPS`] gaps (None: all of
/// it). A gap is a vertical jump: its start and end share the iteration count of the
/// iterations before it.
pub(crate) fn trace_points(t: &Trace) -> (Vec<(f64, f64)>, Option<u64>) {
    let counts = &t.counts_per_ms;
    let mut cum = Vec::with_capacity(counts.len() + 1);
    cum.push(0u64);
    for c in counts {
        cum.push(cum[cum.len() - 1] + u64::from(*c));
    }
    let mut gaps = t.gaps.clone();
    gaps.sort_by_key(|g| g.0);
    let end = gaps.get(MAX_TRACE_GAPS).map(|g| g.0);
    gaps.truncate(MAX_TRACE_GAPS);
    let span = end.unwrap_or(counts.len() as u64 * BIN_NS);
    let mut points: Vec<(f64, f64)> = Vec::new();
    for g in &gaps {
        let (at, stop) = (g.0, g.0.saturating_add(g.1));
        let (first, last) = (at / BIN_NS, stop / BIN_NS);
        // The bin where the gap starts holds only iterations before it when the gap
        // runs past its end.
        let x = if last > first {
            cum.get(first as usize + 1)
                .map_or(cum[cum.len() - 1] as f64, |c| *c as f64)
        } else {
            iterations_at(&cum, counts, at)
        };
        points.push((x, at as f64));
        points.push((x, stop as f64));
    }
    let bins = (span / BIN_NS) as usize;
    let every = bins.div_ceil(TRACE_BIN_POINTS).max(1);
    let inside = |t: u64| {
        gaps.iter()
            .any(|g| t >= g.0 && t <= g.0.saturating_add(g.1))
    };
    for b in (0..=bins).step_by(every).chain([bins]) {
        let t = b as u64 * BIN_NS;
        if b < cum.len() && !inside(t) {
            points.push((cum[b] as f64, t as f64));
        }
    }
    points.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.total_cmp(&b.0)));
    points.dedup();
    (points, end)
}

/// Fig. 1 for one CPUTest result with a trace: time against iteration number, one
/// line per CPU.
fn cputest_figure(label: &str, k: usize, m: &Measured<Steal>) -> Option<Figure> {
    let mut notes = Vec::new();
    let lines: Vec<TraceLine> = m
        .result
        .cpus
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let t = c.trace.as_ref()?;
            let (points, end) = trace_points(t);
            let name = format!("cpu {}", c.cpu.map_or(format!("#{i}"), |c| c.to_string()));
            if let Some(end) = end {
                notes.push(format!(
                    "{name}: drawn up to {:.1} ms (its first {MAX_TRACE_GAPS} gaps)",
                    end as f64 / 1e6
                ));
            }
            if t.gaps_left_out > 0 {
                notes.push(format!(
                    "{name}: {} gaps left out of the trace by its bound",
                    t.gaps_left_out
                ));
            }
            (!points.is_empty()).then_some(TraceLine {
                name,
                points,
                steps: false,
            })
        })
        .collect();
    if lines.is_empty() {
        return None;
    }
    let threshold = m.result.threshold_ns as f64 / 1e6;
    let who = format!("{} ({})", m.from.tenant, m.from.role.name());
    Some(Figure {
        stem: format!("cputest_trace_{k}"),
        chart: TraceChart {
            title: format!(
                "{label}: CPUTest timestamp trace, {who}, round {} (Fig. 1)",
                m.from.rep
            ),
            x_label: "loop iteration".into(),
            x_unit: DisplayUnit::NONE,
            y_label: format!("time (vertical jumps: gaps > {threshold} ms)"),
            y_unit: DisplayUnit::NANOSECONDS,
            log_y: false,
            lines,
            marks: Vec::new(),
            reference: None,
        },
        note: (!notes.is_empty()).then(|| format!("cputest_trace_{k}: {}", notes.join("; "))),
    })
}

/// Fig. 9 for one RTT series: RTT by probe number, log y; the dropped first probes
/// apart, lost probes marked at the top.
fn rtt_figure(label: &str, k: usize, m: &Measured<Rtt>) -> Option<Figure> {
    let r = &m.result;
    let skip = usize::try_from(r.skip)
        .unwrap_or(usize::MAX)
        .min(r.log.len());
    let answered = |probes: &[super::results::Probe]| -> Vec<(f64, f64)> {
        probes
            .iter()
            .filter_map(|p| Some((p.seq as f64, p.rtt_ns? as f64)))
            .collect()
    };
    let mode = r.mode.label();
    let mut lines = vec![TraceLine {
        name: format!("RTT, {mode} (kept probes)"),
        points: answered(&r.log[skip..]),
        steps: false,
    }];
    let dropped = answered(&r.log[..skip]);
    if !dropped.is_empty() {
        lines.push(TraceLine {
            name: format!("first {skip} probes (dropped from the statistics)"),
            points: dropped,
            steps: false,
        });
    }
    lines.retain(|l| !l.points.is_empty());
    if lines.is_empty() {
        return None;
    }
    let lost: Vec<(f64, Option<f64>)> = r
        .log
        .iter()
        .filter(|p| p.rtt_ns.is_none())
        .map(|p| (p.seq as f64, None))
        .collect();
    Some(Figure {
        stem: format!("rtt_series_{k}"),
        chart: TraceChart {
            title: format!(
                "{label}: RTT series, {mode}, {} → {}, round {} (Fig. 9)",
                m.from.tenant, r.target, m.from.rep
            ),
            x_label: "probe number".into(),
            x_unit: DisplayUnit::NONE,
            y_label: format!("round-trip time, {mode}"),
            y_unit: DisplayUnit::NANOSECONDS,
            log_y: true,
            lines,
            marks: vec![TraceMarks {
                name: "lost probes (at the top)".into(),
                points: lost,
            }],
            reference: None,
        },
        note: None,
    })
}

/// Figs 5/6 for one round: one second of each load stream's fine-grained series,
/// the link rate as the reference.
fn fine_figure(label: &str, rep: u32, loads: &[&Measured<LoadResult>]) -> Option<Figure> {
    let mut lines = Vec::new();
    let mut link = None;
    for m in loads {
        for (i, s) in m.result.load.streams.iter().enumerate() {
            link = link.or(s.buffer_bursts.as_ref().map(|b| b.link_bps));
            let Some(f) = &s.fine else { continue };
            let Some(t0) = f.points.first().map(|p| p.t_ns) else {
                continue;
            };
            let points: Vec<(f64, f64)> = f
                .points
                .iter()
                .take_while(|p| p.t_ns.saturating_sub(t0) < FINE_WINDOW_NS)
                .map(|p| (p.t_ns as f64, p.bps))
                .collect();
            let stream = if m.result.load.streams.len() > 1 {
                format!(" stream {i}")
            } else {
                String::new()
            };
            lines.push(TraceLine {
                name: format!(
                    "{}{stream} (per {} KiB received)",
                    m.result.protocol(),
                    f.grain_bytes / 1024
                ),
                points,
                steps: false,
            });
        }
    }
    if lines.is_empty() {
        return None;
    }
    Some(Figure {
        stem: format!("fine_throughput_round_{rep}"),
        chart: TraceChart {
            title: format!(
                "{label}: fine-grained throughput, first second, round {rep} (Figs 5/6)"
            ),
            x_label: "time since the stream's first arrival".into(),
            x_unit: DisplayUnit::NANOSECONDS,
            y_label: "throughput".into(),
            y_unit: DisplayUnit::BITS_PER_SECOND,
            log_y: false,
            lines,
            marks: Vec::new(),
            reference: link.map(|l| ("full link rate".to_string(), l)),
        },
        note: None,
    })
}

/// Figs 10/11 for one Badabing run: the one-way delay of each probed slot and the
/// max_owd estimate over time, lossy slots marked.
fn badabing_figure(label: &str, k: usize, m: &Measured<Badabing>) -> Option<Figure> {
    let b = &m.result;
    let owd: Vec<(f64, f64)> = b
        .series
        .iter()
        .filter_map(|s| Some((s.t_ns as f64, s.owd_ns? as f64)))
        .collect();
    let max_owd: Vec<(f64, f64)> = b
        .series
        .iter()
        .filter_map(|s| Some((s.t_ns as f64, s.max_owd_ns? as f64)))
        .collect();
    let lossy: Vec<(f64, Option<f64>)> = b
        .series
        .iter()
        .filter(|s| s.lossy)
        .map(|s| (s.t_ns as f64, s.owd_ns.map(|o| o as f64)))
        .collect();
    let relative = if b.owd_relative {
        "one-way delay above the smallest seen (no clock sync needed)"
    } else {
        "one-way delay"
    };
    let mut lines = vec![TraceLine {
        name: "one-way delay of the probe".into(),
        points: owd,
        steps: false,
    }];
    if !max_owd.is_empty() {
        lines.push(TraceLine {
            name: "max_owd estimate".into(),
            points: max_owd,
            steps: true,
        });
    }
    lines.retain(|l| !l.points.is_empty());
    if lines.is_empty() {
        return None;
    }
    Some(Figure {
        stem: format!("badabing_owd_{k}"),
        chart: TraceChart {
            title: format!(
                "{label}: Badabing one-way delay and max_owd, {}, round {} (Figs 10/11)",
                m.from.tenant, m.from.rep
            ),
            x_label: "time".into(),
            x_unit: DisplayUnit::NANOSECONDS,
            y_label: relative.into(),
            y_unit: DisplayUnit::NANOSECONDS,
            log_y: false,
            lines,
            marks: vec![TraceMarks {
                name: "lossy slots (all packets lost: at the top)".into(),
                points: lossy,
            }],
            reference: None,
        },
        note: None,
    })
}

/// At most [`MAX_FIGURES`] figures of one kind, with a note naming what was left out.
fn capped(kind: &str, all: Vec<Figure>, notes: &mut Vec<String>) -> Vec<Figure> {
    if all.len() > MAX_FIGURES {
        notes.push(format!(
            "{kind}: figures drawn for the first {MAX_FIGURES} of {} results (the tables have all)",
            all.len()
        ));
    }
    all.into_iter().take(MAX_FIGURES).collect()
}

/// Every Wang & Ng figure of a run labelled `label`, and notes on what they leave
/// out.
pub(crate) fn all(label: &str, w: &WangNg) -> (Vec<Figure>, Vec<String>) {
    let mut notes = Vec::new();
    let mut figures = Vec::new();
    let cputest = w
        .cputest
        .iter()
        .enumerate()
        .filter_map(|(k, m)| cputest_figure(label, k + 1, m))
        .collect();
    figures.extend(capped("CPUTest traces", cputest, &mut notes));
    let rtt = w
        .rtt
        .iter()
        .enumerate()
        .filter_map(|(k, m)| rtt_figure(label, k + 1, m))
        .collect();
    figures.extend(capped("RTT series", rtt, &mut notes));
    let mut reps: Vec<u32> = Vec::new();
    for m in &w.loads {
        if !reps.contains(&m.from.rep) {
            reps.push(m.from.rep);
        }
    }
    let fine = reps
        .iter()
        .filter_map(|rep| {
            let loads: Vec<&Measured<LoadResult>> =
                w.loads.iter().filter(|m| m.from.rep == *rep).collect();
            fine_figure(label, *rep, &loads)
        })
        .collect();
    figures.extend(capped("fine-grained throughput", fine, &mut notes));
    let badabing = w
        .badabing
        .iter()
        .enumerate()
        .filter_map(|(k, m)| badabing_figure(label, k + 1, m))
        .collect();
    figures.extend(capped("Badabing", badabing, &mut notes));
    for f in &mut figures {
        notes.extend(f.note.take());
    }
    (figures, notes)
}
