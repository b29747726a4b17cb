"""Levers: forward speed-up in isolation, and what each does end to end (interleaved A/B).

    python bench/bench_levers.py            # all three models, every lever that applies
    python bench/bench_levers.py --quick    # a smoke run (CI): tabular-mlp only, every lever
                                            # in part 1, one A/B pair of 0.5 s (int8) in part 2

Part 1 times one forward call per lever (median of 15, alternating baseline and optimised
model call by call, batch 1 and batch 8, one thread) and reports the answers' top-1 agreement
on 64 held-out inputs. Part 2 runs an A/B per lever in the engine (closed loop, 4 clients,
batch ≤ 8 / 2 ms, fast pre/post) and reports forward and end-to-end p50 changes. Part 3 times
naive against fast preprocessing and postprocessing. All ratios are measured side by side in
one process, so a noisy machine inflates both arms alike.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import time
import warnings

import torch
from common import REAL_MODELS, pipeline_and_batch

from latency.core.config import RunConfig
from latency.execution.ab import ABPlan, run_ab, variant_config
from latency.pipelines import levers as optimize


def applicable(model: str) -> list[str]:
    out = ["int8", "compile", "prune_unstructured", "prune_structured"]
    if model == "image-cnn":
        out.append("channels_last")
    if optimize.bf16_unsupported_reason("cpu") is None:
        out.append("bf16")
    return out


def forward_speedups(model: str) -> None:
    torch.set_num_threads(1)
    for batch in (1, 8):
        p, items, raw = pipeline_and_batch(model, batch)
        x = p.collate(items)
        base = copy.deepcopy(p.model)
        for lever in applicable(model):
            q = copy.deepcopy(p)
            q.model = copy.deepcopy(base)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rep = optimize.prepare(q, [lever], "fast", "fast", batch_size=batch)
            tb, tl = [], []
            with torch.inference_mode():
                for _ in range(3):
                    p.forward(x), q.forward(x)
                for _ in range(15):
                    t = time.perf_counter()
                    p.forward(x)
                    tb.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    q.forward(x)
                    tl.append(time.perf_counter() - t)
            b, o = statistics.median(tb) * 1e3, statistics.median(tl) * 1e3
            extra = f", compile {rep.compile_s:.1f} s" if rep.compile_s else ""
            print(f"{model:<17}{lever:<20}batch {batch:<2} {b:7.3f} → {o:7.3f} ms "
                  f"({(o - b) / b:+.0%})  top-1 agreement {rep.agreement:.1%}, "
                  f"params {rep.params_before:,} → {rep.params_after:,}{extra}")


def end_to_end(model: str, block_s: float, pairs: int = 2,
               levers: list[str] | None = None) -> None:
    base = RunConfig(model=model, concurrency=4, batch_size=8, max_batch_delay_ms=2.0,
                     duration_s=block_s, warmup=10)
    for lever in levers if levers is not None else applicable(model):
        ab = run_ab(ABPlan(base, variant_config(base, optimize=[lever]), pairs=pairs))
        h = ab.headline
        print(f"{model:<17}{lever:<20}{h.text}  (forward was {h.forward_share:.0%} of A; "
              f"top-1 agreement {ab.b.optimization['agreement']:.1%})")


def variants(model: str) -> None:
    p, items, raw = pipeline_and_batch(model, 8)
    with torch.inference_mode():
        out = p.split(p.forward(p.collate(items)), len(items))
    for stage, fast, naive, args in (("pre", p.preprocess, p.preprocess_naive, raw[:8]),
                                     ("post", p.postprocess, p.postprocess_naive, out)):
        tf, tn = [], []
        with torch.inference_mode():
            for _ in range(5):
                t = time.perf_counter()
                [fast(a) for a in args]
                tf.append(time.perf_counter() - t)
                t = time.perf_counter()
                [naive(a) for a in args]
                tn.append(time.perf_counter() - t)
        f, n = statistics.median(tf) / len(args) * 1e3, statistics.median(tn) / len(args) * 1e3
        print(f"{model:<17}{stage + 'process':<13} fast {f:8.3f} ms   naive {n:8.3f} ms   "
              f"(naive {n / f:.1f}× slower)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true",
                    help="tabular-mlp only; part 2 one 0.5 s A/B pair of int8 (a smoke run)")
    a = ap.parse_args()
    models = ("tabular-mlp",) if a.quick else REAL_MODELS
    print("== forward pass in isolation (median of 15, alternating calls, 1 thread)")
    for m in models:
        forward_speedups(m)
    pairs = 1 if a.quick else 2
    print(f"\n== end to end: interleaved A/B, {pairs} pair(s) (closed loop, 4 clients, "
          "batch ≤ 8 / 2 ms)")
    for m in models:
        end_to_end(m, 0.5 if a.quick else 3.0, pairs, ["int8"] if a.quick else None)
    print("\n== naive vs fast pre/postprocessing, per request")
    for m in models:
        variants(m)


if __name__ == "__main__":
    main()
