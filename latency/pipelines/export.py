"""``python -m latency export``: a pipeline's torch model as an ONNX or ``torch.export`` file.

So that ``--model-file`` is testable and demonstrable offline, and so that "PyTorch eager vs
ONNX Runtime" can be measured on the same model: the exported file comes with a ``.json``
beside it naming the pipeline it came from and its stock pre/postprocessing settings, so
``--model-file cnn.onnx`` serves exactly what ``--model image-cnn`` does, with only the runtime
changed. The batch dimension is dynamic (any batch size from 1 to 4096).
"""
from __future__ import annotations

import contextlib
import io
import json
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from latency.core.errors import PipelineError
from latency.pipelines.model_file import FORMATS
from latency.pipelines.registry import parse_model_args, source

MAX_BATCH_DIM = 4096


def _settings(name: str, pipeline: Any) -> dict[str, Any]:
    """Stock pre/post settings equal to the pipeline's own, where a stock stage exists."""
    meta = getattr(pipeline, "meta", {}) or {}
    out: dict[str, Any] = {"sample": name, "post": "topk"}
    if "labels" in meta:
        out["labels"] = list(meta["labels"])
    if {"crop", "resize", "mean", "std"} <= set(meta):
        out.update(pre="image", image_size=int(meta["crop"]), resize=int(meta["resize"]),
                   mean=list(meta["mean"]), std=list(meta["std"]))
    elif "vocab" in meta:
        out.update(pre="text", vocab=list(meta["vocab"]), max_len=int(meta["max_len"]))
    return out


def export(name: str, to: str | Path, spec: str | None = None) -> dict[str, Any]:
    """Export pipeline ``name``'s ``model`` to ``to`` (.onnx or .pt2), with ``to``.json beside
    it; returns what was written (paths, seconds, the example batch's shapes)."""
    path = Path(to)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise PipelineError(f"--to {to}: give a .onnx or .pt2 file name")
    if not path.parent.is_dir():
        raise PipelineError(f"--to {to}: no directory {path.parent}")
    src = source(name, spec)
    pipeline = src.build(torch.device("cpu"), torch.float32, parse_model_args(src, {}))
    model = getattr(pipeline, "model", None)
    if not isinstance(model, torch.nn.Module):
        raise PipelineError(f"{src.name} has no torch model in self.model to export")
    model.eval()
    raws = pipeline.sample_inputs(4, 1)
    batch = pipeline.collate([pipeline.preprocess(r) for r in raws])
    args = tuple(batch) if isinstance(batch, (tuple, list)) else (batch,)
    dim = torch.export.Dim("batch", min=1, max=MAX_BATCH_DIM)
    shapes = tuple({0: dim} for _ in args)
    t = time.perf_counter()
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet), warnings.catch_warnings(), \
            torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")  # the exporter's notes on its own internals
        if suffix == ".onnx":
            try:
                program = torch.onnx.export(model, args, dynamo=True, dynamic_shapes=shapes,
                                            verbose=False)
            except ImportError as exc:
                raise PipelineError(f"exporting to ONNX needs onnx and onnxscript: pip install "
                                    f"-r requirements-onnx.txt ({exc})") from None
            program.save(str(path))
        else:
            torch.export.save(torch.export.export(model, args, dynamic_shapes=shapes),
                              str(path))
    seconds = time.perf_counter() - t
    settings = _settings(src.name, pipeline)
    if src.origin != "sample":
        settings["spec"] = src.spec  # how the model file finds the pipeline's own stages
    Path(f"{path}.json").write_text(json.dumps(settings, indent=1) + "\n")
    return {"file": str(path), "settings": f"{path}.json", "seconds": seconds,
            "inputs": [list(a.shape) for a in args], "pipeline": src.name}
