//! Network side of nnb: a versioned wire header, the `serve` reflector and sinks,
//! the ping-pong and open-loop latency probes, and the rate-paced UDP load generator.
//!
//! Measuring paths use plain threads with blocking or busy-polled sockets; no async
//! runtime runs inside a timed loop.

pub mod badabing;
pub mod clock;
pub mod grain;
pub mod hist;
pub mod load;
pub mod neighbor;
pub mod pacing;
pub mod probe;
pub mod report;
pub mod sampling;
pub mod sendbatch;
pub mod seq;
pub mod serve;
pub mod tcpinfo;
pub mod window;
pub mod wire;
