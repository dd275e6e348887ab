//! Criterion benches of nnb's own CPU-side costs: what a clock read costs (TSC and
//! clock_gettime), what one op of each workload costs, and what one iteration of the
//! steal loop costs. These are the numbers behind the claims that the timing overhead
//! of a burn is below 0.1% and that the steal loop resolves gaps of a few
//! microseconds.
// criterion_group! below defines an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use nnb_burn::clock::{Clock, ClockChoice};
use nnb_burn::steal::{scan, DEFAULT_THRESHOLD};
use nnb_burn::workload::Workload;

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
    for name in ["fpadd", "primes", "fma", "int", "mem"] {
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

fn steal_loop(c: &mut Criterion) {
    let clock = Clock::calibrate();
    let threshold = clock.duration_to_ticks(DEFAULT_THRESHOLD);
    const ITERATIONS: u64 = 1_000_000;
    let mut g = c.benchmark_group("steal_loop");
    g.throughput(Throughput::Elements(ITERATIONS));
    g.bench_function("iteration", |b| {
        b.iter(|| scan(&clock, u64::MAX, ITERATIONS, threshold).map(|s| s.iterations))
    });
    g.finish();
}

criterion_group!(benches, clocks, workloads, steal_loop);
criterion_main!(benches);
