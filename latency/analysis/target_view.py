"""What a generation from a server of yours (``--target``) says beyond the client's metrics:
the split of its time as far as the server reported it, per-chunk against per-token gaps, the
client's and the server's token counts, and the verdict on what *you* control on that server.

The client alone sees each request whole: its time to the first token and its gaps. The split
(``server_split``) adds what the server said of the request — queue, prefill, decode — each
labelled with where it came from (reported, derived, measured). Without any report the split
is unavailable and the view says so; it never shows a guess as measured.

Gaps: an OpenAI-compatible stream sends text in chunks. With the served model's tokenizer
(``--tokenizer``) every token gets its chunk's stamp, so ITL is per token (the tokens of one
chunk are 0 ms apart) and the chunk gaps — between successive chunks — are kept beside it;
when chunks carry several tokens the two differ, and the view says which one a peer's "ITL"
is. The first token of another request arriving inside a long gap marks that gap as
coinciding with someone's prefill: when the longest gaps coincide with prefills much more
often than gaps do in general, the server's prefills stall its decodes (chunked prefill is
the lever).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from latency.analysis.findings import Finding, Verdict
from latency.analysis.server_split import TTFT_SPLIT, ServerSplit, split_for
from latency.analysis.stats import LatencyStats, describe_ms, tail_makeup_ms
from latency.core import fmt
from latency.core.gen_records import STATUS_OK
from latency.core.gen_reports import (
    DERIVED,
    FROM_REPORT,
    MEASURED,
    MISSING,
    REPORTED,
    SOURCE_LLAMACPP,
    SPLIT_PARTS,
)

#: a part leading the tail's TTFT by this share is named as its cause
LEADING_SHARE = 0.4
#: chunks carrying this many tokens on average make per-chunk and per-token gaps differ
MULTI_TOKEN_CHUNKS = 1.2
#: the longest gaps coincide with others' prefills this much more often than gaps in general
COINCIDENCE_RATIO = 2.0
#: the fewest gaps in the slowest 1 % for their coinciding with prefills to be a finding
MIN_SPIKES = 5
#: a gap this many times the median gap between chunks is a stall
STALL_FACTOR = 4.0
#: the most stalls examined (the longest first): each is checked against every stream
MAX_STALLS = 2_000
#: prompt tokens read from the server's cache at or above this share make prefix caching
#: a lever already pulled
CACHED_SHARE = 0.5
#: a prefill whose 90th percentile is this many times more above its shortest than the
#: prompts' own lengths vary: the prefills share their steps with other prompts
SHARED_PREFILL = 3.0
#: the server's gauges that count requests waiting for a slot (``server_metrics.GAUGES``)
WAITING_GAUGES = ("vllm:num_requests_waiting", "sglang:num_queue_reqs",
                  "llamacpp:requests_deferred", "tgi_queue_size", "latency_lab_gen_waiting")

LEVERS = {
    "queue": "requests wait for a slot on the server — more slots (e.g. vLLM's "
             "--max-num-seqs) or replicas, or lower load",
    "prefill": "the prompt's own compute on the server — shorter prompts, prefix caching, "
               "or a faster accelerator",
    "network": "the network and the server's frontend (HTTP, tokenizing, the API layer) — "
               "closer to the server, or a lighter frontend",
}


@dataclass
class TargetView:
    """The split and the stream's shape of a target run (times in ms)."""

    split: ServerSplit
    parts_ms: dict[str, LatencyStats]
    tail_shares: dict[str, float]
    requests: int
    rtt_floor_ms: float
    forces_length: bool
    #: per token (with a tokenizer) and per chunk: every gap between successive chunks
    itl_chunk_ms: LatencyStats = field(default_factory=LatencyStats)
    tokens_per_chunk: float = 1.0
    counted_by: str = "chunks"
    #: requests whose client count differs from the server's usage, and the mean |diff|
    count_differs: int = 0
    count_compared: int = 0
    count_mean_abs_diff: float = 0.0
    #: gaps at or above ITL's p99 holding another request's first token, and all gaps'
    spikes_coinciding: float | None = None
    gaps_coinciding: float | None = None
    #: requests whose report was there but unusable (the run's warning says why)
    unusable_reports: int = 0
    #: the share of prompt tokens the server read from its prompt cache (None: not said),
    #: and the requests that read any
    cached_share: float | None = None
    cache_hits: int = 0
    #: the most requests waiting for a slot at any scrape of the server's /metrics while
    #: measuring, and the scrapes (None: not scraped, or no such gauge)
    server_waiting_peak: float | None = None
    server_scrapes: int = 0
    #: gaps in which the server stalled every stream in flight at once (``STALL_FACTOR``):
    #: how many, the longest and all of them (ms), and those holding a first token of this
    #: run's own (its prefill); None where too few streams overlapped to tell
    stalls: int | None = None
    stall_max_ms: float = 0.0
    stall_total_ms: float = 0.0
    stalls_own: int = 0
    #: the split prefill's 90th percentile over its shortest, and the evaluated prompts'
    #: lengths' (None: too few split, or the server counts no prompt tokens)
    prefill_spread: float | None = None
    prompt_spread: float | None = None

    def to_dict(self) -> dict[str, Any]:
        s = self.split
        return {"requests_split": s.n, "requests": self.requests, "sources": s.sources,
                "provenance": s.provenance, "unreported": s.unreported,
                "inconsistent": s.inconsistent, "incomplete": s.incomplete,
                "clamped": s.clamped, "floor_misfit": s.floor_misfit,
                "resolution_ms": s.tolerance_ns / 1e6,
                "rtt_floor_ms": self.rtt_floor_ms,
                "parts_ms": {p: v.to_dict() for p, v in self.parts_ms.items()},
                "ttft_p99_shares": self.tail_shares, "forces_length": self.forces_length,
                "itl_chunk_ms": self.itl_chunk_ms.to_dict(),
                "tokens_per_chunk": self.tokens_per_chunk, "counted_by": self.counted_by,
                "count_differs": self.count_differs, "count_compared": self.count_compared,
                "count_mean_abs_diff": self.count_mean_abs_diff,
                "itl_spikes_coinciding_with_prefills": self.spikes_coinciding,
                "gaps_coinciding_with_prefills": self.gaps_coinciding,
                "cached_share": self.cached_share, "cache_hits": self.cache_hits,
                "server_waiting_peak": self.server_waiting_peak,
                "server_scrapes": self.server_scrapes,
                "stalls": self.stalls, "stall_max_ms": self.stall_max_ms,
                "stall_total_ms": self.stall_total_ms, "stalls_own": self.stalls_own}

    def ttft_parts_ms(self) -> dict[str, dict[str, float]]:
        """The send-anchored time to first token of the requests split, as its parts
        (network, queue, prefill; ms): the mean request's and the requests' around its p99
        (``stats.tail_makeup_ms``) — the split's counterpart of a summary's
        ``ttft_mean_parts_ms`` and ``ttft_p99_parts_ms`` (empty: nothing split)."""
        s = self.split
        if not s.n:
            return {}
        parts = {p: s.parts[p] / 1e6 for p in TTFT_SPLIT}
        return {"mean": {p: float(v.mean()) for p, v in parts.items()},
                "p99": tail_makeup_ms(parts, s.ttft_ns / 1e6, 0.99)}

    # ---- text ------------------------------------------------------------------------------
    def lines(self) -> list[str]:
        s = self.split
        out: list[str] = []
        if not s.n:
            why = self.unavailable_reason()
            out.append(f"server split: unavailable — {why}; the client's times above are "
                       "all that is known")
        else:
            src = ", ".join(f"{k} ({v})" for k, v in s.sources.items())
            out.append(f"server split of {s.n} of {self.requests} requests (from {src}; "
                       "send-anchored, ms):")
            head = f"{'ms':<14}{'mean':>10}{'p50':>10}{'p99':>10}  from"
            out.append(head)
            prov = _provenance(s.provenance)
            for p in SPLIT_PARTS:
                st = self.parts_ms[p]
                out.append(f"{p:<14}{fmt.ms(st.mean):>10}{fmt.ms(st.p50):>10}"
                           f"{fmt.ms(st.p99):>10}  {prov.get(p, '')}")
            shares = ", ".join(f"{p} {fmt.share(v)}" for p, v in sorted(
                self.tail_shares.items(), key=lambda kv: -kv[1]))
            out.append(f"TTFT's tail (its slowest 1 %) at the server: {shares}")
            if s.clamped:
                out.append(f"{s.clamped} request(s) split with a part clamped at 0: their "
                           "report exceeded the client's time by less than the client can "
                           f"resolve (±{fmt.ms(s.tolerance_ns / 1e6)} ms, measured in this run)")
            if s.unreported or s.inconsistent or s.incomplete:
                beyond = f" by more than ±{fmt.ms(s.tolerance_ns / 1e6)} ms" \
                    if s.tolerance_ns else ""
                floor = f" ({s.floor_misfit} of them only by the round-trip floor of " \
                    f"{fmt.ms(self.rtt_floor_ms)} ms)" if s.floor_misfit else ""
                out.append(f"left out of the split: {s.unreported} without a report, "
                           f"{s.incomplete} whose report lacked a part, {s.inconsistent} "
                           f"whose report exceeded the client's time{beyond}{floor}")
        if self.cached_share is not None:
            out.append(f"prompt cache: {fmt.share(self.cached_share)} of the prompt tokens were "
                       f"read from the server's cache ({self.cache_hits} of {self.requests} "
                       "requests read some)")
        if self.stalls:
            out.append(f"stalls: the server stalled every stream in flight at once "
                       f"{self.stalls} time(s), the longest {fmt.ms(self.stall_max_ms)} ms "
                       f"({fmt.ms(self.stall_total_ms)} ms in all); {self.stalls_own} of them "
                       "held a first token of this run's")
        out.append(f"gaps: per {'chunk' if self.counted_by == 'chunks' else 'token'} "
                   f"(tokens counted by {self.counted_by}); between chunks: "
                   f"p50 {fmt.ms(self.itl_chunk_ms.p50)} ms, p99 {fmt.ms(self.itl_chunk_ms.p99)} "
                   f"ms; {self.tokens_per_chunk:.2f} tokens a chunk")
        return out

    def unavailable_reason(self) -> str:
        """Why no request could be split."""
        s = self.split
        if s.inconsistent and s.floor_misfit == s.inconsistent:
            return (f"the round-trip floor ({fmt.ms(self.rtt_floor_ms)} ms, the probe's "
                    "fastest GET /models) is longer than what each request's time to first "
                    "token leaves after the reported prefill: the floor does not fit this "
                    "server (slow to answer the probe), not its reports")
        if s.inconsistent:
            return (f"{s.inconsistent} report(s) longer than the client saw were left out "
                    "(clocks or the report disagree)")
        if self.unusable_reports:
            return (f"{self.unusable_reports} report(s) of the server's could not be used "
                    "(see the warning)")
        if s.incomplete:
            return (f"{s.incomplete} report(s) lacked a part their server gives (e.g. TGI's "
                    "x-time-per-token): left out rather than guessed")
        return ("the server reported nothing of its requests (llama.cpp's timings, vLLM's "
                "--enable-per-request-metrics, TGI's headers or our own server give it)")

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        if self.tokens_per_chunk >= MULTI_TOKEN_CHUNKS:
            if self.counted_by != "chunks":
                out.append(Finding(
                    f"chunks carry {self.tokens_per_chunk:.2f} tokens on average (speculative "
                    "decoding, or a server that coalesces its writes): ITL is per token (the "
                    "tokens of one chunk 0 ms apart), the gap between chunks is "
                    f"p50 {fmt.ms(self.itl_chunk_ms.p50)} ms — a peer's 'ITL' per chunk is "
                    "that one", "run"))
            else:
                out.append(Finding(
                    f"the server counts {self.tokens_per_chunk:.2f} tokens a chunk: these gaps "
                    "are per chunk, not per token — give the served model's --tokenizer DIR "
                    "for per-token gaps", "run"))
        if self.count_differs:
            out.append(Finding(
                f"token counts: the client's count differs from the server's usage in "
                f"{self.count_differs} of {self.count_compared} requests (mean |difference| "
                f"{self.count_mean_abs_diff:.1f} tokens; re-tokenizing text can merge at a "
                "boundary differently)", "run"))
        if self.split.floor_misfit:
            out.append(Finding(
                f"{self.split.floor_misfit} request(s) fit their report only with less "
                f"network time than the round-trip floor ({fmt.ms(self.rtt_floor_ms)} ms, the "
                "probe's fastest GET /models): the floor, not the report, does not fit — a "
                "server that answers small requests slowly (e.g. without TCP_NODELAY) "
                "inflates it", "run"))
        other = self.split.inconsistent - self.split.floor_misfit
        if other:
            out.append(Finding(
                f"{other} request(s) reported more time than the client saw"
                + (f", beyond the ±{fmt.ms(self.split.tolerance_ns / 1e6)} ms it can resolve"
                   if self.split.tolerance_ns else "")
                + ": left out of the split (clocks or the report disagree)", "run"))
        if self.stalls and self.stalls > self.stalls_own:
            foreign = self.stalls - self.stalls_own
            out.append(Finding(
                f"the server stalled every stream at once {foreign} time(s) when none of this "
                f"run's requests was starting (the longest stall "
                f"{fmt.ms(self.stall_max_ms)} ms): another client's prompt being prefilled, "
                "or a pause of the server — chunked prefill bounds a prefill's stall "
                "(llama.cpp's --ubatch-size, vLLM's --max-num-batched-tokens)", "run"))
        if self._spikes_lead():
            out.append(Finding(
                f"ITL spikes coincide with other requests' prefills: "
                f"{fmt.share(self.spikes_coinciding or 0)} of the slowest 1 % of the gaps "
                f"between chunks held another request's first token, against "
                f"{fmt.share(self.gaps_coinciding or 0)} of all of them — the server's prefills "
                "stall its decodes: enable chunked prefill (vLLM's --enable-chunked-prefill, "
                "a smaller --max-num-batched-tokens)", "run"))
        return out

    def lever(self, part: str) -> str:
        """What to change for ``part``, as far as the run's own facts support it: no slots
        are advised where the server's /metrics saw no request wait for one, no prefix
        caching where the server already reads most prompt tokens from its cache."""
        if part == "queue" and self.server_waiting_peak == 0:
            return (f"yet no request waited for a slot (the server's /metrics: 0 waiting at "
                    f"each of {self.server_scrapes} scrapes) — the wait is inside the "
                    "server's step: another request's prefill in the same batch (chunked "
                    "prefill, a smaller batch: llama.cpp's --ubatch-size, vLLM's "
                    "--max-num-batched-tokens) or its frontend")
        if part == "prefill" and self._shared_prefill():
            return (f"yet the prefill varies {self.prefill_spread:.1f}× (its 90th percentile "
                    f"over its shortest) for prompts whose lengths vary "
                    f"{self.prompt_spread:.1f}× — "
                    "the prompts share their "
                    "steps with others' (another client's long prompt in the same batch): "
                    "chunked prefill, a smaller batch (llama.cpp's --ubatch-size, vLLM's "
                    "--max-num-batched-tokens)")
        if part == "prefill" and self.cached_share is not None and \
                self.cached_share >= CACHED_SHARE:
            return (f"the prompt's own compute on the server, though "
                    f"{fmt.share(self.cached_share)} of the prompt tokens already come from "
                    "its cache — shorter prompts, or a faster accelerator")
        return LEVERS[part]

    def _shared_prefill(self) -> bool:
        a, b = self.prefill_spread, self.prompt_spread
        return a is not None and b is not None and a >= SHARED_PREFILL * b

    def _spikes_lead(self) -> bool:
        a, b = self.spikes_coinciding, self.gaps_coinciding
        return a is not None and b is not None and a >= 0.5 and a >= COINCIDENCE_RATIO * b

    def verdict(self) -> Verdict | None:
        """'TTFT p99 … (from send, the n requests split) is 76 % queue at the server: …' when
        a part leads the tail of the split requests' own TTFT."""
        causes: list[str] = []
        name = None
        share = 0.0
        if self.tail_shares:
            name = max(self.tail_shares, key=lambda k: self.tail_shares[k])
            share = self.tail_shares[name]
            if share >= LEADING_SHARE:
                where = "at the server" if name != "network" else "before the server"
                p99 = float(np.percentile(self.split.ttft_ns, 99)) / 1e6
                of = "" if self.split.n == self.requests else \
                    f" of the {self.split.n} requests split"
                causes.append(f"TTFT p99 {fmt.ms(p99)} ms (from send{of}) is "
                              f"{fmt.share(share)} {name} {where}: {self.lever(name)}")
        if self._spikes_lead():
            causes.append("ITL spikes coincide with other requests' prefills: enable "
                          "chunked prefill on the server")
        elif self.stalls and self.stalls > self.stalls_own:
            causes.append(f"the server stalled every stream at once {self.stalls} time(s) "
                          f"(the longest {fmt.ms(self.stall_max_ms)} ms), "
                          f"{self.stalls - self.stalls_own} of them while none of this run's "
                          "requests was starting: another client's prefill — chunked prefill "
                          "on the server bounds it")
        if not causes:
            return None
        return Verdict("; ".join(causes), name, share)


