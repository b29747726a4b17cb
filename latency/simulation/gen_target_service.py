"""A server of yours, seen from outside: its costs fitted from a ``--target`` run — the
client's stamps of every token, the server's reports where it gave them — so that
``simulate --from-run`` can ask "what if" of vLLM, llama.cpp or any OpenAI-compatible server
as it does of ours.

Our own pipelines record every scheduler step (``gen_service`` fits those); a target records
none. What the client sees still says how the server's time grows:

- **a decode step** is the gap between a stream's tokens (a chunk's gap spread over the
  tokens it carried: a server that coalesces writes still decodes a token a step). Every
  stream that has its first token and not yet its last is decoding alongside: the step's
  cost is fitted as fixed + per sequence through the median gap at each number of streams
  (non-negative least squares, each weighted by its gaps), leaving out every gap beside which
  another request was waiting for its first token — its prefill, or a chunk of it, may have
  run there (the stutter the simulator makes of its own);
- **a prefill** is what the time to first token of a request that found the server idle (no
  other request in flight until its first token) holds beyond the network: TTFT − network −
  queue where the server split it (its report), else TTFT − the round-trip floor. Fitted as
  fixed + per prompt token + per attention pair (as ours). A prefill that shared the server
  is left out: batched with others' decodes or prompts it is stretched, and the simulator
  makes that sharing of its own;
- **the network**: half the round-trip floor each way (the probe's fastest ``GET /models``);
  the client's schedule lag, as measured;
- **the slots**: the most requests the server ran at once — by its scraped running gauge,
  or by the client's count of streams decoding together, whichever is more (a stream decodes
  only in a slot, so neither exceeds them): the slots when the server also queued, a lower
  bound it names when it never did (``--max-running`` sets them).

The spread is kept as for ours: each gap's measured / predicted ratio around the machine's
level (a rolling median in time order), the prefills' ratios apart. What it cannot know: the
server's step budget, chunking and KV budget (the simulation runs whole prefills with a
budget of whole contexts unless told otherwise), and its frontend's own work beyond what the
round trip and the fitted costs hold. So a replay of the run's own trace is the check — the
CLI prints it side by side — and a simulation says it was fitted from outside.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from latency.analysis.server_split import ServerSplit, split_for
from latency.core.gen_records import STATUS_OK
from latency.core.gen_reports import SOURCE_NONE
from latency.simulation.gen_service import (
    MIN_KIND_STEPS,
    GenService,
    machine_level,
    ratio_quantiles,
)
from latency.simulation.gen_step_cost import FitError, StepCost, fit_errors, weighted_nnls

#: the fewest requests a prefill cost is fitted from, and the fewest decode gaps
MIN_PREFILLS = 8
#: the most other requests in flight beside a prefill it is fitted from, when too few found
#: the server idle
MAX_COMPANY = 2
MIN_GAPS = 50
#: the fewest gaps at one number of decoding streams whose median the decode step is fitted
#: through
MIN_SIZE_GAPS = 10
#: the scraped gauges that count the requests a server runs at once, by server
RUNNING_GAUGES = ("vllm:num_requests_running", "sglang:num_running_reqs",
                  "llamacpp:requests_processing", "latency_lab_gen_running")
#: and the gauges that count the requests it kept waiting
WAITING_GAUGES = ("vllm:num_requests_waiting", "sglang:num_queue_reqs",
                  "llamacpp:requests_deferred", "latency_lab_gen_waiting")


@dataclass(frozen=True)
class TargetFit:
    """A target's fitted costs and what the simulation must take from outside them."""

    service: GenService
    #: the server's slots as estimated, and where the estimate came from (in words)
    slots: int
    slots_from: str
    #: the fit in words (the CLI's "fit:" line)
    about: str


