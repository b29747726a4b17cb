"""The Pipeline contract: raw input → preprocess → forward (batched) → postprocess → response.

This is the public contract for profiling your own model (``latency.Pipeline``; the walk-through
is docs/your-pipeline.md). Why a base class and not free functions: the engine times each stage
from the *outside*, so a pipeline only has to say what each stage does. The engine owns the
clock, the batching and the threads; a pipeline owns its model and its device placement.

What each stage is charged to, and on which thread it runs:

=================  ===========================  ===================  =======================
stage              runs on                      how often            its time is
=================  ===========================  ===================  =======================
``preprocess``     a preprocess worker thread   once per request     ``preprocess``
``collate``        a replica thread             once per batch       ``forward`` (with it)
``forward``        a replica thread             once per batch       ``forward``
``split``          a replica thread             once per batch       ``forward`` (with it)
``postprocess``    the replica thread           once per request     ``postprocess``
=================  ===========================  ===================  =======================

- ``preprocess`` must leave its result on ``self.device``: the host→device copy is part of
  preprocessing, where it belongs.
- ``forward`` returns when the output exists; the engine synchronises CUDA itself before it
  reads the clock (never call ``synchronize`` yourself, never read a clock).
- Several preprocess workers call ``preprocess`` at once, and several replicas may call
  ``forward`` at once on the *same* pipeline object: keep per-request state out of ``self``.
  Under ``torch.inference_mode`` the model's weights are only read, which is safe.
- Any stage may raise: the engine turns that into an error for the affected request(s) only
  (a failed ``forward`` fails its whole batch) and the run goes on.
- ``sample_inputs`` is optional when the run is given ``--inputs``: real inputs are better than
  generated ones, and many pipelines have nothing sensible to generate.
"""
from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from latency.core.errors import PipelineError
from latency.host.devices import DTYPES

__all__ = ["ModelArg", "Pipeline", "PipelineError", "PipelineInfo", "parse_bool"]


def parse_bool(value: Any) -> bool:
    """``true/false``, ``yes/no``, ``1/0``, ``on/off`` (a ``--model-arg`` bool)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a yes/no value: {value!r}")


@dataclass(frozen=True)
class ModelArg:
    """One ``--model-arg key=value`` a pipeline accepts, with its type and default.

    ``type`` turns the command line's text into the value (``int``, ``float``, ``str``,
    ``parse_bool`` or any one-argument callable that raises ValueError on bad text).
    """

    name: str
    type: Callable[[str], Any]
    default: Any
    help: str = ""
    choices: tuple[Any, ...] | None = None


class Pipeline(abc.ABC):
    """A serving pipeline; subclasses set ``name``, ``description`` and, optionally,
    ``model_args`` and ``dtypes``, and implement the stages (see the module docstring)."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    model_args: ClassVar[tuple[ModelArg, ...]] = ()
    #: dtypes this pipeline can run in (the device may narrow the list further).
    dtypes: ClassVar[tuple[str, ...]] = ("float32", "bfloat16", "float16")

    @classmethod  # noqa: B027 - an optional hook, empty by default
    def check_args(cls, args: dict[str, Any]) -> None:
        """Reject impossible model-arg values (raise ValueError with one line) before anything
        runs; types and choices are already checked against ``model_args``."""

    def __init__(self, device: torch.device | str = "cpu",
                 dtype: torch.dtype | str = torch.float32, **args: Any) -> None:
        self.device = torch.device(device)
        self.dtype = DTYPES[dtype] if isinstance(dtype, str) else dtype
        self.args = args

    # ---- inputs -------------------------------------------------------------------------
    def sample_inputs(self, n: int, seed: int) -> list[Any]:
        """``n`` raw inputs (bytes, str, JSON text...) as a client would send them. Optional:
        without it, a run needs ``--inputs``."""
        raise PipelineError(f"{type(self).__name__} has no sample_inputs: give the run its "
                            "inputs (--inputs FILE|DIR, or inputs=[...] from Python)")

    @classmethod
    def has_sample_inputs(cls) -> bool:
        return cls.sample_inputs is not Pipeline.sample_inputs

    @classmethod
    def can_generate_inputs(cls, args: dict[str, Any]) -> bool:
        """Whether a run with these model-args can go without ``--inputs``."""
        return cls.has_sample_inputs()

    # ---- stages ---------------------------------------------------------------------------
    @abc.abstractmethod
    def preprocess(self, raw: Any) -> Any:
        """Raw input → model-ready item on ``self.device``."""

    def collate(self, items: Sequence[Any]) -> Any:
        """Items → one batch. Default: stack tensors along a new batch dimension (tuples of
        tensors, e.g. ids and a mask, are stacked element by element)."""
        first = items[0]
        if isinstance(first, tuple):
            return tuple(torch.stack([it[i] for it in items]) for i in range(len(first)))
        return torch.stack(list(items))

    @abc.abstractmethod
    def forward(self, batch: Any) -> Any:
        """Batch in → batched output out (no clock reading, no synchronisation here)."""

    def split(self, output: Any, n: int) -> list[Any]:
        """Batched output → ``n`` per-request outputs. Default: rows of a tensor."""
        return list(output.unbind(0)) if n > 1 else [output[0]]

    @abc.abstractmethod
    def postprocess(self, item: Any) -> Any:
        """Per-request output → JSON-able response."""

    # ---- helpers ----------------------------------------------------------------------------
    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (threads, files). Most pipelines hold none."""


@dataclass(frozen=True)
class PipelineInfo:
    """What ``python -m latency models`` and the dashboard show about a pipeline."""

    name: str
    description: str
    model_args: tuple[ModelArg, ...] = field(default_factory=tuple)
    dtypes: tuple[str, ...] = ("float32",)
    #: where it comes from: ``sample``, ``model file``, ``entry point <dist>``, ``startup``,
    #: or the ``--pipeline`` spec
    origin: str = "sample"
