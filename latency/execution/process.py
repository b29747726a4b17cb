"""One run in its own spawned process, watched through snapshots and cancellable.

Why a process: the dashboard's threads (and its GIL) must not perturb the timings, and a crash
in a pipeline (a segfault, ``os._exit``, ``os.abort``) must not take the caller down — the
dashboard and the CLI both run here. The child streams finished request rows to the parent
every second (105 bytes a request, a cheap copy); the parent accumulates them and builds a
Snapshot only when someone asks and the data changed. The child never aggregates, so watching
a run costs the run nothing.

Every ending keeps what was measured: a stop lets in-flight requests finish; a run process
that does not end within ``KILL_AFTER_STOP_S`` of a stop (a stage or constructor that never
returns) is killed and the rows it had sent are the result; a run process that dies is a
failed run with what it had sent; a run process whose parent dies (a dashboard or CLI killed
with SIGKILL) stops itself and saves its own result to the history it was given.

    handle = start_run(RunConfig(model="synthetic", concurrency=4, duration_s=10))
    handle.snapshot()   # -> Snapshot, versioned; cheap when nothing changed
    handle.cancel()     # stop issuing, keep what was measured (status "stopped")
    result = handle.wait()
"""
from __future__ import annotations

import multiprocessing as mp
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from latency.analysis.gen_snapshot import GenSnapshot
from latency.analysis.result import RunResult
from latency.analysis.snapshot import Snapshot, build_snapshot
from latency.analysis.timings import Timings
from latency.core.config import RunConfig
from latency.core.errors import error_text
from latency.core.records import RECORD_DTYPE
from latency.execution.messages import Accepted, Done, Final, Phase, Refused, Rows
from latency.execution.run_start import StopFlag, run_context, run_process, start
from latency.execution.validate import validated
from latency.host.processes import exit_now

if TYPE_CHECKING:
    from typing_extensions import Self

#: how often the run process sends new rows: one snapshot version a second is what the
#: dashboard shows, and each version costs the viewers' server one round of figure building.
PROGRESS_INTERVAL_S = 1.0


#: a stopped run process that has not ended after this long is killed: the engine lets
#: in-flight requests finish for 4 s and our server's threads 3 s more, and the whole stop
#: must fit a container's default 10 s grace before its SIGKILL.
KILL_AFTER_STOP_S = 8.0


@dataclass(frozen=True)
class RunOptions:
    """How the run process runs and who it is, beyond the RunConfig.

    ``user_code_here``: validate the pipeline (import its module, call its ``check_args``) in
    the caller too, for an early one-line error; False leaves that to the run process, so a
    module that crashes or exits at import takes only the run process (a refused config then
    comes back as ``RunHandle.refused``). ``history``: where the run process saves its own
    result if the caller dies mid-run (None: nowhere), under ``name`` and ``source``.
    """

    force: bool = False
    who: str = "dashboard run"
    user_code_here: bool = True
    history: str | None = None
    name: str | None = None
    source: str = "dashboard"


class ChildWatch:
    """What every run process does around its run, one-shot or generation: ``stop`` is set
    by the caller's cancel, by SIGINT or SIGTERM (Ctrl-C reaches the whole process group: stop
    as the caller does) and by the death of the process that started it (``orphaned``)."""

    def __init__(self, cancel: Any) -> None:
        self.stop = threading.Event()
        self.orphaned = threading.Event()

        def watch_cancel() -> None:  # the process-level event, bridged to a thread event
            cancel.wait_set(self.stop)
            self.stop.set()

        def watch_parent() -> None:  # returns when the process that started this run ended
            parent = mp.parent_process()
            if parent is not None:
                parent.join()
                self.orphaned.set()
                self.stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda signum, frame: self.stop.set())
        threading.Thread(target=watch_cancel, daemon=True).start()
        threading.Thread(target=watch_parent, daemon=True).start()

    def keep_orphan(self, result: Any, options: RunOptions) -> bool:
        """Save the result of a run whose caller died, if it measured anything: nobody else
        will. True when the caller died (the result is then not to be sent)."""
        if not self.orphaned.is_set():
            return False
        if options.history is None:
            return True
        from latency.storage.store import RunStore

        # (said before the summary is derived: the summary carries the run's warnings)
        result.warnings.append("the process that started this run ended during it (killed?): "
                               "the run stopped itself and saved what it had measured")
        if not (result.summary.requests or result.summary.warmup_requests):
            return True
        try:
            RunStore(options.history).save(result, name=options.name, source=options.source)
        except Exception:  # noqa: BLE001 - nobody is left to tell
            pass
        return True


