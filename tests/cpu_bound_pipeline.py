"""A pipeline whose preprocess is pure Python arithmetic (no I/O, no sleeping, the GIL held
throughout): with several preprocess workers, its threads wait for the cores and the GIL, which
tests/test_cpu_wait.py measures. Named by path (``--pipeline tests/cpu_bound_pipeline.py:Spin``)
so a run process imports it."""
from __future__ import annotations

from typing import Any

import torch

from latency import ModelArg, Pipeline


class Spin(Pipeline):
    name = "spin"
    model_args = (ModelArg("loops", int, 20000, "additions a preprocess does", low=1,
                           high=10_000_000),)

    def __init__(self, device: Any = "cpu", dtype: Any = torch.float32, **args: Any) -> None:
        super().__init__(device, dtype, **args)
        self.loops = int(args.get("loops", 20000))
        self.model = torch.nn.Linear(4, 2)

    def sample_inputs(self, n: int, seed: int) -> list[Any]:
        return [str(i) for i in range(n)]

    def preprocess(self, raw: Any) -> Any:
        x = 0
        for i in range(self.loops):  # pure Python: holds the GIL while it runs
            x += i
        return torch.full((4,), float(x % 7))

    def forward(self, batch: Any) -> Any:
        return self.model(batch)

    def postprocess(self, item: Any) -> Any:
        return {"y": float(item[0])}
