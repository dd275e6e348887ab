#!/usr/bin/env bash
# The UDP sink across cores (issue 27 item 1): `nnb serve --sink-threads 1` (one
# socket, today's sink) against `--sink-threads N` (N sockets on one port with
# SO_REUSEPORT, one pinned thread each), interleaved round by round, each fed by
# $SENDERS `nnb load --rate max` processes of $STREAMS streams on loopback.
#
# Per run it prints the datagrams per second the sink received (its own count over
# the senders' sending time), what the senders sent, the datagrams lost, the sink's
# own drops (the kernel's count on its sockets; a GSO buffer dropped whole counts
# once), and each socket's share; then the medians per configuration.
#
# By default the senders do not use GSO (--no-gso): every datagram reaches the sink
# as its own buffer, as from a NIC that does not coalesce, which is the sink's
# per-datagram cost. GSO=1 lets them send GSO runs (coalesced on receive).
#
# Usage: benches/sink_scaling.sh   (after `cargo build --release -p nnb`)
# Env:   NNB=path/to/nnb  DURATION=seconds per run (default 5)  ROUNDS (default 3)
#        THREADS=the N compared with 1 (default: nproc)  SENDERS (default 4)
#        STREAMS per sender (default 2)  MSG=payload bytes (default 1400)
#        PORT (default 11412)  GSO=1 to let the senders use GSO
set -euo pipefail

NNB=$(realpath -m "${NNB:-${CARGO_TARGET_DIR:-target}/release/nnb}")
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-$(nproc)}
SENDERS=${SENDERS:-4}
STREAMS=${STREAMS:-2}
MSG=${MSG:-1400}
PORT=${PORT:-11412}
GSO=${GSO:-0}
cd "$(dirname "$0")/.."

command -v jq >/dev/null || { echo "needs jq" >&2; exit 1; }
[ -x "$NNB" ] || { echo "no nnb binary at $NNB (cargo build --release -p nnb)" >&2; exit 1; }
TMP=$(mktemp -d)
SERVE_PID=
cleanup() {
    if [ -n "$SERVE_PID" ]; then kill "$SERVE_PID" 2>/dev/null || true; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
GSO_FLAG=--no-gso
[ "$GSO" = 1 ] && GSO_FLAG=

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
row() { printf '%-18s %12s %12s %12s %12s  %s\n' "$@"; }

# One run with $1 sink threads; sets PPS and DROPS and prints a row.
run() {
    local n=$1 round=$2
    "$NNB" serve --no-reflector --no-tcp --sink-port "$PORT" --sink-threads "$n" --json \
        --duration "$((DURATION + 4))s" >"$TMP/serve.json" &
    SERVE_PID=$!
    for _ in $(seq 100); do
        grep -q listening "$TMP/serve.json" 2>/dev/null && break
        sleep 0.05
    done
    local pids=()
    for s in $(seq "$SENDERS"); do
        # shellcheck disable=SC2086
        "$NNB" load --target "127.0.0.1:$PORT" --rate max --streams "$STREAMS" \
            --msg-size "$MSG" --duration "${DURATION}s" --interval 0 $GSO_FLAG --json \
            >"$TMP/load_$s.json" &
        pids+=($!)
    done
    wait "${pids[@]}"
    wait "$SERVE_PID"
    SERVE_PID=
    local summary sent elapsed lost received
    summary=$(grep '"summary"' "$TMP/serve.json")
    sent=$(cat "$TMP"/load_*.json | jq -s 'map(.sent.datagrams) | add')
    elapsed=$(cat "$TMP"/load_*.json | jq -s 'map(.sent.elapsed_s) | max')
    lost=$(cat "$TMP"/load_*.json | jq -s 'map(.sink.lost // 0) | add')
    received=$(echo "$summary" | jq '.sink.totals.seq.received')
    DROPS=$(echo "$summary" | jq '.sink.drops')
    PPS=$(echo "$received $elapsed" | awk '{printf "%.0f", $1 / $2}')
    row "threads=$n ($round)" "$PPS" "$(echo "$sent $elapsed" | awk '{printf "%.0f", $1 / $2}')" \
        "$lost" "$DROPS" "$(echo "$summary" | jq -c '[.sink.sockets[].datagrams]')"
}

echo "== UDP sink, $SENDERS senders x $STREAMS streams, ${MSG}-byte datagrams, ${DURATION}s per run," \
    "GSO $([ "$GSO" = 1 ] && echo on || echo off), $(nproc) CPUs, $ROUNDS interleaved rounds =="
row "config (round)" "rx dgram/s" "tx dgram/s" "lost" "sink drops" "datagrams per socket"
declare -A ALL_PPS ALL_DROPS
for round in $(seq "$ROUNDS"); do
    for n in 1 "$THREADS"; do
        run "$n" "$round"
        ALL_PPS[$n]+="$PPS "
        ALL_DROPS[$n]+="$DROPS "
    done
done
echo "-- medians over the rounds --"
for n in 1 "$THREADS"; do
    row "threads=$n" "$(echo "${ALL_PPS[$n]}" | median)" "" "" "$(echo "${ALL_DROPS[$n]}" | median)" ""
done
