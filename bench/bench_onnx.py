"""PyTorch eager vs ONNX Runtime on the same model, side by side in one run.

For the CNN and the Transformer: the sample pipeline (eager PyTorch) against its exported ONNX
file served by ``--model-file`` (ONNX Runtime; the sample's own pre/postprocessing, so only the
runtime differs). Forward pass alone (one batch of 1 and of 8, call by call, the two runtimes
interleaved) and end to end under load (closed loop; batch 1 with 1 client, batch ≤ 8 with 8
clients; runs interleaved A B B A).

    pip install -r requirements-onnx.txt
    python bench/bench_onnx.py [--duration 3]
    python bench/bench_onnx.py --quick    # a smoke run (CI): the CNN alone, batch 1, short runs
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from latency.core.config import RunConfig
from latency.execution.engine import execute
from latency.pipelines.export import export
from latency.pipelines.registry import build_pipeline, parse_model_args

MODELS = ("image-cnn", "text-transformer")


def forward_alone(pipes: dict[str, object], size: int, rounds: int = 200) -> dict[str, float]:
    """Median ms of one forward call on a batch of ``size``, the runtimes interleaved."""
    ref = next(iter(pipes.values()))
    raws = ref.sample_inputs(size, 5)
    batches = {k: p.collate([p.preprocess(r) for r in raws]) for k, p in pipes.items()}
    times: dict[str, list[float]] = {k: [] for k in pipes}
    with torch.inference_mode():
        for _ in range(10):
            for k, p in pipes.items():
                p.forward(batches[k])
        for _ in range(rounds):
            for k, p in pipes.items():
                t = time.perf_counter()
                p.forward(batches[k])
                times[k].append((time.perf_counter() - t) * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--quick", action="store_true",
                    help="the CNN alone, batch 1, 20 calls and 0.5 s runs (< 1 min)")
    a = ap.parse_args()
    models, sizes, rounds = (MODELS[:1], (1,), 20) if a.quick else (MODELS, (1, 8), 200)
    loads = ((1, 1),) if a.quick else ((1, 1), (8, 8))
    if a.quick:
        a.duration = 0.5
    tmp = Path(tempfile.mkdtemp())
    torch.set_num_threads(1)
    for name in models:
        onnx = export(name, tmp / f"{name}.onnx")["file"]
        file_args = parse_model_args("model-file", {"file": onnx})
        pipes = {"eager": build_pipeline(name, torch.device("cpu"), torch.float32, {}),
                 "onnxruntime": build_pipeline("model-file", torch.device("cpu"),
                                               torch.float32, file_args)}
        print(f"{name}: forward alone, median of {rounds} calls (ms)")
        for size in sizes:
            f = forward_alone(pipes, size, rounds)
            print(f"  batch {size}: eager {f['eager']:.3f}, ONNX Runtime "
                  f"{f['onnxruntime']:.3f} ({f['onnxruntime'] / f['eager'] - 1:+.0%})")
        print(f"{name}: end to end, {a.duration:g} s per run, A B B A")
        for batch, clients in loads:
            cfgs = {"eager": RunConfig(model=name, batch_size=batch, max_batch_delay_ms=5.0,
                                       concurrency=clients, duration_s=a.duration, warmup=20),
                    "onnxruntime": RunConfig(model="model-file", model_args={"file": onnx},
                                             batch_size=batch, max_batch_delay_ms=5.0,
                                             concurrency=clients, duration_s=a.duration,
                                             warmup=20)}
            got: dict[str, list] = {"eager": [], "onnxruntime": []}
            for arm in ("eager", "onnxruntime", "onnxruntime", "eager"):
                got[arm].append(execute(cfgs[arm]).summary)
            for arm, runs in got.items():
                p50 = statistics.mean(s.latency_ms.p50 for s in runs)
                p99 = statistics.mean(s.latency_ms.p99 for s in runs)
                fwd = statistics.mean(s.components_ms["forward"].mean for s in runs)
                rps = statistics.mean(s.throughput_rps for s in runs)
                print(f"  batch ≤ {batch}, {clients} client(s), {arm:<11}: p50 {p50:.2f} ms, "
                      f"p99 {p99:.2f} ms, forward mean {fwd:.3f} ms, {rps:.0f} req/s")


if __name__ == "__main__":
    main()
