//! The SVG charts, checked by parsing the SVG: one line (and one legend sample) per
//! series, legend labels, title and axis titles with units, tick labels that cover the
//! data (in value and in pixels), markers and reference lines; and the refusals: empty
//! input and NaN values.

use nnb_format::Metric;

use nnb_analysis::plot::{
    box_chart, line_chart, percentile_chart, series_color, BoxChart, DisplayUnit, LineChart,
    PercentileChart, PlotError, Series,
};

/// Font sizes the charts use (SVG pixels): title, axis titles, tick labels.
const TITLE_PX: &str = "20";
const AXIS_PX: &str = "16";
const TICK_PX: &str = "14";
/// Colours of vertical markers and of reference lines, as the SVG writes them.
const MARKER: &str = "#5A5A5A";
const REFERENCE: &str = "#141414";

/// A parsed SVG.
struct Svg {
    text: String,
}

/// A `<text>` element: its content and the attributes the tests need.
#[derive(Debug)]
struct Label {
    text: String,
    font_size: String,
    anchor: String,
    x: f64,
    y: f64,
}

impl Svg {
    fn new(text: String) -> Svg {
        roxmltree::Document::parse(&text).expect("charts are well-formed XML");
        Svg { text }
    }

    fn doc(&self) -> roxmltree::Document<'_> {
        roxmltree::Document::parse(&self.text).expect("well-formed")
    }

    fn labels(&self) -> Vec<Label> {
        self.doc()
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .map(|n| Label {
                text: n.text().unwrap_or("").trim().to_string(),
                font_size: n.attribute("font-size").unwrap_or("").to_string(),
                anchor: n.attribute("text-anchor").unwrap_or("").to_string(),
                x: n.attribute("x")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(f64::NAN),
                y: n.attribute("y")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(f64::NAN),
            })
            .collect()
    }

    fn texts_of_size(&self, size: &str) -> Vec<String> {
        self.labels()
            .into_iter()
            .filter(|l| l.font_size == size)
            .map(|l| l.text)
            .collect()
    }

    fn has_text(&self, text: &str) -> bool {
        self.labels().iter().any(|l| l.text == text)
    }

    /// Y tick labels (right-aligned, tick font) as (value, pixel y), top to bottom.
    fn y_ticks(&self) -> Vec<(f64, f64)> {
        let mut ticks: Vec<(f64, f64)> = self
            .labels()
            .into_iter()
            .filter(|l| l.font_size == TICK_PX && l.anchor == "end")
            .map(|l| (l.text.parse().expect("numeric y tick"), l.y))
            .collect();
        ticks.sort_by(|a, b| a.1.total_cmp(&b.1));
        ticks
    }

    /// X tick labels (centred, tick font) as (text, pixel x), left to right.
    fn x_ticks(&self) -> Vec<(String, f64)> {
        let mut ticks: Vec<(String, f64)> = self
            .labels()
            .into_iter()
            .filter(|l| l.font_size == TICK_PX && l.anchor == "middle")
            .map(|l| (l.text, l.x))
            .collect();
        ticks.sort_by(|a, b| a.1.total_cmp(&b.1));
        ticks
    }

    /// Elements of a tag with an attribute equal to a value.
    fn count(&self, tag: &str, attr: &str, value: &str) -> usize {
        self.doc()
            .descendants()
            .filter(|n| n.has_tag_name(tag) && n.attribute(attr) == Some(value))
            .count()
    }

    /// Points of the polylines stroked in `color`, each polyline as a list.
    fn polylines(&self, color: &str) -> Vec<Vec<(f64, f64)>> {
        self.doc()
            .descendants()
            .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some(color))
            .map(|n| {
                n.attribute("points")
                    .unwrap_or("")
                    .split_whitespace()
                    .filter_map(|p| p.split_once(','))
                    .map(|(x, y)| (x.parse().expect("x"), y.parse().expect("y")))
                    .collect()
            })
            .collect()
    }
}

