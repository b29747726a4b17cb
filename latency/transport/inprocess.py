"""In-process transport: the client thread hands the request to a server thread.

There is no socket, so ``network`` here is the thread hand-off cost in each direction (queue
put, wake-up of the receiving thread, GIL hand-over): small, but measured, never assumed zero.
"""
from __future__ import annotations

from latency.components import Request
from latency.serving import Server
from latency.timing import now_ns


class InProcessTransport:
    """Stamps ``sent`` and delivers to the server's inbox; replies come back via ``r.reply``."""

    name = "in-process"

    def __init__(self, server: Server) -> None:
        self._submit = server.submit

    def send(self, r: Request) -> None:
        r.t_sent = now_ns()
        self._submit(r)
