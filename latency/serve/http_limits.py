"""The HTTP layer's own limits, below the app: how long and how large a request head may be, and
how many connections the server holds — so slow or oversized clients cannot take it down.

Why this module and not uvicorn's options: uvicorn has none for the head's time (its
``timeout_keep_alive`` covers only the idle time *between* requests and is reset by every byte
received, so a client that sends one header line every few seconds keeps its connection — and
its file descriptor — for ever), none for the head's size with httptools, the parser we run
(``h11_max_incomplete_event_size`` is h11's only; httptools buffers a header line of any
length: one of 225 MB was accepted), and its ``limit_concurrency`` acts only once a head is
complete: slow connections, whose heads never complete, pass it and hold their descriptors
until ``accept`` fails with EMFILE, at which point libuv accepts and drops every waiting
connection (good requests see "Connection reset by peer"), and its 503s would then go to the
good requests instead. So ``LimitedProtocol`` — uvicorn's own httptools protocol with a few
hooks, the smallest change that carries all three limits:

- **head time**: a timer per request head, armed when a connection is made (or at the first
  byte of a later request on a kept-alive connection) and cancelled when the head is
  complete; when it fires, ``408`` and close (``HEAD_TIMEOUT_S``).
- **head size**: while a head is incomplete, bytes are fed to the parser in slices that stop at
  ``MAX_HEAD_BYTES``; a head still incomplete there gets ``431`` and the connection is closed,
  so the parser never buffers more (the body after a complete head is fed as before).
- **connections**: at most ``connection_cap()`` connections, far enough below the process's
  file descriptor limit that ``accept`` does not run out of descriptors; a connection beyond
  it makes room by closing the connection that has waited longest for its head (or idled
  longest between requests) — under slow loris, a slow connection; never one whose request is
  being served — and is refused itself with ``503`` only when every connection is serving a
  request. Oldest first, a good client's connection (its head comes in one packet) is done
  waiting long before its turn.

Each refusal is counted in ``/metrics`` (``http_app.REFUSALS``), and so is uvicorn's own
``400 Invalid HTTP request received``. WebSocket upgrades are not taken (the app has no
WebSocket route, and an upgraded connection would leave this protocol and its limits).
"""
from __future__ import annotations

import asyncio
import math
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from latency.serve.http_app import ServerStats
from latency.serve.oip import JSON_TYPE, error_body

#: the longest a client may take to send a request's line and headers, counted from the
#: connection (or, on a kept-alive connection, from the request's first byte); then ``408``
#: and close. Legitimate clients send a head in one packet; slow-loris clients never finish.
HEAD_TIMEOUT_S = 10.0
#: the environment variable that overrides ``HEAD_TIMEOUT_S`` (seconds; the tests shorten it)
HEAD_TIMEOUT_ENV = "LATENCY_LAB_SERVE_HEAD_TIMEOUT_S"
#: the largest request head (request line and all headers) read; a larger one gets ``431`` and
#: the connection is closed. Our requests' heads are a few hundred bytes; browsers and proxies
#: cap theirs at 8-64 KiB.
MAX_HEAD_BYTES = 64 * 1024
#: the most connections held at once, whatever the file descriptor limit: twice the load
#: generator's ``MAX_CONCURRENCY`` (1024); memory for heads is bounded by this × ``MAX_HEAD_BYTES``.
MAX_CONNECTIONS = 2048
#: of the file descriptors free when the server starts, the share its connections may take.
#: The rest stays free for the server's own files and pipes and for a burst of connections the
#: event loop accepts before the cap can look at them (libuv accepts all that wait, then runs
#: their ``connection_made``), so ``accept`` does not fail with EMFILE. (A burst larger than
#: this headroom still can: libuv then drops the rest of that burst, not the connections held.)
CONNECTION_FD_SHARE = 0.75


@dataclass(frozen=True)
class Limits:
    """The limits one server runs with (the defaults are the constants above)."""

    head_timeout_s: float = HEAD_TIMEOUT_S
    max_head_bytes: int = MAX_HEAD_BYTES
    max_connections: int = MAX_CONNECTIONS

    @classmethod
    def from_env(cls) -> Limits:
        """The defaults, with ``HEAD_TIMEOUT_ENV`` if set (a positive number of seconds)."""
        text = os.environ.get(HEAD_TIMEOUT_ENV, "").strip()
        if not text:
            return cls()
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{HEAD_TIMEOUT_ENV} must be a positive number of seconds "
                             f"(got {text!r})")
        return cls(head_timeout_s=value)


