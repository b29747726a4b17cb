"""Timer-driven whole-page reruns take turns (ui/page_turns.py): at most TURNS at once, a
turn held past HOLD_S goes to the next page, a page's own turn is its own to re-take."""
from tests.conftest import FakeClock
from ui.page_turns import HOLD_S, TURNS, PageTurns


def test_a_few_pages_catch_up_at_once_and_a_stuck_turn_expires():
    clock = FakeClock()
    turns = PageTurns(clock=clock)
    pages = [f"s{i}" for i in range(TURNS + 3)]
    granted = [p for p in pages if turns.take(p)]
    assert granted == pages[:TURNS] and turns.holders() == TURNS
    assert turns.take(pages[0])  # a page holding a turn keeps it (its fragment looks again)
    turns.end(pages[0])
    assert turns.take(pages[TURNS]) and not turns.take(pages[TURNS + 1])
    clock.t = HOLD_S + 0.1  # the rest never ended theirs (a page closed half-way)
    assert turns.take(pages[TURNS + 1]) and turns.take(pages[TURNS + 2])
