//! What a burner thread runs. Each workload stresses a different part of a core, so a
//! neighbor's effect can be told apart: an SMT sibling hurts `fma` far more than
//! `fpadd`, a memory-bound neighbor hurts `mem`.
//!
//! Two workloads run the thesis' `cpu_burn` loop (its Listing 5.1, `x += i * 0.000001`):
//! `fpadd` is the loop as an optimising compiler builds it (`x` and `i` in registers,
//! bound by FP-add latency), `cpu-burn-o0` is the loop as the thesis built it, with
//! `gcc -O0` (`x` and `i` loaded from and stored to the stack on every iteration, about
//! 4x as long per op). Compare runtimes with the thesis' only on `cpu-burn-o0`.
//!
//! Every workload defines what one *op* is, runs `n` of them with
//! [`Runner::run_ops`] and returns a checksum built from its result, so the compiler
//! cannot delete the work (sysbench's cpu test lost its work this way, its issue #521).
//! Runners keep their state between calls, so `run_ops(a)` then `run_ops(b)` does
//! the same work as `run_ops(a + b)`: a time-bounded run can work in chunks and
//! check the clock between them.

use std::fmt;
use std::hint::black_box;
use std::path::Path;
use std::str::FromStr;

use serde::Serialize;

/// sysbench's default `--cpu-max-prime`.
pub const DEFAULT_MAX_PRIME: u64 = 10_000;
/// Buffer of the `mem` workload when the last-level cache size cannot be read.
pub const DEFAULT_MEM_BYTES: usize = 64 << 20;
/// The `mem` buffer is this many times the last-level cache, so it never fits.
const MEM_LLC_MULTIPLE: usize = 4;
/// Independent f64 accumulators of `fma`, which is also the FMAs in one `fma` op. A core
/// with 2 FMA pipes of 4-cycle latency (Skylake, Zen 3/4) needs 8 independent vector
/// chains in flight to issue 2 FMAs per cycle; 48 f64 are 12 chains of 4 (256-bit
/// `ymm` registers, 12 of the 16 with the 2 constants), which also covers a 5- or
/// 6-cycle latency. The kernel is compiled for FMA/AVX2 only, so AVX-512 hosts run
/// the same 256-bit kernel: 2 FMAs per cycle still fill their two FMA ports, and the
/// workload is the same instruction stream on every x86_64 host.
pub const FMA_CHAINS: usize = 48;
/// Bytes of one cache line: one `mem` op.
const LINE_BYTES: usize = 64;
const LINE_WORDS: usize = LINE_BYTES / 8;
/// `fma` computes x = x * FMA_A + FMA_B on every chain: a factor just below 1 keeps the
/// values bounded (they tend to FMA_B / (1 - FMA_A) = 10), so no overflow, no denormal.
const FMA_A: f64 = 0.999_999_9;
/// See [`FMA_A`].
const FMA_B: f64 = 1e-6;

