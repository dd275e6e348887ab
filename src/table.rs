//! The one look of nnb's terminal tables: ruled above, below and under the header
//! only, numbers right-aligned, so every subcommand's output reads alike.

use comfy_table::{presets, Cell, CellAlignment, Table, TableComponent};

/// An empty table in nnb's style; set its header with `set_header` when the
/// columns are known only later.
pub(crate) fn styled() -> Table {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_HORIZONTAL_ONLY);
    for c in [
        TableComponent::HorizontalLines,
        TableComponent::MiddleIntersections,
        TableComponent::LeftBorderIntersections,
        TableComponent::RightBorderIntersections,
    ] {
        t.remove_style(c);
    }
    t
}

/// A table in nnb's style with these column headers.
pub(crate) fn table<T: Into<Cell>>(header: impl IntoIterator<Item = T>) -> Table {
    let mut t = styled();
    t.set_header(header);
    t
}

/// A right-aligned cell, for numbers.
pub(crate) fn right(s: impl ToString) -> Cell {
    Cell::new(s).set_alignment(CellAlignment::Right)
}
