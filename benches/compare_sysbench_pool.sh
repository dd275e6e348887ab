#!/usr/bin/env bash
# nnb's shared event pool against sysbench's, on the same fixed number of events:
# `sysbench cpu --threads=2 --events=N --time=0` beside
# `nnb cpu --workload primes --pool shared --threads 2 --ops N` (and, for reference,
# nnb's per-thread shares, `--pool per-thread --ops N/2`), interleaved run by run.
# Reports, for each tool, the runtime of the N events (sysbench's "total time", nnb's
# wall time) and how the events split between the threads, in two passes:
#   1. alone: the goal is the same runtime, nnb shared / sysbench within 1.00 +- 0.05;
#   2. with a spinner pinned to CPU 1 (one thread of each tool slowed to half speed):
#      a shared pool (sysbench's and nnb's) gives the slowed thread about 1/3 of the
#      events and ends after about 2/3 of the per-thread shares' runtime.
#
# Usage: benches/compare_sysbench_pool.sh [EVENTS] [REPS]
#   EVENTS defaults to 20000 (about 3 s of 2 threads), REPS to 5 runs of each tool per
#   pass.
#   PRIO (environment) prefixes every command, the spinner's too; default `chrt -r 10`
#   as root (SCHED_RR: round-robin 100 ms slices, so the spinner and the thread beside
#   it share CPU 1 evenly and other processes' load does not move them; throttled to 95%
#   of each second). Set PRIO= to run at normal priority.
# sysbench's two worker threads are pinned to CPUs 0 and 1 once started, as nnb's are.
# NNB (environment) names an nnb binary to use instead of building one.
# Needs: sysbench, taskset, python3, 2 CPUs (0 and 1), a release build (made here).
set -euo pipefail

cd "$(dirname "$0")/.."
EVENTS="${1:-20000}"
REPS="${2:-5}"
MAX_PRIME=10000
OUT_DIR="${OUT_DIR:-${CARGO_TARGET_DIR:-target}/compare-sysbench-pool}"
mkdir -p "$OUT_DIR"

command -v sysbench >/dev/null || { echo "sysbench not found: apt-get install sysbench" >&2; exit 1; }
if [ -z "${NNB:-}" ]; then
  cargo build --release -p nnb >&2
  NNB="${CARGO_TARGET_DIR:-target}/release/nnb"
fi
if [ -z "${PRIO+x}" ]; then
  if [ "$(id -u)" = 0 ]; then PRIO="chrt -r 10"; else PRIO=""; fi
fi
read -r -a RUN <<<"$PRIO"

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, $(uname -r)"
echo "sysbench: $(sysbench --version); nnb: $("$NNB" --version)"
echo "work: $EVENTS primes events (below $MAX_PRIME), 2 threads, $REPS runs of each tool per pass"
echo "priority prefix: '${PRIO:-none}'; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

# sysbench with its two worker threads pinned to CPUs 0 and 1 as soon as they exist,
# as nnb pins its threads (unpinned, both could share one CPU beside the spinner's
# other CPU: under SCHED_RR both did, and ran at half speed each).
sysbench_pinned() {
  "${RUN[@]}" sysbench cpu --cpu-max-prime="$MAX_PRIME" --threads=2 --events="$EVENTS" \
    --time=0 run >"$1" &
  local pid=$! workers=()
  while kill -0 "$pid" 2>/dev/null; do
    mapfile -t workers < <(ls "/proc/$pid/task" 2>/dev/null | sort -n | tail -n +2)
    [ "${#workers[@]}" -ge 2 ] && break
  done
  taskset -p -c 0 "${workers[0]}" >/dev/null
  taskset -p -c 1 "${workers[1]}" >/dev/null
  wait "$pid"
}

# One pass: sysbench, nnb shared, nnb per-thread, REPS times in turn.
pass() {
  local name=$1
  for i in $(seq "$REPS"); do
    sysbench_pinned "$OUT_DIR/$name.sysbench.$i.txt"
    "${RUN[@]}" "$NNB" cpu --workload primes --max-prime "$MAX_PRIME" --threads 2 \
      --pool shared --ops "$EVENTS" --reps 1 --warmup 0 --json >"$OUT_DIR/$name.shared.$i.json"
    "${RUN[@]}" "$NNB" cpu --workload primes --max-prime "$MAX_PRIME" --threads 2 \
      --pool per-thread --ops $((EVENTS / 2)) --reps 1 --warmup 0 --json \
      >"$OUT_DIR/$name.per-thread.$i.json"
  done
}

pass alone
# A spinner on CPU 1 at the same priority as the tools.
"${RUN[@]}" taskset -c 1 sh -c 'while :; do :; done' &
SPINNER=$!
trap 'kill "$SPINNER" 2>/dev/null || true' EXIT
sleep 0.2
pass spinner
kill "$SPINNER"
wait "$SPINNER" 2>/dev/null || true
trap - EXIT

python3 - "$OUT_DIR" "$REPS" <<'PY'
import json, re, statistics, sys
d, reps = sys.argv[1], int(sys.argv[2])

def sysbench(path):
    t = open(path).read()
    total = float(re.search(r"total time:\s+([\d.]+)s", t).group(1))
    events = int(re.search(r"total number of events:\s+(\d+)", t).group(1))
    avg, sd = map(float, re.search(r"events \(avg/stddev\):\s+([\d.]+)/([\d.]+)", t).groups())
    # Two threads: avg +- sd are the two counts.
    return total, events, sorted([round(avg - sd), round(avg + sd)])

def nnb(path):
    r = json.load(open(path))["steps"][0]["runs"][0]
    ops = [t["ops"] for t in r["threads"]]
    return r["wall_ns"] / 1e9, sum(ops), ops

for name in ["alone", "spinner"]:
    rows = {
        "sysbench --events": [sysbench(f"{d}/{name}.sysbench.{i}.txt") for i in range(1, reps + 1)],
        "nnb --pool shared": [nnb(f"{d}/{name}.shared.{i}.json") for i in range(1, reps + 1)],
        "nnb --pool per-thread": [nnb(f"{d}/{name}.per-thread.{i}.json") for i in range(1, reps + 1)],
    }
    print(f"pass: {name}")
    print(f"{'':24}{'runtime mean s':>15}{'CV':>8}{'events':>9}  events per thread (each run)")
    for k, v in rows.items():
        t = [x[0] for x in v]
        cv = statistics.stdev(t) / statistics.mean(t) if len(t) > 1 else 0.0
        print(f"{k:24}{statistics.mean(t):>15.4f}{cv*100:>7.2f}%{v[0][1]:>9}  {[x[2] for x in v]}")
    mean = {k: statistics.mean(x[0] for x in v) for k, v in rows.items()}
    sb, sh, pt = mean["sysbench --events"], mean["nnb --pool shared"], mean["nnb --pool per-thread"]
    print(f"runtime ratios: nnb shared / sysbench {sh/sb:.4f}, nnb shared / nnb per-thread "
          f"{sh/pt:.4f}, sysbench / nnb per-thread {sb/pt:.4f}")
    if name == "spinner":
        slow = [min(x[2]) / x[1] for x in rows["nnb --pool shared"]]
        sslow = [min(x[2]) / x[1] for x in rows["sysbench --events"]]
        print(f"slowed thread's share of the events: nnb shared {statistics.mean(slow):.3f}, "
              f"sysbench {statistics.mean(sslow):.3f} (expected about 1/3)")
    print()
PY
