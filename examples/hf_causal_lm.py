"""Your own Hugging Face causal LM, profiled as a generative pipeline (docs/hf-causal-lm.md).

    pip install -r requirements-hf.txt
    python -m latency run --pipeline examples/hf_causal_lm.py:HFCausalLMPipeline \\
        --model-arg path=/your/model --output-tokens 64 ...

``path`` is a local directory holding a model's config, weights and tokenizer, as
``save_pretrained`` (or a hub snapshot) leaves them. Nothing is ever downloaded: both loads use
``local_files_only=True``, because a profiler that fetches gigabytes mid-run measures the
network, and on a machine without one it would hang or fail late instead of saying so now.

How the contract maps onto ``transformers``:

- **The KV cache** of a sequence is a ``_Sequence``: the model's own cache object (for most
  models a ``DynamicCache``, made by the model on the first prefill so that sliding-window and
  hybrid models get the layers their config asks for) and how many positions it holds.
  ``capacity`` is only checked, not pre-allocated: a ``DynamicCache`` grows as it goes.
- **Prefill** runs one forward per chunk, each on its own cache (a loop, not a batch). Why:
  chunks of different lengths over caches of different lengths would need padding *inside* the
  sequence, and a prompt's first chunk would then have pad queries with nothing to attend to,
  whose NaNs a later step would read. Prefill is compute-bound, so a loop costs little; each
  forward keeps only the last position's logits (``logits_to_keep=1``), as a server does.
- **Decode is batched** across sequences: each cache is left-padded to the longest, stacked
  into one batch, and the step runs with an attention mask hiding the pads and each sequence's
  own position ids (so rotary embeddings see true positions); afterwards each sequence's rows,
  pads dropped, become its cache again. That stacking copies every cached K/V once per step (a
  real server's paged attention does not), which this pipeline's decode time includes.
  It is used only where every cache layer is a plain full-attention ``DynamicLayer``; for any
  other cache (sliding window, hybrid, state-space, an older ``transformers``) decode loops
  over sequences, one forward each — slower, never wrong. ``--model-arg batched_decode=false``
  forces the loop, to measure what batching buys.
"""
from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from latency import ModelArg
from latency.core.errors import PipelineError
from latency.pipelines.contract import first_line, parse_bool
from latency.pipelines.generative import (
    DecodeInput,
    GenerativePipeline,
    IncrementalDetokenizer,
    PrefillChunk,
)

INSTALL = "pip install -r requirements-hf.txt"

#: generic English prompts: ``sample_inputs`` cycles through them (the engine cuts or repeats
#: their tokens to ``--prompt-tokens``), so any English-trained model sees ordinary text
PROMPTS = (
    "The quickest way to learn a new language is",
    "Here is a short story about a lighthouse keeper who",
    "Explain, in simple terms, why the sky is blue:",
    "A good recipe for a weeknight dinner starts with",
    "The history of the bicycle begins in the early nineteenth century, when",
    "Write a polite email asking a colleague to review a document.",
    "The three most important things to check before a long drive are",
    "In the morning the market square was already busy with",
    "Summarise the main causes of inflation in a few sentences.",
    "My favourite place to walk on a Sunday afternoon is",
)


@dataclass
class _Sequence:
    """One sequence's KV cache: the model's cache object (None until the first prefill, when
    the model makes the kind its config needs) and how many positions it holds — checked
    against each chunk's ``start`` and each decode's ``position``, so a scheduler that lost
    track of a sequence fails loudly instead of generating from the wrong context."""

    capacity: int
    cache: Any = None
    length: int = 0


