//! CPU side of nnb: where threads can run (topology, placement), how time is read
//! (TSC clock), what they run (workloads), and the measurements built from them
//! (pinned burner, thread sweeps, steal/hiccup detection and its CPUTest trace, SMT
//! probe), and what a job ran under (steal, uptime, effective frequency).
//!
//! This crate knows nothing of async runtimes, HTTP or clouds: the timed loops run
//! on plain pinned threads.

pub mod burner;
pub mod clock;
pub mod conditions;
pub mod cputrace;
pub mod disk;
pub mod env;
pub mod freq;
pub mod memload;
pub mod pairs;
pub mod placement;
pub mod session;
pub mod smt_probe;
pub mod steal;
pub mod sweep;
pub mod topology;
pub mod tsc_sync;
pub mod workload;
