"""Train the real sample models and write ``sample_models/weights/<name>.{safetensors,json}``.

    python -m sample_models.train [--only image-cnn|text-transformer|tabular-mlp|tiny-lm]

Why a script in the repo: the weights are small build products of ``data.py``'s fixed seeds,
so anyone can rebuild them (a few minutes on two CPU cores) and see they are not a black box.
Each model trains on the ``train`` split and reports accuracy on the ``test`` split; the
pipelines' ``sample_inputs`` use a third, ``heldout`` split. Results are reproducible up to
thread-scheduling noise in float sums. ``tiny-lm`` (a language model, ``train_tiny_lm.py``)
reports next-token accuracy, with its perplexity.
"""
from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import time
from collections import Counter
from collections.abc import Callable, Iterator

import numpy as np
import torch
from torch import nn

from sample_models import data
from sample_models._common import save_weights
from sample_models.image_cnn import ShapeResNet, load_crop
from sample_models.tabular_mlp import LoanMLP, featurize
from sample_models.text_transformer import SPECIALS, TopicTransformer, encode, tokenize

MODELS = ("image-cnn", "text-transformer", "tabular-mlp", "tiny-lm")


def _fit(model: nn.Module, batches: Callable[[int], Iterator[tuple]], epochs: int,
         steps_per_epoch: int, lr: float, weight_decay: float) -> None:
    """AdamW with a one-cycle schedule over ``epochs``; ``batches(epoch)`` yields (inputs..., y)."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=epochs * steps_per_epoch,
                                                pct_start=0.2)
    for epoch in range(epochs):
        model.train()
        total, n = 0.0, 0
        for *inputs, y in batches(epoch):
            loss = nn.functional.cross_entropy(model(*inputs), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total, n = total + loss.item() * len(y), n + len(y)
        if (epoch + 1) % math.ceil(epochs / 10) == 0 or epoch + 1 == epochs:
            print(f"  epoch {epoch + 1}/{epochs}: train loss {total / n:.4f}", flush=True)
    model.eval()


@torch.inference_mode()
def _accuracy(model: nn.Module, batches: Iterator[tuple]) -> float:
    model.eval()
    right = total = 0
    for *inputs, y in batches:
        right += int((model(*inputs).argmax(1) == y).sum())
        total += len(y)
    return right / total


# ---- image-cnn -----------------------------------------------------------------------------
def _shape_chunk(args: tuple[int, int, str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Worker: generate and preprocess (as the pipeline does) one chunk of a shape stream."""
    n, seed, split, start = args
    samples = data.shape_samples(n, seed, split, start)
    pixels = np.stack([load_crop(raw) for raw, _ in samples])
    return pixels, np.array([data.SHAPES.index(label) for _, label in samples])


def _shape_set(n: int, split: str, workers: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, 3, 64, 64) uint8 crops and labels, generated in parallel (JPEG work is the slow part)."""
    chunk = 250
    jobs = [(min(chunk, n - s), 0, split, s) for s in range(0, n, chunk)]
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        parts = pool.map(_shape_chunk, jobs)
    x = torch.from_numpy(np.concatenate([p for p, _ in parts])).permute(0, 3, 1, 2).contiguous()
    return x, torch.from_numpy(np.concatenate([y for _, y in parts]))


def train_image_cnn(workers: int) -> float:
    n_train, n_test, epochs, bs = 8000, 1000, 8, 128
    t = time.perf_counter()
    x_train, y_train = _shape_set(n_train, "train", workers)
    x_test, y_test = _shape_set(n_test, "test", workers)
    print(f"  generated {n_train} + {n_test} JPEGs in {time.perf_counter() - t:.1f}s", flush=True)

    flat = x_train.float().div_(255).transpose(0, 1).reshape(3, -1)
    mean, std = flat.mean(1), flat.std(1)
    del flat

    def norm(x: torch.Tensor) -> torch.Tensor:
        return (x.float().div_(255) - mean.view(1, 3, 1, 1)) / std.view(1, 3, 1, 1)

    def batches(epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        g = torch.Generator().manual_seed(epoch)
        perm = torch.randperm(n_train, generator=g)
        for i in range(0, n_train - bs + 1, bs):
            idx = perm[i:i + bs]
            x = norm(x_train[idx])
            # every class is symmetric under flips and quarter turns: free extra data
            flip = torch.rand(len(idx), 1, 1, 1, generator=g) < 0.5
            x = torch.where(flip, x.flip(3), x)
            x = torch.rot90(x, int(torch.randint(4, (1,), generator=g)), (2, 3))
            yield x, y_train[idx]

    torch.manual_seed(0)
    model = ShapeResNet(len(data.SHAPES))
    _fit(model, batches, epochs, n_train // bs, lr=3e-3, weight_decay=5e-4)
    acc = _accuracy(model, ((norm(x_test[i:i + 250]), y_test[i:i + 250])
                            for i in range(0, n_test, 250)))
    save_weights("image-cnn", model, {
        "labels": list(data.SHAPES), "resize": data.RESIZE, "crop": data.CROP,
        "widths": [32, 64, 128], "mean": mean.tolist(), "std": std.tolist(),
        "test_accuracy": round(acc, 4)})
    return acc


# ---- text-transformer ----------------------------------------------------------------------
def train_text_transformer() -> float:
    n_train, n_test, epochs, bs, max_len = 8000, 2000, 4, 64, 128
    train, test = data.text_samples(n_train, 0, "train"), data.text_samples(n_test, 0, "test")
    counts = Counter(tok for text, _ in train for tok in tokenize(text))
    # a word seen fewer than 5 times is most likely a typo: let it map to [UNK]
    vocab = list(SPECIALS) + sorted(w for w, c in counts.items() if c >= 5)
    index = {w: i for i, w in enumerate(vocab)}
    labels = list(data.TOPICS)
    print(f"  vocabulary: {len(vocab)} words", flush=True)

    def tensors(samples: list[tuple[str, str]], order: list[int]
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Pad to the longest in *this* batch: training is 3x cheaper than padding to 128, and
        masked attention plus masked pooling make the result independent of the pad length."""
        enc = [encode(samples[i][0], index, max_len)[0] for i in order]
        width = max(len(e) for e in enc)
        ids = torch.zeros(len(enc), width, dtype=torch.long)
        for r, e in enumerate(enc):
            ids[r, :len(e)] = torch.tensor(e)
        y = torch.tensor([labels.index(samples[i][1]) for i in order])
        return ids, ids != 0, y

    lengths = [len(tokenize(text)) for text, _ in train]

    def batches(epoch: int) -> Iterator[tuple[torch.Tensor, ...]]:
        rng = np.random.default_rng(epoch)
        perm = rng.permutation(n_train)
        # sort within pools of 20 batches so batches hold similar lengths, then shuffle batches
        pools = [sorted(perm[i:i + 20 * bs], key=lambda j: lengths[j])
                 for i in range(0, n_train, 20 * bs)]
        groups = [p[i:i + bs] for p in pools for i in range(0, len(p), bs)]
        for g in rng.permutation(len(groups)):
            yield tensors(train, groups[g])

    torch.manual_seed(0)
    dims = {"d_model": 128, "heads": 4, "layers": 2, "ff": 256}
    model = TopicTransformer(len(vocab), len(labels), max_len, **dims)
    _fit(model, batches, epochs, math.ceil(n_train / bs), lr=1e-3, weight_decay=0.01)
    acc = _accuracy(model, (tensors(test, list(range(i, min(i + 250, n_test))))
                            for i in range(0, n_test, 250)))
    save_weights("text-transformer", model, {
        "labels": labels, "max_len": max_len, "model": dims, "vocab": vocab,
        "test_accuracy": round(acc, 4)})
    return acc


