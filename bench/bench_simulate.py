"""Simulation speed: 100,000 simulated requests, target ≤ 200 ms on this machine.

    python bench/bench_simulate.py
    python bench/bench_simulate.py --quick    # a smoke run (CI): one timed repeat a case
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from latency.simulation.simulator import ServiceModel, SimConfig, simulate

CASES = {
    "1 replica, batch 1, exponential": (SimConfig(rate=70, requests=100_000),
                                        ServiceModel(forward_ms=10, dist="exponential")),
    "3 replicas, batch 1, lognormal": (SimConfig(rate=240, replicas=3, requests=100_000),
                                       ServiceModel(forward_ms=10, dist="lognormal", cv=1.5)),
    "2 replicas, batch 8 / 5 ms": (SimConfig(rate=600, replicas=2, batch_size=8,
                                             max_batch_delay_ms=5, requests=100_000),
                                   ServiceModel(forward_ms=6, forward_per_item_ms=1,
                                                preprocess_ms=1, postprocess_ms=0.2)),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one timed repeat a case")
    repeats = 1 if ap.parse_args().quick else 5
    for name, (cfg, svc) in CASES.items():
        simulate(cfg, svc)
        times = []
        for seed in range(repeats):
            cfg.seed = seed
            t = time.perf_counter()
            simulate(cfg, svc)
            times.append((time.perf_counter() - t) * 1e3)
        print(f"{name:<36} 100,000 requests: median {np.median(times):.0f} ms, "
              f"max {max(times):.0f} ms (target ≤ 200 ms)")


if __name__ == "__main__":
    main()
