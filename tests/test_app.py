"""The dashboard through Streamlit's AppTest: pages render; a run started from the widgets
finishes and its stacked bar figure holds the five components."""
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from latency.core import fmt
from tests.conftest import rerun_until

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    return at


def test_home_renders():
    at = app()
    assert not at.exception
    assert any("five components" in h.value for h in at.subheader)


def test_live_profiler_renders_with_every_control():
    at = app()
    at.switch_page("views/live_profiler.py").run()
    assert not at.exception
    labels = {w.label for w in at.sidebar.slider} | {w.label for w in at.sidebar.selectbox}
    for label in ("Pipeline", "Device", "dtype", "Threads per replica", "Replicas",
                  "Max batch size", "Max batch delay (ms)", "Concurrency (clients)",
                  "Run length (s)"):
        assert label in labels
    for w in list(at.sidebar.slider) + list(at.sidebar.selectbox) + list(at.sidebar.radio):
        assert w.help, f"{w.label} has no tooltip"


def test_ray_serve_is_offered_only_where_it_is_installed(monkeypatch):
    monkeypatch.setattr("ui.controls.ray_installed", lambda: False)
    at = app()
    at.switch_page("views/live_profiler.py").run()
    keys = {r.key for r in at.sidebar.radio}
    assert "backend" not in keys and "transport" in keys
    assert not at.exception


def test_oversubscription_warns_before_start():
    from latency.host.cores import usable_cores

    at = app()
    at.switch_page("views/live_profiler.py").run()
    replicas = 4
    threads = usable_cores() // replicas + 1  # one more than fits, on any machine
    at.sidebar.slider(key="replicas").set_value(replicas)
    at.sidebar.slider(key="threads").set_value(threads).run()
    assert any("cores" in w.value for w in at.warning)
    assert not at.exception


def test_a_run_started_from_the_widgets_finishes_with_the_five_components():
    at = app()
    at.switch_page("views/live_profiler.py").run()
    at.sidebar.number_input(key="pre_ms").set_value(1.0)
    at.sidebar.number_input(key="fwd_ms").set_value(2.0)
    at.sidebar.number_input(key="post_ms").set_value(0.5)
    at.sidebar.slider(key="duration").set_value(2)
    next(b for b in at.button if b.label == "Start").click().run()
    assert not at.exception and not at.error
    rid = at.session_state["watch"]
    done = lambda at: any("completed" in m.value and rid in m.value  # noqa: E731 - its status
                          for m in at.markdown)
    rerun_until(at, done)
    assert done(at), [m.value for m in at.markdown]
    charts = at.get("plotly_chart")
    assert len(charts) == 3
    specs = [json.loads(c.proto.spec) for c in charts]
    bars = next(s for s in specs if {t.get("name") for t in s["data"]} >= {"queue", "forward"})
    names = [t["name"] for t in bars["data"] if t.get("type") == "bar"]
    for comp in ("network", "queue", "preprocess", "forward", "postprocess"):
        assert comp in names
    fwd = next(t for t in bars["data"] if t.get("name") == "forward")
    from ui.server import run_manager

    # the mean bar's forward segment is the run's mean forward time — which holds the 2 ms
    # set (never less; on a busy machine a descheduled replica holds it longer)
    run = run_manager().get(rid)
    assert fwd["y"][0] == pytest.approx(run.snapshot().summary.components_ms["forward"].mean,
                                        rel=1e-6)
    assert 2.0 <= fwd["y"][0] < 4.0
    # one set of numbers on the page: the metrics, the histogram's percentile lines, the p50
    # and p99 bars and the summary table all say the same p50 and p99
    summary = run.snapshot().summary.latency_ms
    metric = {m.label: m.value for m in at.metric}
    hist = next(s for s in specs if any(str(a.get("text", "")).startswith("p99 ")
                                        for a in s["layout"].get("annotations", [])))
    lines = {a["text"].split(" ")[0]: a["text"].split(" ", 1)[1]
             for a in hist["layout"]["annotations"] if a["text"][:3] in ("p50", "p99")}
    for key in ("p50", "p99"):
        shown = fmt.duration(getattr(summary, key))
        assert metric[key] == shown and lines[key] == shown, (key, metric, lines)
    totals = [t for t in bars["data"] if t.get("type") == "bar"]
    heights = [sum(t["y"][i] for t in totals) for i in range(len(totals[0]["y"]))]
    assert heights[1] == pytest.approx(summary.p50, rel=1e-6)  # mean, p50, p90, p99 bars
    assert heights[-1] == pytest.approx(summary.p99, rel=1e-6)
    assert any("Verdict" in i.value for i in at.info)
    assert not at.exception


