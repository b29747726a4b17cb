"""A generation run in its own process, watched live: the handle's snapshots show requests while
the run is in flight, a stop keeps what was measured, a pipeline that kills its process leaves
the requests it had reported, and the dashboard's run manager queues, runs and saves a
generation as it does a one-shot run."""
import threading
import time

import pytest

from latency.core.config import RunConfig
from latency.execution.gen_handle import GenRunHandle
from latency.execution.manager import RunManager
from latency.execution.process import RunOptions, run_watched
from tests.gen_support import crashing_lm_source

#: decodes for a while (5 ms a step), then kills its process: a native crash mid-run
CRASHING_AFTER = crashing_lm_source(after_calls=500, step_s=0.005)


def synthetic(**kw):
    kw.setdefault("model", "synthetic-lm")
    kw.setdefault("concurrency", 2)
    kw.setdefault("prompt_tokens", "32")
    kw.setdefault("output_tokens", "16")
    kw.setdefault("model_args", {"step_ms": 2.0, "step_ms_per_seq": 0.5})
    return RunConfig(**kw)


def test_a_generation_run_is_watched_live_and_its_result_is_whole():
    handle = GenRunHandle(synthetic(duration_s=4.0), options=RunOptions(force=True)).start()
    live = None
    deadline = time.monotonic() + 60
    while not handle.done() and time.monotonic() < deadline:
        snap = handle.snapshot()
        if snap.summary is not None and not snap.finished:
            live = snap
            break
        time.sleep(0.2)
    assert live is not None, "no requests were shown while the run was in flight"
    assert live.status == "running" and live.summary.successful > 0
    assert live.view.ttft_makeup_ms and live.view.waterfall
    result = handle.wait(60)
    assert result.status == "completed", result.failure
    final = handle.snapshot()
    assert final.finished and final.summary.successful == result.summary.successful
    assert final.summary.successful >= live.summary.successful


def test_a_stopped_generation_keeps_what_it_measured():
    handle = GenRunHandle(synthetic(duration_s=30.0), options=RunOptions(force=True)).start()
    deadline = time.monotonic() + 60
    while handle.snapshot().summary is None and time.monotonic() < deadline:
        time.sleep(0.2)
    handle.cancel()
    result = handle.wait(30)
    assert result.status == "stopped"
    assert result.summary.successful > 0 and len(result.tokens) > 0


def test_a_pipeline_that_kills_its_process_leaves_the_requests_it_had_reported(tmp_path):
    source = tmp_path / "late_crash_lm.py"
    source.write_text(CRASHING_AFTER)
    config = RunConfig(pipeline=f"{source}:CrashLM", model="crash-lm",
                       concurrency=1, output_tokens="8", requests=400)
    result = run_watched(GenRunHandle(config, options=RunOptions(force=True)),
                         cancel=threading.Event())
    assert result.status == "failed" and "exit code 3" in result.failure
    kept = int((~result.rows["warmup"]).sum())
    assert kept > 0 and f"the {len(result.rows)} requests it had reported are kept" in \
        result.failure
    assert len(result.tokens) == int(result.rows["output_tokens"].sum())  # whole requests
    handle = GenRunHandle(config, options=RunOptions(force=True)).start()
    watched = handle.wait(120)
    assert watched.status == "failed" and len(watched.rows) > 0


def test_the_run_manager_queues_runs_and_saves_a_generation():
    from latency.storage.store import RunStore

    manager = RunManager()
    try:
        ticket = manager.submit(synthetic(requests=20), owner="me")
        handle = manager.get(ticket.run_id)
        assert isinstance(handle, GenRunHandle) and handle.kind == "generation"
        assert manager.wait_idle(120)
        saved = manager.saved_id(ticket.run_id)
        assert saved is not None, manager.save_error(ticket.run_id)
        stored = RunStore().load(saved).result
        assert stored.summary.successful == handle.result().summary.successful == 20
    finally:
        manager.close()


def test_a_generation_given_inputs_is_refused_in_one_line():
    from latency.core.errors import ConfigError

    manager = RunManager(store=None)
    try:
        with pytest.raises(ConfigError, match="takes its prompts"):
            manager.submit(synthetic(requests=5), owner="me", inputs=[1, 2])
    finally:
        manager.close()
