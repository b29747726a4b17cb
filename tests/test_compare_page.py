"""The Compare Runs page through AppTest, on a history seeded with real engine runs; and its
pure figure functions."""
import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from latency.analysis.summary import Summary
from latency.core.config import RunConfig
from latency.core.records import COMPONENTS, HANDOFF
from latency.execution.engine import execute
from latency.figures.compare_plots import diff_table, runs_bars_figure, runs_spectrum_figure
from latency.storage.store import RunStore

APP = str(Path(__file__).resolve().parents[1] / "app.py")


@pytest.fixture(scope="module")
def results():
    """Real runs: forward 1 ms, forward 3 ms, and one that failed (no inputs)."""
    base = {"preprocess_ms": 0.3, "postprocess_ms": 0.2}
    fast = execute(RunConfig(model="synthetic", model_args={**base, "forward_ms": 1.0},
                             requests=120, warmup=5))
    slow = execute(RunConfig(model="synthetic", model_args={**base, "forward_ms": 3.0},
                             requests=120, warmup=5))
    failed = execute(RunConfig(model="synthetic", requests=5, warmup=0), inputs=[])
    return fast, slow, failed


@pytest.fixture
def seeded(tmp_path, monkeypatch, results):
    db = tmp_path / "runs.sqlite"
    monkeypatch.setenv("LATENCY_LAB_DB", str(db))
    store = RunStore(db)
    fast, slow, failed = results
    ids = {"failed": store.save(failed), "fast": store.save(fast, name="fast forward"),
           "slow": store.save(slow)}
    return store, ids


def page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/compare_runs.py").run()
    assert not at.exception
    return at


def unescaped(markdown: str) -> str:
    """Markdown-escaped text (``ui.text.plain``) as a reader sees it."""
    return re.sub(r"\\(.)", r"\1", markdown)


def specs(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_the_two_newest_runs_are_overlaid_with_a_diff(seeded, results):
    _, ids = seeded
    at = page()
    assert at.multiselect(key="cmp_runs").value == [ids["fast"], ids["slow"]]  # older is A
    spectrum, bars = specs(at)
    names = [t["name"] for t in spectrum["data"] if t.get("showlegend") is not False]
    assert names == ["A · fast forward", "B · synthetic · closed 1 client"]
    assert spectrum["layout"]["xaxis"]["type"] == "log"  # the 1/(1-p) axis
    stacked = [t for t in bars["data"] if t["type"] == "bar"]
    # both runs are in-process: their first component is the hand-off, the others by key
    assert [t["name"] for t in stacked] == [HANDOFF, *COMPONENTS[1:]]
    fwd = next(t for t in stacked if t["name"] == "forward")
    assert fwd["x"][1][:2] == ["A", "B"]
    # each bar is its run's own measured mean (not the nominal 1 and 3 ms a busy machine
    # stretches), and B's forward is the longer one by far
    fast, slow, _ = results
    assert fwd["y"][0] == pytest.approx(fast.summary.components_ms["forward"].mean, rel=1e-6)
    assert fwd["y"][1] == pytest.approx(slow.summary.components_ms["forward"].mean, rel=1e-6)
    assert fwd["y"][1] > 2 * fwd["y"][0]
    assert any("B vs A: p50" in m.value for m in at.markdown)
    assert any("model_args.forward_ms: 1 → 3" in unescaped(c.value) for c in at.caption)
    tables = at.dataframe
    runs_table, diff = tables[0].value, tables[1].value
    assert list(runs_table["id"]) == [ids["slow"], ids["fast"], ids["failed"]]
    assert list(runs_table["as"]) == ["B", "A", ""]
    assert len(diff) == 3 * (1 + len(COMPONENTS))
    row = diff[(diff["component"] == "forward") & (diff["stat"] == "mean")].iloc[0]
    assert row["Δ% B"] > 100  # 1 ms → 3 ms
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Requests (CSV)", "Requests (Parquet)", "Result (JSON)",
                      "Chrome trace (Perfetto)", "Report (HTML)"]


