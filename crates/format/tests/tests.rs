//! nnb-format's integration tests: one test binary (as ripgrep's `tests/tests.rs`),
//! so the crate and any shared helpers are linked once.

mod v1_runs;
mod v3_runs;