def _provenance(prov: dict[str, dict[str, str]]) -> dict[str, str]:
    """Each part's provenance over the sources seen ('reported by vLLM per-request metrics')."""
    out: dict[str, list[str]] = {}
    for source, rule in prov.items():
        for part, how in rule.items():
            text = {REPORTED: f"reported ({source})",
                    DERIVED: "derived (client time − reported parts)",
                    FROM_REPORT: f"derived from the server's figures ({source})",
                    MEASURED: "measured (the client)"}.get(how, how)
            if text not in out.setdefault(part, []):
                out[part].append(text)
    return {p: "; ".join(v) for p, v in out.items()}


def target_view(rows: np.ndarray, tokens: np.ndarray, reports: np.ndarray,
                environment: dict[str, Any], tokenizer: bool,
                server_series: dict[str, Any] | None = None) -> TargetView:
    """The view of a target run's successful measured requests; ``tokenizer``: the run
    counted tokens with the served model's tokenizer; ``server_series``: the server's
    /metrics scraped while it measured (``server_metrics.measured_window``)."""
    target = environment.get("target") or {}
    # a tokenizer that knows only a reply's count (vLLM's /tokenize) leaves gaps per chunk
    per_chunk = target.get("tokenizer_per_chunk", True)
    counted_by = ("the server's per-chunk usage" if target.get("chunk_usage") else
                  "chunks" if not tokenizer or not per_chunk else
                  "the server's /tokenize"
                  if str(target.get("tokenizer", "")).startswith("the server's /tokenize")
                  else "tokenizer")
    rtt_ms = float(target.get("rtt_floor_ms") or 0.0)
    ok = (~rows["warmup"]) & (rows["status"] == STATUS_OK)
    idx = np.flatnonzero(ok)
    if len(reports) != len(rows):
        from latency.core.gen_reports import empty_reports

        reports = empty_reports(len(rows))
    sp = split_for(rows[idx], reports[idx], target)
    parts = {p: describe_ms(sp.parts[p], with_ci=False) for p in SPLIT_PARTS}
    view = TargetView(split=sp, parts_ms=parts, tail_shares=sp.tail_shares(0.99),
                      requests=len(idx), rtt_floor_ms=rtt_ms,
                      forces_length=bool(target.get("forces_length", True)),
                      counted_by=counted_by,
                      unusable_reports=int(target.get("unusable_reports") or 0))
    _gaps(view, rows, tokens, idx)
    rep = reports[idx]
    server = rep["output_tokens"].astype(np.int64)
    known = server != MISSING
    # tokens a chunk stay the client's own count (``_gaps``): the server's count is in it
    # where it could be believed (at most the tokens asked, the bytes that streamed) — a
    # report's bare claim never makes chunks "carry" tokens that did not stream
    counted = rep["counted_tokens"].astype(np.int64)
    both = known & (counted != MISSING)
    if both.any():
        diff = np.abs(counted[both] - server[both])
        view.count_compared = int(both.sum())
        view.count_differs = int((diff != 0).sum())
        view.count_mean_abs_diff = float(diff.mean())
    _cache(view, rep)
    _prefill_spread(view, rep)
    _waiting(view, server_series)
    _stalls(view, rows, tokens, idx)
    return view


