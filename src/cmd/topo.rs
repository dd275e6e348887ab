//! `nnb topo`: the CPU topology as nnb sees it (cores, SMT siblings, packages, NUMA
//! nodes, SMT ways), this machine's clock facts and hypervisor, and with `--probe` an
//! empirical check of the SMT siblings that a hypervisor may hide.
//!
//! `--sysfs-root DIR` reads the topology of a fixture tree instead of `/`; the clock
//! and hypervisor facts are then still this machine's, and labelled so.

use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use comfy_table::{presets, Cell, Table};

use crate::table::{right, table};
use nnb_burn::clock::{Clock, ClockInfo};
use nnb_burn::env::Environment;
use nnb_burn::placement::{allowed_cpus, parse_cpu_list, plan, PinStrategy};
use nnb_burn::smt_probe::{estimate_duration, probe, ProbeConfig, ProbeReport};
use nnb_burn::topology::{format_list, NumaNode, Topology, TopologySummary};
use serde::Serialize;

use crate::exit::usage;
use crate::out::Out;

/// CPU count the probe's cost is quoted for beside the real one (an m5.metal).
const REFERENCE_CPUS: usize = 96;

/// Arguments of `nnb topo`.
#[derive(Debug, clap::Args)]
pub(crate) struct TopoArgs {
    /// Read the topology under this root instead of / (DIR/sys/devices/system/...),
    /// e.g. a fixture tree. Clock and hypervisor facts stay this machine's.
    #[arg(long, value_name = "DIR")]
    pub sysfs_root: Option<PathBuf>,
    /// Machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Find SMT siblings empirically (pinned spins alone and in pairs) and report where
    /// the probe and sysfs disagree. Takes O(n^2) time in the CPUs probed; the
    /// estimate is printed first.
    #[arg(long, conflicts_with = "sysfs_root")]
    pub probe: bool,
    /// Trials per CPU pair; a majority of slowed trials makes a pair siblings.
    #[arg(long, default_value_t = nnb_burn::smt_probe::DEFAULT_TRIALS, requires = "probe")]
    pub probe_trials: usize,
    /// CPUs to probe, e.g. 0-7 [default: every allowed online CPU].
    #[arg(long, value_name = "LIST", requires = "probe")]
    pub probe_cpus: Option<String>,
}

/// Everything `--json` prints.
#[derive(Debug, Serialize)]
struct Report {
    /// The root read ("/" for this machine).
    sysfs_root: PathBuf,
    summary: TopologySummary,
    /// Online CPUs of each physical core, by global core index.
    cores: Vec<Vec<usize>>,
    /// Every CPU, online and offline.
    cpus: Vec<nnb_burn::topology::Cpu>,
    numa_nodes: Vec<NumaNode>,
    /// Clock and hypervisor facts, always of the machine nnb runs on.
    machine: Machine,
    /// The probe's report, with `--probe`.
    probe: Option<ProbeReport>,
}

/// Facts of the machine nnb runs on (not of a `--sysfs-root` tree).
#[derive(Debug, Serialize)]
struct Machine {
    /// "this machine", or a note that these facts are not the fixture's.
    describes: String,
    cpu_model: String,
    kernel: String,
    clocksource: String,
    hypervisor: Option<String>,
    clock: ClockInfo,
}

/// Runs `nnb topo`.
pub(crate) fn run(args: TopoArgs, out: &mut Out) -> anyhow::Result<()> {
    let topo = read_topology(args.sysfs_root.as_deref())?;
    let probe_config = args.probe.then(|| probe_config(&args, &topo)).transpose()?;
    let machine = machine_facts(&topo, args.sysfs_root.is_some());

    let probe = match probe_config {
        Some(config) => {
            announce_probe(&config);
            Some(probe(&topo, &config).context("SMT probe")?)
        }
        None => None,
    };

    let report = Report {
        sysfs_root: topo.sysfs_root.clone(),
        summary: topo.summary(),
        cores: topo.cores(),
        cpus: topo.cpus.clone(),
        numa_nodes: topo.numa_nodes.clone(),
        machine,
        probe,
    };
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        render_human(&report, &topo)?
    };
    Ok(out.write_all(text.as_bytes())?)
}

