//! One module per subcommand: its clap arguments and its `run` function.

pub(crate) mod agent;
#[cfg(feature = "analysis")]
pub(crate) mod analyze;
#[cfg(feature = "aws")]
pub(crate) mod aws;
pub(crate) mod badabing;
pub(crate) mod common;
pub(crate) mod cpu;
pub(crate) mod disk;
#[cfg(feature = "aws")]
pub(crate) mod fetch;
pub(crate) mod latency;
pub(crate) mod load;
pub(crate) mod memory;
pub(crate) mod placements;
pub(crate) mod rtt;
#[cfg(feature = "controller")]
pub(crate) mod run;
#[cfg(feature = "controller")]
pub(crate) mod schema;
pub(crate) mod serve;
pub(crate) mod steal;
pub(crate) mod topo;
