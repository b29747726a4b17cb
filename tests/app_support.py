"""What the AppTest page tests read off a page: its Plotly charts' specs, the chart holding a
trace of a name, a metric's value by its label."""
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
