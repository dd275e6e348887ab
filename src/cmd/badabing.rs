//! `nnb badabing`: Badabing's loss probe (Sommers et al., SIGCOMM 2005) as Wang & Ng
//! ran it between EC2 instances (seed 003, §VI): probes in random 5 ms slots towards
//! an `nnb serve` reflector, the estimator's loss frequency beside the probe loss
//! rate, and the one-way delay series with its max_owd estimate (their Fig. 11).
//! One-way delays are relative to the smallest one seen: no clock sync is needed.

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use nnb_netlat::badabing::{self, BadabingConfig, BadabingReport};
use nnb_units::{format_ns, parse_bytes, parse_duration, parse_positive_duration};

use super::common::{environment, resolve, stop_on_signal, WithEnvironment};
use crate::exit::usage;
use crate::out::Out;
use crate::table::{right, table};

/// Arguments of `nnb badabing`.
#[derive(Debug, clap::Args)]
pub(crate) struct BadabingArgs {
    /// Reflector to probe, HOST:PORT (an `nnb serve` reflector of this version or
    /// later: it stamps its receive times).
    #[arg(value_name = "HOST:PORT")]
    target: String,
    /// Probing time (Wang & Ng: one minute per pair).
    #[arg(long, default_value = "60s", value_parser = parse_positive_duration, value_name = "DURATION")]
    duration: Duration,
    /// Slot length (the seed's 5 ms).
    #[arg(long, default_value = "5ms", value_parser = parse_positive_duration, value_name = "DURATION")]
    slot: Duration,
    /// Probability that a slot carries a probe (the seed's 0.3).
    #[arg(long, default_value_t = badabing::DEFAULT_PROBABILITY, value_name = "P")]
    probability: f64,
    /// Packets per probe, sent back to back (the seed's 3).
    #[arg(long, default_value_t = badabing::DEFAULT_PACKETS, value_name = "N")]
    packets: u32,
    /// A probed slot within this of a lost packet is lossy (the seed's τ, 50 ms).
    #[arg(long, default_value = "50ms", value_parser = parse_duration, value_name = "DURATION")]
    tau: Duration,
    /// A probed slot whose one-way delay exceeds max_owd × (1 − alpha) is lossy (the
    /// seed's 0.005).
    #[arg(long, default_value_t = badabing::DEFAULT_ALPHA, value_name = "ALPHA")]
    alpha: f64,
    /// UDP payload bytes per packet, nnb's 32-byte header and 8-byte receive stamp
    /// included.
    #[arg(long, default_value_t = badabing::DEFAULT_MSG_SIZE, value_parser = parse_bytes, value_name = "BYTES")]
    msg_size: usize,
    /// Seed of the slot draw; the same seed probes the same slots. Default: a fresh
    /// one, printed (and in --json) so the run can be repeated.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Pin the sending thread to this CPU.
    #[arg(long, value_name = "CPU")]
    pin: Option<usize>,
    /// One JSON object on stdout (with every probed slot's one-way delay and
    /// max_owd estimate in `series`) instead of tables.
    #[arg(long)]
    json: bool,
}

/// Runs `nnb badabing`.
pub(crate) fn run(args: BadabingArgs, out: &mut Out) -> anyhow::Result<()> {
    if let Some(cpu) = args.pin {
        super::common::check_available("--pin", &[cpu])?;
    }
    let target = resolve("TARGET", &args.target)?;
    let cfg = BadabingConfig {
        duration: args.duration,
        slot: args.slot,
        probability: args.probability,
        packets: args.packets,
        msg_size: args.msg_size,
        tau: args.tau,
        alpha: args.alpha,
        pin: args.pin,
        ..BadabingConfig::new(target, args.seed.unwrap_or_else(badabing::fresh_seed))
    };
    cfg.validate().map_err(|e| usage(e.to_string()))?;
    let stop = stop_on_signal()?;
    let env = environment();
    if !args.json {
        eprintln!(
            "badabing to {target} for {:?}: {:?} slots, probe probability {}, {} packets per \
             probe, seed {}",
            cfg.duration, cfg.slot, cfg.probability, cfg.packets, cfg.seed
        );
    }
    let report = badabing::run(&cfg, &stop).context("badabing")?;
    if args.json {
        let json = WithEnvironment::closing(&report, env);
        writeln!(out, "{}", serde_json::to_string_pretty(&json)?)?;
    } else {
        print_human(out, &report)?;
    }
    Ok(())
}

fn print_human(out: &mut Out, r: &BadabingReport) -> std::io::Result<()> {
    let e = &r.estimate;
    let pct = |x: f64| format!("{:.3}%", 100.0 * x);
    let mut t = table(["", "count", "of", "share"]);
    t.add_row(vec![
        "loss frequency (lossy / probed slots)".into(),
        right(e.lossy_slots),
        right(e.probed_slots),
        right(pct(e.loss_frequency)),
    ]);
    t.add_row(vec![
        "probe loss rate (lost / probes)".into(),
        right(e.lost_probes),
        right(e.probes),
        right(pct(e.probe_loss_rate)),
    ]);
    t.add_row(vec![
        "packets lost".into(),
        right(e.packets_lost),
        right(e.packets_sent),
        right(pct(if e.packets_sent == 0 {
            0.0
        } else {
            e.packets_lost as f64 / e.packets_sent as f64
        })),
    ]);
    writeln!(out, "{t}")?;
    let mut owds: Vec<u64> = e.series.iter().filter_map(|s| s.owd_ns).collect();
    owds.sort_unstable();
    if let Some(&max) = owds.last() {
        writeln!(
            out,
            "one-way delay (relative to the smallest seen, no clock sync): median {}, max {}",
            format_ns(owds[owds.len() / 2] as f64),
            format_ns(max as f64)
        )?;
    }
    let mut estimates: Vec<u64> = e.series.iter().filter_map(|s| s.max_owd_ns).collect();
    estimates.dedup();
    let shown: Vec<String> = estimates
        .iter()
        .take(10)
        .map(|&d| format_ns(d as f64))
        .collect();
    writeln!(
        out,
        "max_owd estimates (one per loss, relative): {}{}",
        if shown.is_empty() {
            "none (no loss)".to_string()
        } else {
            shown.join(", ")
        },
        if estimates.len() > 10 { ", ..." } else { "" }
    )?;
    writeln!(
        out,
        "seed {} ({} slots of {}; --json for every probed slot's delay)",
        r.seed,
        r.slots,
        format_ns(r.slot_ns as f64)
    )
}