def fit_target_service(rows: np.ndarray, tokens: np.ndarray, reports: np.ndarray,
                       environment: dict[str, Any]) -> TargetFit:
    """The costs of the server a ``--target`` run measured (module docstring). FitError, one
    line, when the run shows too little of them."""
    measured = (~rows["warmup"]) & (rows["status"] == STATUS_OK) & (rows["output_tokens"] > 0)
    idx = np.flatnonzero(measured)
    if len(idx) < MIN_PREFILLS:
        raise FitError(f"{len(idx)} successful measured requests: a server's costs need at "
                       f"least {MIN_PREFILLS}")
    target = environment.get("target") or {}
    rtt_ns = int(float(target.get("rtt_floor_ms") or 0.0) * 1e6)
    ok = rows[idx]
    decode, gaps, gap_ratio, gap_order, seen_seqs = _decode_fit(rows, tokens, idx)
    sp = split_for(ok, reports[idx], target) if len(reports) == len(rows) else None
    prefill, pre_ratio, seen_tokens = _prefill_fit(ok, sp, rtt_ns)
    # the network and the server's frontend, both ways: what the server's split left to it
    # (its own measure of the request), else the round-trip floor
    split_net = sp is not None and sp.n >= MIN_PREFILLS
    network_ns = float(np.median(sp.parts["network"])) if sp is not None and split_net \
        else float(rtt_ns)
    calls = StepCost(fixed_ms=0.0, prefill_fixed_ms=prefill[0], per_prefill_token_ms=prefill[1],
                     per_attention_ms=prefill[2], decode_fixed_ms=decode[0],
                     per_sequence_ms=decode[1], per_kv_token_ms=0.0, steps=gaps,
                     r2=decode[2], median_error=decode[3], p90_error=decode[4])
    # the machine's level over the gaps in time order; its per-gap correlation is per step
    # only when one stream decodes: with n streams, n gaps share each step
    level, (mean, spread, rho) = machine_level(np.log(np.maximum(gap_ratio[gap_order], 1e-9)))
    spikes = gap_ratio[gap_order] / np.exp(level)
    rho_step = float(rho ** max(seen_seqs / 2.0, 1.0)) if spread > 0 else 0.0
    ratio = {"decode": ratio_quantiles(spikes), "all": ratio_quantiles(np.r_[spikes, pre_ratio])}
    if len(pre_ratio) >= MIN_KIND_STEPS:
        ratio["prefill"] = ratio_quantiles(pre_ratio)
    half = network_ns / 2e6
    service = GenService(
        calls=calls, step_own_ms=0.0, step_ratio=ratio, ratio_level=(mean, spread, rho_step),
        delivery_ms=half, network_ms=half,
        send_lag_ms=float(np.median(np.maximum(ok["t_sent"] - ok["t_intended"], 0))) / 1e6,
        max_context=None, seen_prefill_tokens=seen_tokens, seen_decode_seqs=seen_seqs,
        step_r2=decode[2], step_median_error=decode[3], step_p90_error=decode[4])
    slots, slots_from = _slots(rows, idx, environment, sp)
    about = (f"fitted from outside (the client's stamps{_report_words(reports, idx)}): "
             f"prefill {prefill[0]:.2f} + {prefill[1]:.4f}/token"
             + (f" + {prefill[2]:.2e}/attention pair" if prefill[2] else "")
             + f" ms over {prefill[3]} requests "
             + ("that found the server idle" if not prefill[4] else
                f"with at most {prefill[4]} other(s) in flight (too few found it idle)")
             + f"; decode step {decode[0]:.3f} + "
             f"{decode[1]:.4f}/sequence ms over {gaps:,} gaps between tokens (a gap predicted "
             f"within {decode[3]:.1%} median, {decode[4]:.1%} p90); network {half:.2f} ms each "
             f"way (half {'the split network median' if split_net else 'the round-trip floor'})"
             f"; {slots} slots ({slots_from})")
    return TargetFit(service=service, slots=slots, slots_from=slots_from, about=about)


def _report_words(reports: np.ndarray, idx: np.ndarray) -> str:
    if len(reports) and (reports["source"][idx] != SOURCE_NONE).any():
        return " and the server's reports"
    return "; the server reported nothing"


