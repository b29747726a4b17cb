"""The room's refresh budget: many watchers refresh less often, few as often as useful, and
their refreshes do not come all at once."""
import statistics

import pytest

from tests.conftest import FakeClock
from ui.audience import FASTEST_S, SLOWEST_S, SPREAD, WINDOW_S, Audience, phase

SESSIONS = [f"session-{i}" for i in range(30)]


def periods(a: Audience, rate: float) -> list[float]:
    return [a.refresh_s(s, renders_per_s=rate) for s in SESSIONS]


def test_a_small_room_refreshes_at_the_fastest_pace():
    a = Audience(clock=FakeClock())
    for s in SESSIONS[:3]:
        a.saw(s)
    assert a.size() == 3
    for s in SESSIONS[:3]:
        assert abs(a.refresh_s(s, renders_per_s=8.0) / FASTEST_S - 1) <= SPREAD / 2


def test_thirty_watchers_share_the_budget():
    a = Audience(clock=FakeClock())
    for s in SESSIONS:
        a.saw(s)
        a.saw(s)  # a session is counted once however often it looks
    assert a.size() == 30
    p = periods(a, 8.0)
    # together about 8 refreshes a second: 30 pages at ~3.75 s each
    assert sum(1 / x for x in p) == pytest.approx(8.0, rel=0.1)
    assert statistics.mean(p) == pytest.approx(30 / 8.0, rel=0.05)
    assert max(periods(a, 1.0)) <= SLOWEST_S * (1 + SPREAD / 2)  # bounded however large


def test_each_session_has_its_own_phase():
    a = Audience(clock=FakeClock())
    for s in SESSIONS:
        a.saw(s)
    p = periods(a, 8.0)
    assert p == periods(a, 8.0)  # stable for a session
    assert len(set(p)) >= 20  # not in step: most pages have periods of their own
    fractions = sorted(phase(s) for s in SESSIONS)
    assert fractions[0] < 0.2 and fractions[-1] > 0.8  # spread over the whole range


def test_pages_that_stopped_looking_leave_the_count():
    clock = FakeClock()
    a = Audience(clock=clock)
    for s in SESSIONS[:20]:
        a.saw(s)
    clock.t = WINDOW_S / 2
    a.saw("late")
    assert a.size() == 21
    clock.t = WINDOW_S + 1  # the first twenty went away; "late" still counts
    assert a.size() == 1
    a.saw("late")
    assert len(a._seen) == 1  # pruned: the record stays as small as the room