fn runtime_chart() -> LineChart {
    let busy: Vec<(f64, f64)> = (0..=8).map(|n| (n as f64, 7.0 + 0.4 * n as f64)).collect();
    let idle: Vec<(f64, f64)> = (0..=8).map(|n| (n as f64, 7.0 + 0.01 * n as f64)).collect();
    let band = |pts: &[(f64, f64)]| Some(pts.iter().map(|(_, y)| (y - 0.2, y + 0.2)).collect());
    LineChart {
        title: "m5.large: test node runtime vs neighbors".into(),
        x_label: "neighbors".into(),
        x_unit: DisplayUnit::NONE,
        y_label: "test node runtime".into(),
        y_unit: DisplayUnit::SECONDS,
        series: vec![
            Series {
                name: "busy neighbors".into(),
                band: band(&busy),
                points: busy,
            },
            Series {
                name: "idle neighbors".into(),
                band: band(&idle),
                points: idle,
            },
        ],
        markers: vec![(5.0, "n/2 + 1 = 5".into())],
        log_x: false,
        y_from_zero: true,
    }
}

#[test]
fn line_chart_has_one_line_and_legend_entry_per_series_titles_and_covering_ticks() {
    let c = runtime_chart();
    let svg = Svg::new(line_chart(&c).unwrap());
    assert_eq!(svg.texts_of_size(TITLE_PX), vec![c.title.clone()]);
    let mut axis_titles = svg.texts_of_size(AXIS_PX);
    axis_titles.sort();
    assert_eq!(axis_titles, vec!["neighbors", "test node runtime (s)"]);
    for (i, s) in c.series.iter().enumerate() {
        assert!(svg.has_text(&s.name), "legend label {:?}", s.name);
        let lines = svg.polylines(&series_color(i));
        assert_eq!(lines.len(), 2, "series {i}: its line and its legend sample");
        let line = lines.iter().max_by_key(|l| l.len()).unwrap();
        assert_eq!(
            line.len(),
            s.points.len(),
            "series {i}: one vertex per point"
        );
        assert_eq!(
            svg.count("polygon", "fill", &series_color(i)),
            1,
            "series {i}: one CI band"
        );
        assert_eq!(
            svg.count("circle", "fill", &series_color(i)),
            s.points.len() + 1,
            "dots + legend dot"
        );
    }
    // y: starts at 0, the top tick is at or above the largest value (incl. the band)
    let y = svg.y_ticks();
    let (top, bottom) = (y.first().unwrap(), y.last().unwrap());
    assert_eq!(bottom.0, 0.0);
    assert!(top.0 >= 7.0 + 0.4 * 8.0 + 0.2, "top tick {top:?}");
    // in pixels too: every vertex of every line lies between the outer ticks
    let x = svg.x_ticks();
    assert_eq!(x.first().unwrap().0, "0");
    assert!(x.last().unwrap().0.parse::<f64>().unwrap() >= 8.0);
    for i in 0..2 {
        for (px, py) in svg.polylines(&series_color(i)).into_iter().flatten() {
            if py > top.1 + 30.0 {
                assert!(
                    py <= bottom.1 + 1.0
                        && px >= x.first().unwrap().1 - 1.0
                        && px <= x.last().unwrap().1 + 1.0
                );
            }
        }
    }
    // the marker: a dashed vertical line and its label
    assert!(svg.polylines(MARKER).len() > 3, "dashes of the marker");
    assert!(svg.has_text("n/2 + 1 = 5"));
}

#[test]
fn counts_on_the_x_axis_get_whole_ticks_only() {
    // Neighbors 0, 1, 2: a plain 1-2-5 grid would put ticks at 0.5 and 1.5.
    let mut c = runtime_chart();
    for s in &mut c.series {
        s.points.truncate(3);
        s.band = None;
    }
    c.markers.clear();
    let svg = Svg::new(line_chart(&c).unwrap());
    let labels: Vec<String> = svg.x_ticks().into_iter().map(|(l, _)| l).collect();
    assert_eq!(labels, ["0", "1", "2"]);
    // Fractional x data keep the fine grid.
    c.series[0].points[1].0 = 0.5;
    let svg = Svg::new(line_chart(&c).unwrap());
    assert!(svg.x_ticks().iter().any(|(l, _)| l == "0.5"));
}

#[test]
fn markers_at_the_same_x_get_their_own_rows() {
    let mut c = runtime_chart();
    c.markers = vec![
        (5.0, "knee: 4 → 5 threads".into()),
        (5.0, "n/2 + 1 = 5".into()),
    ];
    let svg = Svg::new(line_chart(&c).unwrap());
    let labels = svg.labels();
    let a = labels.iter().find(|l| l.text.starts_with("knee")).unwrap();
    let b = labels.iter().find(|l| l.text.starts_with("n/2")).unwrap();
    assert!(
        (a.y - b.y).abs() >= 13.0,
        "stacked, not overlapping: {a:?} {b:?}"
    );
}

