"""What the AppTest page tests read off a page: its Plotly charts' specs, the chart holding a
trace of a name, a metric's value by its label; and a Workshop lesson played on its page."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def chart_specs(at: Any) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def chart_with(at: Any, trace_name: str) -> dict:
    """The first chart with a trace named ``trace_name``."""
    return next(s for s in chart_specs(at)
                if any(t.get("name") == trace_name for t in s["data"]))


def metric_value(at: Any, label: str) -> str:
    return next(m.value for m in at.metric if m.label.startswith(label))


def page_in_mode(page: str, kind_key: str, kind: str) -> Any:
    """An AppTest of the dashboard on ``page`` (its script path), the page's mode selector
    (``kind_key``) set to ``kind``."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(page).run()
    at.sidebar.segmented_control(key=kind_key).set_value(kind).run()
    assert not at.exception, at.exception
    return at


def guess_run_reveal(at: Any, key: str, guess: Any, timeout: float = 120) -> None:
    """A Workshop lesson step as a room plays it on the page: send a guess, run its runs,
    wait until Reveal is enabled (they finished), reveal the answer."""
    from tests.conftest import rerun_until

    at.radio(key=f"guess_{key}").set_value(guess).run()
    next(b for b in at.button if b.key == f"lesson_send_{key}").click().run()
    next(b for b in at.button if b.key == f"lesson_run_{key}").click().run()

    def done(at: Any) -> bool:
        return not next(b for b in at.button if b.key == f"lesson_reveal_{key}").disabled

    rerun_until(at, done, timeout=timeout)
    assert done(at), f"the {key} lesson's runs did not finish in {timeout:g} s"
    next(b for b in at.button if b.key == f"lesson_reveal_{key}").click().run()


def moving_snapshots(handle: Any, monkeypatch: Any) -> list:
    """Make every look at ``handle``'s snapshot find new rows (the run moves on while a page
    renders: its version bumps at each call) and record the snapshots taken, in the list
    returned — a refresh that takes more than one shows figures of different moments."""
    original, taken = handle.snapshot, []

    def snapshot() -> Any:
        with handle._lock:
            handle._version += 1
        snap = original()
        taken.append(snap)
        return snap

    monkeypatch.setattr(handle, "snapshot", snapshot)
    return taken


def each_refresh(at: Any, taken: list, times: int = 3) -> Any:
    """Refresh ``at`` ``times`` times, each one checked to take exactly one snapshot
    (``moving_snapshots``' list); yields that snapshot."""
    for _ in range(times):
        taken.clear()
        at.run()
        assert not at.exception
        assert len(taken) == 1, f"{len(taken)} snapshots in one refresh: {taken}"
        yield taken[0]