def _open_fds() -> int:
    """How many file descriptors this process has open (0 when it cannot tell)."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(folder))
        except OSError:
            continue
    return 0


def connection_cap(max_connections: int = MAX_CONNECTIONS) -> int:
    """The most connections to hold: ``max_connections``, or fewer when the process's file
    descriptor limit (RLIMIT_NOFILE) would not leave room for them and its own files.

    The soft limit is first raised towards the hard limit as far as ``max_connections`` needs
    (as Go's runtime and nginx do): a default Linux session allows 1024 descriptors but may
    take many more. Where it cannot be raised (``ulimit -n 1024`` sets both), the cap is
    ``CONNECTION_FD_SHARE`` of the descriptors still free."""
    try:
        import resource
    except ImportError:  # Windows: no descriptor limit of this kind
        return max_connections
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    infinity = resource.RLIM_INFINITY
    used = _open_fds()
    wanted = used + math.ceil(max_connections / CONNECTION_FD_SHARE) + 1
    if soft != infinity and soft < wanted:
        raised = wanted if hard == infinity else min(wanted, hard)
        if raised > soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
                soft = raised
            except (ValueError, OSError):  # e.g. macOS above OPEN_MAX: keep the limit
                pass
    if soft == infinity:
        return max_connections
    return max(1, min(max_connections, int((soft - used) * CONNECTION_FD_SHARE)))


@dataclass
class Guard:
    """What one server's connections share: its limits, its counters, its connection cap and
    the connections waiting for a head, longest-waiting first (a dict keeps insertion order)."""

    limits: Limits
    stats: ServerStats
    cap: int
    waiting: dict[LimitedProtocol, None] = field(default_factory=dict)


class LimitedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the head timer, the head size limit and the connection
    cap (module docstring). ``protocol_class`` binds it to one server's ``Guard``."""

    guard: ClassVar[Guard]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._in_head = True  # the next bytes fed are (part of) a request head
        self._head_bytes = 0  # bytes of the current head fed so far
        self._head_started = False  # a byte of the current head has come

    # ---- the connection cap ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.guard.cap and not self._evict_one():
            self._refuse(503, "connection_limit",
                         f"the server holds its limit of {self.guard.cap} connections")
            return
        self._wait()
        self._arm()

    def _evict_one(self) -> bool:
        """Close the connection that has waited longest for a head; False if none waits."""
        waiting = self.guard.waiting
        while waiting:
            proto = next(iter(waiting))
            if proto.transport.is_closing():  # closing already: its place is coming free
                del waiting[proto]
                continue
            proto._refuse(503, "evicted", "closed to make room for another connection: its "
                          "request head was not complete", send=proto._head_started)
            return True
        return False

    def _wait(self) -> None:
        self.guard.waiting.pop(self, None)
        self.guard.waiting[self] = None

    # ---- the head timer -------------------------------------------------------------------
    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.guard.limits.head_timeout_s,
                                                    self._head_timeout)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        self.guard.waiting.pop(self, None)

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # a pipelined head behind a response still being sent: end after that response
            self.guard.stats.refuse("head_timeout", None)
            self.guard.waiting.pop(self, None)
            self.cycle.keep_alive = False
            self.flow.pause_reading()
            return
        self._refuse(408, "head_timeout", f"the request head was not complete within "
                     f"{self.guard.limits.head_timeout_s:g} s", send=self._head_started)

    # ---- the head size, and the parser's callbacks ----------------------------------------
    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():
            return
        limit = self.guard.limits.max_head_bytes
        while data and self._in_head:
            room = limit - self._head_bytes
            if room <= 0:
                self._refuse(431, "head_too_large", f"the request head is over the "
                             f"{limit}-byte limit")
                return
            piece, data = data[:room], data[room:]
            self._head_bytes += len(piece)
            super().data_received(piece)
            if self.transport.is_closing():
                return
        if data:  # the rest of a body (bytes after a complete head are not counted)
            super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_started = True
        self._arm()  # on a kept-alive connection, the next head's time starts here

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._disarm()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head, self._head_bytes, self._head_started = True, 0, False

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and not self.pipeline and self._head_timer is None:
            self._wait()  # idle between requests: may make room for a new connection

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to what httptools cannot parse, counted."""
        self.guard.stats.refuse("invalid_request", 400)
        self._disarm()
        super().send_400_response(msg)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    # ---- refusing -------------------------------------------------------------------------
    def _refuse(self, status: int, reason: str, message: str, send: bool = True) -> None:
        """Count, answer ``status`` with ``message`` (unless ``send`` is false: nothing of a
        request has come to answer) and close."""
        self.guard.stats.refuse(reason, status if send else None)
        self._disarm()
        if self.transport.is_closing():
            return
        if send:
            body = error_body(message)
            head = [STATUS_LINE[status]]
            for name, value in self.server_state.default_headers:
                head += [name, b": ", value, b"\r\n"]
            head += [b"content-type: ", JSON_TYPE.encode(), b"\r\n",
                     b"content-length: ", str(len(body)).encode(), b"\r\n",
                     b"connection: close\r\n\r\n", body]
            self.transport.write(b"".join(head))
        self.transport.close()


def protocol_class(guard: Guard) -> type[LimitedProtocol]:
    """``LimitedProtocol`` bound to one server's ``guard`` (uvicorn makes one per connection)."""

    class Bound(LimitedProtocol):
        pass

    Bound.guard = guard
    return Bound
