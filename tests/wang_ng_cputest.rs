//! Wang & Ng (seed 003): ground truth for the CPUTest instrument (issue 25).
//!
//! Their CPU share (§IV, l.310-314) is the share of wall time outside "schedule off
//! periods", loop iterations longer than 1 ms. The truth here comes from the kernel,
//! not from nnb: a spinner (a shell busy loop under `taskset`) on the CPU that
//! `nnb steal --cputest` scans shares it about half and half with the scan (two
//! SCHED_OTHER tasks of equal weight under the fair scheduler), and the kernel's own
//! count of the spinner's run time (`/proc/PID/schedstat`) says how much it took; a
//! thread of this test that wakes every 1.5 ms and runs 0.4 ms takes a fifth of the
//! CPU in pieces shorter than 1 ms, which their share does not count (while a share
//! taken over the 5 us hiccup threshold does). A share read from the /proc/stat steal
//! counter would see neither (the spinner is no hypervisor).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::cli::json;
use crate::support::exclusive::hold_machine;

/// Attempts before an out-of-bounds result fails a test: other work on a shared
/// machine comes and goes within seconds and can hit one scan.
const ATTEMPTS: usize = 3;
/// Each scan's length.
const SCAN: &str = "2s";

/// The CPU the scans and their competitors share: CPU 1 where this process may use
/// it (CPU 0 takes more of the machine's interrupts), else CPU 0.
fn shared_cpu() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap_or("0")
        .trim()
        .to_string();
    let has_1 = allowed.split(',').any(|r| match r.split_once('-') {
        Some((a, b)) => {
            a.parse::<usize>().is_ok_and(|a| a <= 1) && b.parse::<usize>().is_ok_and(|b| b >= 1)
        }
        None => r == "1",
    });
    usize::from(has_1)
}

/// Whether `taskset` runs here.
fn have_taskset() -> bool {
    Command::new("taskset")
        .args(["-c", "0", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The kernel's run time of a task so far, ns: the first field of its `schedstat`
/// (`/proc/PID/schedstat`, `/proc/PID/task/TID/schedstat`).
fn run_ns(schedstat: &Path) -> u64 {
    let text = std::fs::read_to_string(schedstat)
        .unwrap_or_else(|e| panic!("{}: {e}", schedstat.display()));
    text.split_whitespace()
        .next()
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| panic!("{}: {text}", schedstat.display()))
}

/// One `nnb steal` scan of `cpu` for [`SCAN`] with `flags` and a trace: the CPU's
/// entry of the report and its trace line.
fn scan(cpu: usize, flags: &[&str]) -> (Value, Value) {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let trace = dir.path().join("trace.jsonl");
    let cpus = cpu.to_string();
    let mut args = vec!["steal", "--cpus", &cpus, "--duration", SCAN, "--json"];
    args.extend_from_slice(flags);
    args.extend(["--trace", trace.to_str().expect("a UTF-8 path")]);
    let v = json(&args);
    let entry = v["steal"]["cpus"][0].clone();
    let text = std::fs::read_to_string(&trace).expect("the trace file");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "one trace line per CPU: {text}");
    let line: Value = serde_json::from_str(lines[0]).expect("a JSON line");
    assert_eq!(line["cpu"].as_u64(), Some(cpu as u64), "{}", lines[0]);
    (entry, line)
}

/// A CPU entry's field.
fn num(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("no {k} in {v}"))
}

/// The trace's own share: 1 - (sum of its gaps) / span; every gap longer than the
/// threshold and the counts per ms summing to the iterations.
fn trace_share(entry: &Value, trace: &Value) -> f64 {
    let threshold = num(trace, "threshold_ns");
    let gaps = trace["gaps"].as_array().expect("gaps");
    let lost: f64 = gaps
        .iter()
        .map(|g| {
            let len = g[1].as_f64().expect("[at_ns, len_ns]");
            assert!(len > threshold - 1.0, "a gap of {len} ns kept");
            len
        })
        .sum();
    let counts = trace["counts_per_ms"].as_array().expect("counts_per_ms");
    let reads: f64 = counts.iter().filter_map(Value::as_f64).sum();
    assert_eq!(
        reads,
        num(entry, "iterations"),
        "counts per ms sum to the reads"
    );
    assert_eq!(num(trace, "gaps_left_out"), 0.0);
    1.0 - lost / num(entry, "span_ns")
}