def test_filters_and_a_single_selection(seeded):
    _, ids = seeded
    at = page()
    at.multiselect(key="cmp_status").set_value(["failed"]).run()
    assert not at.exception
    assert list(at.dataframe[0].value["id"]) == [ids["failed"]]
    assert at.multiselect(key="cmp_runs").value == [ids["failed"]]
    assert any("Select a second run" in i.value for i in at.info)
    assert any("failed" in w.value for w in at.warning)
    at.multiselect(key="cmp_status").set_value([]).run()
    at.text_input(key="cmp_text").set_value("no such run").run()
    assert any("No saved one-shot runs match" in i.value for i in at.info)
    assert not at.exception


def test_rename_and_delete_with_confirmation(seeded):
    store, ids = seeded
    at = page()
    at.selectbox(key="cmp_target").set_value(ids["slow"]).run()
    at.text_input(key=f"cmp_name_{ids['slow']}").set_value("three ms").run()
    at.button(key="cmp_rename").click().run()
    assert not at.exception
    assert store.info(ids["slow"]).name == "three ms"
    assert "B · three ms" in [t.get("name") for t in specs(at)[0]["data"]]
    at.selectbox(key="cmp_target").set_value(ids["failed"]).run()
    at.button(key="cmp_delete").click().run()
    assert any("cannot be undone" in w.value for w in at.warning)
    at.button(key="cmp_delete_no").click().run()
    assert store.count() == 3  # cancelled
    at.button(key="cmp_delete").click().run()
    at.button(key="cmp_delete_yes").click().run()
    assert not at.exception
    assert store.count() == 2 and ids["failed"] not in list(at.dataframe[0].value["id"])


def test_an_empty_history_says_how_to_fill_it(tmp_path, monkeypatch):
    monkeypatch.setenv("LATENCY_LAB_DB", str(tmp_path / "empty.sqlite"))
    at = page()
    assert any("No saved one-shot runs yet" in i.value for i in at.info)


def test_the_export_buttons_build_real_files(seeded):
    from ui.compare_runs import export_file

    store, ids = seeded
    trace = json.loads(export_file(str(store.path), ids["fast"], "trace"))
    assert sum(e.get("name") == "request" for e in trace["traceEvents"]) == 125
    csv = export_file(str(store.path), ids["fast"], "csv").decode().splitlines()
    assert len(csv) == 126 and "forward_ms" in csv[0]
    assert export_file(str(store.path), ids["fast"], "parquet")[:4] == b"PAR1"
    report = export_file(str(store.path), ids["fast"], "html").decode()
    assert report.startswith("<!DOCTYPE html>") and f"Latency Lab run {ids['fast']}" in report
    assert report.count('class="plotly-graph-div"') == 4


# ---------------------------------------------------------------------------- pure figures


def test_runs_bars_figure_groups_runs_by_statistic():
    a = {"mean": {c: 1.0 for c in COMPONENTS}, "p50": {c: 0.5 for c in COMPONENTS},
         "p99": {c: 2.0 for c in COMPONENTS}}
    b = {k: {c: 2 * v for c, v in m.items()} for k, m in a.items()}
    fig = runs_bars_figure({"A": a, "B": b, "C": None})
    bars = [t for t in fig.data if t.type == "bar"]
    assert [t.name for t in bars] == list(COMPONENTS)
    assert list(bars[0].x[0]) == ["mean", "mean", "p50", "p50", "p99 (tail)", "p99 (tail)"]
    assert list(bars[0].x[1]) == ["A", "B"] * 3
    totals = next(t for t in fig.data if t.type == "scatter")
    assert list(totals.y) == [6.0, 12.0, 3.0, 6.0, 12.0, 24.0]
    assert fig.layout.barmode == "stack"
    assert runs_bars_figure({}).layout.annotations[0].text == "no data yet"


