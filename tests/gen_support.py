"""What the generation tests share: the gaps of a result and the checks that its figures add
up exactly (per request, per TTFT and per gap), in process and over HTTP alike."""
from __future__ import annotations

from typing import Any

import numpy as np

from latency.core.gen_records import (
    GAP_COMPONENTS,
    GEN_COMPONENTS,
    TTFT_COMPONENTS,
    component_ns,
    token_gaps,
    ttft_parts,
)


def gaps(result: Any) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Every gap between consecutive tokens of the result's requests, and its parts."""
    return token_gaps(result.tokens)


def assert_adds_up(result: Any, rows: np.ndarray) -> dict[str, np.ndarray]:
    """Each request's components sum to its E2E, TTFT's parts to its TTFT and each gap's
    parts to the gap, to the nanosecond; no part is negative; each request's tokens are as
    many as it received, delivered in order. Returns the requests' components."""
    comps = component_ns(rows)
    assert np.array_equal(sum(comps[c] for c in GEN_COMPONENTS), comps["e2e"])
    first = ttft_parts(rows)
    assert np.array_equal(sum(first[c] for c in TTFT_COMPONENTS), comps["ttft"])
    total, parts = gaps(result)
    assert np.array_equal(sum(parts[c] for c in GAP_COMPONENTS), total)
    for c in GEN_COMPONENTS:
        assert (comps[c] >= 0).all(), c
    t = result.tokens
    for i in np.flatnonzero(~result.rows["warmup"])[:10]:
        mine = t[t["request"] == i]
        assert len(mine) == result.rows["output_tokens"][i]
        assert (np.diff(mine["t_delivered"]) >= 0).all()
    return comps


def decode_steps(result: Any, seqs: int) -> np.ndarray:
    """The result's steps that decoded ``seqs`` sequences and prefilled nothing, in order."""
    s = result.steps
    return s[(s["prefill_seqs"] == 0) & (s["decode_seqs"] == seqs)]


#: what a synthetic-lm decode call adds to the time it holds: its own logits and the sampling
#: (a few torch operations on a few rows — ~0.1 ms on a quiet VM, 0.35 ms seen on a slow one)
CALL_OWN_MS = 0.6


def assert_call_holds(result: Any, seqs: int, held_ms: float, note: Any) -> None:
    """The median decode call of ``seqs`` sequences held ``held_ms`` (never less) plus at most
    its own work (``CALL_OWN_MS``)."""
    call = decode_call_ms(result, seqs)
    assert held_ms <= call <= held_ms + CALL_OWN_MS, (call, held_ms, note)


def decode_call_ms(result: Any, seqs: int) -> float:
    """The median decode call of ``seqs`` sequences, as the scheduler stamped it (ms): what
    the pipeline held, whatever the machine did around it."""
    return float(np.median(decode_steps(result, seqs)["call_ns"])) / 1e6


def step_period_ms(result: Any, seqs: int) -> float:
    """The median time from one decode-only step of ``seqs`` sequences to the next on the same
    replica (ms), measured in the run: the gap between tokens when each gap is one step — the
    call, the scheduler's own work and the hand-offs, at the speed this machine ran them."""
    s = result.steps
    cur, nxt = s[:-1], s[1:]
    both = ((cur["prefill_seqs"] == 0) & (nxt["prefill_seqs"] == 0)
            & (cur["decode_seqs"] == seqs) & (nxt["decode_seqs"] == seqs)
            & (cur["replica"] == nxt["replica"]))
    return float(np.median(nxt["t_start"][both] - cur["t_start"][both])) / 1e6


def recorded_synthetic_lm_run(rate: float = 30) -> Any:
    """A short measured synthetic-lm generation (80 requests at ``rate``/s, prompts 16-300,
    outputs 4-24 tokens, 4 slots): a recorded run for the simulator to fit and replay."""
    from latency.core.config import RunConfig
    from latency.execution.gen_engine import execute_generation

    cfg = RunConfig(model="synthetic-lm", rate=rate, max_running=4, requests=80, warmup=4,
                    prompt_tokens="uniform:16:300", output_tokens="uniform:4:24",
                    model_args={"prefill_ms": 1.0, "prefill_ms_per_token": 0.02,
                                "step_ms": 2.0, "step_ms_per_seq": 0.5})
    result = execute_generation(cfg, force=True)
    assert result.status == "completed", result.failure
    return result


def crashing_lm_source(after_calls: int = 0, step_s: float = 0.0) -> str:
    """The source of a generative pipeline (``CrashLM``) whose decode kills its process — a
    crashing native library, not an exception — once it has decoded ``after_calls`` steps of
    ``step_s`` each."""
    return f'''
import os
import time
import torch
from latency.pipelines.generative import GenerativePipeline

class CrashLM(GenerativePipeline):
    name = "crash-lm"
    max_context = 256
    calls = 0

    def sample_inputs(self, n, seed):
        return ["1 2 3"] * n

    def tokenize(self, prompt):
        return [int(w) for w in prompt.split()]

    def detokenize(self, ids):
        return " ".join(map(str, ids))

    def prefill(self, chunks):
        return torch.zeros(len(chunks), 8)

    def decode(self, inputs):
        CrashLM.calls += 1
        if CrashLM.calls > {after_calls}:
            os._exit(3)
        time.sleep({step_s})
        return torch.zeros(len(inputs), 8)
'''
