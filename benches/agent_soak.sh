#!/usr/bin/env bash
# Soak test of `nnb agent` (the hardening issues' "done when", reliability review
# K1/K2 and NM8): runs an agent for SOAK_SECS seconds under IDLE_CONNS idle TCP
# connections (reopened as the agent closes them unless REOPEN=0), plus, with
# FLOOD=1, a flood of bad requests: on keep-alive connections (no token, bad JSON,
# out-of-bounds numbers, unknown fields and paths, 3 MB bodies, 1 ms idle jobs) and
# raw ones on new connections (NUL bytes, HTTP/9.9, a Content-Length of 10^20,
# Content-Length with Transfer-Encoding, a 70 KB header line, `..` ids, a body
# promised and never sent). With NOFILE=N the agent runs under
# `prlimit --nofile=N:N` (soft and hard), the case where its open-files limit is at
# or below its connection cap.
#
# A controller-like client sends `GET /health` on a new connection every PROBE_MS
# milliseconds, one at a time with a 5 s timeout (a slow answer delays the next
# probe). The agent's RSS (/proc/PID/status VmRSS), open fds (/proc/PID/fd) and
# threads are sampled every second. Prints the probes' count, failures and latency
# (p50, p99, worst), and RSS and fds at start, maximum and end.
#
# Usage: benches/agent_soak.sh [path/to/nnb]   (default: target/release/nnb, else
# target/debug/nnb). Needs python3 (and prlimit for NOFILE). Loopback only.
# Knobs (environment): SOAK_SECS (60), IDLE_CONNS (2000), REOPEN (1), FLOOD (1),
# NOFILE (unset: the limit this shell has), PROBE_MS (100).
# The NM8 measurements:
#   NOFILE=1024 IDLE_CONNS=1100 FLOOD=0 SOAK_SECS=30 benches/agent_soak.sh
#   NOFILE=1024 IDLE_CONNS=2000 FLOOD=1 SOAK_SECS=60 benches/agent_soak.sh
set -euo pipefail

NNB=${1:-}
if [[ -z "$NNB" ]]; then
    for candidate in target/release/nnb target/debug/nnb; do
        [[ -x "$candidate" ]] && NNB=$candidate && break
    done
fi
[[ -x "${NNB:-}" ]] || { echo "no nnb binary: build one (cargo build --release --no-default-features) or pass its path" >&2; exit 2; }

launcher=()
if [[ -n "${NOFILE:-}" ]]; then
    command -v prlimit > /dev/null || { echo "NOFILE needs prlimit (util-linux)" >&2; exit 2; }
    launcher=(prlimit "--nofile=$NOFILE:$NOFILE")
fi