def _child_main(config: dict[str, Any], conn: Any, cancel: Any, inputs: list[Any] | None,
                options: RunOptions = RunOptions()) -> None:
    """Entry point of the run process: execute and stream rows back."""
    import traceback

    from latency.core.errors import ConfigError
    from latency.execution.engine import execute

    watch = ChildWatch(cancel)

    def on_rows(rows: np.ndarray, errors: dict[int, str], progress: dict[str, Any]) -> None:
        if not watch.orphaned.is_set():
            try:
                conn.send(Rows(rows.tobytes(), errors, progress))
            except OSError:  # the parent is gone: the watch stops the run
                pass

    try:
        try:  # the caller may have left the pipeline's own code to be checked here
            checked = validated(RunConfig.from_dict(config))
        except ConfigError as exc:
            conn.send(Refused(str(exc)))
            return
        conn.send(Accepted(checked))
        conn.send(Phase("loading"))
        result = execute(checked, inputs=inputs, cancel=watch.stop, on_rows=on_rows,
                         progress_interval_s=PROGRESS_INTERVAL_S, force=options.force,
                         who=options.who)
        if not watch.keep_orphan(result, options):
            conn.send(Done(Final(result.config, result.status, result.environment,
                                 result.timings, result.warnings, result.failure,
                                 result.traceback)))
    except BaseException as exc:  # noqa: BLE001 - report anything, then die
        try:
            conn.send(Done(Final.ended(RunConfig.from_dict(config), "failed", error_text(exc),
                                       traceback.format_exc())))
        except OSError:
            pass  # the parent is gone
    finally:
        conn.close()
        exit_now(0)  # everything is sent (or saved): no interpreter shutdown ("terminate called")


#: what a kind's viewers are given of a run in flight (``Snapshot``, ``GenSnapshot``)
SnapshotT = TypeVar("SnapshotT", Snapshot, GenSnapshot)