/// A CPU workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "name")]
pub enum Workload {
    /// The thesis' `cpu_burn` loop, optimised: one op is `x += i * 0.000001` with `x`
    /// and `i` in registers. The adds form one dependency chain, so it is bound by
    /// FP-add latency and leaves most ports idle: the gentlest workload for an SMT
    /// sibling. Not the thesis' binary: see [`Workload::CpuBurnO0`].
    FpAdd,
    /// The thesis' `cpu_burn` exactly as it ran: Listing 5.1 compiled with `gcc -O0`,
    /// which keeps `x` and `i` on the stack. One op is `x += i * 0.000001` (same
    /// arithmetic and result as `fpadd`, `i` a signed 64-bit `long long`) with `x`, `i`
    /// and the bound loaded from memory and `x` and `i` stored back on every iteration,
    /// so each add waits on a store-to-load forward: about 4x `fpadd`'s time per op, as
    /// the -O0 binary takes. Runtimes compare with the thesis' `cpu_burn` runtimes.
    #[serde(rename = "cpu-burn-o0")]
    CpuBurnO0,
    /// sysbench's cpu event: one op counts the primes below `max_prime` by trial
    /// division up to the square root (sysbench's `cpu_execute_event`), so events/s
    /// compare directly with `sysbench cpu --cpu-max-prime`: the same 64-bit divisions
    /// (see [`count_primes`]). Integer divider bound.
    Primes {
        /// Upper bound (exclusive) of the candidates, sysbench's `--cpu-max-prime`.
        max_prime: u64,
    },
    /// [`FMA_CHAINS`] (48) independent fused multiply-add chains: one op is one FMA on
    /// each chain. Enough chains to hide the FMA latency, so it issues an FMA on every
    /// FMA port every cycle: the worst case for a thread sharing the core.
    Fma,
    /// Integer ALU and divider: one op is a multiply, a rotate, an xor and a 64-bit
    /// division, chained so each depends on the previous op.
    Int,
    /// Streaming reads and writes over a buffer larger than the last-level cache: one
    /// op reads one 64-byte cache line and writes one word of it back. Memory
    /// bandwidth bound.
    Mem {
        /// Buffer size in bytes (default 4x the LLC, or 64 MiB when unknown).
        bytes: usize,
    },
}

/// A workload name that is not one of [`Workload::NAMES`].
#[derive(Debug, thiserror::Error)]
#[error("unknown workload '{0}': expected fpadd, cpu-burn-o0, primes, fma, int or mem")]
pub struct UnknownWorkload(pub String);

impl FromStr for Workload {
    type Err = UnknownWorkload;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fpadd" => Ok(Self::FpAdd),
            "cpu-burn-o0" => Ok(Self::CpuBurnO0),
            "primes" => Ok(Self::Primes {
                max_prime: DEFAULT_MAX_PRIME,
            }),
            "fma" => Ok(Self::Fma),
            "int" => Ok(Self::Int),
            "mem" => Ok(Self::Mem {
                bytes: default_mem_bytes(Path::new("/")),
            }),
            other => Err(UnknownWorkload(other.to_string())),
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Workload {
    /// The workload a burn runs when none is named (`nnb cpu`, experiment files,
    /// the isolation matrix's loads): the thesis' `cpu_burn` loop, optimised.
    pub const DEFAULT: Workload = Workload::FpAdd;

    /// Every workload's name, as [`Workload::from_str`] takes it.
    pub const NAMES: [&'static str; 6] = ["fpadd", "cpu-burn-o0", "primes", "fma", "int", "mem"];

    /// The workload's name as typed on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            Self::FpAdd => "fpadd",
            Self::CpuBurnO0 => "cpu-burn-o0",
            Self::Primes { .. } => "primes",
            Self::Fma => "fma",
            Self::Int => "int",
            Self::Mem { .. } => "mem",
        }
    }

