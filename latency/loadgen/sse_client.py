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
import secrets
import threading
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from latency.core.errors import ConfigError, error_text
from latency.core.fmt import server_text
from latency.core.gen_records import GenRequest
from latency.core.gen_reports import MISSING
from latency.core.timing import now_ns
from latency.loadgen.gen_layout import AccountError, lay_out, parse_account, per_token, undecomposed
from latency.loadgen.http1_stream import StreamPool
from latency.loadgen.loop_client import LoopClient
from latency.loadgen.server_reports import ReportError, own_report, read_report, report_row
from latency.loadgen.sse_parser import MAX_EVENT_BYTES, SseError, SseParser
from latency.serve.gen_account import ACCOUNT_KEY

#: the longest one stream may take, start to [DONE]
STREAM_TIMEOUT_S = 600.0
#: the longest a stream may send nothing (a server that stalls fails that request)
IDLE_TIMEOUT_S = 60.0
#: events beyond the tokens asked for that a stream may send (role, usage, account)
SPARE_EVENTS = 8
#: the longest prompt a server's usage is believed to report (tokens)
MAX_PROMPT_TOKENS = 10_000_000
#: how often the client asks its loop to wake, timing how long the wake-up waits (s); and
#: the most such waits kept (the last ones)
LAG_PERIOD_S = 0.005
LAG_KEPT = 65_536


class ChunkCounter(Protocol):
    """Counts the tokens of each streamed chunk of a reply (``pipelines.token_counter``, or
    the server's own tokenize endpoint: ``execution.remote_tokenizer``)."""

    def per_chunk(self, chunks: list[str]) -> list[int] | None:
        """Each chunk's tokens; None when the counter knows only the reply's count."""

    def count(self, text: str) -> int: ...


class StreamError(ValueError):
    """The stream broke the protocol (an error event, too many events, not JSON)."""


class _Reply:
    """What one stream said, event by event (on the loop's thread)."""

    __slots__ = ("chat", "limit", "stamps", "texts", "finish", "account", "usage", "error",
                 "done", "events", "content", "timings", "metrics", "counted", "told")

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
        self.timings: Any = None  # llama.cpp's account of the request
        self.metrics: Any = None  # vLLM's per-request metrics
        self.counted = -1  # the tokenizer's count of the reply (-1: not counted)
        #: each choice event's cumulative completion_tokens, when the server counts them per
        #: chunk (vLLM's continuous_usage_stats); None where an event did not say
        self.told: list[int | None] = []

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
        except RecursionError:
            raise StreamError("an event is JSON nested too deeply") from None
        if not isinstance(obj, dict):
            raise StreamError("an event is not a JSON object")
        if "error" in obj:
            err = obj["error"]
            msg = err.get("message") if isinstance(err, dict) else err
            self.error = f"error event: {server_text(msg)}"
            return
        choices = obj.get("choices")
        if choices:
            if not isinstance(choices, list) or not all(isinstance(x, dict) for x in choices):
                raise StreamError("an event's choices are not a list of objects")
        # the request asked for one completion: choice 0's tokens are its own; another
        # index's (a server that sends n > 1 anyway) are not counted as this request's
        c = next((x for x in choices or () if x.get("index", 0) == 0), None)
        if c is not None:
            if self.chat:
                delta = c.get("delta") or {}
                if not isinstance(delta, dict):
                    raise StreamError("a choice's delta is not an object")
                text = delta.get("content") or ""
                if not text and not self.stamps and "role" in delta \
                        and c.get("finish_reason") is None:
                    return  # the role-only first event: no token
            else:
                text = c.get("text") or ""
            if not isinstance(text, str):
                raise StreamError(f"a choice's text is not a string but "
                                  f"{type(text).__name__}: {str(text)[:60]!r}")
            self.stamps.append(stamp)
            self.texts.append(text)
            u = obj.get("usage")
            n = u.get("completion_tokens") if isinstance(u, dict) else None
            self.told.append(n if isinstance(n, int) and not isinstance(n, bool) else None)
            self.content = self.content or bool(text)
            if c.get("finish_reason") is not None:
                self.finish = c["finish_reason"]
        if ACCOUNT_KEY in obj:
            self.account = obj[ACCOUNT_KEY]
        if obj.get("usage") is not None:
            self.usage = obj["usage"]
        if obj.get("timings") is not None:
            self.timings = obj["timings"]
        if obj.get("metrics") is not None:
            self.metrics = obj["metrics"]


