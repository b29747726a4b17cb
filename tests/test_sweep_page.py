"""The Sweep page through AppTest: a sweep started from the widgets measures its floor, its
ceiling and a rate, draws the curves with the simulator beside them as the points arrive,
names the highest load meeting the objectives, saves each point in the history under the
sweep's id, and offers its report; bad settings are one error box."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.app_support import APP, chart_with
from tests.conftest import rerun_until


def sweep_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("views/sweep.py").run()
    assert not at.exception, at.exception
    return at


def test_a_sweep_from_the_page_draws_its_points_and_answers():
    from latency.storage.store import RunStore
    from ui.sweeps import sweeps

    at = sweep_page()
    at.sidebar.selectbox(key="sweep_what").set_value("synthetic-lm").run()
    at.sidebar.text_input(key="sweep_outputs").set_value("12").run()
    at.sidebar.text_input(key="sweep_rates").set_value("6").run()
    at.sidebar.slider(key="sweep_point_s").set_value(5).run()
    at.button(key="sweepbtn_start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    record = sweeps().latest()
    assert record is not None
    rerun_until(at, lambda a: record.done and any(
        "Highest load meeting the objectives" in s.value for s in a.success), timeout=240)
    assert not at.exception and record.error is None, record.error
    result = record.result
    assert [p.label for p in result.points] == ["1 client", "8 clients", "rate 6.00/s"]
    rate = chart_with(at, "TTFT p99")
    names = [t["name"] for t in rate["data"]]
    assert names[:2] == ["TTFT p50", "TTFT p99"], names
    # the simulator beside the rate, where it could be fitted (the notes say why not)
    assert ("TTFT p99 simulated" in names) == (result.predicted[2] is not None), (
        names, result.fit)
    itl = chart_with(at, "ITL p99")
    assert itl["data"][1]["y"] == [result.points[2].itl_p99_ms]
    e2e = next(t for t in itl["data"] if t["name"] == "E2E p50")
    assert e2e["y"] == [result.points[2].e2e_p50_ms]
    goodput = chart_with(at, "served (throughput)")
    assert goodput["data"][1]["x"] == [result.points[2].rate]
    answer = next(s.value for s in at.success if "Highest load" in s.value)
    assert "requests/s" in answer or answer.count("none")
    assert any(b.label == "Download the report (HTML)" for b in at.get("download_button"))
    saved = RunStore().list(text=f"sweep-{result.sweep_id}")
    assert len(saved) == 3 and all(r.source == "dashboard" for r in saved), saved


def test_bad_sweep_settings_are_one_error_box():
    at = sweep_page()
    at.sidebar.text_input(key="sweep_rates").set_value("6,x").run()
    at.button(key="sweepbtn_start").click().run()
    assert not at.exception
    assert [e.value for e in at.error] == ["Cannot start: Rates must be numbers separated by "
                                           "commas \\(got '6,x'\\)"], [e.value for e in at.error]
