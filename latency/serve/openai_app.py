"""The OpenAI-compatible HTTP app of a generation server: streamed tokens over server-sent
events, on Starlette + uvicorn (as ``http_app`` serves one-shot pipelines over OIP).

Routes:

    POST /v1/completions, /v1/chat/completions   stream: true → server-sent events
                                                 (``openai_chunks``), else one JSON body
    GET  /v1/models                              the one model served
    POST /tokenize, /detokenize                  the model's tokenizer, in vLLM's shapes
                                                 ({"prompt"} → {"count", "tokens",
                                                 "max_model_len"}; {"tokens"} → {"prompt"})
    GET  /health                                 200 once serving
    GET  /metrics                                Prometheus: responses by status, refusals
                                                 below the app, and the generation gauges
                                                 (running, waiting, open streams, clients
                                                 that went away)
    GET  /latency_lab/state                      the same gauges as JSON (for tests, people)
    GET  /latency_lab/steps                      the recent scheduler steps (``gen_steps``)

One request: the body is read (bounded: 413 over the limit) and checked (``openai_protocol``:
400 with the reason, OpenAI's error shape), then handed to the ``GenServer``. Its status is
decided once the tokenizer has accepted the prompt: a prompt that with ``max_tokens`` exceeds
the context, the KV budget or the step's budget is refused then, also 400, before any event is
sent. Accepted: ``200`` and the stream — for a chat, the role-only event at once — then each
token's text as the writer takes it from the scheduler, and the last event with the server's
account (``gen_account``).

Why the writer takes tokens itself: the scheduler thread only says "``n`` tokens are ready"
(one ``call_soon_threadsafe`` a token), and the request's coroutine on the event loop takes
every token ready at that moment into one event. A client or writer that falls behind gets
fewer, larger events instead of an unbounded queue, and the time a token waited for the writer
is the server's ``delivery``.

A client that goes away mid-stream (its connection closed: ``http.disconnect``) is noticed
while its request waits or streams; the request is cancelled in the generation server at once
(``GenServer.cancel``), which frees its slot and KV cache before the next step.
"""
from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from latency.core.gen_records import GenRequest
from latency.core.timing import now_ns
from latency.serve.gen_account import account_of
from latency.serve.gen_server import GenServer
from latency.serve.gen_steps import StepRing
from latency.serve.http_app import ServerStats, read_body
from latency.serve.openai_chunks import DONE, STREAM_TYPE, Encoder, usage_of
from latency.serve.openai_protocol import CompletionAsk, OpenAIError, error_json, parse_ask

JSON_TYPE = "application/json"
#: the generation gauges and counter in ``/metrics``
GAUGES = {"running": "sequences in the scheduler's running set",
          "waiting": "requests waiting for the tokenizer or a slot",
          "streams": "requests this app is answering"}
DISCONNECTS = "latency_lab_gen_disconnects_total"


