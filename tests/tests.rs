//! nnb's end-to-end tests: one test binary (as ripgrep's `tests/tests.rs`), so the
//! helpers under `support/` are compiled once and every one of them is used.

mod support;

mod agent_clock;
mod agent_local;
mod agent_netns;
mod analyze_campaign;
mod analyze_cli;
mod aws_campaign;
mod aws_cli;
mod aws_staircase;
mod command_jobs;
mod cpu_burn_o0;
mod cpu_cli;
mod disk_cli;
mod ground_truth_delay;
mod ground_truth_isolation;
mod ground_truth_rate;
mod ground_truth_steal;
mod latency_cli;
mod load_cli;
mod memory_cli;
mod netns_harness;
mod pipe_cli;
mod placements_cli;
mod run_campaign;
mod run_interrupt;
mod run_local;
mod run_mirrored;
mod run_netns;
mod run_throughput_staircase;
mod runtime_podman;
mod runtime_runc;
mod serve_cli;
mod steal_cli;
mod technologies_matrix;
mod topo_cli;
mod wang_ng_badabing;
mod wang_ng_bursts;
mod wang_ng_cputest;
mod wang_ng_hops;
mod wang_ng_pair;
mod wang_ng_rtt;
mod wang_ng_tcp;
