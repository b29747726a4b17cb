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
