"""Engine overhead: what the profiler itself costs per request, and how fast it can go.

A no-op pipeline (synthetic, every stage 0 ms) at concurrency 1, in-process: every microsecond
of the total is the engine (thread hand-offs, queues, bookkeeping). Reports the ``overhead``
component (the unattributed client gap), the whole no-op round trip, and the highest request
rate the engine sustains: closed loop at growing concurrency, and open loop at growing rates
(sustained = delivered within 2% of the offered rate with schedule-lag p99 under 1 ms).

    python bench/bench_engine_overhead.py
    python bench/bench_engine_overhead.py --quick   # a smoke run (CI): fewer, shorter runs
"""
from __future__ import annotations

import argparse

from latency.core.config import RunConfig
from latency.execution.engine import execute

NOOP = {"preprocess_ms": 0, "forward_ms": 0, "postprocess_ms": 0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="2,000 requests a run, two concurrencies and two rates (< 1 min)")
    quick = ap.parse_args().quick
    n = 2000 if quick else 20000
    r = execute(RunConfig(model="synthetic", model_args=NOOP, concurrency=1, requests=n,
                          warmup=500))
    s = r.summary
    us = lambda v: f"{v * 1000:.1f} µs"  # noqa: E731
    print(f"no-op pipeline, concurrency 1, in-process, {n:,} requests")
    print(f"  overhead component: median {us(s.components_ms['overhead'].p50)}, "
          f"p99 {us(s.components_ms['overhead'].p99)}")
    for comp in ("network", "queue", "preprocess", "forward", "postprocess"):
        c = s.components_ms[comp]
        print(f"  {comp:<11} median {us(c.p50)}, p99 {us(c.p99)}")
    print(f"  whole round trip: median {us(s.latency_ms.p50)}, "
          f"p99 {us(s.latency_ms.p99)}; throughput {s.throughput_rps:.0f} req/s")
    print("closed loop, no-op pipeline (2 replicas, 4 preprocess workers):")
    for conc in ((1, 4) if quick else (1, 2, 4, 8, 16)):
        r = execute(RunConfig(model="synthetic", model_args=NOOP, concurrency=conc,
                              replicas=2, requests=n, warmup=200))
        print(f"  concurrency {conc:>2}: {r.summary.throughput_rps:>7.0f} req/s, "
              f"p50 {us(r.summary.latency_ms.p50)}")
    print("open loop, no-op pipeline, Poisson:")
    best = 0.0
    for rate in ((1000, 2000) if quick else (1000, 2000, 3000, 4000, 5000, 6000, 8000)):
        r = execute(RunConfig(model="synthetic", model_args=NOOP, rate=float(rate),
                              requests=rate * (1 if quick else 4), warmup=200, replicas=2,
                              seed=1))
        s = r.summary
        ok = (s.throughput_rps >= 0.98 * rate and s.schedule_lag_ms["p99"] < 1.0)
        best = rate if ok else best
        print(f"  offered {rate:>5}/s: delivered {s.throughput_rps:>7.0f}/s, schedule lag "
              f"p99 {s.schedule_lag_ms['p99']:.3f} ms, p50 {us(s.latency_ms.p50)}"
              f" {'sustained' if ok else 'NOT sustained'}")
    print(f"highest sustained open-loop rate: {best} req/s")


if __name__ == "__main__":
    main()