#[test]
fn si_prefixes_go_into_the_axis_title() {
    let c = LineChart {
        title: "RTT vs load".into(),
        x_label: "aggregate neighbor load".into(),
        x_unit: DisplayUnit::BITS_PER_SECOND,
        y_label: "round-trip time".into(),
        y_unit: DisplayUnit::NANOSECONDS,
        series: vec![Series {
            name: "p99.9".into(),
            points: vec![(0.0, 40_000.0), (5e8, 80_000.0), (1.6e9, 310_000.0)],
            band: None,
        }],
        markers: vec![],
        log_x: false,
        y_from_zero: true,
    };
    let svg = Svg::new(line_chart(&c).unwrap());
    let mut axis_titles = svg.texts_of_size(AXIS_PX);
    axis_titles.sort();
    assert_eq!(
        axis_titles,
        vec!["aggregate neighbor load (Gbit/s)", "round-trip time (µs)"]
    );
    assert!(svg.y_ticks().first().unwrap().0 >= 310.0);
    assert!(svg.x_ticks().last().unwrap().0.parse::<f64>().unwrap() >= 1.6);
}

#[test]
fn log_x_uses_decades_and_refuses_non_positive_x() {
    let mut c = runtime_chart();
    c.log_x = true;
    c.markers.clear();
    for s in &mut c.series {
        for p in &mut s.points {
            p.0 = 2f64.powf(p.0);
        }
    }
    let svg = Svg::new(line_chart(&c).unwrap());
    let x: Vec<String> = svg.x_ticks().into_iter().map(|t| t.0).collect();
    assert_eq!(x.first().map(String::as_str), Some("1"));
    assert!(
        x.contains(&"10".to_string()) && x.contains(&"100".to_string()),
        "{x:?}"
    );
    assert!(x.last().unwrap().parse::<f64>().unwrap() >= 256.0);

    c.series[1].points[3].0 = 0.0;
    match line_chart(&c) {
        Err(PlotError::NonPositiveLogX { series, index, .. }) => {
            assert_eq!((series.as_str(), index), ("idle neighbors", 3))
        }
        other => panic!("expected NonPositiveLogX, got {other:?}"),
    }
}

#[test]
fn empty_input_is_an_error() {
    let mut c = runtime_chart();
    c.series.clear();
    assert!(matches!(line_chart(&c), Err(PlotError::Empty { .. })));
    let mut c = runtime_chart();
    c.series[0].points.clear();
    c.series[0].band = None;
    assert!(
        matches!(line_chart(&c), Err(PlotError::EmptySeries { series, .. }) if series == "busy neighbors")
    );
    let b = BoxChart {
        title: "t".into(),
        x_label: "x".into(),
        y_label: "y".into(),
        y_unit: DisplayUnit::NONE,
        groups: vec![],
        reference: None,
        y_from_zero: true,
    };
    assert!(matches!(box_chart(&b), Err(PlotError::Empty { .. })));
    let b = BoxChart {
        groups: vec![("a".into(), vec![1.0]), ("b".into(), vec![])],
        ..b
    };
    assert!(matches!(box_chart(&b), Err(PlotError::EmptySeries { series, .. }) if series == "b"));
    let p = PercentileChart {
        title: "t".into(),
        y_label: "y".into(),
        y_unit: DisplayUnit::NANOSECONDS,
        series: vec![],
    };
    assert!(matches!(percentile_chart(&p), Err(PlotError::Empty { .. })));
}

