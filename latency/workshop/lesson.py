"""What a lesson is, for the Workshop page and the Optimisation Lab alike: a few steps, each a
live measured experiment — its runs (ready-made presets: the same experiment whoever presses
it, from a button, a shared link or a late arrival's screen), the question asked before it
runs, and the answer computed from its runs when they finish, never a scripted number.

The lessons themselves are ``course`` (the Workshop's, with ``llm_course``'s on generation)
and ``practice`` (the Lab's quantisation lesson); this module holds only their shape.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from latency.analysis.gen_result import GenResult
from latency.analysis.result import RunResult
from latency.core.config import RunConfig
from latency.execution.ab import ABPlan

#: what starting one run costs besides its measured seconds (process, model load, warm-up),
#: measured on this project's 2-core machine (bench/bench_course.py: 4.3–5.0 s a synthetic
#: run, 9 s for the image CNN with naive preprocessing)
RUN_STARTUP_S = 5.0
MODEL_STARTUP_S = {"image-cnn": 9.0}


@dataclass(frozen=True)
class Answer:
    """What the runs measured: the value the question asked for (a choice, or a number in the
    question's unit), a sentence saying it, and the figures' data."""

    value: Any
    text: str
    table: list[dict[str, Any]] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    #: a second table the answer reads from the runs (the targets lesson: one row a target)
    details: list[dict[str, Any]] = field(default_factory=list)


#: a finished run a lesson reads: one-shot requests, or a generation (the lessons on LLMs)
Result = RunResult | GenResult
#: a step's answer from its finished runs: (the step, each run's label, the results in order)
AnswerOf = Callable[["Step", Sequence[str], Sequence[Any]], Answer]


@dataclass(frozen=True)
class Step:
    """One experiment: its runs (label → config, in the order they run), the question asked
    before the answer (None: the step only measures) with its ``choices`` (None: the guess is
    a number, in ``unit``), and how the answer is computed from the runs. ``plan``: for an A/B
    step, the plan its runs are the blocks of (the Lab sets its controls from it)."""

    key: str
    title: str
    runs: tuple[tuple[str, RunConfig], ...]
    question: str | None = None
    answer_of: AnswerOf | None = None
    choices: tuple[str, ...] | None = None
    unit: str = ""
    #: what the step shows, before it runs; and the idea it teaches, after the answer
    intro: str = ""
    idea: str = ""
    plan: ABPlan | None = None

    @classmethod
    def ab(cls, key: str, title: str, plan: ABPlan, **kw: Any) -> Step:
        """A step measured as an interleaved A/B: its runs are the plan's blocks."""
        return cls(key, title, tuple(plan.blocks()), plan=plan, **kw)

    @property
    def estimated_s(self) -> float:
        """Wall time of the step's runs on this machine: measured seconds + start-up."""
        return sum((c.duration_s or 0.0) + MODEL_STARTUP_S.get(c.model, RUN_STARTUP_S)
                   for _, c in self.runs)

    def configs(self) -> list[RunConfig]:
        return [c for _, c in self.runs]

    def labels(self) -> list[str]:
        return [label for label, _ in self.runs]

    def answer(self, results: Sequence[Result],
               labels: Sequence[str] | None = None) -> Answer:
        """The answer from the finished runs, in order. ``labels``: each run's label when the
        runs measured are not exactly the preset's (an A/B with more or fewer pairs)."""
        if self.answer_of is None:
            raise ValueError(f"step {self.key!r} asks nothing: it has no answer")
        return self.answer_of(self, list(labels or self.labels()), list(results))


@dataclass(frozen=True)
class Lesson:
    """Steps in order under one title; ``summary``: what the lesson is about, before it
    starts."""

    key: str
    title: str
    steps: tuple[Step, ...]
    summary: str = ""

    @property
    def estimated_s(self) -> float:
        return sum(s.estimated_s for s in self.steps)

    def step(self, key: str) -> Step:
        for s in self.steps:
            if s.key == key:
                return s
        raise KeyError(key)

    def number(self, key: str) -> int:
        """The step's number in the lesson, from 1."""
        return 1 + [s.key for s in self.steps].index(key)


__all__ = ["MODEL_STARTUP_S", "RUN_STARTUP_S", "Answer", "AnswerOf", "Lesson", "Step"]
