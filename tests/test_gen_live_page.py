"""The Live Profiler's generation mode through AppTest: a synthetic-lm run started from the
widgets runs in the shared run manager, its charts appear while it is in flight, and when it
ends its figures agree with the stored run (the bars' totals with the metrics and the
summary, the waterfall's spans with the stamps of the requests it draws); the one-shot mode
never shows a generation."""

from streamlit.testing.v1 import AppTest

from latency.core import fmt
from tests.app_support import chart_with, metric_value, page_in_mode
from tests.conftest import rerun_until


def generation_mode() -> AppTest:
    return page_in_mode("views/live_profiler.py", "live_kind", "generation")


def test_a_generation_started_from_the_widgets_is_drawn_as_it_was_measured():
    from ui.server import run_manager

    at = generation_mode()
    if run_manager().latest("generation") is None:  # (another test may have run one here)
        assert any("No generation run yet" in i.value for i in at.info)
    at.sidebar.number_input(key="glive_rate").set_value(8.0).run()
    at.sidebar.slider(key="glive_duration").set_value(4).run()
    at.button(key="glivebtn_start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    run_id = at.session_state["watch"]
    handle = run_manager().get(run_id)
    assert handle is not None and handle.kind == "generation"
    rerun_until(at, lambda a: handle.done() and any(
        "Verdict" in i.value for i in a.info), timeout=120)
    assert not at.exception
    result = handle.result()
    assert result.status == "completed", result.failure
    s = result.summary
    assert metric_value(at, "TTFT p99") == fmt.duration(s.ttft_ms.p99)
    bars = chart_with(at, "prefill stall")
    assert fmt.duration(sum(t["y"][-1] for t in bars["data"])) == fmt.duration(s.ttft_ms.p99)
    # the waterfall draws each request's own stamps
    waterfall = chart_with(at, "stalled (another request's prefill)")
    prefill = next(t for t in waterfall["data"] if t["name"] == "prefill")
    rows = result.rows
    drawn = [int(label.split(" ")[0][1:]) for label in prefill["y"]]
    origin = rows["t_received"][drawn].min()
    for i, base in zip(drawn, prefill["base"]):
        assert base == (rows["t_admitted"][i] - origin) / 1e6
    assert any("Validity" in x.value for x in [*at.success, *at.warning, *at.error])
    rerun_until(at, lambda a: any("Saved in the history as `g" in c.value for c in a.caption),
                timeout=30)
    saved = next(c.value for c in at.caption if "Saved in the history as" in c.value)
    assert run_manager().saved_id(run_id) in saved
    assert at.get("download_button")
    # the one-shot mode shows one-shot runs only
    at.sidebar.segmented_control(key="live_kind").set_value("one-shot").run()
    assert not at.exception
    assert not any(run_id in m.value for m in at.markdown)
