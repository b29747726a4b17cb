"""One run in its own spawned process, watched through snapshots and cancellable.

Why a process: the dashboard's threads (and its GIL) must not perturb the timings, and a crash
in a pipeline must not take the caller down. The child streams finished request rows to the
parent every second (105 bytes a request, a cheap copy); the parent accumulates them and
builds a Snapshot only when someone asks and the data changed. The child never aggregates, so
watching a run costs the run nothing.

    handle = start_run(RunConfig(model="synthetic", concurrency=4, duration_s=10))
    handle.snapshot()   # -> Snapshot, versioned; cheap when nothing changed
    handle.cancel()     # stop issuing, keep what was measured (status "stopped")
    result = handle.wait()
"""
from __future__ import annotations

import itertools
import multiprocessing as mp
import sys
import threading
import time
import types
import uuid
from typing import Any

import numpy as np

from latency.analysis.result import RunResult
from latency.analysis.snapshot import Snapshot, build_snapshot
from latency.analysis.timings import Timings
from latency.core.config import RunConfig
from latency.core.records import RECORD_DTYPE
from latency.execution.messages import Done, Final, Phase, Rows
from latency.execution.validate import validated

_ctx = mp.get_context("spawn")
#: how often the run process sends new rows: one snapshot version a second is what the
#: dashboard shows, and each version costs the viewers' server one round of figure building.
PROGRESS_INTERVAL_S = 1.0


def _child_main(config: dict[str, Any], conn: Any, cancel: Any, inputs: list[Any] | None
                ) -> None:
    """Entry point of the run process: execute and stream rows back."""
    import traceback

    from latency.execution.engine import execute

    stop = threading.Event()

    def watch_cancel() -> None:  # bridge the process-level event to the engine's thread event
        cancel.wait()
        stop.set()

    threading.Thread(target=watch_cancel, daemon=True).start()

    def on_rows(rows: np.ndarray, errors: dict[int, str], progress: dict[str, Any]) -> None:
        conn.send(Rows(rows.tobytes(), errors, progress))

    try:
        conn.send(Phase("loading"))
        result = execute(RunConfig.from_dict(config), inputs=inputs, cancel=stop,
                         on_rows=on_rows, progress_interval_s=PROGRESS_INTERVAL_S,
                         who="dashboard run")
        conn.send(Done(Final(result.config, result.status, result.environment, result.timings,
                             result.warnings, result.failure, result.traceback)))
    except BaseException as exc:  # noqa: BLE001 - report anything, then die
        text = str(exc).splitlines()[0] if str(exc) else ""
        conn.send(Done(Final.ended(RunConfig.from_dict(config), "failed",
                                   f"{type(exc).__name__}: {text}", traceback.format_exc())))
    finally:
        conn.close()


