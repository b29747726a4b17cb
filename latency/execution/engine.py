"""Execute one profiling run in the current process: wait for the machine, build, warm up, load,
measure, report.

This is what the spawned run process (``latency.execution.process``) and the CLI call, and the
in-process API for tests and notebooks. The caller may pass a ``cancel`` event (the run then
stops issuing requests, lets in-flight ones finish and returns status ``stopped`` with what it
measured) and an ``on_rows`` callback that receives new request rows while the run is in
flight.

    wait for the machine (run lock) ─▶ backend.start ─▶ warm-up ─▶ measure ─▶ close
                                        in-process server, or HTTP (ours / a target)

While it measures, a daemon thread samples the machine once a second (what else used its CPU,
steal, preemptions, cgroup throttling, frequency, pressure: ``latency.host.disturbance``); the
result keeps it as ``environment["disturbance"]`` and, when the machine was busy, a ``machine``
finding (``latency.analysis.validity``).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from latency.analysis.result import RunResult
from latency.core.config import RunConfig
from latency.core.records import Request, RequestLog
from latency.execution.backends import backend_for
from latency.execution.run_frame import RunFrame
from latency.execution.validate import validated
from latency.host.cores import oversubscribed, usable_cores
from latency.loadgen.generator import LoadDriver
from latency.loadgen.transport import Transport
from latency.pipelines.contract import Pipeline

#: ``on_rows(new_rows, new_errors, progress)``: rows appended since the last call.
RowsCallback = Callable[[np.ndarray, dict[int, str], dict[str, Any]], None]


class _Recorder:
    """Thread-safe append to the request log, plus incremental hand-off of new rows."""

    def __init__(self, capacity: int) -> None:
        self.log = RequestLog.with_capacity(capacity)
        self.lock = threading.Lock()
        self.cancelled = 0
        self._sent_upto = 0
        #: the transport's ``timing_problem`` (HTTP): why a reply's Server-Timing was unusable
        self.timing_problem: Callable[[Request], str | None] | None = None
        #: measured, successful replies whose Server-Timing was sent but unusable, by why
        self.timing_unusable: dict[str, int] = {}

    def record(self, r: Request) -> None:
        why = self.timing_problem(r) if self.timing_problem is not None else None
        with self.lock:
            if r.cancelled:
                self.cancelled += 1
            else:
                self.log.append(r)
                if why is not None and not r.warmup and r.error is None and not r.decomposed:
                    self.timing_unusable[why] = self.timing_unusable.get(why, 0) + 1

    def take_new(self) -> tuple[np.ndarray, dict[int, str]]:
        with self.lock:
            start, end = self._sent_upto, self.log.size
            rows = self.log.rows[start:end].copy()
            errors = {i: m for i, m in self.log.errors.items() if start <= i < end}
            self._sent_upto = end
        return rows, errors

    def final(self) -> tuple[np.ndarray, dict[int, str]]:
        with self.lock:
            return self.log.view().copy(), dict(self.log.errors)


class _Run:
    """One run's state while it executes: the recorder, what it dropped, its reporting (its
    phase, timings and warnings are its frame's)."""

    def __init__(self, frame: RunFrame, on_rows: RowsCallback | None,
                 progress_interval_s: float) -> None:
        self.frame = frame
        self.config = config = frame.config
        self.on_rows = on_rows
        self.interval = progress_interval_s
        self.expected = (config.requests or 0) + config.warmup
        self.rec = _Recorder(self.expected if config.requests else 4096)
        self.backend: Any = None
        #: open loop: requests dropped by overload (never sent, or abandoned after the grace)
        self.dropped = 0
        self.grace_expired = False
        self._stop_reporter = threading.Event()
        self._reporter: threading.Thread | None = None

    # ---- progress ------------------------------------------------------------------------
    def progress(self) -> dict[str, Any]:
        c, frame = self.config, self.frame
        out = {"phase": frame.phase, "elapsed_s": time.monotonic() - frame.phase_started,
               "done": self.rec.log.size, "expected": self.expected if c.requests else None,
               "dropped": self.dropped,
               "duration_s": c.duration_s,
               "measure_start_ns": frame.timings.measure_start_ns}
        if frame.waiting_for is not None and frame.phase == "waiting":
            out["waiting_for"] = frame.waiting_for
        return out

    def start_reporting(self) -> None:
        if self.on_rows is None:
            return

        def report() -> None:
            # in the first seconds of measuring, hand over five times as often: a viewer's
            # first figures then come within 2 s of measuring starting, not after two
            # whole intervals; afterwards once an interval (the copy is cheap, but not free)
            while not self._stop_reporter.wait(self._report_wait()):
                self.hand_over()

        self._reporter = threading.Thread(target=report, name="reporter", daemon=True)
        self._reporter.start()

    def _report_wait(self) -> float:
        phase = self.frame.phase
        early = phase in ("loading", "warmup", "waiting") or (
            phase == "measuring" and time.monotonic() - self.frame.phase_started < 2.0)
        return min(self.interval, 0.2) if early else self.interval

    def hand_over(self) -> None:
        if self.on_rows is not None:
            rows, errs = self.rec.take_new()
            self.on_rows(rows, errs, self.progress())

    def stop_reporting(self) -> None:
        self._stop_reporter.set()
        if self._reporter is not None:
            self._reporter.join(timeout=5)
        self.hand_over()  # the last rows, and the final phase

    # ---- driving the load ----------------------------------------------------------------
    def drive(self, driver: LoadDriver, transport: Transport, rng: np.random.Generator,
              count: int | None, until_ns: int | None, warmup: bool) -> None:
        c = self.config
        if c.rate is not None:
            cancelled_before = self.rec.cancelled
            self.grace_expired = False

            def grace_expired() -> None:  # the backlog outlived its grace: drop what waits
                self.grace_expired = True
                if self.backend is not None:
                    self.backend.abandon()

            dropped = driver.open(c.rate, c.arrival, rng, count, until_ns, warmup,
                                  on_issued=self._draining, max_backlog=c.backlog_limit(),
                                  grace_s=c.drain_grace(), on_grace_expired=grace_expired,
                                  burstiness=c.burstiness)
            if not warmup:
                self.dropped += dropped
                start = self.frame.timings.measure_start_ns or driver.last_due_ns
                self.frame.timings.offered_requests = driver.offered
                self.frame.timings.offered_span_s = max(driver.last_due_ns - start, 0) / 1e9
                if self.grace_expired:  # abandoned in the server at the end of the grace
                    self.dropped += self.rec.cancelled - cancelled_before
        else:
            transport.run_closed(driver, c.concurrency or 1, count, until_ns, warmup)

    def _draining(self) -> None:  # everything is sent; the backlog is still being served
        if self.frame.phase == "measuring":
            self.frame.phase = "draining"

    def measure(self, transport: Transport, pool: Sequence[object]) -> None:
        c, frame = self.config, self.frame
        driver = LoadDriver(transport.send, pool, self.rec.record, frame.cancel)
        rng = np.random.default_rng(c.seed)
        if c.warmup:
            frame.warm_up(lambda: self.drive(driver, transport, rng, c.warmup, None, True))
        if self.backend is not None:
            self.backend.begin_measuring()  # e.g. the HTTP server's counters start here
        frame.measure(lambda until: self.drive(driver, transport, rng, c.requests, until,
                                               False))


