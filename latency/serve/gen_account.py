"""The server's account of one streamed request, sent in its stream's last event: what the
server spent, as durations, so the client can split what it saw (``latency.loadgen.gen_layout``).

Why durations and not stamps: a client on another host has another clock. Every figure here is
a difference of two readings of the server's own clock; the client lays them out from its own
stamps (``sent``, each token's ``delivered``), as ``Server-Timing`` is laid out for a one-shot
request (``latency.loadgen.http_client.lay_out``).

The account, under ``"latency_lab"`` in the last event before ``[DONE]`` (and in a
non-streamed reply's body)::

    {"version": 1,
     "queue_ms", "tokenize_ms", "prefill_ms", "prefill_stall_ms", "decode_ms", "stall_ms",
     "detokenize_ms", "delivery_ms", "server_ms":    the server's own split, for people
                                                     (delivery: a token's text ready → the
                                                     stream writer took it)
     "tokens": n, "prompt_tokens", "preemptions", "prefill_chunks", "replica",
     "ns": {"tok_start", "tok_end", "admitted"}:     ns after the server received the request
           "prefill":                                ns of its own prefill compute
     "token_ns": {"call":  [n ints]   token 0: its call's start after receipt; token k: after
                                      token k-1's call start
                  "run":   [n ints]   its call's duration (start → token produced)
                  "detok": [n ints]   produced → its text ready
                  "pick":  [n ints]}  text ready → the stream writer took it to send
     "kinds": "0111…"                 what produced each token (gen_records.KIND_*)
     "batches": [n ints]              sequences sharing that call
     "chunk_tokens": [c ints]}        tokens each content event carried, when any carried
                                      more than one (absent: one each)

"Receipt" is when the decoded request was handed to the generation server; parsing the HTTP
request and its JSON before, and encoding and writing each event after the writer took its
tokens, are the transport's work: the client sees them as ``network``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from latency.core.gen_records import GAP_COMPONENTS, GenRequest, gap_parts

#: the key of the account in the stream's last event
ACCOUNT_KEY = "latency_lab"
ACCOUNT_VERSION = 1
#: the per-token duration arrays, in the order they happen
TOKEN_FIELDS = ("call", "run", "detok", "pick")


def account_of(req: GenRequest, picked: list[int], chunk_tokens: list[int]) -> dict[str, Any]:
    """The account of ``req`` (its tokens so far), whose ``k``-th token the stream writer took
    at ``picked[k]``, sent in events of ``chunk_tokens`` tokens each."""
    n = min(len(picked), len(req.batches))
    origin = req.t_received
    call = list(req.call_start[:n])
    produced, detok = req.produced[:n], req.detok[:n]
    account: dict[str, Any] = {
        "version": ACCOUNT_VERSION, **_parts_ms(req, n, picked),
        "tokens": n, "prompt_tokens": len(req.ids), "preemptions": req.preemptions,
        "prefill_chunks": req.chunks, "replica": req.replica,
        "ns": {"tok_start": _after(req.t_tok_start, origin),
               "tok_end": _after(req.t_tok_end, origin),
               "admitted": _after(req.t_admitted, origin), "prefill": req.prefill_ns},
        "token_ns": {
            "call": [c - p for c, p in zip(call, [origin, *call[:-1]], strict=True)],
            "run": [b - a for a, b in zip(call, produced, strict=True)],
            "detok": [b - a for a, b in zip(produced, detok, strict=True)],
            "pick": [b - a for a, b in zip(detok, picked[:n], strict=True)]},
        "kinds": "".join(str(k) for k in req.kinds[:n]),
        "batches": list(req.batches[:n]),
    }
    if any(c != 1 for c in chunk_tokens):
        account["chunk_tokens"] = list(chunk_tokens)
    return account


def _after(stamp: int, origin: int) -> int:
    return max(stamp - origin, 0) if stamp else 0


def _parts_ms(req: GenRequest, n: int, picked: list[int]) -> dict[str, float]:
    """The server's own split of the request (ms), as the client's would be if the stream
    writer's pick were the delivery."""
    out = dict.fromkeys(("queue_ms", "tokenize_ms", "prefill_ms", "prefill_stall_ms",
                         "decode_ms", "stall_ms", "detokenize_ms", "delivery_ms",
                         "server_ms"), 0.0)
    tok_start = req.t_tok_start or req.t_received
    tok_end = max(req.t_tok_end, tok_start)
    out["tokenize_ms"] = (tok_end - tok_start) / 1e6
    if not n or not req.t_admitted:
        out["queue_ms"] = (tok_start - req.t_received) / 1e6
        out["server_ms"] = (tok_end - req.t_received) / 1e6
        return out
    waited = max(req.produced[0] - req.t_admitted, 0)
    prefill = min(req.prefill_ns, waited)
    out["queue_ms"] = ((tok_start - req.t_received) + (req.t_admitted - tok_end)) / 1e6
    out["prefill_ms"], out["prefill_stall_ms"] = prefill / 1e6, (waited - prefill) / 1e6
    detok = req.detok[0] - req.produced[0]
    delivery = picked[0] - req.detok[0]
    if n > 1:
        pick = np.asarray(picked[:n], dtype=np.int64)
        start, produced, done = (np.asarray(getattr(req, a)[1:n], dtype=np.int64)
                                 for a in ("call_start", "produced", "detok"))
        parts = gap_parts(pick[:-1], start, produced, done, pick[1:],
                          np.asarray(req.kinds[1:n], dtype=np.int8))
        sums = {c: int(parts[c].sum()) for c in GAP_COMPONENTS}
        out["decode_ms"], out["stall_ms"] = sums["decode"] / 1e6, sums["stall"] / 1e6
        detok += sums["detokenize"]
        delivery += sums["delivery"]
    out["detokenize_ms"], out["delivery_ms"] = detok / 1e6, delivery / 1e6
    out["server_ms"] = (picked[n - 1] - req.t_received) / 1e6
    return {k: round(v, 4) for k, v in out.items()}
