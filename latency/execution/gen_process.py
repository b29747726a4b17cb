"""One generation run in its own spawned process, as every one-shot run of the CLI is.

Why: a pipeline that segfaults, aborts or calls ``os._exit`` takes the run process, not the
caller — the caller still reports a failed run (exit 1) in one line — and the caller's threads
cannot disturb the timings. The pipeline's module is imported there first; a config it refuses
comes back as one line. The run process sends its progress about once a second and its whole
result (request, token and step logs) when it ends. A stop sets the run's cancel event; a run
process that has not ended ``KILL_AFTER_STOP_S`` after a stop is killed. A run process whose
caller dies stops itself (it watches its parent).

What a crash loses: the result travels at the end, so a run process that dies mid-run leaves
a failed result with the reason and the config, not the requests measured until then (a
one-shot run streams its rows and keeps them).
"""
from __future__ import annotations

import multiprocessing as mp
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from latency.analysis.gen_result import GenResult
from latency.core.config import RunConfig
from latency.core.errors import ConfigError, error_text
from latency.execution.process import KILL_AFTER_STOP_S
from latency.host.processes import exit_now

_ctx = mp.get_context("spawn")


def _child(config: dict[str, Any], conn: Any, cancel: Any, force: bool, who: str) -> None:
    import traceback

    from latency.execution.gen_engine import execute_generation
    from latency.execution.validate import validated

    stop = threading.Event()

    def watch_cancel() -> None:
        cancel.wait()
        stop.set()

    def watch_parent() -> None:
        parent = mp.parent_process()
        if parent is not None:
            parent.join()
            stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: stop.set())
    threading.Thread(target=watch_cancel, daemon=True).start()
    threading.Thread(target=watch_parent, daemon=True).start()

    def progress(p: dict[str, Any]) -> None:
        try:
            conn.send(("progress", p))
        except OSError:
            pass  # the caller is gone: watch_parent stops the run

    try:
        target = None
        try:
            checked = validated(RunConfig.from_dict(config), generation=True)
            if checked.target is not None:  # a server that is not usable: one line, exit 2
                from latency.execution.openai_probe import probe_target

                target = probe_target(checked.target, checked.api, checked.served_model,
                                      checked.api_key_env)
        except ConfigError as exc:
            conn.send(("refused", str(exc)))
            return
        result = execute_generation(checked, cancel=stop, on_progress=progress, force=force,
                                    who=who, target=target)
        conn.send(("result", result))
    except BaseException as exc:  # noqa: BLE001 - report anything, then die
        try:
            conn.send(("failed", error_text(exc), traceback.format_exc()))
        except OSError:
            pass
    finally:
        conn.close()
        exit_now(0)


def run_generation_process(config: RunConfig, *, cancel: threading.Event,
                           on_progress: Callable[[dict[str, Any]], None] | None = None,
                           force: bool = False, who: str = "a run") -> GenResult:
    """Run ``config`` (checked, not yet imported) in a run process; its GenResult. ConfigError
    (one line) when the run process refuses the config."""
    receive, send = _ctx.Pipe(duplex=False)
    stop = _ctx.Event()
    proc = _ctx.Process(target=_child, args=(config.to_dict(), send, stop, force, who),
                        name="latency-generation")
    proc.start()
    send.close()
    stopped_at: float | None = None
    result: GenResult | None = None
    failure: tuple[str, str | None] | None = None
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
            kind = message[0]
            if kind == "progress" and on_progress is not None:
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
    if failure is None:
        code = proc.exitcode
        why = (f"killed by signal {-code} ({signal.Signals(-code).name})"
               if code is not None and code < 0 and -code in signal.valid_signals()
               else f"exit code {code}")
        failure = (f"the run process ended without a result ({why}): the pipeline crashed "
                   "the process (nothing it measured could be kept)", None)
    return GenResult(config=config, environment={}, status="failed", failure=failure[0],
                     traceback=failure[1])
