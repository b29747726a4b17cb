"""The Load Simulator's computations, cached per setting (instant when a slider returns to a
value it had) and shared by every session. The work itself is in ``latency.simulation`` and
``latency.simulation.capacity``; this module only caches it."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import streamlit as st

from latency.analysis.snapshot import build_snapshot
from latency.analysis.stats import LatencyStats, interval_note
from latency.core import fmt
from latency.core.config import RunConfig
from latency.simulation.calibration import calibrated, recorded_arrivals
from latency.simulation.capacity import (
    capacity_rps,
    closed_form,
    hockey_stick,
    max_rate_for_slo,
    min_replicas_for_slo,
)
from latency.simulation.simulator import ServiceModel, SimConfig, simulate, utilisation
from ui.server import run_manager

SIM_REQUESTS = 40_000
HISTORY = "history:"  # source keys of runs read back from the saved history


#: parametric forward time of a batch of b: forward × (1 + share × (b − 1)). The default share
#: is the sample image-cnn's eager forward measured here, 1.53 ms at batch 1 and 6.37 ms at 8
#: (BENCHMARKS.md, bench/bench_onnx.py): each extra request costs 45 % of a batch-1 call
PER_ITEM_SHARE_DEFAULT = 0.45


def service_model(source: str, service_ms: float, dist: str, cv: float,
                  per_item: float = 0.0) -> ServiceModel:
    """``per_item``: the forward cost of each extra request in a batch, as a share of the
    batch-1 forward time (parametric service only; a recording has its own per batch size)."""
    if source == "parametric":
        return ServiceModel(forward_ms=service_ms, forward_per_item_ms=per_item * service_ms,
                            dist=dist, cv=cv)
    return _recorded(source)[0]


def capacity_of(source: str, service_ms: float, dist: str, cv: float, replicas: int,
                batch: int, delay_ms: float, per_item: float = 0.0) -> float:
    """Requests per second the setting serves at utilisation 1."""
    cfg = SimConfig(rate=1.0, replicas=replicas, batch_size=batch, max_batch_delay_ms=delay_ms,
                    preprocess_workers=preprocess_workers(source))
    return capacity_rps(cfg, service_model(source, service_ms, dist, cv, per_item))


def preprocess_workers(source: str) -> int | None:
    """A recorded run's preprocess worker pool (its requests queued for it); parametric
    service has no preprocessing, so no pool."""
    return None if source == "parametric" else _recorded(source)[1]


@st.cache_resource(max_entries=16, show_spinner=False)
def _recorded(source: str) -> tuple[ServiceModel, int | None]:
    if source.startswith(HISTORY):
        from latency.storage.store import RunStore, StoreError

        try:
            run = RunStore().load(source[len(HISTORY):])
        except StoreError as exc:
            raise ValueError(str(exc)) from None
        log, config = run.result.log, run.config
    else:
        handle = run_manager().get(source)
        if handle is None:
            raise ValueError(f"run {source} is no longer in memory")
        log, config = handle.result().log, handle.config
    return ServiceModel.from_rows(log), config.preprocess_workers


def recorded_runs() -> dict[str, str]:
    """Recorded runs to take service times from, {source key: label}: this server's finished
    runs first (newest first), then the saved history's completed runs."""
    # the snapshot of a finished run is built once and memoised: no copy of its rows per rerun
    out = {h.run_id: f"{h.run_id} · {h.config.model} (this session)"
           for h in reversed(run_manager().finished())
           if h.status in ("completed", "stopped") and h.snapshot().progress.get("measured")}
    out.update(_history_runs())
    return out


@st.cache_data(ttl=5, show_spinner=False)
def _history_runs() -> dict[str, str]:
    from latency.storage.store import RunStore, StoreError

    try:
        runs = RunStore().list(limit=30, status="completed")
    except (StoreError, OSError):
        return {}  # no history yet, or unreadable: the page still works parametric
    return {f"{HISTORY}{r.id}": f"{r.id} · {r.label} · p50 {fmt.duration(r.p50_ms)} (history)"
            for r in runs if r.n}


@st.cache_data(max_entries=128, show_spinner=False)
def predict(source: str, service_ms: float, dist: str, cv: float, rate: float, replicas: int,
            batch: int, delay_ms: float, arrival: str = "poisson",
            per_item: float = 0.0) -> dict[str, Any]:
    svc = service_model(source, service_ms, dist, cv, per_item)
    cfg = SimConfig(rate=rate, replicas=replicas, batch_size=batch, max_batch_delay_ms=delay_ms,
                    requests=SIM_REQUESTS, arrival=arrival,
                    preprocess_workers=preprocess_workers(source))
    rows = simulate(cfg, svc)
    measured = rows[~rows["warmup"]]
    snap = build_snapshot("simulated", 0, "completed", "simulated", RunConfig(rate=rate), rows, {},
                          {}, int(measured["t_intended"][0]), int(measured["t_done"].max()))
    rho, lat = utilisation(cfg, svc), snap.summary.latency_ms
    theory = closed_form(cfg, svc, rate)
    grid = curve(source, service_ms, dist, cv, replicas, batch, delay_ms, arrival, per_item)
    # the headline's own run becomes the curve's vertex at this utilisation: the marker lies
    # on the line, and the line's neighbours share its first requests (common random numbers)
    marked = grid.with_point(rho, lat.p50, lat.p99, lat.p99_ci95, theory) if rho < 1 else grid
    return {"snapshot": snap, "utilisation": rho, "curve": marked, "theory": theory,
            "interval_note": interval_note(measured["t_done"] - measured["t_intended"], lat,
                                           " for the simulated p99")}


