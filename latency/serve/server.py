"""The server side: preprocess workers, the batch queue and the model replicas.

Data flow inside one server (docs/architecture.md):

    inbox ─▶ preprocess workers (P threads) ─▶ BatchQueue ─▶ replicas (R threads) ─▶ reply

- Preprocess runs per request on a small worker pool, as a web server's request handlers would.
- ``BatchQueue`` applies the Triton / Ray Serve rule: a free replica takes a batch as soon as
  ``max_batch`` requests wait, or when ``max_delay`` has passed since the *oldest* one arrived.
- Each replica runs forward on the whole batch (every request is charged the batch's forward
  time: that is what it waited for), then post-processes the batch's requests one by one and
  replies to each as soon as its own response is ready.

Every stage that raises fails only the requests it was working on; the server goes on. That
holds for anything a user's stage raises — ``sys.exit()`` and ``KeyboardInterrupt`` too, which
would otherwise end the worker thread and leave its requests unanswered for ever — and for a
stage that returns the wrong thing: a ``split`` (or a ``forward``) that yields fewer or more
outputs than its batch has requests fails the batch, so no request goes unanswered.
"""
from __future__ import annotations

import itertools
import queue
import threading
import time
from collections import deque

import torch

from latency.core.errors import error_text
from latency.core.records import Request
from latency.core.timing import now_ns
from latency.host.devices import synchronize
from latency.pipelines.contract import Pipeline

_STOP = object()
#: how long stopping the server waits for its threads, all of them together
STOP_JOIN_S = 3.0
#: the stages whose thread CPU time is measured against their wall time (``Server.cpu_wait``)
CPU_STAGES = ("preprocess", "forward", "postprocess")


