"""Execute one generation run: wait for the machine, build, warm up, load, measure, report.

    wait for the machine (run lock) ─▶ pipeline ─▶ GenServer (tokenizer, scheduler) ─▶
    warm-up ─▶ measure (GenDriver: closed or open loop; the machine sampled) ─▶ close

As ``latency.execution.engine`` does for one-shot runs, it never raises for a failure inside
the run: that becomes status ``failed`` with the message, keeping what was measured; a
``cancel`` event stops issuing requests and ends the run ``stopped`` with what it measured.
Memory is bounded: at most ``MAX_TOKENS_STORED`` tokens and ``MAX_STEPS_STORED`` steps are
kept (a run that reaches either stops measuring there and says so).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from latency.analysis.gen_result import GenResult
from latency.core.config import RunConfig
from latency.core.gen_records import STEP_DTYPE, GenLog, GenRequest
from latency.execution.gen_backends import GenBackend, TargetGen, gen_backend
from latency.execution.openai_probe import TargetInfo, probe_target
from latency.execution.remote_tokenizer import TextCounter, target_counter
from latency.execution.run_frame import RunFrame
from latency.execution.validate import validated
from latency.host.devices import DTYPES
from latency.loadgen.gen_driver import GenDriver
from latency.pipelines.gen_workload import build_work
from latency.pipelines.generative import GenerativePipeline
from latency.pipelines.registry import build_pipeline
from latency.pipelines.target_text import TargetText

#: the most token rows a run keeps (43 bytes each, ``TOKEN_DTYPE``: ≈ 172 MB)
MAX_TOKENS_STORED = 4_000_000
#: the most scheduler steps a run keeps (each a tuple of 13 ints while the run goes: ~500
#: bytes in memory, ≈ 1 GB at most; 62 bytes once stored as ``STEP_DTYPE``)
MAX_STEPS_STORED = 2_000_000
#: requests whose generated text a result keeps, to read what was served
TEXT_SAMPLES = 3
#: closed loop: how long streams still running at the end may take to finish
DRAIN_S = 60.0

ProgressCallback = Callable[[dict[str, Any]], None]
#: what a run measured since the last call: request rows, their tokens, scheduler steps, the
#: new requests' errors and what a server of yours said of each new request (its report rows,
#: aligned with the request rows; the indices continue the earlier calls')
LogsCallback = Callable[[np.ndarray, np.ndarray, np.ndarray, dict[int, str], np.ndarray],
                        None]


class _Steps:
    """The scheduler's steps, appended from its thread, bounded."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, ...]] = []
        self.full = False

    def add(self, row: tuple[int, ...]) -> None:
        if len(self.rows) < MAX_STEPS_STORED:
            self.rows.append(row)
        else:
            self.full = True

    def array(self, start: int = 0) -> np.ndarray:
        rows = self.rows[start:]
        return np.array(rows, dtype=STEP_DTYPE) if rows else np.zeros(0, dtype=STEP_DTYPE)


class _Recorder:
    def __init__(self) -> None:
        self.log = GenLog(MAX_TOKENS_STORED)
        self.lock = threading.Lock()
        self.cancelled = 0
        self.samples: dict[int, str] = {}
        self.full = threading.Event()

    def record(self, r: GenRequest) -> None:
        with self.lock:
            if r.cancelled:
                self.cancelled += 1
                return
            i = self.log.append(r)
            if not r.warmup and r.error is None and len(self.samples) < TEXT_SAMPLES:
                self.samples[i] = "".join(r.text)
            if self.log.full:
                self.full.set()


