//! Look of every chart: canvas size, fonts, the series palette and the greys used for
//! grids, markers and reference lines. One place, so all charts of a report match.

use plotters::style::{FontFamily, IntoFont, RGBColor, TextStyle};

/// Canvas width in pixels.
pub(crate) const WIDTH: u32 = 900;
/// Canvas height in pixels.
pub(crate) const HEIGHT: u32 = 560;
/// Font size of the chart title, in SVG pixels.
pub(crate) const TITLE_FONT_PX: f64 = 20.0;
/// Font size of the axis titles.
pub(crate) const AXIS_FONT_PX: f64 = 16.0;
/// Font size of tick labels.
pub(crate) const TICK_FONT_PX: f64 = 14.0;
/// Font size of legend entries.
pub(crate) const LEGEND_FONT_PX: f64 = 14.0;
/// Font size of marker and reference-line labels.
pub(crate) const NOTE_FONT_PX: f64 = 13.0;

/// Grid lines.
pub(crate) const GRID: RGBColor = RGBColor(225, 225, 225);
/// Vertical markers (knees, `n/2 + 1`) and their labels.
pub(crate) const MARKER: RGBColor = RGBColor(90, 90, 90);
/// Horizontal reference lines (predictions).
pub(crate) const REFERENCE: RGBColor = RGBColor(20, 20, 20);

/// Series colours (Tableau 10): distinct, and distinguishable by most colour-blind
/// readers for the first few, which are the ones charts of two or three series use.
const PALETTE: [RGBColor; 10] = [
    RGBColor(0x1F, 0x77, 0xB4),
    RGBColor(0xFF, 0x7F, 0x0E),
    RGBColor(0x2C, 0xA0, 0x2C),
    RGBColor(0xD6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xBD),
    RGBColor(0x8C, 0x56, 0x4B),
    RGBColor(0xE3, 0x77, 0xC2),
    RGBColor(0x7F, 0x7F, 0x7F),
    RGBColor(0xBC, 0xBD, 0x22),
    RGBColor(0x17, 0xBE, 0xCF),
];

/// Colour of the `i`-th series (cycling after ten).
pub(crate) fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// The `i`-th series colour as it appears in the SVG (`#1F77B4`), so that readers of
/// the SVG (tests, scripts) can find a series' elements.
pub fn series_color(i: usize) -> String {
    let RGBColor(r, g, b) = color(i);
    format!("#{r:02X}{g:02X}{b:02X}")
}

/// A sans-serif font of `px` SVG pixels (plotters writes `font-size = size / 1.24`).
pub(crate) fn font(px: f64) -> TextStyle<'static> {
    (FontFamily::SansSerif, px * 1.24).into_font().into()
}
