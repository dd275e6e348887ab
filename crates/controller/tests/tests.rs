//! nnb-controller's integration tests: one test binary (as ripgrep's `tests/tests.rs`).

mod provider_checks;
mod agent_api;
mod provider_netns;
mod provider_static;
