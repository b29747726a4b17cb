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
  generated ones, and many pipelines have nothing sensible to generate. It may return any
  finite iterable (a list, a generator): the engine gets a list of at most ``MAX_INPUTS``, and
  one that is empty, not iterable, a single ``str``/``bytes`` or endless fails the run in one
  line before the first request is sent.
- A ``ModelArg`` may declare its range (``low``/``high``): a value outside it is refused before
  anything runs, in one line that names the arg, its value and the range.
"""
from __future__ import annotations

import abc
import functools
import inspect
import itertools
import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from latency.core.errors import PipelineError, error_text
from latency.host.devices import DTYPES
from latency.pipelines.inputs import MAX_INPUTS

__all__ = ["ModelArg", "Pipeline", "PipelineError", "PipelineInfo", "checked_inputs",
           "first_line", "parse_bool"]


#: ``TypeName: first line of the message`` (or the type name alone): ``core.errors``' rule
first_line = error_text


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
    ``low``/``high``: the range a number must lie in (inclusive; ``None``: unbounded on that
    side). The default is always allowed, so ``0`` can mean "not set" beside ``low=1``.
    """

    name: str
    type: Callable[[str], Any]
    default: Any
    help: str = ""
    choices: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None

    @property
    def bounded(self) -> bool:
        return self.low is not None or self.high is not None

    def range_text(self) -> str:
        """``from 1 to 4,096`` / ``at least 0`` / ``at most 5`` ('' when unbounded)."""
        lo, hi = (None if v is None else _number(v) for v in (self.low, self.high))
        if lo is not None and hi is not None:
            return f"from {lo} to {hi}"
        return f"at least {lo}" if lo is not None else f"at most {hi}" if hi is not None else ""

    def check(self, value: Any, where: str = "model-arg") -> None:
        """ValueError (one line naming the arg, its value and the range) unless ``value`` is
        within ``low``..``high``, is the default, or the arg declares no range."""
        if not self.bounded or _same(value, self.default):
            return
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError(f"{where} {self.name}={value!r} must be a number "
                             f"{self.range_text()}")
        finite = isinstance(value, numbers.Integral) or math.isfinite(value)
        if not finite or not _within(value, self.low, self.high):
            default = (f" (or {_number(self.default)}, the default)"
                       if isinstance(self.default, numbers.Real) and not
                       _within(self.default, self.low, self.high) else "")
            raise ValueError(f"{where} {self.name}={_shown(value)} is out of range: it must "
                             f"be {self.range_text()}{default}")


def _same(value: Any, default: Any) -> bool:
    if isinstance(value, bool) != isinstance(default, bool):
        return False  # True is not 1 here
    try:
        return bool(value == default)
    except Exception:  # noqa: BLE001 - an odd value that cannot compare: not the default
        return False


def _within(value: Any, low: float | None, high: float | None) -> bool:
    return (low is None or value >= low) and (high is None or value <= high)


def _shown(value: Any) -> str:
    """A value as the user wrote it (-5, 1e+12 as 1000000000000.0), a huge int by its size."""
    if isinstance(value, numbers.Integral):
        n = int(value)
        return str(n) if abs(n) < 10 ** 30 else f"<an integer of {n.bit_length()} bits>"
    return repr(float(value))


def _number(value: Any) -> str:
    """A bound as text: 1 → '1', 10000000 (or 1e7) → '10,000,000', 0.5 → '0.5'."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return _shown(value) if abs(int(value)) >= 10 ** 30 else f"{int(value):,}"
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        return repr(value)
    return f"{int(v):,}" if v.is_integer() and abs(v) < 1e15 else f"{v:g}"


def check_ranges(declared: Iterable[ModelArg], args: Mapping[str, Any]) -> None:
    """Each declared arg with a range, given in ``args``, lies in it (ValueError otherwise)."""
    for arg in declared:
        if isinstance(arg, ModelArg) and arg.name in args:
            arg.check(args[arg.name])


def checked_inputs(raws: Any, who: str = "sample_inputs") -> list[Any]:
    """What ``sample_inputs`` returned, as a list: any finite iterable of at most
    ``MAX_INPUTS`` items; PipelineError (one line) for one that is empty, not iterable, a
    single ``str``/``bytes``/mapping (one input, not a list of them) or longer than that."""
    if isinstance(raws, list):
        items = raws
    else:
        if isinstance(raws, (str, bytes, bytearray, memoryview, Mapping)) or raws is None:
            raise PipelineError(f"{who} returned {type(raws).__name__}, not a list of inputs")
        try:
            iterator = iter(raws)
        except TypeError:
            raise PipelineError(f"{who} returned {type(raws).__name__}, which is not "
                                "iterable: return a list of inputs") from None
        try:
            items = list(itertools.islice(iterator, MAX_INPUTS + 1))
        except PipelineError:
            raise
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - the user's generator: its first line
            raise PipelineError(f"{who} raised {first_line(exc)}") from exc
    if not items:
        raise PipelineError(f"{who} returned no inputs")
    if len(items) > MAX_INPUTS:
        raise PipelineError(f"{who} returned more than {MAX_INPUTS:,} inputs (the most a run "
                            "cycles through)")
    return items


def _checked_sample_inputs(method: Callable[..., Any], owner: str) -> Callable[..., Any]:
    """``method`` (a subclass's ``sample_inputs``) returning a checked list, and any error of
    the user's code (``sys.exit()`` too) a one-line PipelineError; Ctrl-C stays Ctrl-C."""
    @functools.wraps(method)
    def sample_inputs(self: Any, *args: Any, **kwargs: Any) -> list[Any]:
        who = f"{owner}.sample_inputs"
        try:
            raws = method(self, *args, **kwargs)
        except (PipelineError, KeyboardInterrupt):
            raise
        except BaseException as exc:  # noqa: BLE001 - the user's code: its first line
            raise PipelineError(f"{who} raised {first_line(exc)}") from exc
        return checked_inputs(raws, who)

    sample_inputs.__latency_checked__ = True  # type: ignore[attr-defined]
    return sample_inputs


class Pipeline(abc.ABC):
    """A serving pipeline; subclasses set ``name``, ``description`` and, optionally,
    ``model_args`` and ``dtypes``, and implement the stages (see the module docstring)."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    model_args: ClassVar[tuple[ModelArg, ...]] = ()
    #: dtypes this pipeline can run in (the device may narrow the list further).
    dtypes: ClassVar[tuple[str, ...]] = ("float32", "bfloat16", "float16")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        method = cls.__dict__.get("sample_inputs")  # a plain method (not a static one) of
        # its own (``sample_inputs = Pipeline.sample_inputs`` says it has none)
        if inspect.isfunction(method) and method is not Pipeline.__dict__["sample_inputs"] \
                and not getattr(method, "__latency_checked__", False):
            cls.sample_inputs = _checked_sample_inputs(  # type: ignore[method-assign]
                method, cls.__name__)

    @classmethod
    def check_args(cls, args: dict[str, Any]) -> None:
        """Reject impossible model-arg values (raise ValueError with one line) before anything
        runs; types and choices are already checked against ``model_args``. This one checks
        the declared ranges (``ModelArg.low``/``high``): an override should call it too."""
        check_ranges(cls.model_args, args)

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
    #: a generative pipeline (streamed tokens: ``latency.pipelines.generative``), run as a
    #: generation rather than one request at a time
    generative: bool = False
