#!/usr/bin/env bash
# nnb beside the tools it replaces, on this machine, in one run, as one table:
#   - 64-byte loopback UDP round trips, p50 and p99: `nnb latency` against
#     `sockperf ping-pong --full-rtt`, blocking (both tools' default) and busy-poll
#     (sockperf --nonblocked; nnb --busy-poll), server and client alike;
#   - one UDP stream of 1400-byte datagrams as fast as it goes, as the receiver saw it:
#     `nnb load --rate max` without GSO (--no-gso) and with it, against
#     `iperf3 -u -b 0 -l 1400` (which sends one datagram per system call);
#   - primes events/s: `nnb cpu --workload primes` against `sysbench cpu`, the same
#     --cpu-max-prime, threads and seconds.
# Every figure is the median over REPS interleaved pairs (peer and nnb back to back,
# the peer first on odd pairs and nnb first on even ones), so that the drift of a
# shared machine between minutes hits both; the ratio is the median of the pairs'
# ratios nnb/peer. Servers run on CPU $SERVER_CPU and clients on CPU $CLIENT_CPU.
#
# Usage: benches/compare_peers.sh   (builds the agent binary, `--profile dist
#        --no-default-features`, which holds every measuring command, unless NNB is set)
# Env:   NNB=path/to/nnb  REPS=pairs per figure, at least 5 (default 5)
#        DURATION=seconds per run (default 3)  THREADS=primes threads (default 2)
#        MAX_PRIME (default 10000)  SERVER_CPU=1  CLIENT_CPU=0
#        PRIO=prefix for the primes runs (default `chrt -f 10` as root: see
#        compare_sysbench.sh)  INSTALL=1 installs the peers with apt-get when missing
# Needs: sockperf, iperf3, sysbench, jq, taskset. Exits 3 when a figure misses its goal.
set -euo pipefail
# A path given from the caller's directory still names the binary after the cd below.
NNB=${NNB:+$(realpath -m "$NNB")}
cd "$(dirname "$0")/.."
. benches/lib/peers.sh

