# One measurement of each peer tool and of nnb beside it, for benches/compare_*.sh to
# source. Servers run pinned to $SERVER_CPU and clients to $CLIENT_CPU (taskset, the
# same for every tool), on loopback. Each function sets the variables it names.
#
# Needs in the environment: NNB (the binary), DURATION (seconds per run), SERVER_CPU,
# CLIENT_CPU; ports PORT_SP, PORT_NNB_REFL, PORT_NNB_SINK, PORT_IPERF have defaults.

PORT_SP=${PORT_SP:-11411}
PORT_NNB_REFL=${PORT_NNB_REFL:-11412}
PORT_NNB_SINK=${PORT_NNB_SINK:-11413}
PORT_IPERF=${PORT_IPERF:-11414}

# Exits naming the package when a tool is missing.
need_tools() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install $tool)" >&2; exit 1; }
    done
}

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
on_client() { taskset -c "$CLIENT_CPU" "$@"; }

# sockperf's "percentile P =" line value (usec) -> ns.
sp_pct() { awk -v p="$1" '$0 ~ "percentile " p " =" { printf "%.0f", $NF * 1000 }'; }

# Sets P50 and P99 (ns) of sockperf ping-pong, 64-byte messages, full round trips.
# $1: extra flags for both sides ("--nonblocked" busy-polls).
sockperf_rtt() {
    start_server sockperf server -i 127.0.0.1 -p "$PORT_SP" $1
    local out
    out=$(on_client sockperf ping-pong -i 127.0.0.1 -p "$PORT_SP" -m 64 -t "$DURATION" --full-rtt $1 2>&1)
    stop_server
    P50=$(echo "$out" | sp_pct 50.000)
    P99=$(echo "$out" | sp_pct 99.000)
}

# Sets P50 and P99 (ns) of nnb latency against nnb serve, 64-byte messages.
# $1: extra flags for both sides ("--busy-poll").
nnb_rtt() {
    start_server "$NNB" serve --reflector-port "$PORT_NNB_REFL" --no-sink --no-tcp $1
    local out
    out=$(on_client "$NNB" latency --target "127.0.0.1:$PORT_NNB_REFL" --msg-size 64 \
        --duration "${DURATION}s" --json $1)
    stop_server
    P50=$(echo "$out" | jq -r '.rtt.p50_ns')
    P99=$(echo "$out" | jq -r '.rtt.p99_ns')
}

# Sets IPERF_RX: the bit/s iperf3's receiver saw of one UDP stream of 1400-byte
# datagrams sent as fast as it can (-b 0), and IPERF_OUT: its report.
iperf_max() {
    start_server iperf3 -s -p "$PORT_IPERF" -1
    IPERF_OUT=$(on_client iperf3 -c 127.0.0.1 -p "$PORT_IPERF" -u -b 0 -l 1400 -t "$DURATION" -f m)
    stop_server
    IPERF_RX=$(echo "$IPERF_OUT" | awk '/receiver/ { for (i = 1; i <= NF; i++) if ($i ~ /bits\/sec/) { v = $(i-1); u = $i } }
        END { m = (u ~ /^G/) ? 1e9 : (u ~ /^M/) ? 1e6 : (u ~ /^K/) ? 1e3 : 1; printf "%.0f", v * m }')
}

# Sets MAX_LINE: "sink-rate sent-rate lost expected gso" (bit/s) of one nnb load stream
# of 1400-byte datagrams at --rate max. $1: extra load flags ("--no-gso").
nnb_max() {
    start_server "$NNB" serve --sink-port "$PORT_NNB_SINK" --no-reflector --no-tcp
    local out
    out=$(on_client "$NNB" load --target "127.0.0.1:$PORT_NNB_SINK" --rate max --msg-size 1400 \
        --duration "${DURATION}s" --interval 0 --json $1)
    stop_server
    MAX_LINE=$(echo "$out" | jq -r '"\(.sink.rate_bps // 0 | floor) \(.sent.payload_bps | floor) \(.sink.lost // 0) \(.sink.expected // 0) \(.streams[0].gso.gso)"')
}

# Sets EPS: sysbench cpu's events/s with $THREADS threads and primes below $MAX_PRIME
# for $DURATION seconds. ${RUN[@]} prefixes it (a priority, or nothing).
sysbench_eps() {
    EPS=$("${RUN[@]}" sysbench cpu --cpu-max-prime="$MAX_PRIME" --threads="$THREADS" --time="$DURATION" run \
        | awk '/events per second/ { print $4 }')
}

# Sets EPS: nnb cpu --workload primes' events/s on the same work, one process and one
# repetition without warm-up, like sysbench.
nnb_eps() {
    EPS=$("${RUN[@]}" "$NNB" cpu --workload primes --max-prime "$MAX_PRIME" --threads "$THREADS" \
        --duration "${DURATION}s" --reps 1 --warmup 0 --json | jq -r '.steps[0].runs[0].ops_per_sec')
}

# The median of the numbers on stdin (one per line or space-separated).
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
