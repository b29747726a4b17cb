"""A stop sent to the whole process group — as ``timeout``, systemd and CI runners send it —
is a stop, not a pipeline crash: the group's SIGTERM also ends the fork server under the run
process, which then dies before it can hand over its result (exit 255); the run must still
say "stopped", as the same SIGTERM to the CLI alone does."""
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
