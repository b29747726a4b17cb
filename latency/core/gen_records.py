"""A streamed generation's stamps, its components, and the columnar logs that hold them.

Every request and every token carries integer nanosecond stamps from ``time.perf_counter_ns``
(one clock). Components are differences of stamps chosen so that they add up exactly: the
time to first token (TTFT) is the sum of its parts, every gap between two tokens (ITL) is the
sum of its parts, and the request's end-to-end time (E2E) is TTFT plus every gap.

One request, up to its first token::

    intended ─(overhead: schedule lag)─▶ sent ─(network; in process: the hand-off)─▶ received
    ─(queue: wait for the tokenizer)─▶ tok_start ─(tokenize)─▶ tok_end ─(queue: wait for a
    slot)─▶ admitted ─(prefill: its own chunks' compute │ prefill_stall: steps spent on others'
    work, preemption)─▶ first token produced ─(detokenize)─▶ detokenized ─(delivery)─▶
    delivered (TTFT ends)

Every later token ``k``: the gap from token ``k-1``'s delivery to token ``k``'s is split by
what this sequence was waiting for at each moment of it — ``stall`` until the call that
produced ``k`` started (others' prefills, a preemption and its recompute), ``decode`` while
that call ran, ``detokenize`` from its end until ``k``'s text was ready, ``delivery`` until
the client had it. Each part is the overlap of the gap with one of four back-to-back
intervals, so the parts are never negative and sum to the gap exactly, even when the client
reads a token after the next step has already begun.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from latency.core.gen_reports import empty_reports
from latency.core.records import STATUS_ERROR, STATUS_OK, grown

#: the components of a generation, in the order they happen; the stacked bars use this order.
GEN_COMPONENTS: tuple[str, ...] = ("network", "queue", "tokenize", "prefill", "prefill_stall",
                                   "decode", "stall", "detokenize", "delivery", "overhead")
#: the parts of the time to first token (the last two are the first token's own)
TTFT_COMPONENTS: tuple[str, ...] = ("overhead", "network", "queue", "tokenize", "prefill",
                                    "prefill_stall", "detokenize", "delivery")
#: the parts of each gap between tokens
GAP_COMPONENTS: tuple[str, ...] = ("decode", "stall", "detokenize", "delivery")

#: what produced a token: the call that finished its prompt's prefill (the first token), a
#: decode step, or the prefill that recomputed a preempted sequence
KIND_FIRST, KIND_DECODE, KIND_RECOMPUTE = 0, 1, 2

#: one request's stamps, in the order they happen
GEN_STAMPS: tuple[str, ...] = ("intended", "sent", "received", "tok_start", "tok_end",
                               "admitted", "first", "first_detok", "first_deliv", "done")

#: one row a request: its stamps, its prefill's own compute, the sums of its gaps' parts
#: (ns), its sizes and ids.
GEN_DTYPE = np.dtype([(f"t_{s}", "<i8") for s in GEN_STAMPS] + [
    ("prefill_ns", "<i8"),
    ("decode_ns", "<i8"), ("stall_ns", "<i8"), ("detok_ns", "<i8"), ("delivery_ns", "<i8"),
    ("prompt_tokens", "<i4"), ("output_tokens", "<i4"), ("chunks", "<i4"),
    ("preemptions", "<i2"), ("client", "<i2"), ("replica", "<i2"),
    ("status", "<i1"), ("warmup", "?"), ("decomposed", "?"),
    # over HTTP: the stream's events that carried tokens (several tokens may share one);
    # 0 in process, where each token is handed over alone
    ("stream_chunks", "<i4"),
])

#: one row a token: which request (its row in the request log), its index in the output,
#: the call that produced it (start, end), its text ready, its delivery, what produced it and
#: how many sequences shared that call.
TOKEN_DTYPE = np.dtype([
    ("request", "<i4"), ("index", "<i4"),
    ("t_call_start", "<i8"), ("t_produced", "<i8"), ("t_detok", "<i8"), ("t_delivered", "<i8"),
    ("kind", "<i1"), ("batch", "<i2"),
])

#: one row a scheduler step: when it began, its prefill call ended, it ended; the time inside
#: the pipeline's calls (prefill, decode, sampling: the rest of a step is the scheduler's own
#: work and detokenizing); what it held; and its prefill's attention work — each chunk's
#: tokens times the positions they attend (``prefill_attention``): what makes a long prompt's
#: prefill grow faster than its length.
STEP_DTYPE = np.dtype([
    ("t_start", "<i8"), ("t_prefill_end", "<i8"), ("t_end", "<i8"), ("call_ns", "<i8"),
    ("prefill_tokens", "<i4"), ("prefill_seqs", "<i2"), ("decode_seqs", "<i2"),
    ("waiting", "<i4"), ("running", "<i2"), ("kv_used", "<i4"), ("preempted", "<i2"),
    ("replica", "<i2"), ("prefill_attn", "<i8"),
])
#: the step rows of history saved before ``prefill_attn`` existed (read back with it 0)
STEP_DTYPE_V1 = np.dtype([(n, STEP_DTYPE[n]) for n in STEP_DTYPE.names or ()
                          if n != "prefill_attn"])


def prefill_attention(chunks: list[tuple[int, int]]) -> int:
    """A prefill call's attention work: for each chunk (its first position, its length),
    every one of its tokens attends to the positions up to its own (causal) — ``n·start +
    n(n+1)/2`` token pairs."""
    return sum(n * start + n * (n + 1) // 2 for start, n in chunks)


#: the layout of ``STEP_DTYPE`` (a saved run says which it was written in)
STEP_LAYOUT = 2


def steps_from_bytes(data: bytes, layout: int) -> np.ndarray:
    """Step rows from their raw bytes in ``layout`` (1: before ``prefill_attn``, which is
    then 0: unknown)."""
    if layout >= STEP_LAYOUT:
        return np.frombuffer(data, dtype=STEP_DTYPE).copy()
    old = np.frombuffer(data, dtype=STEP_DTYPE_V1)
    out = np.zeros(len(old), dtype=STEP_DTYPE)
    for name in STEP_DTYPE_V1.names or ():
        out[name] = old[name]
    return out


def gap_parts(prev_delivered: np.ndarray, call_start: np.ndarray, produced: np.ndarray,
              detok: np.ndarray, delivered: np.ndarray, kind: np.ndarray
              ) -> dict[str, np.ndarray]:
    """Each gap's parts (int64 ns; see the module docstring). A token that came from
    recomputing a preempted sequence counts its call as ``stall``: that work redoes what the
    sequence had already done."""
    lo = prev_delivered

    def overlap(a: np.ndarray | None, b: np.ndarray) -> np.ndarray:
        top = np.minimum(b, delivered)
        bottom = lo if a is None else np.maximum(a, lo)
        return np.maximum(top - bottom, 0)

    stall = overlap(None, call_start)
    decode = overlap(call_start, produced)
    recompute = kind == KIND_RECOMPUTE
    if recompute.any():
        stall = stall + np.where(recompute, decode, 0)
        decode = np.where(recompute, 0, decode)
    return {"decode": decode, "stall": stall, "detokenize": overlap(produced, detok),
            "delivery": overlap(detok, delivered)}


def token_gaps(tokens: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Every gap between consecutive tokens of the same request in a token table (rows of
    ``TOKEN_DTYPE``, each request's tokens together, in order) and its parts: (gap ns, parts
    by ``GAP_COMPONENTS``)."""
    if len(tokens) < 2:
        return np.zeros(0, np.int64), {c: np.zeros(0, np.int64) for c in GAP_COMPONENTS}
    same = tokens["request"][1:] == tokens["request"][:-1]
    prev, cur = tokens[:-1][same], tokens[1:][same]
    parts = gap_parts(prev["t_delivered"], cur["t_call_start"], cur["t_produced"],
                      cur["t_detok"], cur["t_delivered"], cur["kind"])
    return cur["t_delivered"] - prev["t_delivered"], parts


