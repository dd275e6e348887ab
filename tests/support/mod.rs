//! Helpers shared by the end-to-end tests.

pub(crate) mod agents;
pub(crate) mod cli;
pub(crate) mod desched;
pub(crate) mod exclusive;
pub(crate) mod moto;
pub(crate) mod netns;
