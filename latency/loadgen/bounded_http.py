"""A whole ``http.client`` exchange bounded in time, not only each read.

``http.client``'s timeout bounds each socket operation: a server that dribbles a byte every
few seconds never trips it, and one ``GET`` can then hold its caller for ever — the probe of
a ``--target`` before the run, a ``/metrics`` scrape at the run's end. ``bounded`` arms a timer
that, at the deadline, shuts the connection's socket down (which wakes a thread blocked in
``recv``, as closing it does not), so the exchange ends with ``ExchangeTimeout``.
"""
from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit


def connection(url: str, timeout_s: float) -> http.client.HTTPConnection:
    """An ``http.client`` connection to ``url``'s host (TLS for ``https://``, the system's
    certificates), each socket operation within ``timeout_s`` — for ``bounded`` exchanges."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        return http.client.HTTPSConnection(parts.hostname or "", parts.port, timeout=timeout_s,
                                           context=ssl.create_default_context())
    return http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout_s)


class ExchangeTimeout(TimeoutError):
    """The whole exchange did not end within its deadline."""


@contextlib.contextmanager
def bounded(conn: http.client.HTTPConnection, deadline_s: float,
            what: str = "the exchange") -> Iterator[None]:
    """Run the ``with`` body (requests and reads on ``conn``) within ``deadline_s``; past it
    the socket is shut down and ``ExchangeTimeout`` raised (whatever the body raised then)."""
    fired = threading.Event()

    def expire() -> None:
        fired.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(deadline_s, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    except BaseException:
        if fired.is_set():
            raise ExchangeTimeout(f"{what} did not end within {deadline_s:g} s") from None
        raise
    finally:
        timer.cancel()
    if fired.is_set():
        raise ExchangeTimeout(f"{what} did not end within {deadline_s:g} s")
