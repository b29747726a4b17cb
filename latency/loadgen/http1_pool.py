"""A lean HTTP/1.1 client: keep-alive connections in a pool, httptools' C parser, asyncio.

Why not aiohttp: against the same server (bench/bench_http.py), a bare closed loop on an
aiohttp session costs ~115 µs of client CPU a request, the same loop on this pool ~65 µs, and
the whole profiling client built on it ~70 µs while measuring. A load generator on the same
machine as the server takes its CPU from the server, so the client's cost per request is what
limits the rate it can drive — and what it adds to every ``network`` time it measures.

What it does: ``POST`` with a Content-Length body (no chunked uploads, no ``Expect``), reads
responses framed by Content-Length, by chunked transfer coding (decoded by httptools) or — an
HTTP/1.0 server's way, such as the standard library's ``http.server`` — by the server closing
the connection; honours ``Connection: close`` and ``Keep-Alive: timeout=…, max=…`` (a
connection is not reused past what the server said it keeps); TLS for ``https://``.

A kept-alive connection can be closed by the server at the very moment a request goes out on
it (llama.cpp's server closes one ~0.1 ms after a streamed reply while announcing keep-alive):
a request that got no byte back on a *reused* connection that closed is sent once more on a
fresh one, as RFC 9112 §9.3.1 allows for a request the server cannot have answered, and
counted (``Pool.retried``) — never a request that got any byte, nor a fresh connection's.

Every wait and buffer is bounded: connecting within the request timeout, a response body of at most
``MAX_RESPONSE_BYTES`` (a reply that never ends fails its request, instead of growing the
client until the machine runs out of memory). What it does not:
redirects, cookies, proxies, compression, HTTP/2 — a profiler wants one plain request per
request, on a connection it keeps.
"""
from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TypeVar
from urllib.parse import urlsplit

import httptools

#: response headers kept (lower-case): the ones the transport reads.
KEPT = frozenset((b"server-timing", b"latency-lab-batch"))
#: the largest response body read; a larger one fails its request (a prediction's reply is
#: kilobytes; this leaves room for images and embeddings).
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
#: statuses whose response has no body, whatever its headers say
_NO_BODY = frozenset((204, 304))
#: an idle connection is not reused in the last part of the server's keep-alive timeout: the
#: server may be closing it as the request leaves
KEEP_ALIVE_MARGIN = 0.8


T = TypeVar("T")


def keep_alive(value: bytes) -> tuple[float | None, int | None]:
    """(timeout s, max requests) of a ``Keep-Alive`` header (RFC 2068 §19.7.1.1); None for
    what it does not say, or says in a form not understood."""
    timeout: float | None = None
    most: int | None = None
    for part in value.decode("latin-1").split(","):
        key, _, val = part.strip().partition("=")
        try:
            if key.strip().lower() == "timeout":
                timeout = float(val) if 0 < float(val) < 1e6 else None
            elif key.strip().lower() == "max":
                most = int(val) if 0 < int(val) < 1 << 31 else None
        except ValueError:
            continue
    return timeout, most


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
        #: replies completed on this connection; bytes received for the current request
        self.uses = 0
        self.received = 0
        #: what the server's Keep-Alive header said: seconds it keeps an idle connection,
        #: requests it serves on one (None: not said)
        self.keep_timeout: float | None = None
        self.keep_max: int | None = None
        #: the event loop's time when the connection last went idle
        self.idle_since = 0.0

    # ---- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.received += len(data)
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
        elif name == b"keep-alive":
            self.keep_timeout, self.keep_max = keep_alive(value)

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
        self.uses += 1
        if not self.parser.should_keep_alive() or \
                (self.keep_max is not None and self.uses >= self.keep_max):
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
        self.headers, self.body, self.body_bytes, self.received = {}, [], 0, 0
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
        #: requests sent again on a fresh connection: the reused one closed before any byte
        #: of their reply came
        self.retried = 0
        #: connections are kept for the next request (False once the server closed one under
        #: a request: it does not keep them as it says)
        self.reuse = True

    def head(self, content_type: str, length: int) -> bytes:
        return (f"{self.method} {self.path} HTTP/1.1\r\nHost: {self.host_header}\r\n"
                f"Content-Type: {content_type}\r\nContent-Length: {length}\r\n\r\n").encode()

    def _usable(self, conn: _Connection) -> bool:
        """An idle connection may carry the next request: open, and not in the last part of
        the keep-alive time the server announced."""
        if not conn.reusable or conn.transport is None or conn.transport.is_closing():
            return False
        if conn.keep_timeout is None:
            return True
        idle = asyncio.get_running_loop().time() - conn.idle_since
        return idle < conn.keep_timeout * KEEP_ALIVE_MARGIN

    async def _acquire(self, fresh: bool = False) -> _Connection:
        """A connection: an idle one (the most recent) unless ``fresh``, else a new one
        within ``size``; waits for one beyond it."""
        while True:
            while self._idle and (fresh and self._open >= self.size or not fresh):
                conn = self._idle.pop()
                if not fresh and self._usable(conn):
                    return conn
                self._open -= 1  # stale, or closed to make room for a fresh one
                if conn.transport is not None:
                    conn.transport.close()
            if self._open < self.size:
                self._open += 1
                try:
                    loop = asyncio.get_running_loop()
                    _, conn = await asyncio.wait_for(loop.create_connection(
                        self.protocol, self.host, self.port, ssl=self._ssl,
                        server_hostname=self.host if self.tls else None), self.timeout_s)
                except BaseException as exc:
                    self._open -= 1
                    self._wake()
                    if isinstance(exc, asyncio.TimeoutError):
                        raise TimeoutError(f"could not connect within {self.timeout_s:g} s") \
                            from None
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
        if conn.reusable and self.reuse:
            conn.idle_since = asyncio.get_running_loop().time()
            self._idle.append(conn)
        else:
            self._open -= 1
            if conn.transport is not None:
                conn.transport.close()
        self._wake()

    async def exchange(self, once: Callable[[_Connection], Awaitable[T]]) -> T:
        """``once(conn)`` on a pooled connection, the connection released after; sent once
        more on a fresh connection when a reused one closed before any byte of the reply
        came (see the module docstring)."""
        conn = await self._acquire()
        reused = conn.uses > 0
        try:
            return await once(conn)
        except HttpError:
            if not reused or conn.received:
                raise
        finally:
            self._release(conn)
        self.retried += 1
        # this server closes kept connections under new requests: from now on each request
        # gets a fresh one (a connect costs less than a failed send and a reconnect)
        self.reuse = False
        conn = await self._acquire(fresh=True)
        try:
            return await once(conn)
        finally:
            self._release(conn)

    async def post(self, body: bytes, content_type: str
                   ) -> tuple[int, dict[bytes, bytes], bytes]:
        """(status, kept headers, body) of one request (``method``, POST unless told);
        HttpError/TimeoutError on failure."""
        data = self.head(content_type, len(body)) + body

        async def once(conn: _Connection) -> tuple[int, dict[bytes, bytes], bytes]:
            timer = asyncio.get_running_loop().call_later(
                self.timeout_s, conn._fail, TimeoutError(f"no reply within {self.timeout_s:g} s"))
            try:
                return await conn.request(data)
            finally:
                timer.cancel()

        return await self.exchange(once)

    def close(self) -> None:
        while self._idle:
            conn = self._idle.pop()
            if conn.transport is not None:
                conn.transport.close()
        self._open = 0