    /// What one op is, for output headers.
    pub fn op_unit(&self) -> &'static str {
        match self {
            Self::FpAdd => "fp add",
            Self::CpuBurnO0 => "fp add, -O0",
            Self::Primes { .. } => "event",
            Self::Fma => "48 fma",
            Self::Int => "mul+div",
            Self::Mem { .. } => "cache line",
        }
    }

    /// Ops per thread for a fixed-work run of about one second, from the criterion
    /// benches on an AMD EPYC (Zen 3) VM: fpadd 0.96 ns/op, cpu-burn-o0 4.1 ns, primes
    /// 250 us/event at max_prime 10000 (the cost grows like max_prime^1.5), fma 2.0 ns
    /// (48 FMAs at 2 vector FMAs per cycle), int 5.3 ns, mem 3.9 ns per line.
    pub fn default_ops(&self) -> u64 {
        match self {
            Self::FpAdd => 1_000_000_000,
            Self::CpuBurnO0 => 250_000_000,
            Self::Primes { max_prime } => {
                let scale = (DEFAULT_MAX_PRIME as f64 / (*max_prime).max(3) as f64).powf(1.5);
                ((4_000.0 * scale) as u64).max(1)
            }
            Self::Fma => 500_000_000,
            Self::Int => 200_000_000,
            Self::Mem { .. } => 250_000_000,
        }
    }

    /// Ops between two clock checks in a time-bounded run: about 50 to 200 us of work,
    /// so a clock read (~10-40 ns) costs under 0.05% and ops/s stays exact (ops and
    /// the end tick are both taken at the chunk boundary).
    pub fn check_every(&self) -> u64 {
        match self {
            Self::FpAdd => 100_000,
            Self::CpuBurnO0 => 25_000,
            Self::Primes { .. } => 1,
            Self::Fma => 50_000,
            Self::Int => 20_000,
            Self::Mem { .. } => 16_384,
        }
    }

    /// Prepares a runner (allocating the `mem` buffer). Call it on the thread that runs
    /// the work, after pinning, so the memory is local to that thread's node.
    pub fn runner(&self) -> Runner {
        let state = match *self {
            Self::FpAdd => State::FpAdd { x: 0.0, i: 0 },
            Self::CpuBurnO0 => State::CpuBurnO0 { x: 0.0, i: 0 },
            Self::Primes { max_prime } => State::Primes { max_prime },
            Self::Fma => State::Fma {
                acc: Box::new(std::array::from_fn(|k| 1.0 + k as f64 * 1e-3)),
            },
            Self::Int => State::Int {
                x: 0x243F_6A88_85A3_08D3,
                acc: 1,
            },
            Self::Mem { bytes } => {
                let words = (bytes / 8).max(LINE_WORDS) / LINE_WORDS * LINE_WORDS;
                // Write every word: the pages are faulted in before timing starts.
                let buf: Vec<u64> = (0..words as u64).collect();
                State::Mem { buf, pos: 0 }
            }
        };
        Runner { state }
    }
}

/// Size of the last-level cache from sysfs (`cpu0/cache/index3/size`, e.g. "32768K")
/// times 4, or [`DEFAULT_MEM_BYTES`] when it cannot be read. `root` is "/" on a host.
pub fn default_mem_bytes(root: &Path) -> usize {
    llc_bytes(root).map_or(DEFAULT_MEM_BYTES, |b| b * MEM_LLC_MULTIPLE)
}

fn llc_bytes(root: &Path) -> Option<usize> {
    let text =
        std::fs::read_to_string(root.join("sys/devices/system/cpu/cpu0/cache/index3/size")).ok()?;
    parse_cache_size(text.trim())
}

/// Parses sysfs cache sizes: "32768K", "1M", "512".
fn parse_cache_size(s: &str) -> Option<usize> {
    let (digits, mult) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<usize>().ok().map(|v| v * mult)
}

/// A workload ready to run on one thread, with its state kept between calls.
#[derive(Debug)]
pub struct Runner {
    state: State,
}

#[derive(Debug)]
enum State {
    FpAdd { x: f64, i: u64 },
    CpuBurnO0 { x: f64, i: i64 },
    Primes { max_prime: u64 },
    Fma { acc: Box<[f64; FMA_CHAINS]> },
    Int { x: u64, acc: u64 },
    Mem { buf: Vec<u64>, pos: usize },
}

impl Runner {
    /// Runs `n` ops in chunks of `chunk` (at least 1), calling `stop` before each
    /// chunk and ending early when it returns true. Returns the ops done and the
    /// checksum [`Runner::run_ops`] gives for that many ops in one call (sums add up
    /// over chunks; the others are the state after the last op).
    pub fn run_ops_until(
        &mut self,
        n: u64,
        chunk: u64,
        mut stop: impl FnMut() -> bool,
    ) -> (u64, u64) {
        let mut left = n;
        self.run_chunks(|| {
            let k = chunk.max(1).min(left);
            (k > 0 && !stop()).then(|| {
                left -= k;
                k
            })
        })
    }

