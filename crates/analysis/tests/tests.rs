//! nnb-analysis's integration tests: one test binary (as ripgrep's `tests/tests.rs`),
//! so the crate and any shared helpers are linked once.

mod campaign;
mod command_runs;
mod conditions;
mod credits;
mod fixture;
#[cfg(unix)]
mod hostile;
mod latency_runs;
mod metal_gap;
mod plots;
mod receiver_drops;
mod report;
mod tables;
mod truth;
mod truth_audit;
mod wang_ng;