@st.cache_data(max_entries=64, show_spinner=False)
def curve(source: str, service_ms: float, dist: str, cv: float, replicas: int, batch: int,
          delay_ms: float, arrival: str = "poisson", per_item: float = 0.0) -> Any:
    """The hockey stick does not depend on the arrival rate (it sweeps it), so the most-moved
    slider in a workshop only moves the marker: the curve comes from this cache."""
    svc = service_model(source, service_ms, dist, cv, per_item)
    cfg = SimConfig(rate=1.0, replicas=replicas, batch_size=batch, max_batch_delay_ms=delay_ms,
                    arrival=arrival, preprocess_workers=preprocess_workers(source))
    return hockey_stick(cfg, svc)


@st.cache_data(max_entries=128, show_spinner=False)
def plan(source: str, service_ms: float, dist: str, cv: float, rate: float, replicas: int,
         batch: int, delay_ms: float, slo_ms: float,
         arrival: str = "poisson", per_item: float = 0.0) -> tuple[float | None, int | None]:
    svc = service_model(source, service_ms, dist, cv, per_item)
    cfg = SimConfig(rate=rate, replicas=replicas, batch_size=batch, max_batch_delay_ms=delay_ms,
                    arrival=arrival, preprocess_workers=preprocess_workers(source))
    return max_rate_for_slo(cfg, svc, slo_ms), min_replicas_for_slo(cfg, svc, slo_ms)


def validation_config(service_ms: float, dist: str, cv: float, rate: float, replicas: int,
                      batch: int, delay_ms: float, arrival: str = "poisson",
                      per_item: float = 0.0, duration_s: float = 10.0) -> RunConfig:
    """The real run that checks a parametric prediction: the synthetic pipeline holding the
    same forward-time distribution (and per-request batch cost), at the same arrivals,
    replicas and batching."""
    return RunConfig(model="synthetic",
                     model_args={"preprocess_ms": 0.0, "forward_ms": service_ms,
                                 "forward_per_item_ms": per_item * service_ms,
                                 "postprocess_ms": 0.0, "dist": dist,
                                 "sigma": math.sqrt(math.log(1 + cv ** 2))},
                     rate=rate, arrival=arrival, replicas=replicas, batch_size=batch,
                     max_batch_delay_ms=delay_ms, duration_s=duration_s, warmup=20)


@st.cache_data(max_entries=32, show_spinner=False)
def calibrated_prediction(run_id: str, service_ms: float, dist: str, cv: float, replicas: int,
                          batch: int, delay_ms: float, per_item: float = 0.0
                          ) -> dict[str, float]:
    """The prediction again, knowing what this machine delivered: the forward mean and the
    fixed hand-off costs measured by the run, over the run's own arrival times (nothing about
    its queueing). Simulated on 8× the run's requests so the prediction's own noise is small."""
    log = run_manager().get(run_id).result().log
    svc = calibrated(ServiceModel(forward_ms=service_ms, forward_per_item_ms=per_item * service_ms,
                                  dist=dist, cv=cv), log)
    times, rate = recorded_arrivals(log)
    rows = simulate(SimConfig(rate=rate, replicas=replicas, batch_size=batch,
                              max_batch_delay_ms=delay_ms, arrival="recorded",
                              arrival_times_ms=times, requests=8 * len(times),
                              warmup_fraction=0.0, seed=1), svc)
    total = (rows["t_done"] - rows["t_intended"]) / 1e6
    p50, p99 = np.percentile(total, [50, 99])
    return {"p50": float(p50), "p99": float(p99), "mean": float(total.mean()),
            "forward_ms": svc.forward_ms,
            "handoff_ms": svc.network_ms + svc.lag_ms + svc.turnaround_ms}


def comparison_markdown(predicted: LatencyStats | dict[str, Any], measured: LatencyStats,
                        calibrated_to: dict[str, Any] | None = None) -> str:
    """Predicted vs measured p50/p99/mean as a Markdown table with the difference; with
    ``calibrated_to``, the calibrated prediction too, and the difference is measured against
    it (the fair comparison)."""
    head = "| | predicted (as set) |" + (" predicted (calibrated) |" if calibrated_to else "")
    rows = [head + " measured | difference |",
            "|:--|--:|" + ("--:|" if calibrated_to else "") + "--:|--:|"]
    for key in ("p50", "p99", "mean"):
        p, m = predicted.get(key), measured.get(key)
        cells = f"| {key} | {fmt.duration(p)} |"
        if calibrated_to:
            p = calibrated_to.get(key)
            cells += f" {fmt.duration(p)} |"
        diff = fmt.change(m / p - 1) if p and m is not None else fmt.DASH
        rows.append(f"{cells} {fmt.duration(m)} | {diff} |")
    return "\n".join(rows)
