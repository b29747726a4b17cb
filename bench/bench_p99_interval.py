"""How honest is the p99 interval, and what does it cost? (BENCHMARKS.md)

Coverage: simulated M/M/1 runs (10 ms exponential service, Poisson arrivals) of known p99 =
ln(100)/(μ − λ), at utilisation 0.5, 0.7 and 0.9 and several lengths; for each, the share of
runs whose interval covers the true p99 — the batch-means interval the engine reports
(``describe_ms``) and the binomial order-statistic interval that assumes independent requests
— and how often the engine withholds its interval (the run is worth < 1,000 independent
requests). Cost: ``describe_ms`` on 200,000 samples with and without the interval, best of 20.

    python bench/bench_p99_interval.py [--runs 200]
    python bench/bench_p99_interval.py --quick    # a smoke run (CI): 5 runs of each, 2 repeats
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from latency.analysis.stats import describe_ms, quantile_ci  # noqa: E402
from latency.simulation.simulator import ServiceModel, SimConfig, simulate  # noqa: E402


def coverage(rho: float, n: int, runs: int) -> tuple[float | None, float, float]:
    true = math.log(100) / (100 - 100 * rho) * 1000
    hits = naive_hits = given = 0
    for seed in range(1, runs + 1):
        rows = simulate(SimConfig(rate=100 * rho, requests=int(n / 0.9), seed=seed),
                        ServiceModel(forward_ms=10.0))
        m = rows[~rows["warmup"]]
        totals = m["t_done"] - m["t_intended"]
        ci = describe_ms(totals).p99_ci95
        naive = quantile_ci(np.sort(totals) / 1e6, 0.99)
        naive_hits += bool(naive and naive[0] <= true <= naive[1])
        if ci:
            given += 1
            hits += ci[0] <= true <= ci[1]
    return (hits / given if given else None), given / runs, naive_hits / runs


def cost_ms(with_ci: bool, repeats: int = 20) -> float:
    x = np.random.default_rng(0).exponential(1e6, 200_000).astype(np.int64)
    best = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        describe_ms(x, with_ci=with_ci)
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--quick", action="store_true",
                    help="5 runs per case and 2 repeats of the cost: a smoke run, not figures")
    args = ap.parse_args()
    repeats = 20
    if args.quick:
        args.runs, repeats = 5, 2
    print("| ρ | requests | batch means: covers | interval given | binomial (independence): "
          "covers |")
    print("|---|---|---|---|---|")
    for rho, n in ((0.5, 2000), (0.5, 20_000), (0.7, 6000), (0.7, 20_000), (0.7, 60_000),
                   (0.9, 20_000), (0.9, 60_000)):
        cov, given, naive = coverage(rho, n, args.runs)
        shown = f"{cov:.1%}" if cov is not None else "—"
        print(f"| {rho} | {n:,} | {shown} | {given:.0%} | {naive:.1%} |", flush=True)
    print(f"\ndescribe_ms, 200,000 samples: {cost_ms(True, repeats):.1f} ms with the "
          f"interval, {cost_ms(False, repeats):.1f} ms without")


if __name__ == "__main__":
    main()
