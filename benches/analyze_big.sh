#!/usr/bin/env bash
# `nnb analyze` on a big run (issue 6): a load-steps run of 1000 steps (100 load levels
# x 10 repetitions, a probe and 4 load-generating neighbors each, 5000 records) with 10
# million RTT samples in 1000 HDR interval logs (one histogram per second, 10 each),
# written by crates/analysis/examples/gen_big_run.rs in the results format. Times
# `nnb analyze RUN --out DIR` (every table and plot, index.md, index.html) and prints
# its wall time and peak memory against the targets: < 10 s and < 1 GB.
#
# Usage: benches/analyze_big.sh [STEPS] [SAMPLES]      (defaults 1000 and 10000000)
#        benches/analyze_big.sh --levels N               (a staircase of N levels instead)
#   WORK (environment): where the run and report go; default a new temporary directory.
#
# --levels N (reliability review NL4): a neighbor-staircase run of N levels x 2
# repetitions (one record each), made from crates/analysis/fixtures/staircase by
# python3, so the time per level shows; it was quadratic in the levels (10,000 levels
# 8-12 s, 20,000 about 24 s), the same targets apply. Needs python3.
# Needs: /usr/bin/time (GNU time), a release build (made here, without the AWS SDK);
#   optionally PYTHON with pandas and hdrhistogram for the peer comparison.
# Exits 1 when a target is missed.
set -euo pipefail

cd "$(dirname "$0")/.."
STEPS="${1:-1000}"
SAMPLES="${2:-10000000}"
TARGET="${CARGO_TARGET_DIR:-target}"
WORK="${WORK:-$(mktemp -d)}"
MAX_WALL_S=10
MAX_RSS_MIB=1024

[ -x /usr/bin/time ] || { echo "GNU time not found: apt-get install time" >&2; exit 1; }
cargo build --release --no-default-features --features analysis --bin nnb >&2
cargo build --release -p nnb-analysis --example gen_big_run >&2

rm -rf "$WORK/results" "$WORK/report"
if [ "$STEPS" = "--levels" ]; then
  LEVELS="${2:?--levels needs a count}"
  RUN="$WORK/results/staircase-$LEVELS"
  python3 - crates/analysis/fixtures/staircase "$RUN" "$LEVELS" <<'PY'
import json, os, sys
fixture, run, levels = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(run)
m = json.load(open(f"{fixture}/manifest.json"))
m["run_id"] = f"staircase-{levels}"
m["experiment"]["scenario"]["levels"] = list(range(levels))
m["experiment"]["repetitions"], m["experiment"]["warmup"] = 2, 0
m["planned_steps"] = 2 * levels
json.dump(m, open(f"{run}/manifest.json", "w"))
record = json.loads(open(f"{fixture}/samples.jsonl").readline())
with open(f"{run}/samples.jsonl", "w") as out:
    for level in range(levels):
        for rep in (1, 2):
            runtime = 10.0 + level * 0.001 + rep * 0.01
            record.update(run_id=m["run_id"], step=f"busy/neighbors={level}/rep={rep}",
                          step_index=2 * level + rep - 1, level=float(level),
                          level_label=f"neighbors={level}", rep=rep, warmup=False,
                          value=runtime, runtime_s=runtime, ops_per_sec=1e9 / runtime)
            out.write(json.dumps(record) + "\n")
PY
  echo "run: $RUN"
  echo "     $LEVELS levels, $(wc -l < "$RUN/samples.jsonl") records, $(du -sh "$RUN" | cut -f1) on disk"
else
  RUN=$("$TARGET/release/examples/gen_big_run" "$WORK/results" "$STEPS" "$SAMPLES")
  echo "run: $RUN"
  echo "     $(wc -l < "$RUN/samples.jsonl") records, $(find "$RUN/hdr" -name '*.hlog' | wc -l) HDR logs, $(du -sh "$RUN" | cut -f1) on disk, $SAMPLES RTT samples"
fi

/usr/bin/time -v -o "$WORK/time.txt" "$TARGET/release/nnb" analyze "$RUN" --out "$WORK/report" \
  > "$WORK/stdout.txt" 2> "$WORK/stderr.txt" || { cat "$WORK/stderr.txt" >&2; exit 1; }

# GNU time writes "Elapsed (wall clock) time (h:mm:ss or m:ss): 0:03.12".
WALL_S=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$WORK/time.txt")
RSS_KIB=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$WORK/time.txt")
RSS_MIB=$(awk -v k="$RSS_KIB" 'BEGIN { printf "%.0f", k / 1024 }')
FILES=$(find "$WORK/report" -type f | wc -l)
echo "report: $WORK/report ($FILES files)"
echo "wall time: ${WALL_S} s (target < ${MAX_WALL_S} s)"
echo "max RSS:   ${RSS_MIB} MiB (target < ${MAX_RSS_MIB} MiB)"

# The peer, when its Python packages are there (pip install pandas hdrhistogram): the
# same latency and throughput tables computed with pandas and hdrh, as the thesis'
# hand-written scripts would, beside nnb's tables-only time on the same run.
PY="${PYTHON:-python3}"
if [ "$STEPS" = "--levels" ]; then
  :  # the peer reads load-steps runs only
elif "$PY" -c "import pandas, hdrh" 2>/dev/null; then
  /usr/bin/time -f "nnb analyze (tables only): %e s, %M KiB" "$TARGET/release/nnb" analyze "$RUN" > /dev/null
  "$PY" benches/analyze_vs_pandas.py "$RUN" 2> /dev/null
else
  echo "peer skipped: $PY lacks pandas or hdrh (pip install pandas hdrhistogram)"
fi
awk -v w="$WALL_S" -v r="$RSS_MIB" -v mw="$MAX_WALL_S" -v mr="$MAX_RSS_MIB" \
  'BEGIN { if (w < mw && r < mr) { print "PASS"; exit 0 } print "FAIL"; exit 1 }'
