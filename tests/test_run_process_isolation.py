"""A pipeline's crash takes only the run process: the CLI runs every run in one, as the
dashboard does, so a segfault, ``os._exit`` or a constructor that never returns still ends in
a reported, saved run with a failing exit code — and a caller killed with SIGKILL leaves a run
process that stops itself and saves what it measured."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.cli_support import kill_once_measured
from tests.hostile_pipelines import HANG_MARK, wait_for_hang

HOSTILE = Path(__file__).with_name("hostile_pipelines.py")


def _latency(*args: str, db: Path, env_extra: dict[str, str] | None = None,
             **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "latency", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "LATENCY_LAB_DB": str(db),
                                 "PYTHONUNBUFFERED": "1", **(env_extra or {})}, **kw)


def _history(db: Path) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "latency", "history", "--json", "--db", str(db)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_segfault_in_forward_is_a_failed_run_saved_with_its_reason(tmp_path):
    db = tmp_path / "runs.sqlite"
    proc = _latency("run", "--pipeline", f"{HOSTILE}:Segv", "--requests", "5", "--warmup", "0",
                    "--quiet", "--json", str(tmp_path / "r.json"), db=db)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, (out, err)  # not 139: the CLI itself did not crash
    assert "killed by SIGSEGV" in out and "Traceback" not in err
    assert "run failed: hostile" in out  # named as the run process validated it
    assert json.loads((tmp_path / "r.json").read_text())["status"] == "failed"
    assert [r["status"] for r in _history(db)] == ["failed"]


def test_os_exit_0_at_import_is_not_a_pass(tmp_path):
    module = tmp_path / "exits.py"
    module.write_text("import os\nos._exit(0)\n")
    db = tmp_path / "runs.sqlite"
    proc = _latency("run", "--pipeline", f"{module}:Gone", "--requests", "5", "--warmup", "0",
                    "--quiet", db=db)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, (out, err)
    assert "ended with exit code 0 before it reported a result" in out
    assert "run failed: Gone" in out


def test_a_refused_pipeline_is_still_one_line_and_exit_2(tmp_path):
    """Its module is imported in the run process now; what it refuses comes back as one line,
    and nothing is saved."""
    db = tmp_path / "runs.sqlite"
    proc = _latency("run", "--pipeline", f"{HOSTILE}:NoSuchClass", "--requests", "5",
                    "--warmup", "0", "--quiet", db=db)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 2, (out, err)
    assert len(err.strip().splitlines()) == 1 and "NoSuchClass" in err, err
    assert out == "" and _history(db) == []


def test_one_sigterm_ends_a_run_whose_constructor_never_returns(tmp_path):
    db, mark = tmp_path / "runs.sqlite", tmp_path / "hang"
    proc = _latency("run", "--pipeline", f"{HOSTILE}:InitSleep", "--requests", "5", "--quiet",
                    db=db, env_extra={HANG_MARK: str(mark)})
    wait_for_hang(mark)  # spawned, imported, and asleep in the constructor
    assert proc.poll() is None, proc.communicate()
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    assert proc.returncode == 143, (out, err)
    assert took < 10 + 5, took  # a container's stop grace, and slack for a busy machine
    assert "the run process was killed: it had not ended" in out
    assert [r["status"] for r in _history(db)] == ["stopped"]


def test_a_second_signal_ends_at_once_with_the_first_signals_code(tmp_path):
    db = tmp_path / "runs.sqlite"
    mark = tmp_path / "hang"
    proc = _latency("run", "--pipeline", f"{HOSTILE}:InitSleep", "--requests", "5", "--quiet",
                    db=db, env_extra={HANG_MARK: str(mark)})
    wait_for_hang(mark)
    proc.send_signal(signal.SIGTERM)
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, (out, err)  # stopped by SIGTERM, not "aborted" (130)
    assert "killed: a second signal" in out


def test_a_run_whose_caller_is_killed_stops_itself_and_saves_what_it_measured(tmp_path):
    db = tmp_path / "runs.sqlite"
    proc = _latency("run", "--pipeline", f"{HOSTILE}:FwdSlow", "--duration", "60",
                    "--warmup", "0", db=db)
    kill_once_measured(proc)
    deadline = time.monotonic() + 60  # it stops within its drain, well before its 60 s
    while not (runs := _history(db)):
        assert time.monotonic() < deadline, "the orphaned run was not saved"
        time.sleep(1)
    assert runs[0]["status"] == "stopped" and runs[0]["n"] > 0, runs
    shown = subprocess.run([sys.executable, "-m", "latency", "history", "show", "latest",
                            "--db", str(db)], capture_output=True, text=True, timeout=120)
    assert "the process that started this run ended during it" in shown.stdout


DASHBOARD = """
import sys, time
from latency.core.config import RunConfig
from latency.execution.manager import RunManager
from latency.storage.store import RunStore
manager = RunManager(store=RunStore(sys.argv[1]))
ticket = manager.submit(RunConfig(pipeline=sys.argv[2], duration_s=60, warmup=0), owner="me")
handle = manager.get(ticket.run_id)
while handle.progress().get("done", 0) < 5:
    time.sleep(0.1)
print("measuring", flush=True)
time.sleep(600)
"""


def test_a_killed_dashboard_leaves_no_run_measuring_for_nobody(tmp_path):
    """The dashboard's run manager, killed with SIGKILL mid-run: its run process stops
    (freeing the machine) and saves the run to the dashboard's history."""
    db = tmp_path / "runs.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", DASHBOARD, str(db), f"{HOSTILE}:FwdSlow"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "measuring", proc.communicate()
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 60
    while not (runs := _history(db)):
        assert time.monotonic() < deadline, "the orphaned dashboard run was not saved"
        time.sleep(1)
    assert runs[0]["status"] == "stopped" and runs[0]["source"] == "dashboard", runs


def test_ctrl_c_while_a_pipeline_module_hangs_at_import_is_130_not_a_config_error(tmp_path):
    module, mark = tmp_path / "spins.py", tmp_path / "hang"
    module.write_text(f"open({str(mark)!r}, 'a').write('import\\n')\nwhile True:\n    pass\n")
    db = tmp_path / "runs.sqlite"
    proc = _latency("run", "--pipeline", f"{module}:Never", "--requests", "5", "--quiet",
                    db=db)
    wait_for_hang(mark)  # importing, for ever
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "run stopped" in out
