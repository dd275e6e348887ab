//! Analysis of nnb results: reads `results/<run-id>/` directories (the format in
//! `docs/results-format.md`) and nothing else, and turns them into tables and plots.
//!
//! - [`read`]: reads run directories into typed polars data frames (tolerating a torn last line);
//! - [`table`]: one table type rendered as terminal text, Markdown, CSV and JSON;
//! - [`tables`]: degradation, thread-sweep knees, isolation, latency vs load, throughput;
//! - [`plot`]: SVG charts with plotters (lines, boxplots, HDR percentile plots);
//! - [`wang_ng`]: Wang & Ng's instruments (CPUTest, RTT series, fine-grained throughput,
//!   buffer bursts, TCP_INFO, Badabing) and the per-pair table;
//! - [`report`]: everything a run supports, written to a directory with an index;
//! - [`campaign`]: distributions across the rounds of a campaign (or runs given
//!   together): per-round, per-pair and spread tables, CDFs and time series.

pub mod campaign;
pub mod plot;
pub mod read;
pub mod report;
pub mod table;
pub mod tables;
pub mod wang_ng;
