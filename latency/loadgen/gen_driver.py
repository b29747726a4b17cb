"""The load of a generation run: streamed requests, closed loop or open loop, every token
stamped when the client has it.

As for one-shot requests (``latency.loadgen.generator``), the open loop is coordinated-omission
free: each request's intended send time is fixed by the arrival process before the run, and
its TTFT and E2E start there. Each token's ``delivered`` stamp is the client's: the
in-process client is one receiver thread that reads every stream in turn, as an event loop
reads many sockets, so a token waits for the client when the client is busy, and that wait is
measured (``delivery``), not hidden.

Every request sent is accounted for: finished, failed, or — still streaming when the run ends
— recorded as failed ("no reply"), or cancelled on a stop.

Chat sessions (``turns`` > 1, closed loop): each client holds a session of that many turns;
turn k sends the conversation so far — the previous turn's prompt, the reply the server gave
it (its text as received) — then the workload's next prompt as the new message. A session
that ends (its last turn sent) starts a new one; a failed turn's reply is empty, and the
session goes on. So a client's k-th request of a phase is turn ``k mod turns + 1``
(``latency.analysis.gen_turns``).
"""
from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np

from latency.core.errors import error_text
from latency.core.gen_records import GenRequest
from latency.core.timing import now_ns
from latency.loadgen.generator import Driver

_STOP = object()

#: one work item: the prompt (text, or token ids) and how many tokens to generate
Work = tuple[object, int]


def _copy_of(r: GenRequest, error: str, cancelled: bool, keep_tokens: bool) -> GenRequest:
    """A copy of ``r`` to record in its place, failed with ``error`` (or cancelled): the
    server may still hold the original, and the original may hold what cannot be recorded.
    ``keep_tokens``: keep the tokens it had delivered (as plain ints), else none."""
    gone = GenRequest(None, int(r.max_tokens), int(r.client), bool(r.warmup), int(r.t_intended))
    gone.t_sent = int(r.t_sent or r.t_intended)
    if keep_tokens:
        gone.ids = range(len(r.ids))  # type: ignore[assignment]  # its length is read
        n = len(r.delivered)
        for name in ("call_start", "produced", "detok", "kinds", "batches", "delivered"):
            setattr(gone, name, list(getattr(r, name))[:n])
        for s in ("received", "tok_start", "tok_end", "admitted"):
            setattr(gone, f"t_{s}", getattr(r, f"t_{s}"))
        gone.prefill_ns, gone.preemptions, gone.chunks = r.prefill_ns, r.preemptions, \
            r.chunks
    gone.decomposed = False
    if cancelled:
        gone.cancelled = True
    else:
        gone.error = error
    gone.t_done = now_ns()
    gone.close_gaps()
    return gone


