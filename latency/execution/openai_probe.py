"""Before a run against an OpenAI-compatible server: is it one, what does it serve, what does
it accept — so what can be known up front is one line and exit 2, not a run of failures.

    GET {base}/models          the served models (the default --served-model), and, timed
                               five times, the client's round-trip floor to the server
    POST {base}/{route}        one streamed request of two tokens with the run's API: the
                               route exists, the model is served, the reply is a stream, and
                               whether it takes ``ignore_eos``/``min_tokens`` (a server that
                               refuses them is asked again without, and the run says it could
                               not force output lengths)

``base`` is the URL given to ``--target`` up to and including ``/v1`` (added when absent); a
URL naming a route (``…/v1/chat/completions``) also names the API.

Why plain ``http.client`` here and not the measuring client: the probe measures nothing but
the round-trip floor, and a blocking exchange with its own bounds is the simplest correct
reader of an answer that may not be HTTP we expect (HTML, a redirect, a reset).
"""
from __future__ import annotations

import http.client
import json
import os
import ssl
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from latency.core.errors import ConfigError
from latency.core.fmt import server_text
from latency.loadgen.bounded_http import ExchangeTimeout, bounded, connection
from latency.loadgen.delivery_jitter import fastest_and_spread
from latency.loadgen.sse_client import error_message

#: the probe's bounds: each exchange, and the bytes of a reply it reads
PROBE_TIMEOUT_S = 30.0
PROBE_MAX_BYTES = 1 << 20
#: GET /models this many times; the fastest is the round-trip floor, the spread above it
#: (its 90th percentile less the fastest) the delivery jitter the split tolerates
RTT_PROBES = 20
#: TCP connections opened (and closed) to time the network alone: the fastest handshake
CONNECT_PROBES = 5
#: the quantile of the timed GET /models whose distance above the fastest is their spread
RTT_SPREAD_QUANTILE = 0.9
ROUTES = {"chat": "/chat/completions", "completions": "/completions"}
#: the longest model id taken from the server's list; the most ids kept with the run
MAX_MODEL_ID = 256
MAX_MODELS_KEPT = 20
#: the environment variable an API key is read from unless --api-key-env names another
DEFAULT_KEY_ENV = "OPENAI_API_KEY"


@dataclass(frozen=True)
class TargetInfo:
    """What the probe found; ``url`` is the route the run streams from."""

    base: str
    api: str
    url: str
    model: str
    #: the server took ``ignore_eos``/``min_tokens``: output lengths are forced
    forces_length: bool
    #: the server sent ``usage`` in the stream
    usage: bool
    #: the fastest GET /models, ns: the client's round-trip floor to the server
    rtt_floor_ns: int
    #: the 90th percentile of the GET /models less the fastest, ns: how much one exchange's
    #: delivery varies on this path
    rtt_spread_ns: int = 0
    #: the fastest TCP handshake, ns: the network's own round trip, with no server code in it
    connect_ns: int = 0
    #: the server's ``Server`` header, when it sends one
    server: str = ""
    models: tuple[str, ...] = field(default_factory=tuple)
    #: the server ends its streams with [DONE] (else a stream is whole once a choice has
    #: its ``finish_reason`` and the reply ends)
    sends_done: bool = True
    #: the server counts each chunk's tokens in its ``usage`` (vLLM's
    #: ``continuous_usage_stats``): the run asks for it and reads them
    chunk_usage: bool = False

    def describe(self) -> dict[str, Any]:
        return {"base": self.base, "api": self.api, "model": self.model,
                "forces_length": self.forces_length, "usage": self.usage,
                "rtt_floor_ms": self.rtt_floor_ns / 1e6,
                "rtt_spread_ms": self.rtt_spread_ns / 1e6,
                "connect_ms": self.connect_ns / 1e6, "server": self.server,
                "models": list(self.models), "sends_done": self.sends_done,
                "chunk_usage": self.chunk_usage}


