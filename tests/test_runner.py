"""The API the dashboard uses: a run in its own process, snapshots while it runs, cancel."""
import json
import time

import pytest

from latency.core.config import RunConfig
from latency.core.errors import ConfigError
from latency.execution.manager import PermissionDenied, RunManager
from latency.execution.process import run, start_run


def test_run_in_a_spawned_process_streams_snapshots_and_can_be_cancelled():
    h = start_run(RunConfig(model="synthetic", model_args={"forward_ms": 2, "preprocess_ms": 0,
                                                           "postprocess_ms": 0},
                            concurrency=2, duration_s=30, warmup=5))
    seen = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len({s.progress["measured"] for s in seen}) < 3:
        s = h.snapshot()
        if s.summary and s.progress["measured"] > 0:
            seen.append(s)
        time.sleep(0.3)
    assert len({s.version for s in seen}) >= 3  # it changed while in flight
    s = seen[-1]
    assert s.status == "running" and s.phase == "measuring"
    assert s.hist_counts.sum() == s.summary.successful  # bins, not samples
    assert set(s.makeup_ms) == {"mean", "p50", "p90", "p99"}
    assert 0 < s.progress["fraction"] < 1
    # versions only go forward while it runs
    assert all(a.version <= b.version for a, b in zip(seen, seen[1:]))
    assert h.snapshot().version >= s.version
    h.cancel()
    result = h.wait(timeout=30)
    assert result.status == "stopped"
    assert result.summary.requests > 0
    final = h.snapshot()
    assert final.finished and final.status == "stopped"
    # rebuilt only when new data arrived: once finished nothing arrives, so every viewer
    # after this one gets the very same snapshot, built once
    assert h.snapshot() is final and h.snapshot().version == final.version


def test_blocking_run_returns_the_result():
    r = run(RunConfig(model="synthetic", model_args={"forward_ms": 1}, requests=50, warmup=2),
            timeout=120)
    assert r.status == "completed" and r.summary.requests == 50
    assert r.environment["torch"]
    # typed across the process boundary: a misspelt field fails where it is read
    assert isinstance(r.config, RunConfig) and r.config.requests == 50
    assert r.timings.measure_start_ns < r.timings.measure_end_ns


def test_a_run_that_crashes_fails_alone():
    h = start_run(RunConfig(model="synthetic", requests=10, warmup=0), inputs=[])
    r = h.wait(timeout=120)
    assert r.status == "failed" and "no inputs" in r.failure


def test_manager_runs_one_at_a_time_and_guards_stop():
    m = RunManager()
    cfg = RunConfig(model="synthetic", model_args={"forward_ms": 1, "preprocess_ms": 0,
                                                   "postprocess_ms": 0},
                    concurrency=1, duration_s=20, warmup=0)
    a = m.submit(cfg, owner="alice")
    b = m.submit(cfg, owner="bob")
    assert b.position >= 1
    with pytest.raises(ConfigError):
        m.submit(RunConfig(batch_size=0), owner="eve")
    deadline = time.monotonic() + 60
    while m.position(a.run_id) != 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert m.position(a.run_id) == 0 and m.position(b.run_id) == 1
    with pytest.raises(PermissionDenied):
        m.stop(a.run_id, requester="bob")
    m.stop(b.run_id, requester="bob")  # un-queue your own
    assert m.position(b.run_id) is None
    m.stop(a.run_id, requester="instructor", instructor=True)
    assert m.wait_idle(timeout=60)
    assert m.get(a.run_id).status == "stopped"
    assert m.get(b.run_id).status == "stopped" and len(m.get(b.run_id).result().log) == 0


def test_a_failure_in_the_run_process_carries_its_traceback():
    r = run(RunConfig(model="synthetic", requests=10, warmup=0), inputs=[], timeout=120)
    assert r.status == "failed" and r.traceback and "Traceback" in r.traceback
    assert "no inputs to send" in r.traceback.splitlines()[-1]
    assert json.loads(r.json_text(requests=False))["traceback"] == r.traceback


