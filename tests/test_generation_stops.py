"""A generation ended from outside ends as a stop, with what it measured kept:

- a stop sent to the whole process group — as ``timeout``, systemd and CI runners send it —
  also ends the fork server under the run process, which then dies before it can hand over
  its result (exit 255); the run must still say "stopped", as the same SIGTERM to the CLI
  alone does;
- a CLI killed outright (``kill -9``) leaves a run process that stops itself and saves the
  run to the history, as a one-shot run's does.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BLOCKING = textwrap.dedent('''
    import time
    from sample_models.synthetic_lm import SyntheticLMPipeline

    class DecodeBlocks(SyntheticLMPipeline):
        """synthetic-lm whose 5th decode call never returns (a stuck stage)."""
        name = "decode-blocks"

        def decode(self, inputs):
            self.calls = getattr(self, "calls", 0) + 1
            if self.calls >= 5:
                time.sleep(10 ** 6)
            return super().decode(inputs)
''')


def test_a_stop_to_the_process_group_is_reported_as_a_stop(tmp_path):
    (tmp_path / "blocking.py").write_text(BLOCKING)
    err = tmp_path / "err"
    env = {**os.environ, "LATENCY_LAB_DB": str(tmp_path / "runs.sqlite"),
           "LATENCY_LAB_LOCK_DIR": str(tmp_path / "lock"), "PYTHONPATH": str(ROOT)}
    with open(tmp_path / "out", "w") as out, open(err, "w") as errf:
        proc = subprocess.Popen(
            [sys.executable, "-m", "latency", "run", "--pipeline",
             f"{tmp_path / 'blocking.py'}:DecodeBlocks", "--output-tokens", "16",
             "--requests", "6", "--concurrency", "2", "--warmup", "0", "--no-save"],
            cwd=ROOT, stdout=out, stderr=errf, env=env, start_new_session=True)
        try:
            for _ in range(600):  # bounded: 120 s to start measuring
                if "[measuring]" in err.read_text() or proc.poll() is not None:
                    break
                time.sleep(0.2)
            assert proc.poll() is None, err.read_text()
            time.sleep(2.0)  # the 5th decode call is stuck by now
            os.killpg(proc.pid, signal.SIGTERM)  # the whole group, fork server included
            rc = proc.wait(60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    text = (tmp_path / "out").read_text()
    assert rc == 143, (rc, text, err.read_text()[-2000:])
    assert text.startswith("run stopped") or "the run stopped" in text, text
    assert "crashed" not in text, text


def test_a_generation_whose_cli_is_killed_stops_itself_and_saves_what_it_measured(tmp_path):
    """kill -9 of the CLI mid-generation: the run process sees its caller gone, stops, and
    saves the run to the history itself — as a one-shot run's does (the README promises it
    for both)."""
    from latency.storage.store import RunStore
    from tests.cli_support import kill_once_measured

    db = tmp_path / "runs.sqlite"
    env = {**os.environ, "LATENCY_LAB_DB": str(db), "PYTHONUNBUFFERED": "1",
           "LATENCY_LAB_LOCK_DIR": str(tmp_path / "lock")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "latency", "run", "--model", "synthetic-lm",
         "--output-tokens", "16", "--rate", "4", "--duration", "60", "--warmup", "0"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    kill_once_measured(proc)
    deadline = time.monotonic() + 60  # it stops within its drain, well before its 60 s
    while not (gens := RunStore(db).list()):
        assert time.monotonic() < deadline, "the orphaned generation was not saved"
        time.sleep(1)
    assert gens[0].status == "stopped" and gens[0].n > 0, gens[0]
