"""Snapshots: immutable, versioned aggregates of a run, for viewers.

A viewer (the CLI's progress line, every dashboard session) never touches raw samples: it reads
a Snapshot — statistics, histogram bins, a quantile curve, per-second series and the component
make-up of the mean and of the percentiles. A snapshot is built once per version of the data
and shared by everyone, the way Locust's UI polls one memoised stats endpoint.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from latency.analysis.stats import HIST_EDGES_MS, histogram_ms, per_second_series, tail_makeup_ms
from latency.analysis.summary import Summary, summarize_rows
from latency.core import fmt
from latency.core.config import RunConfig
from latency.core.records import COMPONENTS, component_ns, measured_and_ok

#: the bars of the stacked component chart: the mean, then requests around each percentile.
MAKEUP_POINTS: dict[str, float | None] = {"mean": None, "p50": 0.50, "p90": 0.90, "p99": 0.99}
#: the quantile curve's resolution: total latency at q = 0, 0.001, …, 1.
QUANTILE_GRID = np.linspace(0.0, 1.0, 1001)


def makeup_ms(parts_ms: dict[str, np.ndarray], total_ms: np.ndarray,
              order: np.ndarray | None = None) -> dict[str, dict[str, float]]:
    """The bars of a stacked chart (``MAKEUP_POINTS``): the mean parts, and the parts of the
    requests around each percentile of ``total_ms`` (``stats.tail_makeup_ms``); ``order``:
    ``total_ms``'s stable sort, when already made. Empty without requests."""
    if not len(total_ms):
        return {}
    if order is None:
        order = np.argsort(total_ms, kind="stable")
    return {name: ({c: float(v.mean()) for c, v in parts_ms.items()} if q is None
                   else tail_makeup_ms(parts_ms, total_ms, q, order=order))
            for name, q in MAKEUP_POINTS.items()}


def quantile_curve(total_ms: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Total latency at each q of ``QUANTILE_GRID`` (``order``: ``total_ms``'s sort)."""
    ranked = total_ms[order]
    return np.interp(QUANTILE_GRID * (len(ranked) - 1), np.arange(len(ranked)), ranked)


@dataclass(frozen=True)
class Snapshot:
    run_id: str
    version: int
    status: str  # queued | running | completed | stopped | failed
    phase: str  # queued | starting | loading | warmup | measuring | finishing | done
    config: RunConfig
    progress: dict[str, Any]
    summary: Summary | None = None
    hist_edges_ms: np.ndarray = field(default_factory=lambda: HIST_EDGES_MS)
    hist_counts: np.ndarray | None = None
    quantiles_ms: np.ndarray | None = None
    makeup_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    series: dict[str, list[Any]] = field(default_factory=dict)
    failure: str | None = None

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "stopped", "failed")

    def share_within(self, slo_ms: float) -> float | None:
        """Share of successful measured requests with total latency ≤ ``slo_ms``."""
        q = self.quantiles_ms
        if q is None or len(q) == 0:
            return None
        if slo_ms < q[0]:
            return 0.0
        if slo_ms >= q[-1]:
            return 1.0
        return float(np.interp(slo_ms, q, QUANTILE_GRID))

    def __repr__(self) -> str:  # a value that prints itself helpfully
        p = self.summary.latency_ms if self.summary else None
        p50, p99 = (p.p50, p.p99) if p is not None else (None, None)
        return (f"Snapshot({self.run_id} v{self.version} {self.status}/{self.phase}, "
                f"{self.progress.get('measured', 0)} measured, p50 {fmt.ms(p50)}, "
                f"p99 {fmt.ms(p99)} ms)")


def build_snapshot(run_id: str, version: int, status: str, phase: str, config: RunConfig,
                   rows: np.ndarray, errors: dict[int, str], progress: dict[str, Any],
                   measure_start_ns: int | None, measure_end_ns: int | None,
                   warnings: list[str] | None = None, failure: str | None = None) -> Snapshot:
    """Aggregate the rows seen so far into a Snapshot (O(n log n), once per version)."""
    measured, ok = measured_and_ok(rows)
    progress = dict(progress, measured=int(len(measured)))
    dropped = int(progress.get("dropped") or 0)
    if len(ok) == 0:
        return Snapshot(run_id, version, status, phase, config, progress,
                        summary=summarize_rows(rows, errors, measure_start_ns=measure_start_ns,
                                               measure_end_ns=measure_end_ns, config=config,
                                               warnings=warnings, dropped=dropped)
                        if len(rows) else None,
                        failure=failure)
    comps = component_ns(ok)
    total_ms = comps["total"] / 1e6
    order = np.argsort(comps["total"], kind="stable")  # one sort serves quantiles and tails
    start = measure_start_ns if measure_start_ns is not None else int(ok["t_intended"].min())
    end_ns = measure_end_ns if measure_end_ns is not None else int(measured["t_done"].max())
    series = per_second_series((ok["t_done"] - start) / 1e9, total_ms, (end_ns - start) / 1e9)
    return Snapshot(
        run_id, version, status, phase, config, progress,
        summary=summarize_rows(rows, errors, measure_start_ns=measure_start_ns,
                               measure_end_ns=measure_end_ns, config=config,
                               warnings=warnings, comps=comps, dropped=dropped),
        hist_counts=histogram_ms(total_ms),
        quantiles_ms=quantile_curve(total_ms, order),
        makeup_ms=makeup_ms({c: comps[c] / 1e6 for c in COMPONENTS}, total_ms, order),
        series=series, failure=failure)
