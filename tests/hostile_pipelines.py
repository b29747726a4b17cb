"""Pipelines that misbehave on purpose, one behaviour each, for the tests that check a user's
bad stage fails alone and a bad constructor fails the run with its reason. Named by file path
(``--pipeline tests/hostile_pipelines.py:InitRaise``), so a run process imports them too."""
from __future__ import annotations

import sys
from typing import Any

import torch

from latency import ModelArg, Pipeline


class Base(Pipeline):
    """A well-behaved pipeline: a 4→2 linear layer over a tensor of ones."""

    name = "hostile"
    model_args = (ModelArg("n", int, 4, "unused"),)

    def __init__(self, device: Any = "cpu", dtype: Any = torch.float32, **args: Any) -> None:
        super().__init__(device, dtype, **args)
        self.model = torch.nn.Linear(4, 2)

    def sample_inputs(self, n: int, seed: int) -> list[Any]:
        return [str(i) for i in range(n)]

    def preprocess(self, raw: Any) -> Any:
        return torch.ones(4)

    def forward(self, batch: Any) -> Any:
        return self.model(batch)

    def postprocess(self, item: Any) -> Any:
        return {"y": float(item[0])}


class InitRaise(Base):
    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        raise ValueError("bad init")


class InitExit(Base):
    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        sys.exit(0)


class PrintInit(Base):
    """Says what it does while it loads, as many real pipelines do."""

    def __init__(self, *a: Any, **k: Any) -> None:
        print("loading the model ...", flush=True)
        super().__init__(*a, **k)
        print("loaded", flush=True)


class PrintMB(Base):
    """Prints a megabyte a request: more than a pipe holds."""

    def preprocess(self, raw: Any) -> Any:
        print("x" * (1 << 20), flush=True)
        return torch.ones(4)


class PostTensor(Base):
    """Answers with a tensor: not a response JSON can carry."""

    def postprocess(self, item: Any) -> Any:
        return item


class PreExit(Base):
    def preprocess(self, raw: Any) -> Any:
        sys.exit(0)


class PreKBI(Base):
    def preprocess(self, raw: Any) -> Any:
        raise KeyboardInterrupt


class FwdExit(Base):
    def forward(self, batch: Any) -> Any:
        sys.exit(0)


class FwdShort(Base):
    """Returns one row whatever the batch."""

    def forward(self, batch: Any) -> Any:
        return self.model(batch)[:1]


class SplitNone(Base):
    def split(self, output: Any, n: int) -> Any:
        return None


class PostExit(Base):
    def postprocess(self, item: Any) -> Any:
        sys.exit(0)


class PostKBI(Base):
    def postprocess(self, item: Any) -> Any:
        raise KeyboardInterrupt


def factory_exit(device: Any = "cpu", dtype: Any = torch.float32, **args: Any) -> Pipeline:
    """A factory that exits instead of returning a pipeline."""
    sys.exit(0)


def mark_hanging(what: str) -> None:
    """Where the test asked (``HANG_MARK``: a file), append a line as the code starts to hang,
    so the test signals a run that is stuck, not one still starting, and waits no longer than
    it takes (instead of a fixed sleep that a busy machine may outlast)."""
    import os

    path = os.environ.get(HANG_MARK)
    if path:
        with open(path, "a") as f:
            f.write(what + "\n")


#: the environment variable naming the file ``mark_hanging`` appends to
HANG_MARK = "LATENCY_LAB_TEST_HANG_MARK"


def wait_for_hang(path: Any, lines: int = 1, timeout_s: float = 120.0) -> None:
    """Until ``path`` has ``lines`` lines from ``mark_hanging`` (raises after ``timeout_s``)."""
    import time
    from pathlib import Path

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        p = Path(path)
        if p.exists() and len(p.read_text().splitlines()) >= lines:
            time.sleep(0.2)  # from writing the line to the sleep itself
            return
        time.sleep(0.1)
    raise TimeoutError(f"nothing started to hang within {timeout_s:.0f} s ({path})")


class PreSleep(Base):
    """A stage that hangs: preprocess never returns."""

    def preprocess(self, raw: Any) -> Any:
        import time

        mark_hanging("preprocess")
        time.sleep(10**6)


class InitSleep(Base):
    """A constructor that never returns (in practice): a stop must still end the run."""

    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        import time
        mark_hanging("constructor")
        time.sleep(10**6)


class Segv(Base):
    """A forward pass that crashes the process (a null read): only the run process dies."""

    def forward(self, batch: Any) -> Any:
        import ctypes
        ctypes.string_at(0)
        return super().forward(batch)


class FwdSlow(Base):
    """A slow but well-behaved forward pass: a run that lasts while a test kills its caller."""

    def forward(self, batch: Any) -> Any:
        import time
        time.sleep(0.02)
        return super().forward(batch)
