"""The Optimisation Lab's and the Load Simulator's controls (``lab_*``, ``wi_*``, ``sim_*``) are
created with ``ui.controls.default``, as the Live Profiler's are (issue 27, item 13): a control
whose value was just set through the Session State API — a follower's copy of the presenter's
settings, a lesson step's preset, a recorded run's setup taken by the simulator — is created
without a default, so Streamlit logs no "The widget with key "lab_batch" was created with a
default value but also had its value set via the Session State API", and shows the value set.
"""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
SIMULATOR = str(ROOT / "views" / "load_simulator.py")
KINDS = ("slider", "select_slider", "selectbox", "radio", "number_input", "multiselect",
         "toggle")


def warned(seen: list[str]) -> list[str]:
    return [m for m in seen if "Session State API" in m]


def shown(container) -> dict:
    return {w.key: w.value for kind in KINDS for w in getattr(container, kind)}


def _lab_follower(values: dict) -> None:
    """A follower's Lab sidebar: the presenter's settings set through the API before the
    controls render (ui/room.follow does it on every render of a follower)."""
    import streamlit as st

    from ui.optimisation_lab import controls

    for key, value in values.items():
        st.session_state[key] = value
    controls()


def test_a_followers_lab_controls_log_no_warning_and_show_the_presenters_values(
        policy_warnings):
    # every Lab control away from its default (the B arm's "same as A" too)
    values = {"lab_model": "tabular-mlp", "lab_pre": "fast", "lab_post": "fast",
              "lab_batch": 8, "lab_delay": 40.0, "lab_replicas": 2, "lab_threads": 2,
              "lab_workers": 1, "lab_concurrency": 16, "lab_block_s": 3.0, "lab_pairs": 4,
              "lab_b_levers": ["int8"], "lab_b_pre": "naive", "lab_b_post": "naive",
              "lab_b_workers": 4, "lab_b_replicas": 3, "lab_b_batch": 16}
    at = AppTest.from_function(_lab_follower, args=(values,), default_timeout=60)
    at.run()
    assert not at.exception
    assert not warned(policy_warnings), policy_warnings
    assert {k: v for k, v in shown(at.sidebar).items() if k in values} == values
    at.run()  # a render without the API keeps them
    assert {k: v for k, v in shown(at.sidebar).items() if k in values} == values


def test_a_lesson_steps_link_sets_the_lab_without_a_warning(policy_warnings):
    """``/lab?lesson=help`` loads step 2's preset through the API before the controls."""
    from latency.workshop.practice import helping_plan

    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params["lesson"] = "help"
    at.run()
    at.switch_page("views/optimisation_lab.py").run()
    assert not at.exception
    assert not warned(policy_warnings), policy_warnings
    a = helping_plan().baseline
    controls = shown(at.sidebar)
    assert (controls["lab_batch"], controls["lab_delay"], controls["lab_block_s"],
            controls["lab_pairs"]) == (a.batch_size, a.max_batch_delay_ms, a.duration_s,
                                       helping_plan().pairs)


def _an_ab():
    """A finished A/B made of simulated requests (no engine run: this tests the controls)."""
    from latency.analysis.ab import merge
    from latency.analysis.result import RunResult
    from latency.core.config import RunConfig
    from latency.simulation.simulator import ServiceModel, SimConfig, simulate

    def block(seed: int, forward_ms: float) -> RunResult:
        rows = simulate(SimConfig(rate=1, clients=2, requests=300, seed=seed).checked(),
                        ServiceModel(forward_ms=forward_ms, dist="exponential").checked())
        return RunResult(config=RunConfig(model="synthetic", concurrency=2, requests=270,
                                          warmup=30), environment={}, status="completed",
                         log=rows)

    return merge({"pairs": 1}, [("A", block(1, 4.0)), ("B", block(2, 2.0))])


def _whatif_follower(values: dict) -> None:
    import streamlit as st

    from tests.test_lab_simulator_widget_defaults import _an_ab
    from ui.optimisation_lab import whatif_panel

    for key, value in values.items():
        st.session_state[key] = value
    whatif_panel(_an_ab())


def test_a_followers_what_if_controls_log_no_warning(policy_warnings):
    values = {"wi_arm": "B", "wi_comp": "preprocess", "wi_pct": 20,
              "wi_load_B": "Poisson at a rate", "wi_rate_B": 55.0}
    at = AppTest.from_function(_whatif_follower, args=(values,), default_timeout=60)
    at.run()
    assert not at.exception
    assert not warned(policy_warnings), policy_warnings
    assert {k: v for k, v in shown(at).items() if k in values} == values


def _simulator_follower(values: dict, page: str) -> None:
    import runpy

    import streamlit as st

    for key, value in values.items():
        st.session_state[key] = value
    runpy.run_path(page)


def test_a_followers_simulator_controls_log_no_warning(policy_warnings):
    values = {"sim_service": 12.5, "sim_dist": "lognormal", "sim_cv": 0.5, "sim_per_item": 60,
              "sim_arrival": "constant", "sim_replicas": 2, "sim_batch": 4, "sim_delay": 2.0,
              "sim_rate": 40, "sim_slo": 80.0, "sim_val_len": 20}
    at = AppTest.from_function(_simulator_follower, args=(values, SIMULATOR),
                               default_timeout=60)
    at.run()
    assert not at.exception
    assert not warned(policy_warnings), policy_warnings
    assert {k: v for k, v in shown(at.sidebar).items() if k in values} == \
        {k: v for k, v in values.items() if k != "sim_val_len"}
    assert at.slider(key="sim_val_len").value == 20


def test_taking_a_recorded_runs_setup_logs_no_warning(policy_warnings):
    """Choosing a recorded run sets the server sliders to its replicas and batching through
    the API (``take_run_setup``)."""
    from latency.analysis.result import RunResult
    from latency.core.config import RunConfig
    from latency.simulation.simulator import ServiceModel, SimConfig, simulate
    from latency.storage.store import RunStore

    rows = simulate(SimConfig(rate=1, clients=1, replicas=2, requests=300, seed=3).checked(),
                    ServiceModel(forward_ms=3, dist="exponential").checked())
    run_id = RunStore().save(RunResult(
        config=RunConfig(model="synthetic", concurrency=1, requests=270, warmup=30,
                         replicas=2, batch_size=4, max_batch_delay_ms=2.0),
        environment={}, status="completed", log=rows), name="a run with a setup")
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/load_simulator.py").run()
    at.sidebar.selectbox(key="sim_source").set_value(f"history:{run_id}").run()
    assert not at.exception and not at.error
    assert not warned(policy_warnings), policy_warnings
    assert (at.sidebar.slider(key="sim_replicas").value, at.sidebar.slider(key="sim_batch").value,
            at.sidebar.slider(key="sim_delay").value) == (2, 4, 2.0)
