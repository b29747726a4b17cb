"""A pipeline whose stages hold set times: the known answer for tests and the teaching tool.

Each stage holds its time precisely (sleep, then spin; see ``latency.core.timing``), drawn from a
chosen distribution with the given mean. It also offers the failure modes a profiler must
handle honestly: a share of requests that raise (``error_rate``) and one long stall of the model
worker (``stall_ms`` after ``stall_after`` batches) to show coordinated omission.
"""
from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from typing import Any

import torch

from latency.core.timing import hold_ns
from latency.pipelines.contract import ModelArg, Pipeline

DISTRIBUTIONS = ("constant", "exponential", "lognormal")


#: longest mean a stage may hold, and the longest one-off stall (ms)
MAX_STAGE_MS = 10_000.0
MAX_STALL_MS = 60_000.0
#: the lognormal shape's range (0 would be constant: say dist=constant)
MIN_SIGMA, MAX_SIGMA = 0.001, 5.0


class SyntheticPipeline(Pipeline):
    """Stages that take exactly (or, by distribution, on average) the times you set."""

    name = "synthetic"
    description = ("Stages hold set times (preprocess/forward/postprocess ms, constant, "
                   "exponential or lognormal): known answers for teaching and tests")
    dtypes = ("float32", "bfloat16", "float16")
    # bounded, so no setting can hold a stage (or the one stall) for hours
    model_args = (
        ModelArg("preprocess_ms", float, 2.0, "mean preprocess time per request (ms)",
                 low=0, high=MAX_STAGE_MS),
        ModelArg("forward_ms", float, 5.0, "mean forward time per batch (ms)",
                 low=0, high=MAX_STAGE_MS),
        ModelArg("forward_per_item_ms", float, 0.0,
                 "extra forward time for each request beyond the first in a batch (ms)",
                 low=0, high=MAX_STAGE_MS),
        ModelArg("postprocess_ms", float, 1.0, "mean postprocess time per request (ms)",
                 low=0, high=MAX_STAGE_MS),
        ModelArg("dist", str, "constant", "distribution of every stage time", DISTRIBUTIONS),
        ModelArg("sigma", float, 0.5, "lognormal shape (spread) when dist=lognormal",
                 low=MIN_SIGMA, high=MAX_SIGMA),
        ModelArg("error_rate", float, 0.0, "share of requests whose preprocess raises (0-1)",
                 low=0, high=1),
        ModelArg("stall_ms", float, 0.0, "one stall of the model worker, this long (ms)",
                 low=0, high=MAX_STALL_MS),
        ModelArg("stall_after", int, 100, "the stall happens at this forward call (count)",
                 low=1, high=10_000_000),
        ModelArg("seed", int, 0, "seed of the stage-time and error draws"),
    )

    def __init__(self, device: torch.device, dtype: torch.dtype, **args: Any) -> None:
        super().__init__(device, dtype, **args)
        self.pre_ms = float(args.get("preprocess_ms", 2.0))
        self.fwd_ms = float(args.get("forward_ms", 5.0))
        self.fwd_item_ms = float(args.get("forward_per_item_ms", 0.0))
        self.post_ms = float(args.get("postprocess_ms", 1.0))
        self.dist = str(args.get("dist", "constant"))
        self.sigma = float(args.get("sigma", 0.5))
        self.error_rate = float(args.get("error_rate", 0.0))
        self.stall_ms = float(args.get("stall_ms", 0.0))
        self.stall_after = int(args.get("stall_after", 100))
        self.check_args({"preprocess_ms": self.pre_ms, "forward_ms": self.fwd_ms,  # ranges,
                         "forward_per_item_ms": self.fwd_item_ms,  # for one built directly
                         "postprocess_ms": self.post_ms, "sigma": self.sigma,
                         "error_rate": self.error_rate, "stall_ms": self.stall_ms,
                         "stall_after": self.stall_after})
        self._rng = random.Random(int(args.get("seed", 0)))
        self._lock = threading.Lock()
        self._forward_calls = 0

    def _draw_ns(self, mean_ms: float) -> int:
        """One stage time in ns: constant, or drawn with the given mean."""
        if mean_ms <= 0:
            return 0
        if self.dist == "constant":
            return int(mean_ms * 1e6)
        with self._lock:  # random.Random is shared by threads; keep draws reproducible-ish
            if self.dist == "exponential":
                ms = self._rng.expovariate(1.0 / mean_ms)
            else:  # lognormal with this mean: mu = ln(mean) - sigma^2/2
                import math
                ms = self._rng.lognormvariate(math.log(mean_ms) - self.sigma ** 2 / 2, self.sigma)
        return int(ms * 1e6)

    def sample_inputs(self, n: int, seed: int) -> list[Any]:
        return [f"request-{seed}-{i}".encode() for i in range(n)]

    def preprocess(self, raw: Any) -> Any:
        hold_ns(self._draw_ns(self.pre_ms))
        if self.error_rate > 0:
            with self._lock:
                fail = self._rng.random() < self.error_rate
            if fail:
                raise RuntimeError(f"synthetic preprocess error (error_rate={self.error_rate})")
        return raw

    def collate(self, items: Sequence[Any]) -> Any:
        return list(items)

    def forward(self, batch: Any) -> Any:
        with self._lock:
            self._forward_calls += 1
            stall = self.stall_ms > 0 and self._forward_calls == self.stall_after
        extra = self.fwd_item_ms * (len(batch) - 1)
        hold_ns(self._draw_ns(self.fwd_ms) + int(extra * 1e6) + int(stall * self.stall_ms * 1e6))
        return batch

    def split(self, output: Any, n: int) -> list[Any]:
        return list(output)

    def postprocess(self, item: Any) -> Any:
        hold_ns(self._draw_ns(self.post_ms))
        return {"ok": True, "input_bytes": len(item)}
