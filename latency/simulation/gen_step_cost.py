"""What one scheduler step costs, fitted from a recorded generation run's steps: the cost model a
simulator of iteration-level scheduling draws its step times from.

A step prefills some prompt tokens (in one call) and decodes one token for each running
sequence (in another); its time is modelled as

    step = fixed + [prefill] · (prefill_fixed + per_prefill_chunk · chunks
                                + per_prefill_token · prompt tokens
                                + per_attention · attention pairs)
                 + [decode]  · (decode_fixed + [batched] · batched_decode
                                + per_sequence · sequences + per_kv_token · KV held)

— Vidur's and DistServe's form (a prefill is compute-bound in its tokens, a decode step
memory-bound in its batch and its context). The attention pairs (``STEP_DTYPE.prefill_attn``:
each prompt token times the positions it attends) make a long prompt's prefill grow faster
than its length, as a transformer's does; a run recorded without them fits without the term.
A prefill call holding several prompt chunks may pay a fixed cost for each (a pipeline that
runs its chunks one forward each, as tiny-lm does) or one for the call (one fused forward, as
vLLM's): both terms are fitted, and the data choose — priced per call alone, a chunked
prefill's many one-chunk calls are charged the fixed cost that whole-prompt calls of several
prompts spread over their chunks.
The coefficients are non-negative least squares of the relative error over the recorded steps
(``scipy.optimize.nnls``: a negative cost is not physical), and the fit says how good it is —
R² and the median and p90 relative error of the steps it predicts — so a simulator that uses
it can show its error beside its figures.

A decode call of two or more sequences may cost a step more than a line through the lone
sequence's call says (``batched_decode``, fitted like the rest, zero where the data do not
ask for it): a pipeline may run a lone sequence down another path — tiny-lm sends it through
its prefill path, as one chunk; a batched one through a ragged batch that attends each
sequence's own cache — and a GPU server pads batches to the sizes its graphs were captured
at. Fitted as one line, the lone calls (most of a light load's steps) pull the line under
every batch of two to four and over the full ones: on tiny-lm's calibration the calls of 2–4
sequences took 1.11× the line, those of 5–8 0.90×, and a held-out run decoding mostly 2–4 at
a time came out with its TPOT 18 % short.

Why the two indicators: a call has a cost of its own (a kernel launch, a Python call into the
pipeline) whether it carries one token or a thousand; without them a fit through the origin
charges that cost to the tokens. The step's own ``fixed`` is fitted only where it can be told
apart from them — a whole step's, over steps that hold both calls (chunked prefill): in a
prefill-first run every step holds one call, and the three fixed terms are one sum.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

#: the coefficients, in the order of the design matrix's columns (ms each)
TERMS: tuple[str, ...] = ("fixed_ms", "prefill_fixed_ms", "per_prefill_token_ms",
                          "decode_fixed_ms", "per_sequence_ms", "per_kv_token_ms",
                          "per_attention_ms", "per_prefill_chunk_ms", "batched_decode_ms")
#: the terms of the prefill call and of the decode call (a what-if scales each call's own)
PREFILL_TERMS: tuple[str, ...] = ("prefill_fixed_ms", "per_prefill_chunk_ms",
                                  "per_prefill_token_ms", "per_attention_ms")
DECODE_TERMS: tuple[str, ...] = ("decode_fixed_ms", "batched_decode_ms", "per_sequence_ms",
                                 "per_kv_token_ms")
#: the fewest steps a fit is made from
MIN_STEPS = 20
#: a decode call of at least this many sequences pays ``batched_decode_ms``
BATCHED_SEQUENCES = 2


class FitError(ValueError):
    """The steps cannot give a cost model (too few, or no variation to fit)."""


@dataclass(frozen=True)
class StepCost:
    """A step's cost model (ms) and how well it fitted the steps it came from."""

    fixed_ms: float
    prefill_fixed_ms: float
    per_prefill_token_ms: float
    decode_fixed_ms: float
    per_sequence_ms: float
    per_kv_token_ms: float
    per_attention_ms: float = 0.0
    per_prefill_chunk_ms: float = 0.0
    #: a decode call of two or more sequences, beyond the line through the lone one's
    batched_decode_ms: float = 0.0
    #: the fit: steps used, R², the median and p90 of |predicted − measured| / measured
    steps: int = 0
    r2: float = 0.0
    median_error: float = 0.0
    p90_error: float = 0.0

    def predict_ms(self, prefill_tokens: np.ndarray, decode_seqs: np.ndarray,
                   kv_tokens: np.ndarray, attention: np.ndarray | None = None,
                   prefill_chunks: np.ndarray | None = None) -> np.ndarray:
        """Each step's predicted time (ms); ``attention``: its prefill's attention pairs
        (none given: 0); ``prefill_chunks``: the prompt chunks its prefill call held (none
        given: one per call that prefills)."""
        p = np.asarray(prefill_tokens)
        a = np.zeros(p.shape) if attention is None else np.asarray(attention)
        c = (p > 0).astype(np.int64) if prefill_chunks is None else np.asarray(prefill_chunks)
        return _design(p, np.asarray(decode_seqs), np.asarray(kv_tokens), a, c) \
            @ self.coefficients()

    def prefill_call_ms(self, tokens: int, chunks: int, attention: float) -> float:
        """One prefill call's time (ms): ``chunks`` prompt chunks of ``tokens`` in all, with
        ``attention`` pairs — the prefill part of ``predict_ms``, for one step at a time."""
        return (self.prefill_fixed_ms + self.per_prefill_chunk_ms * chunks
                + self.per_prefill_token_ms * tokens + self.per_attention_ms * attention)

    def decode_call_ms(self, sequences: int, kv_tokens: int) -> float:
        """One decode call's time (ms): ``sequences`` decoding, ``kv_tokens`` held by them —
        the decode part of ``predict_ms``, for one step at a time."""
        return (self.decode_fixed_ms + self.batched_decode_ms * (sequences >= BATCHED_SEQUENCES)
                + self.per_sequence_ms * sequences + self.per_kv_token_ms * kv_tokens)

    def coefficients(self) -> np.ndarray:
        return np.array([getattr(self, t) for t in TERMS])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def scaled(self, decode: float = 1.0, prefill: float = 1.0) -> StepCost:
        """The same calls with the decode call's terms (or the prefill call's) this many
        times as large."""
        return replace(self, **{t: getattr(self, t) * prefill for t in PREFILL_TERMS},
                       **{t: getattr(self, t) * decode for t in DECODE_TERMS})

    def calls_text(self, call: str = "") -> str:
        """The two calls' terms in words, 'prefill (1.000 + 0.0200/token) + decode (2.000 +
        0.5000/sequence)' (``call``: a word after each call's name)."""
        kv = f" + {self.per_kv_token_ms:.2e}/KV token" if self.per_kv_token_ms else ""
        attn = f" + {self.per_attention_ms:.2e}/attention pair" if self.per_attention_ms else ""
        chunk = f" + {self.per_prefill_chunk_ms:.3f}/chunk" if self.per_prefill_chunk_ms else ""
        batched = (f" + {self.batched_decode_ms:.3f} if batched" if self.batched_decode_ms
                   else "")
        return (f"prefill{call} ({self.prefill_fixed_ms:.3f}{chunk} + "
                f"{self.per_prefill_token_ms:.4f}/token{attn}) + decode{call} "
                f"({self.decode_fixed_ms:.3f}{batched} "
                f"+ {self.per_sequence_ms:.4f}/sequence{kv})")

    def describe(self) -> str:
        """'step = 0.02 + prefill (1.00 + 0.0200/token) + decode (2.00 + 0.500/seq + …) ms;
        fitted on 812 steps, R² 0.998, median error 1.2 %, p90 3.4 %'."""
        return (f"step = {self.fixed_ms:.3f} + {self.calls_text()} ms; fitted on "
                f"{self.steps:,} steps, R² {self.r2:.3f}, median error "
                f"{self.median_error:.1%}, p90 {self.p90_error:.1%}")


