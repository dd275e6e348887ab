//! One module per subcommand: its clap arguments and its `run` function.

pub mod agent;
pub mod cpu;
pub mod latency;
pub mod load;
pub mod run;
pub mod schema;
pub mod serve;
pub mod steal;
pub mod topo;
