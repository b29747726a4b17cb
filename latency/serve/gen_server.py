"""The generation server: a tokenizer thread, then a continuous-batching scheduler per replica.

    submit ─▶ inbox ─▶ tokenizer thread ─▶ a replica's waiting queue ─▶ scheduler thread:
              step = [prefill call (chunks)] + [decode call (one token per running sequence)]
              ─▶ detokenize each new token ─▶ deliver it to the client (``on_token``)

Every stamp of ``latency.core.gen_records`` is read here but ``sent`` (the client's) and
``delivered`` (the client's, when it has the token). A call's time is every one of its
sequences' (that is batching); the clock is read after ``synchronize``, so a GPU's queued work
is inside the call that queued it. A call that raises fails the sequences of that call only:
each gets its error and ends; the others go on.
"""
from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from latency.core.errors import error_text
from latency.core.gen_records import (
    KIND_DECODE,
    KIND_FIRST,
    KIND_RECOMPUTE,
    GenRequest,
    prefill_attention,
)
from latency.core.gen_scheduler import Plan, Scheduler, SchedulerConfig, Seq, refuses
from latency.core.timing import now_ns
from latency.host.devices import synchronize
from latency.pipelines.generative import DecodeInput, GenerativePipeline, PrefillChunk
from latency.serve.server import STOP_JOIN_S, join_by

_STOP = object()

#: ``on_step(row)``: one scheduler step, as a tuple in ``STEP_DTYPE``'s field order
StepCallback = Callable[[tuple[int, ...]], None]


@dataclass(frozen=True)
class GenServerConfig:
    """What the server needs beyond the scheduler's limits."""

    scheduler: SchedulerConfig
    replicas: int = 1
    stop_on_eos: bool = False


class GenServer:
    """Serves ``GenRequest``s: ``submit`` one; each token reaches ``req.on_token(req, last)``
    and a failure ``req.on_done(req)`` with ``req.error`` set. ``req.on_accepted(req)``, if
    set, is called once its prompt is tokenized and fits; ``cancel(req)`` drops a request
    wherever it is (an HTTP client that went away), freeing its slot and KV."""

    def __init__(self, pipeline: GenerativePipeline, config: GenServerConfig,
                 on_step: StepCallback | None = None) -> None:
        self.pipeline = pipeline
        self.config = config
        self.on_step = on_step
        self.device = getattr(pipeline, "device", torch.device("cpu"))
        self._inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._replicas = [_Replica(self, i) for i in range(config.replicas)]
        self._threads: list[threading.Thread] = []
        self._closed = threading.Event()
        #: how many cancels were asked for: a replica looks for cancelled sequences only
        #: when it changed since its last look
        self.cancels = 0

    # ---- life ----------------------------------------------------------------------------
    def start(self) -> GenServer:
        t = threading.Thread(target=self._tokenize_loop, name="tokenizer", daemon=True)
        self._threads.append(t)
        for rep in self._replicas:
            self._threads.append(threading.Thread(target=rep.loop, daemon=True,
                                                  name=f"scheduler-{rep.index}"))
        for t in self._threads:
            t.start()
        return self

    def submit(self, req: GenRequest) -> None:
        req.t_received = now_ns()
        self._inbox.put(req)

    def cancel(self, req: GenRequest) -> None:
        """Drop ``req`` (from any thread): before its next step each replica removes it from
        its queue or its running set and frees its KV cache; ``req.on_done(req)`` follows,
        with ``req.cancelled`` set. A request still being tokenized is dropped after."""
        req.cancelled = True
        self.cancels += 1
        for rep in self._replicas:
            rep.wake()

    def counts(self) -> dict[str, int]:
        """Sequences running and waiting (for the tokenizer or a slot) at this moment; read
        from any thread, so a moment's view."""
        reps = self._replicas
        return {"running": sum(len(r.scheduler.running) for r in reps),
                "waiting": self._inbox.qsize() + sum(len(r.scheduler.waiting)
                                                     + len(r._incoming) for r in reps)}

    def abandon(self) -> None:
        """Drop every request that has not started: they end cancelled (not results)."""
        for rep in self._replicas:
            rep.abandon_waiting()

    def stop(self) -> None:
        self._closed.set()
        self._inbox.put(_STOP)
        for rep in self._replicas:
            rep.wake()
        join_by(self._threads, time.monotonic() + STOP_JOIN_S)

    @property
    def preemptions(self) -> int:
        return sum(rep.scheduler.preemptions for rep in self._replicas)

    # ---- the tokenizer ----------------------------------------------------------------------
    def _tokenize_loop(self) -> None:
        p = self.pipeline
        limit = int(p.max_context)
        while True:
            req = self._inbox.get()
            if req is _STOP:
                return
            if req.cancelled:
                _done(req)
                continue
            req.t_tok_start = now_ns()
            try:
                ids = list(p.tokenize(req.prompt)) if isinstance(req.prompt, str) \
                    else [int(i) for i in req.prompt]
                req.t_tok_end = now_ns()
                req.ids = ids
                if not ids:
                    raise ValueError("the prompt has no tokens")
                why = refuses(len(ids), req.max_tokens, self.config.scheduler, limit)
                if why is not None:
                    raise ValueError(why)
            except BaseException as exc:  # noqa: BLE001 - the user's tokenizer fails alone
                req.t_tok_end = req.t_tok_end or now_ns()
                req.error = error_text(exc)
                _done(req)
                continue
            if req.on_accepted is not None:
                req.on_accepted(req)
            if req.cancelled:
                _done(req)
                continue
            rep = min(self._replicas, key=lambda r: r.load)
            req.replica = rep.index
            rep.add(Seq(req=req, tokens=list(ids), max_tokens=req.max_tokens))


