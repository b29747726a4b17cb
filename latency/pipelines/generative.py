"""The generative pipeline contract: prompt → tokenize → prefill → decode steps → detokenize.

This is the public contract for profiling your own LLM (``latency.GenerativePipeline``; the
walk-through is docs/generation.md). As with ``latency.Pipeline``, the engine times every stage
from the outside, so a pipeline only says what each stage does. The engine owns the clock, the
scheduler (which sequences run in each step, how prompts are chunked, when a sequence is
preempted) and the threads; a pipeline owns its model, its tokenizer and its KV cache.

What each method is charged to, and on which thread it runs:

=================  =====================  =================================  ==============
method             runs on                how often                          its time is
=================  =====================  =================================  ==============
``tokenize``       the tokenizer thread   once per request                   ``tokenize``
``allocate``       the scheduler thread   when a sequence is admitted        ``prefill``
``prefill``        the scheduler thread   once per step with prompt chunks   ``prefill``
``decode``         the scheduler thread   once per step with running seqs    ``decode``
``sample``         the scheduler thread   after each prefill/decode call     that call's
``detokenize``     the scheduler thread   once per token produced            ``detokenize``
``free``           the scheduler thread   when a sequence ends or is         (not charged)
                                          preempted
=================  =====================  =================================  ==============

- A **step** is one iteration of the scheduler (Orca's iteration-level scheduling): at most one
  ``prefill`` call (a chunk of each prompt being prefilled) and one ``decode`` call (one token
  for each running sequence). Every sequence in a call shares its time: that is batching.
- ``prefill`` gets chunks of prompts whose earlier tokens are already in each sequence's KV
  cache (``PrefillChunk.start``); it returns the logits of each chunk's *last* position, one row
  per chunk. The engine samples the first token from a chunk that completes its prompt (as
  vLLM does), so a request's first token comes from the step that finishes its prefill.
- ``decode`` gets each running sequence's last token and its position; it returns one row of
  logits per sequence. ``sample`` turns rows into token ids (default: greedy, argmax).
- ``allocate(capacity)`` makes a sequence's KV cache for up to ``capacity`` tokens; ``free``
  releases it. A sequence preempted because the KV budget ran out is freed and later
  re-allocated and prefilled again from its prompt and the tokens it already produced
  (recompute, as vLLM does by default).
- Return from ``prefill``/``decode`` when the output exists; the engine synchronises CUDA before
  it reads the clock. Never read a clock or synchronise yourself.
- Any method may raise: a failed ``prefill`` or ``decode`` fails only the sequences of that
  call; a failed ``tokenize`` fails its request. The run goes on.
- Raw inputs are prompts (``str``): ``sample_inputs(n, seed)`` returns some (the engine cuts or
  repeats their tokens for ``--prompt-tokens``), or the run is given ``--prompts FILE``.
"""
from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from latency.core.errors import PipelineError
from latency.pipelines.contract import Pipeline

__all__ = ["DecodeInput", "GenerativePipeline", "IncrementalDetokenizer", "PrefillChunk",
           "is_generative"]


@dataclass(frozen=True)
class PrefillChunk:
    """Part of one prompt to prefill in this step: ``tokens`` go at positions
    ``start .. start + len(tokens) - 1`` of the sequence whose KV cache is ``kv`` (the positions
    before ``start`` are already in it)."""

    kv: Any
    tokens: Sequence[int]
    start: int


@dataclass(frozen=True)
class DecodeInput:
    """One running sequence in a decode step: its last token, at ``position``, whose K/V the
    step appends to ``kv`` while it computes the next token's logits."""

    kv: Any
    token: int
    position: int


