"""Ray Serve next to our own server, on the same pipeline and load, measured in one run.

1. What serving costs a request (closed loop, one client, synthetic 2 / 5 / 1 ms stages, one
   replica): the ``network`` component — a thread hand-off in-process, loopback HTTP to our
   server, loopback HTTP through Ray Serve's proxy and router (preprocess in the replica, and
   in a deployment of its own: one more hop between actors).
2. Throughput per replica and the GIL: the text Transformer and the tabular MLP (their
   preprocessing is Python), the same replica count (2, one thread each) and load (closed
   loop, 8 clients) served by our server in-process (replicas are threads of one process:
   one GIL), by our HTTP server (threads, one GIL, in its own process) and by Ray Serve
   (replicas are processes: a GIL each).

Every Ray run starts its own local Ray instance (its start and deploy seconds are printed);
the in-process and HTTP runs go first for each pipeline, then Ray, all in this one process.
Figures depend on the machine: on 2 cores Ray's proxy, controller and two replica processes
compete with the load generator for the same cores.

    python bench/bench_ray.py                 # both parts (about 6 minutes on 2 cores)
    python bench/bench_ray.py --quick         # a smoke run, not figures
"""
from __future__ import annotations

import argparse
import sys
import time

from latency.core.config import RunConfig
from latency.execution.engine import execute

SERVERS = (
    ("in-process (threads)", {}),
    ("our HTTP server (threads)", {"transport": "http"}),
    ("Ray Serve (actors)", {"backend": "ray"}),
)


def run(label: str, **kw) -> dict:
    t = time.perf_counter()
    r = execute(RunConfig(**kw), force=True)
    if r.status != "completed":
        print(f"  {label}: {r.status} {r.failure or ''}", flush=True)
        return {}
    s = r.summary
    c = s.components_ms
    row = {"label": label, "total": s.latency_ms.p50, "network": c["network"].p50,
           "queue": c["queue"].p50, "pre": c["preprocess"].p50, "fwd": c["forward"].p50,
           "post": c["postprocess"].p50, "rps": s.throughput_rps, "errors": s.errors,
           "setup_s": time.perf_counter() - t - (s.duration_s or 0),
           "ray_s": (r.timings.ray_start_s or 0) + (r.timings.deploy_s or 0)}
    return row


def table(rows: list[dict], replicas: int) -> None:
    print(f"  {'server':<38}{'p50':>8}{'network':>9}{'queue':>8}{'pre':>7}{'fwd':>7}"
          f"{'post':>7}{'req/s':>8}{'/replica':>9}{'start s':>9}")
    for r in rows:
        if not r:
            continue
        print(f"  {r['label']:<38}{r['total']:>8.2f}{r['network']:>9.2f}{r['queue']:>8.2f}"
              f"{r['pre']:>7.2f}{r['fwd']:>7.2f}{r['post']:>7.2f}{r['rps']:>8.1f}"
              f"{r['rps'] / replicas:>9.1f}{r['ray_s'] or r['setup_s']:>9.1f}", flush=True)


def part1(requests: int) -> None:
    print("\n1. what serving costs one request (synthetic 2/5/1 ms, 1 replica, 1 client; ms)")
    stages = {"preprocess_ms": 2, "forward_ms": 5, "postprocess_ms": 1}
    base = dict(model="synthetic", model_args=stages, requests=requests, warmup=20)
    rows = [run(label, **base, **extra) for label, extra in SERVERS]
    rows.append(run("Ray Serve, preprocess deployment", **base, backend="ray",
                    ray_preprocess="deployment"))
    table(rows, 1)


def part2(duration: float, models: list[str]) -> None:
    print("\n2. throughput per replica: 2 replicas × 1 thread, closed loop 8 clients (ms)")
    for model in models:
        print(f" {model}")
        base = dict(model=model, replicas=2, threads=1, concurrency=8, duration_s=duration,
                    warmup=40)
        table([run(label, **base, **extra) for label, extra in SERVERS], 2)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--models", default="text-transformer,tabular-mlp")
    a = p.parse_args(argv)
    part1(100 if a.quick else 400)
    part2(3.0 if a.quick else 15.0, a.models.split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
