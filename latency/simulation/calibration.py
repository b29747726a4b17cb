"""Calibrating a simulation to the server that really ran.

An ideal queue has no hand-offs; a real server does: the network (or in-process transport) both
ways, the load generator's own send lag, and a replica's bookkeeping between one batch and the
next. Each is small (about 0.1 ms here), but a queue near saturation amplifies any extra
service time: at ρ = 0.8 a 2 % longer service makes the mean wait ~10 % longer. So a fair
comparison of "predicted" with "measured" predicts with the *service* the machine delivered —
its measured forward mean and fixed costs — and lets the simulation predict only what it is
for: the queueing. Nothing measured about queueing (waits, latencies) enters the prediction.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from latency.core.records import STATUS_OK, component_ns
from latency.simulation.service import ServiceModel, measured_turnaround_ms, measured_wakeup_ms


def calibrated(service: ServiceModel, rows: np.ndarray, batch_size: int = 1,
               max_batch_delay_ms: float = 0.0) -> ServiceModel:
    """``service`` (parametric) with its forward mean and fixed costs taken from a measured run
    (batched as given): the same distribution shape, the machine's real service time and
    hand-offs, and how late its idle replicas woke."""
    ok = rows[(rows["status"] == STATUS_OK) & ~rows["warmup"]]
    if not len(ok):
        raise ValueError("the run has no successful measured requests to calibrate from")
    comps = component_ns(ok)
    first = np.unique(ok["batch_id"], return_index=True)[1]
    sizes = ok["batch_size"][first].astype(float)
    fwd = comps["forward"][first] / 1e6
    # forward = forward_ms + per_item × (size − 1): keep the per-item share as set, fit the base
    base = float(np.mean(fwd - service.forward_per_item_ms * (sizes - 1)))
    ms = lambda k: float(np.mean(comps[k])) / 1e6  # noqa: E731
    return replace(service, forward_ms=max(base, 0.0), network_ms=ms("network"),
                   lag_ms=ms("overhead"), preprocess_ms=ms("preprocess"),
                   postprocess_ms=ms("postprocess"), turnaround_ms=measured_turnaround_ms(rows),
                   wakeup_ms=measured_wakeup_ms(rows, batch_size, max_batch_delay_ms))


def recorded_arrivals(rows: np.ndarray) -> tuple[np.ndarray, float]:
    """The intended send times (ms from the first) of a run's measured requests and their rate
    (requests per second), for ``SimConfig(arrival="recorded")``."""
    measured = rows[~rows["warmup"]]
    if len(measured) < 2:
        raise ValueError("the run has too few measured requests to replay its arrivals")
    t = np.sort(measured["t_intended"]).astype(np.float64)
    t = (t - t[0]) / 1e6
    return t, (len(t) - 1) / (t[-1] / 1000)


def forward_trace_ms(rows: np.ndarray) -> np.ndarray:
    """Each measured batch's forward time, in the order the batches ran (for a replay)."""
    ok = rows[(rows["status"] == STATUS_OK) & ~rows["warmup"]]
    ids, first = np.unique(ok["batch_id"], return_index=True)
    order = np.argsort(ok["t_fwd_start"][first], kind="stable")
    return ((ok["t_fwd_end"] - ok["t_fwd_start"])[first][order] / 1e6).astype(np.float64)
