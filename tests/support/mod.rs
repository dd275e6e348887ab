//! Helpers shared by the end-to-end tests.

pub mod agents;
pub mod cli;
pub mod moto;
pub mod netns;
