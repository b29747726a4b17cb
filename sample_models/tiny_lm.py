"""tiny-lm: prompt → byte-level BPE → a small decoder-only Transformer with a KV cache → text.

Why this pipeline: the generation profiler needs a real LLM-shaped workload that runs anywhere
with no download — a prefill whose cost grows with the prompt, decode steps whose cost is one
token per running sequence plus reading its cache, and a subword tokenizer whose pieces are not
text on their own. The model (RoPE, RMSNorm, SwiGLU, tied embeddings: the Llama recipe, shrunk
to a few million parameters) and its tokenizer are trained by ``python -m sample_models.train
--only tiny-lm`` on ``lm_corpus`` documents, so what it writes is readable English-like text.

The KV cache is a per-sequence object (``KVCache``) the engine holds between calls; the pipeline
keeps no per-request state. A decode step runs all its sequences, of whatever lengths, through
one forward: the matmuls that read the weights once for the batch, attention per sequence over
its own cache in place (``RaggedBatchView``), so a step of eight costs far less than eight
steps of one.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from torch import nn

from latency.pipelines.generative import (
    DecodeInput,
    GenerativePipeline,
    IncrementalDetokenizer,
    PrefillChunk,
)
from sample_models import lm_corpus
from sample_models._common import WEIGHTS_DIR, check_dtype, load_weights

NAME = "tiny-lm"
EOS = "<|endoftext|>"
TOKENIZER_FILE = f"{NAME}.tokenizer.json"


# ---- the tokenizer -----------------------------------------------------------------------
def new_tokenizer() -> Tokenizer:
    """An untrained byte-level BPE (GPT-2's scheme): any text round-trips exactly, since every
    byte is a token before any merge is learned. Training (``train_tiny_lm``) adds the merges."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def load_tokenizer() -> Tokenizer:
    """The trained tokenizer shipped in ``weights/`` (the weights' ids refer to it)."""
    return Tokenizer.from_file(str(WEIGHTS_DIR / TOKENIZER_FILE))


class StreamDetokenizer(IncrementalDetokenizer):
    """``tokenizers.decoders.DecodeStream`` behind the contract's ``step``: the Rust decoder
    holds back incomplete UTF-8 itself, and its work per token is bounded."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._stream = decoders.DecodeStream(skip_special_tokens=True)

    def step(self, token: int) -> str:
        return self._stream.step(self._tokenizer, int(token)) or ""


# ---- the model ---------------------------------------------------------------------------
class RMSNorm(nn.Module):
    """RMS norm computed in float32 whatever the model's dtype (float16 squares overflow)."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) \
            * self.weight


def rope_angles(positions: torch.Tensor, head_dim: int, base: float
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles, ``[B, 1, T, head_dim/2]`` float32, from positions
    ``[B, T]``: computed per call rather than stored, so no buffer is ever cast to bfloat16."""
    inv = base ** (-torch.arange(0, head_dim, 2, device=positions.device,
                                 dtype=torch.float32) / head_dim)
    angles = positions.to(torch.float32)[:, None, :, None] * inv
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` ``[B, H, T, D]`` by its positions' angles (the rotate-half layout)."""
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


class KVView(Protocol):
    """Where one forward call's keys and values go, and what its queries attend to."""

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
               ) -> torch.Tensor:
        """Store this call's ``k``/``v`` ``[B, H, T, D]`` for ``layer``; return the attention
        of ``q`` ``[B, H, T, D]`` over everything each row may see, ``[B, H, T, D]``."""


class NoCache:
    """A full forward pass with nothing cached: training, and the tests' reference."""

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
               ) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=q.shape[2] > 1)


