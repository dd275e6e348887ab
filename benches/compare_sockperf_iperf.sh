#!/usr/bin/env bash
# Side by side on this machine, in one run, on loopback:
#   1. RTT p50/p99 at 64-byte messages: `nnb latency` against `sockperf ping-pong`,
#      blocking receive (sockperf's default) and busy-poll (sockperf --nonblocked on
#      server and client; nnb --busy-poll on serve and latency).
#   2. Largest single-stream UDP rate at 1400-byte messages as the receiver saw it:
#      `nnb load --rate max` (the nnb sink's view) against `iperf3 -u -b 0 -l 1400`
#      (its receiver line).
#   3. nnb's rate accuracy at 50M, 200M and 1G (sender's achieved payload rate).
#
# Servers run on CPU $SERVER_CPU and clients on CPU $CLIENT_CPU (taskset, the same
# for every tool). RTTs are full round trips for both tools (sockperf --full-rtt).
#
# Usage: benches/compare_sockperf_iperf.sh   (after `cargo build --release -p nnb`)
# Env:   NNB=path/to/nnb  DURATION=seconds per run (default 5)  REPS=interleaved RTT
#        runs per tool and mode, medians reported (default 3)  SERVER_CPU=1  CLIENT_CPU=0
set -euo pipefail

NNB=${NNB:-${CARGO_TARGET_DIR:-target}/release/nnb}
DURATION=${DURATION:-5}
REPS=${REPS:-3}
SERVER_CPU=${SERVER_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
PORT_SP=${PORT_SP:-11411}
PORT_NNB_REFL=${PORT_NNB_REFL:-11412}
PORT_NNB_SINK=${PORT_NNB_SINK:-11413}
PORT_IPERF=${PORT_IPERF:-11414}

for tool in sockperf iperf3 jq taskset; do
    command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install $tool)" >&2; exit 1; }
done
[ -x "$NNB" ] || { echo "no nnb binary at $NNB (cargo build --release -p nnb)" >&2; exit 1; }

SERVER=
# Starts a server pinned to $SERVER_CPU (taskset execs it: $! is the server itself).
start_server() {
    taskset -c "$SERVER_CPU" "$@" >/dev/null 2>&1 &
    SERVER=$!
    sleep 1
    kill -0 "$SERVER" 2>/dev/null || { echo "server did not start: $*" >&2; exit 1; }
}
stop_server() {
    if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
    SERVER=
}
trap stop_server EXIT
on_client() { taskset -c "$CLIENT_CPU" "$@"; }

# sockperf's "percentile P =" line value (usec) -> ns.
sp_pct() { awk -v p="$1" '$0 ~ "percentile " p " =" { printf "%.0f", $NF * 1000 }'; }

# Each sets P50 and P99 (ns). $1: extra flags for both sides.
sockperf_rtt() {
    start_server sockperf server -i 127.0.0.1 -p "$PORT_SP" $1
    local out
    out=$(on_client sockperf ping-pong -i 127.0.0.1 -p "$PORT_SP" -m 64 -t "$DURATION" --full-rtt $1 2>&1)
    stop_server
    P50=$(echo "$out" | sp_pct 50.000)
    P99=$(echo "$out" | sp_pct 99.000)
}
nnb_rtt() {
    start_server "$NNB" serve --reflector-port "$PORT_NNB_REFL" --no-sink --no-tcp $1
    local out
    out=$(on_client "$NNB" latency --target "127.0.0.1:$PORT_NNB_REFL" --msg-size 64 \
        --duration "${DURATION}s" --json $1)
    stop_server
    P50=$(echo "$out" | jq -r '.rtt.p50_ns')
    P99=$(echo "$out" | jq -r '.rtt.p99_ns')
}
row() { printf '%-34s %10s %10s\n' "$@"; }

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "== RTT on loopback, 64-byte messages, ${DURATION}s per run, $REPS interleaved runs (ns) =="
row "tool / mode (run)" "p50" "p99"
declare -A ALL50 ALL99
for rep in $(seq "$REPS"); do
    for mode in sp_block nnb_block sp_busy nnb_busy; do
        case $mode in
            sp_block)  sockperf_rtt "";             name="sockperf ping-pong (default)" ;;
            nnb_block) nnb_rtt "";                  name="nnb latency (blocking)" ;;
            sp_busy)   sockperf_rtt "--nonblocked"; name="sockperf ping-pong --nonblocked" ;;
            nnb_busy)  nnb_rtt "--busy-poll";       name="nnb latency --busy-poll" ;;
        esac
        row "$name ($rep)" "$P50" "$P99"
        ALL50[$mode]+="$P50 "
        ALL99[$mode]+="$P99 "
    done
