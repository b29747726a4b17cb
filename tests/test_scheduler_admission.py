"""The scheduler owns admission: a request it admits can always be run, and brought back
after a preemption, so a step plan is never empty while work is left — for the server's
scheduler driven step by step here and for the simulator alike — and settings under which a
request could never be scheduled are refused before the run, in one line.

Property tests (hypothesis, derandomized): random limits, prefill policy, KV budget and
request lengths; every request the rule (``gen_scheduler.refuses``) lets in must finish,
within a bound on the steps, with no empty step on the way.
"""
from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from latency.core.config import RunConfig
from latency.core.gen_scheduler import Scheduler, SchedulerConfig, Seq, refuses
from latency.simulation.config import SimConfig
from latency.simulation.gen_simulator import simulate_generation
from tests.cli_support import cli_here
from tests.test_gen_simulator import EXACT

CONTEXT = 512


@st.composite
def settings_and_requests(draw: st.DrawFn) -> tuple[SchedulerConfig, list[tuple[int, int]]]:
    max_running = draw(st.integers(1, 6))
    chunk = draw(st.one_of(st.none(), st.integers(1, 64)))
    step = draw(st.integers(max(chunk or 1, 8), 400))
    kv = draw(st.integers(8, max_running * CONTEXT + 64))
    batching = draw(st.sampled_from(["continuous", "continuous", "static"]))
    requests = draw(st.lists(st.tuples(st.integers(1, 200), st.integers(1, 80)),
                             min_size=1, max_size=10))
    return SchedulerConfig(max_running, step, chunk, kv, batching), requests


def drive(config: SchedulerConfig, requests: list[tuple[int, int]], max_steps: int) -> int:
    """The server's loop with every call instant: each plan applied as ``gen_server`` does
    (a chunk's prefill advances the cache, its last chunk makes a token; a decode one more);
    returns the steps taken. Fails on an empty plan while work is left."""
    s = Scheduler(config)
    for prompt, out in requests:
        s.add(Seq(req=None, tokens=[0] * prompt, max_tokens=out))
    steps = 0
    while not s.idle:
        steps += 1
        assert steps <= max_steps, f"no end after {max_steps} steps: {config}"
        plan = s.plan()
        assert not plan.empty, (f"an empty step with {len(s.waiting)} waiting and "
                                f"{len(s.running)} running: {config}")
        done: list[Seq] = []
        for q, start, n in plan.chunks:
            q.computed = start + n
            if q.computed >= q.target:  # its prefill ends in a token
                q.tokens.append(0)
                q.generated += 1
                if q.generated >= q.max_tokens:
                    done.append(q)
        for q in plan.decodes:
            q.computed += 1
            q.tokens.append(0)
            q.generated += 1
            if q.generated >= q.max_tokens:
                done.append(q)
        for q in done:
            s.finish(q)
    return steps


@settings(max_examples=300, deadline=None, derandomize=True)
@given(settings_and_requests())
def test_every_admitted_request_finishes_and_no_step_is_empty(case):
    config, requests = case
    admitted = [(p, o) for p, o in requests if refuses(p, o, config, CONTEXT) is None]
    tokens = sum(p + o for p, o in admitted)
    # a bound far above any schedule: every step moves at least one token forward, and
    # each preemption costs at most one sequence's tokens again
    drive(config, admitted, max_steps=50 * (tokens + 1) * (len(admitted) + 1))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(settings_and_requests())
def test_the_simulator_ends_under_any_settings_and_refuses_what_the_rule_refuses(case):
    config, requests = case
    prompts = np.array([p for p, _ in requests])
    outputs = np.array([o for _, o in requests])
    run = RunConfig(model="synthetic-lm", max_running=config.max_running,
                    max_step_tokens=config.max_step_tokens, chunked_prefill=config.chunk,
                    kv_tokens=config.kv_tokens, batching=config.batching)
    service = dataclasses.replace(EXACT, max_context=CONTEXT)
    load = SimConfig(rate=50.0, requests=len(requests), seed=1).checked()
    r = simulate_generation(run, load, service, prompts, outputs)
    refused = sum(refuses(int(p), int(o), config, CONTEXT) is not None
                  for p, o in zip(prompts, outputs, strict=True))
    assert r.summary.errors == refused
    assert r.summary.successful == len(requests) - refused


def test_a_preempted_sequence_that_could_never_come_back_is_refused_before_the_run():
    """Without chunked prefill a preempted sequence recomputes prompt + generated in one
    step: 80 + 59 tokens cannot fit a step of 100 — the server would spin on empty steps.
    Refused before anything runs, naming the fixes."""
    out = cli_here("run", "--model", "synthetic-lm", "--prompt-tokens", "80",
                   "--output-tokens", "60", "--max-step-tokens", "100", "--kv-tokens", "200",
                   "--max-running", "2", "--concurrency", "2", "--requests", "6", "--no-save")
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert "preempted" in lines[0] and "--chunked-prefill" in lines[0]
    assert "--max-step-tokens to 139" in lines[0]


def test_a_step_that_preempts_admits_nothing():
    """Chunked prefill, KV for two sequences' growth: the decode that preempts the latest
    does not let a waiting prompt in on the same step (it would be preempted next)."""
    s = Scheduler(SchedulerConfig(max_running=4, max_step_tokens=64, chunk=16, kv_tokens=40))
    for _ in range(3):
        s.add(Seq(req=None, tokens=[0] * 12, max_tokens=30))
    for _ in range(200):
        plan = s.plan()
        if plan.preempted:
            assert not plan.admitted, "a step that preempted admitted a sequence"
            break
        for q, start, n in plan.chunks:
            q.computed = start + n
            if q.computed >= q.target:
                q.tokens.append(0)
                q.generated += 1
        for q in plan.decodes:
            q.computed += 1
            q.tokens.append(0)
            q.generated += 1
    else:
        raise AssertionError("no preemption: the test's KV budget is too large")