def test_runs_spectrum_and_diff_table():
    import numpy as np

    p_a = np.array([0.0, 0.5, 0.9, 0.99, 0.999])  # a run of 1,000 requests
    p_b = np.array([0.0, 0.5, 0.9, 0.95])  # a run of 20
    fig = runs_spectrum_figure({"A · x": (p_a, 10 * p_a + 1), "B · y": (p_b, 2 * p_b)},
                               log_y=True)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert [t.name for t in lines] == ["A · x", "B · y"]
    assert list(lines[0].x[:3]) == pytest.approx([1.0, 2.0, 10.0])  # x = 1/(1-p)
    markers = [t for t in fig.data if t.mode == "markers"]  # p99 only where a run reaches it
    assert len(markers) == 1 and markers[0].y[0] == pytest.approx(10.9)
    assert list(fig.layout.xaxis.ticktext) == ["50%", "90%", "99%", "99.9%"]
    assert fig.layout.yaxis.type == "log"
    s_a = {"latency_ms": {"mean": 2.0, "p50": 2.0, "p99": 4.0}, "components_ms": {}}
    s_b = {"latency_ms": {"mean": 3.0, "p50": 1.0, "p99": 4.0}, "components_ms": {}}
    rows = diff_table(["A", "B"], [Summary.from_dict(s_a), Summary.from_dict(s_b)])
    total = {r["stat"]: r for r in rows if r["component"] == "total"}
    assert total["mean"]["Δ% B"] == 50.0 and total["p50"]["Δ% B"] == -50.0
    assert total["p99"]["Δ B (ms)"] == 0.0 and total["p99"]["A (ms)"] == 4.0


def test_the_diff_table_colours_only_changes_beyond_the_runs_noise():
    """Two real-shaped runs of 2,000 requests: the total's mean moves 20 % (σ ≈ 1.56 ms, so
    3 standard errors of the difference ≈ 0.15 ms ≪ 2 ms: coloured red); the overhead moves
    +42 % — 4 µs, under the 20 µs floor: left uncoloured; the p99 moves 10 % with
    overlapping intervals: uncoloured; forward moves −30 % with disjoint intervals: green."""
    from latency.analysis.compare import beyond_noise
    from ui.compare_runs import diff_colours

    def run(total_mean, overhead, fwd_p99, fwd_ci, p99_ci):
        return Summary.from_dict({
            "successful": 2000, "requests": 2000,
            "latency_ms": {"mean": total_mean, "p50": total_mean, "p90": total_mean + 2.0,
                           "p99": 14.0, "p99_ci95": p99_ci},
            "components_ms": {
                "overhead": {"mean": overhead, "p50": overhead, "p90": overhead * 1.5,
                             "p99": overhead * 3},
                "forward": {"mean": fwd_p99 / 2, "p50": fwd_p99 / 2, "p90": fwd_p99 * 0.8,
                            "p99": fwd_p99, "p99_ci95": fwd_ci}}})

    a = run(10.0, 0.010, 8.0, [7.5, 8.5], [13.0, 16.0])
    b = run(12.0, 0.0142, 5.6, [5.2, 6.0], [14.5, 17.0])
    assert beyond_noise(a, b, "total", "mean") is True
    assert beyond_noise(a, b, "overhead", "mean") is False
    assert beyond_noise(a, b, "total", "p99") is False  # no change: both 14.0
    assert beyond_noise(a, b, "forward", "p99") is True
    rows = diff_table(["A", "B"], [a, b])
    colour = {(r["component"], r["stat"]): c[0] for r, c in zip(rows, diff_colours(rows))}
    assert "#B22222" in colour[("total", "mean")]
    assert colour[("overhead", "mean")] == "" and colour[("overhead", "p50")] == ""
    assert "#1B7F3B" in colour[("forward", "p99")]
    c = run(10.0, 0.010, 8.8, [7.9, 9.4], [13.0, 16.0])  # +10 %, intervals overlap
    assert beyond_noise(a, c, "forward", "p99") is False


def test_the_live_profiler_says_where_a_finished_run_was_saved(tmp_path, monkeypatch):
    import re

    from tests.conftest import rerun_until
    from ui.server import run_manager

    db = tmp_path / "live.sqlite"
    monkeypatch.setenv("LATENCY_LAB_DB", str(db))
    mgr = run_manager()
    ticket = mgr.submit(RunConfig(model="synthetic", model_args={"forward_ms": 0.5},
                                  requests=30, warmup=0), owner="someone")
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["watch"] = ticket.run_id  # this run, not the server's latest
    at.run()
    at.switch_page("views/live_profiler.py").run()

    def saved_caption(at):
        saved = mgr.saved_id(ticket.run_id)
        return next((c.value for c in at.caption if saved and f"`{saved}`" in c.value), None)

    rerun_until(at, saved_caption, timeout=90)
    text = saved_caption(at)
    assert text, [c.value for c in at.caption]
    saved = re.search(r"`([0-9a-f]+)`", text).group(1)
    info = RunStore(db).info(saved)
    assert info.origin_id == ticket.run_id and info.n == 30 and info.source == "dashboard"
    assert not at.exception


