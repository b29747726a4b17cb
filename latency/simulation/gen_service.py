"""A generation server's costs, fitted from one recorded run: everything the generation
simulator draws its times from.

A scheduler step is the step's own work (planning done, admitting, the bookkeeping), the
pipeline's calls — a prefill call and a decode call — and each new token's detokenizing and
hand-off after its call. The calls' cost is ``gen_step_cost.StepCost`` fitted over the steps'
call times (prefill: fixed + per prompt token; decode: fixed + per sequence + per KV token);
the step's own work is the median of what a step took beyond its calls and its tokens. So a
simulated step's prefill call is charged to prefill, its decode call to decode, as the server's
stamps charge them. A step's time varies around its fitted value — a CPU's caches, the allocator,
another thread — and a simulator that runs every step at its mean would give every request the
same gaps: its p99 would be its p50. So the run's own spread is kept as the quantiles of
measured / predicted step time, for each kind of step apart (prefill only, decode only, both:
a 2 ms decode step on a busy core spreads far more than a 20 ms prefill), and each simulated
step's time is the model's times one of its kind's, drawn at random (resampled residuals, as
one-shot simulation resamples service times).

Not independently, though: a machine's speed drifts (frequency, another tenant, the caches),
so a slow step is followed by slow ones — on this project's 2-core VM, consecutive steps'
ratios correlate at 0.78, and still at 0.3 fifty steps apart. Drawn independently, every
request's gaps would average out to the same TPOT, and its p99 would come out too low. So a
ratio is split in two: the machine's **level** at that moment (the rolling median of the
log ratios over ``LEVEL_WINDOW`` steps: a slow drift) and the step's own **spike** around it
(what is left: the quantiles kept by kind). The level is simulated as an AR(1) process with the
run's own mean, spread and per-step correlation (from its autocorrelation one window apart),
one for each replica; the spikes are drawn independently.

The whole step's fit is judged too (R², the median and p90 relative error of every step's
predicted time against its measured one): that is the error the simulator's outputs show.

Around the steps, what the run measured, each as the median over the run (they are small and
steady; a median ignores the odd outlier the machine made):

- the scheduler's own work between two back-to-back steps (planning, taking new arrivals);
- the tokenizer's time as a line in the prompt's length (one tokenizer thread, FIFO);
- each token's detokenizing (sequential within a call: the k-th token of a call is ready
  k × this after the call ends) and its delivery to the client;
- the network (sent → received) and the client's schedule lag (intended → sent).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from latency.core.gen_records import STATUS_OK
from latency.simulation.gen_step_cost import (
    FitError,
    StepCost,
    fit_errors,
    fit_step_cost,
    weighted_nnls,
)

#: how many quantiles of a kind's spikes are kept (every 0.05 %): fine enough that the top
#: 1 % of draws are spread as the run's top 1 % were — with a percentile grid, the 1 % of
#: draws between p99 and the maximum would land evenly up to a single step's worst hiccup
RATIO_QUANTILES = 2001
#: the quantiles a result's JSON shows of each kind (every percentile)
SHOWN_QUANTILES = 101
#: the kinds of step whose spreads are kept apart; "all" pools them (for a kind with too few)
STEP_KINDS = ("prefill", "decode", "mixed", "all")
#: the fewest steps of a kind whose own spread is kept
MIN_KIND_STEPS = 20
#: the steps over which the machine's level is a rolling median
LEVEL_WINDOW = 51


def step_kind(prefill_tokens: int, decode_seqs: int) -> str:
    """A step's kind: it prefills only, decodes only, or both (chunked prefill)."""
    if prefill_tokens and decode_seqs:
        return "mixed"
    return "prefill" if prefill_tokens else "decode"


