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
import math
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar, cast

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
#: what one driver's requests are: a one-shot ``Request`` or a streamed ``GenRequest``
R = TypeVar("R")


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


class Driver(Generic[R]):
    """What both load drivers share — the one-shot ``LoadDriver`` and the streamed
    ``GenDriver`` (``gen_driver``): the inputs in turn, the requests in flight (by id) and
    their one recorder, the closed loop's next send, the open loop's sends at their intended
    times and its bounded wait for the backlog, and the account of what was still in flight
    when the run ended."""

    def __init__(self, inputs: Sequence[Any], record: Callable[[R], None],
                 cancel: threading.Event) -> None:
        self.inputs = inputs
        self.record = record
        self.cancel = cancel
        self._input_index = itertools.count()
        self._inflight: dict[int, R] = {}  # id → a request sent, not yet recorded
        self._lock = threading.RLock()
        #: what the open loop offered: requests due (sent or dropped) and the last one's
        #: intended time
        self.offered = 0
        self.last_due_ns = 0

    def next_input(self) -> Any:
        """The inputs in turn (also for a transport that runs its own clients: HTTP closed
        loop)."""
        return self.inputs[next(self._input_index) % len(self.inputs)]

    def closed_due(self, issued: Iterator[int], count: int | None,
                   until_ns: int | None) -> int | None:
        """A closed-loop client's next intended send time (now), or None when the loop is
        over: a stop, ``count`` issued (``issued`` counts them across clients), or
        ``until_ns`` passed."""
        if self.cancel.is_set() or (count is not None and next(issued) >= count):
            return None
        t_intended = now_ns()
        if until_ns is not None and t_intended >= until_ns:
            return None
        return t_intended

    # ---- requests in flight -----------------------------------------------------------
    def track(self, r: R) -> None:
        with self._lock:
            self._inflight[id(r)] = r

    def _backlog(self) -> int:
        with self._lock:
            return len(self._inflight)

    def settle(self, r: R, finish: Callable[[R], None]) -> bool:
        """``finish(r)`` (record it) unless it was given up on meanwhile (then recorded as
        unanswered): one owner at a time, so a request is recorded once. ``r`` leaves the
        requests in flight only after ``finish``, so a closed-loop client that sends its
        next one there never lets them read zero between. False when given up on."""
        with self._lock:
            if id(r) not in self._inflight:
                return False
            finish(r)
            del self._inflight[id(r)]
            return True

    def _gone(self, r: R) -> R:
        """The copy of ``r``, still in flight at the run's end, to record in its place."""
        raise NotImplementedError

    def unanswered(self) -> int:
        """Account for the requests still in flight when the run ends (their replies, if any
        come later, are not read): cancelled on a stop, else failed with "no reply". Each is
        recorded as a copy (``_gone``), so a transport or server still holding the original
        cannot change what was recorded."""
        with self._lock:
            left = list(self._inflight.values())
            self._inflight.clear()
            for r in left:
                self.record(self._gone(r))
        return len(left)

    def wait(self, done: Callable[[], bool], deadline_s: float = math.inf,
             stop_s: float | None = None) -> bool:
        """Wait until ``done()``; False when ``deadline_s`` passed first or, after a stop,
        ``stop_s`` did (default ``STOP_DRAIN_S``: requests stuck in a hung pipeline or
        server)."""
        end = time.monotonic() + deadline_s
        stopped = False
        while not done():
            if self.cancel.is_set() and not stopped:
                stop_s = STOP_DRAIN_S if stop_s is None else stop_s
                stopped, end = True, min(end, time.monotonic() + stop_s)
            if time.monotonic() > end:
                return False
            time.sleep(0.01)
        return True

    # ---- open loop ----------------------------------------------------------------------
    def _send_due(self, rate: float, arrival: str, rng: np.random.Generator,
                  count: int | None, until_ns: int | None, burstiness: float,
                  full: Callable[[], bool], send: Callable[[int], None]) -> tuple[int, int]:
        """``send(t_intended)`` at each intended time of the arrival process, unless
        ``full()`` (the backlog allowed is in flight): then the request due is *dropped by
        overload*. Counts what was offered; returns (the phase's start, requests dropped)."""
        t_start = now_ns() + 1_000_000
        dropped = 0
        self.offered, self.last_due_ns = 0, t_start
        for t_intended in due_times(rate, arrival, rng, t_start, count, until_ns, self.cancel,
                                    burstiness):
            self.offered, self.last_due_ns = self.offered + 1, t_intended
            if full():
                dropped += 1  # the server is this far behind: sending more only queues
                continue
            send(t_intended)
        return t_start, dropped

    def _serve_backlog(self, grace_s: float | None,
                       on_grace_expired: Callable[[], None] | None,
                       hopeless: bool = False) -> None:
        """Once everything is sent, serve the backlog for at most ``grace_s`` (None: no
        limit; none at all when ``hopeless``: it cannot be served within it), then call
        ``on_grace_expired`` (the engine drops what still waits in the server: it comes back
        cancelled) and wait ``DRAIN_S`` more for it; a stop cuts the whole wait to
        ``STOP_DRAIN_S``. What is still in flight then is recorded unanswered."""
        now = time.monotonic()
        grace_end = None if grace_s is None else now + (0.0 if hopeless else grace_s)
        deadline: float | None = None
        while self._backlog():
            time.sleep(0.01)
            now = time.monotonic()
            if grace_end is not None and now > grace_end:
                grace_end = None
                if on_grace_expired is not None:
                    on_grace_expired()  # waiting requests come back cancelled
                deadline = deadline or now + DRAIN_S
            if self.cancel.is_set():
                deadline = min(deadline or math.inf, now + STOP_DRAIN_S)
            if deadline is not None and now > deadline:
                break
        self.unanswered()


