"""A/B runs: a baseline configuration against the same configuration with levers, interleaved.

Why interleaved: a shared machine drifts (other jobs start, the CPU heats, caches change), and
two runs made one after the other charge that drift to whichever ran second. An A/B here is a
sequence of short ordinary runs in counterbalanced blocks — A B B A A B … — so a linear drift
hits both arms equally; each pair uses the same seed, so both arms see the same inputs and
arrivals. Every block is a normal run: through the RunManager it waits its turn like any
other run (one at a time per machine), shows live on the Live Profiler and goes to history.
The pooling and the headline are ``latency.analysis.ab``.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from latency.analysis.ab import ABResult, merge
from latency.analysis.result import RunResult
from latency.core.config import RunConfig
from latency.core.errors import ConfigError
from latency.execution.engine import execute as engine_execute
from latency.execution.validate import validated

MAX_PAIRS = 20


class NothingToCompare(Exception):
    """The blocks that ran leave an arm without one successful measured request (every block
    of it failed, or a stop came before it measured): there is no comparison, only the
    blocks (``blocks``: [(arm, result), ...]) to report."""

    def __init__(self, message: str, blocks: list[tuple[str, RunResult]]) -> None:
        super().__init__(message)
        self.blocks = blocks


def variant_config(baseline: RunConfig, **changes: Any) -> RunConfig:
    """The B arm: the baseline with the given fields changed (``optimize``, ``pre``, ``post``,
    ``replicas``, ``threads``, ``batch_size``, ``preprocess_workers``...). None means keep."""
    known = set(RunConfig.__dataclass_fields__)
    bad = [k for k in changes if k not in known]
    if bad:
        raise ConfigError(f"unknown setting(s) for the B arm: {', '.join(bad)}")
    return replace(baseline, **{k: v for k, v in changes.items() if v is not None})


@dataclass
class ABPlan:
    """Two configurations and how many blocks of each to run."""

    baseline: RunConfig
    variant: RunConfig
    pairs: int = 2

    def validated(self) -> ABPlan:
        if not isinstance(self.pairs, int) or not 1 <= self.pairs <= MAX_PAIRS:
            raise ConfigError(f"--pairs must be a whole number from 1 to {MAX_PAIRS}")
        a, b = validated(self.baseline), validated(self.variant)
        if a.to_dict() == b.to_dict():
            raise ConfigError("the B arm is identical to the baseline: choose at least one "
                              "lever or setting to change")
        return ABPlan(a, b, self.pairs)

    def to_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline.to_dict(), "variant": self.variant.to_dict(),
                "pairs": self.pairs}

    def blocks(self) -> list[tuple[str, RunConfig]]:
        """The run order: pairs A B, B A, A B, … (counterbalanced), each pair one seed."""
        out: list[tuple[str, RunConfig]] = []
        for i in range(self.pairs):
            a = replace(self.baseline, seed=self.baseline.seed + i)
            b = replace(self.variant, seed=self.baseline.seed + i)
            out += [("A", a), ("B", b)] if i % 2 == 0 else [("B", b), ("A", a)]
        return out


BlockCallback = Callable[[int, int, str, RunResult], None]


def run_ab(plan: ABPlan, *, execute: Callable[..., RunResult] | None = None,
           cancel: threading.Event | None = None, on_block: BlockCallback | None = None
           ) -> ABResult:
    """Run every block in this process, one after another (CLI, tests, benchmarks)."""
    plan = plan.validated()
    run = execute or engine_execute
    done: list[tuple[str, RunResult]] = []
    order = plan.blocks()
    for i, (arm, cfg) in enumerate(order):
        if cancel is not None and cancel.is_set():
            break
        result = run(cfg, cancel=cancel) if cancel is not None else run(cfg)
        done.append((arm, result))
        if on_block is not None:
            on_block(i, len(order), arm, result)
    try:
        return merge(plan, done)
    except ValueError as exc:  # an arm without a successful measured request
        raise NothingToCompare(f"{exc}: nothing to compare", done) from None


def submit_ab(manager: Any, plan: ABPlan, owner: str, title: str | None = None
              ) -> list[tuple[str, str]]:
    """Queue every block with the run manager, in order; returns [(arm, run id), ...].

    The manager runs them one at a time, in this order, each in its own process; they are
    queued together, so a run somebody else queues meanwhile waits behind the group rather
    than splitting it.
    """
    plan = plan.validated()
    blocks = plan.blocks()
    names = None
    if title is not None:  # named in the history after what they answer, block by block
        names = [f"{title} · {arm} {i // 2 + 1}/{plan.pairs}" for i, (arm, _) in
                 enumerate(blocks)]
    tickets = manager.submit_group([cfg for _, cfg in blocks], owner=owner, names=names)
    return [(arm, t.run_id) for (arm, _), t in zip(blocks, tickets)]