def _cache(view: TargetView, rep: np.ndarray) -> None:
    """The share of prompt tokens read from the server's prompt cache: llama.cpp counts
    them apart from the prompt it evaluated (``cache_n`` beside ``prompt_n``), vLLM and the
    OpenAI usage within the prompt (``prompt_tokens_details.cached_tokens``)."""
    cached = rep["cached_tokens"].astype(np.int64)
    prompt = rep["prompt_tokens"].astype(np.int64)
    known = (cached != MISSING) & (prompt != MISSING)
    if not known.any():
        return
    apart = rep["source"][known] == SOURCE_LLAMACPP
    whole = np.where(apart, prompt[known] + cached[known], prompt[known])
    if whole.sum() <= 0:
        return
    view.cached_share = float(cached[known].sum() / whole.sum())
    view.cache_hits = int((cached[known] > 0).sum())


def _prefill_spread(view: TargetView, rep: np.ndarray) -> None:
    """How much the split requests' prefill varies (p90 / shortest) beside how much the prompts
    the server evaluated vary: a prefill that varies far more than its prompt shares its
    steps with other prompts."""
    s = view.split
    if s.n < 10:
        return
    prompt = rep["prompt_tokens"][s.rows].astype(np.float64)
    prefill = s.parts["prefill"].astype(np.float64)
    if (prompt <= 0).any() or np.median(prefill) <= 0:
        return
    low = float(prefill.min())  # the prefill alone, as near as the run saw it
    if low <= 0:
        return
    view.prefill_spread = float(np.percentile(prefill, 90)) / low
    view.prompt_spread = float(np.percentile(prompt, 90) / prompt.min())


