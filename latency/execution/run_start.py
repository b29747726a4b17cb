"""How a run process is started: forked from a server that has already imported the engine.

Why not a plain ``spawn``: a spawned run process is a fresh interpreter that imports torch,
SciPy and the engine before it measures anything — 1.7 s on a 2-core VM, paid by every run
(each arm of an A/B, each run of a lesson, each run of the dashboard). The fork server
(``multiprocessing``'s ``forkserver``) imports them once, single-threaded, before any torch
thread pool or CUDA context exists, and forks every run process from that state: a run starts
in milliseconds. Why not a plain ``fork`` of the caller: the caller (the dashboard, a test
runner) has threads, locks and perhaps a CUDA context that a forked child would inherit half
held; the fork server has none of them.

What a forked run process would not see is its caller's environment as it is *now* — the
server was started by the first run, with the environment of that moment — so every run
carries its caller's ``os.environ`` and sets it before anything else (``_as_called``). Where
``forkserver`` does not exist (Windows), or ``LATENCY_LAB_START_METHOD=spawn`` asks for it (a
pipeline that needs an interpreter of its own), runs are spawned.
"""
from __future__ import annotations

import functools
import multiprocessing as mp
import os
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

from latency.core.errors import ConfigError

#: what the fork server imports before it forks the first run process
PRELOAD = ["latency.execution.engine", "latency.execution.gen_engine"]
#: names the start method: ``forkserver`` (the default where it exists) or ``spawn``
START_METHOD_ENV = "LATENCY_LAB_START_METHOD"


@functools.lru_cache(maxsize=1)
def run_context() -> Any:
    """The multiprocessing context of every run process (its pipes and events too), chosen
    at the first run. ConfigError (one line) for an unknown ``LATENCY_LAB_START_METHOD``."""
    asked = os.environ.get(START_METHOD_ENV, "").strip() or "forkserver"
    if asked not in ("forkserver", "spawn"):
        raise ConfigError(f"{START_METHOD_ENV}={asked!r}: expected forkserver or spawn")
    if asked == "spawn" or "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


_start_lock = threading.Lock()


def _as_called(environ: dict[str, str], target: Callable[..., None], args: tuple) -> None:
    """The run process's first act: the caller's environment, then the run."""
    os.environ.clear()
    os.environ.update(environ)
    target(*args)


def run_process(target: Callable[..., None], args: tuple, *, name: str,
                daemon: bool = True) -> Any:
    """A run process (not started) that calls ``target(*args)`` in the caller's environment."""
    return run_context().Process(target=_as_called, args=(dict(os.environ), target, args),
                               name=name, daemon=daemon)


def start(proc: Any) -> None:
    """Start a run process that imports only the engine.

    Both ``spawn`` and ``forkserver`` re-run the parent's ``__main__`` in the child. Under
    Streamlit that is the dashboard script (and under pytest, pytest): running it again in the
    run process would be wrong and slow. So the child is handed a blank ``__main__``. It
    inherits the parent's ``sys.path`` and working directory (multiprocessing sends them
    along), so ``latency`` imports wherever it did here.
    """
    with _start_lock:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            proc.start()
        finally:
            if main is not None:
                sys.modules["__main__"] = main


class StopFlag:
    """The caller's "stop" to a run process: one shared byte, set by the caller, polled by the
    run process.

    Why not ``multiprocessing.Event``: its ``wait`` registers the waiter in a shared
    condition, and a process that ends (or is killed) while waiting stays registered for ever;
    the next ``set`` then waits for that dead waiter to wake, and the caller hangs (seen: the
    dashboard's run manager closing after its runs had ended). Nothing here ever waits inside
    a shared primitive: the run process looks at the byte every ``POLL_S``."""

    #: how often the run process looks (a stop lands within it; a run never stops faster)
    POLL_S = 0.05

    def __init__(self) -> None:
        self._value = run_context().RawValue("b", 0)

    def set(self) -> None:
        self._value.value = 1

    def is_set(self) -> bool:
        return bool(self._value.value)

    def wait_set(self, until: threading.Event | None = None) -> None:
        """Return once the flag is set (or ``until`` is, a local event that ends the watch)."""
        done = until if until is not None else threading.Event()
        while not self.is_set():
            if done.wait(self.POLL_S):
                return


__all__ = ["PRELOAD", "START_METHOD_ENV", "StopFlag", "run_context", "run_process", "start"]
