"""A lean HTTP/1.1 client: keep-alive connections in a pool, httptools' C parser, asyncio.

Why not aiohttp: against the same server (bench/bench_http.py), a bare closed loop on an
aiohttp session costs ~115 µs of client CPU a request, the same loop on this pool ~65 µs, and
the whole profiling client built on it ~70 µs while measuring. A load generator on the same
machine as the server takes its CPU from the server, so the client's cost per request is what
limits the rate it can drive — and what it adds to every ``network`` time it measures.

What it does: ``POST`` with a Content-Length body (no chunked uploads, no ``Expect``), reads
responses framed by Content-Length, by chunked transfer coding (decoded by httptools) or — an
HTTP/1.0 server's way, such as the standard library's ``http.server`` — by the server closing
the connection; honours ``Connection: close``; TLS for ``https://``. Every wait and buffer is
bounded: connecting within the request timeout, a response body of at most
``MAX_RESPONSE_BYTES`` (a reply that never ends fails its request, instead of growing the
client until the machine runs out of memory). What it does not:
redirects, cookies, proxies, compression, HTTP/2 — a profiler wants one plain request per
request, on a connection it keeps.
"""
from __future__ import annotations

import asyncio
import ssl
from collections import deque
from urllib.parse import urlsplit

import httptools

#: response headers kept (lower-case): the ones the transport reads.
KEPT = frozenset((b"server-timing", b"latency-lab-batch"))
#: the largest response body read; a larger one fails its request (a prediction's reply is
#: kilobytes; this leaves room for images and embeddings).
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
#: statuses whose response has no body, whatever its headers say
_NO_BODY = frozenset((204, 304))


class HttpError(ConnectionError):
    """The connection failed or the peer broke the protocol."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection; at most one request in flight on it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[tuple[int, dict[bytes, bytes], bytes]] | None = None
        self.headers: dict[bytes, bytes] = {}
        self.body: list[bytes] = []
        self.body_bytes = 0
        self.max_body = MAX_RESPONSE_BYTES
        #: the response's body ends when the server closes (no length, not chunked)
        self.until_close = False
        self._framed = False
        self.reusable = True
        self.complete = False

    # ---- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(HttpError(f"bad HTTP response: {exc}"))
        except httptools.HttpParserUpgrade:
            self._fail(HttpError("the server switched protocols"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        if self.until_close and exc is None and self.waiter is not None:
            self.on_message_complete()  # a close-delimited body ends here
            return
        self._fail(HttpError("the server closed the connection"
                             + (f": {exc}" if exc else "")))

    # ---- httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name in KEPT:
            self.headers[name] = value
        elif name in (b"content-length", b"transfer-encoding"):
            self._framed = True

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        self.until_close = not self._framed and status >= 200 and status not in _NO_BODY

    def on_body(self, body: bytes) -> None:
        self.body_bytes += len(body)
        if self.body_bytes > self.max_body:
            self._fail(HttpError(f"the response is larger than {self.max_body / 2**20:g} MiB: "
                                 "not read further"))
            return
        self.body.append(body)

    def on_message_complete(self) -> None:
        if not self.parser.should_keep_alive():
            self.reusable = False
        w, self.waiter = self.waiter, None
        if w is not None and not w.done():
            w.set_result((self.parser.get_status_code(), self.headers, b"".join(self.body)))

    # ---- use
    def _fail(self, exc: Exception) -> None:
        self.reusable = False
        w, self.waiter = self.waiter, None
        if w is not None and not w.done():
            w.set_exception(exc)
        if self.transport is not None:
            self.transport.abort()

    def request(self, data: bytes) -> asyncio.Future[tuple[int, dict[bytes, bytes], bytes]]:
        loop = asyncio.get_running_loop()
        self.waiter = loop.create_future()
        self.headers, self.body, self.body_bytes = {}, [], 0
        self.until_close = self._framed = False
        self.transport.write(data)  # type: ignore[union-attr]
        return self.waiter


class Pool:
    """Up to ``size`` keep-alive connections to one origin; callers beyond wait for one."""

    #: the connection protocol (a streaming client's reads its body as it comes)
    protocol: type[_Connection] = _Connection

    def __init__(self, url: str, size: int, timeout_s: float, method: str = "POST",
                 max_response_bytes: int = MAX_RESPONSE_BYTES) -> None:
        parts = urlsplit(url)
        self.method = method.upper()
        self.host = parts.hostname or "127.0.0.1"
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = (self.port == 443) if self.tls else (self.port == 80)
        self.host_header = host if default else f"{host}:{self.port}"
        self.size = size
        self.timeout_s = timeout_s
        self.max_response_bytes = max_response_bytes
        self._idle: deque[_Connection] = deque()
        self._open = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._ssl = ssl.create_default_context() if self.tls else None

    def head(self, content_type: str, length: int) -> bytes:
        return (f"{self.method} {self.path} HTTP/1.1\r\nHost: {self.host_header}\r\n"
                f"Content-Type: {content_type}\r\nContent-Length: {length}\r\n\r\n").encode()

    async def _acquire(self) -> _Connection:
        while True:
            while self._idle:
                conn = self._idle.pop()
                if conn.reusable and not conn.transport.is_closing():  # type: ignore[union-attr]
                    return conn
                self._open -= 1
            if self._open < self.size:
                self._open += 1
                try:
                    loop = asyncio.get_running_loop()
                    _, conn = await asyncio.wait_for(loop.create_connection(
                        self.protocol, self.host, self.port, ssl=self._ssl,
                        server_hostname=self.host if self.tls else None), self.timeout_s)
                except asyncio.TimeoutError:
                    self._open -= 1
                    self._wake()
                    raise TimeoutError(f"could not connect within {self.timeout_s:g} s") \
                        from None
                except BaseException:
                    self._open -= 1
                    self._wake()
                    raise
                conn.max_body = self.max_response_bytes
                return conn
            w = asyncio.get_running_loop().create_future()
            self._waiters.append(w)
            await w

    def _wake(self) -> None:
        while self._waiters:
            w = self._waiters.popleft()
            if not w.done():
                w.set_result(None)
                return

    def _release(self, conn: _Connection) -> None:
        if conn.reusable:
            self._idle.append(conn)
        else:
            self._open -= 1
            if conn.transport is not None:
                conn.transport.close()
        self._wake()

    async def post(self, body: bytes, content_type: str
                   ) -> tuple[int, dict[bytes, bytes], bytes]:
        """(status, kept headers, body) of one request (``method``, POST unless told);
        HttpError/TimeoutError on failure."""
        conn = await self._acquire()
        loop = asyncio.get_running_loop()
        timer = loop.call_later(self.timeout_s, conn._fail,
                                TimeoutError(f"no reply within {self.timeout_s:g} s"))
        try:
            return await conn.request(self.head(content_type, len(body)) + body)
        finally:
            timer.cancel()
            self._release(conn)

    def close(self) -> None:
        while self._idle:
            conn = self._idle.pop()
            if conn.transport is not None:
                conn.transport.close()
        self._open = 0
