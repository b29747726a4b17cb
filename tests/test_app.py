"""The dashboard through Streamlit's AppTest: pages render; a run started from the widgets
finishes and its stacked bar figure holds the five components."""
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from latency.core import fmt
from tests.app_support import each_refresh, moving_snapshots
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
    # an in-process run's first component is the hand-off (no network is involved)
    for comp in ("hand-off", "queue", "preprocess", "forward", "postprocess"):
        assert comp in names, names
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


def _shown_numbers(at: AppTest) -> dict[str, str]:
    """The p50/p99 a page shows in its metric row, its histogram's lines and its bars."""
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    metric = {m.label: m.value for m in at.metric}
    hist = next(s for s in specs if any(str(a.get("text", "")).startswith("p99 ")
                                        for a in s["layout"].get("annotations", [])))
    lines = {a["text"].split(" ")[0]: a["text"].split(" ", 1)[1]
             for a in hist["layout"]["annotations"] if a["text"][:3] in ("p50", "p99")}
    bars = next(s for s in specs if {t.get("name") for t in s["data"]} >= {"queue", "forward"})
    totals = [a["text"] for a in bars["layout"]["annotations"]]  # mean, p50, p90, p99 bars
    return {"metric p50": metric["p50"], "metric p99": metric["p99"],
            "line p50": lines["p50"], "line p99": lines["p99"],
            "bar p50": totals[1], "bar p99": totals[-1]}


def test_one_refresh_of_the_live_view_is_one_snapshot_of_the_run(monkeypatch):
    """Rows arrive while a page renders (the run process sends them once a second): every
    number and chart of one refresh is of one snapshot version. The page takes the run's
    snapshot once a refresh — it took one for its figures' cache key and another for its
    figures (or, mid-run, beside metrics of the next version) — and builds the figures from
    that one."""
    from latency.core.config import RunConfig
    from ui.server import run_manager

    at = app()
    at.switch_page("views/live_profiler.py").run()
    mgr, owner = run_manager(), at.session_state["owner"]
    ticket = mgr.submit(RunConfig(model="synthetic", duration_s=30.0, concurrency=2,
                                  model_args={"dist": "exponential"}), owner=owner)
    at.session_state["watch"] = ticket.run_id
    handle = mgr.get(ticket.run_id)

    def charted(at: AppTest) -> bool:
        """The page shows this run (its heading names it) with its p99: not the page the
        AppTest rendered before ``watch`` was set, which showed ``mgr.latest()`` — an
        earlier test's finished run, with a p99 of its own."""
        return (any(ticket.run_id in m.value for m in at.markdown)
                and any(m.label == "p99" for m in at.metric))

    try:
        rerun_until(at, charted, timeout=90)
        assert charted(at), [m.value for m in at.markdown][:3]
        taken = moving_snapshots(handle, monkeypatch)
        for snap in each_refresh(at, taken):
            assert snap.run_id == ticket.run_id, snap.run_id
            assert charted(at), [m.value for m in at.markdown][:3]
            shown = _shown_numbers(at)
            assert len({shown["metric p50"], shown["line p50"]}) == 1, shown
            assert len({shown["metric p99"], shown["line p99"]}) == 1, shown
            # all of it is of the one snapshot the refresh took
            lat = snap.summary.latency_ms
            assert shown["metric p99"] == fmt.duration(lat.p99)
            assert shown["bar p99"] == f"{fmt.ms(lat.p99)} ms"
            assert shown["bar p50"] == f"{fmt.ms(lat.p50)} ms"
            assert any(f"{snap.progress['measured']} requests measured" in p.proto.text
                       for p in at.get("progress"))
    finally:
        mgr.stop(ticket.run_id, requester=owner)
        handle.wait(timeout=60)


def test_the_progress_line_says_what_is_true_in_every_phase():
    """Finishing read "finishing · 0.0 s elapsed · ~0 s left": the phase's own clock had just
    restarted and nothing was left to measure. It says what the run does and the time since it
    started; time left only while measuring."""
    from latency.analysis.snapshot import Snapshot
    from latency.core.config import RunConfig
    from ui.live_profiler import progress_line

    def line(phase: str, status: str = "running", **progress) -> tuple[float, str]:
        return progress_line(Snapshot("r", 1, status, phase, RunConfig(duration_s=10.0),
                                      {"measured": 1269, **progress}))

    frac, text = line("finishing", elapsed_s=0.0, wall_s=13.04, fraction=1.0, remaining_s=0.0)
    assert text == "finishing: computing the summary · 1269 requests measured · 13.0 s elapsed"
    assert frac == 1.0 and "left" not in text
    _, text = line("measuring", elapsed_s=7.6, wall_s=12.0, fraction=0.76, remaining_s=2.4)
    assert text == "measuring · 1269 requests measured · 7.6 s elapsed · ~2 s left"
    _, text = line("starting", elapsed_s=0.0, wall_s=3.5, fraction=0.0, remaining_s=None)
    assert text == "starting · 1269 requests measured · 3.5 s elapsed"
    _, text = line("draining", elapsed_s=0.2, wall_s=14.0, fraction=1.0, remaining_s=None)
    assert text.startswith("draining (all requests sent") and text.endswith("14.0 s elapsed")
    _, text = line("queued", status="queued", elapsed_s=0.0, fraction=0.0)
    assert text == "queued · 1269 requests measured"
    _, text = line("waiting", waiting_for="a CLI run", wall_s=2.0)
    assert text.startswith("waiting for the machine: a CLI run is measuring")


