"""Dashboard refresh cost: snapshot + every figure for a run of 200,000 requests.

The dashboard builds one Snapshot per data version (shared by every viewer) and the figures
from it. Target: ≤ 150 ms for a 200,000-request run on this machine. The rows are generated
with numpy (lognormal stage times, Poisson arrivals over 100 s): this measures aggregation and
drawing, which do not depend on where the numbers came from.

    python bench/bench_figures.py [--requests 200000]
    python bench/bench_figures.py --quick     # a smoke run (CI): 20,000 requests, 2 refreshes
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from latency.analysis.snapshot import build_snapshot
from latency.core.config import RunConfig
from latency.core.records import RECORD_DTYPE
from latency.figures import plots


def synthetic_rows(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = np.zeros(n, dtype=RECORD_DTYPE)
    t = np.cumsum(rng.exponential(1e9 / 2000, n)).astype(np.int64)  # 2000 req/s
    stages = [rng.lognormal(np.log(m), 0.5, n).astype(np.int64) for m in
              (5e3, 4e4, 1e5, 2e6, 3e4, 5e6, 2e4, 5e5, 5e4)]
    cur = t.copy()
    rows["t_intended"] = t
    for name, d in zip(("sent", "received", "pre_start", "pre_end", "fwd_start", "fwd_end",
                        "post_start", "post_end", "done"), stages):
        cur = cur + d
        rows[f"t_{name}"] = cur
    rows["batch_size"] = 1
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="20,000 requests, 2 refreshes")
    a = ap.parse_args()
    if a.quick:
        a.requests, a.repeats = 20_000, 2
    rows = synthetic_rows(a.requests)
    cfg = RunConfig(model="synthetic", rate=2000.0)
    snap_ms, fig_ms = [], []
    for v in range(a.repeats):
        t0 = time.perf_counter()
        s = build_snapshot("bench", v, "running", "measuring", cfg, rows, {}, {},
                           int(rows["t_intended"][0]), None)
        t1 = time.perf_counter()
        lat = s.summary.latency_ms
        plots.stacked_components_figure(s.makeup_ms)
        plots.latency_histogram_figure(s.hist_edges_ms, s.hist_counts,
                                       {k: lat.get(k) for k in ("p50", "p95", "p99")}, 50.0,
                                       s.share_within(50.0))
        plots.timeseries_figure(s.series)
        plots.summary_rows(s.summary)
        t2 = time.perf_counter()
        snap_ms.append((t1 - t0) * 1e3)
        fig_ms.append((t2 - t1) * 1e3)
    total = np.array(snap_ms) + np.array(fig_ms)
    print(f"{a.requests:,} requests, {a.repeats} refreshes: snapshot median "
          f"{np.median(snap_ms):.1f} ms, figures median {np.median(fig_ms):.1f} ms, "
          f"refresh median {np.median(total):.1f} ms (max {total.max():.1f} ms); "
          f"target ≤ 150 ms")


if __name__ == "__main__":
    main()
