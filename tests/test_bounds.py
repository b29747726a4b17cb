"""Every wait is bounded and a signal always ends the run: a rate too low for the clock is one
line before anything runs, a run planned longer than the longest ``--duration`` too, and an
open loop waiting for its next send wakes on SIGTERM."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import latency
from latency.cli.main import main
from latency.core.errors import ConfigError
from tests.cli_support import wait_for_run_process


@pytest.mark.parametrize("args,says", [
    (["--rate", "1e-12", "--requests", "3"], "--rate must be from 0.001"),
    (["--rate", "1e-12", "--duration", "1"], "--rate must be from 0.001"),
    (["--rate", "0.001", "--requests", "100"], "would take 27.8 h"),
])
def test_a_rate_the_clock_cannot_hold_or_a_run_of_hours_is_one_line(args, says, capsys):
    assert main(["run", "--model", "synthetic", "--warmup", "0", "--no-save", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1


def test_the_simulator_refuses_the_same_rate():
    with pytest.raises(ConfigError, match="--rate must be from 0.001"):
        latency.simulate(rate=1e-12, service_ms=5)
    assert main(["simulate", "--rate", "1e-12", "--service-ms", "5"]) == 2


def test_sigterm_ends_an_open_loop_waiting_for_its_next_send(tmp_path):
    """One request every 100 s: the run waits between sends, and a SIGTERM ends it at once
    with what it measured (exit 143)."""
    out = tmp_path / "r.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "latency", "run", "--model", "synthetic", "--rate", "0.01",
         "--arrival", "constant", "--requests", "3", "--warmup", "0", "--no-save", "--quiet",
         "--json", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    wait_for_run_process(proc)
    time.sleep(3)  # started, and waiting 100 s for its first send
    assert proc.poll() is None, proc.communicate()
    assert _sigterm_ends(proc, within_s=15), "SIGTERM did not end an open loop waiting"
    assert proc.returncode == 143, proc.stderr.read()
    assert out.exists()  # what it measured (nothing, here) is kept and written


def test_sigterm_during_an_ab_keeps_its_finished_blocks(tmp_path):
    """An A/B is several runs: a stop keeps the blocks it finished, prints and writes their
    comparison, and exits 143."""
    out = tmp_path / "ab.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "latency", "ab", "--model", "synthetic", "--duration", "2",
         "--warmup", "0", "--pairs", "3", "--b-replicas", "2", "--json", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 120
    seen = ""
    while "[block 2/6]" not in seen and time.monotonic() < deadline:
        seen += proc.stderr.readline()
    assert "[block 2/6]" in seen, seen
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert "stopped after" in stderr and stdout.strip()
    import json

    d = json.loads(out.read_text())
    assert len(d["order"]) >= 2


def test_sigterm_ends_a_run_with_a_hung_stage_within_a_container_stop_grace(tmp_path):
    """docker stop waits 10 s before SIGKILL: a run whose stage hangs must end, with what it
    measured saved and written, inside that."""
    from tests.hostile_pipelines import HANG_MARK, wait_for_hang

    pipelines = Path(__file__).with_name("hostile_pipelines.py")
    out, mark = tmp_path / "r.json", tmp_path / "hang"
    proc = subprocess.Popen(
        [sys.executable, "-m", "latency", "run", "--pipeline", f"{pipelines}:PreSleep",
         "--concurrency", "2", "--requests", "20", "--warmup", "0", "--no-save", "--quiet",
         "--json", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, HANG_MARK: str(mark)})
    wait_for_hang(mark, lines=2)  # built, and both clients' requests stuck in preprocess
    assert proc.poll() is None, proc.communicate()
    assert _sigterm_ends(proc, within_s=10), "a hung stage held the run past SIGTERM"
    assert proc.returncode == 143 and out.exists(), proc.stderr.read()


def test_a_stopped_http_closed_loop_records_the_requests_stuck_in_the_server(tmp_path):
    """Over HTTP the closed loop runs as coroutines of the client, not the driver's threads;
    requests a stop gives up on in a hung server are still counted (cancelled), as the
    in-process loop counts them, not lost from the run's account."""
    import json

    from tests.hostile_pipelines import HANG_MARK, wait_for_hang

    pipelines = Path(__file__).with_name("hostile_pipelines.py")
    out, mark = tmp_path / "r.json", tmp_path / "hang"
    proc = subprocess.Popen(
        [sys.executable, "-m", "latency", "run", "--pipeline", f"{pipelines}:PreSleep",
         "--transport", "http", "--concurrency", "2", "--requests", "20", "--warmup", "0",
         "--no-save", "--quiet", "--json", str(out)], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, HANG_MARK: str(mark)})
    wait_for_hang(mark, lines=2)  # both clients' requests stuck in the server's preprocess
    assert _sigterm_ends(proc, within_s=60), "a hung stage held the HTTP run past SIGTERM"
    assert proc.returncode == 143 and out.exists(), proc.stderr.read()
    assert json.loads(out.read_text())["timings"]["cancelled_requests"] == 2


def _sigterm_ends(proc: subprocess.Popen, within_s: float) -> bool:
    """Send SIGTERM; True if the process ended within ``within_s`` (killed otherwise)."""
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=within_s + 20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
        return False
    return time.monotonic() - t0 < within_s
