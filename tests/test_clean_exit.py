"""A run process and ``latency serve`` end without the interpreter's shutdown (issue 27, item 13):
that shutdown tore down threads torch's libraries had started and printed "terminate called
without an active exception". They end with ``os._exit`` once everything is sent and saved —
so what the run saved must still be complete, and the exit codes unchanged."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from latency.core.config import RunConfig
from latency.execution.process import RunHandle

ROOT = Path(__file__).resolve().parent.parent


def test_a_cli_run_ends_quietly_and_what_it_saved_is_complete(tmp_path):
    db = tmp_path / "runs.sqlite"
    out_json = tmp_path / "run.json"
    env = {**os.environ, "LATENCY_LAB_DB": str(db)}
    out = subprocess.run([sys.executable, "-m", "latency", "run", "--model", "image-cnn",
                          "--requests", "200", "--quiet", "--json", str(out_json)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    assert "terminate called" not in out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    d = json.loads(out_json.read_text())
    assert d["status"] == "completed"
    assert d["summary"]["requests"] == 200
    assert d["requests"]["count"] == 200 + d["config"]["warmup"]
    shown = subprocess.run([sys.executable, "-m", "latency", "history", "show", "latest"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "requests 200" in shown.stdout


def test_a_run_process_still_exits_0_after_sending_its_result():
    handle = RunHandle(RunConfig(model="synthetic", requests=30, warmup=2)).start()
    result = handle.wait()
    assert result.status == "completed" and len(result.log) == 32
    assert handle._proc.exitcode == 0  # noqa: SLF001 - the process's own exit code


def test_serve_ends_quietly_with_exit_0_on_ctrl_c():
    proc = subprocess.Popen([sys.executable, "-m", "latency", "serve", "--model", "image-cnn",
                             "--port", "0"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("serving image-cnn on http://127.0.0.1:")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "stopped" in out
    assert "terminate called" not in out + err and "Traceback" not in err