/// Reads the topology: a bad `--sysfs-root` is the user's mistake (exit 2), an
/// unreadable `/sys` is this machine's failure (exit 1).
fn read_topology(root: Option<&Path>) -> anyhow::Result<Topology> {
    match root {
        Some(root) => {
            if !root.is_dir() {
                return Err(usage(format!(
                    "--sysfs-root {}: no such directory",
                    root.display()
                )));
            }
            Topology::read(root).map_err(|e| {
                usage(format!(
                    "--sysfs-root {}: not a readable sysfs tree: {e}",
                    root.display()
                ))
            })
        }
        None => Topology::host().context("reading this machine's CPU topology"),
    }
}

/// The probe's settings from the flags: every allowed online CPU unless
/// `--probe-cpus` names some.
fn probe_config(args: &TopoArgs, topo: &Topology) -> anyhow::Result<ProbeConfig> {
    let allowed = allowed_cpus();
    let cpus = match &args.probe_cpus {
        Some(list) => {
            let cpus = parse_cpu_list(list).context("--probe-cpus")?;
            // Planning one thread per listed CPU checks each is present, online and
            // allowed, with placement's messages.
            let strategy = PinStrategy::List(cpus.clone());
            plan(topo, &strategy, cpus.len(), &allowed, false).context("--probe-cpus")?;
            cpus
        }
        None => topo
            .online()
            .map(|c| c.id)
            .filter(|id| allowed.contains(id))
            .collect(),
    };
    let mut config = ProbeConfig::new(cpus);
    config.trials = args.probe_trials;
    if config.trials == 0 {
        return Err(usage("--probe-trials must be at least 1"));
    }
    Ok(config)
}

/// Says on stderr, before starting, what the probe will cost here and on a large host.
fn announce_probe(config: &ProbeConfig) {
    let n = config.cpus.len();
    let here = estimate_duration(n, config.trials, config.spin);
    let reference = estimate_duration(REFERENCE_CPUS, config.trials, config.spin);
    eprintln!(
        "probing SMT siblings of {n} CPUs ({} x {} trials): about {} on an idle machine \
         ({} for {REFERENCE_CPUS} CPUs)",
        plural(n * n.saturating_sub(1) / 2, "pair"),
        config.trials,
        nnb_units::format_duration(here),
        nnb_units::format_duration(reference)
    );
}

/// Clock calibration, CPU model, kernel, clocksource and hypervisor of this machine.
fn machine_facts(topo: &Topology, fixture: bool) -> Machine {
    let env = Environment::capture(topo, env!("CARGO_PKG_VERSION"));
    Machine {
        describes: if fixture {
            "this machine, not the --sysfs-root tree".to_string()
        } else {
            "this machine".to_string()
        },
        cpu_model: env.cpu_model,
        kernel: env.kernel,
        clocksource: env.clocksource,
        hypervisor: env.hypervisor,
        clock: Clock::calibrate().info(),
    }
}

/// The human-readable report.
fn render_human(r: &Report, topo: &Topology) -> Result<String, fmt::Error> {
    let mut out = String::new();
    let s = &r.summary;
    let title = if r.sysfs_root == Path::new("/") {
        "CPU topology of this machine".to_string()
    } else {
        format!("CPU topology read under {}", r.sysfs_root.display())
    };
    writeln!(out, "{title}")?;
    let mut t = plain_table();
    let offline: Vec<usize> = topo
        .cpus
        .iter()
        .filter(|c| !c.online)
        .map(|c| c.id)
        .collect();
    let mut rows = vec![
        ("logical CPUs", s.logical.to_string()),
        (
            "online",
            format!("{} ({})", s.online, format_list(&online_ids(topo))),
        ),
        ("physical cores", s.cores.to_string()),
        ("packages", s.packages.to_string()),
        ("NUMA nodes", s.numa_nodes.to_string()),
        ("SMT ways", s.smt_ways.to_string()),
    ];
    if !offline.is_empty() {
        rows.push(("offline", format_list(&offline)));
    }
    for (k, v) in rows {
        t.add_row(vec![Cell::new(k), Cell::new(v)]);
    }
    writeln!(out, "{t}\n")?;

    let mut cores = table([
        "core",
        "package",
        "die",
        "core_id",
        "NUMA",
        "CPUs (siblings)",
    ]);
    for (index, cpus) in r.cores.iter().enumerate() {
        let Some(first) = cpus.first().and_then(|&id| topo.cpu(id)) else {
            continue;
        };
        let opt = |v: Option<usize>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
        cores.add_row(vec![
            right(index),
            right(first.package),
            right(opt(first.die)),
            right(first.core_id),
            right(opt(first.numa_node)),
            Cell::new(format_list(cpus)),
        ]);
    }
    writeln!(out, "{cores}\n")?;

    if !r.numa_nodes.is_empty() {
        let mut nodes = table(["NUMA node", "CPUs"]);
        for n in &r.numa_nodes {
            nodes.add_row(vec![right(n.id), Cell::new(format_list(&n.cpus))]);
        }
        writeln!(out, "{nodes}\n")?;
    }

    let m = &r.machine;
    writeln!(out, "Clock and hypervisor ({})", m.describes)?;
    let mut facts = plain_table();
    let c = &m.clock;
    for (k, v) in [
        ("CPU model", m.cpu_model.clone()),
        ("kernel", m.kernel.clone()),
        ("clocksource", m.clocksource.clone()),
        (
            "hypervisor",
            m.hypervisor
                .clone()
                .unwrap_or_else(|| "unknown".to_string()),
        ),
        ("nnb clock", c.source.clone()),
        ("frequency", format!("{:.3} MHz", c.freq_hz / 1e6)),
        (
            "calibration repeatability",
            c.calibration_repeatability_ppm.map_or_else(
                || "none (not calibrated)".to_string(),
                |p| format!("{p:.1} ppm"),
            ),
        ),
        ("invariant", yes_no(c.invariant)),
        ("constant_tsc", yes_no(c.constant_tsc)),
        ("nonstop_tsc", yes_no(c.nonstop_tsc)),
    ] {
        facts.add_row(vec![Cell::new(k), Cell::new(v)]);
    }
    if let Some(w) = &c.warning {
        facts.add_row(vec![Cell::new("warning"), Cell::new(w)]);
    }
    writeln!(out, "{facts}")?;

    if let Some(p) = &r.probe {
        writeln!(out)?;
        render_probe(&mut out, p)?;
    }
    Ok(out)
}

