"""A complete pipeline of your own: product reviews in, positive/negative out.

This is the example docs/your-pipeline.md walks through. It is an ordinary Python file outside
the ``latency`` package — exactly what your pipeline will be — and CI runs it:

    python -m latency run --pipeline examples/sentiment_pipeline.py:SentimentPipeline \\
        --inputs examples/reviews.jsonl --concurrency 8 --batch-size 4 --max-batch-delay-ms 2
    python -m latency run --pipeline examples/sentiment_pipeline.py:make_pipeline \\
        --model-arg threshold=0.7 --requests 500              # the factory form

The model is small and real: a bag-of-words EmbeddingBag classifier whose weights
(``sentiment.safetensors``, 12 kB) were trained by this file on reviews it generates itself
(``python examples/sentiment_pipeline.py --train``; held-out accuracy is printed).
"""
from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from latency import ModelArg, Pipeline

HERE = Path(__file__).resolve().parent
WEIGHTS = HERE / "sentiment.safetensors"
VOCAB = HERE / "sentiment.vocab.json"
LABELS = ("negative", "positive")

# ---- the data this example generates (and trains on) ---------------------------------------
GOOD = ("great", "excellent", "love", "perfect", "fast", "reliable", "sturdy", "friendly",
        "recommend", "happy", "works", "comfortable", "bright", "quiet", "fantastic")
BAD = ("broken", "awful", "hate", "slow", "flimsy", "rude", "refund", "disappointed", "noisy",
       "leaks", "useless", "late", "cracked", "worst", "returned")
THINGS = ("kettle", "headphones", "chair", "lamp", "charger", "backpack", "blender", "jacket",
          "keyboard", "tent", "printer", "mug")
FILLER = ("the", "it", "was", "is", "and", "my", "a", "this", "really", "very", "after",
          "days", "delivery", "price", "quality", "box", "arrived", "bought", "for", "with")
NEGATORS = ("not", "never")


def review(rng: random.Random) -> tuple[str, int]:
    """One review and its label: mostly words of its sentiment, some of the other, filler,
    and sometimes a negated word ("not great") that flips it."""
    label = rng.randrange(2)
    own, other = (GOOD, BAD) if label else (BAD, GOOD)
    words = [rng.choice(THINGS)]
    for _ in range(rng.randint(4, 24)):
        r = rng.random()
        if r < 0.35:
            words.append(rng.choice(own))
        elif r < 0.45:
            words.append(rng.choice(other))
        elif r < 0.5:
            words += [rng.choice(NEGATORS), rng.choice(other)]
        else:
            words.append(rng.choice(FILLER))
    return " ".join(words).capitalize() + rng.choice((".", "!", "...")), label


def reviews(n: int, seed: int) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    return [review(rng) for _ in range(n)]


def tokens(text: str) -> list[str]:
    """Lowercase words; a negator joins the next word ("not great" → "not_great")."""
    words = re.findall(r"[a-z']+", text.lower())
    out, i = [], 0
    while i < len(words):
        if words[i] in NEGATORS and i + 1 < len(words):
            out.append(f"not_{words[i + 1]}")
            i += 2
        else:
            out.append(words[i])
            i += 1
    return out


# ---- the model -----------------------------------------------------------------------------
class BagOfWords(nn.Module):
    def __init__(self, vocab_size: int, dim: int = 32) -> None:
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab_size, dim, mode="mean")
        self.head = nn.Linear(dim, len(LABELS))

    def forward(self, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(ids, offsets))


