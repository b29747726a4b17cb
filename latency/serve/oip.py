"""The wire format: Open Inference Protocol (KServe v2) bodies and the W3C Server-Timing header.

Why one module for both ends: the server's decoder and the client's encoder must agree byte for
byte, and a test can round-trip them without sockets.

One request carries one raw input (what a sample pipeline's ``sample_inputs`` yields: JPEG bytes,
a JSON record, a sentence) as a ``BYTES`` tensor of shape ``[1]`` named ``input``:

- ``json`` payload: ``{"inputs": [{"name": "input", "shape": [1], "datatype": "BYTES",
  "parameters": {"content_type": "str" | "base64"}, "data": [...]}]}``. Text goes as a JSON
  string; bytes are base64-encoded (MLServer's ``content_type`` convention), which makes an
  image a third larger and costs an encode and a decode — the point of comparing payloads.
- ``raw`` payload: the input's bytes as the whole body, ``Content-Type:
  application/octet-stream`` (text inputs: ``text/plain; charset=utf-8``, UTF-8), on the same
  ``/infer`` route. No envelope, no base64.

The response is OIP JSON with one ``BYTES`` output holding the pipeline's JSON response.

``Server-Timing`` (https://www.w3.org/TR/server-timing/): ``queue;dur=0.120, preprocess;dur=2.004,
forward;dur=5.010, postprocess;dur=1.002`` in milliseconds (to the nanosecond: six decimals),
which is what lets the client split its own observed time into network and server parts.
"""
from __future__ import annotations

import base64
import binascii
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from latency.core.config import PAYLOADS

__all__ = ["PAYLOADS", "ProtocolError", "decode_request", "encode_request", "encode_response"]

#: the server-side components a Server-Timing header may carry, in pipeline order.
TIMED = ("queue", "preprocess", "forward", "postprocess")
#: other servers' names for the same stages (Triton's statistics vocabulary).
ALIASES = {"compute_input": "preprocess", "compute_infer": "forward",
           "compute_output": "postprocess", "queue_wait": "queue"}
INPUT_NAME = "input"
OUTPUT_NAME = "output"
RAW_TYPE = "application/octet-stream"
TEXT_TYPE = "text/plain; charset=utf-8"
JSON_TYPE = "application/json"


class ProtocolError(ValueError):
    """A request the server must refuse; ``status`` is the HTTP code (400, 404, 413...)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# ---- request bodies -----------------------------------------------------------------------
def encode_request(raw: Any, payload: str = "json", request_id: str | None = None
                   ) -> tuple[bytes, str]:
    """(body, content type) carrying ``raw`` in the chosen payload: text and bytes as they are
    (OIP ``str`` / ``base64``), a JSON value (a record of a ``.jsonl`` inputs file) as its JSON
    text, marked ``content_type: json`` so the server hands the pipeline the same value."""
    json_value = not isinstance(raw, (str, bytes, bytearray, memoryview))
    if payload == "raw":
        if json_value:
            raise ValueError(f"the raw payload carries text or bytes, not a "
                             f"{type(raw).__name__}: use --payload json for JSON inputs")
        if isinstance(raw, str):
            return raw.encode(), TEXT_TYPE
        return bytes(raw), RAW_TYPE
    if isinstance(raw, str):
        kind, item = "str", raw
    elif json_value:
        kind, item = "json", json.dumps(raw, separators=(",", ":"))
    else:
        kind, item = "base64", base64.b64encode(bytes(raw)).decode("ascii")
    body: dict[str, Any] = {"inputs": [{"name": INPUT_NAME, "shape": [1], "datatype": "BYTES",
                                        "parameters": {"content_type": kind},
                                        "data": [item]}]}
    if request_id is not None:
        body["id"] = request_id
    return json.dumps(body, separators=(",", ":")).encode(), JSON_TYPE


def decode_request(body: bytes, content_type: str) -> tuple[Any, str | None]:
    """(raw input, request id) from a request body; ProtocolError(400) says what is wrong."""
    media = content_type.split(";")[0].strip().lower()
    if media in (RAW_TYPE, "text/plain"):
        if not body:
            raise ProtocolError(400, "empty body: a raw request carries the input's bytes")
        if media == RAW_TYPE:
            return body, None
        try:
            return body.decode("utf-8"), None
        except UnicodeDecodeError as exc:
            raise ProtocolError(400, f"text/plain body is not UTF-8: {exc}") from None
    try:
        doc = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProtocolError(400, f"malformed JSON: {exc}") from None
    except RecursionError:  # [[[[…]]]]: the parser's stack, not the server, gave out
        raise ProtocolError(400, "JSON nested too deeply") from None
    if not isinstance(doc, dict):
        raise ProtocolError(400, "the body must be a JSON object with an 'inputs' list")
    inputs = doc.get("inputs")
    if not isinstance(inputs, list) or len(inputs) != 1 or not isinstance(inputs[0], dict):
        raise ProtocolError(400, "'inputs' must be a list of exactly one tensor (the raw "
                                 "input)")
    t = inputs[0]
    if t.get("datatype") != "BYTES":
        raise ProtocolError(400, f"input datatype must be BYTES (the raw input), got "
                                 f"{t.get('datatype')!r}")
    shape, data = t.get("shape"), t.get("data")
    if not isinstance(data, list):
        raise ProtocolError(400, "input 'data' must be a list")
    if (not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape)):
        raise ProtocolError(400, f"input shape must be a list of sizes, got {shape!r}")
    if shape != [1]:
        raise ProtocolError(400, f"wrong tensor shape {shape}: this server takes one raw input "
                                 "per request, shape [1]")
    if len(data) != 1:
        raise ProtocolError(400, f"shape {shape} holds 1 element(s) but data has {len(data)}")
    item = data[0]
    if not isinstance(item, str):
        raise ProtocolError(400, "the BYTES element must be a string")
    params = t.get("parameters") or {}
    kind = params.get("content_type", "str") if isinstance(params, dict) else "str"
    if kind == "base64":
        try:
            raw: Any = base64.b64decode(item, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ProtocolError(400, f"invalid base64 data: {exc}") from None
    elif kind == "str":
        raw = item
    elif kind == "json":
        try:
            raw = json.loads(item)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ProtocolError(400, f"content_type json: the element is not JSON: {exc}"
                                ) from None
    else:
        raise ProtocolError(400, f"unknown content_type {kind!r}: use 'str', 'base64' or "
                                 "'json'")
    rid = doc.get("id")
    return raw, rid if isinstance(rid, str) else None


# ---- responses ------------------------------------------------------------------------------
def encode_response(model: str, response: Any, request_id: str | None = None) -> bytes:
    """OIP JSON response with the pipeline's (JSON-able) response as one BYTES output."""
    doc: dict[str, Any] = {"model_name": model, "model_version": "1",
                           "outputs": [{"name": OUTPUT_NAME, "shape": [1], "datatype": "BYTES",
                                        "parameters": {"content_type": "str"},
                                        "data": [json.dumps(response, separators=(",", ":"))]}]}
    if request_id is not None:
        doc["id"] = request_id
    return json.dumps(doc, separators=(",", ":")).encode()


