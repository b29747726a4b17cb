"""Which sequences run in the next step: iteration-level scheduling, as Orca and vLLM do.

A step is one prefill call (a chunk of each prompt being prefilled) and one decode call (one
token for each running sequence). The scheduler decides, before each step, what goes in it:

- **prefill-first** (the default; vLLM's original policy): while slots (``max_running``), the
  step's token budget (``max_step_tokens``) and the KV budget allow, admit waiting prompts and
  prefill each whole. A step that prefills does not decode, so a long prompt's prefill stalls
  every running sequence's next token.
- **chunked prefill** (``chunk``; Sarathi-Serve's stall-free batching, vLLM's default today):
  every running sequence decodes first, one token each; what is left of the budget prefills
  prompts in chunks of at most ``chunk`` tokens, so a long prompt rides along with the decodes
  over several steps instead of stopping them.
- **static** batching (the contrast for teaching): a batch is formed only when the last one has
  finished entirely; new arrivals wait for the whole batch, however short their own work.

The KV budget (``kv_tokens``) counts the tokens every admitted sequence holds. A prompt is
admitted only when its tokens fit; when a decode step needs more than is free, the sequence
admitted last is **preempted**: its cache is freed and it goes back to the front of the queue,
to be prefilled again from its prompt and what it already generated (recompute).

This module decides only: the server (``serve.gen_server``) runs the calls and stamps the
clock, and the generation simulator (``simulation.gen_simulator``) runs the same decisions
against a fitted step cost — one policy, so the simulator cannot drift from the server.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SchedulerConfig:
    """The scheduler's limits (see the module docstring)."""

    max_running: int = 8
    max_step_tokens: int = 2048
    #: chunked prefill: the most prompt tokens of one sequence a step prefills (None: whole)
    chunk: int | None = None
    kv_tokens: int = 1 << 20
    batching: str = "continuous"


def scheduler_config(config: Any, max_context: int) -> SchedulerConfig:
    """The scheduler's limits of a RunConfig, for the server and the simulator alike: the KV
    budget, when not given, is ``--max-running`` whole contexts (no preemption)."""
    kv = config.kv_tokens or config.max_running * int(max_context)
    return SchedulerConfig(config.max_running, config.max_step_tokens, config.chunked_prefill,
                           kv, config.batching)


def refuses(prompt: int, output: int, config: SchedulerConfig,
            context: int | None = None) -> str | None:
    """Why a request of ``prompt`` tokens generating up to ``output`` can never be scheduled
    under ``config`` (None: it can) — the one rule the server's tokenizer thread, the
    simulator and the run's config check all apply, so none of them admits a sequence the
    scheduler could never run or bring back:

    - the sequence must fit the model's ``context`` and the KV budget whole;
    - without chunked prefill (or with static batching, which prefills a batch whole) a
      step prefills a prompt whole, so the prompt must fit the
      step's budget — and, where the KV budget is below ``max_running`` whole contexts (so a
      sequence can be preempted), so must everything a preempted sequence recomputes on its
      return: its prompt and what it generated, up to ``prompt + output − 1`` tokens. vLLM
      refuses the same settings up front (its batch budget must cover the model's length
      without chunked prefill); a scheduler that admitted them would spin on empty steps."""
    need = prompt + output
    if context is not None and need > context:
        return (f"the prompt's {prompt:,} tokens + {output:,} to generate exceed the model's "
                f"context of {context:,}")
    if need > config.kv_tokens:
        return (f"the prompt's {prompt:,} tokens + {output:,} to generate exceed the KV "
                f"budget of {config.kv_tokens:,} tokens (--kv-tokens)")
    if config.chunk is not None and config.batching != "static":
        return None  # chunks: any prompt goes through any step budget, a piece at a time
    if prompt > config.max_step_tokens:
        return (f"the prompt's {prompt:,} tokens exceed the step's budget of "
                f"{config.max_step_tokens:,} (--max-step-tokens) and prefill is not chunked: "
                "raise it, or prefill in chunks (--chunked-prefill N)")
    back = need - 1
    can_preempt = context is None or config.kv_tokens < config.max_running * context
    if can_preempt and back > config.max_step_tokens:
        return (f"a preempted sequence recomputes its prompt and what it generated — up to "
                f"{back:,} tokens — in one step, more than --max-step-tokens "
                f"{config.max_step_tokens:,} without chunked prefill: raise --max-step-tokens "
                f"to {back:,}, prefill in chunks (--chunked-prefill N), or give a KV budget "
                f"that never preempts (--kv-tokens {config.max_running * (context or need):,})")
    return None