work=$(mktemp -d)
agent_pid=
cleanup() {
    [[ -n "$agent_pid" ]] && kill "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

token=soak-token-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
(umask 077 && echo "$token" > "$work/token")
"${launcher[@]}" "$NNB" agent --listen 127.0.0.1:0 --token-file "$work/token" > "$work/out" 2> "$work/agent.log" &
agent_pid=$!
for _ in $(seq 100); do
    grep -q '^listening' "$work/out" 2>/dev/null && break
    sleep 0.1
done
addr=$(sed -n 's/^listening //p' "$work/out")
[[ -n "$addr" ]] || { echo "the agent did not start:" >&2; cat "$work/agent.log" >&2; exit 1; }
echo "agent $NNB pid $agent_pid on $addr, open files: $(grep 'Max open files' /proc/$agent_pid/limits | awk '{print $4 " soft, " $5 " hard"}')"

SOAK_ADDR=$addr SOAK_TOKEN=$token SOAK_PID=$agent_pid \
SOAK_SECS=${SOAK_SECS:-60} IDLE_CONNS=${IDLE_CONNS:-2000} REOPEN=${REOPEN:-1} \
FLOOD=${FLOOD:-1} PROBE_MS=${PROBE_MS:-100} python3 - <<'PY'
import http.client, json, os, resource, selectors, socket, threading, time

host, port = os.environ["SOAK_ADDR"].rsplit(":", 1)
port = int(port)
token = os.environ["SOAK_TOKEN"]
pid = os.environ["SOAK_PID"]
secs = int(os.environ["SOAK_SECS"])
want = int(os.environ["IDLE_CONNS"])
reopen = os.environ["REOPEN"] == "1"
flooding = os.environ["FLOOD"] == "1"
probe_every = int(os.environ["PROBE_MS"]) / 1000

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
need = want + 200
if soft < need:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    soft = min(need, hard)
if soft < need:
    want = soft - 200
    print(f"only {want} idle connections: the open-files limit is {soft}")

def proc_sample():
    """(RSS KiB, open fds, threads) of the agent, from /proc."""
    rss = threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd")), threads

stop = threading.Event()
opened = threading.Event()
stats = {"idle_closed_by_agent": 0, "idle_connect_errors": 0, "flood": {},
         "flood_errors": 0, "raw_sent": 0, "raw_errors": 0}

def hold_idle():
    sel = selectors.DefaultSelector()
    def connect():
        s = socket.socket()
        s.settimeout(5)
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
        if stop.is_set():
            break
        connect()
    opened.set()
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
                stats["idle_closed_by_agent"] += 1
                if reopen and not stop.is_set():
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
    ("GET", "/jobs/+3074", token, None),
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

raw = [
    b"\x00" * 512,
    b"GET /health HTTP/9.9\r\n\r\n",
    b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000000000000\r\n\r\n",
    b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n{}{}{",
    b"GET /health HTTP/1.1\r\nX-Long: " + b"a" * 70_000 + b"\r\n\r\n",
    b"GET /jobs/..%2f..%2fetc HTTP/1.1\r\nHost: x\r\n\r\n",
    ("POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token +
     "\r\nContent-Length: 1000\r\n\r\n").encode(),
]

def raw_flood():
    """Garbage on new connections, at most 100 a second, not waiting for answers
    longer than 0.2 s."""
    i = 0
    while not stop.is_set():
        started = time.monotonic()
        s = socket.socket()
        s.settimeout(0.2)
        try:
            s.connect((host, port))
            s.sendall(raw[i % len(raw)])
            stats["raw_sent"] += 1
            try:
                s.recv(4096)
            except OSError:
                pass
        except OSError:
            stats["raw_errors"] += 1
        finally:
            s.close()
        i += 1
        time.sleep(max(0.0, 0.01 - (time.monotonic() - started)))

def probe():
    start = time.monotonic()
    try:
        c = http.client.HTTPConnection(host, port, timeout=5)
        c.request("GET", "/health", headers={"Authorization": "Bearer " + token})
        r = c.getresponse()
        json.loads(r.read())
        c.close()
        err = None if r.status == 200 else f"status {r.status}"
    except Exception as e:
        err = repr(e)
    return time.monotonic() - start, err

samples = [proc_sample()]
def sample():
    while not stop.is_set():
        time.sleep(1)
        try:
            samples.append(proc_sample())
        except OSError:
            pass

threads = [threading.Thread(target=hold_idle), threading.Thread(target=sample)]
if flooding:
    threads += [threading.Thread(target=flood) for _ in range(2)]
    threads += [threading.Thread(target=raw_flood) for _ in range(2)]
for t in threads:
    t.start()
# Probing starts once the idle connections are open.
opened.wait(60)
time.sleep(0.5)
latencies, failures = [], []
t0 = time.monotonic()
while time.monotonic() - t0 < secs:
    at = time.monotonic() - t0
    took, err = probe()
    latencies.append(took)
    if err:
        failures.append(f"t={at:.1f}s after {took:.2f}s: {err}")
    time.sleep(max(0.0, probe_every - took))
stop.set()
for t in threads:
    t.join()
# After the attack: the agent lets go of what it held.
time.sleep(1)
end = proc_sample()
after = [probe() for _ in range(10)]

lat = sorted(latencies)
def pct(p):
    return lat[min(len(lat) - 1, int(p / 100 * len(lat)))] * 1e3
print(f"soak: {secs} s, {want} idle connections held (reopen {reopen}; the agent closed "
      f"{stats['idle_closed_by_agent']}; {stats['idle_connect_errors']} connect errors)")
if flooding:
    print(f"flood answers by status: {dict(sorted(stats['flood'].items()))}, transport "
          f"errors {stats['flood_errors']}; raw garbage sent {stats['raw_sent']}, "
          f"connect errors {stats['raw_errors']}")
print(f"health: {len(lat)} probes every {probe_every*1e3:.0f} ms, {len(failures)} failures, "
      f"latency p50 {pct(50):.1f} ms, p99 {pct(99):.1f} ms, worst {lat[-1]*1e3:.1f} ms, "
      f"over 100 ms: {sum(1 for x in lat if x > 0.1)}")
for f in failures[:10]:
    print(f"  failure {f}")
rss = [s[0] for s in samples]
fds = [s[1] for s in samples]
thr = [s[2] for s in samples]
print(f"agent RSS KiB: start {rss[0]}, max {max(rss)}, end {end[0]}; fds: start {fds[0]}, "
      f"max {max(fds)}, end {end[1]}; threads max {max(thr)}")
print(f"after the attack: {sum(1 for _, e in after if e is None)}/10 probes answered, worst "
      f"{max(t for t, _ in after)*1e3:.1f} ms")
PY
