#!/usr/bin/env bash
# Soak test of `nnb agent` (the hardening issue's "done when"): runs an agent for
# SOAK_SECS (default 60) seconds under IDLE_CONNS (default 2,000) idle TCP
# connections, reopened as the agent closes them, plus a flood of bad requests
# (no token, bad JSON, out-of-bounds numbers, unknown fields and paths, 3 MB
# bodies, 1 ms idle jobs); polls /health every second measuring its latency and
# samples the agent's RSS (/proc/PID/status VmRSS) every second. Prints the
# maximum health latency, the failures, and RSS at start, maximum and end.
#
# Usage: benches/agent_soak.sh [path/to/nnb]   (default: target/release/nnb, else
# target/debug/nnb). Needs python3. Loopback only.
set -euo pipefail

NNB=${1:-}
if [[ -z "$NNB" ]]; then
    for candidate in target/release/nnb target/debug/nnb; do
        [[ -x "$candidate" ]] && NNB=$candidate && break
    done
fi
[[ -x "${NNB:-}" ]] || { echo "no nnb binary: build one (cargo build --release --no-default-features) or pass its path" >&2; exit 2; }

work=$(mktemp -d)
agent_pid=
cleanup() {
    [[ -n "$agent_pid" ]] && kill "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

token=soak-token-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
(umask 077 && echo "$token" > "$work/token")
"$NNB" agent --listen 127.0.0.1:0 --token-file "$work/token" > "$work/out" 2> "$work/agent.log" &
agent_pid=$!
for _ in $(seq 100); do
    grep -q '^listening' "$work/out" 2>/dev/null && break
    sleep 0.1
done
addr=$(sed -n 's/^listening //p' "$work/out")
[[ -n "$addr" ]] || { echo "the agent did not start:" >&2; cat "$work/agent.log" >&2; exit 1; }
echo "agent $NNB pid $agent_pid on $addr"

SOAK_ADDR=$addr SOAK_TOKEN=$token SOAK_PID=$agent_pid \
SOAK_SECS=${SOAK_SECS:-60} IDLE_CONNS=${IDLE_CONNS:-2000} python3 - <<'PY'
import http.client, json, os, resource, selectors, socket, threading, time

host, port = os.environ["SOAK_ADDR"].rsplit(":", 1)
port = int(port)
token = os.environ["SOAK_TOKEN"]
pid = os.environ["SOAK_PID"]
secs = int(os.environ["SOAK_SECS"])
want = int(os.environ["IDLE_CONNS"])

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
need = want + 200
if soft < need:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    soft = min(need, hard)
if soft < need:
    want = soft - 200
    print(f"only {want} idle connections: the open-files limit is {soft}")

def rss_kb():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0

stop = threading.Event()
stats = {"idle_reopened": 0, "idle_connect_errors": 0, "flood": {}, "flood_errors": 0}

def hold_idle():
    sel = selectors.DefaultSelector()
    def connect():
        s = socket.socket()
        try:
            s.connect((host, port))
        except OSError:
            stats["idle_connect_errors"] += 1
            s.close()
            return False
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        return True
    for _ in range(want):
        connect()
    while not stop.is_set():
        for key, _ in sel.select(timeout=0.2):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:
                sel.unregister(s)
                s.close()
                stats["idle_reopened"] += 1
                connect()
    for key in list(sel.get_map().values()):
        key.fileobj.close()

bad = [
    ("POST", "/jobs", None, b'{"spec":{"kind":"idle"},"deadline_ms":1}'),
    ("POST", "/jobs", token, b"not json"),
    ("POST", "/jobs", token, b'{"spec":{"kind":"busy","workload":"int","threads":1000000000000},"deadline_ms":1000}'),
    ("POST", "/jobs", token, b'{"spec":{"kind":"load","target":"127.0.0.1:9","rate_bps":1e30,"streams":100000,"msg_size":100,"duration_ms":100},"deadline_ms":1000}'),
    ("POST", "/jobs", token, b'{"spec":{"kind":"idle","cmd":"rm -rf /"},"deadline_ms":1000}'),
    ("POST", "/jobs", token, b'[{"kind":"idle"},1000]'),
    ("GET", "/admin", None, None),
    ("DELETE", "/health", token, None),
    ("POST", "/jobs/999999/stop", token, None),
    ("POST", "/jobs", token, b'{"spec":{"kind":"idle"},"deadline_ms":1}'),
    ("POST", "/jobs", token, b" " * (3 << 20)),
]

def flood():
    i = 0
    conn = http.client.HTTPConnection(host, port, timeout=5)
    while not stop.is_set():
        method, path, auth, body = bad[i % len(bad)]
        i += 1
        headers = {"Content-Type": "application/json"}
        if auth:
            headers["Authorization"] = "Bearer " + auth
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            resp.read()
            stats["flood"][resp.status] = stats["flood"].get(resp.status, 0) + 1
            if resp.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=5)
        except (OSError, http.client.HTTPException):
            stats["flood_errors"] += 1
            conn.close()
            conn = http.client.HTTPConnection(host, port, timeout=5)

rss_start = rss_kb()
threads = [threading.Thread(target=hold_idle)] + [threading.Thread(target=flood) for _ in range(2)]
for t in threads:
    t.start()
latencies, failures, rss = [], [], [rss_start]
t0 = time.monotonic()
for second in range(secs):
    time.sleep(max(0.0, t0 + second + 1 - time.monotonic()))
    start = time.monotonic()
    try:
        c = http.client.HTTPConnection(host, port, timeout=5)
        c.request("GET", "/health", headers={"Authorization": "Bearer " + token})
        r = c.getresponse()
        body = json.loads(r.read())
        c.close()
        if r.status != 200:
            failures.append(f"{second}s: status {r.status}")
    except Exception as e:
        failures.append(f"{second}s: {e!r}")
    latencies.append(time.monotonic() - start)
    rss.append(rss_kb())
stop.set()
for t in threads:
    t.join()
rss_end = rss_kb()
lat = sorted(latencies)
print(f"soak: {secs} s, {want} idle connections held (reopened {stats['idle_reopened']} times "
      f"after the agent closed them, {stats['idle_connect_errors']} connect errors)")
print(f"flood answers by status: {dict(sorted(stats['flood'].items()))}, transport errors {stats['flood_errors']}")
print(f"health: {len(latencies)} polls, {len(failures)} failures, latency median "
      f"{lat[len(lat)//2]*1e3:.1f} ms, max {lat[-1]*1e3:.1f} ms")
for f in failures[:10]:
    print(f"  failure {f}")
print(f"agent RSS: start {rss_start/1024:.1f} MiB, max {max(rss)/1024:.1f} MiB, end {rss_end/1024:.1f} MiB")
PY
