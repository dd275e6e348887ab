//! One module per subcommand: its clap arguments and its `run` function.

pub mod agent;
pub mod common;
#[cfg(feature = "analysis")]
pub mod analyze;
#[cfg(feature = "aws")]
pub mod aws;
pub mod cpu;
#[cfg(feature = "aws")]
pub mod fetch;
pub mod latency;
pub mod load;
pub mod run;
pub mod schema;
pub mod serve;
pub mod steal;
pub mod topo;