def _waiting(view: TargetView, series: dict[str, Any] | None) -> None:
    """The most requests the server said were waiting for a slot at any scrape."""
    if not series:
        return
    values = series.get("values") or {}
    skip = 1 if series.get("pre_window") else 0
    seen = [x for name in WAITING_GAUGES for x in (values.get(name) or [])[skip:]
            if x is not None]
    if seen:
        view.server_waiting_peak = float(max(seen))
        view.server_scrapes = max(len(series.get("t_ns") or []) - skip, 0)


def _stalls(view: TargetView, rows: np.ndarray, tokens: np.ndarray, idx: np.ndarray) -> None:
    """Gaps in which every stream in flight stopped at once: a gap of one stream at least
    ``STALL_FACTOR`` × the median gap between chunks, during which each other stream that
    had begun before it and went on after it delivered nothing either. The server paused
    them all — a prefill in the same step (ours when one of this run's first tokens ends
    it, else another client's) or the server itself. Overlapping stalls are one."""
    t = tokens[np.isin(tokens["request"], idx)]
    if len(t) < 20 or len(idx) < 2:
        return
    order = np.lexsort((t["t_delivered"], t["request"]))
    t = t[order]
    same = t["request"][1:] == t["request"][:-1]
    start = t["t_delivered"][:-1][same]
    end = t["t_delivered"][1:][same]
    owner = t["request"][1:][same]
    dur = end - start
    moving = dur[dur > 0]
    if len(moving) < 20:
        return
    median = float(np.median(moving))
    long = np.flatnonzero(dur >= STALL_FACTOR * median)
    long = long[np.argsort(-dur[long])][:MAX_STALLS]
    # each request's stamps are one slice of the sorted tokens (one pass, not one a request)
    ids, at = np.unique(t["request"], return_index=True)
    ends = np.append(at[1:], len(t))
    stamps = t["t_delivered"]
    first, done = rows["t_first_deliv"][ids], rows["t_done"][ids]
    firsts = np.sort(rows["t_first_deliv"][idx])
    slack = int(median)
    events: list[tuple[int, int, bool]] = []
    overlapped = False
    for g in long.tolist():
        s, e, r = int(start[g]), int(end[g]), int(owner[g])
        others = np.flatnonzero((first <= s) & (done >= e) & (ids != r))
        if not len(others):
            continue
        overlapped = True
        # a token of another stream strictly inside the gap (its slack trimmed): not a stall
        if any(np.searchsorted(stamps[at[k]:ends[k]], e - slack, "left")
               > np.searchsorted(stamps[at[k]:ends[k]], s + slack, "right")
               for k in others.tolist()):
            continue
        own = bool(((firsts > s) & (firsts <= e + slack)).any())
        events.append((s, e, own))
    if not overlapped:
        return
    merged: list[list[Any]] = []
    for s, e, own in sorted(events):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
            merged[-1][2] = merged[-1][2] or own
        else:
            merged.append([s, e, own])
    view.stalls = len(merged)
    if merged:
        spans = [(e - s) / 1e6 for s, e, _ in merged]
        view.stall_max_ms = float(max(spans))
        view.stall_total_ms = float(sum(spans))
        view.stalls_own = sum(1 for *_, own in merged if own)


