//! nnb-experiment's integration tests: one test binary (as ripgrep's `tests/tests.rs`).

mod bounds;
mod campaign_table;
mod command_keys;
mod continuous_loads;
mod credit_windows;
mod event_pool;
mod experiment_errors;
mod matrix_timing;
mod pair_suite;
mod plan_expansion;
mod technologies;
mod tenant_runtime;
