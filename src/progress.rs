//! How `nnb run` shows its progress: the library reports events
//! ([`nnb_controller::progress::Progress`]), this module draws them.
//!
//! On a terminal an indicatif bar (steps done of all, the current step, the ETA);
//! elsewhere (a file, a pipe, CI) one plain line per step, without escape codes;
//! with `--quiet` only the notes (warnings, failed attempts). Everything goes to
//! stderr, so stdout keeps the summary alone.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use nnb_controller::progress::Progress;
use nnb_controller::results::{Sample, SampleStatus};
use nnb_experiment::plan::Step;
use nnb_format::Role;

/// The renderer for this run: none beyond notes when `quiet`, a bar on a
/// terminal, plain lines elsewhere.
pub(crate) fn for_run(quiet: bool) -> Arc<dyn Progress> {
    if quiet {
        Arc::new(NotesOnly)
    } else if crate::term::stderr_is_terminal() {
        Arc::new(Bar::new())
    } else {
        Arc::new(Lines::default())
    }
}

/// `--quiet`: only the notes, one line each.
#[derive(Debug)]
struct NotesOnly;

impl Progress for NotesOnly {
    fn note(&self, line: &str) {
        eprintln!("{line}");
    }
}

/// One plain line per step: position, step id, level, repetition, the test
/// tenant's value and the time the step took.
#[derive(Debug, Default)]
struct Lines {
    total: AtomicUsize,
    done: AtomicUsize,
}

impl Progress for Lines {
    fn start(&self, total: usize, done: usize) {
        self.total.store(total, Ordering::Relaxed);
        self.done.store(done, Ordering::Relaxed);
    }

    fn step_done(&self, step: &Step, records: &[Sample], elapsed: Duration) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        eprintln!(
            "{}",
            step_line(
                done,
                self.total.load(Ordering::Relaxed),
                step,
                records,
                elapsed
            )
        );
    }

    fn note(&self, line: &str) {
        eprintln!("{line}");
    }
}

/// `[3/12] busy/neighbors=2/rep=1 level neighbors=2 rep 1: runtime_s 512.3 ms (1.20 s)`.
fn step_line(
    done: usize,
    total: usize,
    step: &Step,
    records: &[Sample],
    elapsed: Duration,
) -> String {
    let warmup = if step.warmup { " (warm-up)" } else { "" };
    format!(
        "[{done}/{total}] {} level {} rep {}{warmup}: {} ({:.2} s)",
        step.id,
        step.level_label,
        step.rep,
        outcome(records),
        elapsed.as_secs_f64()
    )
}

/// The test tenant's primary metric, or why the step failed.
fn outcome(records: &[Sample]) -> String {
    let Some(r) = records
        .iter()
        .find(|r| r.role == Role::Test)
        .or_else(|| records.first())
    else {
        return "no record".to_string();
    };
    match (&r.status, &r.metric, r.value) {
        (SampleStatus::Failed, _, _) => {
            format!("failed: {}", r.error.as_deref().unwrap_or("unknown error"))
        }
        (_, Some(metric), Some(value)) => format!("{} {}", metric.name(), metric.format(value)),
        _ => "ok".to_string(),
    }
}

/// The indicatif bar on stderr.
#[derive(Debug)]
struct Bar {
    bar: ProgressBar,
}

impl Bar {
    fn new() -> Bar {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} steps  ETA {eta}  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        Bar { bar }
    }
}

impl Progress for Bar {
    fn start(&self, total: usize, done: usize) {
        self.bar.set_length(total as u64);
        self.bar.set_position(done as u64);
        // Resumed steps took no time now: start the ETA estimate from here.
        self.bar.reset_eta();
        self.bar.enable_steady_tick(Duration::from_millis(250));
    }

    fn step(&self, step: &Step) {
        self.bar
            .set_message(format!("{}  ({})", step.level_label, step.id));
    }

    fn step_done(&self, _step: &Step, _records: &[Sample], _elapsed: Duration) {
        self.bar.inc(1);
    }

    fn note(&self, line: &str) {
        self.bar.println(line);
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_line_is_plain_and_names_step_level_rep_value_and_time() {
        let step = Step {
            lifted: Vec::new(),
            id: "busy/neighbors=2/rep=3".to_string(),
            group: nnb_format::StepGroup::Busy,
            level: 2.0,
            level_label: "neighbors=2".to_string(),
            rep: 3,
            warmup: false,
            present: Vec::new(),
            background: Vec::new(),
            continuous: false,
            measure: Vec::new(),
            estimate: None,
            technology: None,
            start: None,
        };
        let line = step_line(4, 12, &step, &[], Duration::from_millis(1500));
        assert_eq!(
            line,
            "[4/12] busy/neighbors=2/rep=3 level neighbors=2 rep 3: no record (1.50 s)"
        );
    }
}
