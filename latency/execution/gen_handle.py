"""A generation run in its own process, as a one-shot run's is (``process.RunHandle``): the
caller's side (``GenRunHandle``: start, cancel, live snapshots, the result) and the run
process's (``_child_main``), so the CLI and the dashboard's run manager run, watch and save
generations as they do every other run.

Why a process: a pipeline that segfaults, aborts or calls ``os._exit`` takes the run process,
not the caller — the caller still reports a failed run in one line — and the caller's threads
cannot disturb the timings. The run process reports its progress and what it measured since
(the new request, token and step rows) about once a second; the handle keeps them
(``GenLogs``) and builds a ``GenSnapshot`` only when a viewer asks and something changed.
Every ending keeps what was measured: the run's own result when it sends one, else (killed
after a stop, a crash in the pipeline) the requests it had reported.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from latency.analysis.gen_result import GenResult
from latency.analysis.gen_snapshot import GenSnapshot, build_gen_snapshot, finished_snapshot
from latency.core.config import RunConfig
from latency.core.errors import ConfigError, error_text
from latency.core.gen_records import GEN_DTYPE, STEP_DTYPE, TOKEN_DTYPE
from latency.core.gen_reports import empty_reports
from latency.execution.process import ChildWatch, ProcessHandle, RunOptions, appended
from latency.execution.validate import validated
from latency.host.processes import exit_now


def _child_main(config: dict[str, Any], conn: Any, cancel: Any, force: bool, who: str,
           history: str | None = None, name: str | None = None,
           source: str = "cli") -> None:
    """The run process: validate, run, send. Every message goes through one lock — progress,
    logs and the result come from different threads, and a long message is written in more
    than one piece. A run whose caller died stops itself and, given a ``history``, saves what
    it measured there (nobody else will)."""
    import traceback

    from latency.execution.gen_engine import execute_generation

    watch = ChildWatch(cancel)
    sending = threading.Lock()

    def send(*message: Any) -> None:
        if watch.orphaned.is_set():
            return
        try:
            with sending:
                conn.send(message)
        except OSError:
            pass  # the caller is gone: the watch stops the run

    def logs(rows: Any, tokens: Any, steps: Any, errors: dict[int, str],
             reports: Any) -> None:
        send("logs", rows.tobytes(), tokens.tobytes(), steps.tobytes(), errors,
             reports.tobytes())

    try:
        target = counter = None
        try:
            checked = validated(RunConfig.from_dict(config), generation=True)
            if checked.target is not None:  # a server that is not usable: one line, exit 2
                from latency.execution.openai_probe import probe_target
                from latency.execution.remote_tokenizer import target_counter

                target = probe_target(checked.target, checked.api, checked.served_model,
                                      checked.api_key_env)
                # its tokenizer too (--tokenizer server without one, or one that cannot
                # cut --prompt-tokens): known before the run, so refused before it
                counter = target_counter(checked, target)
        except ConfigError as exc:
            send("refused", str(exc))
            return
        result = execute_generation(checked, cancel=watch.stop,
                                    on_progress=lambda p: send("progress", p), force=force,
                                    who=who, target=target, counter=counter, on_logs=logs)
        if not watch.keep_orphan(result, RunOptions(history=history, name=name,
                                                    source=source)):
            send("result", result)
    except BaseException as exc:  # noqa: BLE001 - report anything, then die
        send("failed", error_text(exc), traceback.format_exc())
    finally:
        conn.close()
        exit_now(0)


class GenLogs:
    """What a generation run process has reported so far: its request, token and step rows
    (appended as they come, grown by doubling) and its requests' errors."""

    def __init__(self) -> None:
        self.rows = np.zeros(64, dtype=GEN_DTYPE)
        self.tokens = np.zeros(1024, dtype=TOKEN_DTYPE)
        self.steps = np.zeros(256, dtype=STEP_DTYPE)
        #: what a server of yours said of each request (aligned with ``rows``)
        self.reports = empty_reports(64)
        self.n = [0, 0, 0, 0]
        self.errors: dict[int, str] = {}

    def add(self, rows: bytes, tokens: bytes, steps: bytes, errors: dict[int, str],
            reports: bytes = b"") -> None:
        for k, (name, data) in enumerate((("rows", rows), ("tokens", tokens),
                                          ("steps", steps), ("reports", reports))):
            have = getattr(self, name)
            new = np.frombuffer(data, dtype=have.dtype)
            setattr(self, name, appended(have, self.n[k], new))
            self.n[k] += len(new)
        self.errors.update(errors)

    def views(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows so far (views: what is below ``n`` is never written again)."""
        return self.rows[: self.n[0]], self.tokens[: self.n[1]], self.steps[: self.n[2]]

    def reports_view(self) -> np.ndarray:
        """What the server said of each request so far, aligned with ``views()``' rows."""
        return self.reports[: self.n[3]]

    def result(self, config: RunConfig, status: str, failure: str | None = None,
               traceback: str | None = None,
               measure_start_ns: int | None = None) -> GenResult:
        """A result of what was reported (a copy), for a run that sent no result of its own."""
        from latency.analysis.timings import Timings

        rows, tokens, steps = (a.copy() for a in self.views())
        timings = Timings(measure_start_ns=measure_start_ns)
        if measure_start_ns is not None and len(rows):
            timings.measure_end_ns = int(rows["t_done"].max())
        reports = self.reports_view().copy() if self.n[3] == self.n[0] else \
            empty_reports(len(rows))
        return GenResult(config=config, environment={}, status=status, rows=rows,
                         tokens=tokens, steps=steps, errors=dict(self.errors),
                         timings=timings, failure=failure, traceback=traceback,
                         reports=reports)


class GenRunHandle(ProcessHandle[GenSnapshot]):
    """A generation run in its own process: snapshots, cancel, result."""

    kind = "generation"
    id_prefix = "gen"

    def __init__(self, config: RunConfig, run_id: str | None = None,
                 options: RunOptions = RunOptions()) -> None:
        super().__init__(run_id, options)
        self.config = validated(config, generation=True, user_code=options.user_code_here)
        self._logs = GenLogs()
        self._final: GenResult | None = None

    def _empty(self, status: str, failure: str | None = None) -> GenResult:
        return GenResult(config=self.config, environment={}, status=status, failure=failure)

    def _child(self, conn: Any) -> tuple[Callable[..., None], tuple]:
        o = self.options
        return _child_main, (self.config.to_dict(), conn, self._cancel, o.force, o.who,
                             o.history, o.name, o.source)

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
                if failure is not None:
                    final = self._logs.result(self.config, "failed", *failure, start)
                else:
                    status, why, warning = self._ending(self._logs.n[0])
                    final = self._logs.result(self.config, status, why, None, start)
                    final.warnings.extend([warning] if warning else [])
        self._end(final)

    def _end(self, final: GenResult) -> None:
        with self._lock:
            self._logs = GenLogs()  # the result holds the rows now: not kept twice
        super()._end(final)

    # ---- reading -------------------------------------------------------------------------
    def result(self) -> GenResult:
        """The GenResult: final once ``done()``, before that what was reported so far."""
        with self._lock:
            if self._final is not None:
                return self._final
            return self._logs.result(self.config, self._status,
                                     measure_start_ns=self._progress.get("measure_start_ns"))

    def rows_so_far(self) -> np.ndarray:
        """The request rows reported so far (a copy)."""
        with self._lock:
            return self._logs.views()[0].copy()

    def _build(self) -> GenSnapshot:
        with self._lock:
            version, status, final = self._version, self._status, self._final
            progress = dict(self._progress)
            rows, tokens, steps = self._logs.views()
            reports = self._logs.reports_view()
            errors = dict(self._logs.errors)
        if final is not None:  # the run's own result, whole
            return finished_snapshot(self.run_id, version, final, progress)
        return build_gen_snapshot(
            self.run_id, version, status, str(progress.get("phase", status)),
            self.config, rows, tokens, steps, errors, progress,
            measure_start_ns=progress.get("measure_start_ns"), reports=reports)