def _decode_fit(rows: np.ndarray, tokens: np.ndarray, idx: np.ndarray
                ) -> tuple[tuple[float, ...], int, np.ndarray, np.ndarray, int]:
    """The decode step (fixed, per sequence, R², median and p90 relative error), the gaps
    it was fitted on, their measured / predicted ratios and their time order, and the most
    streams seen decoding at once."""
    first = np.sort(rows["t_first_deliv"][idx])
    done = np.sort(rows["t_done"][idx])
    t = tokens[np.isin(tokens["request"], idx)]
    t = t[np.lexsort((t["index"], t["request"]))]
    if len(t) < 2:
        raise FitError("the run's streams carried too few tokens to fit a decode step")
    req, at = t["request"], t["t_delivered"].astype(np.int64)
    # chunks: a new stamp, or a new request
    new = np.r_[True, (req[1:] != req[:-1]) | (at[1:] != at[:-1])]
    starts = np.flatnonzero(new)
    size = np.diff(np.r_[starts, len(t)])
    c_req, c_at = req[starts], at[starts]
    same = c_req[1:] == c_req[:-1]
    gap = (c_at[1:] - c_at[:-1])[same]
    n_tok = size[1:][same]
    lo, hi = c_at[:-1][same], c_at[1:][same]
    step = (gap / np.maximum(n_tok, 1)).astype(np.float64) / 1e6
    mid = (lo + hi) // 2
    running = (np.searchsorted(first, mid, side="right")
               - np.searchsorted(done, mid, side="right")).astype(np.float64)
    # a gap holding another request's first token held its prefill: not a decode step's cost
    # a gap overlapping another request's wait for its first token may hold its prefill
    # (or a chunk of it: a chunked prompt's earlier chunks emit nothing): only gaps with no
    # such wait beside them are a decode step's own
    sent = np.sort(rows["t_sent"][idx])
    waiting = np.searchsorted(sent, hi, side="left") - np.searchsorted(first, lo, side="right")
    clean = (waiting == 0) & (step > 0) & (running >= 1)
    if clean.sum() < MIN_GAPS:
        raise FitError(f"{int(clean.sum())} gaps between tokens with no other request "
                       f"waiting for its first token beside them: a decode step needs at least "
                       f"{MIN_GAPS} — run longer outputs, more requests, or a lower load")
    y, n = step[clean], running[clean]
    # fitted through each batch size's median gap, weighted by how many gaps it has: a
    # stream's gaps are not a step's each — two writes the client read together leave a
    # gap near zero beside a gap twice a step — but their median is the step's
    sizes, counts = np.unique(n, return_counts=True)
    keep = counts >= MIN_SIZE_GAPS
    if not keep.any():
        keep = counts == counts.max()
    sizes, counts = sizes[keep], counts[keep]
    medians = np.array([np.median(y[n == k]) for k in sizes])
    xs = np.column_stack([np.ones_like(sizes), sizes])
    if len(sizes) == 1:
        coef = np.array([medians[0], 0.0])
    else:
        coef = weighted_nnls(xs, medians, np.sqrt(counts) / np.maximum(medians, 1e-6))
    x = np.column_stack([np.ones_like(n), n])
    pred = np.maximum(x @ coef, 1e-9)
    order = np.argsort(mid[clean], kind="stable")
    return ((float(coef[0]), float(coef[1]), *fit_errors(y, pred)), int(clean.sum()), y / pred,
            order, int(n.max()))


