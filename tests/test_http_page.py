"""The Live Profiler's network controls through AppTest: an HTTP run with an emulated RTT shows
the network segment in the stacked bars, and the page labels the delay as emulated."""
import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.conftest import rerun_until

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def test_http_transport_with_emulated_rtt_shows_network_in_the_bars():
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/live_profiler.py").run()
    assert "Transport" in {r.label for r in at.sidebar.radio}
    at.sidebar.radio(key="transport").set_value("HTTP").run()
    rtt = at.sidebar.slider(key="net_rtt")
    assert "emulated" in rtt.label and rtt.help
    rtt.set_value(30.0)
    at.sidebar.number_input(key="pre_ms").set_value(0.0)
    at.sidebar.number_input(key="fwd_ms").set_value(2.0)
    at.sidebar.number_input(key="post_ms").set_value(0.0)
    at.sidebar.slider(key="duration").set_value(2).run()
    next(b for b in at.button if b.label == "Start").click().run()
    assert not at.exception and not at.error
    rid = at.session_state["watch"]
    done = lambda at: any("completed" in m.value and rid in m.value  # noqa: E731 - its status
                          for m in at.markdown)
    rerun_until(at, done)
    assert done(at), [m.value for m in at.markdown]
    assert any("EMULATED" in c.value and "RTT 30 ms" in c.value for c in at.caption)
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    bars = next(s for s in specs if {t.get("name") for t in s["data"]} >= {"network", "forward"})
    net = next(t for t in bars["data"] if t.get("name") == "network")
    fwd = next(t for t in bars["data"] if t.get("name") == "forward")
    assert 30.0 <= net["y"][0] < 40.0  # the mean bar: emulated 30 ms + loopback HTTP
    assert 1.8 < fwd["y"][0] < 3.0  # the server's own forward time, from Server-Timing
    assert not at.exception