@dataclass(frozen=True)
class GenService:
    """The fitted costs of one generation server (ms; see the module docstring)."""

    #: the pipeline's calls (its ``fixed_ms`` is 0: a call's fixed cost is its own)
    calls: StepCost
    #: a step's own work beyond its calls and its tokens' detokenizing
    step_own_ms: float
    #: by kind of step (``STEP_KINDS``): quantiles of measured / predicted step time around
    #: the machine's level at the time (its spike), lowest first (``RATIO_QUANTILES``)
    step_ratio: dict[str, tuple[float, ...]]
    #: the work around the steps (0: none, as a server set by hand or seen from outside)
    between_steps_ms: float = 0.0
    tokenize_fixed_ms: float = 0.0
    tokenize_per_token_ms: float = 0.0
    detokenize_ms: float = 0.0
    delivery_ms: float = 0.0
    network_ms: float = 0.0
    send_lag_ms: float = 0.0
    #: the largest context the server took (a prompt + output longer than this is refused)
    max_context: int | None = None
    #: the machine's level (log ratio): its mean, spread and per-step correlation; a spread
    #: of 0 leaves each step's ratio its spike alone
    ratio_level: tuple[float, float, float] = (0.0, 0.0, 0.0)
    #: the largest prefill call (prompt tokens) and decode batch (sequences) the fit saw:
    #: beyond them a simulation extrapolates, and says so
    seen_prefill_tokens: int = 0
    seen_decode_seqs: int = 0
    #: the whole step's fit over the run's steps: R², median and p90 relative error
    step_r2: float = 0.0
    step_median_error: float = 0.0
    step_p90_error: float = 0.0

    def extrapolations(self, steps: np.ndarray) -> list[str]:
        """What a simulation's steps asked of the fit beyond what it was fitted on, in words
        (none: every step inside the calibration's range)."""
        out = []
        pre = int(steps["prefill_tokens"].max(initial=0))
        dec = int(steps["decode_seqs"].max(initial=0))
        if pre > 1.1 * self.seen_prefill_tokens:
            out.append(f"prefill calls of up to {pre:,} prompt tokens, the calibration run's "
                       f"reached {self.seen_prefill_tokens:,}: their cost is extrapolated — "
                       "calibrate on a run with prompts as long")
        if dec > self.seen_decode_seqs:
            out.append(f"decode steps of up to {dec} sequences, the calibration run's reached "
                       f"{self.seen_decode_seqs}: their cost is extrapolated — calibrate on a "
                       "run with as many running")
        return out

    def tokenize_ms(self, prompt_tokens: int) -> float:
        return self.tokenize_fixed_ms + self.tokenize_per_token_ms * prompt_tokens

    def draw_ratio(self, rng: np.random.Generator, kind: str = "all") -> float:
        """One step's spike (measured/predicted around the machine's level) from the run's
        own steps of its kind (all of them, when the run had too few of that kind), drawn at
        random, interpolated between quantiles."""
        q = self.step_ratio.get(kind) or self.step_ratio["all"]
        u = rng.random() * (len(q) - 1)
        i = int(u)
        if i >= len(q) - 1:
            return q[-1]
        return q[i] + (q[i + 1] - q[i]) * (u - i)

    def scaled(self, decode: float = 1.0, prefill: float = 1.0) -> GenService:
        """The same server with its decode (or prefill) calls this many times as long: a
        what-if ("a 40 % faster decode step" is ``decode=0.6``)."""
        return replace(self, calls=self.calls.scaled(decode, prefill))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        every = (RATIO_QUANTILES - 1) // (SHOWN_QUANTILES - 1)
        d["step_ratio"] = {k: list(v[::every]) if len(v) == RATIO_QUANTILES else list(v)
                           for k, v in self.step_ratio.items()}
        return d

    def describe(self) -> str:
        """The fit in words, with its error (the simulator's outputs show it)."""
        c = self.calls
        return (f"step = {self.step_own_ms:.3f} own + {c.calls_text(' call')} + "
                f"{self.detokenize_ms:.3f}/token "
                f"emitted ms; a step predicted within {self.step_median_error:.1%} (median), "
                f"{self.step_p90_error:.1%} (p90), R² {self.step_r2:.3f}, over "
                f"{c.steps:,} steps; the machine's level drifted ±{self.ratio_level[1]:.0%} "
                f"(correlation {self.ratio_level[2]:.3f} a step); between steps "
                f"{self.between_steps_ms:.3f} ms, tokenize "
                f"{self.tokenize_fixed_ms:.3f} + {self.tokenize_per_token_ms:.4f}/token ms")


