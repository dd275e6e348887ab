//! Errors located in an experiment file, rendered the way compilers render them:
//! `file.toml:12:5: error: ...`, then the offending source line and a caret under
//! the span, so a person sees at once what to fix and where.

use std::fmt;
use std::ops::Range;

/// One error at a place in an experiment file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file as the user named it.
    pub file: String,
    /// 1-based line of the start of the span.
    pub line: usize,
    /// 1-based column (in characters) of the start of the span.
    pub column: usize,
    /// What is wrong, for a person.
    pub message: String,
    /// The source line the span starts on (without its newline).
    pub source_line: String,
    /// How many characters to underline (at least 1, at most to the end of the line).
    pub width: usize,
}

impl Diagnostic {
    /// Locates byte range `span` of `src` (clamped to the text) and builds the
    /// diagnostic for `message`.
    pub fn new(file: &str, src: &str, span: Range<usize>, message: impl Into<String>) -> Self {
        let start = floor_char_boundary(src, span.start.min(src.len()));
        let end = floor_char_boundary(src, span.end.clamp(start, src.len()));
        let line_start = src[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = src[start..].find('\n').map_or(src.len(), |i| start + i);
        let source_line = src[line_start..line_end].trim_end_matches('\r').to_string();
        let line = src[..start].matches('\n').count() + 1;
        let column = src[line_start..start].chars().count() + 1;
        let width = src[start..end.min(line_end)].chars().count().max(1);
        Diagnostic {
            file: file.to_string(),
            line,
            column,
            message: message.into(),
            source_line,
            width,
        }
    }
}

/// The largest char boundary of `s` at or before `i`.
fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let number = self.line.to_string();
        let gutter = " ".repeat(number.len());
        writeln!(
            f,
            "{}:{}:{}: error: {}",
            self.file, self.line, self.column, self.message
        )?;
        writeln!(f, "{gutter} |")?;
        writeln!(f, "{number} | {}", self.source_line)?;
        // Tabs before the caret keep their width so the caret lines up.
        let pad: String = self
            .source_line
            .chars()
            .take(self.column - 1)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        write!(f, "{gutter} | {pad}{}", "^".repeat(self.width))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locates_line_and_column_and_underlines_the_span() {
        let src = "name = \"x\"\nrepetitions = 0\n";
        let at = src.find('0').unwrap_or(0);
        let d = Diagnostic::new("e.toml", src, at..at + 1, "must be at least 1");
        assert_eq!((d.line, d.column, d.width), (2, 15, 1));
        let text = d.to_string();
        assert!(text.starts_with("e.toml:2:15: error: must be at least 1\n"));
        assert!(text.ends_with("  |               ^"), "{text}");
    }

    #[test]
    fn span_past_the_end_points_at_the_last_line() {
        let src = "a = 1";
        let d = Diagnostic::new("e.toml", src, 99..120, "boom");
        assert_eq!((d.line, d.column, d.width), (1, 6, 1));
    }
}
