"""Load generators: closed loop (N clients) and open loop (arrivals at a rate, seeded).

Open loop is coordinated-omission free, as in wrk2 and MLPerf LoadGen: every request has an
*intended* send time fixed by the arrival process before the run; its latency starts there,
whether or not the generator managed to send it on time. ``schedule_lag`` (actual − intended
send) is recorded per request, so a generator that falls behind is visible, not hidden.

Every request sent is accounted for: answered, failed, or — when the run ends with it still in
flight — recorded as failed with "no reply" (or, on a stop, counted as cancelled). A request
that silently vanished would bias the result exactly as coordinated omission does: the slowest
requests, the ones never answered, would be missing from the distribution.
"""
from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from latency.core.records import Request
from latency.core.timing import now_ns

#: open loop: a wait to the next send longer than this is spent waiting on the stop event
#: (so a stop ends it at once) and only its last stretch in ``time.sleep``.
LONG_WAIT_NS = 20_000_000
#: after the open loop's grace, how long requests may take to come back before we stop waiting.
DRAIN_S = 10.0
#: after a stop (Ctrl-C, SIGTERM), how long in-flight requests may take to come back: short,
#: so a run with a hung stage still ends — and saves what it measured — within the 10 s a
#: container stop allows before SIGKILL.
STOP_DRAIN_S = 4.0
_STOP = object()


def arrival_offsets_ns(rate: float, arrival: str, rng: np.random.Generator,
                       chunk: int = 4096, burstiness: float = 1.0) -> Iterator[int]:
    """Endless intended send offsets (ns from the phase start) of an arrival process: Poisson,
    constant, or gamma gaps of shape ``burstiness`` and the same mean (1: Poisson)."""
    gap_ns = 1e9 / rate
    base = 0.0
    count = 0
    while True:
        if arrival in ("poisson", "gamma"):
            gaps = (rng.exponential(gap_ns, size=chunk) if arrival == "poisson" else
                    rng.gamma(burstiness, gap_ns / burstiness, size=chunk))
            offs = base + np.cumsum(gaps)
            base = float(offs[-1])
        else:  # constant: exactly one request every 1/rate s
            offs = (np.arange(count, count + chunk) + 1) * gap_ns
            count += chunk
        yield from offs.astype(np.int64).tolist()


def due_times(rate: float, arrival: str, rng: np.random.Generator, t_start: int,
              count: int | None, until_ns: int | None, cancel: threading.Event,
              burstiness: float = 1.0) -> Iterator[int]:
    """The open loop's clock: each request's intended send time (ns), yielded once it is due —
    at most ``count`` of them, none at or after ``until_ns``, none after a stop. A long gap is
    spent waiting on ``cancel`` (so a stop ends it at once), the last stretch in
    ``time.sleep``, the finer timer."""
    for i, offset in enumerate(arrival_offsets_ns(rate, arrival, rng, burstiness=burstiness)):
        if cancel.is_set() or (count is not None and i >= count):
            return
        t_intended = t_start + offset
        if until_ns is not None and t_intended >= until_ns:
            return
        wait = t_intended - now_ns()
        if wait > LONG_WAIT_NS:
            if cancel.wait((wait - LONG_WAIT_NS) / 1e9):
                return
            wait = t_intended - now_ns()
        if wait > 0:
            time.sleep(wait / 1e9)
        yield t_intended


