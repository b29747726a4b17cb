"""Iteration-level scheduling, simulated: a generation server without a model.

The same decisions as the server, because they are the server's own: each replica's
``core.gen_scheduler.Scheduler`` plans every step (admission, chunked prefill, the KV budget
and its preemptions, static batching), exactly as ``serve.gen_server`` asks it to. Only the
clock is simulated: a step takes what the fitted cost model says of its prefill tokens, its
decoding sequences and the KV they hold (its own work, its calls, its tokens' detokenizing),
times the machine's level at the time and a spike drawn from the recorded run's own
(``gen_service``); the tokenizer is
one FIFO thread; a token is detokenized after its call, one after another within a call, and
delivered.

Every simulated request is stamped like a measured one (``core.gen_records.GenRequest``, the
same log), so a simulated run is a ``GenResult``: its TTFT and gaps split into the same
components, summarised, charted and compared by the same code as a run that measured —
labelled simulated wherever it is shown (``environment["simulated"]``).

Arrivals are the one-shot simulator's (``simulator.arrivals_ms``: Poisson, constant, bursty,
a recorded run's; Poisson's gaps scaled so that they offer exactly the rate asked), or a
closed loop of clients that ask again when answered. The measured phase
starts from an empty server, as a run's does after its warm-up drains.
"""
from __future__ import annotations

import heapq
from dataclasses import replace
from typing import Any

import numpy as np

from latency.analysis.gen_result import GenResult
from latency.analysis.timings import Timings
from latency.core.config import RunConfig
from latency.core.errors import ConfigError
from latency.core.gen_records import (
    KIND_DECODE,
    KIND_FIRST,
    KIND_RECOMPUTE,
    STEP_DTYPE,
    GenLog,
    GenRequest,
    prefill_attention,
)
from latency.core.gen_scheduler import (
    Scheduler,
    SchedulerConfig,
    Seq,
    refuses,
    scheduler_config,
)
from latency.simulation.config import SimConfig
from latency.simulation.gen_service import GenService, MachineLevel, step_kind
from latency.simulation.simulator import arrivals_ms

#: the most output tokens one simulation stores (a token's row is 43 bytes: ≈ 172 MB)
MAX_SIM_TOKENS = 4_000_000
#: a bound on steps, far above what the tokens need (a step makes at least one token or
#: prefills at least one prompt token): a policy that made no progress would stop here
MAX_SIM_STEPS = 20_000_000
#: the context a pipeline holds when its run did not record one (GenerativePipeline's)
DEFAULT_CONTEXT = 2048

_ARRIVE, _TOKENIZED, _STEP, _STEP_END = 0, 1, 2, 3


