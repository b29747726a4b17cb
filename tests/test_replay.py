"""Replaying a recorded run: the CLI (``simulate --from-run``), the Python API
(``latency.simulate(from_run=...)``) and the Load Simulator page build the same simulated
system from the same run, and the settings they take from it are the run's own."""
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import latency
from latency.cli.main import main
from latency.core.config import RunConfig

APP = str(Path(__file__).resolve().parents[1] / "app.py")


@pytest.fixture(scope="module")
def recorded():
    """A closed loop of 8 on 2 replicas, batch ≤ 4 / 2 ms, 2 preprocess workers, saved."""
    from latency.execution.process import run
    from latency.storage.store import RunStore

    result = run(RunConfig(model="synthetic",
                           model_args={"forward_ms": 2, "preprocess_ms": 1,
                                       "postprocess_ms": 0.2},
                           concurrency=8, replicas=2, batch_size=4, max_batch_delay_ms=2,
                           preprocess_workers=2, requests=400, warmup=10))
    return result, RunStore().save(result, name="replayed three ways")


def cli_header(capsys, *flags: str) -> str:
    assert main(["simulate", *flags, "--requests", "4000"]) == 0
    return capsys.readouterr().out.splitlines()[0]


def test_a_replay_takes_the_runs_own_setup_in_the_cli_and_the_api(recorded, capsys):
    result, run_id = recorded
    c = result.config
    sim = latency.simulate(from_run=result, requests=4000)
    cfg = sim.config
    assert (cfg.clients, cfg.replicas, cfg.batch_size, cfg.max_batch_delay_ms,
            cfg.preprocess_workers) == (8, 2, 4, 2, 2)
    assert (cfg.replicas, cfg.batch_size, cfg.preprocess_workers) == (
        _get(c, "replicas"), _get(c, "batch_size"), _get(c, "preprocess_workers"))
    by_id = latency.simulate(from_run=run_id, requests=4000).config
    assert by_id.describe() == cfg.describe()
    assert f"SIMULATED (no model ran): {cfg.describe()}, " in cli_header(
        capsys, "--from-run", run_id)
    # an open-loop replay at a chosen rate keeps the recorded server
    at_rate = latency.simulate(from_run=result, rate=150, requests=4000).config
    assert at_rate.clients is None and at_rate.describe().startswith(
        "open 150 req/s poisson, 2 replica(s), batch ≤ 4 / 2 ms, 2 preprocess worker(s)")


def test_the_cli_the_api_and_the_page_replay_a_run_with_the_same_config(recorded, capsys):
    """The page's sliders are the replay's overrides: with the same values the three surfaces
    simulate the same system (the run's preprocess pool included) at the same utilisation."""
    _, run_id = recorded
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/load_simulator.py").run()
    at.sidebar.selectbox(key="sim_source").set_value(f"history:{run_id}").run()
    at.sidebar.toggle(key="sim_as_recorded").set_value(False)  # open loop at the page's rate
    at.sidebar.slider(key="sim_replicas").set_value(3)
    at.sidebar.slider(key="sim_batch").set_value(2)
    at.sidebar.slider(key="sim_delay").set_value(1.0).run()
    at.sidebar.slider(key="sim_rate").set_value(150).run()
    assert not at.exception and not at.error
    caption = next(c.value for c in at.caption if "Simulated setting:" in c.value)
    page_rho = next(m.value for m in at.metric if m.label.startswith("utilisation"))
    flags = ["--rate", "150", "--replicas", "3", "--batch-size", "2",
             "--max-batch-delay-ms", "1"]
    api = latency.simulate(from_run=run_id, rate=150, replicas=3, batch_size=2,
                           max_batch_delay_ms=1, requests=4000)
    described = api.config.describe()
    assert described == "open 150 req/s poisson, 3 replica(s), batch ≤ 2 / 1 ms, " \
                        "2 preprocess worker(s)"
    assert f"Simulated setting: {described}." in caption
    header = cli_header(capsys, "--from-run", run_id, *flags)
    assert f"SIMULATED (no model ran): {described}, " in header
    assert header.endswith(f"utilisation {page_rho}") and f"{api.utilisation:.2f}" == page_rho


def test_a_run_chosen_on_the_page_replays_as_it_ran(recorded, capsys):
    """Choosing the run sets the server sliders to its replicas and batching and its load as
    recorded (its 8 clients): the page simulates what ``simulate --from-run RUN`` — no
    ``--rate`` — simulates; with the load turned to the page's rate, what ``--rate R`` does."""
    _, run_id = recorded
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/load_simulator.py").run()
    at.sidebar.selectbox(key="sim_source").set_value(f"history:{run_id}").run()
    assert not at.exception and not at.error
    assert (at.sidebar.slider(key="sim_replicas").value, at.sidebar.slider(key="sim_batch").value,
            at.sidebar.slider(key="sim_delay").value) == (2, 4, 2.0)
    assert at.sidebar.toggle(key="sim_as_recorded").value is True

    def described() -> str:
        caption = next(c.value for c in at.caption if "Simulated setting:" in c.value)
        return caption.split("Simulated setting: ")[1].split(". ")[0]

    as_ran = described()
    assert as_ran.startswith("closed 8 clients, 2 replica(s)")
    assert f"SIMULATED (no model ran): {as_ran}, " in cli_header(capsys, "--from-run", run_id)
    at.sidebar.toggle(key="sim_as_recorded").set_value(False).run()
    assert not at.exception and not at.error
    rate = at.sidebar.slider(key="sim_rate").value
    assert f"SIMULATED (no model ran): {described()}, " in cli_header(
        capsys, "--from-run", run_id, "--rate", str(rate))


def test_a_replay_refuses_bad_overrides_in_one_line(recorded):
    from latency.core.errors import ConfigError
    from latency.simulation.replay import replay_config

    result, _ = recorded
    for overrides, named in (({"requests": 10**9}, "--requests"),
                             ({"replicas": 0}, "--replicas"),
                             ({"rate": 10, "clients": 4}, "exclude each other"),
                             ({"replicsa": 2}, "unknown simulation setting")):
        with pytest.raises(ConfigError, match=named):
            replay_config(result, **overrides)


def _get(config, key):
    return config[key] if isinstance(config, dict) else getattr(config, key)
