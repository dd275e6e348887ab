//! nnb-format's integration tests: one test binary (as ripgrep's `tests/tests.rs`),
//! so the crate and any shared helpers are linked once.

mod v1_runs;
mod v3_runs;
mod v5_runs;

/// The metric columns version 5 added (the disk and memory jobs' own figures and the
/// host-side utilisation): an older sample reads with them null and writes them back
/// as nulls.
const ADDED_IN_V5: [&str; 6] = [
    "iops",
    "rss_bytes",
    "host_cpu_pct",
    "host_mem_bytes",
    "host_iops",
    "host_net_bps",
];

/// The metric columns version 8 added (Wang & Ng's CPU share, RTT series and
/// Badabing figures): an older sample reads with them null and writes them back as
/// nulls.
const ADDED_IN_V8: [&str; 6] = [
    "cpu_share_pct",
    "rtt_min_ns",
    "rtt_max_ns",
    "rtt_std_ns",
    "loss_frequency_pct",
    "probe_loss_pct",
];

/// The metric columns version 9 added (the sink's own drops): an older sample reads
/// with them null and writes them back as nulls.
const ADDED_IN_V9: [&str; 1] = ["sink_drops"];

/// The metric columns version 10 added (the hops of a probe's reply TTL): an older
/// sample reads with them null and writes them back as nulls.
const ADDED_IN_V10: [&str; 1] = ["hops"];

/// The metric columns version 11 added (a command job's wall time and printed value):
/// an older sample reads with them null and writes them back as nulls.
const ADDED_IN_V11: [&str; 2] = ["command_wall_s", "command_value"];
