"""RunResult: what one run measured, with its summary, JSON and CSV forms.

A result is a value: the config (a ``RunConfig``), the environment, the status, the timings (a
``Timings``), the request log (columnar numpy, 105 bytes a request) and the error messages. The
summary is derived from them on demand, so it can never disagree with the records it
summarises. The typed config and timings become dicts only in files (``to_dict``) and come
back typed from them (``from_dict``), so a misspelt field fails where it is read.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from latency.analysis.run_model import MeasuredRun
from latency.analysis.stats import per_second_series
from latency.analysis.summary import Summary, summarize
from latency.analysis.summary_text import format_summary
from latency.analysis.validity import Validity, validity
from latency.core.records import (
    COMPONENTS,
    RECORD_DTYPE,
    STAMPS,
    component_ns,
    measured_and_ok,
    rows_from_table,
    rows_to_table,
)

if TYPE_CHECKING:
    import pandas as pd

    from latency.analysis.compare import Comparison

@dataclass(repr=False)
class RunResult(MeasuredRun):
    """A one-shot run (a ``MeasuredRun``, kind "one-shot")."""

    kind: ClassVar[str] = "one-shot"
    log: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=RECORD_DTYPE))

    @cached_property
    def summary(self) -> Summary:
        return summarize(self)

    @cached_property
    def validity(self) -> Validity:
        """VALID or INVALID, and the checks behind it (``latency.analysis.validity``); the
        machine's check (DISTURBED or not) reads ``environment["disturbance"]``."""
        return validity(self.summary, self.config, self.status, self.timings,
                        self.environment)

    def __repr__(self) -> str:  # a value that prints what the CLI prints
        return format_summary(self)

    def compare(self, *others: RunResult) -> Comparison:
        """This run (A) against ``others``: headlines, setup differences and the component
        diff table (``repr`` prints them, as ``python -m latency compare`` does)."""
        from latency.analysis.compare import compare_results

        return compare_results(self, *others)

    def measured(self) -> np.ndarray:
        """Rows of the measured phase (warm-up excluded), successful or not."""
        return measured_and_ok(self.log)[0]

    @cached_property
    def series(self) -> dict[str, list[Any]]:
        """Per-second throughput and p50/p99 of the measured, successful requests."""
        _, ok = measured_and_ok(self.log)
        start = self.timings.measure_start_ns
        if not len(ok) or start is None:
            return per_second_series(np.zeros(0), np.zeros(0))
        end = self.timings.measure_end_ns
        if end is None:
            end = int(ok["t_done"].max())
        return per_second_series((ok["t_done"] - start) / 1e9,
                                 (ok["t_done"] - ok["t_intended"]) / 1e6, (end - start) / 1e9)

    def to_dict(self, requests: bool = False) -> dict[str, Any]:
        """The result as JSON-ready data; ``requests`` adds every request record (columnar,
        integer ns) so the file can be reloaded, e.g. by ``simulate --from-run``."""
        d = {**self._shared_dict(), "validity": self.validity.to_dict()}
        if self.traceback:
            d["traceback"] = self.traceback
        if requests:
            d["requests"] = rows_to_table(self.log)
            d["requests"]["errors"] = {str(k): v for k, v in self.errors.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunResult:
        """A result from its JSON form (``to_dict``, from any earlier version). Its summary is
        the file's, as it was when measured; its log is empty unless the file has the
        ``requests`` table."""
        table = d.get("requests")
        log, errors = np.zeros(0, dtype=RECORD_DTYPE), dict[str, str]()
        if isinstance(table, dict) and "columns" in table:
            log, errors = rows_from_table(table), table.get("errors") or {}
        result = cls(**cls._shared_fields(d, errors), log=log)
        if isinstance(d.get("summary"), dict):
            result.__dict__["summary"] = Summary.from_dict(d["summary"])
        return result

    def json_text(self, requests: bool = True) -> str:
        data = self.to_dict(requests)
        if requests:  # one line per column keeps the file readable and a third smaller
            table = data.pop("requests")
            head = json.dumps(data, indent=2)[:-2]
            cols = ",\n".join(f"      {json.dumps(k)}: {json.dumps(v)}"
                              for k, v in table.pop("columns").items())
            meta = ",\n".join(f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in table.items())
            return (f'{head},\n  "requests": {{\n{meta},\n    "columns": {{\n{cols}\n'
                    "    }\n  }\n}\n")
        return json.dumps(data, indent=2) + "\n"

    def to_json(self, path: str | Path, requests: bool = True) -> None:
        Path(path).write_text(self.json_text(requests))

    def requests_frame(self) -> pd.DataFrame:
        """One row per request (warm-up included and labelled): stamps relative to the start
        of measurement and every component, in ms."""
        import pandas as pd

        rows = self.log
        comps = component_ns(rows)
        t0 = self._start_ns(rows)
        cols: dict[str, Any] = {
            **self._request_columns(rows),
            "batch_id": rows["batch_id"], "batch_size": rows["batch_size"],
            "replica": rows["replica"],
        }
        for st in STAMPS:
            cols[f"t_{st}_ms"] = (rows[f"t_{st}"] - t0) / 1e6
        cols["total_ms"] = comps["total"] / 1e6
        for c in COMPONENTS:
            cols[f"{c}_ms"] = comps[c] / 1e6
        cols["schedule_lag_ms"] = comps["schedule_lag"] / 1e6
        if self.config.transport == "http":  # what crossed the wire, per request
            cols["request_bytes"] = rows["req_bytes"]
            cols["response_bytes"] = rows["resp_bytes"]
            cols["emulated_wan_ms"] = rows["emulated_us"] / 1e3  # EMULATED delay, included
            cols["server_timing"] = rows["decomposed"]  # False: network = whole client time
        return pd.DataFrame(cols)
