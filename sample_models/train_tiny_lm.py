"""Train tiny-lm: its byte-level BPE tokenizer, then the model, on ``lm_corpus`` documents.

    python -m sample_models.train --only tiny-lm

Why in the repo: like the other samples' weights, tiny-lm's are a build product of fixed seeds
(``lm_corpus``'s documents, ``torch.manual_seed``), a few minutes on two CPU cores. The model
learns next-token prediction on the ``train`` split, packed into fixed-length windows with an
end-of-text token between documents; loss, perplexity and next-token accuracy are reported on
the ``test`` split. Weights are stored as float16 (half the size; the pipeline loads them into
the dtype it runs in) and the reported test figures are those of the stored weights.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer, pre_tokenizers, trainers

from sample_models import lm_corpus
from sample_models._common import WEIGHTS_DIR, save_weights
from sample_models.tiny_lm import EOS, NAME, TOKENIZER_FILE, TinyLM, new_tokenizer


@dataclass(frozen=True)
class Settings:
    """What is trained, on how much text, for how long (the defaults ship)."""

    train_docs: int = 12000
    test_docs: int = 600
    vocab_size: int = 2048
    d_model: int = 256
    layers: int = 4
    heads: int = 4
    ff: int = 512
    seq_len: int = 512
    batch: int = 8
    steps: int = 600
    lr: float = 3e-3
    warmup: int = 30
    weight_decay: float = 0.1
    #: matmuls in bfloat16 autocast when the CPU has it natively (AMX/AVX-512 BF16): about
    #: twice as fast; master weights and the optimizer stay float32
    bf16_autocast: bool = True


def train_tokenizer(docs: list[str], vocab_size: int) -> Tokenizer:
    """Byte-level BPE merges learned from ``docs``; the end-of-text token is id 0."""
    tok = new_tokenizer()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(docs, trainer=trainer, length=len(docs))
    return tok


def token_stream(tok: Tokenizer, docs: list[str]) -> torch.Tensor:
    """All documents' ids in one 1-D tensor, each document followed by end-of-text."""
    eos = tok.token_to_id(EOS)
    if eos is None:
        raise ValueError(f"the tokenizer has no {EOS} token")
    ids: list[int] = []
    for enc in tok.encode_batch(docs, add_special_tokens=False):
        ids.extend(enc.ids)
        ids.append(eos)
    return torch.tensor(ids, dtype=torch.long)


def _lr(step: int, s: Settings) -> float:
    """Linear warm-up, then cosine decay to a tenth."""
    if step < s.warmup:
        return s.lr * (step + 1) / s.warmup
    frac = (step - s.warmup) / max(1, s.steps - s.warmup)
    return s.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * frac)))


