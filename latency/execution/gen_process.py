"""One generation run in its own spawned process, as every one-shot run of the CLI is.

Why: a pipeline that segfaults, aborts or calls ``os._exit`` takes the run process, not the
caller — the caller still reports a failed run (exit 1) in one line — and the caller's threads
cannot disturb the timings. The pipeline's module is imported there first; a config it refuses
comes back as one line. The run process sends its progress and what it measured since (the
new request, token and step rows: ``GenLogs``) about once a second, and its whole result when
it ends. A stop sets the run's cancel event; a run process that has not ended
``KILL_AFTER_STOP_S`` after a stop is killed. A run process whose caller dies stops itself (it
watches its parent). A run process that dies mid-run leaves a failed result with the reason
and every request it had reported.
"""
from __future__ import annotations

import multiprocessing as mp
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from latency.analysis.gen_result import GenResult
from latency.core.config import RunConfig
from latency.core.errors import ConfigError, error_text
from latency.core.gen_records import GEN_DTYPE, STEP_DTYPE, TOKEN_DTYPE
from latency.execution.process import KILL_AFTER_STOP_S
from latency.execution.run_start import run_context, run_process, start
from latency.host.processes import exit_now


def _child(config: dict[str, Any], conn: Any, cancel: Any, force: bool, who: str,
           history: str | None = None, name: str | None = None,
           source: str = "cli") -> None:
    """The run process: validate, run, send. Every message goes through one lock — progress,
    logs and the result come from different threads, and a long message is written in more
    than one piece. A run whose caller died stops itself and, given a ``history``, saves what
    it measured there (nobody else will)."""
    import traceback

    from latency.execution.gen_engine import execute_generation
    from latency.execution.validate import validated

    stop = threading.Event()
    orphaned = threading.Event()
    sending = threading.Lock()

    def watch_cancel() -> None:
        cancel.wait()
        stop.set()

    def watch_parent() -> None:
        parent = mp.parent_process()
        if parent is not None:
            parent.join()
            orphaned.set()
            stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: stop.set())
    threading.Thread(target=watch_cancel, daemon=True).start()
    threading.Thread(target=watch_parent, daemon=True).start()

    def send(*message: Any) -> None:
        if orphaned.is_set():
            return
        try:
            with sending:
                conn.send(message)
        except OSError:
            pass  # the caller is gone: watch_parent stops the run

    def progress(p: dict[str, Any]) -> None:
        send("progress", p)

    def logs(rows: Any, tokens: Any, steps: Any, errors: dict[int, str]) -> None:
        send("logs", rows.tobytes(), tokens.tobytes(), steps.tobytes(), errors)

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
        result = execute_generation(checked, cancel=stop, on_progress=progress, force=force,
                                    who=who, target=target, counter=counter, on_logs=logs)
        if orphaned.is_set():
            _keep_orphan(result, history, name, source)
            return
        send("result", result)
    except BaseException as exc:  # noqa: BLE001 - report anything, then die
        send("failed", error_text(exc), traceback.format_exc())
    finally:
        conn.close()
        exit_now(0)


def _keep_orphan(result: GenResult, history: str | None, name: str | None,
                 source: str) -> None:
    """Save the result of a generation whose caller died to ``history`` (if any)."""
    if history is None or not len(result.rows):
        return
    from latency.storage.gen_store import GenerationStore

    result.warnings.append("the process that started this run ended during it (killed?): the "
                           "run stopped itself and saved what it had measured")
    try:
        GenerationStore(history).save(result, name=name, source=source)
    except Exception:  # noqa: BLE001 - nobody is left to tell
        pass