#[test]
fn nan_values_are_refused_with_their_position_but_nan_band_bounds_leave_a_gap() {
    let mut c = runtime_chart();
    c.series[1].points[4].1 = f64::NAN;
    match line_chart(&c) {
        Err(PlotError::NonFinite { series, index, .. }) => {
            assert_eq!((series.as_str(), index), ("idle neighbors", 4))
        }
        other => panic!("expected NonFinite, got {other:?}"),
    }
    let mut c = runtime_chart();
    c.series[0].points[0].0 = f64::INFINITY;
    assert!(matches!(
        line_chart(&c),
        Err(PlotError::NonFinite { index: 0, .. })
    ));

    // a band undefined at one point (a single repetition) is split around it
    let mut c = runtime_chart();
    if let Some(band) = &mut c.series[0].band {
        band[4] = (f64::NAN, f64::NAN);
    }
    let svg = Svg::new(line_chart(&c).unwrap());
    assert_eq!(svg.count("polygon", "fill", &series_color(0)), 2);

    let b = BoxChart {
        title: "t".into(),
        x_label: "x".into(),
        y_label: "y".into(),
        y_unit: DisplayUnit::NONE,
        groups: vec![("a".into(), vec![1.0, f64::NAN])],
        reference: None,
        y_from_zero: true,
    };
    assert!(matches!(
        box_chart(&b),
        Err(PlotError::NonFinite { index: 1, .. })
    ));
    let p = PercentileChart {
        title: "t".into(),
        y_label: "y".into(),
        y_unit: DisplayUnit::NANOSECONDS,
        series: vec![("a".into(), vec![(50.0, 1.0), (90.0, f64::NAN)])],
    };
    assert!(matches!(
        percentile_chart(&p),
        Err(PlotError::NonFinite { index: 1, .. })
    ));
}

fn throughput_chart() -> BoxChart {
    let many = |n: usize, centre: f64| {
        (0..n)
            .map(|i| centre * (0.9 + 0.01 * i as f64))
            .collect::<Vec<f64>>()
    };
    BoxChart {
        title: "m5.4xlarge: throughput per node by level".into(),
        x_label: "nodes".into(),
        y_label: "throughput per node".into(),
        y_unit: DisplayUnit::BITS_PER_SECOND,
        groups: vec![
            ("2".into(), vec![9.9e9, 9.96e9]),
            ("6".into(), many(6, 4.1e9)),
            ("12".into(), many(12, 2.05e9)),
        ],
        reference: Some(("predicted: host bw / 12 nodes".into(), 25e9 / 12.0)),
        y_from_zero: true,
    }
}

#[test]
fn box_chart_draws_boxes_points_for_small_groups_and_the_reference() {
    let c = throughput_chart();
    let svg = Svg::new(box_chart(&c).unwrap());
    let blue = series_color(0);
    // two boxes (>= 5 values) + the legend sample, filled translucent
    let boxes = svg
        .doc()
        .descendants()
        .filter(|n| {
            n.has_tag_name("rect")
                && n.attribute("fill") == Some(blue.as_str())
                && n.attribute("opacity") == Some("0.25")
        })
        .count();
    assert_eq!(boxes, 3);
    // the two values of the small group + the legend dot
    assert_eq!(svg.count("circle", "fill", &blue), 3);
    assert!(svg.has_text("value (levels with < 5 values)"));
    assert!(svg.has_text("median, quartiles, whiskers at 1.5 IQR"));
    assert!(
        svg.has_text("predicted: host bw / 12 nodes: 2.08 Gbit/s"),
        "{:?}",
        svg.texts_of_size("14")
    );
    assert!(
        svg.polylines(REFERENCE).len() > 3,
        "dashes of the reference line"
    );
    let x: Vec<String> = svg.x_ticks().into_iter().map(|t| t.0).collect();
    assert_eq!(x, vec!["2", "6", "12"]);
    assert!(svg
        .texts_of_size(AXIS_PX)
        .contains(&"throughput per node (Gbit/s)".to_string()));
    let y = svg.y_ticks();
    assert_eq!(y.last().unwrap().0, 0.0);
    assert!(y.first().unwrap().0 * 1e9 >= 9.96e9);
}

#[test]
fn box_chart_labels_every_kth_level_when_there_are_many() {
    let c = BoxChart {
        groups: (0..200)
            .map(|i| (format!("load={i}M"), vec![1.0 + i as f64; 6]))
            .collect(),
        reference: None,
        ..throughput_chart()
    };
    let svg = Svg::new(box_chart(&c).unwrap());
    let x = svg.x_ticks();
    assert!(x.len() >= 5 && x.len() <= 20, "{} labels", x.len());
    assert_eq!(x[0].0, "load=0M");
    let gaps = x.windows(2).map(|w| w[1].1 - w[0].1);
    assert!(
        gaps.clone().all(|g| g >= 8.0 * 0.6 * 14.0),
        "labels do not overlap"
    );
}

fn hdr_like(scale: f64) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = (0..=200)
        .map(|i| {
            let p = 100.0 * (1.0 - 10f64.powf(-(i as f64) / 40.0));
            (p, scale * (30_000.0 + 200.0 * i as f64))
        })
        .collect();
    pts.push((100.0, scale * 900_000.0));
    pts
}