class GenDriver(Driver[GenRequest]):
    """Sends ``GenRequest``s to ``submit`` and hands each finished one to ``record``.

    ``submit(req)`` delivers a request to the server, which calls ``req.on_token(req, last)``
    for each token and ``req.on_done(req)`` when it ends otherwise (failed, cancelled); both
    may come from any thread: they are queued to the receiver, which stamps and records. A
    transport that stamps delivery itself (the HTTP client, ``sse_client``: each token as its
    event is parsed) calls only ``on_done``, once, with every stamp filled in."""

    def __init__(self, submit: Callable[[GenRequest], None], work: Sequence[Work],
                 record: Callable[[GenRequest], None], cancel: threading.Event,
                 turns: int = 1) -> None:
        super().__init__(work, record, cancel)
        self.submit = submit
        self.turns = turns
        #: each client's turns sent in its session (chat sessions only)
        self._turn: dict[int, int] = {}
        self._events: queue.SimpleQueue[object] = queue.SimpleQueue()

    # ---- sending and receiving ---------------------------------------------------------------
    def _send(self, client: int, warmup: bool, t_intended: int,
              previous: GenRequest | None = None) -> None:
        """Send the next work item from ``client`` (``previous``: its request that just
        ended, whose conversation a chat session's next turn carries on)."""
        prompt, max_tokens = cast(Work, self.next_input())
        if self.turns > 1:
            prompt = self._next_turn(client, prompt, previous)
        req = GenRequest(prompt, max_tokens, client, warmup, t_intended)
        put = self._events.put
        req.on_token = lambda r, last: put((r, last))
        req.on_done = lambda r: put((r, None))
        self.track(req)
        req.t_sent = now_ns()
        self.submit(req)

    def _next_turn(self, client: int, message: object, previous: GenRequest | None) -> str:
        """The prompt of ``client``'s next turn: a new session's first message, or the
        conversation so far and ``message`` after it."""
        turn = self._turn.get(client, 0)
        if previous is None or turn >= self.turns:
            turn, history = 0, ""
        else:
            history = f"{previous.prompt}{''.join(previous.text)}\n\n"
        self._turn[client] = turn + 1
        return f"{history}{message}"

    def _receive(self, on_finished: Callable[[GenRequest], None]) -> None:
        """The client: stamps each token as it reads it; a request that ends is recorded
        (then ``on_finished``: a closed-loop client sends its next one)."""
        def finish(req: GenRequest) -> None:
            self._record_safely(req)
            on_finished(req)

        while True:
            event = self._events.get()
            if event is _STOP:
                return
            req, last = cast("tuple[GenRequest, bool | None]", event)
            if last is not None:
                req.delivered.append(now_ns())
                if not last:
                    continue
            self.settle(req, finish)

    def _record_safely(self, req: GenRequest) -> None:
        """Record ``req``; what a server or pipeline handed back cannot kill this thread (the
        one that records every request): a reply that cannot be recorded — text that is
        not text, a figure beyond a column's type — fails its own request, with why."""
        try:
            req.close_gaps()
            self.record(req)
        except Exception as exc:  # noqa: BLE001 - one bad reply fails alone
            self.record(_copy_of(req, f"the reply could not be recorded: {error_text(exc)}",
                                 cancelled=False, keep_tokens=False))

    def _gone(self, r: GenRequest) -> GenRequest:
        return _copy_of(r, "no reply: still streaming when the run ended",
                        cancelled=self.cancel.is_set(), keep_tokens=True)

    # ---- closed loop ---------------------------------------------------------------------------
    def closed(self, concurrency: int, count: int | None, until_ns: int | None,
               warmup: bool, drain_s: float) -> None:
        """``concurrency`` clients, each sending its next request when its stream ends."""
        issued = itertools.count()

        def again(req: GenRequest) -> None:
            if (t := self.closed_due(issued, count, until_ns)) is not None:
                self._send(req.client, warmup, t, req)

        rx = threading.Thread(target=self._receive, args=(again,), name="gen-client",
                              daemon=True)
        rx.start()
        for ci in range(concurrency):
            if count is not None and next(issued) >= count:
                break
            self._send(ci, warmup, now_ns())
        # the clients keep going from the receiver thread until every request issued has
        # ended, the time is up or the run is stopped
        while not self.cancel.is_set() and self._backlog():
            if until_ns is not None and now_ns() >= until_ns:
                break
            time.sleep(0.01)
        if not self.wait(lambda: not self._backlog(), drain_s):
            self.unanswered()
        self._events.put(_STOP)
        rx.join(timeout=2)

    # ---- open loop -----------------------------------------------------------------------------
    def open(self, rate: float, arrival: str, rng: np.random.Generator, count: int | None,
             until_ns: int | None, warmup: bool, max_backlog: int, grace_s: float,
             on_grace_expired: Callable[[], None] | None = None,
             burstiness: float = 1.0) -> int:
        """Send at intended times; a request due while ``max_backlog`` stream is dropped by
        overload (counted, returned). After the last send, the backlog is served for at most
        ``grace_s``; then ``on_grace_expired`` (the engine drops what still waits)."""
        rx = threading.Thread(target=self._receive, args=(lambda r: None,),
                              name="gen-client", daemon=True)
        rx.start()
        _, dropped = self._send_due(rate, arrival, rng, count, until_ns, burstiness,
                                    lambda: self._backlog() >= max_backlog,
                                    lambda t_intended: self._send(0, warmup, t_intended))
        self._serve_backlog(grace_s, on_grace_expired)
        self._events.put(_STOP)
        rx.join(timeout=2)
        return dropped
