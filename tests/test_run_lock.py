"""One measurement at a time per machine: a CLI run and another run (the dashboard's, a
notebook's) queue behind each other; forced past the lock, both results say they overlapped."""
import json
import subprocess
import sys
import threading
import time

from latency.core.config import RunConfig
from latency.execution.engine import execute
from latency.execution.lock import MachineLock


def _cli_run(tmp_path, *extra):
    out = tmp_path / "first.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "latency", "run", "--model", "synthetic",
         "--model-arg", "preprocess_ms=0", "--model-arg", "forward_ms=1",
         "--model-arg", "postprocess_ms=0", "--duration", "2", "--warmup", "0", "--quiet",
         "--no-save", "--json", str(out), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, out


def _wait_for_holder(proc, timeout=60.0):
    lock = MachineLock("probe")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        holder = lock.holder()
        if holder is not None and holder.pid == proc.pid:
            assert "CLI run" in holder.what
            return holder
        time.sleep(0.05)
    raise AssertionError("the CLI run never took the machine")


def _quick(**kw):
    return RunConfig(model="synthetic", model_args={"preprocess_ms": 0, "forward_ms": 1,
                                                    "postprocess_ms": 0},
                     requests=50, warmup=0, **kw)


def test_a_second_run_waits_for_the_first_and_they_never_overlap(tmp_path):
    proc, out = _cli_run(tmp_path)
    holder = _wait_for_holder(proc)
    seen = []
    r = execute(_quick(), on_rows=lambda rows, errs, p: seen.append(p),
                progress_interval_s=0.05)
    assert proc.wait(60) == 0, proc.stderr.read()
    first = json.loads(out.read_text())
    assert r.status == "completed"
    assert r.timings["waited_for_machine_s"] > 0.3
    # perf_counter_ns is system-wide on Linux: the second measured after the first finished
    assert r.timings["measure_start_ns"] >= first["timings"]["measure_end_ns"]
    waiting = [p for p in seen if p["phase"] == "waiting"]
    assert waiting and "CLI run" in waiting[0]["waiting_for"] and str(holder.pid) in \
        waiting[0]["waiting_for"]
    assert not any("same time" in w for w in r.summary.warnings + first["summary"]["warnings"])


def test_forced_past_the_lock_both_results_carry_a_warning(tmp_path):
    proc, out = _cli_run(tmp_path)
    _wait_for_holder(proc)
    r = execute(_quick(), force=True)
    assert proc.wait(60) == 0, proc.stderr.read()
    first = json.loads(out.read_text())
    assert r.status == "completed" and "waited_for_machine_s" not in r.timings
    assert any("same time" in w and "CLI run" in w for w in r.summary.warnings)
    assert any("same time" in w and "forced" in w for w in first["summary"]["warnings"])


def test_a_run_stopped_while_it_waits_ends_at_once(tmp_path):
    proc, _ = _cli_run(tmp_path)
    _wait_for_holder(proc)
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    t = time.monotonic()
    r = execute(_quick(), cancel=cancel)
    assert time.monotonic() - t < 1.5
    assert r.status == "stopped" and len(r.log) == 0
    assert any("waiting for another run" in w for w in r.summary.warnings)
    assert proc.wait(60) == 0


def test_a_killed_holder_frees_the_machine(tmp_path):
    proc, _ = _cli_run(tmp_path)
    _wait_for_holder(proc)
    proc.kill()
    proc.wait(10)
    t = time.monotonic()
    r = execute(_quick())
    assert r.status == "completed" and time.monotonic() - t < 30
    assert not any("same time" in w for w in r.summary.warnings)  # the dead run's note is gone
