"""The skeleton every run shares, one-shot or generation: wait for the machine, warm up,
measure with the machine sampled, end as completed, stopped or failed, and keep what was
measured.

    RunFrame ─▶ wait for the machine (run lock) ─▶ body: build, warm_up(…), measure(…) ─▶
    close (the body's server) ─▶ finish: the machine's finding, lock released

The engines (``engine.execute`` for one-shot requests, ``gen_engine.execute_generation`` for
streamed generation) differ only in what they build and drive; what a run *is* — its timings,
warnings, status, the machine while it measured — is decided here, once, so the two kinds of
run can never disagree on it.
"""
from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from latency.analysis.timings import Timings
from latency.analysis.validity import machine_finding
from latency.core.config import RunConfig
from latency.core.errors import error_text
from latency.core.timing import GIL_SWITCH_INTERVAL_S, now_ns
from latency.execution.lock import Holder, MachineLock
from latency.host import environment
from latency.host.devices import resolve_device
from latency.host.disturbance import DisturbanceSampler
from latency.host.processes import local_server_pids

T = TypeVar("T")


class RunFrame:
    """One run's frame: its environment, timings, warnings and ending (``status``,
    ``failure``, ``trace``), and its phase (``waiting_for``: who holds the machine while it
    waits for it). ``on_phase(name)`` hears each phase as it begins; ``on_wait`` who holds
    the machine while the run waits for it."""

    def __init__(self, config: RunConfig, cancel: threading.Event | None, *, who: str,
                 force: bool,
                 on_phase: Callable[[str], None] | None = None,
                 on_wait: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.cancel = cancel or threading.Event()
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)  # every run, either kind, measures under it
        self.device = resolve_device(config.device)
        self.env = environment.collect(self.device, config.dtype, config.threads,
                                       config.replicas)
        self.timings = Timings()
        self.warnings: list[Any] = []
        self.status = "completed"
        self.failure: str | None = None
        self.trace: str | None = None
        self.phase, self.phase_started = "waiting", time.monotonic()
        self.waiting_for: str | None = None
        self.started_wall = time.time()
        self._on_phase, self._on_wait = on_phase, on_wait
        self._lock = MachineLock(f"{who}: {config.model}", force=force)
        self._disturbance: dict[str, Any] | None = None

    def set_phase(self, name: str) -> None:
        self.phase, self.phase_started = name, time.monotonic()
        if self._on_phase is not None:
            self._on_phase(name)

    def run(self, body: Callable[[], None], close: Callable[[], None]) -> None:
        """Wait for the machine, then ``body``; ``close`` always follows. A failure inside
        becomes status ``failed`` with its one line and traceback, keeping what was measured;
        a stop while waiting, status ``stopped``."""
        try:
            self.set_phase("waiting")

            def waiting(holder: Holder | None) -> None:
                self.waiting_for = holder.describe() if holder else "another run"
                if self._on_wait is not None:
                    self._on_wait(self.waiting_for)

            if not self._lock.acquire(self.cancel, on_wait=waiting):
                self.status = "stopped"
                self.warnings.append("stopped while waiting for another run to free the "
                                     "machine")
                return
            if self._lock.waited_s > 0.5:
                self.timings.waited_for_machine_s = self._lock.waited_s
            self.set_phase("loading")
            body()
        except Exception as exc:  # keep what was measured; say what broke, in one line
            self.status, self.failure = "failed", error_text(exc)
            self.trace = traceback.format_exc()
            if self.timings.measure_start_ns is not None and self.timings.measure_end_ns is None:
                self.timings.measure_end_ns = now_ns()
        finally:
            self.set_phase("finishing")
            close()
            if self._lock.acquired:
                self.warnings += self._lock.release()
            self._finish()

    def warm_up(self, drive: Callable[[], object]) -> None:
        """The warm-up (``drive``), timed; nothing of it is measured."""
        self.set_phase("warmup")
        t = time.perf_counter()
        drive()
        self.timings.warmup_s = time.perf_counter() - t

    def measure(self, drive: Callable[[int | None], T]) -> T:
        """The measured phase: ``drive(until_ns)`` (None: no time limit) between the stamps
        of its start and end, with this process's CPU and the machine sampled throughout."""
        self.set_phase("measuring")
        c = self.config
        start = self.timings.measure_start_ns = now_ns()
        cpu0 = time.process_time()  # this process's CPU while measuring (HTTP: the client's)
        sampler = DisturbanceSampler(
            run_started=self.started_wall,
            target_pids=local_server_pids(str(c.target)) if c.target else None).start()
        try:
            return drive(start + int(c.duration_s * 1e9) if c.duration_s else None)
        finally:
            self._disturbance = sampler.stop()
            self.timings.measure_end_ns = now_ns()
            self.timings.measure_cpu_s = time.process_time() - cpu0

    def _finish(self) -> None:
        """The machine while the run measured, and its finding when it was busy."""
        if self._disturbance is not None:
            self.env["disturbance"] = self._disturbance
            finding = machine_finding(self.env)
            if finding is not None:
                self.warnings.append(finding)
