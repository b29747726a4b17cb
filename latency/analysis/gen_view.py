"""What the dashboard draws of a generation run: its figures' aggregates, computed once.

The charts of a generation — the stacked parts of TTFT and of a gap between tokens, the
histograms of TTFT and ITL, the waterfall of the last requests, the scheduler over time — take
these aggregates, never the raw logs, so a figure costs milliseconds however long the run, and
the same view serves a measured run and a simulated one (a simulation is a ``GenResult``).

Why the bars are "the requests around the percentile": the parts' own percentiles do not add up
(the p99 request is rarely p99 in each part), so a bar is the mean parts of the requests (or
gaps) whose total lies around that percentile, scaled to it (``stats.tail_makeup_ms``), as the
one-shot bars are. Every population is the summary's: successful measured requests, and their
gaps.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from latency.analysis.snapshot import makeup_ms
from latency.analysis.stats import HIST_EDGES_MS, histogram_ms
from latency.core.gen_records import (
    GAP_COMPONENTS,
    TTFT_COMPONENTS,
    token_gaps,
    ttft_parts,
)
from latency.core.records import measured_and_ok

#: the waterfall draws at most this many requests (the last ones sent): a row each is readable
WATERFALL_REQUESTS = 40
#: ... those in flight while its last this many were: at a low rate forty requests one after
#: another span seconds, and each stream's ticks would merge into one blot
FOCUS_REQUESTS = 12
#: the scheduler's series keep at most this many points (steps are averaged into bins)
SERIES_POINTS = 400


@dataclass(frozen=True)
class WaterfallRow:
    """One request on the waterfall: its spans (ms from the waterfall's start), its tokens'
    delivery times and its stalls — each gap's stall part (another request's prefill holding
    the step) drawn as long as it was, ending where the token's decode call began."""

    request: int
    queue: tuple[float, float]  # received → admitted to a slot (tokenizing included)
    prefill: tuple[float, float]  # admitted → its first token produced
    decode: tuple[float, float]  # first token delivered → last token delivered
    tokens_ms: tuple[float, ...]
    stalls: tuple[tuple[float, float], ...]
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class GenView:
    """A generation run's figures' inputs (ms); empty fields before its first request ends."""

    ttft_makeup_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    gap_makeup_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    hist_edges_ms: np.ndarray = field(default_factory=lambda: HIST_EDGES_MS)
    ttft_counts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    itl_counts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    ttft_percentiles_ms: dict[str, float] = field(default_factory=dict)
    itl_percentiles_ms: dict[str, float] = field(default_factory=dict)
    #: share of requests whose TTFT is within its target, of gaps within the TPOT target
    ttft_within: float | None = None
    itl_within: float | None = None
    waterfall: tuple[WaterfallRow, ...] = ()
    #: the scheduler over time: t (s from the first step), running, waiting, KV tokens held,
    #: preemptions so far; and output tokens delivered each second
    scheduler: dict[str, list[float]] = field(default_factory=dict)
    tokens_per_s: dict[str, list[float]] = field(default_factory=dict)


def gen_view(rows: np.ndarray, tokens: np.ndarray, steps: np.ndarray,
             ttft_target_ms: float | None = None, tpot_target_ms: float | None = None,
             waterfall_requests: int = WATERFALL_REQUESTS) -> GenView:
    """The view of a generation run's logs (see the module docstring)."""
    measured, ok = measured_and_ok(rows)
    if not len(ok):
        return GenView(scheduler=_scheduler(steps))
    index = np.flatnonzero(~rows["warmup"])
    ok_index = index[measured["status"] == 0]
    own = tokens[np.isin(tokens["request"], ok_index)] if len(tokens) else tokens
    parts = ttft_parts(ok)
    ttft = (ok["t_first_deliv"] - ok["t_intended"]) / 1e6
    gaps, gparts = token_gaps(own)
    gaps_ms = gaps / 1e6
    return GenView(
        ttft_makeup_ms=makeup_ms({c: parts[c] / 1e6 for c in TTFT_COMPONENTS}, ttft),
        gap_makeup_ms=makeup_ms({c: gparts[c] / 1e6 for c in GAP_COMPONENTS}, gaps_ms),
        ttft_counts=histogram_ms(ttft), itl_counts=histogram_ms(gaps_ms),
        ttft_percentiles_ms=_percentiles(ttft), itl_percentiles_ms=_percentiles(gaps_ms),
        ttft_within=_within(ttft, ttft_target_ms), itl_within=_within(gaps_ms, tpot_target_ms),
        waterfall=waterfall(rows, tokens, ok_index, waterfall_requests),
        scheduler=_scheduler(steps), tokens_per_s=_tokens_per_s(own, _origin(steps, own)))


def _percentiles(values_ms: np.ndarray) -> dict[str, float]:
    if not len(values_ms):
        return {}
    p50, p90, p99 = np.percentile(values_ms, [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99)}


def _within(values_ms: np.ndarray, target_ms: float | None) -> float | None:
    if target_ms is None or not len(values_ms):
        return None
    return float(np.mean(values_ms <= target_ms))