def _prefill_fit(ok: np.ndarray, sp: ServerSplit | None, rtt_ns: int
                 ) -> tuple[tuple[float, float, float, int, int], np.ndarray, int]:
    """The prefill (fixed, per prompt token, per attention pair, requests used, the most
    other requests in flight beside one of them) of the
    successful measured requests ``ok`` (split by the server as ``sp``), its requests'
    measured / predicted ratios, and the longest prompt it saw."""
    ttft = (ok["t_first_deliv"] - ok["t_sent"]).astype(np.int64)
    prefill = np.full(len(ok), -1, dtype=np.int64)
    if sp is not None:
        prefill[sp.rows] = sp.ttft_ns - sp.parts["network"] - sp.parts["queue"]
    # a prefill's own cost shows only where nothing shared the server with it: no other
    # request in flight between its send and its first token (a server that batches a
    # prefill with others' decodes, or with other prompts, stretches it — vLLM's and our
    # own reports count that in the prefill)
    others = _in_flight_during(ok["t_sent"], ok["t_first_deliv"], ok["t_sent"], ok["t_done"])
    # the least shared there are enough of: those that found the server idle, if enough did
    company = 0
    while company < MAX_COMPANY and ((others <= company) & (prefill > 0)).sum() \
            + ((others <= company) & (prefill < 0)).sum() < MIN_PREFILLS:
        company += 1
    alone = others <= company
    take = (prefill < 0) & alone & (others == 0)
    prefill[take] = ttft[take] - rtt_ns
    use = (prefill > 0) & alone
    if use.sum() < MIN_PREFILLS:
        raise FitError(f"{int(use.sum())} requests show their prefill with at most "
                       f"{MAX_COMPANY} others in flight: a prefill cost needs at least "
                       f"{MIN_PREFILLS} — a run at a lower load (an open loop, --rate, below "
                       "the server's capacity) or with lulls (--arrival gamma) would be, as "
                       "would one on a server that reports each request's prefill (llama.cpp, "
                       "vLLM's --enable-per-request-metrics)")
    y = prefill[use].astype(np.float64) / 1e6
    p = ok["prompt_tokens"][use].astype(np.float64)
    x = np.column_stack([np.ones_like(p), p, p * (p + 1) / 2])
    if np.ptp(p) == 0:
        x = x[:, :1]
    coef = np.r_[weighted_nnls(x, y, 1.0 / np.maximum(y, 1e-6)), np.zeros(3 - x.shape[1])]
    pred = np.maximum(np.column_stack([np.ones_like(p), p, p * (p + 1) / 2]) @ coef, 1e-9)
    return ((float(coef[0]), float(coef[1]), float(coef[2]), int(use.sum()), company),
            y / pred, int(p.max()))


def _in_flight_during(start: np.ndarray, end: np.ndarray, sent: np.ndarray,
                      done: np.ndarray) -> np.ndarray:
    """For each window [start, end), how many of the requests (sent, done) other than its
    own overlapped it (each window is one of the requests')."""
    s, d = np.sort(sent), np.sort(done)
    # overlapping: sent before the window ends and done after it starts
    began = np.searchsorted(s, end, side="left")
    ended = np.searchsorted(d, start, side="right")
    return began - ended - 1


def _slots(rows: np.ndarray, idx: np.ndarray, environment: dict[str, Any],
           sp: ServerSplit | None) -> tuple[int, str]:
    """The server's slots: the most requests it ran at once, by its own running gauge or by
    the client's count of streams decoding together (a stream decodes only in a slot, so
    neither exceeds them) — the larger. Exact when the server also queued (it had no free
    slot then); a lower bound when it never did, and said so."""
    ok = rows[idx]
    first, done = ok["t_first_deliv"], ok["t_done"]
    events = np.r_[first, done]
    change = np.r_[np.ones(len(ok), np.int64), -np.ones(len(ok), np.int64)]
    order = np.lexsort((change, events))  # an end before a start at the same instant
    decoding = int(np.cumsum(change[order]).max(initial=1))
    values = (environment.get("server_metrics") or {}).get("values") or {}
    gauge, name = 0, ""
    for metric in RUNNING_GAUGES:
        seen = [v for v in values.get(metric, []) if v is not None]
        if seen and max(seen) > gauge:
            gauge, name = int(round(max(seen))), metric
    slots = max(decoding, gauge, 1)
    how = (f"the most the server's {name} counted" if gauge >= decoding
           else "the most streams the client saw decoding at once")
    queued = sp is not None and sp.n and float(np.quantile(sp.parts["queue"], 0.9)) > 0.5 * \
        float(np.median(sp.ttft_ns))
    waiting = any(v for m in WAITING_GAUGES for v in values.get(m, []) if v)
    if queued or waiting:
        return slots, how + ", while it queued others"
    return slots, how + ": it never queued, so it may have more — --max-running sets them"
