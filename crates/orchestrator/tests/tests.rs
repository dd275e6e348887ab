//! nnb-orchestrator's integration tests: one test binary (as ripgrep's `tests/tests.rs`),
//! so the crate and any shared helpers are linked once.

mod agent_api;
mod experiment_errors;
mod plan_expansion;
mod provider_netns;
mod provider_static;
