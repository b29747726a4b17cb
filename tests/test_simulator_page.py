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


def _a_recorded_result(name_seed: int = 0):
    """A completed closed-loop run's result, its requests made by the simulator (no engine
    run: this tests the listing, not the replay)."""
    from latency.analysis.result import RunResult
    from latency.core.config import RunConfig
    from latency.simulation.simulator import ServiceModel, SimConfig, simulate

    rows = simulate(SimConfig(rate=1, clients=1, requests=300, seed=name_seed).checked(),
                    ServiceModel(forward_ms=3, dist="exponential").checked())
    return RunResult(config=RunConfig(model="synthetic", concurrency=1, requests=270,
                                      warmup=30), environment={}, status="completed",
                     log=rows)


def test_a_run_saved_a_moment_ago_is_listed_at_once():
    """The picker lists the saved history as it is now: a run saved right after the page
    was shown (a user who just finished a run and switches page) is listed on the next
    rerun, not after a cache's timeout — and so is the next one."""
    from latency.storage.store import RunStore

    at = simulator()  # the history as it was, listed (and cached)
    for seed in (1, 2):
        run_id = RunStore().save(_a_recorded_result(seed), name=f"saved a moment ago {seed}")
        at.run()
        options = at.sidebar.selectbox(key="sim_source").options
        assert any(run_id in o for o in options), (run_id, options)
        again = simulator()  # a page opened anew lists it too
        assert any(run_id in o for o in again.sidebar.selectbox(key="sim_source").options)


def _metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label.startswith(label))


def test_near_saturation_the_headline_p99_is_the_exact_one():
    """M/M/1 at ρ 0.95 (10 ms, 95 req/s): the exact p99 is 921 ms. 40,000 simulated requests
    put it at 660 ms — a queue this close to saturation settles slowly — so the page
    simulates longer there (× 1/(1 − ρ)², within its budget) and its headline is within
    10 % of the exact value, with nothing said to distrust; at ρ 0.98, where even the budget
    is too short, it says so plainly, naming the exact figure."""
    at = simulator()
    at.sidebar.slider(key="sim_rate").set_value(95).run()
    assert not at.exception
    exact = queueing.mmc_response_percentile(0.095, 10.0, 1, 0.99)
    assert exact == pytest.approx(921, abs=1)
    headline = next(m for m in at.metric if m.label.startswith("p99"))
    value, unit = headline.value.split()
    p99 = float(value) * (1000 if unit == "s" else 1)
    assert p99 == pytest.approx(exact, rel=0.10), headline.value
    caption = next(c.value for c in at.caption if "Simulated over" in c.value)
    assert "simulated longer than the usual 40,000" in caption
    assert not any("Too short" in w.value for w in at.warning)
    at.sidebar.slider(key="sim_rate").set_value(98).run()
    warning = " ".join(w.value for w in at.warning)
    assert "Too short to trust" in warning and "below the exact" in warning
    assert fmt.duration(queueing.mmc_response_percentile(0.098, 10.0, 1, 0.99)) in warning


def test_at_overload_the_reason_is_the_overload_and_no_longer_run_is_advised():
    """At ρ ≥ 1 there is no closed form because the queue grows without bound — not because
    of batching or anything else the setting has — and no length of simulation settles it,
    so nothing advises running longer. Just below 1 the utilisation never reads 1.00."""
    at = simulator()
    at.sidebar.slider(key="sim_batch").set_value(8).run()  # 41.5 ms a batch of 8
    at.sidebar.slider(key="sim_rate").set_value(192).run()  # ρ = 192 × 41.5 / 8000 = 0.996
    assert _metric(at, "utilisation") == "0.996" and not at.error
    for rate in (250, 400):  # ρ 1.30, 2.08
        at.sidebar.slider(key="sim_rate").set_value(rate).run()
        assert not at.exception and any("Unstable" in e.value for e in at.error)
        theory = next(c.value for c in at.caption if "Queueing theory" in c.value)
        assert "no closed form applies: overload: utilisation" in theory
        assert "batching" not in theory
        text = " ".join(x.value for x in [*at.caption, *at.warning, *at.markdown])
        assert "longer for a trustworthy tail" not in text and "run about" not in text
        assert "no length of simulation pins its p99 down" in theory
