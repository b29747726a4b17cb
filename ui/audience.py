"""How many pages watch runs now, so that a room's chart refreshes share one budget.

Every refresh of a page's live charts is a Streamlit script run that costs the dashboard's
server ~15-20 ms of a core, whoever watches (bench/bench_watchers.py). The run being watched
executes on the same machine, so thirty pages refreshing every two seconds (15 refreshes a
second) took 13 % of its throughput on two cores. So the pages of people who did not start
the run refresh at a pace that keeps the room's total at ``RENDERS_PER_S``: a few watchers
still see their charts every two seconds, thirty see them every few seconds, and the run
owner's page (the projector, in presenter mode) every second whatever the room's size. The
cost of watching stays bounded however many people join.

The watchers' refreshes are also spread out in time. Pages that rerun together (when a run
starts, every follower's page catches up) would otherwise all refresh in the same tenth of a
second, every time: twenty script threads runnable at once take the run's cores whatever
their niceness (each niced thread weighs a tenth of a run's thread; ten together weigh as much
as one), where one at a time barely shows. So each session refreshes at its own period, within
``SPREAD`` around the shared one (fixed per session, from its id; on average the shared
one): their ticks drift apart within a few refreshes.
"""
from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Callable

#: a page counts as watching for this long after its last look (its looks come at most
#: a few seconds apart while it watches)
WINDOW_S = 10.0
#: refreshes a second that the pages watching someone else's run may share (each ~15-20 ms
#: of the server: ~0.1 of a core)
RENDERS_PER_S = 8.0
#: the fastest a watcher's charts refresh (a run's figures change once a second)
FASTEST_S = 2.0
#: and the slowest, however large the room
SLOWEST_S = 10.0
#: a session's period is the shared one times 1 + SPREAD × (its own fraction in [0, 1) - ½)
SPREAD = 0.5


class Audience:
    """Sessions seen watching in the last ``window_s``; thread-safe, one per server."""

    def __init__(self, window_s: float = WINDOW_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._window_s, self._clock = window_s, clock
        self._lock = threading.Lock()
        self._seen: dict[str, float] = {}  # session -> last look; pruned on every look

    def saw(self, session: str) -> None:
        """``session``'s page looked at a run (any look: idle or refreshing)."""
        with self._lock:
            now = self._clock()
            self._seen[session] = now
            for who, when in list(self._seen.items()):
                if now - when > self._window_s:
                    del self._seen[who]

    def size(self) -> int:
        """Pages that watched within the window."""
        with self._lock:
            now = self._clock()
            return sum(1 for when in self._seen.values() if now - when <= self._window_s)

    def refresh_s(self, session: str, renders_per_s: float = RENDERS_PER_S) -> float:
        """How often ``session``'s charts refresh so that all watchers together stay within
        ``renders_per_s``: from ``FASTEST_S`` for a small room up to ``SLOWEST_S``, each
        session at its own period around that (within ±``SPREAD``/2)."""
        shared = min(SLOWEST_S, max(FASTEST_S, self.size() / renders_per_s))
        return round(shared * (1.0 + SPREAD * (phase(session) - 0.5)), 2)


def phase(session: str) -> float:
    """A fraction in [0, 1) fixed for a session (its refreshes' own offset)."""
    return (zlib.crc32(session.encode()) % 1000) / 1000.0


__all__ = ["FASTEST_S", "RENDERS_PER_S", "SLOWEST_S", "SPREAD", "WINDOW_S", "Audience",
           "phase"]
