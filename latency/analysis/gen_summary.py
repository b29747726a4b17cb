"""The summary of a generation run: TTFT, TPOT, ITL, E2E, their components, goodput.

The metrics, defined once (docs/generation.md maps them to the peers' names):

- **TTFT** — time to first token: from the request's *intended* send time (open loop: its
  place in the arrival schedule) to the client having the first token. The send-anchored TTFT
  (from the actual send), what most peers report, is kept beside it (``ttft_sent_ms``).
- **TPOT** — time per output token, one value a request: (E2E − TTFT) / (output tokens − 1),
  for requests of at least two tokens (vLLM's, MLPerf's and DistServe's TPOT).
- **ITL** — inter-token latency: every gap between two consecutive tokens of a request, one
  value per gap (not per request, not per chunk).
- **E2E** — intended send to the last token.
- **goodput** — requests per second that met every objective set (TTFT, TPOT, E2E ≤ their
  limits; a one-token request has no TPOT to judge), over the measured span.
- throughput: output tokens per second served (all requests' tokens over the span) and per
  request (its tokens ÷ its E2E); prompt tokens prefilled per second.

Percentiles are over successful measured requests (warm-up excluded), and ITL over their
gaps, so every figure refers to one population. The tail's make-up (what the requests near
p99 spent their time on) is ``tail_makeup_ms``: component percentiles do not add up.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from latency.analysis.stats import LatencyStats, describe_ms, tail_makeup_ms
from latency.core.gen_records import (
    GEN_COMPONENTS,
    TTFT_COMPONENTS,
    component_ns,
    token_gaps,
    ttft_parts,
)
from latency.core.records import measured_and_ok
from latency.core.slo import Slo


@dataclass(frozen=True)
class GenSummary:
    """What a generation run measured (times in ms)."""

    requests: int = 0
    successful: int = 0
    errors: int = 0
    error_rate: float = 0.0
    warmup_requests: int = 0
    duration_s: float = 0.0
    throughput_rps: float = 0.0
    output_tokens_per_s: float = 0.0
    prefill_tokens_per_s: float = 0.0
    #: output tokens/s of each request (its tokens ÷ its E2E), described
    request_tokens_per_s: LatencyStats = field(default_factory=LatencyStats)
    prompt_tokens_mean: float = 0.0
    output_tokens_mean: float = 0.0
    ttft_ms: LatencyStats = field(default_factory=LatencyStats)
    ttft_sent_ms: LatencyStats = field(default_factory=LatencyStats)
    tpot_ms: LatencyStats = field(default_factory=LatencyStats)
    itl_ms: LatencyStats = field(default_factory=LatencyStats)
    e2e_ms: LatencyStats = field(default_factory=LatencyStats)
    #: each request's components (they sum to its E2E), described
    components_ms: dict[str, LatencyStats] = field(default_factory=dict)
    #: the mean parts of TTFT, and those of the requests around TTFT's p99 (scaled to it)
    ttft_mean_parts_ms: dict[str, float] = field(default_factory=dict)
    ttft_p99_parts_ms: dict[str, float] = field(default_factory=dict)
    #: the mean parts of a gap, and those of the gaps around ITL's p99 (scaled to it)
    itl_mean_parts_ms: dict[str, float] = field(default_factory=dict)
    itl_p99_parts_ms: dict[str, float] = field(default_factory=dict)
    preemptions: int = 0
    requests_preempted: int = 0
    slo: dict[str, Any] = field(default_factory=dict)
    goodput_rps: float | None = None
    slo_met_share: float | None = None
    offered_rps: float | None = None
    dropped: int = 0
    error_messages: dict[str, int] = field(default_factory=dict)
    #: the scheduler while measuring: mean running and waiting, peak KV use, steps
    scheduler: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, LatencyStats):
                value = value.to_dict()
            elif name == "components_ms":
                value = {k: v.to_dict() for k, v in value.items()}
            out[name] = value
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> GenSummary:
        d = dict(d or {})
        kw: dict[str, Any] = {}
        for name, f in cls.__dataclass_fields__.items():
            if name not in d:
                continue
            value = d[name]
            if f.type in ("LatencyStats",):
                value = LatencyStats.from_dict(value)
            elif name == "components_ms":
                value = {k: LatencyStats.from_dict(v) for k, v in (value or {}).items()}
            kw[name] = value
        return cls(**kw)


def summarize_generation(rows: np.ndarray, tokens: np.ndarray, steps: np.ndarray,
                         errors: dict[int, str], measure_start_ns: int | None,
                         measure_end_ns: int | None, slo: Slo,
                         offered: int | None = None, offered_span_s: float | None = None,
                         dropped: int = 0) -> GenSummary:
    """The summary of a generation run's logs (see the module docstring)."""
    index = np.arange(len(rows))
    measured_mask = ~rows["warmup"] if len(rows) else np.zeros(0, bool)
    measured, ok = measured_and_ok(rows)
    ok_index = index[measured_mask][measured["status"] == 0] if len(rows) else index
    n, n_ok = len(measured), len(ok)
    start = measure_start_ns if measure_start_ns is not None else (
        int(ok["t_intended"].min()) if n_ok else 0)
    end = measure_end_ns if measure_end_ns is not None else (
        int(ok["t_done"].max()) if n_ok else start)
    span = max(end - start, 1) / 1e9
    comps = component_ns(ok)
    ttft, e2e = comps["ttft"], comps["e2e"]
    out_n = ok["output_tokens"].astype(np.int64)
    multi = out_n > 1
    tpot = np.where(multi, (e2e - ttft) / np.maximum(out_n - 1, 1), 0)[multi]
    tok_ok = tokens[np.isin(tokens["request"], ok_index)] if len(tokens) else tokens
    gaps, gparts = token_gaps(tok_ok)
    first = ttft_parts(ok)
    messages: dict[str, int] = {}
    for i, msg in errors.items():
        if i < len(rows) and not rows["warmup"][i]:
            messages[msg] = messages.get(msg, 0) + 1
    slo_dict: dict[str, Any] = {}
    goodput = met_share = None
    if slo.set and n_ok:
        met = np.ones(n_ok, bool)
        if slo.ttft_ms is not None:
            met &= ttft <= slo.ttft_ms * 1e6
        if slo.tpot_ms is not None:
            tp_all = np.where(multi, (e2e - ttft) / np.maximum(out_n - 1, 1), 0)
            met &= tp_all <= slo.tpot_ms * 1e6
        if slo.e2e_ms is not None:
            met &= e2e <= slo.e2e_ms * 1e6
        # the share of every measured request: one that failed or was refused met nothing
        goodput, met_share = float(met.sum()) / span, float(met.sum()) / n
        slo_dict = {"ttft_ms": slo.ttft_ms, "tpot_ms": slo.tpot_ms, "e2e_ms": slo.e2e_ms,
                    "name": slo.name, "text": str(slo)}
    ms = lambda d: {k: float(np.mean(v)) / 1e6 if len(v) else 0.0  # noqa: E731
                    for k, v in d.items()}
    return GenSummary(
        requests=n, successful=n_ok, errors=n - n_ok, error_rate=(n - n_ok) / n if n else 0.0,
        warmup_requests=int(rows["warmup"].sum()) if len(rows) else 0, duration_s=span,
        throughput_rps=n_ok / span,
        output_tokens_per_s=float(out_n.sum()) / span,
        prefill_tokens_per_s=float(ok["prompt_tokens"].sum()) / span,
        request_tokens_per_s=_rate_stats(out_n, e2e),
        prompt_tokens_mean=float(ok["prompt_tokens"].mean()) if n_ok else 0.0,
        output_tokens_mean=float(out_n.mean()) if n_ok else 0.0,
        ttft_ms=describe_ms(ttft), ttft_sent_ms=describe_ms(ok["t_first_deliv"] - ok["t_sent"]),
        tpot_ms=describe_ms(tpot.astype(np.int64)), itl_ms=describe_ms(gaps),
        e2e_ms=describe_ms(e2e),
        components_ms={c: describe_ms(comps[c]) for c in GEN_COMPONENTS},
        ttft_mean_parts_ms=ms({c: first[c] for c in TTFT_COMPONENTS}),
        ttft_p99_parts_ms=tail_makeup_ms({c: first[c] / 1e6 for c in TTFT_COMPONENTS},
                                         ttft / 1e6, 0.99) if n_ok else {},
        itl_mean_parts_ms=ms(gparts),
        itl_p99_parts_ms=tail_makeup_ms({c: v / 1e6 for c, v in gparts.items()}, gaps / 1e6,
                                        0.99) if len(gaps) else {},
        preemptions=int(measured["preemptions"].sum()) if n else 0,
        requests_preempted=int((measured["preemptions"] > 0).sum()) if n else 0,
        slo=slo_dict, goodput_rps=goodput, slo_met_share=met_share,
        offered_rps=(offered / offered_span_s if offered and offered_span_s else None),
        dropped=dropped, error_messages=messages,
        scheduler=_scheduler(steps, start, end),
    )