REPS=${REPS:-5}
DURATION=${DURATION:-3}
THREADS=${THREADS:-2}
MAX_PRIME=${MAX_PRIME:-10000}
SERVER_CPU=${SERVER_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
[ "$REPS" -ge 5 ] || { echo "REPS=$REPS: the table's medians need at least 5 pairs" >&2; exit 2; }
if [ "${INSTALL:-0}" = 1 ]; then
    for tool in sockperf iperf3 sysbench jq; do
        command -v "$tool" >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$tool" >/dev/null
    done
fi
need_tools sockperf iperf3 sysbench jq taskset
if [ -z "${NNB:-}" ]; then
    cargo build --profile dist -p nnb --no-default-features >&2
    NNB="${CARGO_TARGET_DIR:-target}/dist/nnb"
fi
[ -x "$NNB" ] || { echo "no nnb binary at $NNB" >&2; exit 1; }
if [ -z "${PRIO+x}" ]; then
    if [ "$(id -u)" = 0 ]; then PRIO="chrt -f 10"; else PRIO=""; fi
fi
read -r -a RUN <<<"$PRIO"
trap stop_server EXIT

# Each figure: its name and its goal on the ratio nnb/peer: a bound ("<=" where smaller
# is better, a latency; ">=" where larger is) or "== R T", within R +- T where nnb runs
# the peer's own work (primes is sysbench's event, the same 64-bit divisions: the same
# time per event is the goal, not more events). record's index is the figure's place
# in this list.
declare -a NAMES GOALS
declare -A PEER NNBV RATIO
figure() { NAMES+=("$1"); GOALS+=("$2"); }
figure "busy-poll RTT p50 (ns)"      "<= 1.00"
figure "busy-poll RTT p99 (ns)"      "<= 1.00"
figure "blocking RTT p50 (ns)"       "<= 1.00"
figure "blocking RTT p99 (ns)"       "<= 1.00"
figure "UDP rx, no GSO (Mbit/s)"     ">= 1.20"
figure "UDP rx, GSO (Mbit/s)"        ">= 2.00"
figure "primes events/s"             "== 1.00 0.03"

# Records one pair of figure $1: peer value $2, nnb value $3.
record() {
    PEER[$1]+="$2 "
    NNBV[$1]+="$3 "
    RATIO[$1]+="$(awk -v a="$3" -v b="$2" 'BEGIN { if (b > 0) printf "%.4f", a / b; else print "nan" }') "
}

# bit/s -> Mbit/s, one decimal.
mbit() { awk -v v="$1" 'BEGIN { printf "%.1f", v / 1e6 }'; }

# One pair of each tool, peer first when $1 is odd.
pair() {
    local rep=$1 order sp_b sp_bp nn_b nn_bp sp_n sp_np nn_n nn_np ip nr ng sb nb
    if [ $((rep % 2)) = 1 ]; then order="peer nnb"; else order="nnb peer"; fi
    for who in $order; do
        if [ "$who" = peer ]; then
            sockperf_rtt "--nonblocked"; sp_b=$P50; sp_bp=$P99
            sockperf_rtt "";             sp_n=$P50; sp_np=$P99
            iperf_max;                   ip=$IPERF_RX
            sysbench_eps;                sb=$EPS
        else
            nnb_rtt "--busy-poll";       nn_b=$P50; nn_bp=$P99
            nnb_rtt "";                  nn_n=$P50; nn_np=$P99
            nnb_max "--no-gso";          read -r nr _ <<<"$MAX_LINE"
            nnb_max "";                  read -r ng _ <<<"$MAX_LINE"
            nnb_eps;                     nb=$EPS
        fi
    done
    record 0 "$sp_b" "$nn_b"
    record 1 "$sp_bp" "$nn_bp"
    record 2 "$sp_n" "$nn_n"
    record 3 "$sp_np" "$nn_np"
    record 4 "$(mbit "$ip")" "$(mbit "$nr")"
    record 5 "$(mbit "$ip")" "$(mbit "$ng")"
    record 6 "$sb" "$nb"
    echo "pair $rep/$REPS done ($order first)" >&2
}

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, $(uname -r)"
echo "nnb: $("$NNB" --version) ($NNB); sockperf $(sockperf --version 2>&1 | grep -om1 '[0-9][0-9.]*[0-9]'); $(iperf3 --version | head -1 | cut -d' ' -f1-2); sysbench $(sysbench --version | cut -d' ' -f2)"
echo "servers on CPU $SERVER_CPU, clients on CPU $CLIENT_CPU; ${DURATION}s per run; primes below $MAX_PRIME on $THREADS threads (prefix '${PRIO:-none}')"
for rep in $(seq "$REPS"); do pair "$rep"; done

echo
echo "Each figure: the median of $REPS interleaved pairs; ratio: the median of the pairs' nnb/peer."
printf '| %-26s | %12s | %12s | %6s | %9s | %-4s |\n' "figure" "nnb" "peer" "ratio" "goal" "met"
printf '|%s|%s|%s|%s|%s|%s|\n' "----------------------------" "--------------" "--------------" "--------" "-----------" "------"
missed=0
for i in "${!NAMES[@]}"; do
    n=$(echo "${NNBV[$i]}" | median); p=$(echo "${PEER[$i]}" | median); r=$(echo "${RATIO[$i]}" | median)
    read -r op bound tol <<<"${GOALS[$i]}"
    met=$(awk -v r="$r" -v b="$bound" -v t="${tol:-0}" -v op="$op" 'BEGIN {
        ok = (op == "<=") ? (r <= b) : (op == ">=") ? (r >= b) : (r >= b - t && r <= b + t)
        print ok ? "yes" : "NO" }')
    goal=${GOALS[$i]}
    [ "$op" = "==" ] && goal="$bound+-$tol"
    [ "$met" = yes ] || missed=$((missed + 1))
    printf '| %-26s | %12.6g | %12.6g | %6.3f | %9s | %-4s |\n' "${NAMES[$i]}" "$n" "$p" "$r" "$goal" "$met"
done
echo "peers: sockperf ping-pong --full-rtt (RTT), iperf3 -u -b 0 -l 1400 receiver (UDP), sysbench cpu (primes)"
exit $((missed > 0 ? 3 : 0))
