"""The caller's side of a generation run process, as ``RunHandle`` is a one-shot run's: start,
cancel, live snapshots, the result — so the dashboard's run manager queues, watches and saves
generation runs as it does every other run.

The run process (``gen_process``) reports what it measured about once a second; the handle
keeps it (``GenLogs``) and builds a ``GenSnapshot`` only when a viewer asks and something
changed. Every ending keeps what was measured: the run's own result when it sends one, else
(killed after a stop, a crash in the pipeline) the requests it had reported.
"""
from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from latency.analysis.gen_result import GenResult
from latency.analysis.gen_snapshot import GenSnapshot, build_gen_snapshot, finished_snapshot
from latency.core.config import RunConfig
from latency.core.errors import error_text
from latency.execution.gen_process import GenLogs, _child
from latency.execution.process import ProcessHandle, RunOptions
from latency.execution.run_start import run_context, run_process, start
from latency.execution.validate import validated


class GenRunHandle(ProcessHandle):
    """A generation run in its own process: snapshots, cancel, result."""

    kind = "generation"

    def __init__(self, config: RunConfig, run_id: str | None = None,
                 options: RunOptions = RunOptions()) -> None:
        super().__init__(
            run_id or f"gen-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}", options)
        self.config = validated(config, generation=True, user_code=options.user_code_here)
        self._logs = GenLogs()
        self._final: GenResult | None = None
        self._snap: GenSnapshot | None = None

    def _never_started(self) -> GenResult:
        return GenResult(config=self.config, environment={}, status="stopped")

    # ---- lifecycle: queued → running → completed | stopped | failed ------------------------
    def start(self) -> GenRunHandle:
        """Spawn the run process — only if the run is still queued (returns self)."""
        if not self._begin():
            return self
        receive, send = run_context().Pipe(duplex=False)
        o = self.options
        self._proc = run_process(_child, (self.config.to_dict(), send, self._cancel, o.force,
                                          o.who, o.history, o.name, o.source),
                                 name=f"latency-{self.run_id}")
        try:
            start(self._proc)
        except Exception as exc:  # could not spawn: this run fails alone, saying why
            self._end(GenResult(config=self.config, environment={}, status="failed",
                                failure=f"could not start the run process: {exc}"))
            return self
        send.close()
        threading.Thread(target=self._read, args=(receive,), name=f"reader-{self.run_id}",
                         daemon=True).start()
        return self

    def _read(self, conn: Any) -> None:
        final: GenResult | None = None
        failure: tuple[str, str | None] | None = None
        try:
            while final is None and failure is None:
                message = conn.recv()
                kind = message[0]
                with self._lock:
                    if kind == "logs":
                        self._logs.add(*message[1:])
                    elif kind == "progress":
                        self._progress = {**self._progress, **message[1]}
                    elif kind == "refused":
                        self._refused = message[1]
                        failure = (message[1], None)
                    elif kind == "result":
                        final = message[1]
                    elif kind == "failed":
                        failure = (message[1], message[2])
                    self._version += 1
        except (EOFError, OSError):
            pass
        except Exception as exc:  # noqa: BLE001 - an unreadable message must still end the run
            failure = (f"an unreadable message from the run process ({error_text(exc)})", None)
        self._proc.join(timeout=10)
        if final is None:
            with self._lock:
                start = self._progress.get("measure_start_ns")
                if failure is None and self._killed is not None:
                    final = self._logs.result(self.config, "stopped",
                                              measure_start_ns=start)
                    final.warnings.append(f"the run process was killed: {self._killed}; the "
                                          f"{self._logs.n[0]} requests it had reported are "
                                          "kept")
                else:
                    why = failure or (f"the run process ended without a result (exit code "
                                      f"{self._proc.exitcode}); the {self._logs.n[0]} "
                                      "requests it had reported are kept", None)
                    final = self._logs.result(self.config, "failed", why[0], why[1], start)
        self._end(final)

    def _end(self, final: GenResult) -> None:
        with self._lock:
            self._final = final
            self._logs = GenLogs()  # the result holds the rows now: not kept twice
            self._status = final.status
            self._progress = dict(self._progress, phase="done")
            self._version += 1
        self._done.set()

    # ---- reading -------------------------------------------------------------------------
    def result(self) -> GenResult:
        """The GenResult: final once ``done()``, before that what was reported so far."""
        with self._lock:
            if self._final is not None:
                return self._final
            return self._logs.result(self.config, self._status,
                                     measure_start_ns=self._progress.get("measure_start_ns"))

    def snapshot(self) -> GenSnapshot:
        """The latest snapshot, rebuilt only when something arrived since the last one (one
        builder at a time: viewers asking together share it)."""
        with self._build_lock:
            with self._lock:
                if self._snap is not None and self._snap.version == self._version:
                    return self._snap
                version, status, final = self._version, self._status, self._final
                progress = dict(self._progress)
                rows, tokens, steps = self._logs.views()
                errors = dict(self._logs.errors)
            if final is not None:  # the run's own result, whole
                snap = finished_snapshot(self.run_id, version, final, progress)
            else:
                snap = build_gen_snapshot(
                    self.run_id, version, status, str(progress.get("phase", status)),
                    self.config, rows, tokens, steps, errors, progress,
                    measure_start_ns=progress.get("measure_start_ns"))
            self._snap = snap
            return snap