#[test]
fn percentile_chart_has_a_nines_axis_and_a_line_per_series() {
    let c = PercentileChart {
        title: "RTT by percentile".into(),
        y_label: "round-trip time".into(),
        y_unit: DisplayUnit::NANOSECONDS,
        series: vec![
            ("load 0 bit/s".into(), hdr_like(1.0)),
            ("load 1.6 Gbit/s".into(), hdr_like(1.5)),
        ],
    };
    let svg = Svg::new(percentile_chart(&c).unwrap());
    let x: Vec<String> = svg.x_ticks().into_iter().map(|t| t.0).collect();
    assert_eq!(x, vec!["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"]);
    for (i, (name, _)) in c.series.iter().enumerate() {
        assert!(svg.has_text(name));
        assert_eq!(
            svg.polylines(&series_color(i)).len(),
            2,
            "line + legend sample"
        );
    }
    // the maxima (percentile 100) are rings at the right end, named in the legend
    assert!(svg.has_text("maximum (100%)"));
    let right = svg.x_ticks().last().unwrap().1;
    let rings = svg
        .doc()
        .descendants()
        .filter(|n| {
            n.has_tag_name("circle")
                && n.attribute("cx").and_then(|v| v.parse::<f64>().ok()) == Some(right)
        })
        .count();
    assert_eq!(rings, 2);
    assert!(svg
        .texts_of_size(AXIS_PX)
        .contains(&"round-trip time (ms)".to_string()));
    assert!(
        svg.y_ticks().first().unwrap().0 >= 1.35,
        "ticks reach the largest maximum"
    );

    let bad = PercentileChart {
        series: vec![("x".into(), vec![(101.0, 1.0)])],
        ..c
    };
    assert!(matches!(
        percentile_chart(&bad),
        Err(PlotError::PercentileOutOfRange { .. })
    ));
}

#[test]
fn units_format_values_with_one_prefix() {
    assert_eq!(DisplayUnit::NANOSECONDS.format(1500.0), "1.5 µs");
    assert_eq!(
        DisplayUnit::BITS_PER_SECOND.format(25e9 / 12.0),
        "2.08 Gbit/s"
    );
    assert_eq!(DisplayUnit::SECONDS.format(7.06), "7.06 s");
    assert_eq!(DisplayUnit::SECONDS.format(0.0123), "12.3 ms");
    assert_eq!(DisplayUnit::NONE.format(12.0), "12");
    assert_eq!(DisplayUnit::PERCENT.format(13.26), "13.3%");
    assert_eq!(
        Metric::RttP999Ns.quantity().display_unit(),
        DisplayUnit::NANOSECONDS
    );
    assert_eq!(
        Metric::RuntimeS.quantity().display_unit(),
        DisplayUnit::SECONDS
    );
}

/// Bytes on an axis as in the tables (E2): binary MiB, on ticks round in MiB. 250 to
/// 310 MiB from zero: a 1-2-5 step of at most 8 intervals is 50 MiB, so the ticks are
/// 0, 50, ..., 350 (decimal MB would have put 310 MiB, 325 MB, under a 350 MB tick).
#[test]
fn a_bytes_axis_is_in_binary_units_on_round_ticks() {
    let mib = 1024.0 * 1024.0;
    let c = BoxChart {
        title: "resident memory per level".into(),
        x_label: "neighbors".into(),
        y_label: "resident memory".into(),
        y_unit: Metric::RssBytes.quantity().display_unit(),
        groups: vec![
            ("0".into(), vec![250.0 * mib, 256.0 * mib]),
            ("1".into(), vec![300.0 * mib, 310.0 * mib]),
        ],
        reference: None,
        y_from_zero: true,
    };
    let svg = Svg::new(box_chart(&c).unwrap());
    assert!(
        svg.texts_of_size(AXIS_PX)
            .contains(&"resident memory (MiB)".to_string()),
        "{:?}",
        svg.texts_of_size(AXIS_PX)
    );
    let mut ticks: Vec<f64> = svg.y_ticks().into_iter().map(|t| t.0).collect();
    ticks.reverse();
    assert_eq!(
        ticks,
        vec![0.0, 50.0, 100.0, 150.0, 200.0, 250.0, 300.0, 350.0]
    );
    assert_eq!(DisplayUnit::BYTES.format(310.0 * mib), "310 MiB");
}
