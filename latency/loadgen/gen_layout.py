"""A streamed request's server-side stamps, placed on the client's clock from the server's
account (``latency.serve.gen_account``): the streamed twin of ``http_client.lay_out``.

Only two kinds of stamp are the client's own readings: ``sent`` and each token's ``delivered``
(the moment its event was parsed). The server's account gives every server-side moment as a
duration after it received the request (``received``). So all of them are placed from one
``received`` on the client's clock, chosen as::

    network = min over tokens k of (delivered[k] − sent − pick[k])      (≥ 0)
    received = sent + network

where ``pick[k]`` is when the server's writer took token ``k``, after its receipt. That is:
the network of the request is the least wire time any of its tokens saw (request up, that
token's event down, the HTTP and JSON work on both ends), and what a token's event took beyond
it is its ``delivery``. So every placed server stamp comes before the client's delivery of the
same token: no part is negative, TTFT's ``network`` is the client's time to the first token
less the server's (as for a one-shot request: client − ``Server-Timing``), and the parts of
every gap sum exactly to it (``gen_records.gap_parts``) as in process.

Where the split between the two directions is unknown (no shared clock) the whole wire time is
put before the server's receipt: the server's stamps are its own durations, exactly, shifted by
the downlink of the fastest event.

No usable account (another server, a failure mid-stream): ``undecomposed`` keeps the client's
view whole — TTFT as ``network``, each gap as ``delivery`` — and flags the request
``decomposed=False``.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from latency.core.gen_records import KIND_DECODE, GenRequest
from latency.serve.gen_account import ACCOUNT_VERSION, TOKEN_FIELDS

#: why an account that was sent cannot be used (counted by the transport, as ``UNUSABLE``
#: is for one-shot Server-Timing headers)
UNUSABLE = ("malformed", "mismatch", "longer")


class AccountError(ValueError):
    """An account that cannot be used; ``why`` is a key of ``UNUSABLE``."""

    def __init__(self, why: str, message: str) -> None:
        super().__init__(message)
        self.why = why


@dataclass(frozen=True)
class Account:
    """The server's account, checked, as offsets (ns) after its receipt of the request."""

    tokens: int
    prompt_tokens: int
    preemptions: int
    prefill_chunks: int
    replica: int
    tok_start: int
    tok_end: int
    admitted: int
    prefill_ns: int
    call: list[int]
    produced: list[int]
    detok: list[int]
    pick: list[int]
    kinds: list[int]
    batches: list[int]
    #: tokens each content event carried (None: one each)
    chunk_tokens: list[int] | None


#: the largest value each counted field of an account may hold: what its column in the
#: request and token logs holds (``GEN_DTYPE``, ``TOKEN_DTYPE``), and no more prompt tokens
#: than any context — a server's figure never sizes anything the client allocates
I2, I4, I8 = 2**15 - 1, 2**31 - 1, 2**63 - 1
MAX_ACCOUNT_PROMPT = 10_000_000


def _int(v: Any, name: str, low: int = 0, high: int = I8) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
        raise AccountError("malformed", f"{name} is not a whole number from {low} to "
                           f"{high:,}: {str(v)[:40]}")
    return v