class _Length:
    """A sequence's tokens as the scheduler reads them — only how many (no ids simulated)."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def append(self, _token: int) -> None:
        self.n += 1


class _Replica:
    __slots__ = ("index", "scheduler", "incoming", "busy", "level")

    def __init__(self, index: int, config: SchedulerConfig, level: MachineLevel) -> None:
        self.index = index
        self.level = level
        self.scheduler = Scheduler(config)
        self.incoming: list[Seq] = []
        self.busy = False

    @property
    def load(self) -> int:
        s = self.scheduler
        return len(s.waiting) + len(s.running) + len(self.incoming)


def simulate_generation(config: RunConfig, load: SimConfig, service: GenService,
                        prompt_tokens: np.ndarray, output_tokens: np.ndarray,
                        about: dict[str, Any] | None = None) -> GenResult:
    """Simulate ``load.requests`` requests (arrivals or ``load.clients`` closed-loop clients
    from ``load``) to a server with ``config``'s scheduler and replicas and ``service``'s
    costs; request ``i`` has ``prompt_tokens[i % n]`` and ``output_tokens[i % n]`` tokens.
    Returns the simulated run as a ``GenResult`` (``about``: what the simulation was, stored
    in ``environment["simulated"]``). ConfigError (one line) for a simulation too large to
    store."""
    prompts = np.asarray(prompt_tokens, dtype=np.int64)
    outputs = np.asarray(output_tokens, dtype=np.int64)
    if not len(prompts) or len(prompts) != len(outputs):
        raise ConfigError("a generation simulation needs one prompt and output length per "
                          "request (at least one)")
    if prompts.min() < 1 or outputs.min() < 1:
        raise ConfigError("prompt and output lengths must be at least 1 token")
    n = load.requests
    reps = np.arange(n) % len(prompts)
    if int(outputs[reps].sum()) > MAX_SIM_TOKENS:
        raise ConfigError(f"{n:,} requests would generate {int(outputs[reps].sum()):,} "
                          f"tokens: a simulation stores at most {MAX_SIM_TOKENS:,}; simulate "
                          "fewer requests")
    sim = _Sim(config, load, service, prompts, outputs)
    sim.run()
    rows, tokens = sim.log.view()
    steps = np.array(sim.steps, dtype=STEP_DTYPE) if sim.steps else np.zeros(0, STEP_DTYPE)
    timings = Timings(measure_start_ns=0, measure_end_ns=int(sim.end_ns))
    if load.clients is None:
        timings.offered_requests = n
        timings.offered_span_s = sim.last_arrival_ns / 1e9
    cfg = replace(config, requests=n, duration_s=None, seed=load.seed, replicas=load.replicas,
                  rate=None if load.clients else (
                      config.rate if load.arrival == "recorded" and config.rate else load.rate),
                  concurrency=load.clients if load.clients else None,
                  arrival=load.arrival if load.arrival in ("poisson", "constant")
                  else config.arrival)
    environment = {"simulated": {**(about or {}), "service": service.to_dict(),
                                 "load": load.to_dict(), "steps": len(steps)},
                   "max_context": service.max_context}
    result = GenResult(config=cfg, environment=environment,
                       status="completed" if not sim.stopped else "stopped",
                       rows=rows.copy(), tokens=tokens.copy(), steps=steps,
                       errors=dict(sim.log.errors), timings=timings,
                       warnings=list(sim.warnings))
    return result


class _Sim:
    """One simulation's state: the event heap, the tokenizer, the replicas, the logs."""

    def __init__(self, config: RunConfig, load: SimConfig, service: GenService,
                 prompts: np.ndarray, outputs: np.ndarray) -> None:
        self.load = load
        self.service = service
        self.prompts, self.outputs = prompts, outputs
        # the server's own rule (a run that did not record its context: the contract's)
        self.sched = scheduler_config(config, service.max_context or DEFAULT_CONTEXT)
        self.max_context = service.max_context
        self.rng = np.random.default_rng(load.seed)
        self.replicas = [_Replica(i, self.sched, MachineLevel(service.ratio_level, self.rng))
                         for i in range(load.replicas)]
        self.log = GenLog(max_tokens=MAX_SIM_TOKENS)
        self.steps: list[tuple[int, ...]] = []
        self.warnings: list[str] = []
        self.heap: list[tuple[int, int, int, Any]] = []
        self.order = 0
        self.issued = 0
        #: closed loop: arrivals scheduled so far (issued, or waiting in the heap): a client
        #: sends its next request only while these are fewer than the requests asked for
        self.scheduled = 0
        self.tok_free = 0
        self.end_ns = 0
        self.last_arrival_ns = 0
        self.stopped = False
        self.calls = service.calls
        self.own_ms = service.step_own_ms
        self.between_ns = int(service.between_steps_ms * 1e6)
        self.detok_ns = int(service.detokenize_ms * 1e6)
        self.delivery_ns = int(service.delivery_ms * 1e6)

    # ---- events ---------------------------------------------------------------------------
    def push(self, t: int, kind: int, what: Any) -> None:
        self.order += 1
        heapq.heappush(self.heap, (t, self.order, kind, what))

    def run(self) -> None:
        load = self.load
        if load.clients:
            for client in range(min(load.clients, load.requests)):
                self.push(0, _ARRIVE, client)
                self.scheduled += 1
        else:
            times = arrivals_ms(load, self.rng)
            if load.arrival == "poisson" and len(times):
                # the gaps' random draws kept, their sum made the rate asked: n arrivals of a
                # Poisson process over a span are spread as these are, and every point of a
                # sweep (the same draws at every rate) then sits at its own rate, not ~10 %
                # off it with every other point
                times = times * (len(times) * 1000.0 / load.rate / times[-1])
            for t in times:
                self.push(int(t * 1e6), _ARRIVE, -1)
            self.last_arrival_ns = int(times[-1] * 1e6) if len(times) else 0
        steps = 0
        while self.heap:
            t, _, kind, what = heapq.heappop(self.heap)
            if kind == _ARRIVE:
                self.arrive(t, what)
            elif kind == _TOKENIZED:
                self.tokenized(t, what)
            elif kind == _STEP:
                steps += 1
                if steps > MAX_SIM_STEPS:
                    self.stopped = True
                    self.warnings.append(f"stopped after {MAX_SIM_STEPS:,} simulated steps")
                    return
                self.step(t, what)
            else:
                self.step_end(t, *what)

    def arrive(self, t: int, client: int) -> None:
        i = self.issued
        self.issued += 1
        k = i % len(self.prompts)
        prompt, out = int(self.prompts[k]), int(self.outputs[k])
        req = GenRequest(None, out, max(client, 0), False, t)
        req.ids = range(prompt)  # type: ignore[assignment]  # only its length is read
        s = self.service
        req.t_sent = t + int(s.send_lag_ms * 1e6)
        req.t_received = req.t_sent + int(s.network_ms * 1e6)
        req.t_tok_start = max(req.t_received, self.tok_free)
        req.t_tok_end = self.tok_free = req.t_tok_start + int(s.tokenize_ms(prompt) * 1e6)
        why = refuses(prompt, out, self.sched, self.max_context)  # the tokenizer thread's rule
        if why is not None:
            req.error = why
            self.done(req, req.t_tok_end)
            return
        self.push(req.t_tok_end, _TOKENIZED, req)

    def tokenized(self, t: int, req: GenRequest) -> None:
        rep = min(self.replicas, key=lambda r: r.load)
        req.replica = rep.index
        rep.incoming.append(Seq(req=req, tokens=_Length(len(req.ids)),  # type: ignore[arg-type]
                                max_tokens=req.max_tokens))
        if not rep.busy:
            rep.busy = True
            self.push(t + self.between_ns, _STEP, rep)

    def done(self, req: GenRequest, t: int) -> None:
        req.close_gaps()
        self.log.append(req)
        self.end_ns = max(self.end_ns, req.t_done, t)
        if self.load.clients and self.scheduled < self.load.requests:
            self.push(max(req.t_done, t), _ARRIVE, req.client)
            self.scheduled += 1

    # ---- one step -------------------------------------------------------------------------
    def step(self, t: int, rep: _Replica) -> None:
        s = rep.scheduler
        for seq in rep.incoming:
            s.add(seq)
        rep.incoming = []
        if s.idle:
            rep.busy = False
            return
        plan = s.plan()
        for seq in plan.preempted:
            seq.req.preemptions += 1
        for seq in plan.admitted:
            if seq.req.t_admitted == 0:
                seq.req.t_admitted = t
        chunks, decodes = plan.chunks, plan.decodes
        finishing = [q for q, start, n in chunks if start + n >= q.target]
        ending = [q for q in finishing if q.generated + 1 >= q.max_tokens] + [
            q for q in decodes if q.generated + 1 >= q.max_tokens]
        kv = s.kv_used - sum(q.reserved for q in ending)
        prefill_tokens = plan.prefill_tokens
        attention = prefill_attention([(start, n) for _, start, n in chunks])
        ratio = rep.level.next() * self.service.draw_ratio(
            self.rng, step_kind(prefill_tokens, len(decodes)))
        pre_ns = int(self.calls.prefill_call_ms(prefill_tokens, len(chunks), attention)
                     * ratio * 1e6) if chunks else 0
        dec_ns = int(self.calls.decode_call_ms(len(decodes), kv)
                     * ratio * 1e6) if decodes else 0
        detok_ns = int(self.detok_ns * ratio)
        clock = t + int(self.own_ms * ratio * 1e6)
        t_prefill_end = t
        call_ns = 0
        if chunks:
            t0, t1 = clock, clock + pre_ns
            for q, start, n in chunks:
                q.computed = start + n
                q.req.chunks += 1
                q.req.prefill_ns += t1 - t0
            clock = t_prefill_end = t1
            call_ns += pre_ns
            for q in finishing:
                kind = KIND_RECOMPUTE if q.recompute else KIND_FIRST
                q.recompute = False
                clock += detok_ns
                self.emit(q, t0, t1, clock, kind, len(chunks))
        if decodes:
            t0, t1 = clock, clock + dec_ns
            call_ns += dec_ns
            clock = t1
            for q in decodes:
                q.computed += 1
                clock += detok_ns
                self.emit(q, t0, t1, clock, KIND_DECODE, len(decodes))
        t_end = clock
        row = [t, t_prefill_end, t_end, call_ns, prefill_tokens, len(chunks), len(decodes)]
        self.push(t_end, _STEP_END, (rep, ending, row, len(plan.preempted), attention))

    def emit(self, seq: Seq, t0: int, t1: int, t_detok: int, kind: int, batch: int) -> None:
        req = seq.req
        seq.tokens.append(0)  # no id is simulated: only the count
        seq.generated += 1
        req.call_start.append(t0)
        req.produced.append(t1)
        req.detok.append(t_detok)
        req.delivered.append(t_detok + self.delivery_ns)
        req.kinds.append(kind)
        req.batches.append(batch)
        req.output.append(0)
        if len(req.delivered) == 1:
            req.t_first, req.t_first_detok = t1, t_detok
            req.t_first_deliv = t_detok + self.delivery_ns

    def step_end(self, t: int, rep: _Replica, ending: list[Seq], row: list[int],
                 preempted: int, attention: int) -> None:
        s = rep.scheduler
        for seq in ending:
            s.finish(seq)
            seq.req.t_done = seq.req.delivered[-1]
            self.done(seq.req, t)
        # waiting as the server counts it: the scheduler's queue after its plan (a request
        # that came during the step waits for the step, not for a slot)
        self.steps.append((*row, len(s.waiting), len(s.running),
                           s.kv_used, preempted, rep.index, attention))
        self.end_ns = max(self.end_ns, t)
        if s.idle and not rep.incoming:
            rep.busy = False
        else:
            self.push(t + self.between_ns, _STEP, rep)