def ttft_parts(rows: np.ndarray) -> dict[str, np.ndarray]:
    """The parts of each request's time to first token (int64 ns); they sum to ``ttft``."""
    t = {s: rows[f"t_{s}"] for s in GEN_STAMPS}
    waited = t["first"] - t["admitted"]
    prefill = np.minimum(rows["prefill_ns"], waited)
    return {
        "overhead": t["sent"] - t["intended"],
        "network": t["received"] - t["sent"],
        "queue": (t["tok_start"] - t["received"]) + (t["admitted"] - t["tok_end"]),
        "tokenize": t["tok_end"] - t["tok_start"],
        "prefill": prefill,
        "prefill_stall": waited - prefill,
        "detokenize": t["first_detok"] - t["first"],
        "delivery": t["first_deliv"] - t["first_detok"],
    }


def component_ns(rows: np.ndarray) -> dict[str, np.ndarray]:
    """Every component of each request (int64 ns), plus ``ttft``, ``e2e`` (``total``) and
    ``schedule_lag``. The components sum exactly to ``e2e``: TTFT's parts plus the sums of
    the gaps' parts (kept per request in the log)."""
    first = ttft_parts(rows)
    out: dict[str, Any] = {c: first.get(c, 0) for c in GEN_COMPONENTS}
    out["decode"] = rows["decode_ns"].astype(np.int64)
    out["stall"] = rows["stall_ns"].astype(np.int64)
    out["detokenize"] = first["detokenize"] + rows["detok_ns"]
    out["delivery"] = first["delivery"] + rows["delivery_ns"]
    zeros = np.zeros(len(rows), dtype=np.int64)
    out = {c: np.asarray(v, dtype=np.int64) + zeros for c, v in out.items()}
    out["ttft"] = rows["t_first_deliv"] - rows["t_intended"]
    out["total"] = out["e2e"] = rows["t_done"] - rows["t_intended"]
    out["schedule_lag"] = rows["t_sent"] - rows["t_intended"]
    return out


