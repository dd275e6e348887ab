//! What the terminal allows: progress bars and colour only where a person watches.

use std::io::IsTerminal;

/// True when stderr is a terminal: progress may be drawn in place there; elsewhere
/// (a file, a pipe, CI) it is written as plain lines.
pub(crate) fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}

/// True when stderr may carry colour: a terminal, and `NO_COLOR` unset or empty
/// (<https://no-color.org>).
pub(crate) fn stderr_colour() -> bool {
    stderr_is_terminal() && std::env::var_os("NO_COLOR").map_or(true, |v| v.is_empty())
}