def test_the_manager_forgets_finished_runs_beyond_its_keep_limit(monkeypatch):
    from latency.execution import manager as manager_mod

    monkeypatch.setattr(manager_mod, "KEEP_FINISHED", 1)
    m = RunManager(store=None)
    cfg = RunConfig(model="synthetic", model_args={"forward_ms": 0.1, "preprocess_ms": 0,
                                                   "postprocess_ms": 0}, requests=5, warmup=0)
    ids = [m.submit(cfg, owner="a").run_id for _ in range(3)]
    assert m.wait_idle(timeout=240)
    assert [h.run_id for h in m.finished()] == ids[-1:]
    assert m.get(ids[0]) is None and m.owner(ids[0]) is None  # forgotten: rows, owner
    assert m.get(ids[-1]).result().summary.requests == 5
    assert m.saved_id(ids[0]) is None and m.save_error(ids[0]) is None
    assert len(m._runs) == 1  # one record a run, forgotten whole


def test_a_closed_manager_stops_its_run_and_its_queue_and_closing_again_does_nothing():
    import threading

    before = set(threading.enumerate())
    m = RunManager(store=None)
    (thread,) = [t for t in threading.enumerate() if t not in before and "manager" in t.name]
    cfg = RunConfig(model="synthetic", model_args={"forward_ms": 1, "preprocess_ms": 0,
                                                   "postprocess_ms": 0},
                    concurrency=1, duration_s=60, warmup=0)
    a = m.submit(cfg, owner="alice")
    b = m.submit(cfg, owner="bob")
    deadline = time.monotonic() + 60
    # running and measuring (a Stop while it is still starting is another test's case)
    while time.monotonic() < deadline and not (
            m.position(a.run_id) == 0 and m.get(a.run_id).snapshot().phase == "measuring"):
        time.sleep(0.05)
    assert m.get(a.run_id).snapshot().phase == "measuring"
    t0 = time.monotonic()
    m.close()
    assert time.monotonic() - t0 < 40  # not the run's 60 s
    assert not thread.is_alive()
    assert m.get(a.run_id).status == "stopped"  # stopped, with what it measured
    assert m.get(a.run_id).result().summary.requests > 0
    assert m.get(b.run_id).status == "stopped" and m.get(b.run_id).started_at is None
    assert m.current() is None and m.queued() == []
    m.close()  # idempotent
    with pytest.raises(RuntimeError):
        m.submit(cfg, owner="carol")


def test_one_person_cannot_fill_a_shared_line():
    """A room shares one machine: each person may have a few submissions waiting (a group
    counts as one), the line as a whole is bounded; the refusal is one line, nothing queued."""
    from latency.core.errors import ConfigError
    from latency.execution.manager import MAX_WAITING_PER_OWNER, QueueFull

    m = RunManager(store=None)
    cfg = RunConfig(model="synthetic", model_args={"forward_ms": 1, "preprocess_ms": 0,
                                                   "postprocess_ms": 0},
                    concurrency=1, duration_s=60, warmup=0)
    try:
        first = m.submit(cfg, owner="alice")  # running (or about to): then the line
        deadline = time.monotonic() + 60
        while m.position(first.run_id) != 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        m.submit_group([cfg, cfg], owner="alice")  # one submission of two runs
        for _ in range(MAX_WAITING_PER_OWNER - 1):
            m.submit(cfg, owner="alice")
        waiting = len(m.queued())
        with pytest.raises(QueueFull, match="already have") as err:
            m.submit(cfg, owner="alice")
        assert isinstance(err.value, ConfigError) and "\n" not in str(err.value)
        assert len(m.queued()) == waiting  # nothing queued by the refusal
        m.submit(cfg, owner="bob")  # somebody else still may
    finally:
        m.close()