def _gaps(view: TargetView, rows: np.ndarray, tokens: np.ndarray, idx: np.ndarray) -> None:
    """Chunk gaps, tokens a chunk, and how often the longest gaps hold a prefill."""
    t = tokens[np.isin(tokens["request"], idx)]
    if len(t) < 2:
        return
    same = t["request"][1:] == t["request"][:-1]
    gap = (t["t_delivered"][1:] - t["t_delivered"][:-1])[same]
    chunk = gap[gap > 0]
    view.itl_chunk_ms = describe_ms(chunk, with_ci=False)
    chunks = int(rows["stream_chunks"][idx].sum())
    if chunks:
        view.tokens_per_chunk = float(rows["output_tokens"][idx].sum()) / chunks
    if len(chunk) < 20 or len(idx) < 2:
        return
    starts = t["t_delivered"][:-1][same][gap > 0]
    ends = t["t_delivered"][1:][same][gap > 0]
    owner = t["request"][1:][same][gap > 0]
    firsts = np.sort(rows["t_first_deliv"][idx])
    lo = np.searchsorted(firsts, starts, side="right")
    hi = np.searchsorted(firsts, ends, side="right")
    # another request's first token inside the gap (not the gap's own request's)
    inside = hi - lo
    own = (rows["t_first_deliv"][owner] > starts) & (rows["t_first_deliv"][owner] <= ends)
    holds = (inside - own.astype(np.int64)) > 0
    cut = np.quantile(chunk, 0.99)
    top = chunk >= cut
    if top.sum() < MIN_SPIKES:  # a share of one or two gaps is no finding
        return
    view.spikes_coinciding = float(holds[top].mean())
    view.gaps_coinciding = float(holds.mean())