@dataclass(eq=False)
class Seq:
    """One sequence as the scheduler sees it: its tokens and how many are in its cache.
    Compared by identity (``eq=False``): the scheduler asks "is this sequence running?" many
    times a step, and comparing two sequences field by field would compare their tokens."""

    req: Any
    #: every token of the sequence so far: the prompt's, then the generated ones
    tokens: list[int]
    max_tokens: int
    #: tokens whose K/V are in the cache (0 while waiting)
    computed: int = 0
    #: tokens to prefill at this admission: the prompt, or everything so far on a recompute
    target: int = 0
    #: KV tokens this sequence holds in the budget
    reserved: int = 0
    kv: Any = None
    generated: int = 0
    admitted_order: int = -1
    detok: Any = None
    recompute: bool = False

    @property
    def prefilling(self) -> bool:
        return self.computed < self.target


@dataclass
class Plan:
    """What the next step runs: prefill chunks (a sequence, its chunk's first position and
    length), the sequences that decode, the sequences admitted, and those preempted."""

    chunks: list[tuple[Seq, int, int]] = field(default_factory=list)
    decodes: list[Seq] = field(default_factory=list)
    admitted: list[Seq] = field(default_factory=list)
    preempted: list[Seq] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.chunks and not self.decodes

    @property
    def prefill_tokens(self) -> int:
        return sum(n for _, _, n in self.chunks)


class Scheduler:
    """The waiting queue, the running set and the KV budget; ``plan()`` makes each step."""

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []
        self.kv_used = 0
        self.preemptions = 0
        self._order = 0

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running

    def add(self, seq: Seq) -> None:
        self.waiting.append(seq)

    def finish(self, seq: Seq) -> None:
        """A sequence is done (or failed): its slot and KV return to the budget."""
        if seq in self.running:
            self.running.remove(seq)
            self.kv_used -= seq.reserved
            seq.reserved = 0

    def plan(self) -> Plan:
        c = self.config
        if c.batching == "static":
            return self._plan_static()
        plan = Plan()
        budget = c.max_step_tokens
        if c.chunk is None:
            self._admit(plan, budget, whole=True)
            if plan.chunks:
                return plan  # prefill-first: a step that prefills does not decode
            plan.decodes = self._decodes(plan)
            return plan
        plan.decodes = self._decodes(plan)
        budget -= len(plan.decodes)
        for seq in self.running:  # prompts already partly prefilled go on first
            if budget <= 0:
                break
            if seq.prefilling:  # (a preempted one left the running set)
                n = min(c.chunk, seq.target - seq.computed, budget)
                plan.chunks.append((seq, seq.computed, n))
                budget -= n
        if not plan.preempted:  # a step that preempted admits nothing (vLLM's rule)
            self._admit(plan, budget, whole=False)
        return plan

    def _decodes(self, plan: Plan) -> list[Seq]:
        """Every running sequence past its prefill decodes one token; preempt the latest
        admitted until the new tokens fit the KV budget."""
        decodes = [s for s in self.running if not s.prefilling]
        while decodes and self.kv_used + len(decodes) > self.config.kv_tokens:
            victim = max(self.running, key=lambda s: s.admitted_order)
            self._preempt(victim, plan)
            if victim in decodes:
                decodes.remove(victim)
        for s in decodes:
            s.reserved += 1
            self.kv_used += 1
        return decodes

    def _preempt(self, seq: Seq, plan: Plan) -> None:
        self.running.remove(seq)
        self.kv_used -= seq.reserved
        seq.reserved = 0
        seq.computed = 0
        seq.recompute = True
        self.preemptions += 1
        plan.preempted.append(seq)
        self.waiting.appendleft(seq)

    def _admit(self, plan: Plan, budget: int, whole: bool) -> None:
        c = self.config
        while self.waiting and len(self.running) < c.max_running and budget > 0:
            seq = self.waiting[0]
            need = len(seq.tokens)  # the prompt, plus what it generated if preempted
            if self.kv_used + need > c.kv_tokens or (whole and need > budget):
                break  # first come, first served: nobody overtakes the head of the queue
            self.waiting.popleft()
            seq.target, seq.computed = need, 0
            seq.reserved = need
            self.kv_used += need
            seq.admitted_order = self._order = self._order + 1
            self.running.append(seq)
            plan.admitted.append(seq)
            n = need if whole else min(c.chunk or need, need, budget)
            plan.chunks.append((seq, 0, n))
            budget -= n

    def _plan_static(self) -> Plan:
        """Static batching: admit a batch only into an empty server; then prefill it whole
        and decode until every sequence of it has finished."""
        plan = Plan()
        if not self.running:
            self._admit(plan, self.config.max_step_tokens, whole=True)
            return plan
        plan.decodes = self._decodes(plan)
        return plan