class LoadDriver:
    """Sends requests through a transport and hands every finished one to ``record``."""

    def __init__(self, send: Callable[[Request], None], inputs: Sequence[object],
                 record: Callable[[Request], None], cancel: threading.Event) -> None:
        self.send = send
        self.inputs = inputs
        self.record = record
        self.cancel = cancel
        self._input_index = itertools.count()

    def _unanswered(self, inflight: dict[int, Request]) -> int:
        """Account for the requests still in flight when the run ends (their replies, if any
        come later, are not read): cancelled on a stop, else failed with "no reply". Each is
        recorded as a copy, so a transport still holding the original cannot change it."""
        now = now_ns()
        left = list(inflight.values())
        inflight.clear()
        for r in left:
            gone = Request(r.raw, r.client, r.warmup, None, r.t_intended)
            gone.t_sent = r.t_sent or r.t_intended
            gone.decomposed = False
            if self.cancel.is_set():
                gone.cancelled = True
            else:
                gone.error = "no reply: still unanswered when the run ended"
            for s in ("received", "pre_start", "pre_end", "fwd_start", "fwd_end",
                      "post_start", "post_end"):
                setattr(gone, f"t_{s}", gone.t_sent)
            gone.t_done = now
            self.record(gone)
        return len(left)

    def _next_input(self) -> object:
        return self.inputs[next(self._input_index) % len(self.inputs)]

    #: the inputs in turn, for a transport that runs its own clients (HTTP closed loop).
    next_input = _next_input

    # ---- closed loop --------------------------------------------------------------------
    def closed(self, concurrency: int, count: int | None, until_ns: int | None,
               warmup: bool) -> None:
        """``concurrency`` clients, each sending its next request when the previous returns."""
        issued = itertools.count()
        inflight: dict[int, Request] = {}  # client → its request awaiting a reply
        lock = threading.Lock()

        def client(ci: int) -> None:
            channel: queue.SimpleQueue[Request] = queue.SimpleQueue()
            reply = channel.put
            while not self.cancel.is_set():
                if count is not None and next(issued) >= count:
                    return
                t_intended = now_ns()
                if until_ns is not None and t_intended >= until_ns:
                    return
                r = Request(self._next_input(), ci, warmup, reply, t_intended)
                inflight[ci] = r
                self.send(r)
                channel.get()
                with lock:  # not given up on meanwhile: recorded here, once
                    if inflight.pop(ci, None) is None:
                        return
                    if not r.t_done:  # a transport that reads its own reply stamps it there
                        r.t_done = now_ns()
                    self.record(r)

        threads = [threading.Thread(target=client, args=(i,), name=f"client-{i}", daemon=True)
                   for i in range(concurrency)]
        for t in threads:
            t.start()
        if not self._join(threads):
            with lock:
                self._unanswered(inflight)

    def _join(self, threads: list[threading.Thread]) -> bool:
        """Wait for the clients; False if a stop's drain ran out with some still waiting."""
        drain_deadline: float | None = None
        for t in threads:
            while t.is_alive():
                t.join(timeout=0.1)
                if self.cancel.is_set():
                    drain_deadline = drain_deadline or time.monotonic() + STOP_DRAIN_S
                    if time.monotonic() > drain_deadline:
                        return False  # requests stuck in a hung pipeline
        return True

    # ---- open loop ----------------------------------------------------------------------
    def open(self, rate: float, arrival: str, rng: np.random.Generator, count: int | None,
             until_ns: int | None, warmup: bool,
             on_issued: Callable[[], None] | None = None, max_backlog: int | None = None,
             grace_s: float | None = None,
             on_grace_expired: Callable[[], None] | None = None,
             burstiness: float = 1.0) -> int:
        """Send at intended times from the arrival process, without waiting for replies.
        ``on_issued`` is called once everything is sent (the backlog may still be served).

        Bounded, so an overloaded server cannot make a run grow or last without end: while
        ``max_backlog`` requests are in flight, a request due is not sent but *dropped by
        overload* (counted, returned); once everything is sent, the backlog is served for at
        most ``grace_s``, then ``on_grace_expired`` is called (the engine drops what still
        waits in the server). Returns the number dropped here."""
        replies: queue.SimpleQueue[Request | object] = queue.SimpleQueue()
        state = {"sent": 0, "received": 0, "done_sending": False}
        all_back = threading.Event()
        inflight: dict[int, Request] = {}  # id → a request sent, not yet answered
        lock = threading.Lock()

        def receiver() -> None:
            while True:
                r = replies.get()
                if r is _STOP:
                    return
                with lock:
                    if inflight.pop(id(r), None) is None:  # given up on already
                        continue
                    if not r.t_done:  # a transport that reads its own reply stamps it there
                        r.t_done = now_ns()
                    self.record(r)
                state["received"] += 1
                if state["done_sending"] and state["received"] >= state["sent"]:
                    all_back.set()

        rx = threading.Thread(target=receiver, name="receiver", daemon=True)
        rx.start()
        reply = replies.put
        t_start = now_ns() + 1_000_000
        sent = dropped = 0
        #: what was offered: requests due (sent or dropped) and the last one's intended time
        self.offered, self.last_due_ns = 0, t_start
        for t_intended in due_times(rate, arrival, rng, t_start, count, until_ns, self.cancel,
                                    burstiness):
            self.offered, self.last_due_ns = self.offered + 1, t_intended
            if max_backlog is not None and sent - state["received"] >= max_backlog:
                dropped += 1  # the server is this far behind: sending more only queues
                continue
            r = Request(self._next_input(), 0, warmup, reply, t_intended)
            inflight[id(r)] = r
            self.send(r)
            sent += 1
            state["sent"] = sent
        state["done_sending"] = True
        if on_issued is not None:
            on_issued()
        if state["received"] >= sent:
            all_back.set()
        deadline = None
        grace_end = None if grace_s is None else time.monotonic() + grace_s
        served_s = (now_ns() - t_start) / 1e9
        backlog = sent - state["received"]
        if grace_end is not None and backlog > 0 and served_s > 0:
            rate_served = state["received"] / served_s  # what the server has kept up with
            if rate_served <= 0 or backlog / rate_served > grace_s:
                grace_end = time.monotonic()  # it cannot be served within the grace: now
        while not all_back.wait(timeout=0.1):
            if grace_end is not None and time.monotonic() > grace_end:
                grace_end = None
                if on_grace_expired is not None:
                    on_grace_expired()  # waiting requests come back cancelled
                deadline = deadline or time.monotonic() + DRAIN_S
            if self.cancel.is_set():
                deadline = min(deadline or float("inf"), time.monotonic() + STOP_DRAIN_S)
            if deadline is not None and time.monotonic() > deadline:
                break
        with lock:
            self._unanswered(inflight)
        replies.put(_STOP)
        rx.join(timeout=1)
        return dropped