class HFCausalLMPipeline(GenerativePipeline):
    """A local ``AutoModelForCausalLM`` and its ``AutoTokenizer`` behind the generative contract
    (the module docstring says how prefill, decode and the KV cache map onto them)."""

    name = "hf-causal-lm"
    description = "a Hugging Face causal LM from a local directory (transformers)"
    model_args = (
        ModelArg("path", str, "", "a local directory with the model's config, weights and "
                 "tokenizer (save_pretrained's output); nothing is downloaded"),
        ModelArg("batched_decode", parse_bool, True, "decode running sequences in one "
                 "padded batch (false: one forward per sequence)"),
    )

    @classmethod
    def check_args(cls, args: dict[str, Any]) -> None:
        """A missing or non-directory ``path`` is refused before anything loads (one line)."""
        super().check_args(args)
        path = str(args.get("path") or "")
        if not path:
            raise ValueError("model-arg path is required: a local directory with a model "
                             "(--model-arg path=/your/model)")
        if not Path(path).expanduser().is_dir():
            raise ValueError(f"model-arg path={path!r} is not a directory")

    @classmethod
    def context_for(cls, args: dict[str, Any]) -> int:
        """The model's positions read from its ``config.json`` (before anything loads, so a
        run that cannot fit is refused first); the contract's default when it says none."""
        try:
            config = json.loads((Path(str(args.get("path") or "")).expanduser()
                                 / "config.json").read_text())
        except (OSError, ValueError):
            return int(cls.max_context)
        text = config.get("text_config") if isinstance(config.get("text_config"), dict) \
            else config
        n = text.get("max_position_embeddings")
        return n if isinstance(n, int) and n > 0 else int(cls.max_context)

    def __init__(self, device: torch.device | str = "cpu",
                 dtype: torch.dtype | str = torch.float32, **args: Any) -> None:
        super().__init__(device, dtype, **args)
        try:
            import transformers
        except ImportError as exc:
            raise PipelineError(f"{type(self).__name__} needs transformers, which is not "
                                f"installed ({INSTALL})") from exc
        path = Path(str(args.get("path") or "")).expanduser()
        if not str(args.get("path") or "") or not path.is_dir():
            raise PipelineError(f"model-arg path={str(path)!r} is not a directory with a model")
        self.batched = parse_bool(args.get("batched_decode", True))
        try:
            # two tokenizer objects: ``tokenize`` runs on the tokenizer thread while
            # ``detokenize`` runs on the scheduler thread, and a Rust tokenizer used by two
            # threads at once can raise "Already borrowed"; separate objects share nothing
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(
                str(path), local_files_only=True)
            self._detok = transformers.AutoTokenizer.from_pretrained(
                str(path), local_files_only=True)
            model = transformers.AutoModelForCausalLM.from_pretrained(
                str(path), local_files_only=True, dtype=self.dtype)
        except Exception as exc:  # noqa: BLE001 - any failure to load: one line naming it
            raise PipelineError(f"cannot load a causal LM from {path}: "
                                f"{first_line(exc)}") from exc
        self.model = model.to(self.device).eval().requires_grad_(False)
        config = self.model.config
        text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
        self.max_context = _max_context(text_config, self.tokenizer)
        self.eos_token_id = _eos(self.tokenizer, self.model)
        self._keep_last = _takes(self.model, "logits_to_keep")
        # transformers 5.x calls the cache ``cache``; older versions ``past_key_values`` (5.x
        # still takes that name, with a deprecation warning, until 5.40)
        self._cache_kw = "cache" if _takes(self.model, "cache") else "past_key_values"
        self._dynamic_layer, self._dynamic_cache = _dynamic_classes(transformers)

    # ---- inputs and text ---------------------------------------------------------------------
    def sample_inputs(self, n: int, seed: int) -> list[str]:
        """``n`` generic English prompts, the same for the same seed."""
        rng = random.Random(seed)
        order = list(PROMPTS)
        rng.shuffle(order)
        return [order[i % len(order)] for i in range(n)]

    def tokenize(self, prompt: str) -> list[int]:
        """The prompt's ids with the model's own special tokens (a BOS where it uses one), as
        ``tokenizer(prompt)`` gives them to ``generate``."""
        if isinstance(prompt, bytes):
            prompt = prompt.decode("utf-8")
        if not isinstance(prompt, str):
            raise TypeError(f"a prompt is text, not {type(prompt).__name__}")
        return list(self.tokenizer.encode(prompt, add_special_tokens=True))

    def detokenize(self, ids: Sequence[int]) -> str:
        """Text of the ids, special tokens dropped (what a server streams to its client)."""
        return str(self._detok.decode(list(ids), skip_special_tokens=True))

    def detokenizer(self) -> IncrementalDetokenizer:
        """The tokenizers library's own streaming decoder where this tokenizer has one (its
        work per token is bounded); else the contract's whole-text diff."""
        stream = _decode_stream(self._detok)
        return stream if stream is not None else IncrementalDetokenizer(self.detokenize)

    # ---- the KV cache ------------------------------------------------------------------------
    def allocate(self, capacity: int) -> _Sequence:
        """An empty sequence: the model makes its cache on the first prefill."""
        if capacity > self.max_context:
            raise ValueError(f"a sequence of {capacity:,} tokens exceeds the model's context "
                             f"of {self.max_context:,}")
        return _Sequence(capacity=int(capacity))

    def free(self, kv: _Sequence) -> None:
        """Drop the cache's tensors now rather than whenever the handle is collected."""
        kv.cache = None
        kv.length = 0

    # ---- compute -------------------------------------------------------------------------------
    @torch.inference_mode()
    def prefill(self, chunks: Sequence[PrefillChunk]) -> torch.Tensor:
        """One forward per chunk, on that sequence's cache (see the module docstring for why
        not one batch); returns each chunk's last-position logits."""
        rows = []
        for chunk in chunks:
            seq: _Sequence = chunk.kv
            n = len(chunk.tokens)
            if n == 0:
                raise ValueError("an empty prefill chunk")
            _expect(seq, chunk.start, n, "prefill chunk start")
            ids = torch.tensor([list(chunk.tokens)], dtype=torch.long, device=self.device)
            rows.append(self._step(seq, ids, n))
        return torch.cat(rows)

    @torch.inference_mode()
    def decode(self, inputs: Sequence[DecodeInput]) -> torch.Tensor:
        """Each running sequence's next-token logits: one padded batch where every cache is a
        plain full-attention one (and ``batched_decode`` is on), else one forward each."""
        seqs: list[_Sequence] = [i.kv for i in inputs]
        for inp, seq in zip(inputs, seqs):
            _expect(seq, inp.position, 1, "decode position")
        if len(inputs) > 1 and self.batched and all(self._stackable(s) for s in seqs):
            return self._batched_decode(inputs, seqs)
        rows = [self._step(seq, torch.tensor([[int(inp.token)]], dtype=torch.long,
                                             device=self.device), 1)
                for inp, seq in zip(inputs, seqs)]
        return torch.cat(rows)

    # ---- internals -----------------------------------------------------------------------------
    def _forward(self, cache: Any, **kw: Any) -> tuple[torch.Tensor, Any]:
        """One forward on ``cache``: (the last position's logits ``[batch, vocab]``, the
        cache the model returns — the same object when it was given one)."""
        if self._keep_last:
            kw["logits_to_keep"] = 1  # the lm_head only where a token is sampled
        out = self.model(use_cache=True, return_dict=True, **{self._cache_kw: cache}, **kw)
        new = getattr(out, "cache", None)
        if new is None:
            new = getattr(out, "past_key_values", None)
        return out.logits[:, -1, :], new

    def _step(self, seq: _Sequence, ids: torch.Tensor, n: int) -> torch.Tensor:
        """``ids`` (``[1, n]``) through the model on ``seq``'s cache: positions follow from the
        cache's length, as in ``generate``."""
        logits, seq.cache = self._forward(seq.cache, input_ids=ids)
        seq.length += n
        return logits

    def _stackable(self, seq: _Sequence) -> bool:
        """Whether ``seq``'s cache is layers of plain K/V tensors of full attention, which
        left-padding and stacking leave correct (a sliding window or a recurrent state would
        not be)."""
        layers = getattr(seq.cache, "layers", None)
        return (self._dynamic_layer is not None and type(seq.cache) is self._dynamic_cache
                and bool(layers) and all(type(layer) is self._dynamic_layer
                                         for layer in layers))

    def _batched_decode(self, inputs: Sequence[DecodeInput],
                        seqs: list[_Sequence]) -> torch.Tensor:
        """One decode step for all ``seqs``: caches left-padded with zeros to the longest and
        stacked; the mask hides the pads, position ids give each its true position; then each
        sequence takes back its own rows, pads dropped."""
        longest = max(s.length for s in seqs)
        n_layers = len(seqs[0].cache.layers)
        stacked = []
        for layer in range(n_layers):
            keys, values = [], []
            for s in seqs:
                k, v = s.cache.layers[layer].keys, s.cache.layers[layer].values
                pad = longest - k.shape[-2]
                keys.append(torch.nn.functional.pad(k, (0, 0, pad, 0)) if pad else k)
                values.append(torch.nn.functional.pad(v, (0, 0, pad, 0)) if pad else v)
            stacked.append((torch.cat(keys), torch.cat(values)))
        cache = self._dynamic_cache(stacked)
        mask = torch.zeros(len(seqs), longest + 1, dtype=torch.long, device=self.device)
        for row, s in enumerate(seqs):
            mask[row, longest - s.length:] = 1
        ids = torch.tensor([[int(i.token)] for i in inputs], dtype=torch.long,
                           device=self.device)
        positions = torch.tensor([[s.length] for s in seqs], dtype=torch.long,
                                 device=self.device)
        # the mask is sized and offset from the (padded) cache, so the query sits at index
        # ``longest`` for every row; the position ids only feed the rotary embedding
        logits, merged = self._forward(cache, input_ids=ids, attention_mask=mask,
                                       position_ids=positions)
        for row, s in enumerate(seqs):
            first = longest - s.length  # this row's pads end here
            s.cache = self._dynamic_cache(
                [(layer.keys[row:row + 1, :, first:], layer.values[row:row + 1, :, first:])
                 for layer in merged.layers])
            s.length += 1
        return logits


