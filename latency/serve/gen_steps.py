"""The generation server's recent scheduler steps, kept in its own process and handed to the
run that started it, so an HTTP run's summary has the same scheduler figures as an in-process
one (steps, mean running and waiting, KV use).

Bounded: a ring of the last ``STEPS_KEPT`` steps (a run of more keeps the latest; the run says
so). Only durations cross the process boundary: each stamp is sent as nanoseconds *before the
reply was made*, and the run places them before the moment it got the reply, less half the
exchange (``placed``) — an error of at most half a loopback round trip, used to pick the steps
inside the run's measured window.
"""
from __future__ import annotations

import io
import threading

import numpy as np

from latency.core.gen_records import STEP_DTYPE
from latency.core.timing import now_ns

#: the most steps kept (62 bytes each, ``STEP_DTYPE``: ≈ 16 MB)
STEPS_KEPT = 262_144
_STAMPS = tuple(n for n in STEP_DTYPE.names or () if n.startswith("t_"))


class StepRing:
    """``add(row)`` from the scheduler threads (a ``GenServer``'s ``on_step``); ``encode()``
    from the app."""

    def __init__(self, capacity: int = STEPS_KEPT) -> None:
        self._rows = np.zeros(capacity, dtype=STEP_DTYPE)
        self._count = 0
        self._lock = threading.Lock()

    def add(self, row: tuple[int, ...]) -> None:
        with self._lock:
            self._rows[self._count % len(self._rows)] = row
            self._count += 1

    @property
    def count(self) -> int:
        """Steps made since the server started (kept or not)."""
        return self._count

    def encode(self) -> bytes:
        """The kept steps in order, as ``.npy`` bytes, each stamp as ns before now."""
        with self._lock:
            n, size = self._count, len(self._rows)
            if n <= size:
                rows = self._rows[:n].copy()
            else:
                i = n % size
                rows = np.concatenate([self._rows[i:], self._rows[:i]])
            now = now_ns()
        for name in _STAMPS:
            rows[name] = now - rows[name]
        buf = io.BytesIO()
        np.save(buf, rows, allow_pickle=False)
        return buf.getvalue()


def placed(data: bytes, asked_ns: int, got_ns: int) -> np.ndarray:
    """Steps from ``StepRing.encode`` on this process's clock: the reply was made at the
    midpoint of the exchange (asked at ``asked_ns``, answered at ``got_ns``)."""
    rows = np.load(io.BytesIO(data), allow_pickle=False)
    if rows.dtype != STEP_DTYPE:
        raise ValueError(f"steps of another layout: {rows.dtype}")
    mid = asked_ns + (got_ns - asked_ns) // 2
    for name in _STAMPS:
        rows[name] = mid - rows[name]
    return rows
