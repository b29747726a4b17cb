"""RunResult: what one run measured, with its summary, JSON and CSV forms.

A result is a value: the config, the environment, the status, the request log (columnar numpy,
92 bytes a request) and the error messages. The summary is derived from them on demand, so it
can never disagree with the records it summarises.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from latency.components import COMPONENTS, RECORD_DTYPE, STAMPS, STATUS_OK, component_ns

STATUSES = ("completed", "stopped", "failed")


@dataclass
class RunResult:
    config: dict[str, Any]
    environment: dict[str, Any]
    status: str
    log: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=RECORD_DTYPE))
    errors: dict[int, str] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    failure: str | None = None

    @cached_property
    def summary(self) -> dict[str, Any]:
        from latency.summary import summarize

        return summarize(self)

    def measured(self) -> np.ndarray:
        """Rows of the measured phase (warm-up excluded), successful or not."""
        return self.log[~self.log["warmup"]]

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config, "environment": self.environment, "status": self.status,
                "failure": self.failure, "timings": self.timings, "summary": self.summary}

    def to_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    def to_csv(self, path: str | Path) -> None:
        """One row per request (warm-up included and labelled): stamps relative to the start
        of measurement in ms, and every component in ms."""
        rows = self.log
        comps = component_ns(rows)
        t0 = self.timings.get("measure_start_ns", int(rows["t_intended"].min()) if len(rows) else 0)
        errors = self.errors
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["request", "client", "warmup", "status", "error", "batch_id",
                        "batch_size", "replica"] + [f"t_{s}_ms" for s in STAMPS]
                       + ["total_ms"] + [f"{c}_ms" for c in COMPONENTS] + ["schedule_lag_ms"])
            for i in range(len(rows)):
                row = rows[i]
                w.writerow([i, int(row["client"]), bool(row["warmup"]),
                            "ok" if row["status"] == STATUS_OK else "error", errors.get(i, ""),
                            int(row["batch_id"]), int(row["batch_size"]), int(row["replica"])]
                           + [f"{(int(row[f't_{s}']) - t0) / 1e6:.4f}" for s in STAMPS]
                           + [f"{comps['total'][i] / 1e6:.4f}"]
                           + [f"{comps[c][i] / 1e6:.4f}" for c in COMPONENTS]
                           + [f"{comps['schedule_lag'][i] / 1e6:.4f}"])
