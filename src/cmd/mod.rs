//! One module per subcommand: its clap arguments and its `run` function.

pub mod cpu;
pub mod latency;
pub mod load;
pub mod serve;
pub mod steal;
pub mod topo;
