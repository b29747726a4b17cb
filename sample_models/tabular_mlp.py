"""tabular-mlp: a JSON loan record → validated, one-hot, scaled features → MLP → default risk.

Why this pipeline: the model is tiny, so the per-request work (JSON parsing, validation, feature
building, the host→device copy) dominates. It is the case where batching the forward pass
barely helps and the time goes in framework and Python overhead.
"""
from __future__ import annotations

import json
import math
from typing import Any

import torch
from torch import nn

from sample_models import data
from sample_models._common import TrainedPipeline


def featurize(raw: str | bytes, numeric: dict[str, dict[str, Any]],
              categorical: dict[str, list[str]]) -> list[float]:
    """JSON record → feature list: scaled numerics, then one-hot categoricals.

    ``numeric`` maps field → {"mean", "std", "log"}: money fields are log1p'd before scaling
    because they are heavy-tailed. An unknown category one-hots to all zeros (the model then
    sees "none of the known ones"), but a missing or mistyped field raises ``ValueError``:
    guessing a value would return a confident answer to a question nobody asked.
    """
    try:
        record = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"record is not valid JSON: {e}") from e
    if not isinstance(record, dict):
        raise ValueError(f"record must be a JSON object, got {type(record).__name__}")
    missing = [f for f in (*numeric, *categorical) if f not in record]
    if missing:
        raise ValueError(f"record is missing field(s): {', '.join(missing)}")

    features: list[float] = []
    for field, stats in numeric.items():
        v = record[field]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"field {field!r} must be a finite number, got {v!r}")
        if stats["log"]:
            if v < 0:
                raise ValueError(f"field {field!r} must be >= 0, got {v!r}")
            v = math.log1p(v)
        features.append((v - stats["mean"]) / stats["std"])
    for field, categories in categorical.items():
        v = record[field]
        if not isinstance(v, str):
            raise ValueError(f"field {field!r} must be a string, got {v!r}")
        features.extend(1.0 if v == c else 0.0 for c in categories)
    return features


class LoanMLP(nn.Sequential):
    """Features → two ReLU hidden layers → one logit per label."""

    def __init__(self, n_in: int, n_classes: int, hidden: int = 64) -> None:
        super().__init__(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                         nn.ReLU(), nn.Linear(hidden, n_classes))


class TabularMLPPipeline(TrainedPipeline):
    """Predicts loan default from one JSON record; responses carry label and its probability."""

    name = "tabular-mlp"
    description = ("MLP scoring loan-default risk from a JSON record (parse, validate, one-hot, "
                   "scale; softmax)")
    dtypes = ("float32", "bfloat16", "float16")
    #: which optimisation levers fit (latency.pipelines.levers): "cnn" allows channels_last too.
    model_kind = "mlp"

    def build_model(self, meta: dict[str, Any]) -> nn.Module:
        n_in = len(meta["numeric"]) + sum(len(c) for c in meta["categorical"].values())
        return LoanMLP(n_in, len(meta["labels"]), int(meta["hidden"]))

    def __init__(self, device: torch.device, dtype: torch.dtype, **args: Any) -> None:
        super().__init__(device, dtype, **args)
        self.numeric: dict[str, dict[str, Any]] = self.meta["numeric"]
        self.categorical: dict[str, list[str]] = self.meta["categorical"]

    def sample_inputs(self, n: int, seed: int) -> list[str]:
        """JSON records from the held-out stream (never used in training)."""
        return [record for record, _ in data.loan_samples(n, seed, split="heldout")]

    def preprocess(self, raw: str | bytes) -> torch.Tensor:
        x = torch.tensor(featurize(raw, self.numeric, self.categorical), dtype=torch.float32)
        return x.to(self.device, self.dtype)

    def preprocess_naive(self, raw: str | bytes) -> torch.Tensor:
        """The beginner's preprocess (``--pre naive``): the same features through pandas.

        Builds a one-row DataFrame per request, reads each cell back with ``.iloc``, one-hots
        with ``get_dummies`` over a categorical column and goes through float64 NumPy on the
        way to the tensor: the data-science notebook code moved into a server unchanged.
        """
        import numpy as np
        import pandas as pd

        try:
            record = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"record is not valid JSON: {e}") from e
        if not isinstance(record, dict):
            raise ValueError(f"record must be a JSON object, got {type(record).__name__}")
        frame = pd.DataFrame([record])
        missing = [f for f in (*self.numeric, *self.categorical) if f not in frame.columns]
        if missing:
            raise ValueError(f"record is missing field(s): {', '.join(missing)}")
        features: list[float] = []
        for field, stats in self.numeric.items():
            v = float(frame[field].astype("float64").iloc[0])
            if not math.isfinite(v) or (stats["log"] and v < 0):
                raise ValueError(f"field {field!r} has an invalid value {v!r}")
            v = math.log1p(v) if stats["log"] else v
            features.append((v - stats["mean"]) / stats["std"])
        for field, categories in self.categorical.items():
            column = frame[field].astype(pd.CategoricalDtype(categories))
            dummies = pd.get_dummies(column).reindex(columns=categories, fill_value=False)
            features.extend(dummies.iloc[0].astype("float64").tolist())
        x = torch.from_numpy(np.array(features, dtype=np.float64))
        return x.float().to(self.device, self.dtype)

    @torch.inference_mode()
    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        return self.model(batch)

    def postprocess(self, item: torch.Tensor) -> dict[str, Any]:
        """``probability`` is that of the returned label (so always >= 0.5 with two labels)."""
        probs = torch.softmax(item.float().cpu(), dim=0)
        p, idx = probs.max(0)
        return {"label": self.labels[int(idx)], "probability": float(p)}
