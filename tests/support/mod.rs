//! Helpers shared by the end-to-end tests.

pub(crate) mod agents;
#[cfg(feature = "aws")]
pub(crate) mod aws_agents;
pub(crate) mod cli;
pub(crate) mod desched;
pub(crate) mod exclusive;
pub(crate) mod moto;
pub(crate) mod netns;
pub(crate) mod runc;
