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

# A path given from the caller's directory still names the binary after the cd below.
NNB=$(realpath -m "${NNB:-${CARGO_TARGET_DIR:-target}/release/nnb}")
DURATION=${DURATION:-5}
REPS=${REPS:-3}
SERVER_CPU=${SERVER_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
cd "$(dirname "$0")/.."
. benches/lib/peers.sh

need_tools sockperf iperf3 jq taskset
[ -x "$NNB" ] || { echo "no nnb binary at $NNB (cargo build --release -p nnb)" >&2; exit 1; }
trap stop_server EXIT

row() { printf '%-34s %10s %10s\n' "$@"; }

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
iperf_max
echo "$IPERF_OUT" | grep -E "sender|receiver"
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