    /// Runs chunks of ops as long as `next` gives their sizes (a shared pool's
    /// batches, or [`Runner::run_ops_until`]'s chunks). Returns the ops done and the
    /// checksum [`Runner::run_ops`] gives for that many ops in one call.
    pub fn run_chunks(&mut self, mut next: impl FnMut() -> Option<u64>) -> (u64, u64) {
        let sums = matches!(self.state, State::Primes { .. } | State::Mem { .. });
        let (mut done, mut checksum) = (0u64, 0u64);
        while let Some(k) = next() {
            let c = self.run_ops(k);
            checksum = if sums { checksum.wrapping_add(c) } else { c };
            done += k;
        }
        (done, checksum)
    }

    /// Runs `n` ops and returns a checksum of the result (keep it: it is what stops
    /// the compiler from removing the work).
    pub fn run_ops(&mut self, n: u64) -> u64 {
        match &mut self.state {
            State::FpAdd { x, i } => {
                let end = *i + n;
                let mut xv = *x;
                for k in *i..end {
                    xv += k as f64 * 0.000001;
                }
                *x = black_box(xv);
                *i = end;
                xv.to_bits()
            }
            State::CpuBurnO0 { x, i } => {
                // `long long` as in Listing 5.1; 2^63 ops would take centuries.
                let end = i.saturating_add(i64::try_from(n).unwrap_or(i64::MAX));
                (*x, *i) = cpu_burn_o0(*x, *i, end);
                x.to_bits()
            }
            State::Primes { max_prime } => {
                // black_box on every event: count_primes is pure, and with the bound
                // read once the compiler computes it once and multiplies (n events
                // took one event's time).
                let max = *max_prime;
                (0..n).fold(0u64, |sum, _| {
                    sum.wrapping_add(count_primes(black_box(max)))
                })
            }
            State::Fma { acc } => {
                fma_chains(acc, n);
                black_box(&acc);
                acc.iter().fold(0u64, |s, v| s ^ v.to_bits())
            }
            State::Int { x, acc } => {
                let (mut xv, mut a) = (*x, *acc);
                for _ in 0..n {
                    xv = xv.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17) ^ a;
                    a = a.wrapping_add(xv / ((a & 0xFFFF) | 1));
                }
                *x = black_box(xv);
                *acc = black_box(a);
                a
            }
            State::Mem { buf, pos } => {
                let lines = buf.len() / LINE_WORDS;
                let mut sum = 0u64;
                let mut p = *pos;
                for _ in 0..n {
                    let line = &mut buf[p * LINE_WORDS..(p + 1) * LINE_WORDS];
                    let s = line.iter().fold(0u64, |s, w| s.wrapping_add(*w));
                    line[0] = line[0].wrapping_add(s | 1);
                    sum = sum.wrapping_add(s);
                    p += 1;
                    if p == lines {
                        p = 0;
                    }
                }
                *pos = p;
                black_box(sum)
            }
        }
    }
}

/// The locals of Listing 5.1's `perform_work` that `gcc -O0` keeps on the stack: the
/// loop reads `x`, `i` and the bound from here and writes `x` and `i` back every
/// iteration.
#[repr(C)]
struct O0Frame {
    x: f64,
    i: i64,
    end: i64,
}

