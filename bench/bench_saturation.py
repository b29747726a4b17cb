"""Saturation: how much of the model's own throughput does the served pipeline deliver?

Served: the engine at batch 8 with enough clients to keep every batch full (closed loop, 32
clients, 1 replica × T threads), raw inputs in, responses out. References, on the same
batches and thread count, measured in the same run: a plain ``model(x)`` loop over
pre-collated batches (the ceiling if serving were free), and a plain sequential loop doing the
whole pipeline (preprocess + forward + postprocess) per batch on one thread.

    python bench/bench_saturation.py [--threads 1] [--duration 8]
    python bench/bench_saturation.py --quick    # a smoke run (CI): tabular-mlp, 1 s
"""
from __future__ import annotations

import argparse
import time

import torch
from common import REAL_MODELS, pipeline_and_batch

from latency.core.config import RunConfig
from latency.execution.engine import execute

BATCH = 8


def plain_forward_rps(model: str, threads: int, seconds: float) -> float:
    p, items, _ = pipeline_and_batch(model, BATCH)
    torch.set_num_threads(threads)
    x = p.collate(items)
    n, t0 = 0, time.perf_counter()
    with torch.inference_mode():
        while time.perf_counter() - t0 < seconds:
            p.forward(x)
            n += BATCH
    return n / (time.perf_counter() - t0)


def plain_pipeline_rps(model: str, threads: int, seconds: float) -> float:
    p, _, raw = pipeline_and_batch(model, BATCH)
    torch.set_num_threads(threads)
    n, i, t0 = 0, 0, time.perf_counter()
    with torch.inference_mode():
        while time.perf_counter() - t0 < seconds:
            batch = [raw[(i + k) % len(raw)] for k in range(BATCH)]
            out = p.forward(p.collate([p.preprocess(r) for r in batch]))
            for o in p.split(out, BATCH):
                p.postprocess(o)
            n += BATCH
            i += BATCH
    return n / (time.perf_counter() - t0)


def served_rps(model: str, threads: int, seconds: float) -> tuple[float, float]:
    r = execute(RunConfig(model=model, threads=threads, batch_size=BATCH,
                          max_batch_delay_ms=20.0, concurrency=32, duration_s=seconds,
                          warmup=64, input_pool=32))
    return r.summary.throughput_rps, r.summary.batch_size_mean


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--quick", action="store_true", help="tabular-mlp alone, 1 s a measurement")
    a = ap.parse_args()
    models = ("tabular-mlp",) if a.quick else REAL_MODELS
    if a.quick:
        a.duration = 1.0
    print(f"batch {BATCH}, 1 replica × {a.threads} thread(s); requests/s")
    print(f"{'model':<17}{'model(x) loop':>15}{'plain pipeline':>16}{'served':>9}"
          f"{'mean batch':>12}{'served/model(x)':>17}{'served/plain':>14}")
    for model in models:
        ref = plain_forward_rps(model, a.threads, a.duration / 2)
        full = plain_pipeline_rps(model, a.threads, a.duration / 2)
        srv, mb = served_rps(model, a.threads, a.duration)
        print(f"{model:<17}{ref:>15.0f}{full:>16.0f}{srv:>9.0f}{mb:>12.2f}{srv / ref:>17.1%}"
              f"{srv / full:>14.1%}")


if __name__ == "__main__":
    main()