def _rate_stats(out_n: np.ndarray, e2e: np.ndarray) -> LatencyStats:
    """Each request's tokens/s, described with the LatencyStats fields (values, not ms)."""
    if not len(out_n):
        return LatencyStats(has_ci=False)
    rate = out_n / np.maximum(e2e, 1) * 1e9
    # describe_ms divides by 1e6; give it the rates × 1e6 so the fields read in tokens/s
    return describe_ms((rate * 1e6).astype(np.int64), with_ci=False)


def _scheduler(steps: np.ndarray, start: int, end: int) -> dict[str, Any]:
    """The scheduler while measuring, from its steps."""
    s = steps[(steps["t_start"] >= start) & (steps["t_start"] <= end)] if len(steps) else steps
    if not len(s):
        return {}
    busy = float((s["t_end"] - s["t_start"]).sum()) / max(end - start, 1)
    return {"steps": int(len(s)), "mean_running": float(s["running"].mean()),
            "mean_waiting": float(s["waiting"].mean()), "max_waiting": int(s["waiting"].max()),
            "peak_kv_tokens": int(s["kv_used"].max()),
            "mean_step_ms": float((s["t_end"] - s["t_start"]).mean()) / 1e6,
            # a step's time outside the pipeline's calls: planning, bookkeeping, detokenizing
            # and handing tokens over — the scheduler's own cost
            "own_us_per_step": float((s["t_end"] - s["t_start"] - s["call_ns"]).mean()) / 1e3,
            "prefill_steps": int((s["prefill_seqs"] > 0).sum()),
            "busy_share": min(busy, 1.0)}