class GenRequest:
    """One streamed request in flight (plain attributes: the scheduler's hot path sets them).

    The token stamps grow as tokens are produced; ``tokens`` is the number produced so far
    and ``delivered`` the client's stamps of them."""

    __slots__ = ("prompt", "ids", "max_tokens", "client", "warmup", "on_token", "on_done",
                 "error", "cancelled", "output", "text", "preemptions", "chunks",
                 "prefill_ns", "replica", "call_start", "produced", "detok",
                 "delivered", "kinds", "batches", "decomposed", "stop_on_eos", "on_accepted",
                 "stream_chunks", "report", *(f"t_{s}" for s in GEN_STAMPS))

    def __init__(self, prompt: Any, max_tokens: int, client: int, warmup: bool,
                 t_intended: int) -> None:
        self.prompt = prompt
        self.ids: list[int] = []
        self.max_tokens = max_tokens
        self.client = client
        self.warmup = warmup
        self.on_token: Any = None
        self.on_done: Any = None
        self.error: str | None = None
        self.cancelled = False
        self.output: list[int] = []
        self.text: list[str] = []
        self.preemptions = 0
        self.chunks = 0
        self.prefill_ns = 0
        self.replica = 0
        self.decomposed = True
        #: stop at the model's end-of-sequence token: None follows the server's setting
        #: (an HTTP request's ``ignore_eos`` sets it per request)
        self.stop_on_eos: bool | None = None
        #: called once the tokenizer has accepted the prompt (its lengths fit), before it
        #: queues for a slot: the HTTP server starts its stream there
        self.on_accepted: Any = None
        self.stream_chunks = 0
        #: what a server of yours said of this request and the trace id sent with it: a row
        #: of ``gen_reports.REPORT_DTYPE`` as a tuple (None: nothing said, nothing sent)
        self.report: tuple[Any, ...] | None = None
        self.call_start: list[int] = []
        self.produced: list[int] = []
        self.detok: list[int] = []
        self.delivered: list[int] = []
        self.kinds: list[int] = []
        self.batches: list[int] = []
        self.t_intended = t_intended
        self.t_sent = self.t_received = self.t_tok_start = self.t_tok_end = 0
        self.t_admitted = self.t_first = self.t_first_detok = self.t_first_deliv = 0
        self.t_done = 0

    def close_gaps(self) -> None:
        """A request that failed or ended early: every stamp it never reached takes the
        previous one's value, so a failed stage keeps its measured time and the stages it
        never entered count zero. Tokens never delivered are dropped."""
        n = len(self.delivered)
        for name in ("call_start", "produced", "detok", "kinds", "batches"):
            del getattr(self, name)[n:]
        if n:
            self.t_first, self.t_first_detok = self.produced[0], self.detok[0]
            self.t_first_deliv, self.t_done = self.delivered[0], self.delivered[-1]
        last = self.t_sent
        for s in GEN_STAMPS[2:]:
            value = getattr(self, f"t_{s}")
            if value == 0 or value < last:
                setattr(self, f"t_{s}", last)
            else:
                last = value
        if not n:
            self.t_done = max(self.t_done, self.t_first_deliv)


