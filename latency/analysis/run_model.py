"""The one run model: what every surface takes of a run, whichever kind it is.

A run is one-shot (``RunResult``: a request in, a reply out) or a generation (``GenResult``:
a streamed reply, token by token). Their records differ — a row a request, or rows of
requests, tokens and scheduler steps — and so do their figures, but what a run *is* does not:
its kind, config, environment, status, timings, warnings, errors and failure, a summary and a
validity derived from its records, its JSON and CSV, and a ``repr`` that prints what the CLI
prints. The history keeps both in one table (``storage.store``), the engines share one frame
(``execution.run_frame``), and validity is one function (``analysis.validity``); a surface
that needs no more than this base — saving, listing, showing, exporting — treats both
kinds alike, and one that compares figures refuses two kinds in one line.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from latency.analysis.timings import Timings
from latency.analysis.validity import Validity
from latency.core.config import RunConfig
from latency.core.records import STATUS_OK

if TYPE_CHECKING:
    import pandas as pd

#: the kinds of run, as ``MeasuredRun.kind`` and the history name them
KINDS = ("one-shot", "generation")


@dataclass(repr=False)
class MeasuredRun(ABC):
    """A finished run of either kind (``RunResult`` or ``GenResult``): the fields both hold,
    the JSON keys both write and read back alike, and the CSV's first columns. Each kind adds
    its records and what it derives from them (summary, series, validity, the rest of its
    JSON and CSV)."""

    kind: ClassVar[str]
    config: RunConfig
    environment: dict[str, Any]
    status: str
    errors: dict[int, str] = field(default_factory=dict)
    timings: Timings = field(default_factory=Timings)
    warnings: list[Any] = field(default_factory=list)
    failure: str | None = None
    #: the failure's traceback (from the run process, when it failed there)
    traceback: str | None = field(default=None, repr=False)

    # each kind's own, derived from its records
    @property
    @abstractmethod
    def summary(self) -> Any: ...

    @property
    @abstractmethod
    def series(self) -> Any: ...

    @property
    @abstractmethod
    def validity(self) -> Validity: ...

    @abstractmethod
    def to_dict(self, requests: bool = False) -> dict[str, Any]: ...

    @abstractmethod
    def json_text(self, requests: bool = True) -> str: ...

    @abstractmethod
    def requests_frame(self) -> pd.DataFrame: ...

    def _shared_dict(self) -> dict[str, Any]:
        """The JSON keys both kinds write, in the order they write them."""
        return {"config": self.config.to_dict(), "environment": self.environment,
                "status": self.status, "failure": self.failure,
                "timings": self.timings.to_dict(), "summary": self.summary.to_dict(),
                "series": self.series}

    @staticmethod
    def _shared_fields(d: dict[str, Any], errors: dict[str, Any]) -> dict[str, Any]:
        """The shared fields from a result's JSON (``to_dict``, from any earlier version);
        ``errors``: its request table's error messages."""
        return {"config": RunConfig.from_dict(d.get("config") or {}),
                "environment": dict(d.get("environment") or {}),
                "status": str(d.get("status", "completed")),
                "errors": {int(k): str(v) for k, v in errors.items()},
                "timings": Timings.from_dict(d.get("timings")), "failure": d.get("failure"),
                "traceback": d.get("traceback")}

    def _start_ns(self, rows: np.ndarray) -> int:
        """What the CSV's stamps count from: the start of measuring, else the first send."""
        t0 = self.timings.measure_start_ns
        if t0 is None:
            t0 = int(rows["t_intended"].min()) if len(rows) else 0
        return t0

    def _request_columns(self, rows: np.ndarray) -> dict[str, Any]:
        """The CSV's first columns: the request, its client, warm-up or not, status, error."""
        return {"request": np.arange(len(rows)), "client": rows["client"],
                "warmup": rows["warmup"],
                "status": np.where(rows["status"] == STATUS_OK, "ok", "error"),
                "error": [self.errors.get(i, "") for i in range(len(rows))]}

    def csv_bytes(self) -> bytes:
        return self.requests_frame().to_csv(index=False, float_format="%.4f").encode()

    def to_csv(self, path: str | Path) -> None:
        Path(path).write_bytes(self.csv_bytes())