# ---- the pipeline --------------------------------------------------------------------------
class SentimentPipeline(Pipeline):
    name = "sentiment"
    description = "bag-of-words sentiment of product reviews (regex tokens, EmbeddingBag, softmax)"
    model_args = (
        ModelArg("threshold", float, 0.5, "probability of 'positive' above which it is said"),
        ModelArg("checkpoint", str, str(WEIGHTS), "the weights (.safetensors)"),
    )
    model_kind = "module"  # levers (int8, compile, ...) apply to self.model
    dtypes = ("float32",)

    @classmethod
    def check_args(cls, args: dict[str, Any]) -> None:
        if not 0.0 < args["threshold"] < 1.0:
            raise ValueError("threshold must be between 0 and 1")
        if not Path(args["checkpoint"]).is_file():
            raise ValueError(f"no checkpoint {args['checkpoint']} (train it: python "
                             "examples/sentiment_pipeline.py --train)")

    def __init__(self, device: torch.device | str = "cpu",
                 dtype: torch.dtype | str = torch.float32, **args: Any) -> None:
        super().__init__(device, dtype, **args)
        self.threshold = float(args.get("threshold", 0.5))
        vocab = json.loads(VOCAB.read_text())
        self.index = {w: i for i, w in enumerate(vocab)}  # 0 is the unknown word
        self.model = BagOfWords(len(vocab))
        self.model.load_state_dict(load_file(args.get("checkpoint") or WEIGHTS))
        self.model.to(self.device).eval()

    def sample_inputs(self, n: int, seed: int) -> list[dict[str, str]]:
        """Held-out reviews (seeds the training never used), as JSON objects."""
        return [{"text": text} for text, _ in reviews(n, 10_000 + seed)]

    def preprocess(self, raw: Any) -> torch.Tensor:
        text = raw["text"] if isinstance(raw, dict) else raw
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        if not isinstance(text, str):
            raise TypeError(f"a review is text or {{'text': ...}}, not {type(raw).__name__}")
        ids = [self.index.get(t, 0) for t in tokens(text)] or [0]
        return torch.tensor(ids, dtype=torch.long, device=self.device)

    def collate(self, items: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        lengths = torch.tensor([len(t) for t in items], device=self.device)
        offsets = torch.cat([lengths.new_zeros(1), lengths.cumsum(0)[:-1]])
        return torch.cat(items), offsets

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return self.model(*batch)

    def postprocess(self, item: torch.Tensor) -> dict[str, Any]:
        p = float(torch.softmax(item.float(), dim=0)[1])
        return {"label": LABELS[int(p > self.threshold)], "p_positive": round(p, 4)}


def make_pipeline(device: str = "cpu", dtype: str = "float32", threshold: float = 0.5,
                  checkpoint: str = str(WEIGHTS)) -> SentimentPipeline:
    """The factory form: any callable returning a Pipeline; its keyword parameters are its
    model-args (``--model-arg threshold=0.7``)."""
    return SentimentPipeline(device, dtype, threshold=threshold, checkpoint=checkpoint)


# ---- training (python examples/sentiment_pipeline.py --train) ------------------------------
def train(seed: int = 0, n: int = 20_000, epochs: int = 4) -> float:
    torch.manual_seed(seed)
    data = reviews(n, seed)
    vocab = ["<unk>"] + sorted({t for text, _ in data for t in tokens(text)})
    index = {w: i for i, w in enumerate(vocab)}
    model = BagOfWords(len(vocab))
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(epochs):
        random.Random(seed).shuffle(data)
        for k in range(0, n, 64):
            chunk = data[k: k + 64]
            seqs = [torch.tensor([index[t] for t in tokens(x)] or [0]) for x, _ in chunk]
            lengths = torch.tensor([len(s) for s in seqs])
            offsets = torch.cat([lengths.new_zeros(1), lengths.cumsum(0)[:-1]])
            loss = nn.functional.cross_entropy(model(torch.cat(seqs), offsets),
                                               torch.tensor([y for _, y in chunk]))
            opt.zero_grad()
            loss.backward()
            opt.step()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, WEIGHTS)
    VOCAB.write_text(json.dumps(vocab))
    pipe = SentimentPipeline()
    held = reviews(2000, 10_000)
    with torch.inference_mode():
        hits = sum(pipe.postprocess(pipe.forward(pipe.collate([pipe.preprocess(x)]))[0])
                   ["label"] == LABELS[y] for x, y in held)
    return hits / len(held)


if __name__ == "__main__":
    if "--train" in sys.argv:
        print(f"held-out accuracy {train():.1%} (chance 50%)")
    elif "--reviews" in sys.argv:  # the example inputs: python ... --reviews > reviews.jsonl
        for text, _ in reviews(200, 20_000):
            print(json.dumps({"text": text}))