class MachineLevel:
    """One replica's machine level over its successive steps: an AR(1) process in the log of
    the ratio (``GenService.ratio_level``); ``next()`` is the next step's factor."""

    def __init__(self, level: tuple[float, float, float], rng: np.random.Generator) -> None:
        self.mean, self.spread, self.rho = level
        self.rng = rng
        self.x = float(rng.standard_normal())

    def next(self) -> float:
        if self.spread <= 0:
            return math.exp(self.mean)
        e = float(self.rng.standard_normal())
        self.x = self.rho * self.x + math.sqrt(max(1 - self.rho ** 2, 0.0)) * e
        return math.exp(self.mean + self.spread * self.x)


def machine_level(log_ratio: np.ndarray, window: int = LEVEL_WINDOW
                  ) -> tuple[np.ndarray, tuple[float, float, float]]:
    """The level of each step (the centred rolling median of the log ratios, in the order the
    steps ran) and the level process: (mean, spread, per-step correlation). Too few steps for
    a window: a flat level at the median, no process."""
    n = len(log_ratio)
    if n < 4 * window:
        flat = float(np.median(log_ratio)) if n else 0.0
        return np.full(n, flat), (flat, 0.0, 0.0)
    from numpy.lib.stride_tricks import sliding_window_view

    half = window // 2
    padded = np.pad(log_ratio, half, mode="edge")
    level = np.median(sliding_window_view(padded, window), axis=1)[:n]
    mean, spread = float(level.mean()), float(level.std())
    if spread <= 1e-9:
        return level, (mean, 0.0, 0.0)
    z = (level - mean) / spread
    corr = float(np.mean(z[:-window] * z[window:]))  # one window apart: past the smoothing
    rho = float(np.clip(corr, 1e-6, 0.999999) ** (1.0 / window))
    return level, (mean, spread, rho)


def fit_gen_service(rows: np.ndarray, tokens: np.ndarray, steps: np.ndarray,
                    max_context: int | None = None) -> GenService:
    """The costs of the server that produced a run's request, token and step logs
    (``gen_records``' dtypes). FitError (one line) when the run has too few steps or
    successful requests to fit."""
    calls = fit_step_cost(steps, of="calls")
    steps = steps[steps["t_end"] > steps["t_start"]]
    ok = rows[rows["status"] == STATUS_OK]
    if not len(ok):
        raise FitError("no successful requests to fit the server's costs from")
    detok = _detokenize_ms(tokens)
    measured = (steps["t_end"] - steps["t_start"]) / 1e6
    # a step's tokens: one a decoding sequence, at most one a prefilled one
    emitted = steps["decode_seqs"].astype(np.float64) + steps["prefill_seqs"]
    predicted_calls = calls.predict_ms(steps["prefill_tokens"], steps["decode_seqs"],
                                       steps["kv_used"], steps["prefill_attn"],
                                       steps["prefill_seqs"])
    own = float(np.median(np.maximum(measured - predicted_calls - detok * emitted, 0)))
    predicted = own + predicted_calls + detok * emitted
    ratio = measured / np.maximum(predicted, 1e-6)
    r2, median, p90 = fit_errors(measured, predicted)
    spikes, level = _ratios_and_level(ratio, steps)
    tok_fixed, tok_per = _tokenize_line(ok)
    return GenService(
        calls=calls, step_own_ms=own, step_ratio=spikes, ratio_level=level,
        between_steps_ms=_between_steps_ms(steps),
        tokenize_fixed_ms=tok_fixed, tokenize_per_token_ms=tok_per,
        detokenize_ms=detok,
        delivery_ms=_median_ms(tokens["t_delivered"] - tokens["t_detok"]),
        network_ms=_median_ms(ok["t_received"] - ok["t_sent"]),
        send_lag_ms=_median_ms(ok["t_sent"] - ok["t_intended"]),
        max_context=max_context,
        seen_prefill_tokens=int(steps["prefill_tokens"].max(initial=0)),
        seen_decode_seqs=int(steps["decode_seqs"].max(initial=0)),
        step_r2=r2, step_median_error=median, step_p90_error=p90)