class ProcessHandle(Generic[SnapshotT]):
    """What every run process's handle shares — a one-shot run's (``RunHandle``) and a
    generation's (``gen_handle.GenRunHandle``): one state machine, every transition under
    ``_lock``: queued → running → final (completed, stopped, failed), or queued → stopped by
    a cancel that came first; the stop, the kill after it, and the reading of its state.
    A kind gives its empty ending (``_empty``), its run process (``_child``) and its reader
    (``_read``)."""

    #: what a viewer draws of it
    kind = "one-shot"
    #: how the kind's run ids begin, unless the caller names the run
    id_prefix = "run"

    def __init__(self, run_id: str | None, options: RunOptions) -> None:
        self.options = options
        self.run_id = run_id or (f"{self.id_prefix}-{time.strftime('%Y%m%d-%H%M%S')}-"
                                 f"{uuid.uuid4().hex[:6]}")
        self._lock = threading.Lock()
        self._build_lock = threading.Lock()
        self._snap: SnapshotT | None = None
        self._progress: dict[str, Any] = {"phase": "queued", "elapsed_s": 0.0, "done": 0}
        self._version = 0
        self._status = "queued"
        self._final: Any = None
        self._done = threading.Event()
        self._cancel = StopFlag()
        self._proc: Any = None
        self._killed: str | None = None
        self._refused: str | None = None
        self.started_at: float | None = None
        #: the caller's own stop (a command line's signal), which counts as a stop before the
        #: handle is told of it (``run_watched``)
        self._stopped_by: threading.Event | None = None

    def _empty(self, status: str, failure: str | None = None) -> Any:
        """The final value of a run that measured nothing (stopped in line, not spawned)."""
        raise NotImplementedError

    def _child(self, conn: Any) -> tuple[Callable[..., None], tuple]:
        """The run process's function and its arguments (``conn``: its end of the pipe)."""
        raise NotImplementedError

    def _read(self, conn: Any) -> None:
        """Read the run process's messages until it ends, then ``_end`` the run."""
        raise NotImplementedError

    def start(self) -> Self:
        """Spawn the run process — only if the run is still queued (returns self)."""
        if not self._begin():
            return self
        receive, send = run_context().Pipe(duplex=False)
        self._proc = run_process(*self._child(send), name=f"latency-{self.run_id}")
        try:
            start(self._proc)
        except Exception as exc:  # could not spawn: this run fails alone, saying why
            self._end(self._empty("failed", f"could not start the run process: {exc}"))
            return self
        send.close()
        threading.Thread(target=self._read, args=(receive,), name=f"reader-{self.run_id}",
                         daemon=True).start()
        return self

    def _end(self, final: Any) -> None:
        """The run's final value, once: it is done."""
        with self._lock:
            self._final = final
            self._status = final.status
            self._progress = dict(self._progress, phase="done")
            self._version += 1
        self._done.set()

    def _begin(self) -> bool:
        """queued → running, once (False: no longer queued — a Stop landing between the
        scheduler's check and its call to ``start`` can never spawn a run that was already
        reported stopped)."""
        with self._lock:
            if self._status != "queued":
                return False
            self._status, self._version = "running", self._version + 1
            self._progress = dict(self._progress, phase="starting")
            self.started_at = time.monotonic()
        return True

    def result(self) -> Any:
        raise NotImplementedError

    def _build(self) -> SnapshotT:
        """A snapshot of what was reported so far (version and state read under the lock)."""
        raise NotImplementedError

    def snapshot(self) -> SnapshotT:
        """The latest snapshot; rebuilt only when new data arrived since the last call.

        One builder at a time: when thirty viewers ask at once, one builds and the others wait
        for it and share the result instead of building thirty copies.
        """
        with self._build_lock:
            with self._lock:
                if self._snap is not None and self._snap.version == self._version:
                    return self._snap
            snap = self._build()
            with self._lock:
                self._snap = snap
            return snap

    def cancel(self) -> None:
        """Stop issuing requests; in-flight ones finish; the result is marked ``stopped``. A
        queued run is stopped at once and will never start."""
        with self._lock:
            first = not self._cancel.is_set()
            self._cancel.set()
            if self._status == "queued":  # never started: nothing measured
                self._final = self._empty("stopped")
                self._status = "stopped"
                self._version += 1
                self._done.set()
                return
        if first and not self._done.is_set():
            timer = threading.Timer(KILL_AFTER_STOP_S, self.kill,
                                    args=(f"it had not ended {KILL_AFTER_STOP_S:g} s after the "
                                          "stop (a stage or constructor that does not "
                                          "return)",))
            timer.daemon = True
            timer.start()

    def _ending(self, reported: int) -> tuple[str, str | None, str | None]:
        """How a run process that sent no result ended — (status, failure, warning) — for
        either kind: killed by us after a stop, stopped with its caller, stopped or killed
        from outside, or crashed. ``reported``: the requests it had reported (they are kept).
        Caller holds the lock."""
        kept = f"the {reported} requests it had reported are kept"
        if self._killed is not None:
            return "stopped", None, f"the run process was killed: {self._killed}; {kept}"
        code = self._proc.exitcode
        if self._cancel.is_set() or (self._stopped_by is not None and self._stopped_by.is_set()):
            # a stop to the whole process group (timeout, systemd, a CI runner) also ends the
            # fork server under the run process, which may then die before it hands over its
            # result: that is the stop, not a crash
            return "stopped", (f"stopped: the run process ended (exit code {code}) before it "
                               f"handed over its result; {kept}"), None
        if code is not None and code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
            if -code in (signal.SIGTERM, signal.SIGKILL, signal.SIGINT, signal.SIGHUP):
                how += (": stopped from outside (a stop, a kill, or the kernel's out-of-memory "
                        "killer)")
            else:
                how += " (a crash in the pipeline's code or a library it calls)"
        else:
            how = (f"ended with exit code {code} before it reported a result (a crash, or "
                   "os._exit in the pipeline's code)")
        return "failed", f"the run process {how}; {kept}", None

    def kill(self, why: str = "a second stop") -> None:
        """End the run process now (SIGKILL); what it had sent is the result, ``stopped``
        with ``why`` among its warnings. Does nothing once the run has ended."""
        with self._lock:
            proc = self._proc
            if self._done.is_set() or proc is None or self._killed is not None:
                return
            self._killed = why
            self._cancel.set()
        proc.kill()

    @property
    def refused(self) -> str | None:
        """Why the run process refused the config (validated there: RunOptions.user_code_here
        False), one line; None when it did not."""
        return self._refused

    def progress(self) -> dict[str, Any]:
        """The run process's latest progress: phase, elapsed_s, done, and ``waiting_for`` while
        it waits for another run to free the machine."""
        with self._lock:
            return dict(self._progress)

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> Any:
        if not self._done.wait(timeout):
            raise TimeoutError(f"run {self.run_id} still in flight after {timeout} s")
        return self.result()

    @property
    def version(self) -> int:
        return self._version

    @property
    def status(self) -> str:
        return self._status


