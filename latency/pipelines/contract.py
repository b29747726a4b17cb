"""The Pipeline protocol: raw input → preprocess → forward (batched) → postprocess → response.

Why a base class and not free functions: the engine times each stage from the *outside*, so a
pipeline only has to say what each stage does. The engine owns the clock, the batching and the
threads; a pipeline owns its model, its device placement and its raw-input generator.

Contract the engine relies on:
- ``preprocess`` runs on a server worker thread, once per request, and must leave the tensor on
  ``self.device`` (the host→device copy is part of preprocess).
- ``collate`` + ``forward`` run on a replica thread, once per batch. ``forward`` returns when the
  output exists; the engine synchronises CUDA itself before reading the clock.
- ``split`` turns the batched output into one item per request (cheap views, no copies needed).
- ``postprocess`` runs once per request on the replica thread and returns a JSON-able response.
- Any stage may raise: the engine turns that into an error for the affected request(s) only.
"""
from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from latency.core.errors import PipelineError

__all__ = ["ModelArg", "Pipeline", "PipelineError", "PipelineInfo"]


@dataclass(frozen=True)
class ModelArg:
    """One ``--model-arg key=value`` a pipeline accepts, with its type and default."""

    name: str
    type: Callable[[str], Any]
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None


class Pipeline(abc.ABC):
    """A real serving pipeline; subclasses set ``name``, ``description`` and ``model_args``."""

    name: ClassVar[str]
    description: ClassVar[str]
    model_args: ClassVar[tuple[ModelArg, ...]] = ()
    #: dtypes this pipeline can run in (the device may narrow the list further).
    dtypes: ClassVar[tuple[str, ...]] = ("float32", "bfloat16", "float16")

    @classmethod  # noqa: B027 - an optional hook, empty by default
    def check_args(cls, args: dict[str, Any]) -> None:
        """Reject impossible model-arg values (raise ValueError with one line) before anything
        runs; types and choices are already checked against ``model_args``."""

    def __init__(self, device: torch.device, dtype: torch.dtype, **args: Any) -> None:
        self.device = device
        self.dtype = dtype
        self.args = args

    # ---- inputs -------------------------------------------------------------------------
    @abc.abstractmethod
    def sample_inputs(self, n: int, seed: int) -> list[Any]:
        """``n`` raw inputs (bytes, str, JSON text...) as a client would send them."""

    # ---- stages ---------------------------------------------------------------------------
    @abc.abstractmethod
    def preprocess(self, raw: Any) -> Any:
        """Raw input → model-ready item on ``self.device``."""

    def collate(self, items: Sequence[Any]) -> Any:
        """Items → one batch. Default: stack tensors along a new batch dimension."""
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
