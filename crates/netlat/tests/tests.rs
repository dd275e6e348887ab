//! nnb-netlat's integration tests: one test binary (as ripgrep's `tests/tests.rs`),
//! so the crate and any shared helpers are linked once.

mod load_udp;
mod probe_neighbor;
mod probe_pingpong;
mod probe_ttl;
mod serve;
mod serve_garbage;
mod sink_scaling;
