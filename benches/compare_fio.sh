#!/usr/bin/env bash
# nnb disk against fio, at the same settings, interleaved, on this machine's disk.
# For each target rate (and `max`), REPS rounds of: nnb disk, fio with Q synchronous
# jobs (psync), fio with one libaio job of depth Q. Reports, side by side:
#   1. achieved IOPS (mean of the reps, min..max) and their share of the target;
#   2. latency p50/p99 of reads and of writes, as each tool measures it (nnb: the time
#      of one pread/pwrite; fio: lat_ns, submission to completion, with
#      --lat_percentiles=1);
#   3. pacing, measured the same way for both tools: the device's own completion
#      counters (/sys/class/block/DEV/stat, reads + writes completed) sampled every
#      100 ms during the run (its first and last second dropped), as the coefficient
#      of variation of the per-100 ms IOPS: a perfectly paced 1000 IOPS completes 100
#      per interval, CV near 0. Other processes' I/O on the same device counts too,
#      alike for both tools (runs are interleaved). nnb's own view of its pacing (how
#      late operations started against their schedule: p99, and how many more than
#      1 ms late) is printed beside it; fio does not report one.
#
# The settings, and how they map (the non-obvious part is the rate):
#   nnb --iops T counts reads and writes together, on one global schedule shared by
#   its Q threads. fio's --rate_iops caps each direction separately (comma-separated
#   values: reads, writes; a single value caps reads AND writes at that rate, i.e. 2T
#   in total at a 50/50 mix) and it caps each job separately (numjobs clones each get
#   the cap). So T total at read fraction F becomes
#     psync,  --numjobs=Q:  --rate_iops=T*F/Q,T*(1-F)/Q
#     libaio, --iodepth=Q:  --rate_iops=T*F,T*(1-F)
#   fio's rates are integers: the script refuses a T, F, Q whose shares are not whole.
#   With rwmixread, fio draws each operation's direction at random and then waits for
#   that direction's schedule; nnb draws the direction per operation too, on one
#   schedule. fio's rate_process=linear (its default) is nnb's fixed schedule.
#   nnb --read-fraction F      = fio --rwmixread=100*F --rw=randrw
#   nnb --block-size B (bytes) = fio --bs=B            (bare byte counts for both:
#   nnb --size S (bytes)       = fio --size=S           fio's 4k/256M are binary)
#   nnb direct I/O (default)   = fio --direct=1
#   uniform offsets, repeats   = fio --norandommap (nnb draws with replacement)
#   one shared file            = fio --filename=DIR/fio-compare.dat for every job
#   threads                    = fio --thread
#   nnb writes its file in full before every run (not counted); fio lays its file out
#   once, before its first run.
#
# Usage: benches/compare_fio.sh [DIR] [SECONDS_PER_RUN]
#   DIR: a directory on the disk to measure, default a fresh one under /tmp (removed
#   afterwards); SECONDS_PER_RUN defaults to 10.
#   Environment: TARGETS (default "200 1000 5000 20000 max"), REPS (3), Q (4),
#   READ_FRACTION (0.5), BS (4096), SIZE (268435456 = 256 MiB).
# Needs: fio (installed with apt-get here when missing and run as root), python3, a
# release build (made here).
set -euo pipefail

