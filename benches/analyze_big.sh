#!/usr/bin/env bash
# `nnb analyze` on a big run (issue 6): a load-steps run of 1000 steps (100 load levels
# x 10 repetitions, a probe and 4 load-generating neighbors each, 5000 records) with 10
# million RTT samples in 1000 HDR interval logs (one histogram per second, 10 each),
# written by crates/analysis/examples/gen_big_run.rs in the results format. Times
# `nnb analyze RUN --out DIR` (every table and plot, index.md, index.html) and prints
# its wall time and peak memory against the targets: < 10 s and < 1 GB.
#
# Usage: benches/analyze_big.sh [STEPS] [SAMPLES]      (defaults 1000 and 10000000)
#   WORK (environment): where the run and report go; default a new temporary directory.
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
RUN=$("$TARGET/release/examples/gen_big_run" "$WORK/results" "$STEPS" "$SAMPLES")
echo "run: $RUN"
echo "     $(wc -l < "$RUN/samples.jsonl") records, $(find "$RUN/hdr" -name '*.hlog' | wc -l) HDR logs, $(du -sh "$RUN" | cut -f1) on disk, $SAMPLES RTT samples"

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
if "$PY" -c "import pandas, hdrh" 2>/dev/null; then
  /usr/bin/time -f "nnb analyze (tables only): %e s, %M KiB" "$TARGET/release/nnb" analyze "$RUN" > /dev/null
  "$PY" benches/analyze_vs_pandas.py "$RUN" 2> /dev/null
else
  echo "peer skipped: $PY lacks pandas or hdrh (pip install pandas hdrhistogram)"
fi
awk -v w="$WALL_S" -v r="$RSS_MIB" -v mw="$MAX_WALL_S" -v mr="$MAX_RSS_MIB" \
  'BEGIN { if (w < mw && r < mr) { print "PASS"; exit 0 } print "FAIL"; exit 1 }'
