"""The checks that need a GPU, in one command: does the engine time CUDA work right?

    python bench/gpu_check.py              # on a CUDA machine: every check, ~3 minutes
    python bench/gpu_check.py --quick      # fewer requests (CI runs this on CPU as a dry run)

On a machine without CUDA it runs the same checks on the CPU (a dry run: the script itself
cannot rot) and says so in its first line.

Why these checks: CUDA work is asynchronous, so a clock read without a synchronisation
charges the forward pass to whatever comes next (postprocess, or nothing at all). Each
sample model is timed twice — directly, a batch's forward between two synchronisations
(``torch.cuda.synchronize`` and ``perf_counter_ns``, median of many), and by the engine under a
one-client closed loop — and the engine's forward p50 must agree with the direct one. The
run's components must also sum to its total exactly, and the run must be VALID, for each
dtype the device runs.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import latency  # noqa: E402
from latency.core.records import COMPONENTS  # noqa: E402
from latency.host.devices import DTYPES  # noqa: E402
from latency.pipelines.registry import build_pipeline, parse_model_args  # noqa: E402

MODELS = ("image-cnn", "text-transformer", "tabular-mlp")
#: the engine's forward p50 may exceed the direct one by this share plus ``SLACK_MS`` (the
#: engine adds its collate/split and a thread hand-off); below it by at most the share.
TOLERANCE = 0.25
SLACK_MS = 0.3


@dataclass(frozen=True)
class Check:
    model: str
    dtype: str
    direct_ms: float
    engine_ms: float
    total_p50_ms: float
    sums_exactly: bool
    valid: bool

    @property
    def agrees(self) -> bool:
        lo = self.direct_ms * (1 - TOLERANCE)
        hi = self.direct_ms * (1 + TOLERANCE) + SLACK_MS
        return lo <= self.engine_ms <= hi

    @property
    def passed(self) -> bool:
        return self.agrees and self.sums_exactly and self.valid


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def direct_forward_ms(model: str, device: torch.device, dtype: str, repeats: int) -> float:
    """Median forward time of one batch of one, synchronised before each clock read."""
    p = build_pipeline(model, device, DTYPES[dtype], parse_model_args(model, {}))
    raw = p.sample_inputs(8, 0)
    times = []
    with torch.inference_mode():
        batch = p.collate([p.preprocess(raw[0])])
        for _ in range(10):  # warm-up: kernels chosen, caches filled
            p.forward(batch)
        for i in range(repeats):
            batch = p.collate([p.preprocess(raw[i % len(raw)])])
            _sync(device)
            t0 = time.perf_counter_ns()
            p.forward(batch)
            _sync(device)
            times.append((time.perf_counter_ns() - t0) / 1e6)
    return statistics.median(times)


def engine_check(model: str, device: str, dtype: str, requests: int, repeats: int) -> Check:
    direct = direct_forward_ms(model, torch.device(device), dtype, repeats)
    result = latency.profile(model, device=device, dtype=dtype, concurrency=1,
                             requests=requests, warmup=20)
    rows = result.measured()
    stamps_total = (rows["t_done"] - rows["t_intended"]).astype("int64")
    from latency.core.records import component_ns

    comps = component_ns(rows)
    summed = sum(comps[c] for c in COMPONENTS)
    s = result.summary
    return Check(model, dtype, direct, float(s.component("forward").get("p50")),
                 float(s.latency_ms.get("p50")),
                 bool(len(rows)) and bool((summed == stamps_total).all()),
                 result.validity.valid)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests: a dry run")
    ap.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    a = ap.parse_args(argv)
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    requests, repeats = (60, 30) if a.quick else (400, 200)
    if device.startswith("cuda"):
        name = torch.cuda.get_device_name(torch.device(device))
        print(f"gpu_check on {device} ({name}), torch {torch.__version__}")
        dtypes = ["float32", "float16"] + (["bfloat16"] if torch.cuda.is_bf16_supported()
                                           else [])
    else:
        print(f"gpu_check: no CUDA here — a DRY RUN on {device} (torch {torch.__version__})")
        dtypes = ["float32"]
    models = MODELS[:1] if a.quick else MODELS
    print(f"{'model':<18}{'dtype':<10}{'direct fwd':>11}{'engine fwd':>11}{'total p50':>10}"
          f"  sums  valid  agrees")
    checks = []
    for model in models:
        for dtype in dtypes:
            c = engine_check(model, device, dtype, requests, repeats)
            checks.append(c)
            print(f"{c.model:<18}{c.dtype:<10}{c.direct_ms:>9.3f}ms{c.engine_ms:>9.3f}ms"
                  f"{c.total_p50_ms:>8.3f}ms  {'yes' if c.sums_exactly else 'NO':<5} "
                  f"{'yes' if c.valid else 'NO':<6} {'yes' if c.agrees else 'NO'}")
    failed = [c for c in checks if not c.passed]
    print(f"{len(checks) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
