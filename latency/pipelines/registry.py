"""Which pipelines exist, and how a name (or a spec) plus ``--model-arg`` strings become one.

A pipeline comes from one of four places, all listed by ``python -m latency models`` and the
dashboard alike:

- the **samples** shipped in ``sample_models`` (and ``model-file``: an ONNX or ``torch.export``
  file with stock pre/postprocessing), by name;
- **entry points** of installed packages, group ``latency_lab.pipelines``
  (``name = "mypkg.serving:SentimentPipeline"``), by name;
- **startup** specs in ``$LATENCY_LAB_PIPELINES`` (comma-separated), by the pipeline's name —
  how a shared dashboard learns of a pipeline without ever taking code from a browser;
- a **spec** given to one run: ``--pipeline module.path:Name`` or ``--pipeline
  path/to/file.py:Name``.

``Name`` is a ``Pipeline`` subclass or a factory (any callable) returning a Pipeline. A class
declares its ``model_args``; a factory's keyword parameters with defaults are its model-args
(typed by their annotation or default). Everything is imported lazily, so ``models`` stays
fast and a broken pipeline cannot stop the others from loading: its line says why.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from latency.core.errors import PipelineError
from latency.pipelines.contract import ModelArg, Pipeline, PipelineInfo, first_line, parse_bool

SAMPLES: dict[str, str] = {
    "image-cnn": "sample_models.image_cnn:ImageCNNPipeline",
    "text-transformer": "sample_models.text_transformer:TextTransformerPipeline",
    "tabular-mlp": "sample_models.tabular_mlp:TabularMLPPipeline",
    "synthetic": "sample_models.synthetic:SyntheticPipeline",
    "synthetic-lm": "sample_models.synthetic_lm:SyntheticLMPipeline",
    "tiny-lm": "sample_models.tiny_lm:TinyLMPipeline",
    "model-file": "latency.pipelines.model_file:ModelFilePipeline",
}
ENTRY_POINT_GROUP = "latency_lab.pipelines"
STARTUP_ENV = "LATENCY_LAB_PIPELINES"
#: parameters of a factory that are not model-args: the engine passes them itself
FACTORY_RESERVED = ("device", "dtype")
SIMPLE_TYPES: dict[Any, Callable[[str], Any]] = {int: int, float: float, str: str,
                                                  bool: parse_bool, "int": int,
                                                  "float": float, "str": str,
                                                  "bool": parse_bool}


@dataclass(frozen=True)
class PipelineSource:
    """How to build one pipeline, and what it declares before it is built."""

    name: str
    target: Any  # a Pipeline subclass or a factory
    #: what a run process needs to find it again: "module:attr" or "/abs/file.py:attr"
    spec: str
    origin: str = "sample"

    @property
    def cls(self) -> type[Pipeline] | None:
        """The Pipeline subclass (None for a factory: its class is known once built)."""
        t = self.target
        return t if isinstance(t, type) and issubclass(t, Pipeline) else None

    @property
    def description(self) -> str:
        cls = self.cls
        if cls is not None:
            return cls.description or (cls.__doc__ or "").strip().split("\n")[0]
        return (inspect.getdoc(self.target) or "").split("\n")[0] or f"factory {self.spec}"

    @property
    def model_args(self) -> tuple[ModelArg, ...]:
        cls = self.cls
        return tuple(cls.model_args) if cls is not None else factory_args(self.target)

    @property
    def dtypes(self) -> tuple[str, ...]:
        cls = self.cls
        return tuple(cls.dtypes) if cls is not None else ("float32", "bfloat16", "float16")

    def info(self) -> PipelineInfo:
        cls = self.cls
        return PipelineInfo(self.name, self.description, self.model_args, self.dtypes,
                            self.origin, bool(getattr(cls, "generative", False)))

    def check_args(self, args: dict[str, Any]) -> None:
        """The class's ``check_args``: a ValueError or PipelineError is its one line; anything
        else it raises (a TypeError, ``sys.exit()``) becomes a one-line PipelineError that says
        so, never a traceback. Ctrl-C stays Ctrl-C."""
        cls = self.cls
        if cls is None:
            return
        try:
            cls.check_args(args)
        except PipelineError:
            raise
        except ValueError as exc:
            text = str(exc).strip()
            if not text or "\n" in text:  # one line, always
                raise ValueError(f"{cls.__name__}.check_args refused the model-args: "
                                 f"{first_line(exc)}") from exc
            raise
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - the user's check, even sys.exit()
            raise PipelineError(f"{cls.__name__}.check_args raised {first_line(exc)}") \
                from exc

    def build(self, device: torch.device, dtype: torch.dtype, args: dict[str, Any]
              ) -> Pipeline:
        """Instantiate; any construction error becomes a one-line PipelineError."""
        try:
            if self.cls is not None:
                pipeline = self.cls(device, dtype, **args)
            else:
                params = inspect.signature(self.target).parameters
                extra = {k: v for k, v in (("device", device), ("dtype", dtype))
                         if k in params or _takes_kwargs(params)}
                pipeline = self.target(**extra, **args)
        except PipelineError:
            raise
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's constructor, even
            # one that calls sys.exit(): a failed run that says so, never a silent exit 0
            raise PipelineError(f"{self.name}: building the pipeline failed: "
                                f"{first_line(exc)}") from exc
        if not isinstance(pipeline, Pipeline):
            raise PipelineError(f"{self.spec} returned {type(pipeline).__name__}, not a "
                                "latency.Pipeline")
        return pipeline


def _takes_kwargs(params: Any) -> bool:
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def factory_args(factory: Callable[..., Any]) -> tuple[ModelArg, ...]:
    """A factory's model-args: its keyword parameters with defaults (not device/dtype)."""
    out = []
    for p in inspect.signature(factory).parameters.values():
        if p.name in FACTORY_RESERVED or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        if p.default is p.empty:
            raise PipelineError(f"factory {factory.__name__}: parameter {p.name!r} needs a "
                                "default (model-args are optional on the command line)")
        kind = p.annotation if p.annotation is not p.empty else type(p.default)
        out.append(ModelArg(p.name, SIMPLE_TYPES.get(kind, str), p.default,
                            f"{getattr(kind, '__name__', kind)} (factory parameter)"))
    return tuple(out)


