"""One answer to "does a closed form apply, and which?": the CLI and the Load Simulator page
print the same formula and figures for the same setting, or the same reason there is none."""
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from latency.cli.main import main
from latency.simulation import queueing

APP = str(Path(__file__).resolve().parents[1] / "app.py")

#: (page sliders, the CLI's flags for the same setting, what the answer must name)
CASES = [
    ({"sim_dist": "lognormal", "sim_replicas": 2, "sim_rate": 140},
     ["--service-dist", "lognormal", "--service-cv", "1", "--replicas", "2", "--rate", "140"],
     "closed form G/G/2 (Allen–Cunneen)"),
    ({"sim_rate": 70}, ["--service-dist", "exponential", "--rate", "70"], "closed form M/M/1"),
    ({"sim_dist": "constant", "sim_rate": 70}, ["--service-dist", "constant", "--rate", "70"],
     "closed form M/D/1"),
    ({"sim_dist": "lognormal", "sim_cv": 2.0, "sim_rate": 60},
     ["--service-dist", "lognormal", "--service-cv", "2", "--rate", "60"], "closed form M/G/1"),
    ({"sim_rate": 200}, ["--rate", "200"], "no closed form applies: overload: utilisation"),
    ({"sim_arrival": "bursty", "sim_rate": 50}, ["--arrival", "bursty", "--rate", "50"],
     "no closed form applies: bursty arrivals"),
    ({"sim_per_item": 0, "sim_batch": 4, "sim_rate": 70},
     ["--batch-size", "4", "--rate", "70"], "no closed form applies: batching"),
]


def cli_answer(flags: list[str], capsys: pytest.CaptureFixture) -> str:
    assert main(["simulate", "--service-ms", "10", "--requests", "3000", *flags]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "closed form" in x)
    return line.split(" (simulated:")[0]


def page_caption(sliders: dict) -> str:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/load_simulator.py").run()
    for key, value in sliders.items():  # the rate last: its range follows the others
        widget = (at.sidebar.selectbox(key=key) if key in ("sim_dist", "sim_arrival")
                  else at.sidebar.slider(key=key))
        widget.set_value(value).run()
    assert not at.exception
    return next(c.value for c in at.caption if "Queueing theory" in c.value)


@pytest.mark.parametrize("sliders,flags,named", CASES, ids=[c[2] for c in CASES])
def test_the_cli_and_the_page_give_the_same_closed_form(sliders, flags, named, capsys):
    answer = cli_answer(flags, capsys)
    assert answer.startswith(named), answer
    assert answer in page_caption(sliders)


def test_the_figures_are_the_formulas():
    """The figures printed are the queueing module's: Allen–Cunneen for a lognormal (cv 1)
    forward of 10 ms on 2 replicas at 140 req/s, P-K for M/D/1."""
    import latency
    from latency.core import fmt

    ac = latency.simulate(140, service_ms=10, service_dist="lognormal", replicas=2,
                          requests=2000).closed_form
    theory = queueing.allen_cunneen(0.14, 10, 2, 1.0, 1.0)
    assert not ac.exact and ac.wait_mean_ms == pytest.approx(theory.wait_mean)
    assert f"mean response {fmt.duration(theory.response_mean)}" in ac.sentence()
    md1 = latency.simulate(70, service_ms=10, service_dist="constant", requests=2000)
    assert md1.closed_form.wait_mean_ms == pytest.approx(queueing.md1(0.07, 10).wait_mean)
    assert md1.to_dict()["closed_form"]["model"] == "M/D/1"
    overloaded = latency.simulate(200, service_ms=10, requests=2000)
    assert overloaded.to_dict()["closed_form"] is None
    assert overloaded.to_dict()["no_closed_form"].startswith("overload")


def test_the_simulator_docs_name_every_closed_form_the_simulator_chooses():
    """docs/simulator.md says which closed forms the CLI and the page set beside a
    simulation: every model ``closed_form`` can answer with."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "simulator.md").read_text()
    text = " ".join(text.split())
    for model in ("M/M/c", "M/D/1", "M/G/1", "Allen–Cunneen"):
        assert text.count(model) >= 2, f"docs/simulator.md names {model} once or not at all"
    assert "the M/M/c closed form where one applies" not in text


def _recorded_service():
    """Service resampled from a (simulated) recorded run, arrivals recorded from it too."""
    from latency.simulation.simulator import ServiceModel, SimConfig, simulate

    rows = simulate(SimConfig(rate=50, requests=500),
                    ServiceModel(forward_ms=10, dist="exponential", preprocess_ms=1,
                                 postprocess_ms=0.5))
    return ServiceModel.from_rows(rows), rows


@pytest.mark.parametrize("case", ["batching", "bursty", "constant", "recorded", "stages",
                                  "resampled", "replicas", "preprocess pool"])
def test_at_overload_the_reason_is_the_overload_whatever_else_the_setting_has(case):
    """ρ ≥ 1 has no closed form because the queue grows without bound; batching, the
    arrivals, a chain of stages or resampled service are reasons only for a stable queue.
    Just below 1 the utilisation never prints as 1.00, which would read as overload."""
    from latency.simulation.calibration import recorded_arrivals
    from latency.simulation.closed_form import closed_form
    from latency.simulation.simulator import ServiceModel, SimConfig
    from latency.simulation.utilisation import utilisation, utilisation_text

    svc = ServiceModel(forward_ms=10, dist="exponential")
    settings: dict = {}
    if case == "batching":
        svc, settings = ServiceModel(forward_ms=10, forward_per_item_ms=4.5), {"batch_size": 8}
    elif case in ("bursty", "constant"):
        settings = {"arrival": case}
    elif case == "stages":
        svc = ServiceModel(forward_ms=10, preprocess_ms=2, postprocess_ms=1, network_ms=0.3)
    elif case in ("recorded", "resampled", "preprocess pool"):
        svc, rows = _recorded_service()
        if case == "recorded":
            times, _ = recorded_arrivals(rows)
            settings = {"arrival": "recorded", "arrival_times_ms": times}
        elif case == "preprocess pool":
            settings = {"preprocess_workers": 2, "replicas": 4}
    elif case == "replicas":
        svc, settings = ServiceModel(forward_ms=10, dist="lognormal", cv=2), {"replicas": 3}
    capacity = 1000 / (svc.mean_service_ms(settings.get("batch_size", 1))
                       / settings.get("batch_size", 1)) * settings.get("replicas", 1)
    if case == "preprocess pool":
        capacity = min(capacity, 2 * 1000 / svc.mean_preprocess_ms())
    for factor in (1.001, 1.3, 3.0):
        cfg = SimConfig(rate=capacity * factor, **settings).checked()
        assert utilisation(cfg, svc.checked()) == pytest.approx(factor, rel=1e-6)
        theory = closed_form(cfg, svc)
        assert not theory.applies and theory.reason.startswith("overload: utilisation"), (
            case, theory.reason)
    below = utilisation(SimConfig(rate=capacity * 0.996, **settings).checked(), svc)
    assert utilisation_text(below) == "0.996" and utilisation_text(0.9999) == "0.999"
    assert utilisation_text(0.7) == "0.70" and utilisation_text(1.0) == "1.00"