def execute_generation(config: RunConfig, *, cancel: threading.Event | None = None,
                       on_progress: ProgressCallback | None = None, force: bool = False,
                       who: str = "a run",
                       pipeline: GenerativePipeline | None = None,
                       prompts: list[str] | None = None,
                       target: TargetInfo | None = None,
                       counter: TextCounter | None = None,
                       on_logs: LogsCallback | None = None) -> GenResult:
    """Run the generation ``config`` describes (validated here) and return its GenResult.
    ``pipeline``: one built already, served as it is; ``prompts``: the prompt texts to send
    (instead of ``--prompts`` or the pipeline's samples). With ``--target``, the server is
    probed first (``target``: probed already): ConfigError, in one line, when it is not an
    OpenAI-compatible streaming server the run can use. ``on_logs``: called about once a
    second with what was measured since its last call (a live view, and what a run process
    that dies leaves behind), and once more at the end."""
    config = validated(config, pipeline, generation=True)
    if config.target is not None and target is None:
        target = probe_target(config.target, config.api, config.served_model,
                              config.api_key_env)
    if target is not None:  # named as the server names it (validated again, it stays)
        config.model = config.served_model = target.model
        config.api = target.api
        if counter is None:
            counter = target_counter(config, target)
    rec = _Recorder()
    steps = _Steps()

    def set_phase(name: str) -> None:
        if on_progress is not None:
            on_progress({"phase": name, "done": rec.log.size})

    def waiting(holder: str) -> None:
        if on_progress is not None:
            on_progress({"phase": "waiting", "waiting_for": holder})

    frame = RunFrame(config, cancel, who=who, force=force, on_phase=set_phase,
                     on_wait=waiting)
    cancel, timings, env = frame.cancel, frame.timings, frame.env
    server: GenBackend | None = None  # in process, or our server over HTTP
    stop_progress = threading.Event()
    sent = [0, 0, 0]  # rows, tokens and steps handed to on_logs so far
    sending = threading.Lock()  # the reporter's and the end's calls, one at a time

    def send_logs() -> None:
        if on_logs is None:
            return
        with sending, rec.lock:
            rows, tokens = rec.log.view()
            new_rows, new_tokens = rows[sent[0]:].copy(), tokens[sent[1]:].copy()
            new_reports = rec.log.reports_view()[sent[0]:len(rows)].copy()
            errors = {i: m for i, m in rec.log.errors.items() if i >= sent[0]}
            sent[0], sent[1] = len(rows), len(tokens)
            new_steps = steps.array(sent[2])
            sent[2] += len(new_steps)
        on_logs(new_rows, new_tokens, new_steps, errors, new_reports)

    def progress_loop() -> None:
        while not stop_progress.wait(1.0):
            send_logs()
            if on_progress is not None:
                on_progress({"phase": frame.phase, "done": rec.log.size,
                             "elapsed_s": time.monotonic() - frame.phase_started,
                             "measure_start_ns": timings.measure_start_ns,
                             **(server.live() if isinstance(server, TargetGen) else {})})

    reporter = threading.Thread(target=progress_loop, daemon=True, name="progress")
    reporter.start()

    def body() -> None:
        nonlocal pipeline, server
        total = (config.requests or 4096) + config.warmup
        if target is not None:  # a server of yours: nothing of ours to build
            work = build_work(TargetText(counter), config, total, prompts)
            server = TargetGen(config, target, counter)
        else:
            t = time.perf_counter()
            import torch

            torch.set_num_threads(config.threads)
            if pipeline is None:
                pipeline = build_pipeline(config.model, frame.device,  # type: ignore[assignment]
                                          DTYPES[config.dtype], config.model_args,
                                          spec=config.pipeline)
            assert pipeline is not None
            timings.model_load_s = time.perf_counter() - t
            work = build_work(pipeline, config, total, prompts)
            # the context one sequence may hold: the KV budget's default (a simulator of
            # this run needs it)
            env["max_context"] = int(pipeline.max_context)
            server = gen_backend(config, pipeline, steps.add)
        driver = GenDriver(server.start(timings, env), work, rec.record, cancel,
                           turns=config.turns)
        rng = np.random.default_rng(config.seed)
        if config.warmup:
            frame.warm_up(lambda: _drive(driver, config, rng, config.warmup, None, True,
                                         server))
        watcher = threading.Thread(target=_stop_when_full, daemon=True,
                                   args=(rec.full, cancel, stop_progress), name="full")
        watcher.start()
        cancelled_before = rec.cancelled
        dropped = frame.measure(lambda until: _drive(driver, config, rng, config.requests,
                                                     until, False, server))
        if config.rate is not None:
            if not cancel.is_set():  # abandoned in the server when the grace ran out
                dropped += rec.cancelled - cancelled_before
            timings.offered_requests = driver.offered
            timings.offered_span_s = max(driver.last_due_ns - (timings.measure_start_ns or 0),
                                         0) / 1e9
            if dropped:
                timings.dropped_overload = dropped
        if rec.full.is_set():
            frame.warnings.append(f"stopped measuring at {MAX_TOKENS_STORED:,} stored tokens "
                                  "(the most a run keeps): a shorter run, or fewer tokens")
            cancel.clear()
        elif cancel.is_set():
            frame.status = "stopped"
            timings.cancelled_requests = rec.cancelled

    def close() -> None:
        stop_progress.set()
        reporter.join(timeout=5)
        send_logs()
        if server is not None:
            frame.warnings.extend(server.close())
            if isinstance(server, TargetGen) and server.metrics is not None:
                env["server_metrics"] = server.metrics
        if steps.full:
            frame.warnings.append(f"kept the first {MAX_STEPS_STORED:,} scheduler steps only")

    frame.run(body, close)
    with rec.lock:
        rows, tokens = (a.copy() for a in rec.log.view())
        reports = rec.log.reports_view().copy()
        errors = dict(rec.log.errors)
    return GenResult(config=config, environment=env, status=frame.status, rows=rows,
                     tokens=tokens, reports=reports, steps=steps.array(), errors=errors,
                     timings=timings, warnings=frame.warnings, failure=frame.failure,
                     traceback=frame.trace, samples=dict(rec.samples))


def _drive(driver: GenDriver, c: RunConfig, rng: np.random.Generator, count: int | None,
           until_ns: int | None, warmup: bool, server: GenBackend) -> int:
    if c.rate is not None:
        return driver.open(c.rate, c.arrival, rng, count, until_ns, warmup,
                           max_backlog=c.backlog_limit() or 64,
                           grace_s=c.drain_grace() or 2.0, on_grace_expired=server.abandon,
                           burstiness=c.burstiness)
    driver.closed(c.concurrency or 1, count, until_ns, warmup, DRAIN_S)
    return 0


def _stop_when_full(full: threading.Event, cancel: threading.Event,
                    done: threading.Event) -> None:
    """The token log is full: stop issuing requests (the run ends as a completed, shorter
    one; the result says why). Ends with the run (``done``)."""
    while not cancel.is_set() and not done.is_set():
        if full.wait(0.2):
            cancel.set()
            return
