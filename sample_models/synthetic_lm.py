"""A generative pipeline whose steps hold set times: the known answers for generation.

A prefill call holds ``prefill_ms`` + ``prefill_ms_per_token`` × the prompt tokens it
prefills (all its chunks together); a decode step holds ``step_ms`` + ``step_ms_per_seq`` ×
the sequences in it (+ ``step_ms_per_context_token`` × the tokens they hold, the cost of
attention over a growing cache). Those are the shapes of a real LLM's costs — prefill
proportional to the prompt, a decode step that a batch shares — with every constant known, so
a test can say what TTFT, ITL and the stalls must be.

The text is words: a prompt's tokens are its words (a fixed vocabulary, unknown words hashed
into it), and each next word is a fixed function of the last, so a run is repeatable.
"""
from __future__ import annotations

import threading
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from latency.core.timing import hold_ns
from latency.pipelines.contract import ModelArg
from latency.pipelines.generative import DecodeInput, GenerativePipeline, PrefillChunk

MAX_MS = 10_000.0
WORDS = tuple("""the a of and to in is it that was for on are with as his they be at one have
this from or had by hot word but what some we can out other were all there when up use your
how said an each she which do their time if will way about many then them write would like so
these her long make thing see him two has look more day could go come did number sound no most
people my over know water than call first who may down side been now find any new work part
take get place made live where after back little only round man year came show every good me
give our under name very through just form sentence great think say help low line differ turn
cause much mean before move right boy old too same tell does set three want air well also play
small end put home read hand port large spell add even land here must big high such follow act
why ask men change went light kind off need house picture try us again animal point mother world
near build self earth father head stand own page should country found answer school grow study
still learn plant cover food sun four between state keep eye never last let thought city tree
cross farm hard start might story saw far sea draw left late run while press close night real
life few north open seem together next white children begin got walk example ease paper group
always music those both mark often letter until mile river car feet care second book carry took
science eat room friend began idea fish mountain stop once base hear horse cut sure watch colour
face wood main enough plain girl usual young ready above ever red list though feel talk bird soon
body dog family direct pose leave song measure door product black short numeral class wind
question happen complete ship area half rock order fire south problem piece told knew pass since
top whole king space heard best hour better true during hundred five remember step early hold
west ground interest reach fast verb sing listen six table travel less morning ten simple several
vowel toward war lay against pattern slow centre love person money serve appear road map rain
rule govern pull cold notice voice unit power town fine certain fly fall lead cry dark machine
note wait plan figure star box noun field rest correct able pound done beauty drive stood contain
front teach week final gave green oh quick develop ocean warm free minute strong special mind
behind clear tail produce fact street inch multiply nothing course stay wheel full force blue
object decide surface deep moon island foot system busy test record boat common gold possible
plane stead dry wonder laugh thousand ago ran check game shape equate miss brought heat snow tire
bring yes distant fill east paint language among""".split())


class SyntheticLMPipeline(GenerativePipeline):
    """Prefill and decode steps that take the times you set."""

    name = "synthetic-lm"
    description = ("Generation with set costs: prefill ms per prompt token, a decode step's ms "
                   "(+ per sequence in it): known answers for TTFT, ITL and stalls")
    dtypes = ("float32", "bfloat16", "float16")
    model_args = (
        ModelArg("prefill_ms", float, 1.0, "fixed time of a prefill call (ms)", low=0,
                 high=MAX_MS),
        ModelArg("prefill_ms_per_token", float, 0.05, "prefill time per prompt token (ms)",
                 low=0, high=MAX_MS),
        ModelArg("step_ms", float, 4.0, "fixed time of a decode step (ms)", low=0,
                 high=MAX_MS),
        ModelArg("step_ms_per_seq", float, 0.5,
                 "decode step time per sequence in the step (ms)", low=0, high=MAX_MS),
        ModelArg("step_ms_per_context_token", float, 0.0,
                 "decode step time per token held by its sequences (ms)", low=0, high=MAX_MS),
        ModelArg("max_context", int, 4096, "the most tokens one sequence may hold", low=8,
                 high=1_000_000),
        ModelArg("fail_decode_at", int, 0,
                 "the decode call of this number raises (0: none): one failing step", low=0,
                 high=10_000_000),
    )

    def __init__(self, device: torch.device | str = "cpu",
                 dtype: torch.dtype | str = torch.float32, **args: Any) -> None:
        super().__init__(device, dtype, **args)
        self.check_args(args)
        self.prefill_ms = float(args.get("prefill_ms", 1.0))
        self.prefill_ms_per_token = float(args.get("prefill_ms_per_token", 0.05))
        self.step_ms = float(args.get("step_ms", 4.0))
        self.step_ms_per_seq = float(args.get("step_ms_per_seq", 0.5))
        self.step_ms_per_context_token = float(args.get("step_ms_per_context_token", 0.0))
        self.max_context = int(args.get("max_context", 4096))
        self.fail_decode_at = int(args.get("fail_decode_at", 0))
        self.eos_token_id = 0
        self._index = {w: i for i, w in enumerate(WORDS)}
        self._decode_calls = 0
        self._lock = threading.Lock()

    @classmethod
    def context_for(cls, args: dict[str, Any]) -> int:
        return int(args.get("max_context", 4096))

    # ---- the costs, as the known answers say them ---------------------------------------------
    def prefill_time_ms(self, tokens: int) -> float:
        """What a prefill call of ``tokens`` prompt tokens holds."""
        return self.prefill_ms + self.prefill_ms_per_token * tokens

    def step_time_ms(self, seqs: int, context_tokens: int = 0) -> float:
        """What a decode step of ``seqs`` sequences holding ``context_tokens`` holds."""
        return (self.step_ms + self.step_ms_per_seq * seqs
                + self.step_ms_per_context_token * context_tokens)

    # ---- text ------------------------------------------------------------------------------------
    def sample_inputs(self, n: int, seed: int) -> list[str]:
        rng = np.random.default_rng(seed)
        return [" ".join(WORDS[i] for i in rng.integers(1, len(WORDS), size=int(k)))
                for k in rng.integers(24, 160, size=n)]

    def tokenize(self, prompt: str) -> list[int]:
        index = self._index
        return [index.get(w, 1 + zlib.crc32(w.encode()) % (len(WORDS) - 1))
                for w in prompt.split()]

    def detokenize(self, ids: Sequence[int]) -> str:
        return "".join(f" {WORDS[int(i) % len(WORDS)]}" for i in ids)

    # ---- compute ---------------------------------------------------------------------------
    def _logits(self, last: Sequence[int]) -> torch.Tensor:
        """One-hot rows: the next word is a fixed function of the last (never EOS, 0)."""
        nxt = torch.tensor([1 + (int(t) * 7 + 3) % (len(WORDS) - 1) for t in last])
        return torch.nn.functional.one_hot(nxt, len(WORDS)).float()

    def prefill(self, chunks: Sequence[PrefillChunk]) -> torch.Tensor:
        tokens = sum(len(c.tokens) for c in chunks)
        hold_ns(int(self.prefill_time_ms(tokens) * 1e6))
        return self._logits([c.tokens[-1] for c in chunks])

    def decode(self, inputs: Sequence[DecodeInput]) -> torch.Tensor:
        with self._lock:
            self._decode_calls += 1
            calls = self._decode_calls
        if self.fail_decode_at and calls == self.fail_decode_at:
            raise RuntimeError(f"decode call {calls} failed (fail_decode_at)")
        context = sum(i.position for i in inputs)
        hold_ns(int(self.step_time_ms(len(inputs), context) * 1e6))
        return self._logits([i.token for i in inputs])
