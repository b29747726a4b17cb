"""An A/B stopped before both arms measured anything is one line, not a traceback.

A SIGTERM that lands while the first block is still warming up leaves arm A without one
measured request: there is nothing to compare, and ``ab`` says so in one line (naming the
blocks that ran), writes no --json and exits 128 + the signal.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.cli_support import wait_for_run_process

ROOT = Path(__file__).resolve().parents[1]


def test_a_stop_before_either_arm_measured_is_one_line(tmp_path):
    env = {**os.environ, "LATENCY_LAB_DB": str(tmp_path / "runs.sqlite"),
           "LATENCY_LAB_LOCK_DIR": str(tmp_path / "lock")}
    out = tmp_path / "ab.json"
    # a warm-up that cannot finish before the stop: block 1 is stopped with nothing measured
    proc = subprocess.Popen([sys.executable, "-m", "latency", "ab", "--model", "synthetic",
                             "--duration", "5", "--pairs", "1", "--warmup", "100000",
                             "--b-replicas", "2", "--json", str(out)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_for_run_process(proc)  # its handlers are set; block 1 is warming up
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert "Traceback" not in stderr, stderr
    line = [ln for ln in stderr.splitlines() if ln.startswith("latency: error:")]
    assert len(line) == 1, stderr
    assert "arm A has no successful measured requests: nothing to compare" in line[0]
    assert "(blocks: A stopped)" in line[0] or "(blocks: none)" in line[0]
    assert not out.exists()