def _expect(seq: _Sequence, start: int, n: int, what: str) -> None:
    """The step's first position is the one after what ``seq`` holds, and it fits."""
    if start != seq.length:
        raise ValueError(f"{what} {start} but this sequence's cache holds {seq.length} "
                         "positions")
    if seq.length + n > seq.capacity:
        raise ValueError(f"{seq.length + n:,} tokens exceed this sequence's allocated "
                         f"{seq.capacity:,}")


def _max_context(config: Any, tokenizer: Any) -> int:
    """The model's positions (``max_position_embeddings``); else a tokenizer's sane
    ``model_max_length``; else the contract's default."""
    n = getattr(config, "max_position_embeddings", None)
    if isinstance(n, int) and n > 0:
        return n
    n = getattr(tokenizer, "model_max_length", None)
    if isinstance(n, int) and 0 < n < 10 ** 7:  # unset, it is a huge sentinel
        return n
    return GenerativePipeline.max_context


def _eos(tokenizer: Any, model: Any) -> int | None:
    """The end-of-sequence id: the tokenizer's, else the generation config's or the model
    config's (the first where they give a list)."""
    for value in (getattr(tokenizer, "eos_token_id", None),
                  getattr(getattr(model, "generation_config", None), "eos_token_id", None),
                  getattr(model.config, "eos_token_id", None)):
        if isinstance(value, (list, tuple)):
            value = value[0] if value else None
        if isinstance(value, int):
            return value
    return None


