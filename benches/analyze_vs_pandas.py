#!/usr/bin/env python3
"""The peer of `nnb analyze` for issue 6's benchmark: what the thesis did by hand, in
Python. Reads a load-steps run in nnb's results format with pandas (samples.jsonl) and
hdrh (the HdrHistogram interval logs), and computes the same two tables as nnb:
latency vs aggregate neighbor load (mean, p50, p90, p99, p99.9, p90 - mean per level,
from the merged HDR logs of the level's repetitions) and throughput per node per level
(mean, min, max, sum). Prints its wall time; benches/analyze_big.sh runs it beside nnb.

Usage: analyze_vs_pandas.py RUN_DIR     (needs: pip install pandas hdrhistogram)
"""
import sys
import time

import pandas as pd
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader


def merged(run, logs):
    acc = HdrHistogram(1, 10 * 10**9, 3)
    for rel in logs:
        reader = HistogramLogReader(f"{run}/{rel}", HdrHistogram(1, 10 * 10**9, 3))
        while True:
            h = reader.get_next_interval_histogram()
            if h is None:
                break
            acc.add(h)
    return acc


def main(run):
    t0 = time.perf_counter()
    df = pd.read_json(f"{run}/samples.jsonl", lines=True)
    df = df[(df.status == "ok") & ~df.warmup]
    lat = []
    for level, g in df[df.job == "latency"].groupby("level", sort=True):
        h = merged(run, g.hdr_log.dropna())
        mean = h.get_mean_value()
        p = {q: h.get_value_at_percentile(q) for q in (50, 90, 99, 99.9)}
        lat.append((level, mean, p[50], p[90], p[99], p[99.9], p[90] - mean))
    lat = pd.DataFrame(lat, columns=["load_bps", "mean", "p50", "p90", "p99", "p99.9", "p90-mean"])
    load = df[df.job == "load"]
    per_node = load.groupby(["level", "tenant"]).rate_bps.mean().reset_index()
    tput = per_node.groupby("level").rate_bps.agg(["mean", "min", "max", "sum"])
    took = time.perf_counter() - t0
    print(lat.head(3).to_string(), file=sys.stderr)
    print(tput.head(3).to_string(), file=sys.stderr)
    print(f"pandas+hdrh: {len(lat)} latency levels, {len(tput)} throughput levels in {took:.2f} s")


if __name__ == "__main__":
    main(sys.argv[1])