# ---- tabular-mlp ---------------------------------------------------------------------------
LOG_FIELDS = ("income", "loan_amount")  # heavy-tailed money amounts


def train_tabular_mlp() -> float:
    n_train, n_test, epochs, bs = 20000, 5000, 20, 256
    train, test = data.loan_samples(n_train, 0, "train"), data.loan_samples(n_test, 0, "test")
    labels = list(data.LOAN_LABELS)
    categorical = {f: list(c) for f, c in data.CATEGORICAL_FIELDS.items()}
    # scaling stats from the training records (identity stats first, to read raw values)
    raw_stats = {f: {"mean": 0.0, "std": 1.0, "log": f in LOG_FIELDS}
                 for f in data.NUMERIC_FIELDS}
    raw = torch.tensor([featurize(r, raw_stats, {}) for r, _ in train])
    numeric = {f: {"mean": float(raw[:, k].mean()), "std": float(raw[:, k].std()),
                   "log": f in LOG_FIELDS} for k, f in enumerate(data.NUMERIC_FIELDS)}

    def tensors(samples: list[tuple[str, str]]) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.tensor([featurize(r, numeric, categorical) for r, _ in samples])
        return x, torch.tensor([labels.index(y) for _, y in samples])

    x_train, y_train = tensors(train)
    x_test, y_test = tensors(test)

    def batches(epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        perm = torch.randperm(n_train, generator=torch.Generator().manual_seed(epoch))
        for i in range(0, n_train, bs):
            yield x_train[perm[i:i + bs]], y_train[perm[i:i + bs]]

    torch.manual_seed(0)
    model = LoanMLP(x_train.shape[1], len(labels), hidden=64)
    _fit(model, batches, epochs, math.ceil(n_train / bs), lr=3e-3, weight_decay=1e-3)
    acc = _accuracy(model, iter([(x_test, y_test)]))
    majority = max(Counter(y_test.tolist()).values()) / n_test
    rule = float(np.mean([(data.default_logit(json.loads(r)) > 0)
                          == (y == "default") for r, y in test]))
    print(f"  majority-class baseline {majority:.3f}; the noiseless rule itself scores "
          f"{rule:.3f} (the ceiling)", flush=True)
    save_weights("tabular-mlp", model, {
        "labels": labels, "numeric": numeric, "categorical": categorical, "hidden": 64,
        "test_accuracy": round(acc, 4), "majority_baseline": round(majority, 4)})
    return acc


def _train_tiny_lm() -> float:
    """Imported when used: the other models train without ``tokenizers`` installed."""
    from sample_models.train_tiny_lm import train_tiny_lm

    return train_tiny_lm()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=MODELS, help="train just this model")
    ap.add_argument("--threads", type=int, default=2, help="torch threads and data workers")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    trainers = {"image-cnn": lambda: train_image_cnn(args.threads),
                "text-transformer": train_text_transformer, "tabular-mlp": train_tabular_mlp,
                "tiny-lm": _train_tiny_lm}
    start = time.perf_counter()
    for name in [args.only] if args.only else MODELS:
        print(f"{name}:", flush=True)
        t = time.perf_counter()
        acc = trainers[name]()
        print(f"{name}: test accuracy {acc:.3f} ({time.perf_counter() - t:.0f}s)", flush=True)
    print(f"done in {time.perf_counter() - start:.0f}s")


if __name__ == "__main__":
    main()
