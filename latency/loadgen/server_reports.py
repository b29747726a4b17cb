"""A streamed reply's own account of its request, read from whichever form the server gives
(see ``latency.core.gen_reports`` for what each part then means):

- llama.cpp's ``timings`` object, in the final chunk of an OpenAI-compatible stream:
  ``prompt_n``/``prompt_ms`` (the prompt tokens it evaluated and the time: prefill),
  ``predicted_n``/``predicted_ms`` (generation after the prompt: decode), ``cache_n`` (prompt
  tokens reused from its cache);
- vLLM's per-request ``metrics`` (``--enable-per-request-metrics``): ``queue_time_ms``,
  ``time_to_first_token_ms`` (from being scheduled to the first token: prefill),
  ``generation_time_ms`` (first to last token: decode);
- TGI's response headers ``x-queue-time``, ``x-inference-time``, ``x-time-per-token``
  (milliseconds; TGI sends them on replies it can time before the headers go out);
- (our own server's ``latency_lab`` account has every stamp: ``gen_layout`` reads it).

Each reader returns a ``Report`` or None when the form is absent, and raises ``ReportError``
when it is there but unusable (a negative or non-finite time, a count that is not a whole
number): such a report is counted, never half used.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from latency.core.gen_records import GenRequest
from latency.core.gen_reports import (
    MISSING,
    SOURCE_LATENCY_LAB,
    SOURCE_LLAMACPP,
    SOURCE_NONE,
    SOURCE_TGI,
    SOURCE_VLLM,
)

#: response headers a streamed reply's report may be in (lower case)
REPORT_HEADERS = (b"x-queue-time", b"x-inference-time", b"x-time-per-token",
                  b"x-generated-tokens", b"x-prompt-tokens")
#: the longest time a report may state (a day): beyond it the report is not believed
MAX_REPORTED_MS = 86_400_000.0
#: the most tokens a report may count (beyond any context): beyond it, not believed
MAX_REPORTED_COUNT = 100_000_000


class ReportError(ValueError):
    """A report that is there but cannot be used."""


@dataclass(frozen=True)
class Report:
    """What the server said of one request: durations in ns, ``MISSING`` where not said."""

    source: int
    queue_ns: int = MISSING
    prefill_ns: int = MISSING
    decode_ns: int = MISSING
    inference_ns: int = MISSING
    prompt_tokens: int = MISSING
    output_tokens: int = MISSING
    cached_tokens: int = MISSING


def _ms(d: dict[str, Any], key: str, required: bool = True) -> int:
    v = d.get(key)
    if v is None and not required:
        return MISSING
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
            or not 0 <= v <= MAX_REPORTED_MS:
        raise ReportError(f"{key} is not a time in ms: {v!r}")
    return int(round(v * 1e6))


def _count(d: dict[str, Any], key: str) -> int:
    v = d.get(key)
    if v is None:
        return MISSING
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_REPORTED_COUNT:
        raise ReportError(f"{key} is not a whole number from 0 to {MAX_REPORTED_COUNT:,}: "
                          f"{v!r}")
    return v


def from_llamacpp(timings: Any) -> Report | None:
    """llama.cpp's ``timings`` (None when absent; a negative ``prompt_n``: not measured)."""
    if timings is None:
        return None
    if not isinstance(timings, dict):
        raise ReportError("timings is not an object")
    return Report(SOURCE_LLAMACPP, prefill_ns=_ms(timings, "prompt_ms"),
                  decode_ns=_ms(timings, "predicted_ms"),
                  prompt_tokens=_count(timings, "prompt_n"),
                  output_tokens=_count(timings, "predicted_n"),
                  cached_tokens=_count(timings, "cache_n"))


def from_vllm(metrics: Any) -> Report | None:
    """vLLM's per-request ``metrics`` (None when absent)."""
    if metrics is None:
        return None
    if not isinstance(metrics, dict):
        raise ReportError("metrics is not an object")
    return Report(SOURCE_VLLM, queue_ns=_ms(metrics, "queue_time_ms"),
                  prefill_ns=_ms(metrics, "time_to_first_token_ms"),
                  decode_ns=_ms(metrics, "generation_time_ms"))