class SseTransport(LoopClient[GenRequest]):
    """``submit(req)`` streams ``req`` from ``url`` (a ``/v1/completions`` or
    ``/v1/chat/completions`` route); the finished request comes back through
    ``req.on_done(req)``.

    For a server of yours (``trace=True``): each request carries a W3C ``traceparent`` and an
    ``X-Request-Id`` (its trace id, kept in the request's report row, so a server that traces
    can be joined span by span), ``headers`` (the bearer key) and, when the server takes them,
    ``ignore_eos``/``min_tokens`` (``min_tokens``); the reply's report — llama.cpp's
    ``timings``, vLLM's ``metrics``, TGI's headers — and its ``usage`` fill the request's
    report row; ``counter`` (the served model's tokenizer) counts each chunk's tokens, so
    every token gets the stamp of the chunk that brought it."""

    name = "http"

    def __init__(self, url: str, model: str, *, chat: bool = False,
                 connections: int = 256, ignore_eos: bool | None = True,
                 min_tokens: bool = False, headers: dict[str, str] | None = None,
                 counter: ChunkCounter | None = None, trace: bool = False,
                 needs_done: bool = True, chunk_usage: bool = False,
                 timeout_s: float = STREAM_TIMEOUT_S, idle_s: float = IDLE_TIMEOUT_S,
                 max_event: int = MAX_EVENT_BYTES) -> None:
        self.model = model
        self.chat = chat
        self.ignore_eos = ignore_eos
        self.min_tokens = min_tokens
        self.counter = counter
        self.trace = trace
        #: a stream must end in [DONE]; False (a server that never sends it): a stream is
        #: whole once a choice carried its finish_reason and the reply ended
        self.needs_done = needs_done
        #: ask for and read each chunk's usage (``continuous_usage_stats``)
        self.chunk_usage = chunk_usage
        self.max_event = max_event
        self.url = url
        self._extra = b"".join(f"{k}: {v}\r\n".encode("latin-1")
                               for k, v in (headers or {}).items())
        #: requests whose account was there but unusable, by reason (``gen_layout.UNUSABLE``),
        #: and those that came with none
        self.unusable: Counter[str] = Counter()
        #: reports that were there but could not be used: how many, and by their reason
        #: (the first 8 reasons)
        self.bad_report_total = 0
        self.bad_reports: Counter[str] = Counter()
        #: replies the server's tokenizer could not count, by why (the run names them)
        self.uncounted: Counter[str] = Counter()
        #: the successful replies by the finish_reason that ended them ("none": not given):
        #: a reply ended by "stop" though its length was forced was not forced
        self.finishes: Counter[str] = Counter()
        #: counts a reply's tokens with the tokenizer off the loop's thread, so no other
        #: stream waits for it to be read and stamped
        self._counting = ThreadPoolExecutor(1, "sse-count") if counter is not None else None
        self._replies: dict[GenRequest, _Reply] = {}
        super().__init__("sse-client")
        self._pool = StreamPool(self.url, connections, timeout_s, idle_s)
        #: how long each wake-up of the loop waited for it (ns): a token's bytes wait as
        #: long before they are stamped — the client's own stamping lag, measured where a
        #: server's report is joined (``trace``), the only place it is read
        self._lags: deque[int] = deque(maxlen=LAG_KEPT)
        self._lag_stop = threading.Event()
        if trace:
            threading.Thread(target=self._watch_lag, name="sse-lag", daemon=True).start()

    def _watch_lag(self) -> None:
        """Every ``LAG_PERIOD_S``, wake the loop as a socket read would and time the wait."""
        def woke(asked: int) -> None:
            self._lags.append(now_ns() - asked)

        while not self._lag_stop.wait(LAG_PERIOD_S):
            try:
                self._loop.call_soon_threadsafe(woke, now_ns())
            except RuntimeError:  # the loop is closed
                return

    def stamp_lag_ns(self, quantile: float = 0.99) -> int:
        """The ``quantile`` of the loop's wake-up waits over the run (ns; 0 before any)."""
        lags = sorted(self._lags)
        return lags[min(len(lags) - 1, int(quantile * len(lags)))] if lags else 0

    # ---- requests --------------------------------------------------------------------------
    def body(self, req: GenRequest) -> bytes:
        """The request's JSON: its prompt, ``max_tokens``, streamed with usage."""
        options: dict[str, Any] = {"include_usage": True}
        if self.chunk_usage:
            options["continuous_usage_stats"] = True
        ask: dict[str, Any] = {"model": self.model, "max_tokens": req.max_tokens,
                               "stream": True, "stream_options": options}
        if self.chat:
            ask["messages"] = [{"role": "user", "content": req.prompt}]
        else:
            ask["prompt"] = req.prompt
        if self.ignore_eos is not None:
            ask["ignore_eos"] = self.ignore_eos
        if self.min_tokens and self.ignore_eos:
            ask["min_tokens"] = req.max_tokens
        return json.dumps(ask).encode()

    def headers(self, trace: tuple[int, int]) -> bytes:
        """The request's own header lines: the fixed ones and, with tracing, its trace."""
        if not self.trace:
            return self._extra
        hi, lo = trace
        tid = f"{hi:016x}{lo:016x}"
        return self._extra + (f"traceparent: 00-{tid}-{secrets.token_hex(8)}-01\r\n"
                              f"X-Request-Id: {tid}\r\n").encode()

    async def _exchange(self, req: GenRequest) -> None:
        req.t_sent = now_ns()
        reply = _Reply(self.chat, req.max_tokens + SPARE_EVENTS)
        self._replies[req] = reply
        parser = SseParser(self.max_event)
        error: str | None = None

        def sink(data: bytes) -> None:
            for event in parser.feed(data):
                reply.event(event, now_ns())

        trace = (secrets.randbits(64) or 1, secrets.randbits(64)) if self.trace else (0, 0)
        headers: dict[bytes, bytes] = {}
        try:
            status, ctype, body, headers = await self._pool.stream(
                self.body(req), "application/json", sink, self.headers(trace))
            if status != 200:
                error = f"HTTP {status}: {error_message(body)}"
            elif not ctype.startswith(b"text/event-stream"):
                error = f"not a stream: Content-Type {ctype.decode('latin-1')!r}"
            elif reply.error is not None:
                error = reply.error
            elif not reply.done and (self.needs_done or reply.finish is None):
                error = "the stream ended without [DONE]" if self.needs_done else \
                    "the stream ended before its finish_reason (cut short)"
            elif parser.pending:
                error = "the stream ended inside an event"
            elif reply.account is None and not reply.content:
                error = (f"no content: the stream ended (finish_reason "
                         f"{reply.finish or 'none'}) before any token's text")
        except asyncio.CancelledError:
            if not req.cancelled:
                raise
        except (SseError, StreamError) as exc:
            error = f"stream: {exc}"
        except Exception as exc:  # noqa: BLE001 - a failed exchange fails this request alone
            error = f"transport: {error_text(exc)}"
        finally:
            self._replies.pop(req, None)
        req.t_done = now_ns()
        req.error = error
        if self._counting is not None:  # every stamp is taken: only the counting is left
            await self._loop.run_in_executor(self._counting, self._finish, req, reply,
                                             headers, trace)
        else:
            self._finish(req, reply, headers, trace)

    def _finish(self, req: GenRequest, reply: _Reply, headers: dict[bytes, bytes],
                trace: tuple[int, int]) -> None:
        self._fill(req, reply)
        if req.error is None and not req.cancelled and not req.delivered:
            # whatever an account claims, a stream that carried no token is no success
            req.error = "no content: the stream carried no token"
        if req.error is None:
            self.finishes[str(reply.finish or "none")[:40]] += 1
        if self.trace:
            req.report = self._report(req, reply, headers, trace)
        if req.on_done is not None:
            req.on_done(req)

    def _fill(self, req: GenRequest, reply: _Reply) -> None:
        """Every stamp of ``req`` from what its stream said (see the module docstring)."""
        req.text = list(reply.texts)
        if reply.account is not None and req.error is None:
            try:
                account = parse_account(reply.account)
                if not 1 <= account.tokens <= req.max_tokens + SPARE_EVENTS:
                    raise AccountError("mismatch", f"the account's {account.tokens:,} tokens "
                                       f"for {req.max_tokens:,} asked")
                stamps = reply.stamps
                chunks = account.chunk_tokens
                if len(stamps) != (len(chunks) if chunks is not None else account.tokens):
                    raise AccountError("mismatch", "the stream's events and the account's "
                                       "tokens differ")
                lay_out(req, account, per_token(stamps, chunks))
                req.stream_chunks = len(stamps)
                if self.counter is not None and req.text:  # the client's count beside it
                    self._counted(reply, req.text, per_chunk=False)
                return
            except AccountError as exc:
                self.unusable[exc.why] += 1
        elif req.error is None and not req.cancelled:
            self.unusable["none"] += 1
        # no usable account: an event with text is a token (vLLM's benchmark's rule), or, with
        # the served model's tokenizer, as many tokens as it counts in the event's text
        keep = [i for i, t in enumerate(reply.texts) if t]
        req.text = [reply.texts[i] for i in keep]
        req.stream_chunks = len(keep)
        stamps = [reply.stamps[i] for i in keep]
        limit = req.max_tokens + SPARE_EVENTS
        per_chunk = chunk_counts(reply.told, keep, limit) if self.chunk_usage and keep \
            else None
        if per_chunk is not None:  # the server's own count of each chunk
            stamps = per_token(stamps, per_chunk)
        elif self.counter is not None and req.text and \
                (counts := self._counted(reply, req.text)) is not None:
            reply.counted = sum(counts)
            if (told := self._told(reply, req)) is not None:
                counts = fitted(counts, told)  # the server's count; the tokenizer's spread
            stamps = per_token(stamps, counts)
        elif self.counter is None and req.text and \
                (told := self._told(reply, req)) is not None and told > len(stamps):
            # no tokenizer, but the server counted more tokens than events with text (a
            # token whose text is part of a character is held back and sent with the next):
            # one token an event, the rest where the text is longest
            counts = fitted([len(t.encode()) for t in req.text], told)
            stamps = per_token(stamps, counts)
        prompt = reply.usage.get("prompt_tokens", 0) if isinstance(reply.usage, dict) else 0
        ok = isinstance(prompt, int) and not isinstance(prompt, bool) and \
            0 <= prompt <= MAX_PROMPT_TOKENS
        undecomposed(req, stamps, prompt if ok else 0)

    @staticmethod
    def _told(reply: _Reply, req: GenRequest) -> int | None:
        """The server's ``usage.completion_tokens`` where it can be believed: a whole number
        from 1 to the tokens asked for and a few spare (a larger claim sizes nothing), and
        no more than the bytes of text that streamed (a token writes at least one: a server
        claiming 60 tokens for six chunks of three bytes is not believed)."""
        told = reply.usage.get("completion_tokens") if isinstance(reply.usage, dict) else None
        if isinstance(told, int) and not isinstance(told, bool) and \
                0 < told <= req.max_tokens + SPARE_EVENTS and \
                told <= sum(len(t.encode()) for t in req.text):
            return told
        return None

    def _counted(self, reply: _Reply, texts: list[str], per_chunk: bool = True
                 ) -> list[int] | None:
        """Each chunk's tokens by the counter; None (the reply's count kept in
        ``reply.counted``) when it knows only the reply's count, when only that is asked
        (``per_chunk`` False: the server counted the chunks itself), or when it could not
        count it."""
        assert self.counter is not None
        try:
            counts = self.counter.per_chunk(texts) if per_chunk else None
            if counts is None:
                reply.counted = self.counter.count("".join(texts))
            return counts
        except ConfigError as exc:  # the server's tokenizer failed: this reply uncounted
            self.uncounted[str(exc)] += 1
            return None

    def _report(self, req: GenRequest, reply: _Reply, headers: dict[bytes, bytes],
                trace: tuple[int, int]) -> tuple[Any, ...]:
        """The request's report row: what the server said of it (read_report), its usage
        counts, its trace id."""
        report, network = None, MISSING
        if req.error is None and req.decomposed:
            report, network = own_report(req), req.t_received - req.t_sent
        elif req.error is None:
            try:
                report = read_report(reply.timings, reply.metrics, headers)
            except ReportError as exc:
                self.bad_report_total += 1
                if len(self.bad_reports) < 8 or str(exc) in self.bad_reports:
                    self.bad_reports[str(exc)] += 1
        return report_row(report, reply.usage, trace, reply.counted, network)

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
        self._lag_stop.set()
        super().close()
        if self._counting is not None:
            self._counting.shutdown(wait=False, cancel_futures=True)


