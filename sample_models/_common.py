"""Weight files and dtype checks shared by the three real sample pipelines.

Why one place: every pipeline loads ``weights/<name>.safetensors`` plus ``weights/<name>.json``
(labels, vocabulary, normalisation stats, model sizes) the same way, and ``train.py`` writes them
the same way, so the file layout is defined once.
"""
from __future__ import annotations

import abc
import json
import math
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from latency.core.errors import PipelineError
from latency.pipelines.contract import Pipeline

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"


def load_weights(name: str) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """(state dict on CPU, metadata) of a trained sample model; PipelineError if not trained."""
    tensors, meta = WEIGHTS_DIR / f"{name}.safetensors", WEIGHTS_DIR / f"{name}.json"
    if not tensors.exists() or not meta.exists():
        raise PipelineError(f"no trained weights for {name!r} in {WEIGHTS_DIR}; "
                            f"run: python -m sample_models.train --only {name}")
    return load_file(tensors), json.loads(meta.read_text())


def save_weights(name: str, model: torch.nn.Module, meta: dict[str, Any],
                 dtype: torch.dtype = torch.float32) -> Path:
    """Write ``model``'s state dict (floating tensors stored as ``dtype``: float16 halves a
    shipped file, and ``load_weights`` turns them into whatever dtype a run asks for) and
    ``meta``; returns the safetensors path."""
    WEIGHTS_DIR.mkdir(exist_ok=True)
    state = {k: v.detach().to(dtype).contiguous() if v.is_floating_point() else v.contiguous()
             for k, v in model.state_dict().items()}
    path = WEIGHTS_DIR / f"{name}.safetensors"
    save_file(state, path)
    (WEIGHTS_DIR / f"{name}.json").write_text(json.dumps(meta, indent=1) + "\n")
    return path


def check_dtype(cls: type, dtype: torch.dtype) -> None:
    """Refuse a dtype the pipeline does not list, with the list in the message."""
    if str(dtype).removeprefix("torch.") not in cls.dtypes:
        raise PipelineError(f"{cls.name} supports dtypes {', '.join(cls.dtypes)}, not {dtype}")


class TrainedPipeline(Pipeline):
    """A sample pipeline with trained weights: checks the dtype, loads the weights and their
    metadata, builds the model (``build_model``) and places it on the device, in eval mode."""

    def __init__(self, device: torch.device, dtype: torch.dtype, **args: Any) -> None:
        super().__init__(device, dtype, **args)
        check_dtype(type(self), dtype)
        state, self.meta = load_weights(self.name)
        self.labels: list[str] = self.meta["labels"]
        self.model = self.build_model(self.meta)
        self.model.load_state_dict(state)
        self.model.to(device=device, dtype=dtype).eval()

    @abc.abstractmethod
    def build_model(self, meta: dict[str, Any]) -> torch.nn.Module:
        """The untrained model, shaped as ``meta`` describes."""

    def postprocess_naive(self, item: torch.Tensor) -> dict[str, Any]:
        """The beginner's postprocess (``--post naive``): the same answer, the slow way.

        Reads the logits one tensor element at a time, computes the softmax of *every* class in
        Python, serialises all the scores to JSON and parses them back to pick the top label —
        each step a real habit from first serving code. Ties resolve as ``argmax`` does (first
        class wins), so the label always matches the fast postprocess.
        """
        logits = [float(item[i]) for i in range(item.shape[0])]
        top = max(logits)
        exps = [math.exp(v - top) for v in logits]
        total = sum(exps)
        scores = {self.labels[i]: exps[i] / total for i in range(len(exps))}
        text = json.dumps({"scores": scores})
        parsed = json.loads(text)["scores"]
        ranked = sorted(parsed.items(), key=lambda kv: -kv[1])
        return {"label": ranked[0][0], "scores": parsed}