class RunHandle:
    """The caller's side of a run process: snapshots, cancel, result."""

    _ids = itertools.count(1)

    def __init__(self, config: RunConfig, inputs: list[Any] | None = None,
                 run_id: str | None = None) -> None:
        self.config = validated(config)
        self.run_id = run_id or f"run-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self._inputs = inputs
        self._lock = threading.Lock()
        self._build_lock = threading.Lock()
        self._rows = np.zeros(1024, dtype=RECORD_DTYPE)
        self._n = 0
        self._errors: dict[int, str] = {}
        self._progress: dict[str, Any] = {"phase": "queued", "elapsed_s": 0.0, "done": 0}
        self._version = 0
        self._status = "queued"
        self._final: Final | None = None
        self._snap: Snapshot | None = None
        self._done = threading.Event()
        self._cancel = _ctx.Event()
        self._proc: Any = None
        self.started_at: float | None = None

    # ---- lifecycle -------------------------------------------------------------------------
    # One state machine, every transition under ``_lock``: queued → running → final (completed,
    # stopped, failed), or queued → stopped by a cancel that came first. ``start`` of a run that
    # is no longer queued does nothing, so a Stop landing between the scheduler's check and its
    # call to ``start`` can never spawn a run that was already reported stopped.
    def start(self) -> RunHandle:
        """Spawn the run process — only if the run is still queued (returns self)."""
        with self._lock:
            if self._status != "queued":
                return self
            self._status, self._version = "running", self._version + 1
            self._progress = dict(self._progress, phase="starting")
            self.started_at = time.monotonic()
        parent, child = _ctx.Pipe(duplex=False)
        self._proc = _ctx.Process(target=_child_main, name=f"latency-{self.run_id}",
                                  args=(self.config.to_dict(), child, self._cancel,
                                        self._inputs), daemon=True)
        try:
            _spawn(self._proc)
        except Exception as exc:  # could not spawn: fail this run alone, say why
            with self._lock:
                self._final = Final.ended(self.config, "failed",
                                          f"could not start the run process: {exc}")
                self._status = "failed"
                self._version += 1
            self._done.set()
            return self
        child.close()
        threading.Thread(target=self._read, args=(parent,), name=f"reader-{self.run_id}",
                         daemon=True).start()
        return self

    def cancel(self) -> None:
        """Stop issuing requests; in-flight ones finish; the result is marked ``stopped``. A
        queued run is stopped at once and will never start."""
        with self._lock:
            self._cancel.set()
            if self._status == "queued":  # never started: nothing measured
                self._final = Final.ended(self.config, "stopped")
                self._status = "stopped"
                self._version += 1
                self._done.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> RunResult:
        if not self._done.wait(timeout):
            raise TimeoutError(f"run {self.run_id} still in flight after {timeout} s")
        return self.result()

    # ---- reading ---------------------------------------------------------------------------
    def _read(self, conn: Any) -> None:
        final = None
        try:
            while True:
                msg = conn.recv()
                with self._lock:
                    if isinstance(msg, Rows):
                        self._append(np.frombuffer(msg.rows, dtype=RECORD_DTYPE), msg.errors)
                        self._progress = msg.progress
                    elif isinstance(msg, Phase):
                        self._progress = dict(self._progress, phase=msg.name)
                    elif isinstance(msg, Done):
                        final = msg.final
                    self._version += 1
                if final is not None:
                    break
        except (EOFError, OSError):
            pass
        self._proc.join(timeout=10)
        with self._lock:
            if final is None:
                code = self._proc.exitcode
                final = Final.ended(self.config, "failed",
                                    f"the run process exited unexpectedly (exit code {code})")
            self._final = final
            self._status = final.status
            self._progress = dict(self._progress, phase="done")
            self._version += 1
        self._done.set()

    def _append(self, rows: np.ndarray, errors: dict[int, str]) -> None:
        need = self._n + len(rows)
        if need > len(self._rows):
            grown = np.zeros(max(need, 2 * len(self._rows)), dtype=RECORD_DTYPE)
            grown[: self._n] = self._rows[: self._n]
            self._rows = grown
        self._rows[self._n: need] = rows
        self._errors.update(errors)
        self._n = need

    @property
    def version(self) -> int:
        return self._version

    @property
    def status(self) -> str:
        return self._status

    def snapshot(self) -> Snapshot:
        """The latest Snapshot; rebuilt only when new data arrived since the last call.

        One builder at a time: when thirty viewers ask at once, one builds and the others wait
        for it and share the result instead of building thirty copies.
        """
        with self._build_lock:
            return self._snapshot()

    def _snapshot(self) -> Snapshot:
        with self._lock:
            if self._snap is not None and self._snap.version == self._version:
                return self._snap
            version, status = self._version, self._status
            # A view, not a copy: rows below ``_n`` are never written again, and growing
            # allocates a new array, leaving this one intact.
            rows = self._rows[: self._n]
            errors = dict(self._errors)
            progress = dict(self._progress)
            final = self._final
        if self.started_at is not None and status == "running":
            progress["wall_s"] = time.monotonic() - self.started_at
            start_ns = progress.get("measure_start_ns")
            if progress.get("phase") == "measuring" and start_ns:
                # perf_counter_ns is system-wide on Linux: read the elapsed time now, not as
                # of the run process's last message (up to a second old)
                progress["elapsed_s"] = (time.perf_counter_ns() - start_ns) / 1e9
        progress.update(_fraction(self.config, progress))
        timings = final.timings if final is not None else Timings()
        start = timings.measure_start_ns
        snap = build_snapshot(
            self.run_id, version, status, progress.get("phase", status),
            self.config, rows, errors, progress,
            measure_start_ns=start if start is not None else progress.get("measure_start_ns"),
            measure_end_ns=timings.measure_end_ns,
            warnings=final.warnings if final is not None else None,
            failure=final.failure if final is not None else None)
        with self._lock:
            if self._snap is None or self._snap.version < snap.version:
                self._snap = snap
        return snap

    def result(self) -> RunResult:
        """The RunResult (final once ``done()``; before that, what was measured so far)."""
        with self._lock:
            rows = self._rows[: self._n].copy()
            errors = dict(self._errors)
            final = self._final or Final.ended(self.config, self._status)
        return RunResult(config=final.config, environment=final.environment,
                         status=final.status, log=rows, errors=errors, timings=final.timings,
                         warnings=final.warnings, failure=final.failure,
                         traceback=final.traceback)


_spawn_lock = threading.Lock()


def _spawn(proc: Any) -> None:
    """Start a spawned process that imports only the engine.

    ``spawn`` re-runs the parent's ``__main__`` in the child. Under Streamlit that is the
    dashboard script (and under pytest, pytest): running it again in the run process would
    be wrong and slow. So the child is handed a blank ``__main__``. It inherits the parent's
    ``sys.path`` (multiprocessing sends it along), so ``latency`` imports wherever it did here.
    """
    with _spawn_lock:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            proc.start()
        finally:
            if main is not None:
                sys.modules["__main__"] = main


def _fraction(config: RunConfig, progress: dict[str, Any]) -> dict[str, Any]:
    """Progress as a fraction 0..1 and an estimate of the seconds left."""
    phase = progress.get("phase")
    elapsed = float(progress.get("elapsed_s") or 0.0)
    if phase in ("done", "finishing"):
        return {"fraction": 1.0, "remaining_s": 0.0}
    if phase == "draining":  # all sent; serving the backlog, which has no known length
        return {"fraction": 1.0, "remaining_s": None}
    if phase != "measuring":
        return {"fraction": 0.0, "remaining_s": None}
    if config.duration_s:
        frac = min(elapsed / config.duration_s, 1.0)
        return {"fraction": frac, "remaining_s": max(config.duration_s - elapsed, 0.0)}
    measured = max(int(progress.get("done") or 0) - config.warmup, 0)
    total = config.requests or 1
    frac = min(measured / total, 1.0)
    remaining = elapsed * (1 - frac) / frac if frac > 0 else None
    return {"fraction": frac, "remaining_s": remaining}


def start_run(config: RunConfig, inputs: list[Any] | None = None) -> RunHandle:
    """Validate ``config`` (ConfigError on bad input) and start it in a new process."""
    return RunHandle(config, inputs).start()


def run(config: RunConfig, inputs: list[Any] | None = None,
        timeout: float | None = None) -> RunResult:
    """Run ``config`` in its own process and return the result (blocking)."""
    return start_run(config, inputs).wait(timeout)
