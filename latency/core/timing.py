"""Clocks and precise waits.

Why this exists: ``time.sleep`` on Linux overshoots by 50–100 µs and more under load, which is
too coarse for a synthetic stage that must hold 2.000 ms ± 0.2 ms. We sleep for most of the
interval, then spin on ``perf_counter_ns`` for the last fraction. The spin does not call
``sleep(0)`` (a 75 µs syscall on these VMs); other threads still get the GIL within the switch
interval, which the run process lowers (see ``GIL_SWITCH_INTERVAL_S``).
"""
from __future__ import annotations

import time

now_ns = time.perf_counter_ns
#: how long before the deadline we stop sleeping and start spinning.
SPIN_NS = 250_000
#: the run process's ``sys.setswitchinterval``: a thread waiting for the GIL (a client woken by
#: its reply, a replica returning from torch) waits at most this long behind a spinning thread.
GIL_SWITCH_INTERVAL_S = 0.0002


def wait_until_ns(deadline_ns: int) -> None:
    """Block until ``perf_counter_ns() >= deadline_ns`` (sleep, then spin the last ~0.25 ms)."""
    remaining = deadline_ns - now_ns()
    if remaining > SPIN_NS:
        time.sleep((remaining - SPIN_NS) / 1e9)
    while now_ns() < deadline_ns:
        pass


def hold_ns(duration_ns: int) -> None:
    """Hold the calling thread for ``duration_ns`` nanoseconds, precisely."""
    if duration_ns > 0:
        wait_until_ns(now_ns() + duration_ns)
