"""The command line called in the test process, read as a ``python -m latency`` would be.

A fresh interpreter costs ~2-3 s a call (torch's import); where a test checks what a command
says and its exit code — not how a process ends on a signal — ``cli_here`` runs the same
``latency.cli.main`` here (a ``run`` still measures in its own run process)."""
from __future__ import annotations

import contextlib
import io
import subprocess


def cli_here(*args: str) -> subprocess.CompletedProcess[str]:
    """``latency ARGS`` in this process: its exit code and what it wrote to stdout/stderr."""
    from latency.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # as the interpreter would exit (argparse's refusals)
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def kill_once_measured(proc: subprocess.Popen[str], timeout_s: float = 120) -> None:
    """Read a ``python -m latency run``'s progress (its stderr) until it has measured some
    requests ("[measuring] 0 …" comes first: a kill then leaves nothing to save), then kill
    it outright (SIGKILL) and wait for it."""
    import time

    deadline = time.monotonic() + timeout_s
    line = ""
    while not line.startswith("[measuring]") or line.startswith("[measuring] 0"):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        assert proc.stderr is not None
        line = proc.stderr.readline()
    proc.kill()
    proc.wait()


def wait_for_run_process(proc: subprocess.Popen[str], timeout_s: float = 120) -> None:
    """Wait until a ``python -m latency`` command has started its run process: it does so
    only after it has set its SIGINT/SIGTERM handlers, so a signal sent then is the command's
    to handle (a fixed sleep is not enough: on a busy machine the interpreter and torch's
    import alone can take longer, and a signal before the handlers kills it outright)."""
    import time

    import psutil

    deadline = time.monotonic() + timeout_s
    while not psutil.Process(proc.pid).children():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