/// A shell busy loop pinned to a CPU; killed (and reaped) when dropped.
struct Spinner(Child);

impl Spinner {
    fn on(cpu: usize) -> Spinner {
        let child = Command::new("taskset")
            .args(["-c", &cpu.to_string(), "sh", "-c", "while :; do :; done"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the spinner: {e}"));
        Spinner(child)
    }

    /// The kernel's schedstat of the spinning shell (taskset execs it in place).
    fn schedstat(&self) -> std::path::PathBuf {
        Path::new("/proc")
            .join(self.0.id().to_string())
            .join("schedstat")
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The share of the wall time `during` took that the task of `schedstat` ran.
fn share_of(schedstat: &Path, during: impl FnOnce() -> (Value, Value)) -> (f64, (Value, Value)) {
    let (ran0, t0) = (run_ns(schedstat), Instant::now());
    let out = during();
    let ran = run_ns(schedstat).saturating_sub(ran0) as f64;
    (ran / t0.elapsed().as_nanos() as f64, out)
}

/// CPUTest alone on its CPU, then beside a spinner pinned there: alone above 90%,
/// beside the spinner about half (35 to 75%: the fair scheduler's split, 46-49% on
/// an idle machine, 67-71% seen on the 2-core CI runner while other tests ran; Wang &
/// Ng's small instances got 40 to 50%), the rest the kernel's count of the spinner's
/// run time (the two add up to what the scan had alone). The trace says the same:
/// its gaps are the time lost, and the spinner's slices leave milliseconds with no
/// read at all. The steal counter sees nothing of this (no hypervisor ran the
/// spinner), so a share from steal ticks fails here.
///
/// Other work on this machine (other sessions' builds, which the scheduler weighs
/// per session) can take part of the CPU from the scan and the spinner alike, so an
/// attempt outside the bounds is repeated, [`ATTEMPTS`] times at most; when no scan
/// alone reached 90% the CPU is busy, and the spinner's half is checked relative to
/// what the scan had alone (the test never passes without checking).
/// The CPUTest share beside the spinner: about half. A share read from steal ticks
/// (about 1 here, no hypervisor) or with the hiccup threshold is outside it.
const SHARED: std::ops::RangeInclusive<f64> = 0.35..=0.75;

#[test]
fn cputest_share_beside_a_spinner_is_about_half() {
    if !nnb_testkit::require(have_taskset(), "the CPUTest ground truth needs taskset") {
        return;
    }
    let _machine = hold_machine();
    let cpu = shared_cpu();
    let mut tries = Vec::new();
    for _ in 0..ATTEMPTS {
        let (alone_entry, alone_trace) = scan(cpu, &["--cputest"]);
        let alone = num(&alone_entry, "ran_share");
        let spinner = Spinner::on(cpu);
        // Let the spinner start spinning before the scan starts.
        std::thread::sleep(Duration::from_millis(100));
        let (spun, (entry, trace)) = share_of(&spinner.schedstat(), || scan(cpu, &["--cputest"]));
        drop(spinner);
        let shared = num(&entry, "ran_share");
        assert_eq!(num(&trace, "threshold_ns"), 1e6, "--cputest is 1 ms");
        assert!((trace_share(&alone_entry, &alone_trace) - alone).abs() < 1e-6);
        assert!((trace_share(&entry, &trace) - shared).abs() < 1e-6);
        let counts = trace["counts_per_ms"].as_array().expect("counts");
        let empty = counts.iter().filter(|c| c.as_u64() == Some(0)).count() as f64;
        let empty_ms = empty / counts.len() as f64;
        eprintln!(
            "CPU {cpu}: CPUTest share alone {alone:.4}, beside the spinner {shared:.4} \
             (the spinner ran {spun:.4} of the time; {empty_ms:.3} of the ms had no read)"
        );
        // The spinner takes from the scan what the scan had alone: half of it.
        let split = (shared + spun - alone).abs() < 0.15 && empty_ms > 0.1;
        tries.push((alone, shared, spun, empty_ms));
        if split && alone > 0.9 && SHARED.contains(&shared) {
            return;
        }
    }
    let busy = tries.iter().all(|t| t.0 <= 0.9);
    let relative = tries.iter().any(|&(alone, shared, spun, empty_ms)| {
        SHARED.contains(&(shared / alone)) && (shared + spun - alone).abs() < 0.15 && empty_ms > 0.1
    });
    if busy && relative {
        eprintln!("CPU {cpu} is busy with other work: the spinner's half checked relatively");
        return;
    }
    panic!(
        "no attempt within bounds (alone > 0.9, beside the spinner {SHARED:?} (of what \
         it had alone, on a busy CPU), with the spinner's run time adding up to the \
         share alone within 0.15, > 10% empty ms): (alone, shared, spinner, empty ms) = \
         {tries:?}"
    );
}

/// A thread of this test, pinned to `cpu`, that sleeps 1.5 ms and runs 0.4 ms, over
/// and over, until `stop`: a fifth of the CPU taken in pieces shorter than Wang &
/// Ng's 1 ms. Its run time so far is in the returned schedstat path.
fn start_nibbler(
    cpu: usize,
    stop: &'static AtomicBool,
) -> (std::thread::JoinHandle<()>, std::path::PathBuf) {
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let me = std::fs::read_link("/proc/thread-self").expect("/proc/thread-self");
        let tid = me
            .file_name()
            .and_then(|t| t.to_str())
            .expect("PID/task/TID")
            .to_string();
        let pinned = Command::new("taskset")
            .args(["-p", "-c", &cpu.to_string(), &tid])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        tx.send((pinned, Path::new("/proc").join(&me).join("schedstat")))
            .expect("the test waits");
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_micros(1500));
            let t = Instant::now();
            while t.elapsed() < Duration::from_micros(400) {
                std::hint::spin_loop();
            }
        }
    });
    let (pinned, schedstat) = rx.recv().expect("the nibbler's thread id");
    assert!(pinned, "taskset -p could not pin the nibbler");
    (handle, schedstat)
}

