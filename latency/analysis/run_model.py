"""The one run model: what every surface takes of a run, whichever kind it is.

A run is one-shot (``RunResult``: a request in, a reply out) or a generation (``GenResult``:
a streamed reply, token by token). Their records differ — a row a request, or rows of
requests, tokens and scheduler steps — and so do their figures, but what a run *is* does not:
its kind, config, environment, status, timings, warnings, errors and failure, a summary and a
validity derived from its records, its JSON and CSV, and a ``repr`` that prints what the CLI
prints. The history keeps both in one table (``storage.store``), the engines share one frame
(``execution.run_frame``), and validity is one function (``analysis.validity``); a surface
that needs no more than this protocol — saving, listing, showing, exporting — treats both
kinds alike, and one that compares figures refuses two kinds in one line.
"""
from __future__ import annotations

from typing import Any, Protocol

from latency.analysis.timings import Timings
from latency.analysis.validity import Validity
from latency.core.config import RunConfig

#: the kinds of run, as ``MeasuredRun.kind`` and the history name them
KINDS = ("one-shot", "generation")


class MeasuredRun(Protocol):
    """A finished run of either kind (``RunResult`` or ``GenResult``)."""

    @property
    def kind(self) -> str: ...

    config: RunConfig
    environment: dict[str, Any]
    status: str
    timings: Timings
    warnings: list[Any]
    errors: dict[int, str]
    failure: str | None

    @property
    def summary(self) -> Any: ...

    @property
    def validity(self) -> Validity: ...

    def to_dict(self, requests: bool = False) -> dict[str, Any]: ...

    def json_text(self, requests: bool = True) -> str: ...

    def csv_bytes(self) -> bytes: ...
