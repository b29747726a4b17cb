"""Suite-wide settings, made at import (before any test or fixture runs).

- Tests never write to the user's run history: every run the suite saves (CLI subprocesses,
  the dashboard's run manager, the browser test's server inherit this) goes to a throw-away
  database.
- The suite's runs queue behind each other on their own run lock, not the user's:
  a dashboard left open on this machine neither waits for the suite nor is disturbed by it
  without saying so (each side's results then carry the overlap warning).
"""
import atexit
import contextlib
import os
import shutil
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_SCRATCH = tempfile.mkdtemp(prefix="latency-lab-test-history-")
os.environ["LATENCY_LAB_DB"] = str(Path(_SCRATCH) / "runs.sqlite")
os.environ["LATENCY_LAB_LOCK_DIR"] = str(Path(_SCRATCH) / "lock")
atexit.register(shutil.rmtree, _SCRATCH, True)


def rerun_until(at, done, timeout: float = 90.0) -> None:
    """Rerun an AppTest once a second (as the live fragment would) until ``done(at)`` holds."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not done(at):
        time.sleep(1)
        at.run()


class FakeClock:
    """A clock a test moves by hand (``clock.t = …``), for time-outs without waiting."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class QuietHandler(BaseHTTPRequestHandler):
    """A test server's handler base: no access log, and the request body read and returned."""

    def log_message(self, *args) -> None:
        pass

    def read_body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))


@contextlib.contextmanager
def loopback_server(handler: type[BaseHTTPRequestHandler], path: str = "/predict"):
    """A threaded HTTP server on 127.0.0.1 serving ``handler``; yields its URL + ``path``."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}{path}"
    finally:
        httpd.shutdown()
        httpd.server_close()
