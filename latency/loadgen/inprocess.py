"""In-process transport: the client thread hands the request to a server thread.

There is no socket, so ``network`` here is the thread hand-off cost in each direction (queue
put, wake-up of the receiving thread, GIL hand-over): small, but measured, never assumed zero.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from latency.core.records import Request
from latency.core.timing import now_ns

if TYPE_CHECKING:
    from latency.loadgen.generator import LoadDriver


class InProcessTransport:
    """Stamps ``sent`` and delivers to the server's inbox; replies come back via ``r.reply``."""

    name = "in-process"

    def __init__(self, submit: Callable[[Request], None]) -> None:
        self._submit = submit

    def send(self, r: Request) -> None:
        r.t_sent = now_ns()
        self._submit(r)

    def run_closed(self, driver: LoadDriver, concurrency: int, count: int | None,
                   until_ns: int | None, warmup: bool) -> None:
        driver.closed(concurrency, count, until_ns, warmup)

    def close(self) -> None:
        """Nothing to release: the server is stopped by its owner."""