class RunHandle(ProcessHandle[Snapshot]):
    """The caller's side of a run process: snapshots, cancel, result."""

    def __init__(self, config: RunConfig, inputs: list[Any] | None = None,
                 run_id: str | None = None, options: RunOptions = RunOptions()) -> None:
        super().__init__(run_id, options)
        self.config = validated(config, user_code=options.user_code_here)
        self._inputs = inputs
        self._rows = np.zeros(1024, dtype=RECORD_DTYPE)
        self._n = 0
        self._errors: dict[int, str] = {}
        self._final: Final | None = None

    def _empty(self, status: str, failure: str | None = None) -> Final:
        return Final.ended(self.config, status, failure)

    def _child(self, conn: Any) -> tuple[Callable[..., None], tuple]:
        return _child_main, (self.config.to_dict(), conn, self._cancel, self._inputs,
                             self.options)

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
                    elif isinstance(msg, Accepted):
                        self.config = msg.config
                    elif isinstance(msg, Refused):
                        self._refused = msg.message
                        final = Final.ended(self.config, "failed", msg.message)
                    self._version += 1
                if final is not None:
                    break
        except (EOFError, OSError):
            pass
        self._proc.join(timeout=10)
        if final is None:
            with self._lock:
                final = self._unfinished()
        self._end(final)

    def _unfinished(self) -> Final:
        """The ending of a run process that sent no result (caller holds the lock)."""
        start = self._progress.get("measure_start_ns")
        status, failure, warning = self._ending(self._n)
        return Final(self.config, status, failure=failure, warnings=[warning] if warning else [],
                     timings=Timings(measure_start_ns=start if isinstance(start, int) else None))

    def _append(self, rows: np.ndarray, errors: dict[int, str]) -> None:
        self._rows = appended(self._rows, self._n, rows)
        self._n += len(rows)
        self._errors.update(errors)

    def _build(self) -> Snapshot:
        with self._lock:
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
        return build_snapshot(
            self.run_id, version, status, progress.get("phase", status),
            self.config, rows, errors, progress,
            measure_start_ns=start if start is not None else progress.get("measure_start_ns"),
            measure_end_ns=timings.measure_end_ns,
            warnings=final.warnings if final is not None else None,
            failure=final.failure if final is not None else None)

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


def appended(have: np.ndarray, n: int, new: np.ndarray) -> np.ndarray:
    """``have`` (its first ``n`` rows used) with ``new`` written after them, grown by doubling
    when full: the rows below ``n`` are never written again, so a view of them stays true."""
    need = n + len(new)
    if need > len(have):
        grown = np.zeros(max(need, 2 * len(have)), dtype=have.dtype)
        grown[:n] = have[:n]
        have = grown
    have[n:need] = new
    return have


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


def start_run(config: RunConfig, inputs: list[Any] | None = None,
              options: RunOptions = RunOptions()) -> RunHandle:
    """Validate ``config`` (ConfigError on bad input) and start it in a new process."""
    return RunHandle(config, inputs, options=options).start()


def run_watched(handle: ProcessHandle, *, cancel: threading.Event,
                on_progress: Any = None, poll_s: float = 0.2) -> Any:
    """Start ``handle`` (a run of either kind, not yet started) for a command line, and
    return its result.

    ``cancel`` (set by a signal handler) stops it; a second signal — a KeyboardInterrupt raised
    by that handler — kills the run process at once, keeping what it had reported.
    ``on_progress(dict)`` is called about every ``poll_s`` with the latest progress. A config
    the run process refuses raises ConfigError, as validation here would have.
    """
    from latency.core.errors import ConfigError

    handle._stopped_by = cancel
    handle.start()
    try:
        while not handle.done():
            if cancel.is_set():
                handle.cancel()  # the first call stops it; later ones do nothing
            if on_progress is not None:
                on_progress(handle.progress())
            try:
                handle.wait(poll_s)
            except TimeoutError:
                pass
    except KeyboardInterrupt:
        handle.kill("a second signal")
        handle.wait(KILL_AFTER_STOP_S + 10)
    if handle.refused is not None:
        raise ConfigError(handle.refused)
    return handle.result()


def run(config: RunConfig, inputs: list[Any] | None = None,
        timeout: float | None = None) -> RunResult:
    """Run ``config`` in its own process and return the result (blocking)."""
    return start_run(config, inputs).wait(timeout)
