"""Suite-wide settings, made at import (before any test or fixture runs).

- Tests never write to the user's run history: every run the suite saves (CLI subprocesses,
  the dashboard's run manager, the browser test's server inherit this) goes to a throw-away
  database.
- The suite's runs queue behind each other on their own run lock, not the user's:
  a dashboard left open on this machine neither waits for the suite nor is disturbed by it
  without saying so (each side's results then carry the overlap warning).
- An optional extra a test needs (Ray Serve, ONNX Runtime, Chromium with Playwright) skips
  that test where it is missing — unless ``LATENCY_LAB_REQUIRE_EXTRAS=1`` (CI sets it after
  installing them), when a missing extra fails the test: a failed install is never a quiet
  row of skips (``require_extra``; the ``browser`` and ``ray`` markers call it for their
  tests).
- The suite runs on the cores that are idle when it starts (pytest-xdist, ``-n auto`` in
  pytest.ini; ``pytest_xdist_auto_num_workers``): two workers on a quiet 2-core machine, one
  process (no workers) where another program already keeps a core busy. A ``timing`` test
  never has another test beside it: it takes the workers' shared lock exclusively, every
  other test takes it shared (``pytest_runtest_protocol``); a module's timing tests run
  first in it and keep the lock from one to the next.
"""
import atexit
import contextlib
import importlib
import os
import shutil
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

_SCRATCH = tempfile.mkdtemp(prefix="latency-lab-test-history-")
os.environ["LATENCY_LAB_DB"] = str(Path(_SCRATCH) / "runs.sqlite")
os.environ["LATENCY_LAB_LOCK_DIR"] = str(Path(_SCRATCH) / "lock")
atexit.register(shutil.rmtree, _SCRATCH, True)

#: set (to 1) where the optional extras were installed on purpose: a missing one fails
REQUIRE_EXTRAS = "LATENCY_LAB_REQUIRE_EXTRAS"


def extras_required() -> bool:
    return os.environ.get(REQUIRE_EXTRAS, "").strip() not in ("", "0")


def require_extra(module: str | None, reason: str, *, executable: str | None = None):
    """``pytest.importorskip(module)`` (and, with ``executable``, that program on the PATH),
    except that with ``LATENCY_LAB_REQUIRE_EXTRAS=1`` a missing one fails instead of skipping.
    Returns the module (None without one)."""
    import pytest

    missing = None
    if executable is not None and shutil.which(executable) is None:
        missing = f"{executable} is not on the PATH"
    got = None
    if missing is None and module is not None:
        try:
            got = importlib.import_module(module)
        except ImportError as exc:
            missing = f"cannot import {module} ({type(exc).__name__}: {exc})"
    if missing is None:
        return got
    if extras_required():
        pytest.fail(f"{REQUIRE_EXTRAS} is set but {missing}: {reason}", pytrace=False)
    pytest.skip(f"{missing}: {reason}")


def require_chromium() -> None:
    """Debian's Chromium and Playwright's Python API, for the ``browser`` tests."""
    from tests.browser import CHROMIUM

    require_extra(None, "the browser tests drive Debian's chromium (apt-get install -y "
                  "chromium)", executable=CHROMIUM or "chromium")
    require_extra("playwright.sync_api", "playwright is not installed "
                  "(pip install -r requirements-dev.txt)")


def require_ray() -> None:
    require_extra("ray.serve", "Ray Serve is an optional extra (pip install -r "
                  "requirements-ray.txt); CI installs it")


#: overrides the number of test workers (0: one process, no workers)
WORKERS_ENV = "LATENCY_LAB_TEST_WORKERS"
#: at most this many workers, however many cores are idle (each runs servers and clients)
MAX_WORKERS = 4


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto``: one worker per core idle over the last second (a busy core is not
    counted: a test beside a CPU hog would measure the hog), none (one process) below two."""
    given = os.environ.get(WORKERS_ENV, "").strip()
    if given:
        return max(0, int(given))
    import psutil

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)
    busy = psutil.cpu_percent(interval=1.0) / 100.0 * (psutil.cpu_count() or cores)
    idle = int(cores - busy + 0.25)
    workers = min(idle, cores, MAX_WORKERS)
    return workers if workers >= 2 else 0


@contextlib.contextmanager
def _flock(path: Path, exclusive: bool):
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing releases the lock


@contextlib.contextmanager
def _alone_or_shared(exclusive: bool):
    """The workers' readers-writer lock, with the writer first: a ``timing`` test (writer)
    holds the turnstile while it waits for the running tests to end, so no new test starts
    beside it; any other test passes the turnstile, then shares the lock."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")
    base = Path(tempfile.gettempdir()) / f"latency-lab-tests-{os.getuid()}-{run}"
    turnstile, shared = base.with_suffix(".turnstile"), base.with_suffix(".lock")
    if exclusive:
        with _flock(turnstile, True), _flock(shared, True):
            yield
        return
    with _flock(turnstile, True):
        pass
    with _flock(shared, False):
        yield


def _timing(item) -> bool:
    return item is not None and item.get_closest_marker("timing") is not None


def pytest_collection_modifyitems(config, items) -> None:
    """A module's ``timing`` tests run first in it, in their order, so a worker waits for the
    other to be idle once per module, not once per timing test."""
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        first.setdefault(item.nodeid.split("::")[0], i)
    items.sort(key=lambda item: (first[item.nodeid.split("::")[0]], not _timing(item)))


#: the exclusive hold of the lock, kept from one timing test to the next on this worker
_alone: contextlib.ExitStack | None = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Under pytest-xdist, a ``timing`` test runs with no other test beside it — its setup
    too, where a module's measured runs are made for it. The hold lasts until the worker's
    next test is not a timing test."""
    global _alone
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    if not _timing(item):
        with _alone_or_shared(False):
            yield
        return
    if _alone is None:
        _alone = contextlib.ExitStack()
        _alone.enter_context(_alone_or_shared(True))
    try:
        yield
    finally:
        if not _timing(nextitem):
            _alone.close()
            _alone = None


def pytest_runtest_setup(item) -> None:
    """A test marked ``browser`` or ``ray`` needs that extra (skip, or fail where required)."""
    if item.get_closest_marker("browser") is not None:
        require_chromium()
    if item.get_closest_marker("ray") is not None:
        require_ray()


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


@pytest.fixture
def policy_warnings(monkeypatch):
    """Streamlit's "created with a default value but also had its value set via the Session
    State API" warnings, as logged from now on (AppTest has no server log, runs the check only
    with a runtime, and Streamlit warns once a process: here once a key)."""
    import logging
    import types

    import streamlit.elements.lib.policies as policies

    monkeypatch.setattr(policies, "runtime", types.SimpleNamespace(exists=lambda: True))
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())
            policies._shown_default_value_warning = False

    logger, handler = logging.getLogger(policies.__name__), Keep()
    logger.addHandler(handler)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)