class Attention(nn.Module):
    def __init__(self, d_model: int, heads: int, rope_base: float) -> None:
        super().__init__()
        self.heads, self.head_dim, self.rope_base = heads, d_model // heads, rope_base
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layer: int,
                cache: KVView) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = cache.attend(layer, q, k, v)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class SwiGLU(nn.Module):
    def __init__(self, d_model: int, ff: int) -> None:
        super().__init__()
        self.up = nn.Linear(d_model, 2 * ff, bias=False)  # gate and up, fused
        self.down = nn.Linear(ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, d_model: int, heads: int, ff: int, rope_base: float) -> None:
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(d_model), RMSNorm(d_model)
        self.attn = Attention(d_model, heads, rope_base)
        self.mlp = SwiGLU(d_model, ff)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layer: int,
                cache: KVView) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), cos, sin, layer, cache)
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    """A pre-norm decoder-only Transformer; the output head is the embedding (tied)."""

    def __init__(self, vocab_size: int, d_model: int = 256, layers: int = 4, heads: int = 4,
                 ff: int = 512, rope_base: float = 10000.0) -> None:
        super().__init__()
        self.layers, self.heads, self.head_dim = layers, heads, d_model // heads
        self.rope_base = rope_base
        self.embed = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, ff, rope_base) for _ in range(layers))
        self.norm = RMSNorm(d_model)
        self._init_weights()

    def _init_weights(self) -> None:
        """GPT-2's: small normal weights, residual outputs shrunk by the depth."""
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * self.layers) if name.endswith(("out.weight",
                                                                          "down.weight")) else 0.02
                nn.init.normal_(p, std=std)

    def hidden(self, ids: torch.Tensor, positions: torch.Tensor, cache: KVView) -> torch.Tensor:
        """Token ids ``[B, T]`` at ``positions`` ``[B, T]`` → final hidden states ``[B, T, D]``,
        their keys and values stored where ``cache`` says."""
        cos, sin = rope_angles(positions, self.head_dim, self.rope_base)
        x = self.embed(ids)
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, i, cache)
        return self.norm(x)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(h, self.embed.weight)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Every position's next-token logits ``[B, T, V]``, recomputed from scratch (causal)."""
        positions = torch.arange(ids.shape[1], device=ids.device).expand(ids.shape[0], -1)
        return self.logits(self.hidden(ids, positions, NoCache()))


# ---- the KV cache ------------------------------------------------------------------------
@dataclass
class KVCache:
    """One sequence's keys and values: ``data[layer, 0|1, head, position, dim]`` (K then V);
    positions ``0 .. length-1`` are filled. Preallocated to its capacity, so a token's K and V
    are one in-place write per layer."""

    data: torch.Tensor
    length: int = 0

    @property
    def capacity(self) -> int:
        return int(self.data.shape[3])


class ChunkView:
    """One sequence's chunk at ``start``: writes its K/V into the cache, attends to the cache
    up to its own end (the prefill path, and a decode step of a single sequence)."""

    def __init__(self, kv: KVCache, start: int, tokens: int) -> None:
        self.kv, self.start, self.end = kv, start, start + tokens
        self.mask: torch.Tensor | None = None
        if start > 0 and tokens > 1:  # query i (position start+i) sees keys 0 .. start+i
            keys = torch.arange(self.end, device=kv.data.device)
            query = torch.arange(start, self.end, device=kv.data.device)
            self.mask = (keys[None, :] <= query[:, None])[None, None]

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
               ) -> torch.Tensor:
        d = self.kv.data[layer]
        d[0, :, self.start:self.end] = k[0]
        d[1, :, self.start:self.end] = v[0]
        keys, values = d[0, :, :self.end].unsqueeze(0), d[1, :, :self.end].unsqueeze(0)
        causal = self.start == 0 and q.shape[2] > 1  # else the mask (or a single query)
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=self.mask,
                                              is_causal=causal)


class RaggedBatchView:
    """Several sequences' decode step, one new token each, at their own ``positions``: each
    row's K/V goes into its own cache and its query attends that cache in place.

    Why not pad: copying every cache into a padded batch (a fresh tensor each step, zeroed
    and page-faulted in) cost more than the step's matmuls on a CPU. The projections, the MLP
    and the output head — the work that reads the weights — still run once for the batch;
    only attention, whose work is each sequence's own cache anyway, runs per row (what a
    paged-attention kernel does in one launch)."""

    def __init__(self, caches: Sequence[KVCache], positions: Sequence[int]) -> None:
        self.caches, self.positions = caches, positions

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
               ) -> torch.Tensor:
        new = torch.stack([k[:, :, 0], v[:, :, 0]], dim=1)  # [B, 2, H, D]
        rows = []
        for row, (kv, pos) in enumerate(zip(self.caches, self.positions)):
            d = kv.data[layer]
            d[:, :, pos] = new[row]
            rows.append(F.scaled_dot_product_attention(
                q[row:row + 1], d[0, :, :pos + 1].unsqueeze(0), d[1, :, :pos + 1].unsqueeze(0)))
        return torch.cat(rows)


