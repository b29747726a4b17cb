"""Timer-driven whole-page reruns take turns (ui/page_turns.py): at most TURNS at once, a
turn held past HOLD_S goes to the next page, a page's own turn is its own to re-take."""
from tests.conftest import FakeClock
from ui.page_turns import HOLD_S, TURNS, WAIT_S, WINDOW, PageTurns


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


def test_turns_go_in_the_order_pages_asked():
    """Thirty pages look once a second, each at its own moment of the second; a catch-up
    holds its turn 0.4 s. Turns go in the order the pages first asked (within the window),
    not to whichever page happens to look just after a turn came free — with that race, the
    pages that look just after the catch-ups end win every time and the others wait."""
    clock = FakeClock()
    turns = PageTurns(clock=clock)
    pages = [f"s{i}" for i in range(30)]
    offset = {p: (i * 7) % 10 for i, p in enumerate(pages)}  # which tenth of a second it looks
    asked: list[str] = []  # order of first asks
    served: list[str] = []
    ends: dict[str, int] = {}
    for tick in range(400):  # 40 s in tenths
        clock.t = tick / 10
        for p, end in list(ends.items()):
            if tick >= end:
                turns.end(p)
                del ends[p]
        for p in pages:
            if p in served or tick % 10 != offset[p]:
                continue
            if p not in asked:
                asked.append(p)
            if turns.take(p):
                served.append(p)
                ends[p] = tick + 4  # its catch-up takes 0.4 s
    assert sorted(served) == sorted(pages)
    for p in pages:  # nobody overtaken by more than the window's worth of later askers
        later_but_first = [q for q in served[:served.index(p)]
                           if asked.index(q) > asked.index(p)]
        assert len(later_but_first) <= WINDOW * TURNS, (p, later_but_first)


def test_a_page_that_stopped_asking_leaves_the_line():
    clock = FakeClock()
    turns = PageTurns(turns=1, clock=clock)
    assert turns.take("a")
    assert not turns.take("gone") and not turns.take("b")
    assert turns.waiting() == 2
    turns.end("a")
    clock.t = WAIT_S + 0.5  # "gone" never asked again; "b" asks now
    assert turns.take("b") and turns.waiting() == 0
