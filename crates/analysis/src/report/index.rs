//! The report's index: `index.md` (tables inline, plots as images) and a
//! self-contained `index.html` (tables as HTML tables, each SVG inlined and linked), the
//! runs and their notes at the top.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{RunInfo, Section};
use crate::table::{Cell, Table};

/// The runs of all sections, each once, in order of first appearance.
fn all_runs(sections: &[Section]) -> Vec<&RunInfo> {
    let mut runs: Vec<&RunInfo> = Vec::new();
    for r in sections.iter().flat_map(|s| &s.runs) {
        if !runs.iter().any(|seen| seen.run_id == r.run_id) {
            runs.push(r);
        }
    }
    runs
}

/// Every section's notes, for the top of the index.
fn all_notes(sections: &[Section]) -> Vec<&String> {
    sections.iter().flat_map(|s| &s.notes).collect()
}

/// A path as a URL/Markdown link (forward slashes).
fn link(path: &Path) -> String {
    path.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// `index.md`.
pub(crate) fn markdown(sections: &[Section]) -> String {
    let mut md = String::from("# nnb analysis report\n\n| run | label | experiment | scenario | directory |\n|---|---|---|---|---|\n");
    for r in all_runs(sections) {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            r.run_id,
            r.label,
            r.experiment_name.as_deref().unwrap_or("-"),
            r.scenario,
            r.dir.display()
        );
    }
    let notes = all_notes(sections);
    if !notes.is_empty() {
        md.push_str("\n**Notes**\n\n");
        for n in notes {
            let _ = writeln!(md, "- {n}");
        }
    }
    for s in sections {
        let _ = writeln!(md, "\n## {}\n", s.title);
        for t in &s.tables {
            md.push_str(&t.markdown());
            md.push('\n');
        }
        for p in &s.plots {
            let _ = writeln!(md, "![{}]({})\n", p.title, link(&p.file));
        }
    }
    md
}

/// Escapes text for HTML.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            other => out.push(other),
        }
    }
    out
}

/// A cell as HTML table text, and whether it is a number (right-aligned).
fn cell_text(cell: &Cell) -> (String, bool) {
    match cell {
        Cell::Text(t) => (esc(t), false),
        Cell::Int(i) => (i.to_string(), true),
        Cell::Num { value, decimals } => (format!("{value:.decimals$}"), true),
        Cell::Empty => ("–".into(), true),
    }
}

/// A [`Table`] as an HTML table with its title and notes.
fn html_table(t: &Table) -> String {
    let mut h = format!("<h3>{}</h3>\n<table>\n<tr>", esc(&t.title));
    for c in &t.columns {
        let _ = write!(h, "<th>{}</th>", esc(c));
    }
    h.push_str("</tr>\n");
    for row in &t.rows {
        h.push_str("<tr>");
        for cell in row {
            let (text, numeric) = cell_text(cell);
            let class = if numeric { " class=\"num\"" } else { "" };
            let _ = write!(h, "<td{class}>{text}</td>");
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
    for n in &t.notes {
        let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(n));
    }
    h
}

/// Page style: readable tables and plots that fit the window.
const STYLE: &str = "body{font-family:sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:0.5em 0 1em}th,td{border:1px solid #ccc;padding:3px 8px}\
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}\
.note{color:#555;font-size:0.9em;margin:0.2em 0}.notes{background:#fff8e1;padding:0.5em 1em;border-left:4px solid #f0b400}\
figure{margin:1em 0}figure svg{max-width:100%;height:auto}figcaption{font-size:0.9em;color:#555}";

/// `index.html`: self-contained (every SVG inlined), each SVG also linked by file name.
/// `svgs` holds each plot's SVG text by file.
pub(crate) fn html(sections: &[Section], svgs: &[(PathBuf, String)]) -> String {
    let mut h = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>nnb analysis report</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>nnb analysis report</h1>\n<table>\n<tr><th>run</th><th>label</th><th>experiment</th><th>scenario</th><th>directory</th></tr>\n"
    );
    for r in all_runs(sections) {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&r.run_id),
            esc(&r.label),
            esc(r.experiment_name.as_deref().unwrap_or("–")),
            r.scenario,
            esc(&r.dir.display().to_string())
        );
    }
    h.push_str("</table>\n");
    let notes = all_notes(sections);
    if !notes.is_empty() {
        h.push_str("<div class=\"notes\"><strong>Notes</strong>\n<ul>\n");
        for n in notes {
            let _ = writeln!(h, "<li>{}</li>", esc(n));
        }
        h.push_str("</ul>\n</div>\n");
    }
    for s in sections {
        let _ = writeln!(h, "<h2>{}</h2>", esc(&s.title));
        for t in &s.tables {
            h.push_str(&html_table(t));
        }
        for p in &s.plots {
            let href = esc(&link(&p.file));
            let svg = svgs
                .iter()
                .find(|(f, _)| *f == p.file)
                .map_or("", |(_, svg)| svg.as_str());
            let _ = writeln!(
                h,
                "<figure>\n<a href=\"{href}\">\n{svg}</a>\n<figcaption>{} — <a href=\"{href}\">{href}</a></figcaption>\n</figure>",
                esc(&p.title)
            );
        }
    }
    h.push_str("</body>\n</html>\n");
    h
}
