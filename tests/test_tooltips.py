"""The dashboard's tooltips for run settings are the settings' own help: what ``--help`` says
(``latency.core.config.field_help``), not a second text that drifts from it."""
from pathlib import Path

from streamlit.testing.v1 import AppTest

from latency.core.config import field_help

APP = str(Path(__file__).resolve().parents[1] / "app.py")

#: the Live Profiler's widgets that set a RunConfig field: widget key → field
LIVE_PROFILER = {"model": "model", "device": "device", "dtype": "dtype", "threads": "threads",
                 "replicas": "replicas", "batch": "batch_size", "delay": "max_batch_delay_ms",
                 "concurrency": "concurrency", "duration": "duration_s",
                 "transport": "transport"}
OPEN_LOOP = {"rate": "rate", "arrival": "arrival"}
HTTP = {"payload": "payload", "net_rtt": "net_rtt_ms", "net_jitter": "net_jitter_ms",
        "net_bw": "net_bandwidth_mbps"}
#: the Optimisation Lab's baseline widgets that set a RunConfig field
LAB = {"lab_pre": "pre", "lab_post": "post", "lab_batch": "batch_size",
       "lab_delay": "max_batch_delay_ms", "lab_replicas": "replicas", "lab_threads": "threads",
       "lab_workers": "preprocess_workers", "lab_concurrency": "concurrency"}


def widgets(at: AppTest) -> dict[str, object]:
    kinds = ("slider", "select_slider", "selectbox", "radio", "number_input")
    return {w.key: w for kind in kinds for w in getattr(at.sidebar, kind)}


def assert_tooltips(at: AppTest, expected: dict[str, str]) -> None:
    shown = widgets(at)
    for key, name in expected.items():
        assert key in shown, f"no widget {key!r}"
        assert shown[key].help == field_help(name), f"{key}: its tooltip is not {name}'s help"


def test_live_profiler_tooltips_are_the_fields_help():
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/live_profiler.py").run()
    assert not at.exception
    assert_tooltips(at, LIVE_PROFILER)
    at.sidebar.radio(key="mode").set_value("open loop").run()
    at.sidebar.radio(key="transport").set_value("HTTP").run()
    assert not at.exception
    assert_tooltips(at, {**OPEN_LOOP, **HTTP})


def test_ray_serve_tooltips_are_the_fields_help(monkeypatch):
    monkeypatch.setattr("ui.controls.ray_installed", lambda: True)
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/live_profiler.py").run()
    assert_tooltips(at, {"backend": "backend"})
    at.sidebar.radio(key="backend").set_value("Ray Serve").run()
    assert not at.exception
    assert_tooltips(at, {"ray_preprocess": "ray_preprocess"})


def test_optimisation_lab_tooltips_are_the_fields_help():
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/optimisation_lab.py").run()
    assert not at.exception
    assert_tooltips(at, LAB)


#: the Load Simulator's widgets that set a simulated setting: widget key → field
#: (``latency.simulation.config.setting_help``: what ``simulate --help`` says)
SIMULATOR = {"sim_service": "forward_ms", "sim_dist": "dist", "sim_arrival": "arrival",
             "sim_replicas": "replicas", "sim_batch": "batch_size",
             "sim_delay": "max_batch_delay_ms"}


def test_load_simulator_tooltips_are_the_settings_help():
    from latency.simulation.config import setting_help

    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/load_simulator.py").run()
    at.sidebar.selectbox(key="sim_dist").set_value("lognormal").run()
    assert not at.exception
    shown = widgets(at)
    for key, name in {**SIMULATOR, "sim_cv": "cv"}.items():
        assert shown[key].help == setting_help(name), f"{key}: its tooltip is not {name}'s help"
    assert shown["sim_rate"].help.startswith(setting_help("rate") + " ")
    # where a simulated setting is a RunConfig field, the tooltip is that field's help too
    for key in ("sim_replicas", "sim_batch", "sim_delay"):
        assert shown[key].help == field_help(SIMULATOR[key])