# ---- the pipeline ------------------------------------------------------------------------
class TinyLMPipeline(GenerativePipeline):
    """Writes continuations of English-like prompts (weather reports, recipes, stories...)."""

    name = NAME
    description = ("Small decoder-only Transformer LM (byte-level BPE, RoPE, KV cache; "
                   "continues weather reports, recipes, stories, travel notes, letters)")
    dtypes = ("float32", "bfloat16", "float16")
    max_context = 1024
    eos_token_id = 0  # the tokenizer's first special token (checked when it loads)

    def __init__(self, device: torch.device | str = "cpu",
                 dtype: torch.dtype | str = torch.float32, **args: Any) -> None:
        super().__init__(device, dtype, **args)
        check_dtype(type(self), self.dtype)
        state, self.meta = load_weights(self.name)
        self.tokenizer = load_tokenizer()
        if self.tokenizer.token_to_id(EOS) != self.eos_token_id:
            raise RuntimeError(f"{TOKENIZER_FILE}: {EOS} is not token {self.eos_token_id}")
        self.model = TinyLM(**self.meta["model"])
        self.model.load_state_dict(state)  # stored as float16: copied into float32 params
        self.model.to(device=self.device, dtype=self.dtype).eval()
        self.model.requires_grad_(False)

    def sample_inputs(self, n: int, seed: int) -> list[str]:
        """Beginnings of held-out documents (30-70 % of their words; never trained on)."""
        return lm_corpus.prompts(n, seed)

    # ---- text ----------------------------------------------------------------------------
    def tokenize(self, prompt: str) -> list[int]:
        if not isinstance(prompt, str):
            raise TypeError(f"{NAME} expects str prompts, got {type(prompt).__name__}")
        return self.tokenizer.encode(prompt, add_special_tokens=False).ids

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    def detokenizer(self) -> IncrementalDetokenizer:
        """The Rust ``DecodeStream`` (tokenizers 0.21+), else the contract's own."""
        if hasattr(decoders, "DecodeStream"):
            return StreamDetokenizer(self.tokenizer)
        return super().detokenizer()

    # ---- the KV cache --------------------------------------------------------------------
    def allocate(self, capacity: int) -> KVCache:
        if not 1 <= capacity <= self.max_context:
            raise ValueError(f"{NAME}: KV capacity {capacity} is outside 1..{self.max_context}")
        m = self.model
        data = torch.empty(m.layers, 2, m.heads, capacity, m.head_dim, device=self.device,
                           dtype=self.dtype)
        return KVCache(data)

    def free(self, kv: KVCache) -> None:
        shape = kv.data.shape  # a new empty tensor (a view would keep the storage alive)
        kv.data = kv.data.new_empty((*shape[:3], 0, *shape[4:]))
        kv.length = 0

    # ---- compute -------------------------------------------------------------------------
    @torch.inference_mode()
    def prefill(self, chunks: Sequence[PrefillChunk]) -> torch.Tensor:
        """One chunk at a time (prompt chunks differ in length; each is a batch of its own
        tokens already): returns each chunk's last-position logits."""
        return torch.cat([self._chunk(c.kv, c.tokens, c.start) for c in chunks])

    def _chunk(self, kv: KVCache, tokens: Sequence[int], start: int) -> torch.Tensor:
        n = len(tokens)
        if n == 0:
            raise ValueError(f"{NAME}: an empty prefill chunk")
        if not 0 <= start <= kv.length:
            raise ValueError(f"{NAME}: chunk starts at {start}, but the cache holds "
                             f"{kv.length} positions")
        if start + n > kv.capacity:
            raise ValueError(f"{NAME}: {start + n} positions exceed the KV capacity "
                             f"{kv.capacity}")
        ids = torch.tensor([list(tokens)], dtype=torch.long, device=self.device)
        positions = torch.arange(start, start + n, device=self.device)[None]
        h = self.model.hidden(ids, positions, ChunkView(kv, start, n))
        kv.length = start + n
        return self.model.logits(h[:, -1])

    @torch.inference_mode()
    def decode(self, inputs: Sequence[DecodeInput]) -> torch.Tensor:
        """All running sequences in one forward (``RaggedBatchView``: batched matmuls, each
        sequence attending its own cache); a single sequence takes the prefill path."""
        for d in inputs:
            if d.position != d.kv.length:
                raise ValueError(f"{NAME}: decode at position {d.position}, but the cache "
                                 f"holds {d.kv.length} positions")
            if d.position >= d.kv.capacity:
                raise ValueError(f"{NAME}: position {d.position} is past the KV capacity "
                                 f"{d.kv.capacity}")
        if len(inputs) == 1:
            return self._chunk(inputs[0].kv, [inputs[0].token], inputs[0].position)
        m = self.model
        caches, positions = [d.kv for d in inputs], [d.position for d in inputs]
        ids = torch.tensor([[d.token] for d in inputs], dtype=torch.long, device=self.device)
        h = m.hidden(ids, torch.tensor(positions, device=self.device)[:, None],
                     RaggedBatchView(caches, positions))
        for kv in caches:
            kv.length += 1
        return m.logits(h[:, -1])
