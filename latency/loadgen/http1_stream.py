"""A streamed response on the lean keep-alive pool (``http1_pool``): its body is handed to a
sink as each piece arrives, instead of being collected.

Why its own connection class: a streamed reply is read while it is written — the client must
see (and stamp) each server-sent event the moment its bytes are parsed, not when the response
ends. httptools decodes the chunked transfer coding and calls ``on_body`` with each piece of the
payload; a 2xx reply goes to the sink there, on the event loop's thread, inside the same
``data_received`` that read it from the socket. Any other status has its (bounded) body kept for
the error message.

Bounded: the whole exchange must end within ``timeout_s``, and no byte may be missing for
``idle_s`` (a stalled stream fails its request instead of holding its connection); an error
body is read up to ``MAX_ERROR_BODY``; what the sink is given is the sink's to bound (the SSE
parser's event limit).
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable

from latency.loadgen.http1_pool import KEPT, HttpError, Pool, _Connection
from latency.loadgen.server_reports import REPORT_HEADERS

#: the most bytes of a non-2xx response body kept (its error message)
MAX_ERROR_BODY = 64 * 1024

Sink = Callable[[bytes], None]
#: response headers a streamed reply keeps: the one-shot ones and a server's timing report
STREAM_KEPT = KEPT | frozenset(REPORT_HEADERS)


class _StreamConnection(_Connection):
    """A keep-alive connection whose 2xx bodies go to ``sink``."""

    def __init__(self) -> None:
        super().__init__()
        self.sink: Sink | None = None
        self.content_type = b""
        self.last_data = 0.0
        self._to_sink = False

    def data_received(self, data: bytes) -> None:
        self.last_data = self._loop_time()
        super().data_received(data)

    def _loop_time(self) -> float:
        return asyncio.get_running_loop().time()

    def on_header(self, name: bytes, value: bytes) -> None:
        low = name.lower()
        if low == b"content-type":
            self.content_type = value
        elif low in STREAM_KEPT:
            self.headers[low] = value
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        status = self.parser.get_status_code()
        self._to_sink = 200 <= status < 300 and self.sink is not None

    def on_body(self, body: bytes) -> None:
        if not self._to_sink:
            self.body_bytes += len(body)
            if self.body_bytes <= MAX_ERROR_BODY:
                self.body.append(body)
            return
        try:
            self.sink(body)  # type: ignore[misc]
        except Exception as exc:  # noqa: BLE001 - the sink refused the stream: fail it
            self._fail(exc)

    def stream(self, data: bytes, sink: Sink
               ) -> asyncio.Future[tuple[int, dict[bytes, bytes], bytes]]:
        self.sink, self.content_type, self._to_sink = sink, b"", False
        self.last_data = self._loop_time()
        return self.request(data)


class StreamPool(Pool):
    """``Pool`` whose requests stream their replies (``stream``)."""

    protocol = _StreamConnection

    def __init__(self, url: str, size: int, timeout_s: float, idle_s: float) -> None:
        super().__init__(url, size, timeout_s, "POST")
        self.idle_s = idle_s

    async def stream(self, body: bytes, content_type: str, sink: Sink, extra: bytes = b""
                     ) -> tuple[int, bytes, bytes, dict[bytes, bytes]]:
        """(status, content type, error body, kept headers) of one POST whose 2xx body went
        to ``sink`` as it came; ``extra``: more header lines (each ending in CRLF).
        HttpError/TimeoutError (or what the sink raised) on failure. A cancelled caller
        closes the connection: the server sees the client go. Sent once more on a fresh
        connection when a reused one closed before any byte came (``Pool.exchange``)."""
        head = self.head(content_type, len(body))
        if extra:
            head = head[:-2] + extra + b"\r\n"
        data = head + body

        async def once(conn: _Connection) -> tuple[int, bytes, bytes, dict[bytes, bytes]]:
            assert isinstance(conn, _StreamConnection)
            return await self._stream_on(conn, data, sink)

        return await self.exchange(once)

    async def _stream_on(self, conn: _StreamConnection, data: bytes, sink: Sink
                         ) -> tuple[int, bytes, bytes, dict[bytes, bytes]]:
        """One streamed exchange on ``conn``, bounded by the stream's time and silence."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        timers: list[asyncio.TimerHandle] = []

        def check() -> None:
            now = loop.time()
            if now >= deadline:
                conn._fail(TimeoutError(f"the stream did not end within {self.timeout_s:g} s"))
            elif now - conn.last_data >= self.idle_s:
                conn._fail(TimeoutError(f"no byte of the stream for {self.idle_s:g} s"))
            else:
                timers[0] = loop.call_later(min(self.idle_s / 4, deadline - now), check)

        timers.append(loop.call_later(min(self.idle_s / 4, self.timeout_s), check))
        try:
            status, headers, error = await conn.stream(data, sink)
            return status, conn.content_type, error, headers
        except asyncio.CancelledError:
            conn._fail(HttpError("the client gave up on the stream"))
            raise
        finally:
            timers[0].cancel()
            conn.sink = None
