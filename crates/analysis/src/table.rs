//! One table type with its renderings: Markdown, CSV and JSON here, and the terminal in
//! the `nnb` binary (with the look of every nnb command), so each analysis is written
//! once and read anywhere.

use serde_json::{json, Map, Value};

/// One cell of a [`Table`].
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// Text, left-aligned.
    Text(String),
    /// An integer, right-aligned.
    Int(i64),
    /// A number shown with `decimals` digits after the point (JSON and CSV keep the full value).
    Num {
        /// The value.
        value: f64,
        /// Digits shown after the point in terminal and Markdown output.
        decimals: usize,
    },
    /// No value (shown as `-` on the terminal and in Markdown, empty in CSV, null in JSON).
    Empty,
}

/// A table: named columns, rows of cells and notes printed under it.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// File stem for reports, e.g. `degradation`.
    pub name: String,
    /// Title shown above the table.
    pub title: String,
    /// Column headers.
    pub columns: Vec<String>,
    /// Rows, each as long as `columns`.
    pub rows: Vec<Vec<Cell>>,
    /// Notes shown under the table (method, caveats, what was left out).
    pub notes: Vec<String>,
}

impl Cell {
    /// A text cell.
    pub fn text(s: impl Into<String>) -> Cell {
        Cell::Text(s.into())
    }

    /// A number with `decimals` digits shown; NaN and infinities become [`Cell::Empty`].
    pub fn num(value: f64, decimals: usize) -> Cell {
        if value.is_finite() {
            Cell::Num { value, decimals }
        } else {
            Cell::Empty
        }
    }

    /// A number cell, or [`Cell::Empty`] for `None`.
    pub fn opt(value: Option<f64>, decimals: usize) -> Cell {
        value.map_or(Cell::Empty, |v| Cell::num(v, decimals))
    }

    /// Whether the cell holds a number (right-aligned).
    pub fn is_number(&self) -> bool {
        matches!(self, Cell::Int(_) | Cell::Num { .. })
    }

    /// The cell as people read it: rounded numbers, `-` for nothing.
    pub fn display(&self) -> String {
        match self {
            Cell::Text(s) => s.clone(),
            Cell::Int(i) => i.to_string(),
            Cell::Num { value, decimals } => format!("{value:.decimals$}"),
            Cell::Empty => "-".to_string(),
        }
    }

    /// The cell for machines: full precision, empty for nothing.
    fn raw(&self) -> String {
        match self {
            Cell::Text(s) => s.clone(),
            Cell::Int(i) => i.to_string(),
            Cell::Num { value, .. } => value.to_string(),
            Cell::Empty => String::new(),
        }
    }

    /// The cell as a JSON value (null for nothing).
    fn json(&self) -> Value {
        match self {
            Cell::Text(s) => Value::String(s.clone()),
            Cell::Int(i) => json!(i),
            Cell::Num { value, .. } => {
                serde_json::Number::from_f64(*value).map_or(Value::Null, Value::Number)
            }
            Cell::Empty => Value::Null,
        }
    }
}

impl Table {
    /// Whether every filled cell of column `c` is a number (then it is right-aligned).
    pub fn numeric_column(&self, c: usize) -> bool {
        let mut cells = self
            .rows
            .iter()
            .filter_map(|r| r.get(c))
            .filter(|cell| !matches!(cell, Cell::Empty))
            .peekable();
        cells.peek().is_some() && cells.all(Cell::is_number)
    }

    /// A GitHub-flavoured Markdown table under a `###` title, notes as a list.
    pub fn markdown(&self) -> String {
        let escape = |s: &str| s.replace('|', "\\|").replace('\n', " ");
        let mut out = format!("### {}\n\n", escape(&self.title));
        let header: Vec<String> = self.columns.iter().map(|c| escape(c)).collect();
        out.push_str(&format!("| {} |\n", header.join(" | ")));
        let rule: Vec<&str> = (0..self.columns.len())
            .map(|c| if self.numeric_column(c) { "--:" } else { "---" })
            .collect();
        out.push_str(&format!("|{}|\n", rule.join("|")));
        for row in &self.rows {
            let cells: Vec<String> = row.iter().map(|c| escape(&c.display())).collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        if !self.notes.is_empty() {
            out.push('\n');
            for note in &self.notes {
                out.push_str(&format!("- {}\n", escape(note)));
            }
        }
        out
    }

    /// RFC 4180 CSV: a header line, then one line per row; full-precision numbers,
    /// fields holding a comma, quote or line break quoted (quotes doubled).
    pub fn csv(&self) -> String {
        fn field(s: &str) -> String {
            if s.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.to_string()
            }
        }
        let line = |cells: Vec<String>| {
            cells.iter().map(|c| field(c)).collect::<Vec<_>>().join(",") + "\r\n"
        };
        let mut out = line(self.columns.clone());
        for row in &self.rows {
            out.push_str(&line(row.iter().map(Cell::raw).collect()));
        }
        out
    }

    /// `{"name", "title", "columns", "rows": [{column: value}], "notes"}`, numbers at
    /// full precision, nothing as null.
    pub fn json(&self) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|row| {
                let mut m = Map::new();
                for (c, cell) in self.columns.iter().zip(row) {
                    m.insert(c.clone(), cell.json());
                }
                Value::Object(m)
            })
            .collect();
        json!({
            "name": self.name,
            "title": self.title,
            "columns": self.columns,
            "rows": rows,
            "notes": self.notes,
        })
    }
}