def _native_bf16() -> bool:
    """Whether this CPU does bfloat16 matmuls natively (else autocast would only slow down)."""
    try:
        return bool(torch.backends.mkldnn.is_available()
                    and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


@torch.inference_mode()
def evaluate(model: TinyLM, stream: torch.Tensor, seq_len: int) -> tuple[float, float]:
    """(mean loss, next-token accuracy) over ``stream`` in non-overlapping windows, float32."""
    model.eval()
    n = (len(stream) - 1) // seq_len * seq_len
    x, y = stream[:n].view(-1, seq_len), stream[1:n + 1].view(-1, seq_len)
    total = right = 0.0
    for i in range(0, len(x), 32):
        logits = model(x[i:i + 32]).float()
        total += float(F.cross_entropy(logits.flatten(0, 1), y[i:i + 32].flatten(),
                                       reduction="sum"))
        right += float((logits.argmax(-1) == y[i:i + 32]).sum())
    return total / y.numel(), right / y.numel()


def train(s: Settings) -> TinyLM:
    """Tokenizer and model, trained and written to ``weights/``; prints progress and results.
    Returns the model as stored (float16 weights, held in float32)."""
    t0 = time.perf_counter()
    train_docs = lm_corpus.documents(s.train_docs, 0, "train")
    test_docs = lm_corpus.documents(s.test_docs, 0, "test")
    chars = sum(len(d) for d in train_docs)
    tok = train_tokenizer(train_docs, s.vocab_size)
    train_ids, test_ids = token_stream(tok, train_docs), token_stream(tok, test_docs)
    print(f"  corpus: {s.train_docs} documents, {chars / 1e6:.1f} M characters, "
          f"{len(train_ids) / 1e6:.2f} M tokens (vocab {tok.get_vocab_size()}); test "
          f"{len(test_ids) / 1e3:.0f} k tokens; built in {time.perf_counter() - t0:.1f}s",
          flush=True)

    torch.manual_seed(0)
    model = TinyLM(tok.get_vocab_size(), s.d_model, s.layers, s.heads, s.ff)
    params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() == 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": s.weight_decay},
                             {"params": other, "weight_decay": 0.0}], lr=s.lr,
                            betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(0)
    offsets = torch.arange(s.seq_len + 1)
    bf16 = s.bf16_autocast and _native_bf16()
    print(f"  model: {params / 1e6:.2f} M parameters; {s.steps} steps of {s.batch} x "
          f"{s.seq_len} tokens ({s.steps * s.batch * s.seq_len / 1e6:.1f} M tokens)"
          f"{', bfloat16 autocast' if bf16 else ''}", flush=True)
    t1, running = time.perf_counter(), 0.0
    for step in range(s.steps):
        model.train()
        for group in opt.param_groups:
            group["lr"] = _lr(step, s)
        starts = torch.randint(0, len(train_ids) - s.seq_len - 1, (s.batch,), generator=g)
        window = train_ids[starts[:, None] + offsets]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(window[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), window[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running = loss.item() if step == 0 else 0.95 * running + 0.05 * loss.item()
        if (step + 1) % max(1, s.steps // 10) == 0 or step + 1 == s.steps:
            print(f"  step {step + 1}/{s.steps}: train loss {running:.3f} "
                  f"({time.perf_counter() - t1:.0f}s)", flush=True)
    train_s = time.perf_counter() - t1

    with torch.no_grad():  # what ships: float16 weights (evaluated as such, below)
        for p in model.parameters():
            p.copy_(p.half().float())
    loss, acc = evaluate(model, test_ids, s.seq_len)
    meta = {"model": {"vocab_size": tok.get_vocab_size(), "d_model": s.d_model,
                      "layers": s.layers, "heads": s.heads, "ff": s.ff},
            "tokenizer": TOKENIZER_FILE, "parameters": params, "train_tokens": len(train_ids),
            "settings": asdict(s), "bf16_autocast_used": bf16, "train_seconds": round(train_s, 1),
            "test_loss": round(loss, 4), "test_perplexity": round(math.exp(loss), 3),
            "test_accuracy": round(acc, 4)}
    save(model, tok, meta)
    print(f"  test: loss {loss:.3f}, perplexity {math.exp(loss):.2f}, next-token accuracy "
          f"{acc:.3f}; trained in {train_s:.0f}s", flush=True)
    return model


def save(model: TinyLM, tok: Tokenizer, meta: dict) -> None:
    """``weights/tiny-lm.safetensors`` (float16: half the file), ``.json`` (meta) and
    ``.tokenizer.json``: the layout ``_common.load_weights`` reads."""
    save_weights(NAME, model, meta, dtype=torch.float16)
    tok.save(str(WEIGHTS_DIR / TOKENIZER_FILE))


def train_tiny_lm() -> float:
    """``train.py``'s entry: trains with the shipped settings, returns test next-token
    accuracy (what ``train.py`` prints as the model's test accuracy)."""
    from sample_models._common import load_weights

    train(Settings())
    return float(load_weights(NAME)[1]["test_accuracy"])
