#!/usr/bin/env bash
# nnb's memory load and CPU duty cycle against stress-ng, side by side on this machine,
# interleaved (stress-ng, then nnb, per repetition), measured from outside both:
#   (a) memory: `stress-ng --vm 1 --vm-bytes 512M --vm-keep -t 5` against
#       `nnb memory --size 512M --duration 5s`: the peak RSS of each tool's biggest
#       worker process and the time from launch until it first held 95% of 512 MiB,
#       both sampled here from /proc/PID/status (VmRSS) every 20 ms; nnb's own report
#       beside them;
#   (b) CPU duty cycle: `stress-ng --cpu 1 --cpu-load P -t 5` against
#       `nnb cpu --load P --threads 1 --duration 5s` for P = 25, 50, 75: the
#       utilisation achieved, as the kernel counts it for the process tree
#       (utime + stime + cutime + cstime of every process in it, /proc/PID/stat) over
#       the wall time of the window [1 s, 4 s] after launch (start-up and exit left
#       out), and over the whole run (wait4's rusage of the tree / wall time).
#
# Usage: benches/compare_stress_ng.sh
# Env:   REPS=interleaved repetitions per tool and setting (default 3)
#        SECS=seconds per run (default 5; at least 3 for the window)
#        MEM=memory load size (default 512M)
#        PRIO prefixes both tools' commands; default `chrt -f 10` as root (SCHED_FIFO),
#        so other processes' load on a shared machine does not take the CPU from the
#        duty-cycled thread (see compare_sysbench.sh); PRIO= measures at normal
#        priority.
# Needs: stress-ng (installed here with apt-get when missing and root), python3, a
#        release build (made here).
set -euo pipefail

cd "$(dirname "$0")/.."
REPS="${REPS:-3}"
SECS="${SECS:-5}"
MEM="${MEM:-512M}"
OUT_DIR="${OUT_DIR:-${CARGO_TARGET_DIR:-target}/compare-stress-ng}"
mkdir -p "$OUT_DIR"

if ! command -v stress-ng >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get install -y stress-ng >&2
  else
    echo "stress-ng not found: apt-get install stress-ng" >&2
    exit 1
  fi
fi
cargo build --release -p nnb >&2
NNB="${CARGO_TARGET_DIR:-target}/release/nnb"
if [ -z "${PRIO+x}" ]; then
  if [ "$(id -u)" = 0 ]; then PRIO="chrt -f 10"; else PRIO=""; fi
fi

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, $(uname -r)"
echo "$(stress-ng --version); nnb: $("$NNB" --version)"
echo "$REPS interleaved repetitions, ${SECS}s per run; priority prefix for both tools: '${PRIO:-none}'"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

python3 - "$OUT_DIR" "$NNB" "$REPS" "$SECS" "$MEM" "$PRIO" <<'EOF'
import json, os, statistics, subprocess, sys, time

out_dir, nnb, reps, secs, mem, prio = sys.argv[1:7]
reps, secs, prio = int(reps), int(secs), prio.split()
HZ = os.sysconf("SC_CLK_TCK")
MIB = 1 << 20
units = {"k": 1 << 10, "K": 1 << 10, "m": MIB, "M": MIB, "g": 1 << 30, "G": 1 << 30}
target = int(mem[:-1]) * units[mem[-1]] if mem[-1] in units else int(mem)


def stat(pid):
    """(ppid, utime + stime + cutime + cstime in ticks), None once gone."""
    try:
        s = open(f"/proc/{pid}/stat").read()
    except OSError:
        return None
    f = s[s.rfind(")") + 2:].split()  # f[0] is the state (field 3)
    return int(f[1]), sum(int(x) for x in f[11:15])


