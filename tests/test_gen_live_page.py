"""The Live Profiler's generation mode through AppTest: a synthetic-lm run started from the
widgets runs in the shared run manager, its charts appear while it is in flight, and when it
ends its figures agree with the stored run (the bars' totals with the metrics and the
summary, the waterfall's spans with the stamps of the requests it draws); the one-shot mode
never shows a generation."""

from streamlit.testing.v1 import AppTest

from latency.core import fmt
from tests.app_support import (
    chart_specs,
    chart_with,
    each_refresh,
    metric_value,
    moving_snapshots,
    page_in_mode,
)
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


def test_prompts_longer_than_the_context_name_the_control_that_fits_them():
    """Prompts of 6,000 tokens on synthetic-lm's 4,096-token context: Start says why and
    what fits, in one error box; the page's own context control takes the fix, and the run
    is queued."""
    from ui.server import run_manager

    at = generation_mode()
    at.sidebar.text_input(key="glive_prompts").set_value("6000").run()
    at.sidebar.text_input(key="glive_outputs").set_value("16").run()
    at.sidebar.slider(key="glive_duration").set_value(2).run()
    at.button(key="glivebtn_start").click().run()
    said = [e.value.replace("\\", "") for e in at.error]
    assert any("context of 4,096" in e and "max_context=6016" in e and "Context (tokens)" in e
               for e in said), said
    at.sidebar.number_input(key="glive_max_context").set_value(8192).run()
    at.sidebar.toggle(key="glive_chunked").set_value(True).run()  # a step fits a chunk
    at.button(key="glivebtn_start").click().run()
    assert not at.exception, at.exception
    assert not [e.value for e in at.error if "Cannot start" in e.value]
    handle = run_manager().get(at.session_state["watch"])
    assert handle.config.model_args["max_context"] == 8192
    handle.cancel()


def test_one_refresh_of_a_generation_in_flight_is_one_snapshot_of_it(monkeypatch):
    """Mid-run, rows arrive while a page renders: every figure of one refresh is of one
    snapshot — the TTFT metrics, the p99 bar's total and the histogram's p99 line are the
    same number, of the snapshot that refresh took (the run moves on at every look)."""
    from latency.core.config import RunConfig
    from ui.server import run_manager

    at = generation_mode()
    mgr, owner = run_manager(), at.session_state["owner"]
    ticket = mgr.submit(RunConfig(model="synthetic-lm", rate=20.0, duration_s=30.0,
                                  prompt_tokens="uniform:16:200", output_tokens="uniform:4:32"),
                        owner=owner)
    at.session_state["watch"] = ticket.run_id
    handle = mgr.get(ticket.run_id)

    def charted(a: AppTest) -> bool:
        return (any(ticket.run_id in m.value for m in a.markdown)
                and any(m.label == "TTFT p99" for m in a.metric) and not handle.done())

    try:
        rerun_until(at, charted, timeout=90)
        assert charted(at), [m.value for m in at.markdown][:3]
        taken = moving_snapshots(handle, monkeypatch)
        for snap in each_refresh(at, taken):
            s = snap.summary
            assert metric_value(at, "TTFT p99") == fmt.duration(s.ttft_ms.p99)
            assert metric_value(at, "TTFT p50") == fmt.duration(s.ttft_ms.p50)
            bars = chart_with(at, "prefill stall")
            assert fmt.duration(sum(t["y"][-1] for t in bars["data"])) == fmt.duration(
                s.ttft_ms.p99)
            hist = chart_with(at, "requests")  # the TTFT histogram
            lines = [a["text"] for a in hist["layout"].get("annotations", [])
                     if str(a.get("text", "")).startswith("p99 ")]
            assert lines == [f"p99 {fmt.ms(s.ttft_ms.p99)} ms"], (lines, s.ttft_ms.p99)
    finally:
        mgr.stop(ticket.run_id, requester=owner)
        handle.wait(timeout=60)


def test_a_server_named_at_start_runs_live_with_its_split_labelled_and_its_metrics(
        monkeypatch):
    """A server of ours stands in for yours, named as the dashboard's starter names one
    ($LATENCY_LAB_TARGETS, as `streamlit run app.py -- --target NAME=URL` sets it): the page
    offers it by name (never a URL box), runs it live, and shows the server's account of
    each request — every part labelled reported, derived or measured — and its /metrics
    beside the client's requests in flight."""
    from latency.core.config import RunConfig
    from latency.serve.http_server import ServerProcess
    from ui.server import run_manager

    server = ServerProcess(RunConfig(model="synthetic-lm", max_running=4,
                                     model_args={"step_ms": 2.0}).checked()).start()
    try:
        monkeypatch.setenv("LATENCY_LAB_TARGETS", f"mine={server.url}/v1,bad=ftp://x")
        at = generation_mode()
        assert any("bad's URL must be http:// or https://" in e.value.replace("\\", "")
                   for e in at.sidebar.error)
        assert "server: mine" in at.sidebar.selectbox(key="glive_model").options
        assert not [t for t in at.text_input if "url" in t.label.lower()]
        at.sidebar.selectbox(key="glive_model").set_value("server: mine").run()
        at.sidebar.selectbox(key="glive_api").set_value("completions").run()
        at.sidebar.text_input(key="glive_outputs").set_value("16").run()
        at.sidebar.slider(key="glive_duration").set_value(8).run()
        at.button(key="glivebtn_start").click().run()
        assert not at.exception, at.exception
        handle = run_manager().get(at.session_state["watch"])
        assert handle is not None and handle.config.target == f"{server.url}/v1"

        def split_drawn(a: AppTest) -> bool:
            return any(t.get("name") == "prefill (reported)"
                       for spec in chart_specs(a) for t in spec["data"])
        # live: the server's split is drawn while the run is in flight
        rerun_until(at, lambda a: split_drawn(a) or handle.done(), timeout=120)
        assert split_drawn(at) and not handle.done(), "the split was not drawn live"
        rerun_until(at, lambda a: handle.done() and any(
            "Verdict" in i.value for i in a.info), timeout=120)
        assert not at.exception
    finally:
        server.stop()
    result = handle.result()
    assert result.status == "completed", result.failure
    assert any(f"your server at {server.url}/v1" in m.value for m in at.markdown)
    ttft = chart_with(at, "prefill (reported)")
    names = [t["name"] for t in ttft["data"]]
    assert names == ["network (measured)", "queue (reported)", "prefill (reported)"], names
    # the p99 bar is the server split's own p99 request mix, summing to its TTFT p99 bar
    e2e = chart_with(at, "decode (reported)")
    assert {t["name"] for t in e2e["data"]} >= {"decode (reported)", "other (derived)"}
    metrics = chart_with(at, "client: requests in flight")
    drawn = {t["name"] for t in metrics["data"]}
    assert "server: running" in drawn and "server: waiting" in drawn, drawn
    assert any("server split" in t.value or "split" in t.value for t in at.text)