cd "$(dirname "$0")/.."
SECS="${2:-10}"
TARGETS="${TARGETS:-200 1000 5000 20000 max}"
REPS="${REPS:-3}"
Q="${Q:-4}"
READ_FRACTION="${READ_FRACTION:-0.5}"
BS="${BS:-4096}"
SIZE="${SIZE:-268435456}"
OUT_DIR="${OUT_DIR:-${CARGO_TARGET_DIR:-target}/compare-fio}"
mkdir -p "$OUT_DIR"
rm -f "$OUT_DIR"/*.json "$OUT_DIR/runs.tsv" "$OUT_DIR/stat.tsv"

if ! command -v fio >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "fio not found: installing it with apt-get" >&2
    apt-get install -y fio >&2 || { apt-get update >&2 && apt-get install -y fio >&2; }
  else
    echo "fio not found: apt-get install fio" >&2
    exit 1
  fi
fi
cargo build --release -p nnb >&2
NNB="${CARGO_TARGET_DIR:-target}/release/nnb"

MADE_DIR=""
if [ -n "${1:-}" ]; then
  DIR="$1"
else
  DIR="$(mktemp -d /tmp/nnb-compare-fio.XXXXXX)"
  MADE_DIR=1
fi
FIO_FILE="$DIR/fio-compare.dat"
SAMPLER=""
cleanup() {
  if [ -n "$SAMPLER" ]; then kill "$SAMPLER" 2>/dev/null || true; fi
  rm -f "$FIO_FILE"
  if [ -n "$MADE_DIR" ]; then rmdir "$DIR" 2>/dev/null || true; fi
}
trap cleanup EXIT

# fio's per-direction, per-job caps for T total (see above); "" for max.
rate_iops() { # TARGET JOBS
  python3 - "$1" "$READ_FRACTION" "$2" <<'EOF'
import sys
t, f, jobs = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
if t == "max":
    print("")
    sys.exit(0)
r, w = float(t) * f / jobs, float(t) * (1 - f) / jobs
if r != int(r) or w != int(w):
    sys.exit(f"target {t} at read fraction {f} over {jobs} job(s) is {r},{w} IOPS per "
             "direction per job: fio takes whole numbers; pick a target that divides")
print(f"--rate_iops={int(r)},{int(w)}")
EOF
}

# The block device under DIR, for its completion counters (skipped when not found).
DEV="$(basename "$(df --output=source "$DIR" | tail -1)")"
STAT="/sys/class/block/$DEV/stat"
if [ -r "$STAT" ]; then
  python3 - "$STAT" >"$OUT_DIR/stat.tsv" <<'EOF' &
import sys, time
path = sys.argv[1]
while True:
    f = open(path).read().split()
    print(f"{time.time():.4f}\t{int(f[0]) + int(f[4])}", flush=True)
    time.sleep(0.1 - time.time() % 0.1)
EOF
  SAMPLER=$!
else
  echo "no $STAT: the device-side pacing column is left out" >&2
fi

MIX="$(python3 -c "print(round(100 * $READ_FRACTION))")"
FIO_COMMON=(--name=compare --filename="$FIO_FILE" --size="$SIZE" --rw=randrw --rwmixread="$MIX"
  --bs="$BS" --direct=1 --norandommap --time_based --runtime="${SECS}s" --thread
  --group_reporting --lat_percentiles=1 --output-format=json)
for t in $TARGETS; do rate_iops "$t" "$Q" >/dev/null; rate_iops "$t" 1 >/dev/null; done

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, $(uname -r)"
echo "disk: $DIR on $(df --output=source,fstype "$DIR" | tail -1 | xargs), device $DEV" \
  "($(cat "/sys/class/block/$DEV/queue/scheduler" 2>/dev/null || echo 'scheduler unknown'))"
echo "$(fio --version); nnb: $("$NNB" --version)"
echo "settings: randrw, ${READ_FRACTION} reads, ${BS}-byte blocks, $SIZE-byte file, Q=$Q," \
  "direct I/O, ${SECS}s per run, $REPS reps, targets: $TARGETS"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

now() { python3 -c 'import time; print(f"{time.time():.4f}")'; }
run() { # TOOL TARGET REP COMMAND...
  local tool="$1" target="$2" rep="$3" start
  shift 3
  start="$(now)"
  "$@" >"$OUT_DIR/${tool}_${target}_${rep}.json"
  printf '%s\t%s\t%s\t%s\t%s\n' "$tool" "$target" "$rep" "$start" "$(now)" >>"$OUT_DIR/runs.tsv"
}

for rep in $(seq "$REPS"); do
  for t in $TARGETS; do
    echo "rep $rep, target $t" >&2
    run nnb "$t" "$rep" "$NNB" disk --dir "$DIR" --iops "$t" --read-fraction "$READ_FRACTION" \
      --block-size "$BS" --queue-depth "$Q" --size "$SIZE" --duration "${SECS}s" --json
    # shellcheck disable=SC2046 # an empty rate is no argument
    run fio-psync "$t" "$rep" fio "${FIO_COMMON[@]}" --ioengine=psync --numjobs="$Q" \
      $(rate_iops "$t" "$Q")
    # shellcheck disable=SC2046
    run fio-libaio "$t" "$rep" fio "${FIO_COMMON[@]}" --ioengine=libaio --iodepth="$Q" \
      --numjobs=1 $(rate_iops "$t" 1)
  done
done

python3 - "$OUT_DIR" "$SECS" "$TARGETS" <<'EOF'
import json, os, statistics, sys
d, secs, targets = sys.argv[1], float(sys.argv[2]), sys.argv[3].split()
tools = ["nnb", "fio-psync", "fio-libaio"]
runs = [l.split("\t") for l in open(f"{d}/runs.tsv").read().splitlines()]
stat = []
if os.path.exists(f"{d}/stat.tsv"):
    stat = [tuple(map(float, l.split("\t"))) for l in open(f"{d}/stat.tsv").read().splitlines()
            if l.count("\t") == 1]

def device_cv(start, end):
    # The measured window is the last `secs` before the tool exited; drop its first
    # and last second.
    lo, hi = max(start, end - secs) + 1.0, end - 1.0
    pts = [(t, n) for t, n in stat if lo <= t <= hi]
    rates = [(n2 - n1) / (t2 - t1) for (t1, n1), (t2, n2) in zip(pts, pts[1:]) if t2 > t1]
    if len(rates) < 3 or statistics.mean(rates) == 0:
        return None
    return statistics.pstdev(rates) / statistics.mean(rates)

def read(tool, target, rep):
    j = json.load(open(f"{d}/{tool}_{target}_{rep}.json"))
    if tool == "nnb":
        lat = lambda k: (j[k]["p50_ns"] / 1e3, j[k]["p99_ns"] / 1e3) if j[k] else (None, None)
        p = j["pacing"]
        return dict(iops=j["iops"], r=lat("read_latency"), w=lat("write_latency"),
                    late_p99=p["p99_ns"] / 1e3 if p else None, late_ops=p["late_ops"] if p else None)
    job = j["jobs"][0]
    def lat(x):
        pc = job[x]["lat_ns"].get("percentile", {})
        if not job[x]["total_ios"]:
            return (None, None)
        return (pc["50.000000"] / 1e3, pc["99.000000"] / 1e3)
    return dict(iops=job["read"]["iops"] + job["write"]["iops"], r=lat("read"), w=lat("write"),
                late_p99=None, late_ops=None)

def fmt(v, spec=".0f"):
    return "-" if v is None else format(v, spec)

def pair(vals):
    a = [v[0] for v in vals if v[0] is not None]
    b = [v[1] for v in vals if v[1] is not None]
    return f"{fmt(statistics.median(a) if a else None)}/{fmt(statistics.median(b) if b else None)}"

hdr = (f"{'target':>7} {'tool':<11} {'IOPS mean':>10} {'min..max':>15} {'of target':>9} "
       f"{'read p50/p99 us':>16} {'write p50/p99 us':>17} {'dev CV/100ms':>12} "
       f"{'nnb late p99 us':>15} {'late>1ms':>8}")
print(hdr)
print("-" * len(hdr))
for t in targets:
    for tool in tools:
        rs = [r for r in runs if r[0] == tool and r[1] == t]
        res = [read(tool, t, r[2]) for r in rs]
        iops = [x["iops"] for x in res]
        m = statistics.mean(iops)
        share = "-" if t == "max" else f"{m / float(t) * 100:.2f}%"
        cvs = [c for c in (device_cv(float(r[3]), float(r[4])) for r in rs) if c is not None]
        cv = f"{statistics.mean(cvs) * 100:.1f}%" if cvs else "-"
        late = [x["late_p99"] for x in res if x["late_p99"] is not None]
        late_ops = [x["late_ops"] for x in res if x["late_ops"] is not None]
        print(f"{t:>7} {tool:<11} {m:>10.1f} {f'{min(iops):.0f}..{max(iops):.0f}':>15} {share:>9} "
              f"{pair([x['r'] for x in res]):>16} {pair([x['w'] for x in res]):>17} {cv:>12} "
              f"{fmt(statistics.median(late) if late else None, '.1f'):>15} "
              f"{fmt(sum(late_ops) if late_ops else None, 'd'):>8}")
    print()
print("IOPS: mean over the reps (min..max); latency: median over the reps of each run's "
      "p50/p99; dev CV: mean over the reps of the CV of the device's per-100 ms completions; "
      "late>1ms: nnb operations started more than 1 ms after their schedule, summed over the reps")
EOF
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