def tree(root):
    """root and its descendants, each with its CPU ticks."""
    kids, ticks = {}, {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = stat(int(d))
            if st:
                kids.setdefault(st[0], []).append(int(d))
                ticks[int(d)] = st[1]
    out, todo = {}, [root]
    while todo:
        p = todo.pop()
        if p in ticks:
            out[p] = ticks[p]
        todo += kids.get(p, [])
    return out


def vm_rss(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_memory(cmd):
    """Peak RSS of the biggest worker (a descendant of the launched process) and the
    seconds from launch until it first held 95% of the target, sampled every 20 ms."""
    t0 = time.monotonic()
    p = subprocess.Popen(prio + cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    peak, reached = 0, None
    while p.poll() is None:
        workers = [w for w in tree(p.pid) if w != p.pid]
        biggest = max((vm_rss(w) for w in workers), default=0)
        peak = max(peak, biggest)
        if reached is None and biggest >= 0.95 * target:
            reached = time.monotonic() - t0
        time.sleep(0.02)
    return peak, reached, p.stdout.read()


def run_cpu(cmd):
    """Utilisation of the process tree over [1 s, secs - 1 s] and over the whole run."""
    t0 = time.monotonic()
    p = subprocess.Popen(prio + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    a = (time.monotonic(), sum(tree(p.pid).values()))
    time.sleep(secs - 2.0)
    b = (time.monotonic(), sum(tree(p.pid).values()))
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"{cmd} failed: {p.returncode}")
    window = (b[1] - a[1]) / HZ / (b[0] - a[0])
    return window, (ru.ru_utime + ru.ru_stime) / wall


# (a) memory
mem_rows = {"stress-ng": [], "nnb": []}
for rep in range(reps):
    peak, reached, _ = run_memory(
        ["stress-ng", "--vm", "1", "--vm-bytes", mem, "--vm-keep", "-t", str(secs)])
    mem_rows["stress-ng"].append((peak, reached, None))
    peak, reached, out = run_memory(
        [nnb, "memory", "--size", mem, "--duration", f"{secs}s", "--json"])
    own = json.loads(out)
    json.dump(own, open(f"{out_dir}/nnb_memory_{rep + 1}.json", "w"), indent=1)
    mem_rows["nnb"].append((peak, reached, own))

print(f"(a) memory: {mem} kept for {secs} s, 1 worker; the biggest worker's VmRSS sampled "
      f"here every 20 ms, time from launch to 95% of {target / MIB:.0f} MiB")
print(f"{'tool':10}{'rep':>4}{'peak RSS MiB':>14}{'to 95% s':>10}   nnb's own report")
for tool, rows in mem_rows.items():
    for i, (peak, reached, own) in enumerate(rows):
        t = f"{reached:.3f}" if reached is not None else "never"
        extra = ""
        if own:
            tt = own["time_to_target_s"]
            extra = (f"peak {own['peak_rss_bytes'] / MIB:.1f} MiB, to 95% "
                     f"{'never' if tt is None else f'{tt:.3f} s'}, OOM kills {own['oom_kills']}")
        print(f"{tool:10}{i + 1:>4}{peak / MIB:>14.1f}{t:>10}   {extra}")
for tool, rows in mem_rows.items():
    peaks = [r[0] / MIB for r in rows]
    times = [r[1] for r in rows if r[1] is not None]
    mt = f"{statistics.mean(times):.3f}" if times else "never"
    print(f"{tool:10}{'mean':>4}{statistics.mean(peaks):>14.1f}{mt:>10}")
print()

# (b) CPU duty cycle, interleaved over loads and tools
loads = [25, 50, 75]
cpu = {(l, t): [] for l in loads for t in ("stress-ng", "nnb")}
for rep in range(reps):
    for load in loads:
        cpu[(load, "stress-ng")].append(run_cpu(
            ["stress-ng", "--cpu", "1", "--cpu-load", str(load), "-t", str(secs)]))
        cpu[(load, "nnb")].append(run_cpu(
            [nnb, "cpu", "--load", str(load), "--threads", "1", "--duration", f"{secs}s",
             "--reps", "1", "--warmup", "0", "--json"]))
json.dump({f"{l}/{t}": v for (l, t), v in cpu.items()}, open(f"{out_dir}/cpu.json", "w"))

print(f"(b) CPU duty cycle: 1 thread, {secs} s runs; utilisation (%) of the process tree "
      f"from /proc over [1 s, {secs - 1} s] (whole run by wait4 in brackets)")
head = "".join(f"{'rep ' + str(i + 1):>16}" for i in range(reps))
print(f"{'load':>5}  {'tool':10}{head}{'mean':>9}{'error':>9}")
for load in loads:
    for tool in ("stress-ng", "nnb"):
        vals = cpu[(load, tool)]
        cells = "".join(f"{w * 100:>8.2f} ({x * 100:5.2f})" for w, x in vals)
        mean = statistics.mean(w for w, _ in vals) * 100
        print(f"{load:>4}%  {tool:10}{cells}{mean:>9.2f}{mean - load:>+9.2f}")
print(f"load average at end: {open('/proc/loadavg').read().split()[:3]}")
EOF
