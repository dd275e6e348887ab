//! Command jobs end to end, against truths that are not nnb's: a fixed-work C loop
//! the test compiles (its runtime alone is the truth) as a neighbor staircase's test
//! workload beside `stress-ng --cpu 1 --cpu-load 50` as the neighbor command and
//! beside a spinner of the test's own with the same share, on one shared CPU; a
//! neighbor command whose whole tree ignores SIGTERM, counted by a test command of
//! the test's own while the staircase goes on and looked for in `/proc` after it;
//! and an agent started without `--allow-commands` refusing a file that needs it
//! before anything runs.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use nnb_format::Metric;
use serde_json::Value;

use crate::support::cli::NNB;
use crate::support::exclusive;

/// Whether `program` runs here (`program ARG` exits, whatever its status).
fn runs(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Compiles the C source `src` with gcc into `dir/name` and returns its path.
fn compile(dir: &Path, name: &str, src: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    let bin = dir.join(name);
    std::fs::write(&c, src).unwrap_or_else(|e| panic!("writing {}: {e}", c.display()));
    let out = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&bin)
        .arg(&c)
        .output()
        .unwrap_or_else(|e| panic!("gcc: {e}"));
    assert!(
        out.status.success(),
        "gcc {}: {}",
        c.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// The fixed-work loop: argv[1] million increments of a volatile counter (each a
/// load and a store the compiler must keep), nothing else: its runtime is its CPU
/// time, and beside a neighbor on its CPU its runtime grows by what the neighbor
/// took.
const LOOP_C: &str = r#"
#include <stdlib.h>
int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 1000;
    volatile unsigned long c = 0;
    for (unsigned long i = 0; i < n * 1000000UL; i++) c++;
    return 0;
}
"#;

/// The spinner of the same share as `stress-ng --cpu-load 50`: busy the first half
/// of every 50 ms period by the wall clock, asleep the second half, on an absolute
/// schedule. stress-ng paces a loaded CPU worker the same way: a busy slice (64
/// iterations of its method by default), then a sleep as long as the slice took by
/// the wall clock times (100 - load) / load; so "50 %" is half of the wall time
/// busy, whatever share of the CPU that busy time gets when the CPU is shared.
const SPIN_C: &str = r#"
#include <time.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(void) {
    const double period = 0.050;
    double start = now();
    for (unsigned long k = 1;; k++) {
        double busy_end = start + (k - 1) * period + period / 2;
        while (now() < busy_end) {}
        double left = start + k * period - now();
        if (left > 0) {
            struct timespec d = {0, (long)(left * 1e9)};
            nanosleep(&d, 0);
        }
    }
}
"#;

/// A neighbor staircase on this machine: the test tenant and one neighbor of one
/// vCPU each, `neighbor_state` and `unused` as given, `busy` and `test` the bodies
/// of `[scenario.busy]` and `[scenario.test]`.
fn staircase(name: &str, reps: u32, state: &str, unused: &str, busy: &str, test: &str) -> String {
    format!(
        r#"name = "{name}"
repetitions = {reps}
warmup = 1
settle = "500ms"
step_timeout = "60s"
on_failure = "abort"

[[tenants]]
name = "test"
role = "test"
vcpus = 1

[[tenants]]
name = "nb"
role = "neighbor"
vcpus = 1

[scenario]
kind = "neighbor-staircase"
neighbor_state = "{state}"
unused_neighbors = "{unused}"

[scenario.busy]
{busy}

[scenario.test]
{test}
"#
    )
}

/// Runs `nnb run EXP --quiet --json` with the results under `results`; with `cpu`,
/// on that CPU only (`taskset -c`: every agent and command inherits the affinity,
/// so the local provider carves all tenants from it) and, as root, at nice -10 (so
/// the machine's other processes, at nice 0, take at most a tenth of it).
fn nnb_run(exp: &Path, results: &Path, cpu: Option<usize>) -> Output {
    let mut cmd = match cpu {
        Some(cpu) => {
            let mut c = Command::new("nice");
            let nice = if nnb_testkit::effective_uid() == Some(0) {
                "-10"
            } else {
                "0"
            };
            c.args(["-n", nice, "taskset", "-c", &cpu.to_string(), NNB]);
            c
        }
        None => Command::new(NNB),
    };
    cmd.arg("run")
        .arg(exp)
        .args(["--quiet", "--json", "--results"])
        .arg(results)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {NNB}: {e}"))
}