class _Stream:
    """One request's progress, handed from the server's threads to the event loop."""

    __slots__ = ("loop", "ready", "last", "accepted", "ended", "gone", "_dirty", "_waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.ready = 0  # tokens complete (text, stamps) in the request
        self.last = False  # the last of them has come
        self.accepted = False  # the tokenizer accepted the prompt
        self.ended = False  # the server ended it otherwise (failed, cancelled)
        self.gone = False  # the client went away
        self._dirty = False
        self._waiter: asyncio.Future[None] | None = None

    # ---- the server's threads (the tokenizer, a scheduler) -------------------------------
    def on_token(self, req: GenRequest, last: bool) -> None:
        self.loop.call_soon_threadsafe(self._tokens, len(req.batches), last)

    def on_accepted(self, req: GenRequest) -> None:
        self.loop.call_soon_threadsafe(self._set, "accepted")

    def on_done(self, req: GenRequest) -> None:
        self.loop.call_soon_threadsafe(self._set, "ended")

    # ---- the event loop ------------------------------------------------------------------
    def _tokens(self, n: int, last: bool) -> None:
        self.ready = max(self.ready, n)
        self.last = self.last or last
        self._wake()

    def _set(self, what: str) -> None:
        setattr(self, what, True)
        self._wake()

    def _wake(self) -> None:
        self._dirty = True
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def wait(self) -> None:
        """Until something happened since the last wait."""
        if not self._dirty:
            self._waiter = self.loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        self._dirty = False


async def _watch(receive: Any, stream: _Stream) -> None:
    """Wait for the client to go away (uvicorn: ``http.disconnect`` once the connection is
    lost, or once our response is complete — then nothing is waiting for it)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            stream._set("gone")
            return


def _finish(req: GenRequest, tokens: int) -> str:
    return "length" if tokens >= req.max_tokens else "stop"


def create_openai_app(server: GenServer, model: str, max_context: int, max_body_bytes: int,
                      stats: ServerStats | None = None, steps: StepRing | None = None) -> Any:
    """The Starlette app serving ``server`` (a started ``GenServer``) as ``model``."""
    from starlette.applications import Starlette
    from starlette.requests import Request as HttpRequest
    from starlette.responses import PlainTextResponse, Response
    from starlette.routing import Route

    stats = stats if stats is not None else ServerStats()
    live: set[_Stream] = set()
    counts = {"disconnects": 0}

    def refuse(exc: OpenAIError) -> Response:
        stats.count(exc.status)
        return Response(exc.body(), exc.status, media_type=JSON_TYPE)

    def gone(req: GenRequest) -> Response:
        """The client left: drop its request (its slot and KV are freed at the next step)."""
        server.cancel(req)
        counts["disconnects"] += 1
        return Response(b"", 499)  # nobody reads it (nginx's 'client closed request')

    async def complete(request: HttpRequest, chat: bool) -> Response:
        try:
            body = await read_body(request, max_body_bytes, OpenAIError)
            ask = parse_ask(body, model, max_context, chat)
        except OpenAIError as exc:
            return refuse(exc)
        loop = asyncio.get_running_loop()
        stream = _Stream(loop)
        req = GenRequest(ask.prompt, ask.max_tokens, 0, False, now_ns())
        req.t_sent = req.t_intended
        req.stop_on_eos = None if ask.ignore_eos is None else not ask.ignore_eos
        req.on_token, req.on_done = stream.on_token, stream.on_done
        req.on_accepted = stream.on_accepted
        watcher = loop.create_task(_watch(request.receive, stream))
        live.add(stream)
        handed_over = False
        try:
            server.submit(req)
            while not (stream.accepted or stream.ended or stream.gone):
                await stream.wait()
            if stream.gone:
                return gone(req)
            if not stream.accepted:  # refused by the tokenizer's checks, or shutting down
                if req.cancelled:
                    return refuse(OpenAIError(503, "the server is shutting down",
                                              "server_error"))
                return refuse(OpenAIError(400, req.error or "the prompt was refused",
                                          code="prompt_refused", param="prompt"))
            stats.count(200)
            if ask.stream:
                handed_over = True
                return _SseResponse(req, stream, ask, Encoder(model, chat),  # type: ignore[return-value]
                                    watcher, live, gone)
            while not (stream.last or stream.ended or stream.gone):
                await stream.wait()
            if stream.gone:
                return gone(req)
            if not stream.last:
                return Response(error_json(req.error or "the server closed", "server_error"),
                                500, media_type=JSON_TYPE)
            n = stream.ready
            # one reply when the last token is ready: each token counts as taken when its text
            # was (its decode is the server's, not a wait for delivery), the reply's write as
            # the last one's delivery
            picked = [*req.detok[:n - 1], now_ns()]
            body = Encoder(model, chat).body("".join(req.text[:n]), _finish(req, n),
                                             usage_of(len(req.ids), n),
                                             account_of(req, picked, [n]))
            return Response(body, 200, media_type=JSON_TYPE)
        finally:
            if not handed_over:
                watcher.cancel()
                live.discard(stream)

    async def completions(request: HttpRequest) -> Response:
        return await complete(request, chat=False)

    async def chat_completions(request: HttpRequest) -> Response:
        return await complete(request, chat=True)

    async def models(request: HttpRequest) -> Response:
        return stats.ok({"object": "list", "data": [{
            "id": model, "object": "model", "created": int(time.time()),
            "owned_by": "latency-lab", "max_model_len": max_context}]})

    async def json_ask(request: HttpRequest) -> dict[str, Any]:
        """A tokenize or detokenize request's body (vLLM's shape): a JSON object naming our
        model, if any."""
        try:
            body = json.loads(await read_body(request, max_body_bytes, OpenAIError))
        except (ValueError, RecursionError):
            raise OpenAIError(400, "the body is not JSON") from None
        if not isinstance(body, dict):
            raise OpenAIError(400, "the body is not a JSON object")
        if body.get("model") not in (None, model):
            raise OpenAIError(404, f"the model {body.get('model')!r} does not exist",
                              code="model_not_found")
        return body

    async def tokenize(request: HttpRequest) -> Response:
        try:
            body = await json_ask(request)
            prompt = body.get("prompt")
            if not isinstance(prompt, str) or len(prompt) > max_body_bytes:
                raise OpenAIError(400, "'prompt' must be a string (messages are not "
                                       "tokenized here)")
            ids = await asyncio.to_thread(server.pipeline.tokenize, prompt)
        except OpenAIError as exc:
            return refuse(exc)
        return stats.ok({"count": len(ids), "max_model_len": max_context,
                         "tokens": [int(i) for i in ids]})

    async def detokenize(request: HttpRequest) -> Response:
        try:
            body = await json_ask(request)
            ids = body.get("tokens")
            if not isinstance(ids, list) or len(ids) > max_context or not all(
                    isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 2**31
                    for i in ids):
                raise OpenAIError(400, f"'tokens' must be at most {max_context} token ids")
            text = await asyncio.to_thread(server.pipeline.detokenize, ids)
        except OpenAIError as exc:
            return refuse(exc)
        except (ValueError, IndexError, KeyError, OverflowError) as exc:  # not in the vocab
            return refuse(OpenAIError(400, f"cannot detokenize: {exc}"))
        return stats.ok({"prompt": text})

    async def health(request: HttpRequest) -> Response:
        return stats.ok({"status": "ok"})

    def gauges() -> dict[str, int]:
        return {**server.counts(), "streams": len(live), "disconnects": counts["disconnects"]}

    async def state(request: HttpRequest) -> Response:
        return stats.ok({**gauges(), "steps": steps.count if steps is not None else 0})

    async def metrics(request: HttpRequest) -> Response:
        g = gauges()
        lines = [stats.prometheus().rstrip("\n")]
        for name, what in GAUGES.items():
            lines += [f"# HELP latency_lab_gen_{name} {what}",
                      f"# TYPE latency_lab_gen_{name} gauge", f"latency_lab_gen_{name} {g[name]}"]
        lines += [f"# HELP {DISCONNECTS} streams whose client went away before the end",
                  f"# TYPE {DISCONNECTS} counter", f"{DISCONNECTS} {g['disconnects']}"]
        return PlainTextResponse("\n".join(lines) + "\n")

    async def step_log(request: HttpRequest) -> Response:
        if steps is None:
            return refuse(OpenAIError(404, "this server keeps no steps", code="not_found"))
        stats.count(200)
        return Response(steps.encode(), 200, media_type="application/octet-stream")

    async def not_found(request: HttpRequest, exc: Exception) -> Response:
        code = getattr(exc, "status_code", 404)
        return refuse(OpenAIError(code, f"no route {request.method} {request.url.path}",
                                  code="not_found"))

    routes = [
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/models", models), Route("/health", health),
        Route("/tokenize", tokenize, methods=["POST"]),
        Route("/detokenize", detokenize, methods=["POST"]),
        Route("/metrics", metrics), Route("/latency_lab/state", state),
        Route("/latency_lab/steps", step_log),
    ]
    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
    app.state.stats = stats
    return app


class _SseResponse:
    """The stream of one accepted request (an ASGI response: Starlette calls it)."""

    def __init__(self, req: GenRequest, stream: _Stream, ask: CompletionAsk, enc: Encoder,
                 watcher: asyncio.Task[None], live: set[_Stream],
                 gone: Callable[[GenRequest], object]) -> None:
        self.req, self.stream, self.ask, self.enc = req, stream, ask, enc
        self.watcher, self.live, self.gone = watcher, live, gone

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", STREAM_TYPE.encode() + b"; charset=utf-8"),
                (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]})
            if self.ask.chat:
                await send({"type": "http.response.body", "body": self.enc.role(),
                            "more_body": True})
            await self._tokens(send)
        finally:
            self.watcher.cancel()
            self.live.discard(self.stream)

    async def _tokens(self, send: Any) -> None:
        req, stream, enc = self.req, self.stream, self.enc
        upto = held = 0
        picked: list[int] = []
        chunk_tokens: list[int] = []
        while True:
            if stream.gone:
                self.gone(req)  # the client left: its request is dropped and counted
                return
            k = stream.ready
            if k > upto:
                picked += [now_ns()] * (k - upto)
                text = "".join(req.text[upto:k])
                held += k - upto
                upto = k
                finish = _finish(req, k) if stream.last and k == stream.ready else None
                if text or finish:  # a token with no text yet (half a character) waits
                    await send({"type": "http.response.body",
                                "body": enc.tokens(text, finish), "more_body": True})
                    chunk_tokens.append(held)
                    held = 0
                if finish:
                    break
            elif stream.ended:  # failed (or the server stopped) after the stream began
                why = req.error or "the server stopped before the end of the stream"
                await send({"type": "http.response.body", "body": enc.error(why) + DONE,
                            "more_body": False})
                return
            else:
                await stream.wait()
        usage = usage_of(len(req.ids), upto) if self.ask.include_usage else None
        await send({"type": "http.response.body",
                    "body": enc.final(usage, account_of(req, picked, chunk_tokens)) + DONE,
                    "more_body": False})