def execute(config: RunConfig, *, inputs: Sequence[object] | None = None,
            cancel: threading.Event | None = None, on_rows: RowsCallback | None = None,
            progress_interval_s: float = 0.5, force: bool = False,
            who: str = "a run", pipeline: Pipeline | None = None) -> RunResult:
    """Run ``config`` (validated here) and return its RunResult. Never raises for a failure
    inside the run: that becomes status ``failed`` with the message (and the traceback),
    keeping what was measured.

    The run first takes the machine's run lock (``latency.execution.lock``), waiting behind any
    other run on this machine; ``force`` runs at once and both runs then carry a warning.
    ``who`` names this run to the runs that wait behind it. ``pipeline``: a pipeline object
    already built (``latency.profile`` of an object), served as it is.
    """
    config = validated(config, pipeline)
    frame = RunFrame(config, cancel, who=who, force=force)
    run = _Run(frame, on_rows, progress_interval_s)
    if oversubscribed(config.replicas, config.threads):
        frame.warnings.append(
            f"oversubscribed: {config.replicas} replicas × {config.threads} threads "
            f"= {config.replicas * config.threads} > {usable_cores()} cores; "
            "replicas will steal cores from each other and timings inflate")
    backend = run.backend = backend_for(config, pipeline)
    run.start_reporting()

    def body() -> None:
        transport = backend.start(frame.timings, frame.env, on_phase=frame.set_phase)
        run.rec.timing_problem = getattr(transport, "timing_problem", None)
        pool = list(inputs) if inputs is not None else backend.inputs()
        if not pool:
            raise ValueError("no inputs to send")
        stopper = threading.Thread(target=_abandon_on_cancel, daemon=True, name="stopper",
                                   args=(frame.cancel, backend, run))
        stopper.start()
        run.measure(transport, pool)
        if run.dropped:
            frame.timings.dropped_overload = run.dropped
        if frame.cancel.is_set():
            frame.status = "stopped"
            frame.timings.cancelled_requests = run.rec.cancelled
            if run.rec.cancelled and not run.grace_expired:
                frame.warnings.append(
                    f"stopped: {run.rec.cancelled} requests still waiting were dropped "
                    "unserved, so this run's tail under-states its queueing")

    def close() -> None:
        backend.close(frame.timings, frame.warnings)
        run.stop_reporting()

    frame.run(body, close)
    log, errors = run.rec.final()
    if run.rec.timing_unusable:  # a target that sent Server-Timing we could not use
        frame.timings.server_timing_unusable = dict(run.rec.timing_unusable)
    return RunResult(config=config, environment=frame.env, status=frame.status, log=log,
                     errors=errors, timings=frame.timings, warnings=frame.warnings,
                     failure=frame.failure, traceback=frame.trace)


def _abandon_on_cancel(cancel: threading.Event, backend: Any, run: _Run) -> None:
    """On Stop, drop what has not started at once (the run ends now, not after its backlog)."""
    while not cancel.wait(0.1):
        if run.frame.phase == "finishing":
            return
    if run.frame.phase != "finishing":
        backend.abandon()
