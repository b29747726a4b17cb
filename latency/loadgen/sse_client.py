"""The streaming client: generation requests over HTTP to an OpenAI-compatible server, every
token stamped the moment its server-sent event is parsed.

Why this and not an SSE library: the same reasons as the one-shot client (``http_client``):
one uvloop thread multiplexes every stream over pooled keep-alive connections
(``http1_stream``, httptools' C parser decoding the chunked coding), so a token's stamp is
taken inside the very ``data_received`` that read its bytes, with no thread hop, and the client
costs the server (on the same machine) as little CPU as it can. ``bench/bench_sse_client.py``
sets it against a plain httpx reader on the same server.

One request (``submit``, from any thread; its stamps on the loop's thread)::

    sent ─ POST /v1/completions (stream: true) ─ events ... [DONE] ─ recorded

- each event with a choice is one write of tokens: the chat's first, role-only event
  (``delta: {"role": "assistant"}``) is none; the tokens of an event all get its stamp, and
  the events are counted (``stream_chunks``);
- the last event's ``latency_lab`` account (our server's) places the server's stamps
  (``gen_layout.lay_out``); without one, or with one that does not fit the stream, the
  request is kept whole (``gen_layout.undecomposed``, ``decomposed=False``) and the reason
  counted (``unusable``) — then, as vLLM's benchmark does, each event with text is a token;
- a failure fails its request alone, with its reason: ``HTTP 400: <the server's message>``,
  an error event, a stream cut short (no ``[DONE]``), a stalled or too slow stream, an event
  over the size limit, more events than tokens asked for.

The request then goes back to its owner through ``req.on_done(req)``, every stamp filled in:
the GenDriver records it as it records an in-process one, so the summary and the verdict are
the same code.
"""
from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from typing import Any

from latency.core.gen_records import GenRequest
from latency.core.timing import now_ns
from latency.loadgen.gen_layout import AccountError, lay_out, parse_account, per_token, undecomposed
from latency.loadgen.http1_stream import StreamPool
from latency.loadgen.http_client import new_loop
from latency.loadgen.sse_parser import MAX_EVENT_BYTES, SseError, SseParser
from latency.serve.gen_account import ACCOUNT_KEY

#: the longest one stream may take, start to [DONE]
STREAM_TIMEOUT_S = 600.0
#: the longest a stream may send nothing (a server that stalls fails that request)
IDLE_TIMEOUT_S = 60.0
#: events beyond the tokens asked for that a stream may send (role, usage, account)
SPARE_EVENTS = 8


class StreamError(ValueError):
    """The stream broke the protocol (an error event, too many events, not JSON)."""


class _Reply:
    """What one stream said, event by event (on the loop's thread)."""

    __slots__ = ("chat", "limit", "stamps", "texts", "finish", "account", "usage", "error",
                 "done", "events", "content")

    def __init__(self, chat: bool, limit: int) -> None:
        self.chat = chat
        self.limit = limit
        self.stamps: list[int] = []  # each content event's stamp
        self.texts: list[str] = []  # and its text
        self.finish: str | None = None
        self.account: Any = None
        self.usage: Any = None
        self.error: str | None = None
        self.done = False
        self.events = 0
        self.content = False  # an event with text has come

    def event(self, data: bytes, stamp: int) -> None:
        if self.done:
            raise StreamError("an event after [DONE]")
        if data == b"[DONE]":
            self.done = True
            return
        self.events += 1
        if self.events > self.limit:
            raise StreamError(f"more than {self.limit} events for the tokens asked for")
        try:
            obj = json.loads(data)
        except ValueError:
            raise StreamError(f"an event is not JSON: {data[:80]!r}") from None
        if not isinstance(obj, dict):
            raise StreamError("an event is not a JSON object")
        if "error" in obj:
            err = obj["error"]
            msg = err.get("message") if isinstance(err, dict) else err
            self.error = f"error event: {msg}"
            return
        choices = obj.get("choices")
        if choices:
            c = choices[0]
            if self.chat:
                delta = c.get("delta") or {}
                text = delta.get("content") or ""
                if not text and not self.stamps and "role" in delta \
                        and c.get("finish_reason") is None:
                    return  # the role-only first event: no token
            else:
                text = c.get("text") or ""
            self.stamps.append(stamp)
            self.texts.append(text)
            self.content = self.content or bool(text)
            if c.get("finish_reason") is not None:
                self.finish = c["finish_reason"]
        if ACCOUNT_KEY in obj:
            self.account = obj[ACCOUNT_KEY]
        if obj.get("usage") is not None:
            self.usage = obj["usage"]