class LoadDriver(Driver[Request]):
    """Sends requests through a transport and hands every finished one to ``record``."""

    def __init__(self, send: Callable[[Request], None], inputs: Sequence[object],
                 record: Callable[[Request], None], cancel: threading.Event) -> None:
        super().__init__(inputs, record, cancel)
        self.send = send

    def _gone(self, r: Request) -> Request:
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
        gone.t_done = now_ns()
        return gone

    def finish(self, r: Request) -> None:
        if not r.t_done:  # a transport that reads its own reply stamps it there
            r.t_done = now_ns()
        self.record(r)

    # ---- closed loop --------------------------------------------------------------------
    def closed(self, concurrency: int, count: int | None, until_ns: int | None,
               warmup: bool) -> None:
        """``concurrency`` clients, each sending its next request when the previous returns."""
        issued = itertools.count()

        def client(ci: int) -> None:
            channel: queue.SimpleQueue[Request] = queue.SimpleQueue()
            while (t_intended := self.closed_due(issued, count, until_ns)) is not None:
                r = Request(self.next_input(), ci, warmup, channel.put, t_intended)
                self.track(r)
                self.send(r)
                channel.get()
                if not self.settle(r, self.finish):  # given up on: recorded as unanswered
                    return

        threads = [threading.Thread(target=client, args=(i,), name=f"client-{i}", daemon=True)
                   for i in range(concurrency)]
        for t in threads:
            t.start()
        if not self.wait(lambda: not any(t.is_alive() for t in threads)):
            self.unanswered()

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
        state = {"sent": 0}

        def receiver() -> None:
            while (r := replies.get()) is not _STOP:
                self.settle(cast(Request, r), self.finish)

        def send(t_intended: int) -> None:
            r = Request(self.next_input(), 0, warmup, replies.put, t_intended)
            self.track(r)
            self.send(r)
            state["sent"] += 1

        rx = threading.Thread(target=receiver, name="receiver", daemon=True)
        rx.start()
        t_start, dropped = self._send_due(
            rate, arrival, rng, count, until_ns, burstiness,
            lambda: max_backlog is not None and self._backlog() >= max_backlog, send)
        if on_issued is not None:
            on_issued()
        served_s = (now_ns() - t_start) / 1e9
        backlog = self._backlog()
        hopeless = False
        if grace_s is not None and backlog > 0 and served_s > 0:
            rate_served = (state["sent"] - backlog) / served_s  # what the server kept up with
            hopeless = rate_served <= 0 or backlog / rate_served > grace_s
        self._serve_backlog(grace_s, on_grace_expired, hopeless)
        replies.put(_STOP)
        rx.join(timeout=1)
        return dropped