def _takes(model: Any, name: str) -> bool:
    """Whether the model's ``forward`` accepts the keyword ``name``."""
    import inspect

    try:
        return name in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def _dynamic_classes(transformers: Any) -> tuple[Any, Any]:
    """``(DynamicLayer, DynamicCache)`` of this ``transformers``; ``(None, None)`` where it
    has no per-layer cache objects (older versions), which turns batched decode off."""
    cache_utils = getattr(transformers, "cache_utils", None)
    layer = getattr(cache_utils, "DynamicLayer", None)
    cache = getattr(transformers, "DynamicCache", None)
    return (layer, cache) if layer is not None and cache is not None else (None, None)


class _StreamDetokenizer(IncrementalDetokenizer):
    """``tokenizers.decoders.DecodeStream`` behind the contract's ``step``: the library's own
    incremental decode (it holds back a partial UTF-8 character itself)."""

    def __init__(self, backend: Any, stream: Any) -> None:
        self._backend = backend
        self._stream = stream

    def step(self, token: int) -> str:
        return self._stream.step(self._backend, int(token)) or ""


def _decode_stream(tokenizer: Any) -> IncrementalDetokenizer | None:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    try:
        from tokenizers.decoders import DecodeStream
    except ImportError:
        return None
    if backend is None:
        return None
    return _StreamDetokenizer(backend, DecodeStream(skip_special_tokens=True))