/// Beside a thread that takes a fifth of the CPU 0.4 ms at a time, CPUTest's share
/// (gaps longer than 1 ms) stays above 90%: none of those pieces is a schedule off
/// period. The same scan over the 5 us hiccup threshold loses what the thread took
/// (the kernel's count of its run time): a CPU share computed with a threshold far
/// below the scheduler's slice, or one that counted every gap, would fail the first
/// bound. On a CPU busy with other work (a scan alone below 90%), whose slices a
/// piece of the thread's may join into a gap longer than 1 ms, the share beside the
/// thread must lose less than half of what the thread took from what it had alone
/// (a 5 us share loses all of it).
#[test]
fn cputest_share_leaves_out_gaps_shorter_than_1_ms() {
    if !nnb_testkit::require(have_taskset(), "the CPUTest ground truth needs taskset") {
        return;
    }
    let _machine = hold_machine();
    let cpu = shared_cpu();
    static STOP: AtomicBool = AtomicBool::new(false);
    let mut tries = Vec::new();
    for _ in 0..ATTEMPTS {
        let alone = num(&scan(cpu, &["--cputest"]).0, "ran_share");
        STOP.store(false, Ordering::Relaxed);
        let (nibbler, schedstat) = start_nibbler(cpu, &STOP);
        let (took, (entry, trace)) = share_of(&schedstat, || scan(cpu, &["--cputest"]));
        let cputest = num(&entry, "ran_share");
        assert!((trace_share(&entry, &trace) - cputest).abs() < 1e-6);
        let (took_h, (hiccup_entry, _)) =
            share_of(&schedstat, || scan(cpu, &["--threshold", "5us"]));
        STOP.store(true, Ordering::Relaxed);
        nibbler.join().expect("the nibbler ends");
        let hiccup = num(&hiccup_entry, "ran_share");
        eprintln!(
            "CPU {cpu}: CPUTest share alone {alone:.4}, beside the nibbler {cputest:.4} \
             while it ran {took:.4}; over 5 us gaps {hiccup:.4} while it ran {took_h:.4}"
        );
        tries.push((alone, cputest, took, hiccup, took_h));
        let least = if alone > 0.9 { 0.9 } else { alone - 0.5 * took };
        if cputest > least && took > 0.12 && hiccup < 1.0 - 0.8 * took_h {
            return;
        }
    }
    panic!(
        "no attempt within bounds (CPUTest share beside the nibbler > 0.9, or on a busy \
         CPU above what it had alone less half the nibbler's run time, which must be > \
         0.12; the 5 us share below 1 - 0.8 x its run time): (alone, CPUTest share, \
         nibbler, 5 us share, nibbler) = {tries:?}"
    );
}
