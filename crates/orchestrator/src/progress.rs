//! The run's progress bar: steps done of all, the current step, and the ETA.
//!
//! Drawn on stderr with indicatif, and only when stderr is a terminal and the user
//! did not ask for `--quiet`; otherwise every call is a no-op and the logs (through
//! `tracing`) say what happens.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Progress of a run over its plan.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar over `total` steps of which `done` are already complete (resume);
    /// hidden when `quiet` or when stderr is not a terminal.
    pub fn new(total: usize, done: usize, quiet: bool) -> Progress {
        let target = if quiet || !std::io::stderr().is_terminal() {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        };
        let bar = ProgressBar::with_draw_target(Some(total as u64), target);
        let style = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} steps  ETA {eta}  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_position(done as u64);
        // Resumed steps took no time now: start the ETA estimate from here.
        bar.reset_eta();
        bar.enable_steady_tick(Duration::from_millis(250));
        Progress { bar }
    }

    /// Shows the step being measured.
    pub fn step(&self, id: &str, level_label: &str) {
        self.bar.set_message(format!("{level_label}  ({id})"));
    }

    /// Counts one more step done.
    pub fn advance(&self) {
        self.bar.inc(1);
    }

    /// Prints a line above the bar (or to stderr when hidden) without garbling it.
    pub fn note(&self, line: &str) {
        if self.bar.is_hidden() {
            tracing::info!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