/// Listing 5.1's loop from `i` to `end` as the `gcc -O0` binary runs it; returns the
/// final `x` and `i`.
///
/// `black_box(&mut frame)` at the top of every iteration hands the frame's address to
/// an opaque asm statement that may read and write memory, so the compiler must store
/// `x` and `i` before it and load `x`, `i` and `end` after it: the loop cannot keep
/// them in registers. Built with `--release` on x86_64 (rustc 1.95) the loop is
///
/// ```text
/// loop: xorps    %xmm1,%xmm1
///       cvtsi2sd %rax,%xmm1          ; i as f64
///       mulsd    %xmm0,%xmm1         ; * 0.000001
///       addsd    X(%rsp),%xmm1       ; load x, add
///       movsd    %xmm1,X(%rsp)       ; store x
///       inc      %rax
///       mov      %rax,I(%rsp)        ; store i
///       mov      %rcx,P(%rsp)        ; (black_box: the frame's address)
///       mov      I(%rsp),%rax        ; load i
///       cmp      END(%rsp),%rax      ; load the bound, compare
///       jl       loop
/// ```
///
/// beside gcc -O0's `cvtsi2sdq -0x10(%rbp)`, `mulsd`, `movsd -0x8(%rbp)`, `addsd`,
/// `movsd %xmm0,-0x8(%rbp)`, `addq $0x1,-0x10(%rbp)`, two loads for
/// `work->operations` and `cmp -0x10(%rbp)`: the same chain of an add waiting on the
/// store-to-load forward of `x`. `black_box` is a best-effort hint, not a guarantee:
/// should a compiler ever keep the frame in registers, the loop would drop to `fpadd`'s
/// speed, and the test `cpu_burn_o0` (root `tests/`), which holds the two to within 10%
/// per op on the same CPU, would fail.
#[inline(never)]
fn cpu_burn_o0(x: f64, i: i64, end: i64) -> (f64, i64) {
    let mut frame = O0Frame { x, i, end };
    loop {
        black_box(&mut frame);
        if frame.i >= frame.end {
            break;
        }
        frame.x += frame.i as f64 * 0.000001;
        frame.i += 1;
    }
    (frame.x, frame.i)
}

/// One sysbench cpu event: the number of primes in 3..max_prime by trial division by
/// every l in 2..=sqrt(c). The same operations at the same width as sysbench's
/// `cpu_execute_event` (src/tests/cpu/sb_cpu.c): `c` and `l` are 64-bit unsigned
/// (`unsigned long long`), the bound is `t = sqrt((double)c)` kept as a double, each
/// step compares `(double)l <= t` and divides `c % l` in 64 bits, and a candidate is
/// prime when `l > t` at the end. The instructions are those gcc -O2 makes of that
/// loop (see the comment inside). The division is the event's cost (a 32-bit divide is
/// about 2.4x faster on Intel), so [`rem_u64`] makes sure it is the 64-bit `div`.
#[inline(never)]
pub fn count_primes(max_prime: u64) -> u64 {
    let mut n = 0;
    let mut c: u64 = 3;
    while c < max_prime {
        let t = (c as f64).sqrt();
        let mut l: u64 = 2;
        // gcc -O2 (sysbench's build, and Debian's sysbench binary) peels l = 2 off
        // the loop and tests c's low bit for it; every later l is a 64-bit `div`,
        // compared to t after a signed conversion (l is far below 2^63).
        if l as f64 <= t && c % 2 != 0 {
            l = 3;
            while l as i64 as f64 <= t {
                if rem_u64(c, l) == 0 {
                    break;
                }
                l += 1;
            }
        }
        if l as f64 > t {
            n += 1;
        }
        c += 1;
    }
    n
}

/// `c % l` with the 64-bit `div` instruction, as gcc builds sysbench's `c % l` on
/// `unsigned long long`. A plain `%` on u64 does not do it: LLVM's x86 tuning
/// (`idivq-to-divl`) adds a run-time test that divides in 32 bits when both operands
/// fit, and every operand of a sysbench event fits. `l` must not be 0 (the `div`
/// would raise SIGFPE); [`count_primes`] divides by 2 and up only.
#[inline(always)]
#[allow(unsafe_code)]
fn rem_u64(c: u64, l: u64) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let rem: u64;
        // SAFETY: `div` reads rdx:rax and `l` and writes rax and rdx, nothing else (no
        // memory, no stack, no flags the compiler relies on: `pure, nomem, nostack`).
        // With rdx = 0 the quotient fits in 64 bits, so it faults only when l = 0,
        // which the caller rules out.
        unsafe {
            std::arch::asm!(
                "div {l}",
                l = in(reg) l,
                inout("rax") c => _,
                inout("rdx") 0u64 => rem,
                options(pure, nomem, nostack),
            );
        }
        rem
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        c % l
    }
}