def waterfall(rows: np.ndarray, tokens: np.ndarray, ok_index: np.ndarray,
              n: int = WATERFALL_REQUESTS) -> tuple[WaterfallRow, ...]:
    """The last ``n`` successful measured requests by send time, each as its stamps say: the
    spans are differences of its own stamps (ms from the first drawn request's arrival at the
    server), each tick a token's delivery, each stall its gap's stall part in length (so a
    row's stalls sum to the stall its log records), placed before the decode call that ended
    it. A whole prompt's prefill draws one long stall across every running stream; chunked
    prefill under a small step budget, many short ones. Of the last ``n``, only those still in
    flight when the last ``FOCUS_REQUESTS`` arrived are drawn (all of them under load)."""
    if not len(ok_index) or n <= 0:
        return ()
    chosen = ok_index[np.argsort(rows["t_received"][ok_index], kind="stable")[-n:]]
    window_start = rows["t_received"][chosen[-FOCUS_REQUESTS:]].min()
    chosen = chosen[rows["t_done"][chosen] >= window_start]
    origin = int(rows["t_received"][chosen].min())
    ms = lambda ns: (int(ns) - origin) / 1e6  # noqa: E731
    by_request = _tokens_by_request(tokens, chosen)
    out = []
    for i in chosen:
        r = rows[i]
        toks = by_request.get(int(i))
        ticks: tuple[float, ...] = ()
        stalls: tuple[tuple[float, float], ...] = ()
        if toks is not None and len(toks):
            ticks = tuple((toks["t_delivered"] - origin) / 1e6)
            _, parts = token_gaps(toks)
            held = parts["stall"] > 0
            ends = toks["t_call_start"][1:][held]
            stalls = tuple(((int(e) - int(d) - origin) / 1e6, (int(e) - origin) / 1e6)
                           for e, d in zip(ends, parts["stall"][held]))
        out.append(WaterfallRow(
            request=int(i), queue=(ms(r["t_received"]), ms(r["t_admitted"])),
            prefill=(ms(r["t_admitted"]), ms(r["t_first"])),
            decode=(ms(r["t_first_deliv"]), ms(r["t_done"])),
            tokens_ms=ticks, stalls=stalls, prompt_tokens=int(r["prompt_tokens"]),
            output_tokens=int(r["output_tokens"])))
    return tuple(out)


def _tokens_by_request(tokens: np.ndarray, chosen: np.ndarray) -> dict[int, np.ndarray]:
    if not len(tokens):
        return {}
    mine = tokens[np.isin(tokens["request"], chosen)]
    order = np.lexsort((mine["index"], mine["request"]))
    mine = mine[order]
    cuts = np.flatnonzero(np.diff(mine["request"])) + 1
    return {int(part["request"][0]): part for part in np.split(mine, cuts) if len(part)}


def _origin(steps: np.ndarray, tokens: np.ndarray) -> int:
    """The time axis's zero, shared by the scheduler's series and the tokens served: the first
    step (the first token delivered, when no step was recorded)."""
    if len(steps):
        return int(steps["t_start"].min())
    return int(tokens["t_delivered"].min()) if len(tokens) else 0


def _scheduler(steps: np.ndarray) -> dict[str, list[float]]:
    """Running, waiting, KV held and preemptions so far over the run's steps, averaged into at
    most ``SERIES_POINTS`` bins of equal time (a run has tens of thousands of steps)."""
    if not len(steps):
        return {}
    t0 = int(steps["t_start"].min())
    t = (steps["t_start"] - t0) / 1e9
    bins = min(SERIES_POINTS, len(steps))
    edges = np.linspace(0.0, float(t.max()) + 1e-9, bins + 1)
    which = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, bins - 1)
    counts = np.bincount(which, minlength=bins)
    keep = counts > 0
    mean = lambda col: (np.bincount(which, steps[col].astype(np.float64), bins)[keep]  # noqa: E731
                        / counts[keep])
    preempted = np.cumsum(np.bincount(which, steps["preempted"].astype(np.float64), bins))[keep]
    return {"t_s": list(((edges[:-1] + edges[1:]) / 2)[keep]), "running": list(mean("running")),
            "waiting": list(mean("waiting")), "kv_tokens": list(mean("kv_used")),
            "preemptions": list(preempted)}


def _tokens_per_s(tokens: np.ndarray, origin: int) -> dict[str, list[float]]:
    """Output tokens delivered in each whole second from ``origin`` (of successful measured
    requests)."""
    if not len(tokens):
        return {}
    t = np.maximum(tokens["t_delivered"] - origin, 0) / 1e9
    counts = np.bincount(t.astype(np.int64))
    return {"t_s": [float(i) + 0.5 for i in range(len(counts))],
            "tokens_per_s": [float(c) for c in counts]}


def view_of(result: Any, waterfall_requests: int = WATERFALL_REQUESTS) -> GenView:
    """The view of a ``GenResult`` (measured or simulated), its targets from its config."""
    c = result.config
    slo = c.objectives
    return gen_view(result.rows, result.tokens, result.steps, slo.ttft_ms, slo.tpot_ms,
                    waterfall_requests)
