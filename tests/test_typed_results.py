"""A run's config and timings stay typed after the run (``RunConfig``, ``Timings``): out of the
engine, back from a run JSON and back from the history, so a misspelt field fails where it is
read. A finding keeps its kind through the history and the run JSON. And one run's load is
named the same way on every surface: the CLI's summary, the history listing, the Compare page's
legend and the Live Profiler's heading."""
import contextlib
import dataclasses
import io
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from latency.analysis.snapshot import build_snapshot
from latency.analysis.timings import Timings
from latency.cli.main import main
from latency.core.config import RunConfig
from latency.core.describe import load_description
from latency.execution.engine import execute
from latency.storage.run_files import load_result, load_run, stored_run_from_json
from latency.storage.store import RunStore

APP = str(Path(__file__).resolve().parents[1] / "app.py")


@pytest.fixture(scope="module")
def failing_open_loop():
    """An open loop with failing requests: warnings of several kinds (errors, too_few)."""
    return execute(RunConfig(model="synthetic",
                             model_args={"forward_ms": 0.5, "error_rate": 0.2,
                                         "preprocess_ms": 0.2, "postprocess_ms": 0.2},
                             rate=300.0, requests=120, warmup=0, seed=2))


def test_config_and_timings_are_typed_after_the_run(failing_open_loop):
    r = failing_open_loop
    assert isinstance(r.config, RunConfig) and isinstance(r.timings, Timings)
    assert r.config.rate == 300.0 and r.config.mode == "open"
    assert r.timings.measure_start_ns < r.timings.measure_end_ns
    assert r.timings.offered_requests == 120
    with pytest.raises(AttributeError):
        r.config.batchsize  # noqa: B018 - a misspelt field fails, not a silent None
    with pytest.raises(AttributeError):
        r.timings.measure_start  # noqa: B018


def test_the_json_keeps_its_keys_and_reads_back_typed(tmp_path, failing_open_loop):
    r = failing_open_loop
    path = tmp_path / "run.json"
    r.to_json(path)
    data = json.loads(path.read_text())
    assert data["config"] == r.config.to_dict() and data["config"]["mode"] == "open"
    assert data["timings"] == r.timings.to_dict()
    assert set(data["timings"]) >= {"measure_start_ns", "measure_end_ns", "offered_requests"}
    assert None not in data["timings"].values()  # a timing never taken is absent, as before
    back = load_result(path)
    assert isinstance(back.config, RunConfig) and back.config == r.config
    assert isinstance(back.timings, Timings) and back.timings == r.timings
    assert back.log.tobytes() == r.log.tobytes() and back.errors == r.errors
    assert back.summary.to_dict() == json.loads(json.dumps(r.summary.to_dict()))
    rows, config = load_run(str(path))
    assert config == r.config and rows.tobytes() == r.log.tobytes()


def test_the_history_gives_back_typed_config_and_timings(tmp_path, failing_open_loop):
    r = failing_open_loop
    store = RunStore(tmp_path / "h.sqlite")
    stored = store.load(store.save(r))
    assert isinstance(stored.config, RunConfig) and stored.config == r.config
    assert isinstance(stored.result.config, RunConfig) and stored.result.config == r.config
    assert isinstance(stored.result.timings, Timings) and stored.result.timings == r.timings


def test_an_unknown_timing_survives_and_the_server_counts_keep_their_shape():
    stored = {"measure_start_ns": 5, "server_responses": None, "from_a_newer_server_s": 1.5}
    t = Timings.from_dict(stored)
    assert t.server_counted and t.server_responses is None
    assert t.to_dict() == stored
    counted = Timings.from_dict({"server_responses": {"200": 3}, "server_errors": 0})
    assert counted.to_dict() == {"server_responses": {"200": 3}, "server_errors": 0}


def test_a_findings_kind_survives_the_history(tmp_path, failing_open_loop):
    r = failing_open_loop
    kinds = [w.kind for w in r.summary.warnings]
    assert "errors" in kinds and "recorded" not in kinds
    store = RunStore(tmp_path / "h.sqlite")
    run_id = store.save(r)
    stored = store.load(run_id)
    assert [w.kind for w in stored.summary.warnings] == kinds
    assert [str(w) for w in stored.summary.warnings] == [str(w) for w in r.summary.warnings]
    assert stored.summary.findings_of("errors") and stored.result.summary.findings_of("errors")
    assert [w.kind for w in store.load(run_id, rows=False).summary.warnings] == kinds


def test_a_findings_kind_survives_the_run_json(tmp_path, failing_open_loop):
    """A run JSON (also a baseline for ``compare``) keeps its warnings' kinds beside their
    plain texts; a file written before kinds were kept reads every warning as recorded."""
    r = failing_open_loop
    kinds = [w.kind for w in r.summary.warnings]
    path = tmp_path / "run.json"
    r.to_json(path)
    data = json.loads(path.read_text())
    assert data["summary"]["warnings"] == [str(w) for w in r.summary.warnings]  # plain text
    assert data["summary"]["warning_kinds"] == kinds
    for summary in (load_result(path).summary, stored_run_from_json(path).summary):
        assert [w.kind for w in summary.warnings] == kinds
        assert [str(w) for w in summary.warnings] == [str(w) for w in r.summary.warnings]
        assert summary.findings_of("errors")
    del data["summary"]["warning_kinds"]  # as every file written before
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    assert {w.kind for w in load_result(old).summary.warnings} == {"recorded"}
    assert load_result(old).summary.to_dict() == data["summary"]  # written back as it was
    data["summary"]["warning_kinds"] = kinds[1:]  # not aligned: not this summary's kinds
    old.write_text(json.dumps(data))
    assert {w.kind for w in stored_run_from_json(old).summary.warnings} == {"recorded"}


def _cli(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(list(args))
    assert code == 0, out.getvalue()
    return out.getvalue()


@pytest.mark.parametrize("load", [["--rate", "200"], ["--concurrency", "2"]])
def test_every_surface_names_a_runs_load_the_same_way(tmp_path, monkeypatch, load):
    import ui.live_profiler

    db = tmp_path / "runs.sqlite"
    monkeypatch.setenv("LATENCY_LAB_DB", str(db))
    summary = _cli("run", "--model", "synthetic", "--model-arg", "forward_ms=0.5",
                   "--requests", "60", "--warmup", "0", *load, "--db", str(db))
    stored = RunStore(db).load("latest")
    said = load_description(stored.config)
    assert said == ("open 200 req/s poisson" if load[0] == "--rate" else "closed 2 clients")
    assert summary.splitlines()[0].endswith(f", {said}")  # the CLI's summary
    assert stored.info.load == said  # the history's column
    assert said in _cli("history", "--db", str(db))  # the history listing
    r = stored.result
    snap = build_snapshot(stored.info.id, 1, r.status, "done", r.config, r.log, r.errors, {},
                          r.timings.measure_start_ns, r.timings.measure_end_ns)
    assert ui.live_profiler.heading(snap).endswith(f"· {said}")  # the Live Profiler
    other = dataclasses.replace(r, config=dataclasses.replace(r.config, batch_size=2))
    RunStore(db).save(other)
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/compare_runs.py").run()
    assert not at.exception
    legend = [t["name"] for c in at.get("plotly_chart")
              for t in json.loads(c.proto.spec)["data"] if t.get("showlegend") is not False]
    assert f"A · synthetic · {said}" in legend  # the Compare page