def test_an_engine_failure_shows_an_error_box_and_the_app_keeps_working():
    from latency.core.config import RunConfig
    from ui.server import run_manager

    at = app()
    at.switch_page("views/live_profiler.py").run()
    ticket = run_manager().submit(RunConfig(model="synthetic", requests=5, warmup=0),
                                  owner=at.session_state["owner"], inputs=[])  # fails
    at.session_state["watch"] = ticket.run_id
    rerun_until(at, lambda at: bool(at.error), timeout=60)
    assert any("no inputs" in e.value for e in at.error)
    assert not at.exception
    at.switch_page("views/home.py").run()
    assert not at.exception


def test_a_shared_link_sets_the_controls_and_they_survive_a_page_switch():
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["replicas"] = "3"
    at.query_params["mode"] = "open loop"
    at.run()
    at.switch_page("views/live_profiler.py").run()
    assert at.sidebar.slider(key="replicas").value == 3
    assert at.sidebar.radio(key="mode").value == "open loop"
    at.sidebar.slider(key="batch").set_value(8).run()
    at.switch_page("views/home.py").run()
    at.switch_page("views/live_profiler.py").run()
    assert at.sidebar.slider(key="batch").value == 8
    assert not at.exception


def test_a_pipeline_named_at_startup_is_listed_and_runs(monkeypatch):
    """`streamlit run app.py -- --pipeline examples/...:SentimentPipeline`: the dashboard
    offers it with the samples (the browser never sends code) and a run completes."""
    from ui.controls import pipeline_infos
    from ui.startup import startup_pipelines

    spec = f"{Path(APP).parent / 'examples' / 'sentiment_pipeline.py'}:SentimentPipeline"
    monkeypatch.setenv("LATENCY_LAB_PIPELINES", "")  # restored (removed) after the test
    assert startup_pipelines(["--pipeline", spec]) == [spec]
    pipeline_infos.clear()
    try:
        at = app()
        at.switch_page("views/live_profiler.py").run()
        box = at.sidebar.selectbox(key="model")
        assert "sentiment" in box.options and "image-cnn" in box.options
        box.set_value("sentiment").run()
        assert any("startup" in c.value for c in at.sidebar.caption)
        at.sidebar.slider(key="duration").set_value(2)
        next(b for b in at.button if b.label == "Start").click().run()
        assert not at.exception and not at.error
        done = lambda at: any("completed" in m.value and "sentiment" in m.value  # noqa: E731
                              for m in at.markdown)
        rerun_until(at, done)
        assert done(at), [m.value for m in at.markdown][:5]
        assert not at.exception
    finally:
        pipeline_infos.clear()


def test_the_dashboards_plain_helpers_are_modules_of_their_own_without_streamlit():
    """Escaping a user's text, reading the startup pipelines and yielding the CPU are jobs of
    their own: importing them pulls in neither Streamlit, Plotly nor the run manager (they
    were one module with the server's singletons and figure caches)."""
    import subprocess
    import sys

    code = ("import json, sys\n"
            "import ui.priority, ui.startup, ui.text\n"
            "print(json.dumps(sorted(m for m in ('streamlit', 'plotly', "
            "'latency.execution.manager') if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(APP).parent, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []
    from ui.text import plain

    assert plain("![p](http://host/x.png)") == r"\!\[p\]\(http\://host/x\.png\)"
