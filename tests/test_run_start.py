"""How a run process starts (``latency.execution.run_start``): forked by a server that
imported the engine once, yet in its caller's environment as it is when the run starts — not
as it was when the fork server started."""
from __future__ import annotations

import textwrap

from latency.core.config import RunConfig
from latency.execution.process import run

FACTORY = textwrap.dedent('''
    import os

    def reads_the_environment():
        raise RuntimeError("LATENCY_LAB_TEST_MARK=" + os.environ.get("LATENCY_LAB_TEST_MARK",
                                                                    "unset"))
''')


def test_a_run_process_sees_its_callers_environment_as_it_is_now(tmp_path, monkeypatch):
    path = tmp_path / "reads_env.py"
    path.write_text(FACTORY)
    monkeypatch.delenv("LATENCY_LAB_TEST_MARK", raising=False)
    first = run(RunConfig(pipeline=f"{path}:reads_the_environment", requests=5, warmup=0))
    assert first.status == "failed" and "LATENCY_LAB_TEST_MARK=unset" in first.failure
    monkeypatch.setenv("LATENCY_LAB_TEST_MARK", "set after the first run")
    second = run(RunConfig(pipeline=f"{path}:reads_the_environment", requests=5, warmup=0))
    assert second.status == "failed", second.status
    assert "LATENCY_LAB_TEST_MARK=set after the first run" in second.failure, second.failure


def test_an_unknown_start_method_is_one_line_and_exit_2():
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "latency", "run", "--model", "synthetic",
                          "--requests", "5", "--no-save"],
                         env={**os.environ, "LATENCY_LAB_START_METHOD": "fork"},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == ("latency: error: LATENCY_LAB_START_METHOD='fork': expected "
                                  "forkserver or spawn")


def test_stopping_a_run_that_has_already_ended_returns_at_once():
    """A run process that ended while watching for a stop must not make a later stop wait for
    it (a shared ``multiprocessing.Event`` did: its ``set`` waited for the dead waiter to wake,
    and the dashboard's run manager hung closing after its last run)."""
    import threading

    from latency.execution.process import start_run

    for config in (RunConfig(model="synthetic", requests=5, warmup=0),
                   RunConfig(model="synthetic-lm", requests=2, warmup=0, prompt_tokens="8",
                             output_tokens="4")):
        handle = start_run(config) if config.model == "synthetic" else _gen_handle(config)
        handle.wait(120)
        stopper = threading.Thread(target=handle.cancel, daemon=True)
        stopper.start()
        stopper.join(10)
        assert not stopper.is_alive(), f"{config.model}: the stop of an ended run hung"


def _gen_handle(config):
    from latency.execution.gen_handle import GenRunHandle
    from latency.execution.process import RunOptions

    return GenRunHandle(config, options=RunOptions()).start()
