//! A campaign's CDF (issue 26 item 3), checked against values worked by hand: the
//! function's steps and the points of the line the SVG draws.

use nnb_analysis::campaign::{cdf_chart, cdf_steps, ecdf, Measure};
use nnb_analysis::plot::{line_chart, series_color, DisplayUnit};

/// A measure of plain numbers.
fn measure(log_x: bool) -> Measure {
    Measure {
        name: "value".into(),
        unit: DisplayUnit::NONE,
        table: DisplayUnit::NONE.table(),
        decimals: 2,
        log_x,
        key: true,
    }
}

/// The points of the polylines stroked in `color`.
fn polylines(svg: &str, color: &str) -> Vec<Vec<(f64, f64)>> {
    let doc = roxmltree::Document::parse(svg).expect("well-formed SVG");
    doc.descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some(color))
        .map(|n| {
            n.attribute("points")
                .unwrap_or("")
                .split_whitespace()
                .filter_map(|p| p.split_once(','))
                .map(|(x, y)| (x.parse().unwrap(), y.parse().unwrap()))
                .collect()
        })
        .collect()
}

/// Pixel positions as fractions of their span: (p - first) / (last - first).
fn fractions(px: &[f64]) -> Vec<f64> {
    let (a, b) = (px[0], px[px.len() - 1]);
    px.iter().map(|p| (p - a) / (b - a)).collect()
}

#[test]
fn the_cdf_steps_at_each_value_to_i_over_n_in_the_function_and_the_svg() {
    // [3, 1, 2, 2]: 1 of 4 values is at most 1, 3 at most 2, 4 at most 3.
    let steps = ecdf(&[3.0, 1.0, 2.0, 2.0]);
    assert_eq!(steps, vec![(1.0, 0.25), (2.0, 0.75), (3.0, 1.0)]);
    let drawn = vec![
        (1.0, 0.0),
        (1.0, 0.25),
        (2.0, 0.25),
        (2.0, 0.75),
        (3.0, 0.75),
        (3.0, 1.0),
    ];
    assert_eq!(cdf_steps(&steps, 0.0), drawn);

    let lines = vec![("local".to_string(), vec![3.0, 1.0, 2.0, 2.0])];
    let (chart, note) = cdf_chart("CDF", &measure(false), &lines).unwrap();
    assert_eq!(note, None);
    assert!(!chart.log_x);
    assert_eq!(chart.series[0].points, drawn);
    let svg = line_chart(&chart).unwrap();
    let polys = polylines(&svg, &series_color(0));
    let line = polys
        .iter()
        .find(|p| p.len() == drawn.len())
        .unwrap_or_else(|| panic!("no polyline of {} points: {polys:?}", drawn.len()));
    // x: 1, 1, 2, 2, 3, 3 over 1..3; y: 0 .. 1, pixels growing downwards.
    let xs: Vec<f64> = line.iter().map(|p| p.0).collect();
    let ys: Vec<f64> = line.iter().map(|p| -p.1).collect();
    let px = 1.0 / (xs[5] - xs[0]).abs();
    let py = 1.0 / (ys[5] - ys[0]).abs();
    for ((got_x, got_y), (want_x, want_y)) in fractions(&xs)
        .into_iter()
        .zip(fractions(&ys))
        .zip(drawn.iter().map(|(x, y)| ((x - 1.0) / 2.0, *y)))
    {
        assert!(
            (got_x - want_x).abs() <= px,
            "x {got_x} vs {want_x}: {line:?}"
        );
        assert!(
            (got_y - want_y).abs() <= py,
            "y {got_y} vs {want_y}: {line:?}"
        );
    }
}

#[test]
fn a_log_axis_leaves_values_at_zero_left_of_it_and_starts_at_their_share() {
    // Loss frequencies (the seed's Fig 10 is log x): one round of four lost nothing.
    let lines = vec![("a".to_string(), vec![0.0, 0.1, 1.0, 10.0])];
    let (chart, note) = cdf_chart("CDF", &measure(true), &lines).unwrap();
    assert!(chart.log_x);
    assert_eq!(
        chart.series[0].points,
        vec![
            (0.1, 0.25),
            (0.1, 0.5),
            (1.0, 0.5),
            (1.0, 0.75),
            (10.0, 0.75),
            (10.0, 1.0)
        ]
    );
    assert!(note.unwrap().contains("1 value(s) at or below 0"));
    line_chart(&chart).unwrap();
    // Linear where the seed's is, unless the values span more than 100x.
    let wide = vec![("a".to_string(), vec![1.0, 500.0])];
    assert!(cdf_chart("CDF", &measure(false), &wide).unwrap().0.log_x);
    let narrow = vec![("a".to_string(), vec![1.0, 50.0])];
    assert!(!cdf_chart("CDF", &measure(false), &narrow).unwrap().0.log_x);
}
