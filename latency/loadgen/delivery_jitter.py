"""How much a small reply from the server varies in the time it takes, *while the run loads
it* — the delivery jitter the split of each request must tolerate (``analysis.server_split``).

Why during the run: a server's own report (llama.cpp's ``predicted_ms``) is stamped where it
makes a token; the client stamps where the token arrives. Between the two lie the server's
writing thread, the network and the client's loop, and under load the server's writer waits
for a core: the probe's round trips before the run (an idle server) miss that. So one thread
asks ``GET {base}/models`` every ``PERIOD_S`` on a kept-alive connection of its own for as
long as the run measures, and the spread of those round trips above their fastest is the
delivery jitter of this server on this path under this load.

Bounded: at most ``MAX_KEPT`` round trips kept, each within ``TIMEOUT_S``; a failed one is
counted and the thread goes on (it reconnects), and it stops with the run. Its cost to the
server is one small request every ``PERIOD_S``.
"""
from __future__ import annotations

import http.client
import threading
import time
from collections import deque
from typing import Any
from urllib.parse import urlsplit

from latency.loadgen.bounded_http import bounded, connection

PERIOD_S = 0.1
TIMEOUT_S = 5.0
MAX_KEPT = 36_000
#: the round trips' quantile whose distance above the fastest is the jitter
QUANTILE = 0.99


class DeliveryJitter:
    """``start()``, then ``stop()`` → the round trips' figures (``figures``)."""

    def __init__(self, base: str, headers: dict[str, str] | None = None,
                 period_s: float = PERIOD_S) -> None:
        self.base = base.rstrip("/")
        self.headers = {"Accept": "application/json", **(headers or {})}
        self.period_s = period_s
        self.times: deque[int] = deque(maxlen=MAX_KEPT)
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="delivery-jitter",
                                        daemon=True)

    def start(self) -> DeliveryJitter:
        self._thread.start()
        return self

    def _loop(self) -> None:
        path = urlsplit(self.base).path + "/models"
        conn = connection(self.base, TIMEOUT_S)
        first = True
        try:
            while not self._stop.wait(self.period_s):
                t = time.perf_counter_ns()
                try:
                    with bounded(conn, TIMEOUT_S, "a round trip"):
                        conn.request("GET", path, headers=self.headers)
                        resp = conn.getresponse()
                        resp.read(1 << 20)
                    took = time.perf_counter_ns() - t
                    if resp.status == 200 and not first:  # the first one connected
                        self.times.append(took)
                    first = False
                    if (resp.getheader("Connection") or "").lower() == "close":
                        conn.close()
                        first = True
                except (OSError, http.client.HTTPException):
                    self.failures += 1
                    conn.close()
                    first = True
        finally:
            conn.close()

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(TIMEOUT_S + 1)
        return self.figures()

    def figures(self) -> dict[str, Any]:
        """``delivery_jitter_ms``: the round trips' ``QUANTILE`` less their fastest; how
        many were timed and failed."""
        _, spread = fastest_and_spread(list(self.times), QUANTILE)
        return {"delivery_jitter_ms": spread / 1e6, "jitter_round_trips": len(self.times),
                "jitter_failures": self.failures}


def fastest_and_spread(times: list[int], quantile: float) -> tuple[int, int]:
    """(the fastest, the ``quantile`` less the fastest) of timed round trips (ns); (0, 0) for
    none — the probe's floor and spread before a run, and this jitter during it."""
    if not times:
        return 0, 0
    ordered = sorted(times)
    top = ordered[min(len(ordered) - 1, int(quantile * len(ordered)))]
    return ordered[0], top - ordered[0]
