"""The Load Simulator page through AppTest: sliders change the figures; unstable settings say
so plainly; capacity answers appear."""
import json
import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from latency.core import fmt
from latency.simulation import queueing
from tests.conftest import rerun_until

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def simulator() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/load_simulator.py").run()
    assert not at.exception
    return at


def chart_specs(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_sliders_change_the_predicted_figures():
    at = simulator()
    assert any("simulated" in c.value for c in at.caption)
    before = chart_specs(at)
    p99_before = next(m.value for m in at.metric if m.label.startswith("p99"))
    at.sidebar.slider(key="sim_rate").set_value(90).run()  # ρ 0.7 → 0.9
    after = chart_specs(at)
    p99_after = next(m.value for m in at.metric if m.label.startswith("p99"))
    assert before != after and p99_before != p99_after
    assert next(m.value for m in at.metric if m.label.startswith("utilisation")) == "0.90"
    curve = next(s for s in after if any("hockey" in str(t.get("name", "")) or
                                         "simulated" in str(t.get("name", ""))
                                         for t in s["data"]))
    names = {t["name"] for t in curve["data"]}
    assert {"p50 (simulated)", "p99 (simulated)", "your setting"} <= names
    assert "p99 (M/M/c theory)" in names  # exponential service, batch 1: theory overlaid


def test_headline_marker_curve_and_closed_form_describe_one_queue():
    """At the default (M/M/1, ρ 0.7) the headline p99, the marker, the curve through it and
    the closed form agree: the marker is a vertex of the p99 line with the headline's value,
    and the closed form lies inside the headline's 95 % interval and inside every curve
    point's interval that the page draws."""
    at = simulator()
    curve = next(s for s in chart_specs(at)
                 if any(t.get("name") == "your setting" for t in s["data"]))
    line = next(t for t in curve["data"] if t["name"] == "p99 (simulated)")
    theory = next(t for t in curve["data"] if t["name"] == "p99 (M/M/c theory)")
    mark = next(t for t in curve["data"] if t["name"] == "your setting")
    rho, marker_p99 = mark["x"][1], mark["y"][1]
    i = line["x"].index(rho)  # a vertex of the line, not a point floating near it
    assert line["y"][i] == marker_p99
    headline = next(m.value for m in at.metric if m.label.startswith("p99"))
    assert headline == fmt.duration(marker_p99)
    closed = queueing.mmc_response_percentile(0.070, 10.0, 1, 0.99)
    assert theory["y"][i] == pytest.approx(closed)
    caption = next(c.value for c in at.caption if "95 % interval" in c.value)
    assert "closed form" in caption and fmt.duration(closed) in caption
    lo = marker_p99 - line["error_y"]["arrayminus"][i]
    hi = marker_p99 + line["error_y"]["array"][i]
    assert lo <= closed <= hi, (lo, closed, hi)
    drawn = missed = 0
    for y, up, down, th in zip(line["y"], line["error_y"]["array"],
                               line["error_y"]["arrayminus"], theory["y"]):
        if up is None or (isinstance(up, float) and math.isnan(up)):
            continue
        drawn += 1
        missed += not y - down <= th <= y + up
    # each interval covers ~95 % of the time: of ~10 drawn, more than 2 misses is a ~1 % event
    assert drawn >= 5 and missed <= 2, (drawn, missed)


def test_a_batch_costs_its_requests_so_batching_is_not_free():
    """Batch 8 on 2 replicas at 115 req/s would read ρ 0.07 with no per-request
    cost. With the default (45 % of a batch-1 forward per extra request, the sample CNN's
    measured slope) a batch of 8 takes 10 × (1 + 0.45 × 7) = 41.5 ms, so ρ = 115 × 41.5 /
    (8 × 2) / 1000 = 0.30; at 0 % it is the old 0.07."""
    at = simulator()
    at.sidebar.slider(key="sim_replicas").set_value(2)
    at.sidebar.slider(key="sim_batch").set_value(8).run()
    at.sidebar.slider(key="sim_rate").set_value(115).run()
    rho = lambda: next(m.value for m in at.metric if m.label.startswith("utilisation"))  # noqa
    assert rho() == "0.30"
    at.sidebar.slider(key="sim_per_item").set_value(0).run()
    assert rho() == "0.07"
    assert not at.exception


def test_an_unstable_setting_shows_the_unstable_message():
    at = simulator()
    at.sidebar.slider(key="sim_rate").set_value(200).run()  # ρ = 2
    assert any("Unstable" in e.value for e in at.error)
    assert all("nan" not in m.value.lower() and "inf" not in m.value.lower()
               for m in at.metric)
    assert not at.exception


def test_capacity_planning_answers():
    at = simulator()
    at.toggle(key="sim_plan").set_value(True).run()
    text = " ".join(m.value for m in at.markdown)
    assert "Highest arrival rate" in text and "req/s" in text and "Fewest replicas" in text


def test_validate_runs_the_engine_and_sets_measured_against_predicted():
    at = simulator()
    at.sidebar.slider(key="sim_service").set_value(5.0)
    at.sidebar.slider(key="sim_rate").set_value(100)  # rho 0.5
    at.slider(key="sim_val_len").set_value(5).run()
    next(b for b in at.button if b.label.startswith("Validate")).click().run()
    assert not at.exception and not at.error
    rerun_until(at, lambda at: any("| p99 |" in m.value for m in at.markdown))
    table = next(m.value for m in at.markdown if "| p99 |" in m.value)
    assert "predicted (calibrated)" in table and "measured" in table
    assert not at.exception


def test_bursty_arrivals_queue_more_than_poisson():
    at = simulator()
    p99 = lambda at: next(m.value for m in at.metric if m.label.startswith("p99"))  # noqa: E731
    at.sidebar.slider(key="sim_rate").set_value(50).run()
    poisson = p99(at)
    at.sidebar.selectbox(key="sim_arrival").set_value("bursty").run()
    assert not at.exception and p99(at) != poisson
    assert any("bursty" in c.value for c in at.caption)  # validation says why it cannot run


def test_service_times_from_a_saved_history_run(tmp_path):
    from latency.core.config import RunConfig
    from latency.execution.process import run
    from latency.storage.store import RunStore

    result = run(RunConfig(model="synthetic", model_args={"forward_ms": 4, "preprocess_ms": 0,
                                                          "postprocess_ms": 0},
                           concurrency=1, requests=150, warmup=5))
    run_id = RunStore().save(result, name="recorded for the simulator")
    at = simulator()
    box = at.sidebar.selectbox(key="sim_source")
    key = next(o for o in box.options if run_id in o)
    assert "history" in key
    box.set_value(f"history:{run_id}").run()
    assert not at.exception and not at.error
    # its load as recorded is its one client; open-loop arrivals at the page's rate instead
    at.sidebar.toggle(key="sim_as_recorded").set_value(False).run()
    rho = float(next(m.value for m in at.metric if m.label.startswith("utilisation")))
    # 70 req/s × the service the run measured (pre + forward + post, ~4 ms; more on a busy
    # machine, where the recorded times are what the simulator resamples)
    served_ms = sum(result.summary.components_ms[c].mean or 0.0
                    for c in ("preprocess", "forward", "postprocess"))
    assert rho == pytest.approx(70 * served_ms / 1000, rel=0.1, abs=0.01)