def error_message(body: bytes) -> str:
    """The message of an OpenAI-style error body (or a FastAPI ``detail``), else its first
    200 characters."""
    try:
        obj = json.loads(body)
        err = obj.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return server_text(err["message"])
        if isinstance(err, str):
            return server_text(err)
        if obj.get("detail"):
            return server_text(obj["detail"])
    except (ValueError, AttributeError, RecursionError):
        pass
    return server_text(body[:200].decode("utf-8", "replace").strip() or "(no body)")


def fitted(counts: list[int], total: int) -> list[int]:
    """``counts`` made to sum to ``total`` (largest remainders), keeping their spread: the
    server says how many tokens it generated, the tokenizer which chunk carried how many (a
    re-tokenized reply can merge or split differently at a boundary).

    Every chunk carried at least one token when the server's count allows it (a chunk is
    written because a token was made): a spread that gave a chunk none would move the
    stream's stamps — its last token earlier than the last chunk came, a gap lost — where
    only the count is in doubt. With fewer tokens than chunks, the first and the last chunk
    keep one each, so the time to first token and the end-to-end time stay the stream's own."""
    if sum(counts) == total or not counts:
        return list(counts)
    n = len(counts)
    if total >= n:
        return [1 + k for k in _apportioned([max(c - 1, 0) for c in counts], total - n)]
    if n == 1 or total < 2:
        return [total] + [0] * (n - 1)
    return [1, *_apportioned(counts[1:-1], total - 2), 1]


