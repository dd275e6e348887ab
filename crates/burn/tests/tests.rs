//! nnb-burn's integration tests: one test binary (as ripgrep's `tests/tests.rs`),
//! so the crate and any shared helpers are linked once.

mod disk;
mod duty;
mod memload;
mod pairs;
mod placement;
mod pool;
mod smt_probe;
mod topology;