def _follower(values: dict) -> None:
    """A follower's sidebar: the presenter's settings set through the Session State API
    before the controls render (ui/room.follow), as every render of a follower does."""
    import streamlit as st

    from ui.controls import profiler_controls

    for key, value in values.items():
        st.session_state[key] = value
    profiler_controls()


@pytest.mark.parametrize("values", [
    {"model": "synthetic", "pre_ms": 3.0, "fwd_ms": 4.0, "post_ms": 0.5,
     "stage_dist": "exponential", "error_rate": 0.1, "stall_ms": 100, "device": "cpu",
     "dtype": "float32", "threads": 2, "replicas": 2, "batch": 4, "delay": 2.0,
     "mode": "closed loop", "concurrency": 3, "duration": 5, "slo": 30.0},
    {"model": "image-cnn", "mode": "open loop", "rate": 200, "arrival": "constant",
     "transport": "HTTP", "payload": "raw", "net_rtt": 20.0, "net_jitter": 2.0,
     "net_bw": "100"},
])
def test_a_followers_controls_log_no_session_state_warnings(policy_warnings, values):
    """The server log said "The widget with key "model" was created with a default value but
    also had its value set via the Session State API" for every follower (and, once a process,
    for whichever key came first): a control whose value was just set through the API is
    created without a default, and shows the value set."""
    seen = policy_warnings
    at = AppTest.from_function(_follower, args=(values,), default_timeout=60)
    at.run()
    assert not at.exception
    assert not [m for m in seen if "Session State API" in m], seen
    shown = {w.key: w.value for kind in ("slider", "select_slider", "selectbox", "radio",
                                         "number_input") for w in getattr(at.sidebar, kind)}
    for key, value in values.items():
        assert shown[key] == value, (key, shown.get(key), value)
    at.run()  # and a render without the API keeps the values
    assert {k: v for k, v in shown.items() if k in values} == values


def test_the_controls_keep_their_defaults_for_a_shared_link():
    """Only a value set through the API drops the default: a fresh page's controls still
    carry theirs (a bound widget leaves its default out of the URL)."""
    at = app()
    at.switch_page("views/live_profiler.py").run()
    assert at.sidebar.selectbox(key="model").value == "synthetic"
    assert at.sidebar.slider(key="duration").value == 10
    assert at.sidebar.number_input(key="slo").value == 50.0
    assert at.sidebar.slider(key="threads").proto.default[:] == [1]
    assert at.sidebar.selectbox(key="model").proto.default == \
        at.sidebar.selectbox(key="model").options.index("synthetic")


def test_start_and_stop_say_what_they_do_beside_them_not_over_the_title():
    """The Start tooltip opened above the button, over the page's title: the buttons have
    none, a caption beside them says it."""
    at = app()
    at.switch_page("views/live_profiler.py").run()
    buttons = {b.label: b for b in at.button}
    assert not buttons["Start"].help and not buttons["Stop"].help
    assert any("**Start** queues a run" in c.value and "**Stop**" in c.value
               for c in at.caption)


def test_home_says_where_to_start_on_every_page():
    at = app()
    links = [link.label for link in at.get("page_link")]
    assert links == ["Live Profiler", "Load Simulator", "Optimisation Lab", "Compare Runs",
                     "Workshop"]


def test_servers_named_at_startup_are_parsed_and_a_bad_one_is_said(monkeypatch):
    """`streamlit run app.py -- --target NAME=URL`: added to $LATENCY_LAB_TARGETS (once),
    read back by name; a malformed entry is one line and is not offered."""
    from ui.startup import named_targets, startup_targets

    monkeypatch.setenv("LATENCY_LAB_TARGETS", "prod=https://gpu-box:8000/v1/")
    assert startup_targets(["--target", "mine=http://127.0.0.1:8080/v1",
                            "--target=prod=https://gpu-box:8000/v1/"]) == [
        "mine=http://127.0.0.1:8080/v1"]
    got = named_targets()
    assert got.urls == {"prod": "https://gpu-box:8000/v1", "mine": "http://127.0.0.1:8080/v1"}
    assert not got.errors
    bad = named_targets("x=ftp://h, =http://h, a b=http://h, ok=http://h, ok=http://i")
    assert list(bad.urls) == ["ok"] and len(bad.errors) == 4, bad.errors
    assert "x's URL must be http:// or https://" in bad.errors[0]
    assert "ok is named twice" in bad.errors[3]
