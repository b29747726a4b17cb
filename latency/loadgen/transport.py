"""The one protocol every transport keeps, so the engine never asks which one it has.

A transport carries a request to the server and its reply back, stamping ``sent`` (and, when
it reads the reply itself, ``done``). Open loop calls ``send`` at each intended time from the
load generator's sender thread. Closed loop hands the whole loop to ``run_closed``: the
in-process transport runs the generator's client threads; the HTTP transport runs its clients
as coroutines on its own event loop (no thread per client).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from latency.core.records import Request

if TYPE_CHECKING:
    from latency.loadgen.generator import LoadDriver


class Transport(Protocol):
    name: str

    def send(self, r: Request) -> None:
        """Deliver one request; its reply arrives through ``r.reply(r)``."""

    def run_closed(self, driver: LoadDriver, concurrency: int, count: int | None,
                   until_ns: int | None, warmup: bool) -> None:
        """``concurrency`` clients, each sending its next request when the previous returns,
        until ``count`` are issued, ``until_ns`` passes or the driver is cancelled."""

    def close(self) -> None:
        """Release connections and threads."""