# ---- a shared room: nobody else's runs, no Markdown, no paths, the run you picked ------------
def test_in_a_shared_room_only_the_owner_or_an_instructor_manages_a_run(seeded, monkeypatch):
    store, ids = seeded
    monkeypatch.setenv("LATENCY_LAB_INSTRUCTOR_KEY", "sécret")
    at = page()
    at.selectbox(key="cmp_target").set_value(ids["slow"]).run()
    assert at.button(key="cmp_rename").disabled and at.button(key="cmp_delete").disabled
    assert any("Only the session that ran it" in c.value for c in at.caption)
    assert not any(str(store.path) in c.value for c in at.caption)  # no server paths
    owned = store.save(store.load(ids["fast"]).result, owner=at.session_state["owner"])
    at.run()
    at.selectbox(key="cmp_target").set_value(owned).run()
    assert not at.button(key="cmp_delete").disabled  # this session's own run
    at.selectbox(key="cmp_target").set_value(ids["slow"]).run()
    unlock = next(t for t in at.sidebar.text_input if "key" in t.label.lower())
    unlock.set_value("é").run()  # a wrong, non-ASCII key: an error, not a traceback
    assert not at.exception
    unlock.set_value("sécret").run()
    assert not at.exception and at.session_state["instructor"]
    at.selectbox(key="cmp_target").set_value(ids["slow"]).run()
    assert not at.button(key="cmp_delete").disabled  # an instructor manages any run


def test_names_render_as_plain_text(seeded):
    store, ids = seeded
    store.rename(ids["slow"], "![p](http://127.0.0.1:9/pixel.png) **bold** :red[x]")
    at = page()
    at.selectbox(key="cmp_target").set_value(ids["slow"]).run()
    at.button(key="cmp_delete").click().run()
    warning = next(w.value for w in at.warning if "cannot be undone" in w.value)
    assert r"\!\[p\]\(http\://127\.0\.0\.1\:9/pixel\.png\)" in warning
    assert r"\*\*bold\*\*" in warning and r"\:red\[x\]" in warning


def test_the_delete_dialog_deletes_exactly_the_run_picked(seeded):
    store, ids = seeded
    at = page()
    at.selectbox(key="cmp_target").set_value(ids["fast"]).run()
    at.button(key="cmp_delete").click().run()
    assert any(ids["fast"] in w.value for w in at.warning)
    at.selectbox(key="cmp_target").set_value(ids["slow"]).run()  # changed the selection
    assert not any("cannot be undone" in w.value for w in at.warning)  # the dialog is void
    at.button(key="cmp_delete").click().run()
    yes = at.button(key="cmp_delete_yes")
    assert ids["slow"] in yes.label
    yes.click().run()
    assert [i.id for i in store.list()] == [ids["fast"], ids["failed"]]


def test_html_in_a_run_name_is_text_in_the_charts_and_pickers_show_no_backslashes(seeded):
    """Plotly renders HTML in trace names and tick labels: a name with a link must not become
    one for everyone comparing; a select box shows text as it is, so it is not escaped."""
    from latency.figures.compare_plots import runs_bars_figure, runs_spectrum_figure
    from ui.compare_runs import option_label

    store, ids = seeded
    name = '<a href="http://127.0.0.1:9/phish">click</a> <i>it</i> 12-02 02:01'
    store.rename(ids["slow"], name)
    info = next(i for i in store.list() if i.id == ids["slow"])
    assert "\\" not in option_label(info) and name in option_label(info)
    spectrum = runs_spectrum_figure({name: ([0.5, 0.9, 0.995], [1.0, 2.0, 3.0])})
    bars = runs_bars_figure({name: {"p50": {"queue": 1.0, "forward": 2.0}}})
    shown = [t.name for t in spectrum.data if t.name] + [str(v) for t in bars.data for v in t.x[1]]
    assert shown and not any("<a" in s or "<i>" in s for s in shown)
    assert any("&lt;a href" in s for s in shown)
    at = page()
    assert not at.exception
    assert not any("\\" in c.value for c in at.caption if "LATENCY_LAB_DB" in c.value)


MARKDOWN_NAME = r"image-cnn *fast* a_b [x](y) 12-02 00:51 \o/"


