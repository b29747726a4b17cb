"""text-transformer: text → regex tokens → vocabulary ids → Transformer encoder → topic.

Why this pipeline: text serving has a cheap preprocess (a regex and a dict lookup) and a forward
pass whose cost is set by the padded length, not the text: every request is padded to
``max_len`` so batches stack, and a 3-word text costs the model what a 150-word text does.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from sample_models import data
from sample_models._common import TrainedPipeline

PAD, UNK, CLS = "[PAD]", "[UNK]", "[CLS]"
SPECIALS = (PAD, UNK, CLS)  # ids 0, 1, 2 in every vocabulary
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def tokenize(text: str) -> list[str]:
    """Lowercase words and numbers (apostrophes kept inside words); punctuation is dropped."""
    return _TOKEN.findall(text.lower())


_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyz")
_ALNUM = _LETTERS | frozenset("0123456789")


def tokenize_naive(text: str) -> list[str]:
    """``tokenize`` written as a character loop, the way a beginner would: the same tokens
    (lowercase runs of letters and digits, an apostrophe kept when letters follow it)."""
    t = text.lower()
    tokens: list[str] = []
    i, n = 0, len(t)
    while i < n:
        if t[i] not in _ALNUM:
            i += 1
            continue
        j = i
        while j < n and t[j] in _ALNUM:
            j += 1
        if j + 1 < n and t[j] == "'" and t[j + 1] in _LETTERS:
            j += 1
            while j < n and t[j] in _LETTERS:
                j += 1
        tokens.append(t[i:j])
        i = j
    return tokens


def encode(text: str, index: dict[str, int], max_len: int) -> tuple[list[int], int]:
    """([CLS] + token ids, truncated to ``max_len``; unknown words → [UNK]) and its length."""
    unk = index[UNK]
    ids = [index[CLS]] + [index.get(t, unk) for t in tokenize(text)[: max_len - 1]]
    return ids, len(ids)


class TopicTransformer(nn.Module):
    """Token + learned position embeddings, a pre-norm Transformer encoder, masked mean pool.

    Mean pooling over the real tokens (not [CLS] alone) trains faster on a small data set: every
    word's embedding gets gradient from the first step.
    """

    def __init__(self, vocab_size: int, n_classes: int, max_len: int = 128, d_model: int = 128,
                 heads: int = 4, layers: int = 2, ff: int = 256, dropout: float = 0.1) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d_model, padding_idx=0)
        self.pos = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, ff, dropout, batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``ids`` (B, L) long, ``mask`` (B, L) bool, True on real tokens → (B, classes) logits."""
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.encoder(self.tok(ids) + self.pos(pos), src_key_padding_mask=~mask)
        keep = mask.unsqueeze(-1).to(x.dtype)
        pooled = (self.norm(x) * keep).sum(1) / keep.sum(1).clamp(min=1)
        return self.head(pooled)


class TextTransformerPipeline(TrainedPipeline):
    """Classifies short news-like texts into topics; responses carry label and confidence."""

    name = "text-transformer"
    description = ("Small Transformer encoder classifying English texts by topic (regex "
                   "tokenise, vocabulary ids, pad to 128; softmax)")
    dtypes = ("float32", "bfloat16", "float16")
    #: which optimisation levers fit (latency.pipelines.levers): "cnn" allows channels_last too.
    model_kind = "transformer"

    def build_model(self, meta: dict[str, Any]) -> nn.Module:
        return TopicTransformer(len(meta["vocab"]), len(meta["labels"]), int(meta["max_len"]),
                                **meta["model"])

    def __init__(self, device: torch.device, dtype: torch.dtype, **args: Any) -> None:
        super().__init__(device, dtype, **args)
        self.max_len = int(self.meta["max_len"])
        self.index = {w: i for i, w in enumerate(self.meta["vocab"])}

    def sample_inputs(self, n: int, seed: int) -> list[str]:
        """Texts of 3-150 words from the held-out stream (never used in training)."""
        return [text for text, _ in data.text_samples(n, seed, split="heldout")]

    def preprocess(self, raw: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Text → (ids, mask), both padded to ``max_len`` so any requests can be batched."""
        if not isinstance(raw, str):
            raise TypeError(f"text-transformer expects str input, got {type(raw).__name__}")
        ids, n = encode(raw, self.index, self.max_len)
        padded = torch.zeros(self.max_len, dtype=torch.long)
        padded[:n] = torch.tensor(ids)
        mask = torch.arange(self.max_len) < n
        return padded.to(self.device), mask.to(self.device)

    def preprocess_naive(self, raw: str) -> tuple[torch.Tensor, torch.Tensor]:
        """The beginner's preprocess (``--pre naive``): the same ids and mask, slowly.

        Tokenises character by character, finds each word by scanning the vocabulary *list*
        (not the dict), and fills the padded tensors one element at a time.
        """
        if not isinstance(raw, str):
            raise TypeError(f"text-transformer expects str input, got {type(raw).__name__}")
        vocab: list[str] = self.meta["vocab"]
        ids = [vocab.index(CLS)]
        for tok in tokenize_naive(raw)[: self.max_len - 1]:
            found = vocab.index(UNK)
            for i, word in enumerate(vocab):
                if word == tok:
                    found = i
                    break
            ids.append(found)
        padded = torch.zeros(self.max_len, dtype=torch.long)
        mask = torch.zeros(self.max_len, dtype=torch.bool)
        for k in range(self.max_len):
            if k < len(ids):
                padded[k] = ids[k]
                mask[k] = True
        return padded.to(self.device), mask.to(self.device)

    def collate(self, items: Sequence[tuple[torch.Tensor, torch.Tensor]]
                ) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.stack([i for i, _ in items]), torch.stack([m for _, m in items])

    @torch.inference_mode()
    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return self.model(*batch)

    def postprocess(self, item: torch.Tensor) -> dict[str, Any]:
        probs = torch.softmax(item.float().cpu(), dim=0)
        conf, idx = probs.max(0)
        return {"label": self.labels[int(idx)], "confidence": float(conf)}