/// `n` rounds of one FMA on every chain, with hardware FMA where the CPU has it.
// The one `unsafe` outside nnb-sys: calling a `target_feature` function.
#[allow(unsafe_code)]
fn fma_chains(acc: &mut [f64; FMA_CHAINS], n: u64) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU supports FMA (checked just above).
            unsafe { fma_chains_x86_fma(acc, n) };
            return;
        }
    }
    fma_rounds(acc, n);
}

/// The FMA loop compiled with the `fma` target feature, so `mul_add` is one
/// instruction instead of a libm call.
///
/// # Safety
///
/// The CPU must support FMA (`is_x86_feature_detected!("fma")`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
#[allow(unsafe_code)]
unsafe fn fma_chains_x86_fma(acc: &mut [f64; FMA_CHAINS], n: u64) {
    fma_rounds(acc, n);
}

/// The chains converge to 1e-6 / (1 - 0.999_999_9) = 10 and stay finite and normal.
/// The accumulators are copied to a local array so they live in registers for the
/// whole loop (12 `ymm` chains with FMA), not in memory behind `acc`.
#[inline(always)]
fn fma_rounds(acc: &mut [f64; FMA_CHAINS], n: u64) {
    let (a, b) = (black_box(FMA_A), black_box(FMA_B));
    let mut v = *acc;
    for _ in 0..n {
        for x in v.iter_mut() {
            *x = x.mul_add(a, b);
        }
    }
    *acc = v;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_round_trip() {
        for name in Workload::NAMES {
            let w: Workload = name.parse().unwrap();
            assert_eq!(w.to_string(), name);
            // Results files name it as the command line does.
            let json = serde_json::to_value(w).unwrap();
            assert_eq!(json["name"], name);
            assert!(w.default_ops() > 0 && w.check_every() > 0);
        }
        let err = "avx".parse::<Workload>().unwrap_err().to_string();
        assert!(err.contains("avx"));
        for name in Workload::NAMES {
            assert!(err.contains(name), "{err} does not list {name}");
        }
    }

    /// 1229 primes below 10000, minus 2 (sysbench starts at 3): 1228.
    #[test]
    fn primes_counts_like_sysbench() {
        assert_eq!(count_primes(10_000), 1228);
        assert_eq!(count_primes(10), 3); // 3, 5, 7
        let mut r = Workload::Primes { max_prime: 100 }.runner();
        assert_eq!(r.run_ops(3), 3 * 24);
    }

    /// It counts what a sieve of Eratosthenes counts (primes in 3..max), at the edges
    /// of the range too.
    #[test]
    fn primes_match_a_sieve() {
        let sieve = |max: usize| -> u64 {
            let mut composite = vec![false; max.max(2)];
            let mut n = 0;
            for c in 2..max {
                if !composite[c] {
                    n += u64::from(c >= 3);
                    (c * c..max).step_by(c).for_each(|m| composite[m] = true);
                }
            }
            n
        };
        for max in [
            0usize, 1, 3, 4, 5, 9, 10, 26, 49, 50, 121, 122, 10_007, 20_000,
        ] {
            assert_eq!(count_primes(max as u64), sieve(max), "below {max}");
        }
    }

    /// sysbench's event loop (`cpu_execute_event`, src/tests/cpu/sb_cpu.c), as the
    /// reference the `primes` machine code is checked against.
    const SYSBENCH_CPU_EVENT_C: &str = r#"
        #include <math.h>
        static unsigned int max_prime = 10000;
        unsigned long long thread_count_primes;
        int cpu_execute_event(void *r, int thread_id) {
            unsigned long long c, l, n = 0;
            double t;
            (void)r; (void)thread_id;
            for (c = 3; c < max_prime; c++) {
                t = sqrt((double)c);
                for (l = 2; l <= t; l++)
                    if (c % l == 0)
                        break;
                if (l > t)
                    n++;
            }
            thread_count_primes = n;
            return 0;
        }
    "#;

    /// The `div` instructions (with their width suffix, `divq` or `divl`) in the
    /// functions of `binary` whose demangled name contains `name`, by `objdump`.
    fn divides_in(binary: &Path, name: &str) -> Vec<String> {
        let out = std::process::Command::new("objdump")
            .args(["-d", "--no-show-raw-insn", "-M", "suffix", "-C"])
            .arg(binary)
            .output()
            .expect("objdump runs");
        assert!(
            out.status.success(),
            "objdump failed on {}",
            binary.display()
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let mut inside = false;
        let mut divs = Vec::new();
        for line in text.lines() {
            if line.ends_with(">:") {
                inside = line.contains(name);
            } else if inside {
                let mnemonic = line.split('\t').nth(1).unwrap_or("").trim();
                let mnemonic = mnemonic.split_whitespace().next().unwrap_or("");
                if mnemonic.starts_with("div") && !mnemonic.starts_with("divs") {
                    divs.push(mnemonic.to_string());
                }
            }
        }
        divs
    }

    /// `primes` divides as sysbench does: gcc -O2 (sysbench's build) turns the C loop's
    /// `c % l` into a 64-bit `divq` only, and every function of nnb's `primes` event
    /// has `divq` and nothing else (no 32-bit `divl`, which is about 2.4x faster on
    /// Intel and made nnb read 1.8-2.4x sysbench's events/s).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn primes_divides_in_64_bits_like_sysbench() {
        let have = |tool: &str| {
            std::process::Command::new(tool)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if !nnb_testkit::require(have("gcc") && have("objdump"), "needs gcc and objdump") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("sb_cpu.c");
        let obj = dir.path().join("sb_cpu.o");
        std::fs::write(&src, SYSBENCH_CPU_EVENT_C).unwrap();
        let gcc = std::process::Command::new("gcc")
            .args(["-O2", "-c", "-o"])
            .args([&obj, &src])
            .status()
            .unwrap();
        assert!(gcc.success());
        let sysbench = divides_in(&obj, "cpu_execute_event");
        assert_eq!(sysbench, ["divq"], "gcc's build of sysbench's loop");

        let exe = std::env::current_exe().unwrap();
        let ours = divides_in(&exe, "count_primes");
        assert!(!ours.is_empty(), "no divide found in count_primes");
        assert!(
            ours.iter().all(|d| d == "divq"),
            "primes divides with {ours:?}, sysbench with divq only"
        );
        assert_eq!(count_primes(black_box(10_000)), 1228);
    }

    /// n `primes` events take n events' CPU time: the compiler may not count the
    /// primes once and multiply (it did, with the bound read once outside the loop:
    /// `nnb cpu --workload primes --ops N` ran one event). 100 events against the
    /// quickest of 5 single events, on the thread's own CPU clock: about 100x, at
    /// least 20x here.
    #[test]
    fn primes_runs_every_event() {
        let mut r = Workload::Primes { max_prime: 10_000 }.runner();
        let mut cpu_ns = |n| {
            let start = nnb_sys::clock::thread_cpu_ns();
            r.run_ops(n);
            nnb_sys::clock::thread_cpu_ns() - start
        };
        let one = (0..5).map(|_| cpu_ns(1)).min().unwrap_or(0);
        let hundred = cpu_ns(100);
        assert!(
            hundred > 20 * one,
            "100 events {hundred} ns, 1 event {one} ns"
        );
    }

    /// The fpadd checksum is cpu_burn's x after n ops, and chunked runs equal one run.
    #[test]
    fn chunked_runs_equal_one_run() {
        let mut x = 0.0f64;
        for i in 0..1000u64 {
            x += i as f64 * 0.000001;
        }
        let mut one = Workload::FpAdd.runner();
        assert_eq!(one.run_ops(1000), x.to_bits());
        for w in [
            Workload::FpAdd,
            Workload::CpuBurnO0,
            Workload::Fma,
            Workload::Int,
        ] {
            let mut a = w.runner();
            let mut b = w.runner();
            let whole = a.run_ops(300);
            b.run_ops(100);
            assert_eq!(b.run_ops(200), whole, "{w}");
        }
    }

    /// Chunks with a stop check give one run's checksum for every workload, and a
    /// raised stop ends the run at the next chunk.
    #[test]
    fn run_ops_until_matches_one_run_and_stops() {
        let mem = Workload::Mem { bytes: 4096 };
        let primes = Workload::Primes { max_prime: 50 };
        let all = [
            Workload::FpAdd,
            Workload::CpuBurnO0,
            Workload::Fma,
            Workload::Int,
            mem,
            primes,
        ];
        for w in all {
            let whole = w.runner().run_ops(1000);
            assert_eq!(
                w.runner().run_ops_until(1000, 64, || false),
                (1000, whole),
                "{w}"
            );
            let mut checks = 0;
            let stopped = w.runner().run_ops_until(1000, 64, || {
                checks += 1;
                checks > 3
            });
            assert_eq!(stopped.0, 192, "{w}");
        }
    }

    /// The cpu-burn-o0 checksum is cpu_burn's x after n ops (Listing 5.1 with a
    /// `long long` i), bit for bit the same as fpadd's, in one run or in chunks.
    #[test]
    fn cpu_burn_o0_checksum_is_cpu_burns_x() {
        let mut x = 0.0f64;
        for i in 0..100_000i64 {
            x += i as f64 * 0.000001;
        }
        assert_eq!(Workload::CpuBurnO0.runner().run_ops(100_000), x.to_bits());
        assert_eq!(Workload::FpAdd.runner().run_ops(100_000), x.to_bits());
        let mut r = Workload::CpuBurnO0.runner();
        assert_eq!(
            r.run_ops_until(100_000, 7, || false),
            (100_000, x.to_bits())
        );
        assert_eq!(r.run_ops(0), x.to_bits());
    }

    #[test]
    fn fma_stays_finite() {
        let mut r = Workload::Fma.runner();
        r.run_ops(1_000_000);
        if let State::Fma { acc } = &r.state {
            assert!(acc.iter().all(|v| v.is_finite() && v.is_normal()));
        }
    }

    /// x_n = 10 + (x_0 - 10) * a^n for x = x * a + b with b / (1 - a) = 10: after
    /// 1e6 ops every one of the 48 chains moved from its own start 1 + k/1000 by the
    /// same factor a^1e6 = exp(1e6 * ln 0.9999999) = 0.904837..., so each chain was
    /// advanced n times independently of the others; the checksum is deterministic.
    #[test]
    fn fma_runs_48_independent_chains() {
        let n = 1_000_000u64;
        let factor = 0.904_837_4;
        let mut r = Workload::Fma.runner();
        let checksum = r.run_ops(n);
        assert_eq!(Workload::Fma.runner().run_ops(n), checksum);
        let State::Fma { acc } = &r.state else {
            panic!("not an fma runner");
        };
        assert_eq!(acc.len(), 48);
        for (k, v) in acc.iter().enumerate() {
            let x0 = 1.0 + k as f64 * 1e-3;
            let expected = 10.0 + (x0 - 10.0) * factor;
            assert!((v - expected).abs() < 1e-6, "chain {k}: {v} vs {expected}");
        }
    }

    #[test]
    fn mem_wraps_around_its_buffer() {
        let mut r = Workload::Mem { bytes: 4096 }.runner();
        let first = r.run_ops(64);
        let second = r.run_ops(64);
        // The second pass sees the words the first pass wrote back.
        assert_ne!(first, second);
    }

    #[test]
    fn cache_sizes_parse() {
        assert_eq!(parse_cache_size("32768K"), Some(32 << 20));
        assert_eq!(parse_cache_size("2M"), Some(2 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("xK"), None);
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(default_mem_bytes(dir.path()), DEFAULT_MEM_BYTES);
        let idx = dir.path().join("sys/devices/system/cpu/cpu0/cache/index3");
        std::fs::create_dir_all(&idx).unwrap();
        std::fs::write(idx.join("size"), "1024K\n").unwrap();
        assert_eq!(default_mem_bytes(dir.path()), 4 << 20);
    }
}