def _ratios_and_level(ratio: np.ndarray, steps: np.ndarray
                      ) -> tuple[dict[str, tuple[float, ...]], tuple[float, float, float]]:
    """The machine's level process, fitted over each replica's steps in the order they ran
    (the first replica's level process; every replica's spikes), and the quantiles of the
    spikes around it of each kind with enough steps."""
    spikes = np.empty_like(ratio)
    level_fit = None
    for rep in np.unique(steps["replica"]):
        idx = np.flatnonzero(steps["replica"] == rep)
        idx = idx[np.argsort(steps["t_start"][idx], kind="stable")]
        level, fit = machine_level(np.log(np.maximum(ratio[idx], 1e-9)))
        spikes[idx] = ratio[idx] / np.exp(level)
        level_fit = level_fit or fit
    pre, dec = steps["prefill_tokens"] > 0, steps["decode_seqs"] > 0
    masks = {"prefill": pre & ~dec, "decode": dec & ~pre, "mixed": pre & dec,
             "all": np.ones(len(steps), bool)}
    quantiles = {k: ratio_quantiles(spikes[m])
                 for k, m in masks.items() if m.sum() >= (MIN_KIND_STEPS if k != "all" else 1)}
    return quantiles, level_fit or (0.0, 0.0, 0.0)


def ratio_quantiles(spikes: np.ndarray) -> tuple[float, ...]:
    """The ``RATIO_QUANTILES`` quantiles of a kind's spikes, lowest first (what
    ``GenService.step_ratio`` keeps of them)."""
    return tuple(float(v) for v in np.quantile(spikes, np.linspace(0, 1, RATIO_QUANTILES)))


def _median_ms(ns: np.ndarray) -> float:
    return float(np.median(np.maximum(ns, 0))) / 1e6 if len(ns) else 0.0


def _between_steps_ms(steps: np.ndarray) -> float:
    """The median gap between a step's end and its replica's next step, over the steps that
    left work running (the loop goes straight to its next step: no waiting for arrivals)."""
    gaps = []
    for rep in np.unique(steps["replica"]):
        s = np.sort(steps[steps["replica"] == rep], order="t_start")
        busy = s["running"][:-1] > 0
        gaps.append((s["t_start"][1:] - s["t_end"][:-1])[busy])
    joined = np.concatenate(gaps) if gaps else np.zeros(0, np.int64)
    return _median_ms(joined)


def _tokenize_line(ok: np.ndarray) -> tuple[float, float]:
    """Tokenizing time as fixed + per prompt token (non-negative least squares; a run whose
    prompts are all one length gives its median as the fixed part)."""
    took = (ok["t_tok_end"] - ok["t_tok_start"]).astype(np.float64) / 1e6
    n = ok["prompt_tokens"].astype(np.float64)
    if np.ptp(n) == 0:
        return float(np.median(took)), 0.0
    coef = weighted_nnls(np.column_stack([np.ones_like(n), n]), took)
    return float(coef[0]), float(coef[1])


def _detokenize_ms(tokens: np.ndarray) -> float:
    """Each token's detokenizing: a call's tokens are detokenized one after another, so per
    call (tokens sharing a production stamp) the last one's wait divided by their count."""
    if not len(tokens):
        return 0.0
    order = np.argsort(tokens["t_produced"], kind="stable")
    produced = tokens["t_produced"][order]
    waited = (tokens["t_detok"] - tokens["t_produced"])[order]
    starts = np.flatnonzero(np.r_[True, produced[1:] != produced[:-1]])
    last = np.maximum.reduceat(waited, starts)
    count = np.diff(np.r_[starts, len(produced)])
    return float(np.median(np.maximum(last, 0) / count)) / 1e6