def _apportioned(weights: list[int], total: int) -> list[int]:
    """``total`` shared in proportion to ``weights`` (equally where they are all zero),
    rounded by largest remainders."""
    if not weights:
        return []
    have = sum(weights)
    if have == 0:
        weights, have = [1] * len(weights), len(weights)
    exact = [w * total / have for w in weights]
    out = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: exact[i] - out[i], reverse=True)
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


def chunk_counts(told: list[int | None], keep: list[int], limit: int) -> list[int] | None:
    """Each kept (text-carrying) event's tokens from the server's cumulative per-chunk
    ``completion_tokens`` (``told``, one an event): an event without text hands its tokens to
    the next one with text (the last ones' to the last); one without text that says nothing
    carries none. None when a text event did not say or the counts go backwards: then the
    tokenizer, or one token a chunk, is used — as when they add up to nothing or to more than
    ``limit`` (the tokens asked for and a few spare: a server's count is not believed beyond
    them)."""
    kept = set(keep)
    if any(t is None and i in kept for i, t in enumerate(told)):
        return None
    cum: list[int] = []
    for t in told:
        cum.append(int(t) if t is not None else (cum[-1] if cum else 0))
    steps = [b - a for a, b in zip([0, *cum[:-1]], cum, strict=True)]
    if any(k < 0 for k in steps) or not 0 < cum[-1] <= limit:
        return None
    out = [0] * len(keep)
    at = 0
    for i, k in enumerate(steps):
        while at < len(keep) - 1 and keep[at] < i:
            at += 1
        out[at] += k
    return out