def test_text_shown_as_it_is_is_not_escaped_and_markdown_text_is(seeded):
    """The run pickers' options and chips (a select box and a multiselect: plain text) showed
    `image\\-cnn · 12\\-02 00\\:51`, the history path `/root/\\.latency\\_lab`: Markdown
    escaping of text no Markdown renders. They show the name as it is; the places that do
    render Markdown (the delete dialog, the setup line) escape it."""
    store, ids = seeded
    store.rename(ids["fast"], MARKDOWN_NAME)
    at = page()
    chips = at.multiselect(key="cmp_runs")
    picked = [chips.format_func(rid) for rid in chips.value]  # what the chips say
    assert any(MARKDOWN_NAME in p for p in picked), picked
    options = at.selectbox(key="cmp_target").options
    assert any(MARKDOWN_NAME in o for o in options), options
    assert not any("\\-" in o or "\\:" in o for o in options + picked)
    path = next(c.value for c in at.caption if "LATENCY_LAB_DB" in c.value)
    assert f"`{store.path}`" in path  # a code span: the path as it is
    setup = next(c.value for c in at.caption if c.value.startswith("Setup A → B"))
    assert "model\\_args" in setup  # inside Markdown: escaped, reads model_args
    at.selectbox(key="cmp_target").set_value(ids["fast"]).run()
    at.button(key="cmp_delete").click().run()
    warning = next(w.value for w in at.warning if "cannot be undone" in w.value)
    assert r"\*fast\*" in warning and r"\[x\]\(y\)" in warning
    assert unescaped(warning).count(MARKDOWN_NAME) == 1


def test_the_text_helpers_say_which_text_goes_where():
    from ui.text import code_span, option_text, plain

    name = "a_b *c* `d` 12-02\nnext"
    assert plain(name) == r"a\_b \*c\* \`d\` 12\-02" + "\nnext"
    assert option_text(name) == "a_b *c* `d` 12-02 next"  # one line, as it is
    assert code_span("/root/.latency_lab/runs`x`.sqlite") == "/root/.latency_lab/runs'x'.sqlite"


def _compare_follower(page_file: str, target: str, name: str) -> None:
    """A follower's Compare page: the presenter's picked run and its name field set through
    the Session State API before the page renders (ui/room.follow)."""
    import runpy

    import streamlit as st

    st.session_state["cmp_target"] = target
    st.session_state[f"cmp_name_{target}"] = name
    runpy.run_path(page_file)


def test_a_followers_compare_page_logs_no_session_state_warnings(seeded, monkeypatch):
    import logging
    import types

    import streamlit.elements.lib.policies as policies

    _, ids = seeded
    monkeypatch.setattr(policies, "runtime", types.SimpleNamespace(exists=lambda: True))
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger(policies.__name__)
    logger.addHandler(handler)
    try:
        page_file = str(Path(APP).parent / "views" / "compare_runs.py")
        at = AppTest.from_function(_compare_follower, args=(page_file, ids["slow"], "renamed"),
                                   default_timeout=60)
        at.run()
    finally:
        logger.removeHandler(handler)
    assert not at.exception
    assert not [m for m in seen if "Session State API" in m], seen
    assert at.selectbox(key="cmp_target").value == ids["slow"]
    assert at.text_input(key=f"cmp_name_{ids['slow']}").value == "renamed"


def test_a_long_run_label_is_shortened_in_the_legend_not_cut_off():
    """A run labelled by model, load and a long setup was cut off at the chart's edge: its
    legend entry ends in an ellipsis; the whole name stays in the p99 marker's hover."""
    from latency.figures.text import LEGEND_CHARS

    label = ("A · image-cnn · closed 4 clients · batch ≤ 8 / 5 ms · 2 replicas · int8 · "
             "naive pre · Ray Serve + preprocess deployment")
    fig = runs_spectrum_figure({label: ([0.5, 0.9, 0.995], [1.0, 2.0, 3.0]),
                                "B · short": ([0.5, 0.9, 0.995], [1.0, 2.5, 4.0])})
    names = [t.name for t in fig.data if t.showlegend is not False]
    assert names[1] == "B · short"
    assert len(names[0]) <= LEGEND_CHARS and names[0].endswith("…")
    assert names[0][:-1] == label[: LEGEND_CHARS - 1].rstrip()
    marker = next(t for t in fig.data if t.showlegend is False)
    assert label.replace("<", "&lt;") in marker.hovertemplate