@dataclass
class GenLog:
    """Append-only columnar logs of a generation run: a row a finished request, a row a
    token it received (in request order), grown by doubling and bounded by ``max_tokens``
    (a run stops measuring at that many stored tokens and says so)."""

    max_tokens: int
    rows: np.ndarray = field(default_factory=lambda: np.zeros(64, dtype=GEN_DTYPE))
    tokens: np.ndarray = field(default_factory=lambda: np.zeros(1024, dtype=TOKEN_DTYPE))
    size: int = 0
    n_tokens: int = 0

    def __post_init__(self) -> None:
        self.errors: dict[int, str] = {}
        #: a row a request, aligned with ``rows``: what its server reported (``gen_reports``)
        self.reports = empty_reports(len(self.rows))

    @property
    def full(self) -> bool:
        return self.n_tokens >= self.max_tokens

    def append(self, r: GenRequest) -> int:
        """Write one finished request and its tokens; its gaps' parts are summed here, once.
        Caller holds the log's lock."""
        n = min(len(r.delivered), max(self.max_tokens - self.n_tokens, 0))
        if self.size == len(self.rows):
            self.rows = grown(self.rows, self.size + 1)
            reports = empty_reports(len(self.rows))
            reports[: len(self.reports)] = self.reports
            self.reports = reports
        if self.n_tokens + n > len(self.tokens):
            self.tokens = grown(self.tokens, self.n_tokens + n)
        i = self.size
        delivered = np.asarray(r.delivered, dtype=np.int64)
        call_start = np.asarray(r.call_start, dtype=np.int64)
        produced = np.asarray(r.produced, dtype=np.int64)
        detok = np.asarray(r.detok, dtype=np.int64)
        kinds = np.asarray(r.kinds, dtype=np.int8)
        sums = [0, 0, 0, 0]
        if len(delivered) > 1:  # over every token, stored or not: the row adds up
            parts = gap_parts(delivered[:-1], call_start[1:], produced[1:], detok[1:],
                              delivered[1:], kinds[1:])
            sums = [int(parts[c].sum()) for c in GAP_COMPONENTS]
        if n:
            seg = self.tokens[self.n_tokens:self.n_tokens + n]
            seg["request"], seg["index"] = i, np.arange(n)
            seg["t_call_start"], seg["t_produced"] = call_start[:n], produced[:n]
            seg["t_detok"], seg["t_delivered"] = detok[:n], delivered[:n]
            seg["kind"], seg["batch"] = kinds[:n], r.batches[:n]
            self.n_tokens += n
        status = STATUS_ERROR if r.error is not None else STATUS_OK
        self.rows[i] = (*(getattr(r, f"t_{s}") for s in GEN_STAMPS), r.prefill_ns, *sums,
                        len(r.ids), len(delivered), r.chunks, min(r.preemptions, 32767), r.client,
                        r.replica, status, r.warmup, r.decomposed, r.stream_chunks)
        if r.report is not None:
            self.reports[i] = r.report
        if r.error is not None:
            self.errors[i] = r.error
        self.size = i + 1
        return i

    def view(self) -> tuple[np.ndarray, np.ndarray]:
        return self.rows[: self.size], self.tokens[: self.n_tokens]

    def reports_view(self) -> np.ndarray:
        return self.reports[: self.size]