# ---- finding pipelines ---------------------------------------------------------------------
def _import_file(path: Path) -> Any:
    """Import a ``.py`` file as a module of its own (a stable name per path, so importing it
    twice gives the same module and pickled objects find their class)."""
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    name = f"latency_user_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PipelineError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:  # Ctrl-C while it imports: the user stops, nothing failed
        del sys.modules[name]
        raise
    except BaseException as exc:
        del sys.modules[name]
        raise PipelineError(f"importing {path} failed: {first_line(exc)}") from None
    return module


def load_spec(spec: str, origin: str | None = None) -> PipelineSource:
    """``module.path:Name`` or ``path/to/file.py:Name`` → its PipelineSource (file paths are
    made absolute, so a run process started elsewhere finds the same file)."""
    where, sep, attr = str(spec).rpartition(":")
    if not sep or not where or not attr:
        raise PipelineError(f"--pipeline {spec!r}: expected module.path:Name or "
                            "path/to/file.py:Name")
    is_file = where.endswith(".py") or os.sep in where or "/" in where
    if is_file:
        path = Path(where).expanduser().resolve()
        if not path.is_file():
            raise PipelineError(f"--pipeline {spec!r}: no such file {path}")
        module = _import_file(path)
        spec = f"{path}:{attr}"
    else:
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as exc:
            if exc.name and where.startswith(exc.name):
                raise PipelineError(f"--pipeline {spec!r}: no module named {exc.name!r}") \
                    from None
            raise PipelineError(f"importing {where} failed: {first_line(exc)}") from None
        except KeyboardInterrupt:  # Ctrl-C while it imports: the user stops, nothing failed
            raise
        except BaseException as exc:  # noqa: BLE001 - the user's module: its first line
            raise PipelineError(f"importing {where} failed: {first_line(exc)}") from None
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise PipelineError(f"--pipeline {spec!r}: {where} has no {attr!r}")
        target = getattr(target, part)
    if isinstance(target, type):
        if not issubclass(target, Pipeline):
            raise PipelineError(f"--pipeline {spec!r}: {attr} is a class but not a "
                                "latency.Pipeline subclass")
        if inspect.isabstract(target):
            missing = ", ".join(sorted(target.__abstractmethods__))
            raise PipelineError(f"--pipeline {spec!r}: {attr} does not implement {missing}")
        name = getattr(target, "name", None) or attr
    elif callable(target):
        name = getattr(target, "pipeline_name", None) or attr
        factory_args(target)  # a parameter without a default fails here, in one line
    else:
        raise PipelineError(f"--pipeline {spec!r}: {attr} is neither a Pipeline subclass nor "
                            "a factory returning one")
    return PipelineSource(str(name), target, spec, origin or "--pipeline")