def error_body(message: str) -> bytes:
    """The OIP error response: ``{"error": "..."}``."""
    return json.dumps({"error": message}).encode()


def error_message(body: bytes) -> str:
    """The message of an error response, or a short preview of an unexpected body."""
    try:
        doc = json.loads(body)
        if isinstance(doc, dict) and isinstance(doc.get("error"), str):
            return doc["error"]
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        pass
    text = body[:120].decode("utf-8", "replace").strip().replace("\n", " ")
    return text or "(empty body)"


# ---- Server-Timing ----------------------------------------------------------------------------
def format_server_timing(durations_ns: dict[str, int]) -> str:
    """``queue;dur=0.120000, preprocess;dur=2.004000, …`` (ms, nanosecond resolution)."""
    return ", ".join(f"{k};dur={v / 1e6:.6f}" for k, v in durations_ns.items())


_PARAM = re.compile(r'\s*;\s*([!#$%&\'*+\-.^_`|~0-9A-Za-z]+)\s*(?:=\s*("(?:[^"\\]|\\.)*"|[^;,]*))?')


@dataclass(frozen=True)
class ServerTiming:
    """A parsed header: metric name → duration (ns, None when the metric has no ``dur``).
    ``unusable``: metrics whose ``dur`` was there but no duration (negative, not finite, not a
    number) — a server that says that of one of our stages gives no breakdown we can trust."""

    metrics: dict[str, int | None]
    unusable: frozenset[str] = frozenset()

    def breakdown_ns(self) -> dict[str, int] | None:
        """queue/preprocess/forward/postprocess in ns when the header names at least one of
        them (aliases mapped; missing stages count 0), else None: no breakdown to use — also
        when one of them carries an unusable duration."""
        out = {k: 0 for k in TIMED}
        found = False
        for name in self.unusable:
            if ALIASES.get(name.lower(), name.lower()) in out:
                return None
        for name, dur in self.metrics.items():
            key = ALIASES.get(name.lower(), name.lower())
            if key in out and dur is not None:
                out[key] += dur
                found = True
        return out if found else None


#: a duration above this (ms) is no request's: ~11.6 days, far past any request limit.
MAX_DURATION_MS = 1e9


def _duration_ns(text: str) -> int | None:
    """A ``dur`` value in ns, or None unless it is a finite, non-negative number of ms that an
    int64 clock can hold."""
    try:
        ms = float(text)
    except ValueError:
        return None
    if not (math.isfinite(ms) and 0 <= ms <= MAX_DURATION_MS):
        return None
    return int(round(ms * 1e6))


def parse_server_timing(value: str | None) -> ServerTiming:
    """Parse a ``Server-Timing`` header value per the W3C grammar (comma-separated metrics,
    ``;``-separated params, quoted strings may hold commas). Malformed metrics are skipped, as
    the spec says a user agent must; the first ``dur`` of a metric wins."""
    metrics: dict[str, int | None] = {}
    unusable: set[str] = set()
    if not value:
        return ServerTiming(metrics)
    for entry in _split_outside_quotes(value, ","):
        m = re.match(r"\s*([!#$%&'*+\-.^_`|~0-9A-Za-z]+)", entry)
        if not m:
            continue
        name, dur, has_dur = m.group(1), None, False
        for pm in _PARAM.finditer(entry, m.end()):
            if pm.group(1).lower() == "dur" and not has_dur:
                has_dur = True
                dur = _duration_ns((pm.group(2) or "").strip().strip('"'))
        if name not in metrics:
            metrics[name] = dur
            if has_dur and dur is None:
                unusable.add(name)
    return ServerTiming(metrics, frozenset(unusable))


def _split_outside_quotes(text: str, sep: str) -> list[str]:
    parts, buf, quoted, escaped = [], [], False, False
    for ch in text:
        if escaped:
            buf.append(ch)
            escaped = False
        elif ch == "\\" and quoted:
            buf.append(ch)
            escaped = True
        elif ch == '"':
            quoted = not quoted
            buf.append(ch)
        elif ch == sep and not quoted:
            parts.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
    parts.append("".join(buf))
    return parts
