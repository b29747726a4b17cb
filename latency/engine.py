"""Execute one profiling run in the current process: build, warm up, load, measure, report.

This is what the spawned run process (``latency.runner``) and the CLI call. It is also the
in-process API for tests. The caller may pass a ``cancel`` event (the run then stops issuing
requests, lets in-flight ones finish and returns status ``stopped`` with what it measured) and
an ``on_rows`` callback that receives new request rows while the run is in flight.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, Sequence

import numpy as np
import torch

from latency import environment
from latency.components import Request, RequestLog
from latency.config import RunConfig, usable_cores
from latency.devices import DTYPES, resolve_device
from latency.load import LoadDriver
from latency.registry import build_pipeline
from latency.result import RunResult
from latency.serving import Server
from latency.timing import GIL_SWITCH_INTERVAL_S, now_ns
from latency.transport import InProcessTransport

#: ``on_rows(new_rows, new_errors, progress)``: rows appended since the last call.
RowsCallback = Callable[[np.ndarray, dict[int, str], dict[str, Any]], None]


class _Recorder:
    """Thread-safe append to the request log, plus incremental hand-off of new rows."""

    def __init__(self, capacity: int) -> None:
        self.log = RequestLog.with_capacity(capacity)
        self.lock = threading.Lock()
        self.cancelled = 0
        self._sent_upto = 0

    def record(self, r: Request) -> None:
        with self.lock:
            if r.cancelled:
                self.cancelled += 1
            else:
                self.log.append(r)

    def take_new(self) -> tuple[np.ndarray, dict[int, str]]:
        with self.lock:
            start, end = self._sent_upto, self.log.size
            rows = self.log.rows[start:end].copy()
            errors = {i: m for i, m in self.log.errors.items() if start <= i < end}
            self._sent_upto = end
        return rows, errors


def execute(config: RunConfig, *, inputs: Sequence[object] | None = None,
            cancel: threading.Event | None = None, on_rows: RowsCallback | None = None,
            progress_interval_s: float = 0.5) -> RunResult:
    """Run ``config`` (validated here) and return its RunResult. Never raises for a failure
    inside the run: that becomes status ``failed`` with the message, keeping what was measured."""
    config = config.validated()
    cancel = cancel or threading.Event()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    device = resolve_device(config.device)
    torch.set_num_threads(config.threads)
    warnings: list[str] = []
    if config.oversubscribed():
        warnings.append(f"oversubscribed: {config.replicas} replicas × {config.threads} threads "
                        f"= {config.replicas * config.threads} > {usable_cores()} cores; "
                        "replicas will steal cores from each other and timings inflate")
    env = environment.collect(device, config.dtype, config.threads, config.replicas)
    expected = (config.requests or 0) + config.warmup
    rec = _Recorder(expected if config.requests else 4096)
    timings: dict[str, Any] = {}
    phase = {"name": "loading", "started": time.monotonic()}
    server: Server | None = None
    http: Any = None
    status, failure = "completed", None

    def progress() -> dict[str, Any]:
        return {"phase": phase["name"], "elapsed_s": time.monotonic() - phase["started"],
                "done": rec.log.size, "expected": expected if config.requests else None,
                "duration_s": config.duration_s,
                "measure_start_ns": timings.get("measure_start_ns")}

    stop_reporter = threading.Event()
    finished = threading.Event()

    def reporter() -> None:
        while not stop_reporter.wait(progress_interval_s):
            rows, errs = rec.take_new()
            on_rows(rows, errs, progress())  # type: ignore[misc]

    rep = threading.Thread(target=reporter, name="reporter", daemon=True)
    if on_rows is not None:
        rep.start()
    try:
        if config.transport == "http":  # real HTTP: our server's own process, or a target
            from latency.transport.run import HttpRun

            http = HttpRun(config)
            pool = list(inputs) if inputs is not None else http.inputs()
            if not pool:
                raise ValueError("no inputs to send")
            transport = http.start(timings, env)
        else:
            t = time.perf_counter()
            pipeline = build_pipeline(config.model, device, DTYPES[config.dtype],
                                      config.model_args)
            timings["model_load_s"] = time.perf_counter() - t
            if config.optimize or config.pre != "fast" or config.post != "fast":
                from latency.optimize import prepare

                phase.update(name="optimising", started=time.monotonic())
                t = time.perf_counter()
                report = prepare(pipeline, config.optimize, config.pre, config.post,
                                 config.batch_size)
                timings["optimize_s"] = time.perf_counter() - t  # levers + accuracy check
                if report is not None:
                    env["optimization"] = report.to_dict()  # library warnings recorded there
            pool = list(inputs) if inputs is not None else pipeline.sample_inputs(
                config.input_pool, config.seed)
            if not pool:
                raise ValueError("no inputs to send")
            server = Server(pipeline, replicas=config.replicas, threads=config.threads,
                            max_batch=config.batch_size, max_delay_ms=config.max_batch_delay_ms,
                            preprocess_workers=config.preprocess_workers)
            server.start()
            def stopper(srv: Server) -> None:  # on Stop, drop what has not started at once
                while not finished.wait(0.1):
                    if cancel.is_set():
                        srv.abandon_waiting()
                        return

            threading.Thread(target=stopper, args=(server,), name="stopper",
                             daemon=True).start()
            transport = InProcessTransport(server)
        driver = LoadDriver(transport.send, pool, rec.record, cancel)
        rng = np.random.default_rng(config.seed)

        def draining() -> None:  # everything is sent; the backlog is still being served
            phase["name"] = "draining" if phase["name"] == "measuring" else phase["name"]

        def drive(count: int | None, until_ns: int | None, warmup: bool) -> None:
            if config.rate is not None:
                driver.open(config.rate, config.arrival, rng, count, until_ns, warmup,
                            on_issued=draining)
            elif hasattr(transport, "closed"):  # HTTP: clients as coroutines on its loop
                transport.closed(driver.next_input, rec.record, cancel,
                                 config.concurrency or 1, count, until_ns, warmup)
            else:
                driver.closed(config.concurrency or 1, count, until_ns, warmup)

        if config.warmup:
            phase.update(name="warmup", started=time.monotonic())
            t = time.perf_counter()
            drive(config.warmup, None, True)
            timings["warmup_s"] = time.perf_counter() - t
        phase.update(name="measuring", started=time.monotonic())
        timings["measure_start_ns"] = now_ns()
        cpu0 = time.process_time()  # this process's CPU while measuring (HTTP: the client's)
        until = (timings["measure_start_ns"] + int(config.duration_s * 1e9)
                 if config.duration_s else None)
        drive(config.requests, until, False)
        timings["measure_end_ns"] = now_ns()
        timings["measure_cpu_s"] = time.process_time() - cpu0
        if cancel.is_set():
            status = "stopped"
            timings["cancelled_requests"] = rec.cancelled
            if rec.cancelled:
                warnings.append(f"stopped: {rec.cancelled} requests still waiting were dropped "
                                "unserved, so this run's tail under-states its queueing")
    except Exception as exc:  # keep what was measured; say what broke, in one line
        status = "failed"
        failure = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        timings.setdefault("measure_end_ns", now_ns())
    finally:
        phase["name"] = "finishing"
        if server is not None:
            server.stop()
        if http is not None:
            http.close(timings, warnings)
        finished.set()
        stop_reporter.set()
        if on_rows is not None:
            rep.join(timeout=5)
            rows, errs = rec.take_new()
            on_rows(rows, errs, progress())
    with rec.lock:
        log = rec.log.view().copy()
        errors = dict(rec.log.errors)
    return RunResult(config=config.to_dict(), environment=env, status=status, log=log,
                     errors=errors, timings=timings, warnings=warnings, failure=failure)
