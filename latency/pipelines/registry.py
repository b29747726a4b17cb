"""Which pipelines exist, and how a name plus ``--model-arg`` strings become a Pipeline.

Pipelines are imported lazily by dotted path, so ``python -m latency models`` stays fast and a
broken sample model cannot stop the others from loading.
"""
from __future__ import annotations

import importlib
from typing import Any

import torch

from latency.core.errors import PipelineError
from latency.pipelines.contract import ModelArg, Pipeline, PipelineInfo

PIPELINES: dict[str, str] = {
    "image-cnn": "sample_models.image_cnn:ImageCNNPipeline",
    "text-transformer": "sample_models.text_transformer:TextTransformerPipeline",
    "tabular-mlp": "sample_models.tabular_mlp:TabularMLPPipeline",
    "synthetic": "sample_models.synthetic:SyntheticPipeline",
}


def pipeline_class(name: str) -> type[Pipeline]:
    """The Pipeline subclass registered under ``name``."""
    if name not in PIPELINES:
        raise PipelineError(f"unknown model {name!r}; choose one of: {', '.join(PIPELINES)}")
    module, _, attr = PIPELINES[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def list_pipelines() -> list[PipelineInfo]:
    """Name, one-line description, model args and dtypes of every registered pipeline."""
    infos = []
    for name in PIPELINES:
        cls = pipeline_class(name)
        infos.append(PipelineInfo(cls.name, cls.description, tuple(cls.model_args),
                                  tuple(cls.dtypes)))
    return infos


def parse_model_args(name: str, pairs: list[str] | dict[str, Any] | None) -> dict[str, Any]:
    """``["forward_ms=8", ...]`` (or a dict) → typed, validated dict, with defaults filled in."""
    spec: dict[str, ModelArg] = {a.name: a for a in pipeline_class(name).model_args}
    raw: dict[str, Any] = {}
    if isinstance(pairs, dict):
        raw = dict(pairs)
    else:
        for pair in pairs or []:
            key, sep, value = pair.partition("=")
            key = key.strip()
            if not sep or not key:
                raise PipelineError(f"malformed --model-arg {pair!r}: expected key=value")
            raw[key] = value.strip()
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in spec:
            known = ", ".join(spec) or "none"
            raise PipelineError(f"model {name!r} has no model-arg {key!r} (known: {known})")
        arg = spec[key]
        try:
            typed = arg.type(value) if isinstance(value, str) else arg.type(value)
        except (TypeError, ValueError):
            raise PipelineError(f"model-arg {key}={value!r} is not a valid "
                                f"{arg.type.__name__}") from None
        if arg.choices is not None and typed not in arg.choices:
            raise PipelineError(f"model-arg {key}={typed!r} must be one of "
                                f"{', '.join(map(str, arg.choices))}")
        out[key] = typed
    for key, arg in spec.items():
        out.setdefault(key, arg.default)
    return out


def build_pipeline(name: str, device: torch.device, dtype: torch.dtype,
                   model_args: dict[str, Any]) -> Pipeline:
    """Instantiate a pipeline; any construction error becomes a one-line PipelineError."""
    cls = pipeline_class(name)
    try:
        return cls(device, dtype, **model_args)
    except PipelineError:
        raise
    except (ValueError, RuntimeError, OSError) as exc:
        raise PipelineError(f"{name}: {exc}") from exc
