"""What the run process says to its parent, as small values (pickled over a pipe).

    Accepted(config)                          the config as the run process validated it
    Phase("loading")                          the run moved on
    Rows(rows, errors, progress)              requests finished since the last message
    Done(Final(...))                          the end: status, environment, timings, ...
    Refused(message)                          the config cannot run (validated in the child)

``Final`` is also what the parent records for a run that never reached its process (cancelled
while queued, could not be spawned, died): one shape for every ending, with the child's
traceback when it failed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from latency.analysis.timings import Timings
from latency.core.config import RunConfig


@dataclass(frozen=True)
class Phase:
    name: str


@dataclass(frozen=True)
class Rows:
    rows: bytes  # RECORD_DTYPE rows, raw
    errors: dict[int, str]
    progress: dict[str, Any]


@dataclass(frozen=True)
class Final:
    """Everything about a finished run except its request rows (those came as ``Rows``)."""

    config: RunConfig
    status: str
    environment: dict[str, Any] = field(default_factory=dict)
    timings: Timings = field(default_factory=Timings)
    warnings: list[str] = field(default_factory=list)
    failure: str | None = None
    traceback: str | None = None

    @classmethod
    def ended(cls, config: RunConfig, status: str, failure: str | None = None,
              traceback: str | None = None) -> Final:
        """A run that ended without measuring anything (stopped in line, failed to start)."""
        return cls(config=config, status=status, failure=failure, traceback=traceback)


@dataclass(frozen=True)
class Done:
    final: Final


@dataclass(frozen=True)
class Accepted:
    """The config as the run process validated it: the pipeline's spec and model-args
    resolved there (the caller may have left its code to be checked there)."""

    config: RunConfig


@dataclass(frozen=True)
class Refused:
    """The run process refused the config before running anything (a ConfigError's line)."""

    message: str


Message = Accepted | Phase | Rows | Done | Refused
