"""What a server said about its own handling of each streamed request, and where each part of
the split of its time comes from.

A server we do not run cannot be stamped token by token from the inside; what it tells us of
a request varies: llama.cpp's ``timings`` in the final chunk (prefill and decode, measured
inside it), vLLM's per-request ``metrics`` (queue, prefill, decode), TGI's ``x-*-time``
headers (queue, inference, time per token), our own server's full account (every stamp). One
row a request (``REPORT_DTYPE``, aligned with the request log) keeps what it said; what was
not said is ``MISSING``.

From a row and the client's own stamps, the split of a request's send-anchored time to first
token and of its end-to-end time into

    network (+ the server's frontend) │ queue │ prefill │ decode │ other (streaming, detokenize)

is made in ``latency.analysis.server_split``; ``SPLIT`` says, per source, which parts the
server reported, which are derived (a difference of a client time and reported parts) and
which the client measured — the one statement the summary labels and
``docs/your-llm-server.md`` copies.
"""
from __future__ import annotations

import numpy as np

#: a part the server did not report
MISSING = -1

#: who gave the report (``source`` column); 0: none
SOURCE_NONE, SOURCE_LATENCY_LAB, SOURCE_LLAMACPP, SOURCE_VLLM, SOURCE_TGI = range(5)
SOURCE_NAMES: dict[int, str] = {
    SOURCE_NONE: "none",
    SOURCE_LATENCY_LAB: "Latency Lab's account",
    SOURCE_LLAMACPP: "llama.cpp timings",
    SOURCE_VLLM: "vLLM per-request metrics",
    SOURCE_TGI: "TGI headers",
}

#: the parts of the split, in the order they happen
SPLIT_PARTS: tuple[str, ...] = ("network", "queue", "prefill", "decode", "other")
REPORTED, DERIVED, MEASURED = "reported", "derived", "measured"
#: a part the reader computed from the server's own figures (TGI's prefill and decode, from
#: its inference time and time per token): the server's, not the client's
FROM_REPORT = "derived from the server's figures"

#: per source, where each part comes from. ``network`` with "measured" is the client's own:
#: the request's exact client − server time where its account is placed on the client's clock
#: (ours), else the round-trip floor (the probe's fastest answer); "derived" parts are what is
#: left of a client-measured time once the reported parts are taken out (never below zero: a
#: request whose report exceeds what the client saw is counted as inconsistent and left out).
SPLIT: dict[int, dict[str, str]] = {
    SOURCE_LATENCY_LAB: {"network": MEASURED, "queue": REPORTED, "prefill": REPORTED,
                         "decode": REPORTED, "other": DERIVED},
    SOURCE_LLAMACPP: {"network": MEASURED, "queue": DERIVED, "prefill": REPORTED,
                      "decode": REPORTED, "other": DERIVED},
    SOURCE_VLLM: {"network": DERIVED, "queue": REPORTED, "prefill": REPORTED,
                  "decode": REPORTED, "other": DERIVED},
    SOURCE_TGI: {"network": DERIVED, "queue": REPORTED, "prefill": FROM_REPORT,
                 "decode": FROM_REPORT, "other": DERIVED},
}

#: one row a request: the source, the reported durations (ns, ``MISSING`` if not said), the
#: server's token counts (``MISSING`` if not said), the W3C trace id sent with it (two 64-bit
#: halves, 0 when none was sent) and the client's own count (``MISSING`` without a tokenizer).
REPORT_DTYPE = np.dtype([
    ("source", "<i1"),
    ("queue_ns", "<i8"), ("prefill_ns", "<i8"), ("decode_ns", "<i8"), ("inference_ns", "<i8"),
    ("prompt_tokens", "<i4"), ("output_tokens", "<i4"), ("cached_tokens", "<i4"),
    ("trace_hi", "<u8"), ("trace_lo", "<u8"),
    # the client's own count of the reply's tokens with the served model's tokenizer
    ("counted_tokens", "<i4"),
    # the request's own network time where the client could place the server's account on
    # its clock (our own server's: client − server, exact); else the round-trip floor is used
    ("network_ns", "<i8"),
])


def empty_reports(n: int) -> np.ndarray:
    """``n`` rows saying nothing (no source, every part missing)."""
    out = np.zeros(n, dtype=REPORT_DTYPE)
    for f in ("queue_ns", "prefill_ns", "decode_ns", "inference_ns", "prompt_tokens",
              "output_tokens", "cached_tokens", "counted_tokens", "network_ns"):
        out[f] = MISSING
    return out


def trace_id_hex(hi: int, lo: int) -> str:
    """The 32 hex digits of a W3C trace id kept as two halves ("" for none)."""
    return f"{int(hi):016x}{int(lo):016x}" if hi or lo else ""