def _done(req: GenRequest) -> None:
    callback = req.on_done
    if callback is not None:
        callback(req)


class _Replica:
    """One scheduler thread and its queue: runs steps while there is work."""

    def __init__(self, server: GenServer, index: int) -> None:
        self.server = server
        self.index = index
        self.scheduler = Scheduler(server.config.scheduler)
        self._cv = threading.Condition()
        self._incoming: list[Seq] = []

    @property
    def load(self) -> int:
        s = self.scheduler
        return len(s.waiting) + len(s.running) + len(self._incoming)

    def add(self, seq: Seq) -> None:
        with self._cv:
            self._incoming.append(seq)
            self._cv.notify()

    def wake(self) -> None:
        with self._cv:
            self._cv.notify()

    def abandon_waiting(self) -> None:
        with self._cv:
            dropped = self._incoming
            self._incoming = []
            self._abandon = True
            self._cv.notify()
        for seq in dropped:
            seq.req.cancelled = True
            _done(seq.req)

    def loop(self) -> None:
        s = self.scheduler
        self._abandon = False
        seen_cancels = 0
        while not self.server._closed.is_set():
            with self._cv:
                while not self._incoming and s.idle and not self.server._closed.is_set() \
                        and not self._abandon:
                    self._cv.wait(0.5)
                gone = [seq for seq in self._incoming if seq.req.cancelled]
                for seq in self._incoming:
                    if not seq.req.cancelled:
                        s.add(seq)
                self._incoming = []
                abandon, self._abandon = self._abandon, False
            if self.server.cancels != seen_cancels:  # someone cancelled: drop theirs
                seen_cancels = self.server.cancels
                gone += self._drop_cancelled()
            for seq in gone:
                _done(seq.req)
            if abandon:  # Stop: what has not started ends cancelled
                while s.waiting:
                    seq = s.waiting.popleft()
                    if seq.generated == 0:
                        seq.req.cancelled = True
                    _done(seq.req)
            if s.idle:
                continue
            try:
                self.step(s.plan())
            except BaseException as exc:  # noqa: BLE001 - never let the loop die: fail all
                for seq in list(s.running):
                    self._fail(seq, exc)
        for seq in [*s.running, *s.waiting]:  # closed with work left: it ends unanswered
            seq.req.error = seq.req.error or "no reply: the server closed"
            _done(seq.req)

    def _drop_cancelled(self) -> list[Seq]:
        """Take every cancelled sequence out of the queue and the running set, its KV freed."""
        s = self.scheduler
        gone = [seq for seq in [*s.running, *s.waiting] if seq.req.cancelled]
        for seq in gone:
            if seq in s.running:
                s.finish(seq)
            else:
                s.waiting.remove(seq)
            self._free(seq)
        return gone

    # ---- one step ----------------------------------------------------------------------------
    def step(self, plan: Plan) -> None:
        p, s = self.server.pipeline, self.scheduler
        t_start = now_ns()
        for seq in plan.preempted:  # its cache goes; it comes back as a recompute
            seq.req.preemptions += 1
            self._free(seq)
        for seq in plan.admitted:
            if seq.req.t_admitted == 0:
                seq.req.t_admitted = t_start
            seq.req.prefill_ns = 0  # the prefill that counts is this admission's
            a0 = now_ns()
            try:
                seq.kv = p.allocate(len(seq.tokens) + seq.max_tokens - seq.generated)
            except BaseException as exc:  # noqa: BLE001 - this sequence fails alone
                self._fail(seq, exc)
                continue
            seq.req.prefill_ns += now_ns() - a0
            if seq.detok is None:
                seq.detok = p.detokenizer()
        chunks = [(q, start, n) for q, start, n in plan.chunks if q in s.running]
        t_prefill_end = t_start
        call_ns = 0
        if chunks:
            t0 = now_ns()
            try:
                logits = p.prefill([PrefillChunk(q.kv, q.tokens[start:start + n], start)
                                    for q, start, n in chunks])
                finishing = [i for i, (q, start, n) in enumerate(chunks)
                             if start + n >= q.target]
                ids = p.sample(logits[finishing]) if finishing else []
                synchronize(self.server.device)
                if len(ids) != len(finishing):  # the call's sequences fail, no others
                    raise ValueError(f"prefill gave {len(ids)} token(s) for "
                                     f"{len(finishing)} sequences")
                t1 = now_ns()
            except BaseException as exc:  # noqa: BLE001 - the call's sequences fail
                for q, _, _ in chunks:
                    self._fail(q, exc)
                chunks, ids, finishing, t1 = [], [], [], now_ns()
            t_prefill_end = t1
            call_ns += t1 - t0
            for q, start, n in chunks:
                q.computed = start + n
                q.req.chunks += 1
                q.req.prefill_ns += t1 - t0
            batch = len(chunks)
            for i, token in zip(finishing, ids, strict=True):
                q = chunks[i][0]
                kind = KIND_RECOMPUTE if q.recompute else KIND_FIRST
                q.recompute = False
                self._emit(q, int(token), t0, t1, kind, batch)
        decodes = [q for q in plan.decodes if q in s.running]
        if decodes:
            t0 = now_ns()
            try:
                logits = p.decode([DecodeInput(q.kv, q.tokens[-1], q.computed)
                                   for q in decodes])
                ids = p.sample(logits)
                synchronize(self.server.device)
                if len(ids) != len(decodes):
                    raise ValueError(f"decode gave {len(ids)} token(s) for {len(decodes)} "
                                     "sequences")
                t1 = now_ns()
            except BaseException as exc:  # noqa: BLE001 - the call's sequences fail
                for q in decodes:
                    self._fail(q, exc)
                decodes, ids, t1 = [], [], now_ns()
            call_ns += t1 - t0
            for q, token in zip(decodes, ids, strict=True):
                q.computed += 1
                self._emit(q, int(token), t0, t1, KIND_DECODE, len(decodes))
        if self.server.on_step is not None:
            self.server.on_step((t_start, t_prefill_end, now_ns(), call_ns, plan.prefill_tokens,
                                 len(chunks), len(decodes), len(s.waiting), len(s.running),
                                 s.kv_used, len(plan.preempted), self.index,
                                 prefill_attention([(start, n) for _, start, n in chunks])))

    def _emit(self, seq: Seq, token: int, t0: int, t1: int, kind: int, batch: int) -> None:
        """A new token: detokenize it, hand it to the client, and end the sequence when it
        has all its tokens (or, when asked, at EOS)."""
        req = seq.req
        seq.tokens.append(token)
        seq.generated += 1
        try:
            piece = seq.detok.step(token)
        except BaseException as exc:  # noqa: BLE001 - its detokenizer fails it alone
            self._fail(seq, exc)
            return
        t_detok = now_ns()
        req.output.append(token)
        req.text.append(piece)
        req.call_start.append(t0)
        req.produced.append(t1)
        req.detok.append(t_detok)
        req.kinds.append(kind)
        req.batches.append(batch)
        eos = self.server.pipeline.eos_token_id
        stop = self.server.config.stop_on_eos if req.stop_on_eos is None else req.stop_on_eos
        last = seq.generated >= seq.max_tokens or (stop and eos is not None and token == eos)
        if last:
            self.scheduler.finish(seq)
            self._free(seq)
        req.on_token(req, last)

    def _fail(self, seq: Seq, exc: BaseException) -> None:
        seq.req.error = error_text(exc)
        if seq in self.scheduler.running:
            self.scheduler.finish(seq)
        elif seq in self.scheduler.waiting:
            self.scheduler.waiting.remove(seq)
        self._free(seq)
        _done(seq.req)

    def _free(self, seq: Seq) -> None:
        kv, seq.kv = seq.kv, None
        if kv is not None:
            try:
                self.server.pipeline.free(kv)
            except BaseException:  # noqa: BLE001, S110 - a failing free must not stop serving
                pass