/// The probe's part of the human-readable report.
fn render_probe(out: &mut String, p: &ProbeReport) -> fmt::Result {
    writeln!(
        out,
        "SMT probe: {} CPUs, {} x {} trials in {} (siblings when alone < {} x concurrent \
         in a majority of trials)",
        p.config.cpus.len(),
        plural(p.pairs.len(), "pair"),
        p.config.trials,
        nnb_units::format_duration(Duration::from_secs_f64(p.duration_s)),
        p.config.threshold
    )?;
    // Every pair when few, else only the interesting ones: siblings by either account.
    let few = p.pairs.len() <= 32;
    let shown: Vec<_> = p
        .pairs
        .iter()
        .filter(|x| few || x.siblings || x.sysfs_siblings)
        .collect();
    let mut t = table([
        "CPU a",
        "CPU b",
        "ratios (alone/concurrent)",
        "probe",
        "sysfs",
    ]);
    for pair in &shown {
        let ratios: Vec<String> = pair.ratios.iter().map(|r| format!("{r:.2}")).collect();
        let verdict = |b: bool| if b { "siblings" } else { "separate" };
        t.add_row(vec![
            right(pair.a),
            right(pair.b),
            Cell::new(ratios.join(" ")),
            Cell::new(verdict(pair.siblings)),
            Cell::new(verdict(pair.sysfs_siblings)),
        ]);
    }
    if !shown.is_empty() {
        writeln!(out, "{t}")?;
    }
    let groups: Vec<String> = p
        .sibling_groups
        .iter()
        .filter(|g| g.len() > 1)
        .map(|g| format!("{{{}}}", format_list(g)))
        .collect();
    if groups.is_empty() {
        writeln!(
            out,
            "detected sibling groups: none (every probed CPU is its own core)"
        )?;
    } else {
        writeln!(out, "detected sibling groups: {}", groups.join(" "))?;
    }
    if p.disagreements.is_empty() {
        writeln!(out, "probe and sysfs agree")?;
    } else {
        for d in &p.disagreements {
            writeln!(
                out,
                "DISAGREEMENT: CPUs {} and {}: probe says {}, sysfs says {} (median ratio {:.2})",
                d.a,
                d.b,
                if d.probe_siblings {
                    "siblings"
                } else {
                    "separate cores"
                },
                if d.sysfs_siblings {
                    "siblings"
                } else {
                    "separate cores"
                },
                d.median_ratio
            )?;
        }
    }
    Ok(())
}

fn online_ids(topo: &Topology) -> Vec<usize> {
    topo.online().map(|c| c.id).collect()
}

/// Aligned key/value lines without rules.
fn plain_table() -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t
}

/// "1 pair", "3 pairs".
fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}