done
echo "-- medians over the runs --"
for mode in sp_block nnb_block sp_busy nnb_busy; do
    row "$mode" "$(echo "${ALL50[$mode]}" | median)" "$(echo "${ALL99[$mode]}" | median)"
done
SP_BLOCK=$(echo "${ALL50[sp_block]}" | median); NNB_BLOCK=$(echo "${ALL50[nnb_block]}" | median)
SP_BUSY=$(echo "${ALL50[sp_busy]}" | median); NNB_BUSY=$(echo "${ALL50[nnb_busy]}" | median)
echo "goal nnb p50 <= sockperf p50 (medians): blocking $([ "$NNB_BLOCK" -le "$SP_BLOCK" ] && echo met || echo MISSED)," \
    "busy-poll $([ "$NNB_BUSY" -le "$SP_BUSY" ] && echo met || echo MISSED)"

echo
echo "== Largest single-stream UDP rate, 1400-byte messages, as received (bit/s) =="
start_server iperf3 -s -p "$PORT_IPERF" -1
IPERF_OUT=$(on_client iperf3 -c 127.0.0.1 -p "$PORT_IPERF" -u -b 0 -l 1400 -t "$DURATION" -f m)
stop_server
echo "$IPERF_OUT" | grep -E "sender|receiver"
IPERF_RX=$(echo "$IPERF_OUT" | awk '/receiver/ { for (i = 1; i <= NF; i++) if ($i ~ /bits\/sec/) { v = $(i-1); u = $i } }
    END { m = (u ~ /^G/) ? 1e9 : (u ~ /^M/) ? 1e6 : (u ~ /^K/) ? 1e3 : 1; printf "%.0f", v * m }')

# Sets MAX_LINE: sink rate, sent rate, lost, expected, GSO use. $1: extra load flags.
nnb_max() {
    start_server "$NNB" serve --sink-port "$PORT_NNB_SINK" --no-reflector --no-tcp
    local out
    out=$(on_client "$NNB" load --target "127.0.0.1:$PORT_NNB_SINK" --rate max --msg-size 1400 \
        --duration "${DURATION}s" --interval 0 --json $1)
    stop_server
    MAX_LINE=$(echo "$out" | jq -r '"\(.sink.rate_bps // 0 | floor) \(.sent.payload_bps | floor) \(.sink.lost // 0) \(.sink.expected // 0) \(.streams[0].gso.gso)"')
}
nnb_max ""
read -r NNB_RX NNB_TX LOST EXP GSO <<<"$MAX_LINE"
nnb_max "--no-gso"
read -r NNB_RX_NOGSO NNB_TX_NOGSO _ _ _ <<<"$MAX_LINE"
printf '%-34s %14s\n' "iperf3 -u -b 0 -l 1400 (receiver)" "$IPERF_RX"
printf '%-34s %14s   (sent %s, lost %s of %s, gso %s)\n' "nnb load --rate max (sink)" "$NNB_RX" "$NNB_TX" "$LOST" "$EXP" "$GSO"
printf '%-34s %14s   (sent %s)\n' "nnb load --rate max --no-gso" "$NNB_RX_NOGSO" "$NNB_TX_NOGSO"
echo "goal nnb >= 2x iperf3: ratio $(awk -v a="$NNB_RX" -v b="$IPERF_RX" 'BEGIN { printf "%.2f", a / b }')"

echo
echo "== nnb rate accuracy (sender payload rate vs target) =="
for rate in 50M 200M 1G; do
    start_server "$NNB" serve --sink-port "$PORT_NNB_SINK" --no-reflector --no-tcp
    out=$(on_client "$NNB" load --target "127.0.0.1:$PORT_NNB_SINK" --rate "$rate" \
        --duration "${DURATION}s" --interval 0 --json)
    stop_server
    echo "$out" | jq -r --arg r "$rate" \
        '"\($r): sent \(.sent.payload_bps | floor) bit/s = \(.sent.payload_bps / .target_bps * 100 * 1000 | round / 1000)% of target; sink \(.sink.rate_bps // 0 | floor) bit/s, lost \(.sink.lost // "-"), skipped \(.sent.skipped)"'
done
