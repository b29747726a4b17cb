"""Stock pre- and postprocessing for a model file with no Python class of its own.

Preprocessing (``--pre``), from the raw input a client sends to model-ready tensors:

- ``image``: encoded image bytes (JPEG, PNG…) → decode (Pillow) → RGB → shorter side to
  ``resize`` (bilinear) → centre crop ``image_size`` → float /255 → ``(x − mean) / std`` → CHW.
- ``text``: a string (or ``{"text": …}``) → lowercase word tokens → ids in ``vocab`` (unknown
  words → ``[UNK]``; ``[CLS]`` first when the vocabulary has it) → padded to ``max_len`` →
  ``(ids, mask)``, or ids alone for a model with one input.
- ``tensor``: numbers as JSON (a list, nested lists, or ``{"data": […]}``) → a float32 tensor.

Postprocessing (``--post``), from one row of the model's output to a JSON-able response:

- ``topk``: softmax, the ``top_k`` labels with their probabilities;
- ``argmax``: the top label (or index);
- ``raw``: the output values as a list.
"""
from __future__ import annotations

import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

PRE = ("image", "text", "tensor")
POST = ("topk", "argmax", "raw")
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


@dataclass
class ImagePre:
    image_size: int = 224
    resize: int = 256
    mean: Sequence[float] = (0.485, 0.456, 0.406)
    std: Sequence[float] = (0.229, 0.224, 0.225)

    def __post_init__(self) -> None:
        self._mean = torch.tensor(list(self.mean), dtype=torch.float32).view(3, 1, 1)
        self._std = torch.tensor(list(self.std), dtype=torch.float32).view(3, 1, 1)

    def __call__(self, raw: Any) -> torch.Tensor:
        from PIL import Image

        if not isinstance(raw, (bytes, bytearray)):
            raise TypeError(f"--pre image takes encoded image bytes, got {type(raw).__name__}")
        try:
            img = Image.open(io.BytesIO(raw))
            img.load()
        except (OSError, SyntaxError, Image.DecompressionBombError) as e:
            raise ValueError(f"cannot decode image ({len(raw)} bytes): {e}") from e
        img = img.convert("RGB")
        w, h = img.size
        scale = self.resize / min(w, h)
        nw, nh = max(self.resize, round(w * scale)), max(self.resize, round(h * scale))
        img = img.resize((nw, nh), Image.Resampling.BILINEAR)
        left, top = (nw - self.image_size) // 2, (nh - self.image_size) // 2
        crop = np.array(img.crop((left, top, left + self.image_size, top + self.image_size)))
        x = torch.from_numpy(crop).permute(2, 0, 1).float().div_(255)
        return (x - self._mean) / self._std


@dataclass
class TextPre:
    vocab: Sequence[str] = ()
    max_len: int = 128
    with_mask: bool = True
    index: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        if not self.vocab:
            raise ValueError("--pre text needs a vocabulary: --model-arg vocab=FILE (one token "
                             "a line) or the model file's .json")
        self.index = {w: i for i, w in enumerate(self.vocab)}
        self.unk = self.index.get("[UNK]", 1)
        self.cls = self.index.get("[CLS]")

    def __call__(self, raw: Any) -> Any:
        if isinstance(raw, dict) and "text" in raw:
            raw = raw["text"]
        if not isinstance(raw, str):
            raise TypeError(f"--pre text takes a string, got {type(raw).__name__}")
        tokens = _TOKEN.findall(raw.lower())
        ids = ([self.cls] if self.cls is not None else []) + [
            self.index.get(t, self.unk) for t in tokens]
        ids = ids[: self.max_len]
        padded = torch.zeros(self.max_len, dtype=torch.long)
        padded[: len(ids)] = torch.tensor(ids, dtype=torch.long)
        if not self.with_mask:
            return padded
        return padded, torch.arange(self.max_len) < len(ids)


def tensor_pre(raw: Any) -> torch.Tensor:
    """Numbers as JSON (or already parsed) → float32 tensor."""
    if isinstance(raw, (bytes, bytearray)):
        raw = raw.decode("utf-8")
    if isinstance(raw, str):
        raw = json.loads(raw)
    if isinstance(raw, dict):
        raw = raw.get("data", raw.get("inputs"))
    if raw is None:
        raise ValueError("--pre tensor takes numbers: a JSON list or {\"data\": [...]}")
    return torch.as_tensor(np.asarray(raw, dtype=np.float32))


@dataclass
class Post:
    kind: str = "topk"
    labels: Sequence[str] = ()
    top_k: int = 5

    def label(self, i: int) -> Any:
        return self.labels[i] if i < len(self.labels) else i

    def __call__(self, item: torch.Tensor) -> Any:
        if self.kind == "raw":
            return item.float().cpu().tolist()
        if self.kind == "argmax":
            return {"label": self.label(int(item.float().argmax()))}
        probs = torch.softmax(item.float().cpu().flatten(), dim=0)
        scores, idx = probs.topk(min(self.top_k, probs.numel()))
        top = [{"label": self.label(i), "score": float(s)}
               for s, i in zip(scores.tolist(), idx.tolist())]
        return {"label": top[0]["label"], "top": top}
