//! Criterion benches of the CPU side (being written).
fn main() {}
