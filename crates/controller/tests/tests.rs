//! nnb-controller's integration tests: one test binary (as ripgrep's `tests/tests.rs`).

mod agent_api;
mod provider_checks;
mod provider_netns;
mod provider_static;
mod result_contract;
