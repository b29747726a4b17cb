"""Whole-page reruns that a timer asks for, a few at a time.

A fragment that looks once a second (a new run appeared, a run finished, the presenter showed
something new) reruns its whole page when it sees a change — and in a room every open page
sees the same change in the same second. Thirty whole-page Streamlit runs at once contend for
Streamlit's config lock (``get_option``, taken on every element sent) and the GIL until almost
none finishes: measured with ``bench/bench_watchers.py --presenter`` and 30 followers, the
dashboard server sat at 100 % of a core for minutes with no page done, and the run on the
projector never showed as finished. So such reruns take a turn: at most ``TURNS`` pages
catch up at once, the others look again at their fragment's next tick (a second later). A
person's own click never waits for a turn.

Turns go in the order pages first asked: a page refused is put in line, and a free turn goes
only to one of the first few in line (``WINDOW`` per free turn, so a turn does not sit idle
until the very first page looks again). Without the line a page could lose the race at each
of its looks: with thirty followers and a busy machine, one page still had not caught up
with the projector 20 s after its run started (bench/bench_watchers.py). A page that stops
asking (closed) leaves the line after ``WAIT_S``.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

#: whole-page reruns a timer may run at once (this project's machines have two cores)
TURNS = 2
#: a turn not ended by then goes to the next page anyway (a page that stopped half-way)
HOLD_S = 5.0
#: a page in line that has not asked again for this long has gone (pages ask every second)
WAIT_S = 3.0
#: how far down the line a free turn may go (per free turn)
WINDOW = 2


class PageTurns:
    """Who is catching up now; thread-safe (one instance per dashboard server)."""

    def __init__(self, turns: int = TURNS, hold_s: float = HOLD_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._turns, self._hold_s, self._clock = turns, hold_s, clock
        self._lock = threading.Lock()
        self._holders: dict[str, float] = {}
        self._line: dict[str, float] = {}  # waiting pages in the order they first asked

    def take(self, session: str) -> bool:
        """Whether ``session`` may rerun its whole page now (it keeps its turn until
        ``end``, or ``hold_s``); if not, it is in line for the next free turn."""
        with self._lock:
            now = self._clock()
            for who, since in list(self._holders.items()):
                if now - since > self._hold_s:
                    del self._holders[who]
            for who, asked in list(self._line.items()):
                if now - asked > WAIT_S:
                    del self._line[who]
            if session in self._holders:
                return True
            self._line[session] = now  # a page already in line keeps its place
            free = self._turns - len(self._holders)
            if free > 0 and session in list(self._line)[:free * WINDOW]:
                del self._line[session]
                self._holders[session] = now
                return True
            return False

    def end(self, session: str) -> None:
        """``session``'s whole-page run finished: the next page's turn."""
        with self._lock:
            self._holders.pop(session, None)

    def holders(self) -> int:
        with self._lock:
            return len(self._holders)

    def waiting(self) -> int:
        """Pages in line for a turn."""
        with self._lock:
            return len(self._line)


__all__ = ["HOLD_S", "TURNS", "WAIT_S", "WINDOW", "PageTurns"]
