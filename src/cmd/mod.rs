//! One module per subcommand: its clap arguments and its `run` function.

pub mod agent;
#[cfg(feature = "analysis")]
pub mod analyze;
#[cfg(feature = "aws")]
pub mod aws;
pub mod common;
pub mod cpu;
#[cfg(feature = "aws")]
pub mod fetch;
pub mod latency;
pub mod load;
#[cfg(feature = "controller")]
pub mod run;
#[cfg(feature = "controller")]
pub mod schema;
pub mod serve;
pub mod steal;
pub mod topo;
