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

from latency.components import STATUS_OK, component_ns
from latency.simulate import ServiceModel


def measured_turnaround_ms(rows: np.ndarray) -> float:
    """Mean gap a replica leaves between finishing a batch and starting the next one, over
    the batches that were already waiting (so the gap is bookkeeping, not idleness); 0 when
    no batch ever waited. The mean, not the median: a queue feels every stolen millisecond,
    and on a busy machine the gaps have a long tail (the thread waits for a core)."""
    ok = rows[rows["status"] == STATUS_OK]
    if len(ok) < 2:
        return 0.0
    # per batch: its start, its end (last postprocess) and when its first member was ready
    ids, inverse = np.unique(ok["batch_id"], return_inverse=True)
    if len(ids) < 2:
        return 0.0
    start = np.full(len(ids), np.iinfo(np.int64).max)
    ready = start.copy()
    end = np.full(len(ids), np.iinfo(np.int64).min)
    np.minimum.at(start, inverse, ok["t_fwd_start"])
    np.minimum.at(ready, inverse, ok["t_pre_end"])
    np.maximum.at(end, inverse, ok["t_post_end"])
    replica = np.zeros(len(ids), dtype=np.int64)
    replica[inverse] = ok["replica"]
    order = np.lexsort((start, replica))  # by replica, then in time
    start, end, ready, replica = start[order], end[order], ready[order], replica[order]
    same = replica[1:] == replica[:-1]
    waited = same & (ready[1:] <= end[:-1])
    if not waited.any():
        return 0.0
    return float(np.mean((start[1:] - end[:-1])[waited])) / 1e6


def calibrated(service: ServiceModel, rows: np.ndarray) -> ServiceModel:
    """``service`` (parametric) with its forward mean and fixed costs taken from a measured run:
    the same distribution shape, the machine's real service time and hand-offs."""
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
                   postprocess_ms=ms("postprocess"), turnaround_ms=measured_turnaround_ms(rows))


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