def _design(prefill_tokens: np.ndarray, decode_seqs: np.ndarray, kv_tokens: np.ndarray,
            attention: np.ndarray, chunks: np.ndarray) -> np.ndarray:
    p = prefill_tokens.astype(np.float64)
    d = decode_seqs.astype(np.float64)
    kv = kv_tokens.astype(np.float64)
    has_p = (p > 0).astype(np.float64)
    has_d = (d > 0).astype(np.float64)
    return np.column_stack([np.ones_like(p), has_p, p, has_d, d, kv * has_d,
                            attention.astype(np.float64) * has_p,
                            chunks.astype(np.float64) * has_p,
                            (d >= BATCHED_SEQUENCES).astype(np.float64)])


def fit_step_cost(steps: np.ndarray, of: str = "step") -> StepCost:
    """The cost model of a run's scheduler steps (rows of ``gen_records.STEP_DTYPE``): of each
    whole step (``"step"``: what a simulator must reproduce, the scheduler's own work and
    detokenizing included) or of the pipeline's calls alone (``"calls"``: the model's cost).
    FitError (one line) when there are fewer than ``MIN_STEPS`` or nothing to fit."""
    if of not in ("step", "calls"):
        raise ValueError(f"of must be 'step' or 'calls', not {of!r}")
    steps = steps[steps["t_end"] > steps["t_start"]]
    if len(steps) < MIN_STEPS:
        raise FitError(f"{len(steps)} scheduler steps: a step cost model needs at least "
                       f"{MIN_STEPS}")
    took = steps["t_end"] - steps["t_start"] if of == "step" else steps["call_ns"]
    measured = took.astype(np.float64) / 1e6
    x = _design(steps["prefill_tokens"], steps["decode_seqs"], steps["kv_used"],
                steps["prefill_attn"], steps["prefill_seqs"])
    exercised = np.asarray(x.any(axis=0))  # a term no step exercised is left at zero
    # the step's own fixed cost is told apart from the calls' only by steps holding both
    # calls; without them (prefill-first) it is the calls' fixed costs' sum, and a call's
    # time never holds the step's own work at all: left to the calls' own fixed terms
    both = bool(((x[:, 1] > 0) & (x[:, 3] > 0)).any())
    exercised[0] = of == "step" and both
    used = np.flatnonzero(exercised)
    coef = np.zeros(len(TERMS))
    # relative errors, not absolute ones: each step weighs 1/its time, so a run's few long
    # prefills do not buy their fit with its many short decode steps' (the gaps between
    # tokens are made of those)
    coef[used] = weighted_nnls(x[:, used], measured, 1.0 / np.maximum(measured, 1e-6))
    r2, median, p90 = fit_errors(measured, x @ coef)
    terms = {t: float(c) for t, c in zip(TERMS, coef, strict=True)}
    return StepCost(**terms, steps=len(steps), r2=r2, median_error=median, p90_error=p90)


def weighted_nnls(x: np.ndarray, y: np.ndarray, weight: np.ndarray | None = None
                  ) -> np.ndarray:
    """The non-negative least-squares coefficients of ``x @ coef ≈ y`` (``scipy.optimize.nnls``:
    a negative cost is not physical), each row weighted by ``weight`` (none: alike), solved
    with each column scaled to its largest value (conditioning: seconds beside tokens²)."""
    from scipy.optimize import nnls

    w = np.ones(len(y)) if weight is None else weight
    scale = np.maximum(np.abs(x).max(axis=0), 1e-12)
    solved, _ = nnls(x / scale * w[:, None], y * w)
    return solved / scale


def fit_errors(measured: np.ndarray, predicted: np.ndarray) -> tuple[float, float, float]:
    """How well ``predicted`` fits ``measured``: R², and the median and p90 of
    |predicted − measured| / measured."""
    resid = measured - predicted
    total = float(((measured - measured.mean()) ** 2).sum())
    r2 = 1.0 - float((resid ** 2).sum()) / total if total > 0 else 1.0
    rel = np.abs(resid) / np.maximum(measured, 1e-9)
    return r2, float(np.median(rel)), float(np.quantile(rel, 0.9))