def from_tgi(headers: dict[bytes, bytes]) -> Report | None:
    """TGI's timing headers (None when it sent no ``x-queue-time``). Its inference time is
    split with its time per token: decode = per token × (tokens − 1) when it says how many
    tokens, prefill = inference − decode (both derived; ``server_split`` labels them)."""
    if b"x-queue-time" not in headers:
        return None
    d: dict[str, Any] = {}
    for name in REPORT_HEADERS:
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            d[name.decode()] = float(raw.decode("latin-1").strip())
        except ValueError:
            raise ReportError(f"{name.decode()} is not a number: {raw[:40]!r}") from None
    inference = _ms(d, "x-inference-time", required=False)
    per_token = _ms(d, "x-time-per-token", required=False)
    tokens = _count(d, "x-generated-tokens")
    decode = MISSING
    if per_token != MISSING and tokens not in (MISSING, 0):
        decode = per_token * (tokens - 1)
    if decode != MISSING and inference != MISSING and decode > inference:
        raise ReportError("x-time-per-token × tokens exceeds x-inference-time")
    prefill = inference - decode if MISSING not in (inference, decode) else MISSING
    return Report(SOURCE_TGI, queue_ns=_ms(d, "x-queue-time"), prefill_ns=prefill,
                  decode_ns=decode, inference_ns=inference,
                  prompt_tokens=_count(d, "x-prompt-tokens"), output_tokens=tokens)


def read_report(timings: Any, metrics: Any, headers: dict[bytes, bytes]) -> Report | None:
    """The reply's report in whichever form it came (llama.cpp's ``timings``, vLLM's
    ``metrics``, TGI's headers; None when none did). ReportError when it is unusable."""
    return from_llamacpp(timings) or from_vllm(metrics) or from_tgi(headers)


def own_report(req: GenRequest) -> Report:
    """Our own server's account, already laid out on the client's clock
    (``gen_layout.lay_out``), as a report: queue from receipt to admission less the
    tokenizer's work, prefill from admission to the first token (the others' steps it waited
    through included, as vLLM counts from scheduling), decode from the first to the last
    token produced."""
    tokenize = req.t_tok_end - req.t_tok_start
    last = req.produced[-1] if req.produced else req.t_first
    return Report(SOURCE_LATENCY_LAB,
                  queue_ns=max(req.t_admitted - req.t_received - tokenize, 0),
                  prefill_ns=max(req.t_first - req.t_admitted, 0),
                  decode_ns=max(last - req.t_first, 0), prompt_tokens=len(req.ids),
                  output_tokens=len(req.delivered))


def report_row(report: Report | None, usage: Any, trace: tuple[int, int],
               counted: int = MISSING, network_ns: int = MISSING) -> tuple[Any, ...]:
    """One row of ``REPORT_DTYPE``: the report (none: every part ``MISSING``), the server's
    ``usage`` counts where the report has none, the trace id sent, the client's count."""
    r = report or Report(SOURCE_NONE)
    prompt, output, cached = r.prompt_tokens, r.output_tokens, r.cached_tokens
    if isinstance(usage, dict):
        details = usage.get("prompt_tokens_details")
        told = (usage.get("prompt_tokens"), usage.get("completion_tokens"),
                details.get("cached_tokens") if isinstance(details, dict) else None)
        prompt, output, cached = (
            value if have == MISSING and isinstance(value, int)
            and not isinstance(value, bool) and value >= 0 else have
            for have, value in zip((prompt, output, cached), told, strict=True))
    return (r.source, r.queue_ns, r.prefill_ns, r.decode_ns, r.inference_ns,
            min(prompt, 2**31 - 1), min(output, 2**31 - 1), min(cached, 2**31 - 1),
            trace[0], trace[1], min(counted, 2**31 - 1), network_ns)