def _sample(name: str) -> PipelineSource:
    module, _, attr = SAMPLES[name].partition(":")
    cls = getattr(importlib.import_module(module), attr)
    return PipelineSource(name, cls, SAMPLES[name],
                          "model file" if name == "model-file" else "sample")


def _entry_point(name: str, spec: str) -> PipelineSource:
    """The entry point ``name`` = ``spec``, named by its entry point (not its class)."""
    return replace(load_spec(spec, origin=f"entry point {name}"), name=name)


def entry_points() -> dict[str, str]:
    """name → spec of every installed entry point in ``latency_lab.pipelines``."""
    return {ep.name: ep.value
            for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def startup_specs() -> list[str]:
    """The specs named in ``$LATENCY_LAB_PIPELINES`` (comma-separated)."""
    return [s.strip() for s in os.environ.get(STARTUP_ENV, "").split(",") if s.strip()]


def names() -> list[str]:
    """Every pipeline name known without importing anything heavy: samples and entry points
    (startup specs are named by their class, so they are imported)."""
    return list(SAMPLES) + [n for n in entry_points() if n not in SAMPLES]


def source(model: str, spec: str | None = None) -> PipelineSource:
    """The pipeline a run asks for: its ``--pipeline`` spec, else its name."""
    if spec:
        return load_spec(spec)
    if model in SAMPLES:
        return _sample(model)
    eps = entry_points()
    if model in eps:
        return _entry_point(model, eps[model])
    for s in startup_specs():
        try:
            src = load_spec(s, origin="startup")
        except PipelineError:
            continue
        if src.name == model:
            return src
    known = ", ".join(names() + [s for s in startup_specs()])
    raise PipelineError(f"unknown model {model!r}; choose one of: {known} (or --pipeline "
                        "module:Name / file.py:Name)")


def sources() -> list[tuple[str, PipelineSource | None, str | None]]:
    """Every known pipeline as (name, source or None, why it cannot load or None)."""
    out: list[tuple[str, PipelineSource | None, str | None]] = []
    for name in SAMPLES:
        try:
            out.append((name, _sample(name), None))
        except Exception as exc:  # noqa: BLE001 - list it, with the reason
            out.append((name, None, first_line(exc)))
    for name, spec in entry_points().items():
        if name in SAMPLES:
            continue
        try:
            out.append((name, _entry_point(name, spec), None))
        except PipelineError as exc:
            out.append((name, None, str(exc)))
    for spec in startup_specs():
        try:
            src = load_spec(spec, origin="startup")
            out.append((src.name, src, None))
        except PipelineError as exc:
            out.append((spec, None, str(exc)))
    return out


# ---- the old interface, by name ------------------------------------------------------------
def pipeline_class(name: str, spec: str | None = None) -> type[Pipeline] | None:
    """The Pipeline subclass of ``name`` (None when it is a factory)."""
    return source(name, spec).cls


def list_pipelines() -> list[PipelineInfo]:
    """Name, one-line description, model args and dtypes of every pipeline that loads."""
    return [src.info() for _, src, _ in sources() if src is not None]


def split_model_args(pairs: list[str] | dict[str, Any] | None) -> dict[str, Any]:
    """``["forward_ms=8", ...]`` → ``{"forward_ms": "8"}``, untyped (a dict as it is):
    what can be checked without the pipeline's code."""
    if isinstance(pairs, dict):
        return dict(pairs)
    raw: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise PipelineError(f"malformed --model-arg {pair!r}: expected key=value")
        raw[key] = value.strip()
    return raw


def parse_model_args(name: str | PipelineSource, pairs: list[str] | dict[str, Any] | None,
                     spec: str | None = None) -> dict[str, Any]:
    """``["forward_ms=8", ...]`` (or a dict) → typed, validated dict, with defaults filled in."""
    src = name if isinstance(name, PipelineSource) else source(name, spec)
    declared = _declared(src)
    raw = split_model_args(pairs)
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in declared:
            known = ", ".join(declared) or "none"
            raise PipelineError(f"model {src.name!r} has no model-arg {key!r} (known: {known})")
        arg = declared[key]
        typed = _typed(src, arg, value)
        if isinstance(typed, float) and not math.isfinite(typed):
            raise PipelineError(f"model-arg {key}={value!r} must be a finite number")
        if arg.choices is not None and typed not in arg.choices:
            raise PipelineError(f"model-arg {key}={typed!r} must be one of "
                                f"{', '.join(map(str, arg.choices))}")
        try:
            arg.check(typed)
        except ValueError as exc:
            raise PipelineError(str(exc)) from None
        out[key] = typed
    for key, arg in declared.items():
        out.setdefault(key, arg.default)
    return out


def _declared(src: PipelineSource) -> dict[str, ModelArg]:
    """name → ModelArg of what ``src`` declares; PipelineError (one line) for a declaration
    that is not a tuple of ``latency.ModelArg``."""
    try:
        args = src.model_args
        bad = [a for a in args if not isinstance(a, ModelArg)]
    except PipelineError:
        raise
    except Exception as exc:  # noqa: BLE001 - e.g. model_args = 3
        raise PipelineError(f"{src.name}: model_args must be a tuple of latency.ModelArg "
                            f"({first_line(exc)})") from None
    if bad:
        raise PipelineError(f"{src.name}: model_args must be a tuple of latency.ModelArg, "
                            f"not {type(bad[0]).__name__}")
    return {a.name: a for a in args}


def _typed(src: PipelineSource, arg: ModelArg, value: Any) -> Any:
    """``arg.type(value)``: a ValueError or TypeError is "not a valid …"; anything else the
    converter raises (the user's code, ``sys.exit()`` too) a one-line PipelineError."""
    kind = getattr(arg.type, "__name__", "value")
    try:
        return arg.type(value)
    except PipelineError:
        raise
    except (TypeError, ValueError, OverflowError):
        raise PipelineError(f"model-arg {arg.name}={value!r} is not a valid {kind}") from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the user's converter, even sys.exit()
        raise PipelineError(f"model-arg {arg.name}={value!r}: {src.name}'s conversion "
                            f"({kind}) raised {first_line(exc)}") from None


def build_pipeline(name: str, device: torch.device, dtype: torch.dtype,
                   model_args: dict[str, Any], spec: str | None = None) -> Pipeline:
    """Instantiate a pipeline; any construction error becomes a one-line PipelineError."""
    return source(name, spec).build(device, dtype, model_args)