/// The samples of the one run under `results`, after checking that `out` (its
/// `nnb run`) succeeded.
fn samples_of(out: &Output, results: &Path) -> Vec<Value> {
    assert!(
        out.status.success(),
        "nnb run failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let runs: Vec<PathBuf> = std::fs::read_dir(results)
        .unwrap_or_else(|e| panic!("{}: {e}", results.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(runs.len(), 1, "one run in {}", results.display());
    let text = std::fs::read_to_string(runs[0].join("samples.jsonl")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l}: {e}")))
        .collect()
}

/// The median of the measured (not warm-up) samples' `metric` at `level`.
fn median_at(samples: &[Value], level: f64, metric: Metric) -> f64 {
    let mut v: Vec<f64> = samples
        .iter()
        .filter(|s| s["level"] == level && s["warmup"] != true)
        .map(|s| {
            assert_eq!(s["status"], "ok", "{s}");
            assert_eq!(s["job"], "command", "{s}");
            assert_eq!(s["metric"], metric.name(), "{s}");
            s[metric.name()]
                .as_f64()
                .unwrap_or_else(|| panic!("no {} in {s}", metric.name()))
        })
        .collect();
    assert!(!v.is_empty(), "no samples at level {level}");
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Issue 28's ground truth: on one CPU shared by the test tenant and its neighbor,
/// `stress-ng --cpu 1 --cpu-load 50` as the neighbor command slows a fixed-work loop
/// as much as a spinner of the same share (busy half of the wall time) does, each
/// slowdown the loop's runtime beside the neighbor over its runtime alone in the
/// same run (level 1 over level 0: ratios, never absolute times, which the
/// machine's other load moves), runs of the two neighbors interleaved.
///
/// Why the bounds hold: the loop wants the whole CPU. While the neighbor is busy
/// the two share the CPU, the scheduler giving the waking neighbor at most all of
/// it; while the neighbor sleeps (half the wall time) the loop has it alone. So the
/// loop keeps between half of the CPU (2x) and three quarters of it (1.33x) under
/// either neighbor; the machine's other load, which slows the loop alone too, pulls
/// a ratio towards 1: 1.15x to 2.2x. The two neighbors pace busy and idle by the
/// wall clock alike, so their slowdowns agree within 25 %. Measured on the 2-CPU
/// development VM while other builds ran (runs of one round each): 1.37x to 1.65x
/// beside stress-ng, 1.24x to 1.51x beside the spinner, stress-ng over spinner 1.04
/// to 1.16 (one noisy round 0.81); a spinner taking half of the CPU time instead
/// (nnb's duty-cycled burner paces so) gave 2.0x, which this bound tells apart.
#[test]
fn a_stress_ng_neighbor_slows_a_fixed_work_loop_as_a_spinner_of_its_share() {
    let have = runs("gcc", "--version") && runs("stress-ng", "--version");
    if !nnb_testkit::require(
        have && runs("taskset", "--version"),
        "the command ground truth needs gcc, stress-ng and taskset",
    ) {
        return;
    }
    let _machine = exclusive::hold_machine();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let looper = compile(dir.path(), "loop", LOOP_C);
    let spinner = compile(dir.path(), "spin", SPIN_C);
    let cpu = *nnb_burn::placement::allowed_cpus()
        .first()
        .unwrap_or_else(|| panic!("no CPU allowed"));
    // About 0.3 s alone on a 2020s core: short enough for CI, long against the
    // neighbors' 50 ms periods and the scheduler's slices.
    let test = format!(
        "command = [{:?}, \"1500\"]\ntimeout = \"30s\"",
        looper.display().to_string()
    );
    let neighbors = [
        (
            "stress-ng",
            r#"command = ["stress-ng", "--cpu", "1", "--cpu-load", "50", "--quiet"]"#.to_string(),
        ),
        (
            "spinner",
            format!("command = [{:?}]", spinner.display().to_string()),
        ),
    ];
    // Three rounds, the neighbors alternating, each slowdown the median of its
    // three runs: the machine's other load comes and goes, and shrinks a run's
    // ratio towards 1.
    let mut runs: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for round in 1..=3 {
        for (k, (name, busy)) in neighbors.iter().enumerate() {
            let exp = dir.path().join(format!("{name}.toml"));
            let text = staircase(&format!("gt-{name}"), 3, "busy", "absent", busy, &test);
            std::fs::write(&exp, text).unwrap_or_else(|e| panic!("{e}"));
            let results = dir.path().join(format!("results-{name}-{round}"));
            let samples = samples_of(&nnb_run(&exp, &results, Some(cpu)), &results);
            let alone = median_at(&samples, 0.0, Metric::CommandWallS);
            let beside = median_at(&samples, 1.0, Metric::CommandWallS);
            eprintln!(
                "round {round}, {name}: alone {alone:.3} s, beside {beside:.3} s: {:.2}x",
                beside / alone
            );
            runs[k].push(beside / alone);
        }
    }
    let slowdown = runs.map(|mut r| {
        r.sort_by(f64::total_cmp);
        r[r.len() / 2]
    });
    let (stress, spin) = (slowdown[0], slowdown[1]);
    for (name, s) in [("stress-ng", stress), ("spinner", spin)] {
        assert!((1.15..=2.2).contains(&s), "beside the {name}: {s:.2}x");
    }
    assert!(
        (0.8..=1.25).contains(&(stress / spin)),
        "stress-ng {stress:.2}x against the spinner's {spin:.2}x"
    );
}

/// The processes whose command line holds `needle`, but this test's own.
fn processes_with(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .filter(|&pid| !crate::support::agents::process_gone(pid))
        .collect()
}

/// A neighbor command whose shell and child both ignore SIGTERM is gone, tree and
/// all, once its step is over: the test command itself counts the stubborn
/// processes at every step (a regex metric), and the staircase's later steps (the
/// idle pass, the neighbor's agent still up) must count none; after the run,
/// `/proc` holds none either.
#[test]
fn a_neighbor_tree_that_ignores_sigterm_is_gone_after_its_step() {
    let _machine = exclusive::hold_machine();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let stub = dir.path().join("stub");
    std::fs::create_dir(&stub).unwrap_or_else(|e| panic!("{e}"));
    // Its own copy of sleep, so that its command line names the directory.
    std::fs::copy("/bin/sleep", stub.join("sleep")).unwrap_or_else(|e| panic!("{e}"));
    let script = stub.join("stubborn.sh");
    std::fs::write(
        &script,
        format!(
            "trap '' TERM\n{0}/sleep 600 &\n{0}/sleep 600\n",
            stub.display()
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // The counter: `grep -l` over every command line; the pattern's `[u]` keeps
    // grep's own command line from matching it.
    let count = dir.path().join("count.sh");
    std::fs::write(
        &count,
        "n=$(grep -las -e \"$STUB\" /proc/[0-9]*/cmdline | wc -l)\necho \"stubborn: $n\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let pattern = format!("{}/st[u]b/", dir.path().display());
    let busy = format!(
        "command = [\"/bin/sh\", {:?}]",
        script.display().to_string()
    );
    let test = format!(
        "command = [\"/bin/sh\", {:?}]\nenv = {{ STUB = {pattern:?} }}\ntimeout = \"20s\"\n\
         metric = {{ regex = \"stubborn: ([0-9]+)\", unit = \"processes\", higher_is_better = false }}",
        count.display().to_string()
    );
    let exp = dir.path().join("stubborn.toml");
    std::fs::write(&exp, staircase("stubborn", 1, "both", "idle", &busy, &test))
        .unwrap_or_else(|e| panic!("{e}"));
    let results = dir.path().join("results");
    let samples = samples_of(&nnb_run(&exp, &results, None), &results);
    let counted = |group: &str, level: f64| -> f64 {
        let s = samples
            .iter()
            .find(|s| s["group"] == group && s["level"] == level && s["warmup"] != true)
            .unwrap_or_else(|| panic!("no {group} sample at {level}: {samples:?}"));
        assert_eq!(s["status"], "ok", "{s}");
        s[Metric::CommandValue.name()].as_f64().unwrap_or(-1.0)
    };
    // While the neighbor runs: its shell and both sleeps.
    assert_eq!(counted("busy", 1.0), 3.0, "{samples:?}");
    // Once its step is over, nothing of it is left, though its agent runs on.
    for level in [0.0, 1.0] {
        assert_eq!(counted("idle", level), 0.0, "{samples:?}");
    }
    let left = processes_with(&format!("{}/stub/", dir.path().display()));
    assert!(left.is_empty(), "left after the run: {left:?}");
}

/// Starts `nnb agent` without `--allow-commands` on a free loopback port with the
/// token in `token`; returns the child and its address.
fn plain_agent(token: &Path) -> (std::process::Child, String) {
    let mut child = Command::new(NNB)
        .args(["agent", "--listen", "127.0.0.1:0", "--token-file"])
        .arg(token)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {NNB} agent: {e}"));
    let mut line = String::new();
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    BufReader::new(stdout)
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("reading the agent's address: {e}"));
    let addr = line.trim().strip_prefix("listening ").unwrap_or_default();
    assert!(!addr.is_empty(), "unexpected first line {line:?}");
    (child, addr.to_string())
}

/// A file whose test workload is a command, against a static agent its operator
/// started without `--allow-commands`: refused before the first step with a message
/// naming the tenant and the flag, exit code 2 (bad input), and the command never
/// ran (it would have made a file). The dry run shows the command job readably.
#[test]
fn commands_on_an_agent_without_the_opt_in_are_refused_before_anything_runs() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let token = dir.path().join("token");
    std::fs::write(&token, "command-opt-in-0123456789\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600))
        .unwrap_or_else(|e| panic!("{e}"));
    let (mut agent, addr) = plain_agent(&token);
    let hosts = dir.path().join("hosts");
    std::fs::write(&hosts, format!("test test {addr}\nnb neighbor {addr}\n"))
        .unwrap_or_else(|e| panic!("{e}"));
    let marker = dir.path().join("ran");
    let text = staircase(
        "refused",
        1,
        "busy",
        "idle",
        "kind = \"burner\"",
        &format!(
            "command = [\"/usr/bin/touch\", {:?}]",
            marker.display().to_string()
        ),
    )
    .replacen(
        "[[tenants]]",
        &format!(
            "[provider]\nkind = \"static\"\nhosts = {:?}\ntoken_file = {:?}\n\n[[tenants]]",
            hosts.display().to_string(),
            token.display().to_string()
        ),
        1,
    );
    let exp = dir.path().join("refused.toml");
    std::fs::write(&exp, &text).unwrap_or_else(|e| panic!("{e}"));

    let dry = Command::new(NNB)
        .arg("run")
        .arg(&exp)
        .arg("--dry-run")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let shown = String::from_utf8_lossy(&dry.stdout);
    assert!(
        dry.status.success(),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    assert!(
        shown.contains(&format!("command /usr/bin/touch {}", marker.display())),
        "{shown}"
    );

    let results = dir.path().join("results");
    let out = nnb_run(&exp, &results, None);
    let _ = agent.kill();
    let _ = agent.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("tenant `test`") && err.contains("--allow-commands"),
        "{err}"
    );
    assert!(!marker.exists(), "the command ran");
    let measured = std::fs::read_dir(&results)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .any(|e| {
            std::fs::read_to_string(e.path().join("samples.jsonl"))
                .is_ok_and(|t| !t.trim().is_empty())
        });
    assert!(!measured, "a step was measured");
}
