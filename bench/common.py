"""Shared bits of the benchmarks: a pipeline and its inputs."""
from __future__ import annotations

from typing import Any

import torch

from latency.pipelines.registry import build_pipeline, parse_model_args

REAL_MODELS = ("image-cnn", "text-transformer", "tabular-mlp")


def pipeline_and_batch(model: str, batch: int, seed: int = 0) -> tuple[Any, Any, list[Any]]:
    """A CPU float32 pipeline, one collated batch of its preprocessed inputs, and the raw ones."""
    p = build_pipeline(model, torch.device("cpu"), torch.float32, parse_model_args(model, {}))
    raw = p.sample_inputs(max(batch, 8), seed)
    with torch.inference_mode():
        items = [p.preprocess(r) for r in raw[:batch]]
    return p, items, raw
