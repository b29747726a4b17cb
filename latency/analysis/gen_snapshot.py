"""A generation run as a viewer sees it at one moment: its status and progress, the summary of
what it has measured so far and the figures' view of it (``gen_view``) — the live twin of a
one-shot run's ``Snapshot``, built from the logs the run process reported."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from latency.analysis.gen_summary import GenSummary, summarize_generation
from latency.analysis.gen_view import GenView, gen_view, view_of
from latency.core.config import RunConfig


@dataclass(frozen=True)
class GenSnapshot:
    run_id: str
    version: int
    status: str  # queued | running | completed | stopped | failed
    phase: str
    config: RunConfig
    progress: dict[str, Any]
    summary: GenSummary | None = None
    view: GenView = field(default_factory=GenView)
    failure: str | None = None
    #: a server of yours: its account of the requests so far (``TargetView``), and its
    #: /metrics series so far
    target: Any = None
    server_metrics: dict[str, Any] | None = None

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "stopped", "failed")


def build_gen_snapshot(run_id: str, version: int, status: str, phase: str, config: RunConfig,
                       rows: np.ndarray, tokens: np.ndarray, steps: np.ndarray,
                       errors: dict[int, str], progress: dict[str, Any],
                       measure_start_ns: int | None = None,
                       measure_end_ns: int | None = None,
                       failure: str | None = None,
                       reports: np.ndarray | None = None) -> GenSnapshot:
    """The snapshot of the logs so far: a summary once a measured request has ended; for a
    server of yours (``reports``: what it said of each request so far; ``progress``: its
    description and /metrics so far), its split so far too."""
    slo = config.objectives
    measured = int((~rows["warmup"]).sum()) if len(rows) else 0
    progress = dict(progress, measured=measured)
    if not measured:
        return GenSnapshot(run_id, version, status, phase, config, progress, failure=failure)
    summary = summarize_generation(rows, tokens, steps, errors, measure_start_ns,
                                   measure_end_ns, slo)
    target, series = None, progress.get("server_metrics")
    if config.target is not None and reports is not None and len(reports) == len(rows):
        from latency.analysis.server_metrics import measured_window
        from latency.analysis.target_view import target_view

        # as the result's view reads them: the scrapes while it measured
        target = target_view(rows, tokens, reports, {"target": progress.get("target") or {}},
                             bool(config.tokenizer),
                             measured_window(series, measure_start_ns, measure_end_ns)
                             if series else None)
    return GenSnapshot(run_id, version, status, phase, config, progress, summary,
                       gen_view(rows, tokens, steps, slo.ttft_ms, slo.tpot_ms), failure,
                       target, series)


def finished_snapshot(run_id: str, version: int, result: Any,
                      progress: dict[str, Any]) -> GenSnapshot:
    """The snapshot of a run that ended: its own result's summary and view (a ``GenResult``,
    whose summary knows the load it was offered)."""
    measured = int((~result.rows["warmup"]).sum()) if len(result.rows) else 0
    progress = dict(progress, measured=measured)
    if not measured:
        return GenSnapshot(run_id, version, result.status, "done", result.config, progress,
                           failure=result.failure)
    return GenSnapshot(run_id, version, result.status, "done", result.config, progress,
                       result.summary, view_of(result), result.failure, result.target_view,
                       (result.environment or {}).get("server_metrics"))