def parse_account(d: Any) -> Account:
    """The account ``d`` (the decoded ``latency_lab`` object), checked; AccountError if not
    usable (a stamp out of order, a list of the wrong length)."""
    if not isinstance(d, dict) or d.get("version") != ACCOUNT_VERSION:
        raise AccountError("malformed", f"not an account of version {ACCOUNT_VERSION}")
    n = _int(d.get("tokens"), "tokens")
    ns, tok = d.get("ns"), d.get("token_ns")
    if not isinstance(ns, dict) or not isinstance(tok, dict):
        raise AccountError("malformed", "no ns or token_ns")
    arrays = {}
    for f in TOKEN_FIELDS:
        values = tok.get(f)
        if not isinstance(values, list) or len(values) != n:
            raise AccountError("malformed", f"token_ns.{f} is not a list of {n}")
        arrays[f] = [_int(v, f"token_ns.{f}") for v in values]
    kinds = d.get("kinds")
    batches = d.get("batches")
    if not isinstance(kinds, str) or len(kinds) != n or not kinds.isdigit():
        raise AccountError("malformed", f"kinds is not {n} digits")
    if not isinstance(batches, list) or len(batches) != n:
        raise AccountError("malformed", f"batches is not a list of {n}")
    chunks = d.get("chunk_tokens")
    if chunks is not None:
        if not isinstance(chunks, list) or sum(_int(c, "chunk_tokens", 1) for c in chunks) != n:
            raise AccountError("malformed", f"chunk_tokens do not add up to {n} tokens")
    tok_start = _int(ns.get("tok_start"), "ns.tok_start")
    tok_end = _int(ns.get("tok_end"), "ns.tok_end", tok_start)
    admitted = _int(ns.get("admitted"), "ns.admitted", tok_end)
    call = list(accumulate(arrays["call"]))
    if n and call[0] < admitted:
        raise AccountError("malformed", "the first token's call began before admission")
    produced = [c + r for c, r in zip(call, arrays["run"], strict=True)]
    detok = [p + t for p, t in zip(produced, arrays["detok"], strict=True)]
    pick = [t + k for t, k in zip(detok, arrays["pick"], strict=True)]
    return Account(n, _int(d.get("prompt_tokens"), "prompt_tokens", high=MAX_ACCOUNT_PROMPT),
                   _int(d.get("preemptions"), "preemptions", high=I2),
                   _int(d.get("prefill_chunks"), "prefill_chunks", high=I4),
                   _int(d.get("replica"), "replica", high=I2), tok_start, tok_end, admitted,
                   _int(ns.get("prefill"), "ns.prefill"), call, produced, detok, pick,
                   [int(k) for k in kinds], [_int(b, "batches", high=I2) for b in batches],
                   chunks)


def per_token(stamps: list[int], chunk_tokens: list[int] | None) -> list[int]:
    """Each token's delivery: its event's stamp (every token of an event has the event's)."""
    if chunk_tokens is None:
        return list(stamps)
    return [s for s, k in zip(stamps, chunk_tokens, strict=True) for _ in range(k)]


def lay_out(req: GenRequest, a: Account, delivered: list[int]) -> None:
    """Fill ``req``'s server-side stamps from ``a``, given its ``sent`` and its tokens'
    ``delivered`` (one a token, as many as the account has); AccountError("longer") when the
    server's own time exceeds what the client saw."""
    sent = req.t_sent
    if len(delivered) != a.tokens:
        raise AccountError("mismatch", f"{len(delivered)} tokens streamed, the account has "
                           f"{a.tokens}")
    if a.tokens:
        network = min(d - sent - p for d, p in zip(delivered, a.pick, strict=True))
    else:
        network = 0
    if network < 0:
        raise AccountError("longer", "the server's account is longer than the client's time")
    base = sent + network
    req.t_received = base
    req.t_tok_start, req.t_tok_end = base + a.tok_start, base + a.tok_end
    req.t_admitted = base + a.admitted if a.tokens else 0
    req.call_start = [base + c for c in a.call]
    req.produced = [base + p for p in a.produced]
    req.detok = [base + t for t in a.detok]
    req.delivered = list(delivered)
    req.kinds, req.batches = list(a.kinds), list(a.batches)
    req.ids = range(a.prompt_tokens)  # type: ignore[assignment]  # only its length is read
    req.prefill_ns, req.preemptions = a.prefill_ns, a.preemptions
    req.chunks, req.replica = a.prefill_chunks, a.replica
    req.decomposed = True
    if a.tokens:
        req.t_first, req.t_first_detok = req.produced[0], req.detok[0]
        req.t_first_deliv, req.t_done = delivered[0], delivered[-1]


def undecomposed(req: GenRequest, delivered: list[int], prompt_tokens: int = 0) -> None:
    """Fill ``req`` from the client's view alone: its time to the first token is all
    ``network``, each later gap all ``delivery``; flagged ``decomposed=False``."""
    req.delivered = list(delivered)
    req.decomposed = False
    req.ids = range(prompt_tokens)  # type: ignore[assignment]  # only its length is read
    n = len(delivered)
    if not n:
        return
    first = delivered[0]
    req.t_received = req.t_tok_start = req.t_tok_end = req.t_admitted = first
    before = [first, *delivered[:-1]]
    req.call_start, req.produced, req.detok = list(before), list(before), list(before)
    req.kinds, req.batches = [KIND_DECODE] * n, [0] * n
    req.kinds[0] = 0
    req.t_first = req.t_first_detok = req.t_first_deliv = first
    req.t_done = delivered[-1]