class SseTransport:
    """``submit(req)`` streams ``req`` from ``{base}/v1/completions`` (or chat); the finished
    request comes back through ``req.on_done(req)``."""

    name = "http"

    def __init__(self, base_url: str, model: str, *, chat: bool = False,
                 connections: int = 256, ignore_eos: bool | None = True,
                 timeout_s: float = STREAM_TIMEOUT_S, idle_s: float = IDLE_TIMEOUT_S,
                 max_event: int = MAX_EVENT_BYTES) -> None:
        self.model = model
        self.chat = chat
        self.ignore_eos = ignore_eos
        self.max_event = max_event
        path = "/v1/chat/completions" if chat else "/v1/completions"
        self.url = base_url.rstrip("/") + path
        #: requests whose account was there but unusable, by reason (``gen_layout.UNUSABLE``),
        #: and those that came with none
        self.unusable: Counter[str] = Counter()
        self._tasks: dict[GenRequest, asyncio.Task[None]] = {}
        self._replies: dict[GenRequest, _Reply] = {}
        self._loop = new_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sse-client",
                                        daemon=True)
        self._thread.start()
        self._pool = StreamPool(self.url, connections, timeout_s, idle_s)

    # ---- requests --------------------------------------------------------------------------
    def submit(self, req: GenRequest) -> None:
        self._loop.call_soon_threadsafe(self._start, req)

    def _start(self, req: GenRequest) -> None:
        task = self._loop.create_task(self._exchange(req))
        self._tasks[req] = task
        task.add_done_callback(lambda _: self._tasks.pop(req, None))

    def body(self, req: GenRequest) -> bytes:
        """The request's JSON: its prompt, ``max_tokens``, streamed with usage."""
        ask: dict[str, Any] = {"model": self.model, "max_tokens": req.max_tokens,
                               "stream": True, "stream_options": {"include_usage": True}}
        if self.chat:
            ask["messages"] = [{"role": "user", "content": req.prompt}]
        else:
            ask["prompt"] = req.prompt
        if self.ignore_eos is not None:
            ask["ignore_eos"] = self.ignore_eos
        return json.dumps(ask).encode()

    async def _exchange(self, req: GenRequest) -> None:
        req.t_sent = now_ns()
        reply = _Reply(self.chat, req.max_tokens + SPARE_EVENTS)
        self._replies[req] = reply
        parser = SseParser(self.max_event)
        error: str | None = None

        def sink(data: bytes) -> None:
            for event in parser.feed(data):
                reply.event(event, now_ns())

        try:
            status, ctype, body, _headers = await self._pool.stream(
                self.body(req), "application/json", sink)
            if status != 200:
                error = f"HTTP {status}: {error_message(body)}"
            elif not ctype.startswith(b"text/event-stream"):
                error = f"not a stream: Content-Type {ctype.decode('latin-1')!r}"
            elif reply.error is not None:
                error = reply.error
            elif not reply.done:
                error = "the stream ended without [DONE]"
            elif parser.pending:
                error = "the stream ended inside an event"
        except asyncio.CancelledError:
            if not req.cancelled:
                raise
        except (SseError, StreamError) as exc:
            error = f"stream: {exc}"
        except Exception as exc:  # noqa: BLE001 - a failed exchange fails this request alone
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            error = f"transport: {type(exc).__name__}" + (f": {text}" if text else "")
        finally:
            self._replies.pop(req, None)
        req.t_done = now_ns()
        req.error = error
        self._fill(req, reply)
        if req.on_done is not None:
            req.on_done(req)

    def _fill(self, req: GenRequest, reply: _Reply) -> None:
        """Every stamp of ``req`` from what its stream said (see the module docstring)."""
        req.text = list(reply.texts)
        if reply.account is not None and req.error is None:
            try:
                account = parse_account(reply.account)
                stamps = reply.stamps
                chunks = account.chunk_tokens
                if len(stamps) != (len(chunks) if chunks is not None else account.tokens):
                    raise AccountError("mismatch", "the stream's events and the account's "
                                       "tokens differ")
                lay_out(req, account, per_token(stamps, chunks))
                req.stream_chunks = len(stamps)
                return
            except AccountError as exc:
                self.unusable[exc.why] += 1
        elif req.error is None and not req.cancelled:
            self.unusable["none"] += 1
        # no usable account: an event with text is a token (vLLM's benchmark's rule)
        keep = [i for i, t in enumerate(reply.texts) if t]
        req.text = [reply.texts[i] for i in keep]
        req.stream_chunks = len(keep)
        prompt = reply.usage.get("prompt_tokens", 0) if isinstance(reply.usage, dict) else 0
        undecomposed(req, [reply.stamps[i] for i in keep],
                     prompt if isinstance(prompt, int) else 0)

    # ---- ends --------------------------------------------------------------------------------
    def abandon(self) -> None:
        """Give up on every stream that has no token yet (the open loop's grace is over):
        their connections close, so the server drops them too; they end cancelled."""
        def give_up() -> None:
            for req, task in list(self._tasks.items()):
                reply = self._replies.get(req)
                if reply is None or not reply.stamps:
                    req.cancelled = True
                    task.cancel()

        self._loop.call_soon_threadsafe(give_up)

    def close(self) -> None:
        """Close every stream (the server frees their slots) and the pool; stop the loop."""
        async def shut() -> None:
            for task in list(self._tasks.values()):
                task.cancel()
            await asyncio.sleep(0)
            self._pool.close()

        try:
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(10)
        except Exception:  # noqa: BLE001 - closing must not fail a finished run
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)


def error_message(body: bytes) -> str:
    """The message of an OpenAI-style error body (or a FastAPI ``detail``), else its first
    200 characters."""
    try:
        obj = json.loads(body)
        err = obj.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
        if isinstance(err, str):
            return err
        if obj.get("detail"):
            return str(obj["detail"])[:300]
    except (ValueError, AttributeError):
        pass
    return body[:200].decode("utf-8", "replace").strip() or "(no body)"
