//! Criterion benches of nnb's own CPU-side costs: what a clock read costs (TSC and
//! clock_gettime), what one op of each workload costs, and what one iteration of the
//! steal loop costs. These are the numbers behind the claims that the timing overhead
//! of a burn is below 0.1% and that the steal loop resolves gaps of a few
//! microseconds.
//!
//! `fma_throughput/fma_48_per_op` counts single FMAs ([`FMA_CHAINS`] per op), so its
//! elements/s divided by the core clock is FMAs per cycle: 8 is the peak of a core
//! with two 256-bit FMA pipes (2 x 4 f64), 4 a latency-bound kernel.
// criterion_group! below defines an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use nnb_burn::clock::{Clock, ClockChoice};
use nnb_burn::cputrace::MAX_GAPS;
use nnb_burn::steal::{scan, DEFAULT_THRESHOLD};
use nnb_burn::workload::{Workload, FMA_CHAINS};

fn clocks(c: &mut Criterion) {
    let mut g = c.benchmark_group("clock_read");
    let auto = Clock::calibrate();
    g.bench_function(auto.info().source, |b| b.iter(|| black_box(auto.now())));
    if let Ok(mono) = Clock::with_choice(ClockChoice::Monotonic) {
        g.bench_function("clock_gettime", |b| b.iter(|| black_box(mono.now())));
    }
    g.finish();
}

fn workloads(c: &mut Criterion) {
    let mut g = c.benchmark_group("workload_op");
    // fpadd and cpu-burn-o0 side by side: the optimised loop and the thesis' -O0 one.
    for name in Workload::NAMES {
        let Ok(w) = name.parse::<Workload>() else {
            continue;
        };
        let batch = w.check_every();
        let mut runner = w.runner();
        g.throughput(Throughput::Elements(batch));
        g.bench_function(name, |b| b.iter(|| black_box(runner.run_ops(batch))));
    }
    g.finish();
}

/// The `fma` workload with throughput in single f64 FMAs (FMA_CHAINS per op).
fn fma_throughput(c: &mut Criterion) {
    let w = Workload::Fma;
    let batch = w.check_every();
    let mut runner = w.runner();
    let mut g = c.benchmark_group("fma_throughput");
    g.throughput(Throughput::Elements(batch * FMA_CHAINS as u64));
    g.bench_function(format!("fma_{FMA_CHAINS}_per_op"), |b| {
        b.iter(|| black_box(runner.run_ops(batch)))
    });
    g.finish();
}

fn steal_loop(c: &mut Criterion) {
    let clock = Clock::calibrate();
    let threshold = clock.duration_to_ticks(DEFAULT_THRESHOLD);
    const ITERATIONS: u64 = 1_000_000;
    let mut g = c.benchmark_group("steal_loop");
    g.throughput(Throughput::Elements(ITERATIONS));
    let never = std::sync::atomic::AtomicBool::new(false);
    // Untraced, and with CPUTest's timestamp trace (a compare per read, a bin a ms).
    for (name, trace) in [("iteration", None), ("iteration_traced", Some(MAX_GAPS))] {
        g.bench_function(name, |b| {
            b.iter(|| {
                scan(&clock, u64::MAX, ITERATIONS, threshold, trace, &never).map(|s| s.iterations)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, clocks, workloads, fma_throughput, steal_loop);
criterion_main!(benches);
