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
# Env:   NNB=path/to/nnb  DURATION=seconds (default 5)  SERVER_CPU=1  CLIENT_CPU=0
set -euo pipefail

NNB=${NNB:-${CARGO_TARGET_DIR:-target}/release/nnb}
DURATION=${DURATION:-5}
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

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; PIDS=(); }
trap cleanup EXIT

on_server() { taskset -c "$SERVER_CPU" "$@"; }
on_client() { taskset -c "$CLIENT_CPU" "$@"; }

# sockperf's "percentile P =" line value (usec) -> ns.
sp_pct() { awk -v p="$1" '$0 ~ "percentile " p " =" { printf "%.0f", $NF * 1000 }'; }

sockperf_rtt() { # $1: extra flags ("" or --nonblocked)
    on_server sockperf server -i 127.0.0.1 -p "$PORT_SP" $1 >/dev/null 2>&1 &
    PIDS+=($!)
    sleep 1
    local out
    out=$(on_client sockperf ping-pong -i 127.0.0.1 -p "$PORT_SP" -m 64 -t "$DURATION" --full-rtt $1 2>&1)
    cleanup
    echo "$(echo "$out" | sp_pct 50.000) $(echo "$out" | sp_pct 99.000)"
}

nnb_rtt() { # $1: extra flags ("" or --busy-poll)
    on_server "$NNB" serve --reflector-port "$PORT_NNB_REFL" --no-sink --no-tcp $1 >/dev/null 2>&1 &
    PIDS+=($!)
    sleep 1
    local out
    out=$(on_client "$NNB" latency --target "127.0.0.1:$PORT_NNB_REFL" --msg-size 64 \
        --duration "${DURATION}s" --json $1)
    cleanup
    echo "$(echo "$out" | jq -r '.rtt.p50_ns') $(echo "$out" | jq -r '.rtt.p99_ns')"
}

echo "== RTT on loopback, 64-byte messages, ${DURATION}s each (ns) =="
printf '%-34s %10s %10s\n' "tool / mode" "p50" "p99"
read -r a b < <(sockperf_rtt "");            printf '%-34s %10s %10s\n' "sockperf ping-pong (default)" "$a" "$b"; SP_BLOCK=$a
read -r a b < <(nnb_rtt "");                 printf '%-34s %10s %10s\n' "nnb latency (blocking)" "$a" "$b"; NNB_BLOCK=$a
read -r a b < <(sockperf_rtt "--nonblocked"); printf '%-34s %10s %10s\n' "sockperf ping-pong --nonblocked" "$a" "$b"; SP_BUSY=$a
read -r a b < <(nnb_rtt "--busy-poll");      printf '%-34s %10s %10s\n' "nnb latency --busy-poll" "$a" "$b"; NNB_BUSY=$a
echo "goal nnb p50 <= sockperf p50: blocking $([ "$NNB_BLOCK" -le "$SP_BLOCK" ] && echo met || echo MISSED)," \
    "busy-poll $([ "$NNB_BUSY" -le "$SP_BUSY" ] && echo met || echo MISSED)"

echo
echo "== Largest single-stream UDP rate, 1400-byte messages, as received (bit/s) =="
on_server iperf3 -s -p "$PORT_IPERF" -1 >/dev/null 2>&1 &
PIDS+=($!)
sleep 1
IPERF_OUT=$(on_client iperf3 -c 127.0.0.1 -p "$PORT_IPERF" -u -b 0 -l 1400 -t "$DURATION" -f m)
cleanup
echo "$IPERF_OUT" | grep -E "sender|receiver"
IPERF_RX=$(echo "$IPERF_OUT" | awk '/receiver/ { for (i = 1; i <= NF; i++) if ($i ~ /bits\/sec/) { v = $(i-1); u = $i } }
    END { m = (u ~ /^G/) ? 1e9 : (u ~ /^M/) ? 1e6 : (u ~ /^K/) ? 1e3 : 1; printf "%.0f", v * m }')

nnb_max() { # $1: extra load flags
    on_server "$NNB" serve --sink-port "$PORT_NNB_SINK" --no-reflector --no-tcp >/dev/null 2>&1 &
    PIDS+=($!)
    sleep 1
    local out
    out=$(on_client "$NNB" load --target "127.0.0.1:$PORT_NNB_SINK" --rate max --msg-size 1400 \
        --duration "${DURATION}s" --interval 0 --json $1)
    cleanup
    echo "$out" | jq -r '"\(.sink.rate_bps // 0 | floor) \(.sent.payload_bps | floor) \(.sink.lost // 0) \(.sink.expected // 0) \(.streams[0].gso.gso)"'
}
read -r NNB_RX NNB_TX LOST EXP GSO < <(nnb_max "")
read -r NNB_RX_NOGSO NNB_TX_NOGSO _ _ _ < <(nnb_max "--no-gso")
printf '%-34s %14s\n' "iperf3 -u -b 0 -l 1400 (receiver)" "$IPERF_RX"
printf '%-34s %14s   (sent %s, lost %s of %s, gso %s)\n' "nnb load --rate max (sink)" "$NNB_RX" "$NNB_TX" "$LOST" "$EXP" "$GSO"
printf '%-34s %14s   (sent %s)\n' "nnb load --rate max --no-gso" "$NNB_RX_NOGSO" "$NNB_TX_NOGSO"
echo "goal nnb >= 2x iperf3: ratio $(awk -v a="$NNB_RX" -v b="$IPERF_RX" 'BEGIN { printf "%.2f", a / b }')"

echo
echo "== nnb rate accuracy (sender payload rate vs target) =="
for rate in 50M 200M 1G; do
    on_server "$NNB" serve --sink-port "$PORT_NNB_SINK" --no-reflector --no-tcp >/dev/null 2>&1 &
    PIDS+=($!)
    sleep 1
    out=$(on_client "$NNB" load --target "127.0.0.1:$PORT_NNB_SINK" --rate "$rate" \
        --duration "${DURATION}s" --interval 0 --json)
    cleanup
    echo "$out" | jq -r --arg r "$rate" \
        '"\($r): sent \(.sent.payload_bps | floor) bit/s = \(.sent.payload_bps / .target_bps * 100 * 1000 | round / 1000)% of target; sink \(.sink.rate_bps // 0 | floor) bit/s, lost \(.sink.lost // "-"), skipped \(.sent.skipped)"'
done
