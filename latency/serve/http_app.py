"""The HTTP app: the same ``Server`` (preprocess pool, batch queue, replicas) behind the Open
Inference Protocol, on Starlette + uvicorn.

Why Starlette and not FastAPI: the infer route reads the body itself (to stop at the size limit
before buffering it) and writes its own ``Server-Timing``; FastAPI's request models would add
pydantic validation per request and give nothing this route uses. uvicorn runs with uvloop and
httptools when installed (both in requirements.txt): the fastest standard ASGI stack in Python.

Routes (KServe v2 / OIP):

    GET  /v2/health/live, /v2/health/ready      liveness / readiness
    GET  /v2                                    server metadata
    GET  /v2/models/{name}[/ready]              model metadata / readiness (404 if unknown)
    POST /v2/models/{name}/infer                OIP JSON, or the raw input as
                                                application/octet-stream (see ``oip``)
    GET  /metrics                               Prometheus counters: responses by status, and
                                                refusals below the app by reason (``REFUSALS``)

What the server's own clock covers (``Server-Timing``): from the moment the decoded request is
handed to the serving machinery to the moment its response object is ready — queue,
preprocess, forward, postprocess. Reading the socket, parsing HTTP and the OIP envelope,
base64, encoding the reply and writing it are transport work: the client sees them as
``network`` (client-observed minus server-observed time).

Safety: binds 127.0.0.1 unless told otherwise; a body over the limit gets 413 (checked against
Content-Length before reading, and while streaming); malformed JSON or a wrong tensor shape
400 with the reason; an unknown model 404. Below the app, the HTTP layer's own limits
(``http_limits``: head size, head time, connections) and its parser refuse what never reaches a
route. Every refusal is counted and the server goes on.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from latency.core.records import Request
from latency.core.timing import now_ns
from latency.serve.oip import (
    JSON_TYPE,
    ProtocolError,
    decode_request,
    encode_response,
    error_body,
    format_server_timing,
)

if TYPE_CHECKING:
    from starlette.responses import Response

#: exception types that mean the *input* was bad (400), not the server (500).
_CLIENT_FAULTS = ("ValueError", "TypeError", "KeyError", "UnicodeDecodeError",
                  "JSONDecodeError", "IndexError")
METRIC = "latency_lab_http_responses_total"
#: refusals made below the app, by the HTTP layer (``latency.serve.http_limits``)
REFUSAL_METRIC = "latency_lab_http_refusals_total"
#: the ``reason`` label of ``REFUSAL_METRIC`` → what the client got. Each refusal that sent a
#: response is also counted in ``METRIC`` under its status code.
REFUSALS = {
    "invalid_request": "400: the HTTP parser refused the request (uvicorn's \"Invalid HTTP "
                       "request received\": a bad Content-Length, Content-Length with "
                       "Transfer-Encoding, bytes that are not HTTP)",
    "head_too_large": "431: the request line and headers were over MAX_HEAD_BYTES",
    "head_timeout": "408: the request head was not complete within HEAD_TIMEOUT_S (closed "
                    "without an answer when none of it had come)",
    "evicted": "503: a connection with an incomplete head (or idle between requests: closed "
               "without an answer) closed to make room for a new one at the connection cap",
    "connection_limit": "503: a new connection refused at the connection cap",
}


@dataclass
class ServerStats:
    """Responses by status code and refusals below the app by reason; touched only on the
    event-loop thread."""

    by_status: dict[int, int] = field(default_factory=dict)
    refusals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REFUSALS, 0))

    def count(self, status: int) -> None:
        self.by_status[status] = self.by_status.get(status, 0) + 1

    def ok(self, doc: Any) -> Response:
        """``doc`` as a 200 JSON answer, counted."""
        from starlette.responses import JSONResponse

        self.count(200)
        return JSONResponse(doc)

    def refuse(self, reason: str, status: int | None) -> None:
        """One refusal of the HTTP layer; ``status`` is the response it sent (None: it closed
        the connection without one)."""
        self.refusals[reason] = self.refusals.get(reason, 0) + 1
        if status is not None:
            self.count(status)

    def prometheus(self) -> str:
        lines = [f"# HELP {METRIC} HTTP responses of the Latency Lab server, by status code",
                 f"# TYPE {METRIC} counter"]
        lines += [f'{METRIC}{{code="{code}"}} {n}' for code, n in sorted(self.by_status.items())]
        lines += [f"# HELP {REFUSAL_METRIC} Requests and connections the HTTP layer refused "
                  "before the app saw them, by reason",
                  f"# TYPE {REFUSAL_METRIC} counter"]
        lines += [f'{REFUSAL_METRIC}{{reason="{why}"}} {n}'
                  for why, n in sorted(self.refusals.items())]
        return "\n".join(lines) + "\n"


def parse_metrics(text: str) -> dict[int, int]:
    """Status code → count from our ``/metrics`` text (other metrics are ignored)."""
    out: dict[int, int] = {}
    for line in text.splitlines():
        if line.startswith(METRIC + "{"):
            try:
                labels, value = line[len(METRIC):].rsplit(None, 1)
                code = int(labels.split('"')[1])
                out[code] = out.get(code, 0) + int(float(value))
            except (ValueError, IndexError):
                continue
    return out


def error_status(message: str) -> int:
    """400 when a preprocess error says the input was bad, else 500."""
    if message.startswith("preprocess: ") and message[12:].split(":")[0] in _CLIENT_FAULTS:
        return 400
    return 500


def server_timing_ns(t_in: int, pre_start: int, pre_end: int, fwd_start: int, fwd_end: int,
                     post_start: int, post_end: int) -> dict[str, int]:
    """The server's own durations of one request, ours or a Ray replica's, from its stamps
    since it came in (its three waits summed as ``queue``)."""
    return {"queue": (pre_start - t_in) + (fwd_start - pre_end) + (post_start - fwd_end),
            "preprocess": pre_end - pre_start, "forward": fwd_end - fwd_start,
            "postprocess": post_end - post_start}


def error_response(status: int, message: str,
                   headers: dict[str, str] | None = None) -> Response:
    """An OIP error (``{"error": message}``) as a Starlette response."""
    from starlette.responses import Response

    return Response(error_body(message), status, headers, media_type=JSON_TYPE)


def infer_response(model: str, timing_ns: dict[str, int], batch: str, response: Any,
                   error: str | None, rid: str | None) -> Response:
    """The answer to one infer request, ours or a Ray replica's: the pipeline's response as
    OIP JSON (or its error: 400 for bad input, else 500), with the server's durations as
    ``Server-Timing`` and its batch (``id;size;replica``) as ``Latency-Lab-Batch``."""
    from starlette.responses import Response

    headers = {"Server-Timing": format_server_timing(timing_ns), "Latency-Lab-Batch": batch}
    if error is not None:
        return error_response(error_status(error), error, headers)
    try:
        encoded = encode_response(model, response, rid)
    except (TypeError, ValueError, RecursionError) as exc:  # the response is not JSON
        return error_response(500, f"the pipeline's response cannot be sent as JSON: "
                                   f"{type(exc).__name__}: {exc}", headers)
    return Response(encoded, 200, headers, media_type=JSON_TYPE)


async def read_body(request: Any, max_bytes: int,
                    refusal: Callable[[int, str], Exception]) -> bytes:
    """A request's body, read as it streams in, refused with ``refusal(413, why)`` past
    ``max_bytes`` (checked against Content-Length before reading, then while reading), so an
    oversized body is never buffered whole. ``refusal``: each protocol's error type."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_bytes:
        raise refusal(413, f"body of {int(length)} bytes is over the {max_bytes}-byte limit")
    chunks, n = [], 0
    async for chunk in request.stream():
        n += len(chunk)
        if n > max_bytes:
            raise refusal(413, f"body is over the {max_bytes}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(server: Any, model: str, max_body_bytes: int,
               stats: ServerStats | None = None) -> Any:
    """The Starlette app serving ``server`` (a started ``latency.serve.server.Server``) as
    ``model``."""
    from starlette.applications import Starlette
    from starlette.requests import Request as HttpRequest
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    stats = stats if stats is not None else ServerStats()
    submit = server.submit

    def refuse(status: int, message: str) -> Response:
        stats.count(status)
        return error_response(status, message)

    def unknown(name: str) -> Response:
        return refuse(404, f"unknown model {name!r}; this server serves {model!r}")

    async def infer(request: HttpRequest) -> Response:
        name = request.path_params["name"]
        if name != model:
            return unknown(name)
        try:
            body = await read_body(request, max_body_bytes, ProtocolError)
            raw, rid = decode_request(body, request.headers.get("content-type", JSON_TYPE))
        except ProtocolError as exc:
            return refuse(exc.status, str(exc))
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def settle(_: Any) -> None:
            if not done.done():
                done.set_result(None)

        r = Request(raw, 0, False, lambda req: loop.call_soon_threadsafe(settle, req),
                    now_ns())
        r.t_sent = r.t_intended
        submit(r)
        await done
        if r.cancelled:
            return refuse(503, "the server is shutting down")
        timing = server_timing_ns(r.t_sent, r.t_pre_start, r.t_pre_end, r.t_fwd_start,
                                  r.t_fwd_end, r.t_post_start, r.t_post_end)
        answer = infer_response(model, timing, f"{r.batch_id};{r.batch_size};{r.replica}",
                                r.response, r.error, rid)
        stats.count(answer.status_code)
        return answer

    async def ready(request: HttpRequest) -> Response:
        return stats.ok({"ready": True})

    async def server_meta(request: HttpRequest) -> Response:
        return stats.ok({"name": "latency-lab", "version": "1", "extensions": []})

    async def model_meta(request: HttpRequest) -> Response:
        name = request.path_params["name"]
        if name != model:
            return unknown(name)
        return stats.ok({
            "name": model, "versions": ["1"], "platform": "pytorch",
            "inputs": [{"name": "input", "datatype": "BYTES", "shape": [1]}],
            "outputs": [{"name": "output", "datatype": "BYTES", "shape": [1]}],
            "parameters": {"batch_size": server.batches.max_batch,
                           "replicas": len(server._replicas)}})

    async def model_ready(request: HttpRequest) -> Response:
        name = request.path_params["name"]
        if name != model:
            return unknown(name)
        return stats.ok({"name": model, "ready": True})

    async def metrics(request: HttpRequest) -> Response:
        return PlainTextResponse(stats.prometheus())

    async def not_found(request: HttpRequest, exc: Exception) -> Response:
        code = getattr(exc, "status_code", 404)
        return refuse(code, f"no route {request.method} {request.url.path}")

    routes = [
        Route("/v2/health/live", ready), Route("/v2/health/ready", ready),
        Route("/v2", server_meta),
        Route("/v2/models/{name}", model_meta),
        Route("/v2/models/{name}/ready", model_ready),
        Route("/v2/models/{name}/infer", infer, methods=["POST"]),
        Route("/v2/models/{name}/versions/{version}/infer", infer, methods=["POST"]),
        Route("/metrics", metrics),
    ]
    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
    app.state.stats = stats
    return app