class GenLogs:
    """What a generation run process has reported so far: its request, token and step rows
    (appended as they come, grown by doubling) and its requests' errors."""

    def __init__(self) -> None:
        self.rows = np.zeros(64, dtype=GEN_DTYPE)
        self.tokens = np.zeros(1024, dtype=TOKEN_DTYPE)
        self.steps = np.zeros(256, dtype=STEP_DTYPE)
        self.n = [0, 0, 0]
        self.errors: dict[int, str] = {}

    def add(self, rows: bytes, tokens: bytes, steps: bytes, errors: dict[int, str]) -> None:
        for k, (name, dtype, data) in enumerate((("rows", GEN_DTYPE, rows),
                                                  ("tokens", TOKEN_DTYPE, tokens),
                                                  ("steps", STEP_DTYPE, steps))):
            new = np.frombuffer(data, dtype=dtype)
            have = getattr(self, name)
            need = self.n[k] + len(new)
            if need > len(have):
                grown = np.zeros(max(need, 2 * len(have)), dtype=dtype)
                grown[: self.n[k]] = have[: self.n[k]]
                setattr(self, name, have := grown)
            have[self.n[k]: need] = new
            self.n[k] = need
        self.errors.update(errors)

    def views(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows so far (views: what is below ``n`` is never written again)."""
        return self.rows[: self.n[0]], self.tokens[: self.n[1]], self.steps[: self.n[2]]

    def result(self, config: RunConfig, status: str, failure: str | None = None,
               traceback: str | None = None,
               measure_start_ns: int | None = None) -> GenResult:
        """A result of what was reported (a copy), for a run that sent no result of its own."""
        from latency.analysis.timings import Timings

        rows, tokens, steps = (a.copy() for a in self.views())
        timings = Timings(measure_start_ns=measure_start_ns)
        if measure_start_ns is not None and len(rows):
            timings.measure_end_ns = int(rows["t_done"].max())
        return GenResult(config=config, environment={}, status=status, rows=rows,
                         tokens=tokens, steps=steps, errors=dict(self.errors),
                         timings=timings, failure=failure, traceback=traceback)


def run_generation_process(config: RunConfig, *, cancel: threading.Event,
                           on_progress: Callable[[dict[str, Any]], None] | None = None,
                           force: bool = False, who: str = "a run",
                           history: str | None = None, name: str | None = None,
                           source: str = "cli") -> GenResult:
    """Run ``config`` (checked, not yet imported) in a run process; its GenResult. ConfigError
    (one line) when the run process refuses the config. ``history``: where the run process
    saves its run itself (named ``name``) should its caller die (``kill -9`` of the CLI), as a
    one-shot run's does."""
    receive, send = run_context().Pipe(duplex=False)
    stop = run_context().Event()
    proc = run_process(_child, (config.to_dict(), send, stop, force, who, history, name,
                                source),
                       name="latency-generation", daemon=False)
    start(proc)
    send.close()
    stopped_at: float | None = None
    result: GenResult | None = None
    failure: tuple[str, str | None] | None = None
    reported = GenLogs()
    start_ns: int | None = None
    try:
        while True:
            if cancel.is_set() and stopped_at is None:
                stop.set()
                stopped_at = time.monotonic()
            if stopped_at is not None and time.monotonic() - stopped_at > KILL_AFTER_STOP_S:
                proc.kill()
                failure = ("the run did not stop within "
                           f"{KILL_AFTER_STOP_S:g} s of the stop and was killed", None)
                break
            if not receive.poll(0.2):
                if not proc.is_alive() and not receive.poll(0):
                    break
                continue
            try:
                message = receive.recv()
            except (EOFError, OSError):
                break
            except Exception as exc:  # noqa: BLE001 - an unreadable message: the run failed
                failure = (f"an unreadable message from the run process ({error_text(exc)})",
                           None)
                break
            kind = message[0]
            if kind == "logs":
                reported.add(*message[1:])
            elif kind == "progress":
                start_ns = message[1].get("measure_start_ns") or start_ns
                if on_progress is not None:
                    on_progress(message[1])
            elif kind == "refused":
                raise ConfigError(message[1])
            elif kind == "result":
                result = message[1]
                break
            elif kind == "failed":
                failure = (message[1], message[2])
                break
    finally:
        proc.join(timeout=10)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5)
        receive.close()
    if result is not None:
        return result
    if failure is None and cancel.is_set():
        # a stop to the whole process group (timeout, systemd, a CI runner) also ends the
        # fork server under the run process, which then dies before it hands over its result:
        # that is the stop, not a crash
        return reported.result(config, "stopped", (
            f"stopped: the run process ended (exit code {proc.exitcode}) before it handed "
            f"over its result; the {reported.n[0]} requests it had reported are kept"),
            None, start_ns)
    if failure is None:
        code = proc.exitcode
        killed = code is not None and code < 0 and -code in signal.valid_signals()
        why = f"killed by signal {-code} ({signal.Signals(-code).name})" if killed \
            else f"exit code {code}"
        # a signal from outside (SIGTERM, SIGKILL: a stop, the OOM killer) is not the
        # pipeline's doing; a crash (SIGSEGV, SIGABRT, an exit code) is
        blame = ("it was stopped from outside (a stop, a kill, or the kernel's "
                 "out-of-memory killer)" if killed and -code in (
            signal.SIGTERM, signal.SIGKILL, signal.SIGINT, signal.SIGHUP)
            else "the pipeline crashed the process")
        failure = (f"the run process ended without a result ({why}): {blame}; the "
                   f"{reported.n[0]} requests it had reported are kept", None)
    return reported.result(config, "failed", failure[0], failure[1], start_ns)
