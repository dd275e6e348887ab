//! Criterion benches of the network side (being written).
fn main() {}