def split_target(url: str, api: str | None) -> tuple[str, str]:
    """(base ending in /v1, api) from ``--target`` and ``--api``."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    for name, route in ROUTES.items():
        if path.endswith(route):
            if api is not None and api != name:
                raise ConfigError(f"--target names the {name} route but --api is {api}")
            path, api = path[: -len(route)], name
            break
    if not path.endswith("/v1"):
        path += "/v1"
    return f"{parts.scheme}://{parts.netloc}{path}", api or "chat"


def api_key(key_env: str | None) -> str | None:
    """The API key from the environment variable ``key_env`` (``OPENAI_API_KEY`` unless
    named): never from the config, the history or a file."""
    name = key_env or DEFAULT_KEY_ENV
    key = os.environ.get(name, "").strip()
    if not key and key_env:
        raise ConfigError(f"--api-key-env {name}: that environment variable is not set")
    if key and not all(33 <= ord(ch) < 127 for ch in key):
        # a header cannot carry it (and its value must never reach an error message)
        raise ConfigError(f"the API key in {name} has a space, a control character or a "
                          "non-ASCII character: it cannot be sent as a bearer token")
    return key or None


def auth_headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def _exchange(url: str, method: str, headers: dict[str, str], body: bytes | None,
              keep: http.client.HTTPConnection | None = None
              ) -> tuple[int, str, bytes, dict[str, str]]:
    """(status, content type, body up to PROBE_MAX_BYTES, headers) of one request; raises
    ConfigError naming what failed to connect. ``keep``: a connection to reuse (kept open)."""
    parts = urlsplit(url)
    conn = keep if keep is not None else connection(url, PROBE_TIMEOUT_S)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    try:
        with bounded(conn, PROBE_TIMEOUT_S, f"{method} {path or '/'}"):  # all of it
            try:
                conn.request(method, path or "/", body=body, headers=headers)
                resp = conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                if keep is None:
                    raise
                # the server closed the kept connection as the request went out (no byte
                # came back): once more on a fresh one, as the measuring client does
                conn.close()
                conn.request(method, path or "/", body=body, headers=headers)
                resp = conn.getresponse()
            data = resp.read(PROBE_MAX_BYTES)
        return resp.status, resp.getheader("Content-Type") or "", data, \
            {k.lower(): v for k, v in resp.getheaders()}
    except ssl.SSLError as exc:
        raise ConfigError(f"--target {url}: TLS failed ({exc.reason or exc})") from None
    except ExchangeTimeout:
        raise ConfigError(f"--target {url}: its answer did not end within "
                          f"{PROBE_TIMEOUT_S:g} s (it came a little at a time, or not at "
                          "all)") from None
    except TimeoutError:
        raise ConfigError(f"--target {url}: no answer within {PROBE_TIMEOUT_S:g} s") from None
    except (OSError, http.client.HTTPException) as exc:
        raise ConfigError(f"--target {url}: cannot reach it ({type(exc).__name__}: "
                          f"{exc})") from None
    finally:
        if keep is None:
            conn.close()


def _models(base: str, headers: dict[str, str]) -> tuple[list[str], list[int], str]:
    """The served model ids, each timed GET /models (ns; none when it does not answer 200)
    and the Server header. On one kept-alive connection, as the run's requests travel, and
    the first exchange (DNS, connect, TLS) is not timed."""
    conn = connection(base, PROBE_TIMEOUT_S)
    times: list[int] = []
    ids: list[str] = []
    server = ""
    try:
        for i in range(RTT_PROBES + 1):
            t = time.perf_counter_ns()
            status, ctype, body, h = _exchange(f"{base}/models", "GET", headers, None, conn)
            took = time.perf_counter_ns() - t
            if h.get("connection", "").lower() == "close":
                conn.close()  # the next one connects again: http.client does it on request
            server = server_text(h.get("server", ""), 100)
            if status in (401, 403):
                raise ConfigError(f"--target {base}: the server refused the request (HTTP "
                                  f"{status}: {error_message(body)}); set the key in "
                                  f"{DEFAULT_KEY_ENV} or name its variable with --api-key-env")
            if status != 200:
                return [], [], server
            if i:  # the first one connected
                times.append(took)
            try:
                data = json.loads(body).get("data")
                ids = [str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id")]
            except (ValueError, AttributeError, TypeError, RecursionError):
                return [], [], server
    finally:
        conn.close()
    return ids, times, server


def _connect_ns(base: str) -> int:
    """The fastest of ``CONNECT_PROBES`` TCP handshakes to the server (ns; 0 when none
    connects): the round trip of the network and the kernels alone."""
    import socket

    parts = urlsplit(base)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    best = 0
    for _ in range(CONNECT_PROBES):
        t = time.perf_counter_ns()
        try:
            socket.create_connection((parts.hostname, port), timeout=PROBE_TIMEOUT_S).close()
        except OSError:
            return best
        took = time.perf_counter_ns() - t
        best = took if not best else min(best, took)
    return best


def _stream_ok(body: bytes) -> tuple[bool, bool, bool, bool]:
    """(the body is a well-formed event stream that ended — in [DONE], or after a choice's
    ``finish_reason`` as ``transformers serve`` ends its streams —, it carried usage, it sent
    [DONE], its chunks with text carried their own usage)."""
    usage, done, finished, chunk_usage = False, False, False, False
    for line in body.splitlines():
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            done = True
            continue
        try:
            obj = json.loads(data)
        except (ValueError, RecursionError):  # not JSON, or nested past any reply's need
            return False, usage, done, chunk_usage
        if not isinstance(obj, dict):
            return False, usage, done, chunk_usage
        if obj.get("usage"):
            usage = True
        choices = obj.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            c = choices[0]
            text = (c.get("delta") or {}).get("content") if isinstance(c.get("delta"), dict) \
                else c.get("text")
            if text and isinstance(obj.get("usage"), dict) and \
                    isinstance(obj["usage"].get("completion_tokens"), int):
                chunk_usage = True
            if c.get("finish_reason") is not None:
                finished = True
    return done or finished, usage, done, chunk_usage


def probe_target(target: str, api: str | None = None, served_model: str | None = None,
                 key_env: str | None = None) -> TargetInfo:
    """Probe the server at ``target`` (see the module docstring); ConfigError in one line
    when it is not an OpenAI-compatible server the run can use."""
    base, api = split_target(target, api)
    headers = {"Accept": "application/json", **auth_headers(api_key(key_env))}
    ids, times, server = _models(base, headers)
    rtt, spread = fastest_and_spread(times, RTT_SPREAD_QUANTILE)
    # a model id is sent back in every request and shown in every line about the run: one
    # that is not plain text (an escape sequence, a newline forging a line of ours) or is
    # longer than any real name is not taken — name the model yourself
    plain = [i for i in ids if len(i) <= MAX_MODEL_ID and i.isprintable()]
    if ids and not plain and not served_model:
        raise ConfigError(f"--target {base}: GET {urlsplit(base).path}/models named no model "
                          f"in plain text (e.g. {server_text(ids[0], 60)}): give "
                          "--served-model NAME")
    model = served_model or (plain[0] if plain else None)
    if model is None:
        raise ConfigError(f"--target {base}: GET {urlsplit(base).path}/models named no model "
                          "(is it an OpenAI-compatible server?): give --served-model NAME")
    url = base + ROUTES[api]
    ask: dict[str, Any] = {"model": model, "max_tokens": 2, "stream": True,
                           "stream_options": {"include_usage": True}}
    if api == "chat":
        ask["messages"] = [{"role": "user", "content": "Hello"}]
    else:
        ask["prompt"] = "Hello"
    post = {**headers, "Content-Type": "application/json", "Accept": "text/event-stream"}
    forced = {**ask, "ignore_eos": True, "min_tokens": 2}
    # the most the run could use first; some servers refuse fields they do not know (400,
    # 422): then ask again with fewer
    tries = [({**forced, "stream_options": {"include_usage": True,
                                            "continuous_usage_stats": True}}, True, True),
             (forced, True, False), (ask, False, False)]
    status, ctype, body, forces, asked_chunks = 0, "", b"", False, False
    for fields, can_force, can_count in tries:
        status, ctype, body, _ = _exchange(url, "POST", post, json.dumps(fields).encode())
        forces, asked_chunks = can_force, can_count
        if status not in (400, 422):
            break
    route = urlsplit(url).path
    if status == 404:
        other = "completions" if api == "chat" else "chat"
        raise ConfigError(f"--target {base}: POST {route} answered 404 ({error_message(body)}): no "
                          f"{api} route there, or no model {model!r} (try --api {other}, or "
                          "check --served-model)")
    if status in (401, 403):
        raise ConfigError(f"--target {base}: POST {route} was refused (HTTP {status}: "
                          f"{error_message(body)}); set the key in {DEFAULT_KEY_ENV} or name its "
                          "variable with --api-key-env")
    if status != 200:
        raise ConfigError(f"--target {base}: POST {route} answered HTTP {status}: "
                          f"{error_message(body)}")
    if not ctype.startswith("text/event-stream"):
        raise ConfigError(f"--target {base}: POST {route} did not stream (Content-Type "
                          f"{ctype or 'none'!r}): not an OpenAI-compatible streaming server")
    ended, usage, done, chunk_usage = _stream_ok(body)
    if not ended:
        raise ConfigError(f"--target {base}: POST {route} streamed no well-formed events "
                          "ending in [DONE] or a finish_reason: not an OpenAI-compatible "
                          "streaming server")
    return TargetInfo(base=base, api=api, url=url, model=model, forces_length=forces,
                      usage=usage, rtt_floor_ns=rtt, rtt_spread_ns=spread,
                      connect_ns=_connect_ns(base), server=server,
                      models=tuple(server_text(i, 100) for i in ids[:MAX_MODELS_KEPT]),
                      sends_done=done, chunk_usage=asked_chunks and chunk_usage)