class StageClock:
    """Wall time and the calling thread's CPU time (``time.thread_time_ns``) of each stage,
    summed over the measured (not warm-up) requests: a stage whose wall time is much longer
    than its CPU time waited — for a core, or for the GIL held by another thread of the run
    (or slept, or waited for I/O or a GPU: the caller judges). The forward pass is counted
    once a batch, and only with one thread a replica on the CPU (torch's other intra-op
    threads' CPU time is not the calling thread's; a GPU's wait is not the CPU's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sums = {s: [0, 0, 0] for s in CPU_STAGES}  # wall ns, cpu ns, calls

    def add(self, stage: str, wall_ns: int, cpu_ns: int) -> None:
        with self._lock:
            s = self._sums[stage]
            s[0] += wall_ns
            s[1] += cpu_ns
            s[2] += 1

    def means(self) -> dict[str, dict[str, float]]:
        """Stage → mean wall and CPU ms a call, and the calls counted (stages with none
        left out)."""
        with self._lock:
            return {stage: {"wall_ms": wall / n / 1e6, "cpu_ms": cpu / n / 1e6, "calls": n}
                    for stage, (wall, cpu, n) in self._sums.items() if n}


def _outputs(outputs: object, n: int) -> list[object]:
    """``split``'s result as a list of exactly ``n`` outputs, else an error naming what it
    returned: every request of the batch gets an answer or a reason."""
    try:
        items = list(outputs)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(f"split returned {type(outputs).__name__}, not a list of {n} "
                        "outputs") from None
    if len(items) != n:
        raise ValueError(f"the batch of {n} gave {len(items)} output(s): forward must "
                         f"return one row per request (or split one output per request)")
    return items


class BatchQueue:
    """A FIFO that hands out batches of up to ``max_batch`` after at most ``max_delay_ns``."""

    def __init__(self, max_batch: int, max_delay_ns: int) -> None:
        self.max_batch = max_batch
        self.max_delay_ns = max_delay_ns
        self._items: deque[Request] = deque()
        self._cond = threading.Condition()
        self._closed = False

    def put(self, r: Request) -> None:
        with self._cond:
            self._items.append(r)
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def drain(self) -> list[Request]:
        """Remove and return everything waiting (used when a run is stopped)."""
        with self._cond:
            items = list(self._items)
            self._items.clear()
            return items

    def take(self) -> list[Request] | None:
        """Block until a batch is due; None once closed and empty."""
        with self._cond:
            while not self._items:
                if self._closed:
                    return None
                self._cond.wait()
            if self.max_batch > 1 and self.max_delay_ns > 0:
                deadline = self._items[0].t_pre_end + self.max_delay_ns
                while len(self._items) < self.max_batch and not self._closed:
                    left = deadline - now_ns()
                    if left <= 0:
                        break
                    self._cond.wait(left / 1e9)
                    if not self._items:  # another replica took them meanwhile
                        return [] if not self._closed else None
            n = min(self.max_batch, len(self._items))
            batch = [self._items.popleft() for _ in range(n)]
            if self._items:
                self._cond.notify()  # more waiting: wake another free replica
            return batch


def join_by(threads: list[threading.Thread], deadline: float) -> None:
    """Wait for ``threads`` until ``deadline`` (``time.monotonic``) at most: a thread stuck in
    a hung stage is a daemon and is left behind, so a stop stays short."""
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))


class Server:
    """An in-process model server: preprocess pool, batch queue, replicas."""

    def __init__(self, pipeline: Pipeline, *, replicas: int, threads: int, max_batch: int,
                 max_delay_ms: float, preprocess_workers: int) -> None:
        self.pipeline = pipeline
        self.device = pipeline.device
        self.threads = threads
        self.inbox: queue.SimpleQueue[Request | object] = queue.SimpleQueue()
        self.batches = BatchQueue(max_batch, int(max_delay_ms * 1e6))
        self._batch_ids = itertools.count()
        self.clock = StageClock()
        self._time_forward = threads == 1 and str(self.device).startswith("cpu")
        self._workers = [threading.Thread(target=self._preprocess_loop, name=f"pre-{i}",
                                          daemon=True) for i in range(preprocess_workers)]
        self._replicas = [threading.Thread(target=self._replica_loop, args=(i,),
                                           name=f"replica-{i}", daemon=True)
                          for i in range(replicas)]

    def start(self) -> None:
        for t in self._workers + self._replicas:
            t.start()

    def stop(self) -> None:
        """Ask every thread to end and wait for them, at most ``STOP_JOIN_S`` in all."""
        deadline = time.monotonic() + STOP_JOIN_S
        for _ in self._workers:
            self.inbox.put(_STOP)
        join_by(self._workers, deadline)
        self.batches.close()
        join_by(self._replicas, deadline)

    def abandon_waiting(self) -> int:
        """On Stop: answer every request not yet started as cancelled (left out of the
        results) so a stopped run ends now, not after its whole backlog has been served."""
        dropped: list[Request] = []
        while True:
            try:
                r = self.inbox.get_nowait()
            except queue.Empty:
                break
            if r is _STOP:
                self.inbox.put(r)
                break
            dropped.append(r)  # type: ignore[arg-type]
        dropped += self.batches.drain()
        for r in dropped:
            r.cancelled = True
            r.reply(r)
        return len(dropped)

    # ---- ingress + preprocess ------------------------------------------------------------
    def submit(self, r: Request) -> None:
        """Deliver a request (the in-process transport's only call)."""
        self.inbox.put(r)

    # Both loops run wholly under ``torch.inference_mode``: entered once per thread rather
    # than per request, so a stage's timed span holds the user's code alone (entering and
    # leaving the mode costs ~20 µs, more when the caches are cold after a long stage).
    @torch.inference_mode()
    def _preprocess_loop(self) -> None:
        torch.set_num_threads(1)  # preprocessing must not fight the replicas for cores
        pipeline, batches, clock = self.pipeline, self.batches, self.clock
        while True:
            idle_since = now_ns()
            r = self.inbox.get()
            t_get = now_ns()
            if not isinstance(r, Request):  # _STOP
                return
            # If this worker was already waiting when the request was sent, the gap is the
            # hand-off (network). If it was busy, the request sat in the inbox: delivery was
            # instant and the wait for a free worker is queueing.
            r.t_received = t_get if idle_since <= r.t_sent else r.t_sent
            r.t_pre_start = now_ns()
            cpu0 = time.thread_time_ns()
            try:
                r.item = pipeline.preprocess(r.raw)
            except BaseException as exc:  # one bad request fails alone, whatever it raised
                r.t_pre_end = now_ns()
                r.error = f"preprocess: {error_text(exc)}"
                r.fill_missing_server()
                r.reply(r)
                continue
            r.t_pre_end = now_ns()
            if not r.warmup:
                clock.add("preprocess", r.t_pre_end - r.t_pre_start,
                          time.thread_time_ns() - cpu0)
            batches.put(r)

    # ---- replicas --------------------------------------------------------------------------
    @torch.inference_mode()
    def _replica_loop(self, replica: int) -> None:
        torch.set_num_threads(self.threads)  # per calling thread: each replica its own team
        pipeline, device, clock = self.pipeline, self.device, self.clock
        while True:
            batch = self.batches.take()
            if batch is None:
                return
            if not batch:
                continue
            batch_id = next(self._batch_ids)
            n = len(batch)
            items = [r.item for r in batch]
            for r in batch:
                r.batch_id, r.batch_size, r.replica = batch_id, n, replica
            t0 = now_ns()
            cpu0 = time.thread_time_ns()
            try:
                out = pipeline.forward(pipeline.collate(items))
                synchronize(device)
                t1 = now_ns()
                if self._time_forward and not all(r.warmup for r in batch):
                    clock.add("forward", t1 - t0, time.thread_time_ns() - cpu0)
                outputs = _outputs(pipeline.split(out, n), n)
            except BaseException as exc:  # the whole batch failed together
                t1 = now_ns()
                msg = f"forward: {error_text(exc)}"
                for r in batch:
                    r.t_fwd_start, r.t_fwd_end = t0, t1
                    r.error = msg
                    r.fill_missing_server()
                    r.reply(r)
                continue
            for r, o in zip(batch, outputs):
                r.t_fwd_start, r.t_fwd_end = t0, t1
                r.item = None  # free the input tensor early
                r.t_post_start = now_ns()
                cpu0 = time.thread_time_ns()
                try:
                    r.response = pipeline.postprocess(o)
                except BaseException as exc:
                    r.error = f"postprocess: {error_text(exc)}"
                r.t_post_end = now_ns()
                if not r.warmup:
                    clock.add("postprocess", r.t_post_end - r.t_post_start,
                              time.thread_time_ns() - cpu0)
                r.reply(r)

