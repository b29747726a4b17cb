"""Ray Serve as the serving backend (``--backend ray``): the same pipeline served by Ray's
replica actors, Ray's ``@serve.batch`` and Ray's HTTP proxy, decomposed per request.

Most tests (the dashboard's too) connect to one Ray cluster started for this module (``ray
start --head``, as a user's own cluster would be): connecting and deploying takes seconds,
starting Ray ~10 s. One test lets the run start and stop its own local instance, as a plain
``--backend ray`` does.
Known answers: the synthetic pipeline's set stage times, measured back within the tolerances
of the in-process known-answer tests (``test_known_answers.py``).
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from latency.core.config import RunConfig
from latency.core.records import COMPONENTS, component_ns
from latency.execution.engine import execute
from latency.serve import ray_serve
from tests.timing_support import machine_note

# Ray Serve is an optional extra (pip install -r requirements-ray.txt): these tests skip
# without it, and fail instead where LATENCY_LAB_REQUIRE_EXTRAS=1 (CI, which installs it;
# tests/conftest.py)
pytestmark = pytest.mark.ray

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def cluster():
    """The address of a running Ray cluster with Serve's proxy on a free port."""
    gcs, http = free_port(), free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    started = subprocess.run(
        [str(BIN / "ray"), "start", "--head", f"--port={gcs}", "--num-cpus=4",
         "--include-dashboard=false", "--disable-usage-stats",
         f"--ray-client-server-port={free_port()}"],
        env=env, capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr[-2000:]
    try:
        # Serve's proxy actor must come up within Ray's own 60 s (HTTP_PROXY_TIMEOUT); on a
        # machine whose cores are taken, its first worker process can miss that and is
        # killed — a second try finds Ray's processes started and warm
        for _ in range(3):
            serve = subprocess.run(
                [str(BIN / "serve"), "start", f"--address=127.0.0.1:{gcs}",
                 "--http-host=127.0.0.1", f"--http-port={http}"],
                env=env, capture_output=True, text=True, timeout=180)
            if serve.returncode == 0:
                break
        assert serve.returncode == 0, serve.stderr[-2000:]
        yield f"127.0.0.1:{gcs}"
    finally:
        subprocess.run([str(BIN / "ray"), "stop", "--force"], env=env, capture_output=True,
                       timeout=120)


def synthetic(**kw) -> RunConfig:
    stage_args = {"preprocess_ms", "forward_ms", "forward_per_item_ms", "postprocess_ms"}
    model_args = {k: kw.pop(k) for k in list(kw) if k in stage_args}
    return RunConfig(model="synthetic", model_args=model_args, backend="ray", **kw)


@pytest.mark.timing
def test_stage_times_measured_back_through_ray_serve(cluster):
    r = execute(synthetic(preprocess_ms=2, forward_ms=5, postprocess_ms=1, requests=200,
                          warmup=10, ray_address=cluster))
    assert r.status == "completed", r.failure
    s, note = r.summary, machine_note(r)
    for comp, ms in (("preprocess", 2.0), ("forward", 5.0), ("postprocess", 1.0)):
        assert s.components_ms[comp].p50 == pytest.approx(ms, rel=0.05), \
            (comp, s.components_ms[comp].p50, note)
    # what the replica did not measure is the client's time minus the server's: Ray's proxy
    rows = r.measured()
    assert rows["decomposed"].all()
    comps = component_ns(rows)
    assert np.array_equal(sum(comps[c] for c in COMPONENTS), comps["total"])
    assert s.components_ms["network"].p50 > 0.2, note  # a proxy hop is never free
    assert set(rows["replica"]) == {0} and set(rows["batch_size"]) == {1}
    assert "Ray Serve (cluster" in s.transport.server
    if s.verdict.top == "network":  # the advice is about what network holds on Ray Serve
        assert "Ray Serve's HTTP proxy" in str(s.verdict)
    assert r.timings.model_load_s > 0 and r.timings.deploy_s > 0  # from the replica


@pytest.mark.timing
def test_ray_batches_by_max_size_and_charges_each_request_the_batch(cluster):
    r = execute(synthetic(preprocess_ms=0, forward_ms=4, forward_per_item_ms=0.5,
                          postprocess_ms=0, batch_size=8, max_batch_delay_ms=50,
                          concurrency=8, requests=240, warmup=16, ray_address=cluster))
    assert r.status == "completed", r.failure
    rows = r.measured()
    assert rows["batch_size"].max() == 8 and r.summary.batch_size_mean > 4, \
        (rows["batch_size"].max(), r.summary.batch_size_mean, machine_note(r))
    fwd = component_ns(rows)["forward"]
    for bid in np.unique(rows["batch_id"]):
        in_batch = rows["batch_id"] == bid
        assert len(set(fwd[in_batch])) == 1  # one forward pass, charged to each of its requests
        n = int(rows["batch_size"][in_batch][0])
        assert in_batch.sum() <= n
    full = rows["batch_size"] == 8
    assert np.median(fwd[full]) / 1e6 == pytest.approx(4 + 0.5 * 7, rel=0.05), \
        (float(np.median(fwd[full])) / 1e6, machine_note(r))


@pytest.mark.timing
def test_preprocess_in_its_own_deployment_and_two_replicas(cluster, tmp_path):
    db = tmp_path / "h.db"
    cmd = [sys.executable, "-m", "latency", "run", "--model", "synthetic", "--backend", "ray",
           "--ray-address", cluster, "--ray-preprocess", "deployment", "--replicas", "2",
           "--concurrency", "1", "--requests", "300", "--model-arg", "preprocess_ms=2",
           "--model-arg", "forward_ms=5", "--model-arg", "postprocess_ms=1", "--db", str(db),
           "--json", str(tmp_path / "run.json"), "--csv", str(tmp_path / "run.csv")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-1500:] + out.stderr[-1500:]
    assert "preprocess in a preprocess deployment" in out.stdout
    import csv
    import json

    import latency

    with open(tmp_path / "run.csv", newline="") as f:
        replicas = {row["replica"] for row in csv.DictReader(f) if row["warmup"] == "False"}
    assert replicas == {"0", "1"}  # Ray's router spread the requests over both actors
    # (one client: the known stage times are measured without contention, as in-process)
    # the simulator takes the measured proxy and hop cost as a fixed network cost
    sim = latency.simulate(from_run=str(tmp_path / "run.json"), requests=4000)
    run_file = json.loads((tmp_path / "run.json").read_text())
    measured, note = run_file["summary"], machine_note(run_file)
    net = measured["components_ms"]["network"]["mean"]
    assert sim.summary.components_ms["network"].mean == pytest.approx(net, rel=0.05), \
        (sim.summary.components_ms["network"].mean, net, note)
    pre = measured["components_ms"]["preprocess"]["p50"]
    assert pre == pytest.approx(2.0, rel=0.05), (pre, note)


def test_a_local_instance_stopped_mid_run_keeps_what_it_measured_and_leaves_nothing():
    import ray

    cancel = threading.Event()
    seen = []

    def on_rows(rows, *_):
        seen.append(len(rows))
        if sum(seen) >= 50:
            cancel.set()

    environ = dict(os.environ)
    r = execute(synthetic(preprocess_ms=0, forward_ms=2, postprocess_ms=0, concurrency=2,
                          duration_s=120, warmup=5), cancel=cancel, on_rows=on_rows)
    assert r.status == "stopped", r.failure
    assert r.summary.requests >= 20 and r.summary.errors == 0
    assert not ray.is_initialized()
    # what ray.init wrote into the environment (RAY_AUTH_MODE=token, …) is gone with it: a
    # later run from this process (the dashboard's, on the cluster) would inherit it (gRPC's
    # log level stays set: gRPC, once imported, logs each later fork)
    changed = {k for k in os.environ.keys() | environ.keys() if os.environ.get(k) != environ.get(k)}
    assert changed <= {"GRPC_VERBOSITY"}, changed
    mine = [p for p in Path("/tmp").glob(f"{ray_serve.TEMP_PREFIX}{os.getpid()}-*")]
    assert mine == []  # the instance's directory (logs, sockets) went with it


def exit_code(argv: list[str]) -> int:
    from latency.cli.main import main

    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def test_ray_settings_are_checked_before_anything_runs(monkeypatch, capsys):
    for argv, needle in (
            (["--backend", "ray", "--target", "http://127.0.0.1:9"], "drop --target"),
            (["--ray-address", "auto"], "for --backend ray"),
            (["--backend", "ray", "--transport", "in-process"], "through its proxy"),
            (["--backend", "ray", "--ray-address", "a b"], "--ray-address must be")):
        assert exit_code(["run", "--model", "synthetic", "--requests", "5", *argv]) == 2
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    monkeypatch.setattr("latency.execution.validate.ray_installed", lambda: False)
    assert exit_code(["run", "--model", "synthetic", "--requests", "5", "--backend", "ray"]) == 2
    assert "pip install -r requirements-ray.txt" in capsys.readouterr().err


def test_an_unreachable_cluster_fails_the_run_in_seconds_with_one_reason():
    r = execute(synthetic(requests=5, ray_address=f"127.0.0.1:{free_port()}"))
    assert r.status == "failed" and "unreachable" in r.failure and "refused" in r.failure


def test_the_dashboard_serves_a_run_on_ray_serve_with_the_same_live_bars(cluster, monkeypatch):
    """The Live Profiler offers Ray Serve (it is installed here); a run started from the
    widgets is served by it — on the cluster the server was started with — says so above the
    charts and shows the five components."""
    import json

    from streamlit.testing.v1 import AppTest

    from tests.conftest import rerun_until

    monkeypatch.setenv("LATENCY_LAB_RAY_ADDRESS", cluster)
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"),
                           default_timeout=60)
    at.run()
    at.switch_page("views/live_profiler.py").run()
    at.sidebar.radio(key="backend").set_value("Ray Serve").run()
    assert any(f"the Ray cluster at {cluster}" in c.value for c in at.sidebar.caption)
    assert at.sidebar.radio(key="ray_preprocess").value == "in the replica"
    assert not [r for r in at.sidebar.radio if r.key == "transport"]  # Ray is reached by HTTP
    at.sidebar.slider(key="duration").set_value(2)
    next(b for b in at.button if b.label == "Start").click().run()
    rid = at.session_state["watch"]
    done = lambda at: any("completed" in m.value and rid in m.value  # noqa: E731
                          for m in at.markdown)
    rerun_until(at, done, timeout=300)  # a busy machine starts Ray slowly
    shown = [m.value for m in at.markdown][:6] + [c.value for c in at.caption][:4] + \
        [e.value for e in at.error]
    assert done(at) and not at.exception and not at.error, shown
    assert any("Ray Serve (cluster" in c.value for c in at.caption)
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    bars = next(s for s in specs if {t.get("name") for t in s["data"]} >= {"queue", "forward"})
    names = {t["name"] for t in bars["data"] if t.get("type") == "bar"}
    assert {"network", "queue", "preprocess", "forward", "postprocess"} <= names