class IncrementalDetokenizer:
    """Text of one sequence, a token at a time: each ``step`` returns only the new characters.

    Why not decode each token alone: a subword tokenizer's pieces are not text on their own (a
    byte-level BPE token may hold half of a UTF-8 character, a leading space belongs to the next
    word). This decodes the whole sequence so far and returns what it adds; a trailing
    replacement character (an incomplete UTF-8 sequence) is held back until the next token
    completes it. Cost grows with the sequence, so it keeps a window of the last
    ``window`` tokens once the text before them is settled.
    """

    def __init__(self, decode: Callable[[Sequence[int]], str], window: int = 8) -> None:
        self._decode = decode
        self._ids: list[int] = []
        self._emitted = ""  # text of ``_ids`` already returned
        self._window = window

    def step(self, token: int) -> str:
        self._ids.append(int(token))
        text = self._decode(self._ids)
        if text.endswith("\ufffd"):
            return ""  # an incomplete character: wait for the rest of its bytes
        new = text[len(self._emitted):] if text.startswith(self._emitted) else text
        self._emitted = text
        if len(self._ids) > 2 * self._window:  # forget settled tokens (bounded work a step)
            self._ids = self._ids[-self._window:]
            self._emitted = self._decode(self._ids)
        return new


class GenerativePipeline(Pipeline):
    """A generative (LLM) pipeline: subclasses set ``name``, ``description``, ``max_context``
    and, optionally, ``model_args``, ``dtypes`` and ``eos_token_id``, and implement
    ``tokenize``, ``detokenize``, ``prefill`` and ``decode`` (see the module docstring)."""

    #: a generative pipeline is served by the continuous-batching scheduler, not one-shot
    generative: ClassVar[bool] = True
    #: the most tokens (prompt + output) one sequence may hold
    max_context: int = 2048
    #: the end-of-sequence token: a run stops on it only when asked (``--stop-on-eos``);
    #: otherwise every request generates exactly its ``--output-tokens``, as the peers'
    #: benchmarks do (``ignore_eos``)
    eos_token_id: int | None = None

    @classmethod
    def context_for(cls, args: dict[str, Any]) -> int:
        """The context a pipeline built with these model-args will have, known before it is
        built (so a run that cannot fit is refused first). Override when a model-arg sets it."""
        return int(cls.max_context)

    # ---- text ------------------------------------------------------------------------------
    @abc.abstractmethod
    def tokenize(self, prompt: str) -> list[int]:
        """A prompt's text → its token ids."""

    @abc.abstractmethod
    def detokenize(self, ids: Sequence[int]) -> str:
        """Token ids → their text (the whole sequence given; ``detokenizer`` makes it
        incremental)."""

    def detokenizer(self) -> IncrementalDetokenizer:
        """A new incremental detokenizer for one sequence. Override with a faster one (e.g.
        ``tokenizers.decoders.DecodeStream``) if the tokenizer has it."""
        return IncrementalDetokenizer(self.detokenize)

    # ---- the KV cache ------------------------------------------------------------------------
    def allocate(self, capacity: int) -> Any:
        """A KV cache for one sequence of up to ``capacity`` tokens (default: none needed)."""
        return None

    def free(self, kv: Any) -> None:  # noqa: B027 - optional hook
        """Release a sequence's KV cache (default: garbage collection does)."""

    # ---- compute -------------------------------------------------------------------------------
    @abc.abstractmethod
    def prefill(self, chunks: Sequence[PrefillChunk]) -> Any:
        """Prompt chunks in (their K/V written to each chunk's cache) → logits of each chunk's
        last position, one row per chunk (a tensor ``[len(chunks), vocab]``)."""

    @abc.abstractmethod
    def decode(self, inputs: Sequence[DecodeInput]) -> Any:
        """One token per running sequence in (its K/V appended) → the next token's logits,
        one row per input (a tensor ``[len(inputs), vocab]``)."""

    def sample(self, logits: Any) -> list[int]:
        """Logits rows → token ids; default greedy (argmax), which makes runs repeatable."""
        return [int(i) for i in logits.argmax(dim=-1).tolist()]

    # ---- the one-shot stages: a generative pipeline is not served one request at a time ----
    def preprocess(self, raw: Any) -> Any:
        raise PipelineError(f"{type(self).__name__} is generative: it is served by the "
                            "generation scheduler (run it with --output-tokens), not one-shot")

    def forward(self, batch: Any) -> Any:
        return self.preprocess(batch)

    def postprocess(self, item: Any) -> Any:
        return self.preprocess(item)


def is_generative(cls_or_obj: Any) -> bool:
    """Whether a pipeline class or object is generative (a ``GenerativePipeline``)."""
    cls = cls_or_obj if isinstance(cls_or_obj, type) else type(cls_or_obj)
    return isinstance(cls, type) and issubclass(cls, GenerativePipeline)
