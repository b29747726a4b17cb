"""The run manager's memory over a day of runs: RSS of the dashboard-side process while 100
runs go through one RunManager, with the keep limit (the default: the last 20 finished runs
stay in memory) and, side by side in the same process, without it (every finished run kept,
as before the limit existed).

    python bench/bench_manager_soak.py [--runs 100] [--requests 20000]
    python bench/bench_manager_soak.py --quick    # a smoke run (CI): 3 runs of 2,000 requests
                                                  # per arm, keeping 1, RSS after every run

Each run is the synthetic pipeline with no stage time (as many requests as the machine serves,
~1-2 s), so its request rows (105 bytes each) dominate what a finished run holds. Prints RSS
after every tenth run and the growth from run 20 to the last, per arm.
"""
from __future__ import annotations

import argparse
import gc
import resource
import time
from pathlib import Path

from latency.core.config import RunConfig
from latency.execution import manager as manager_mod
from latency.execution.manager import RunManager


def rss_mb() -> float:
    """Resident set size now (Linux /proc), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def soak(keep: int, runs: int, requests: int, every: int = 10) -> list[tuple[int, float]]:
    manager_mod.KEEP_FINISHED = keep
    m = RunManager(store=None)
    cfg = RunConfig(model="synthetic", model_args={"preprocess_ms": 0, "forward_ms": 0,
                                                   "postprocess_ms": 0},
                    concurrency=4, requests=requests, warmup=0)
    points = []
    for i in range(1, runs + 1):
        ticket = m.submit(cfg, owner="soak")
        m.wait_idle(timeout=600)
        m.get(ticket.run_id).snapshot()  # a viewer looked at it, as the dashboard would
        if i % every == 0:
            gc.collect()
            points.append((i, rss_mb()))
            print(f"  keep={keep:>5}  after {i:>3} runs: RSS {points[-1][1]:7.1f} MB", flush=True)
    held = len(m._runs)
    m.close()
    print(f"  keep={keep:>5}  records held at the end: {held}")
    return points


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--quick", action="store_true",
                    help="3 runs of 2,000 requests per arm, keeping 1 (< 1 min)")
    a = ap.parse_args()
    keep, every = 20, 10
    if a.quick:
        a.runs, a.requests, keep, every = 3, 2_000, 1, 1
    t = time.monotonic()
    print(f"{a.runs} runs of {a.requests:,} requests through one RunManager")
    limited = soak(keep, a.runs, a.requests, every)
    unlimited = soak(10 ** 9, a.runs, a.requests, every)
    for name, pts in ((f"keep {keep} (default)" if keep == 20 else f"keep {keep}", limited),
                      ("keep all (no limit)", unlimited)):
        at, mb_at = next((i, mb) for i, mb in pts if i >= keep)
        print(f"{name:>20}: RSS after run {at} {mb_at:.1f} MB, after run {pts[-1][0]} "
              f"{pts[-1][1]:.1f} MB: {pts[-1][1] - mb_at:+.1f} MB over {pts[-1][0] - at} runs")
    print(f"({time.monotonic() - t:.0f} s)")


if __name__ == "__main__":
    main()
