"""The Load Simulator's computations, cached per setting (instant when a slider returns to a
value it had) and shared by every session. The work itself is in ``latency.simulate`` and
``latency.capacity``; this module only caches it."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import streamlit as st

from latency.config import RunConfig
from latency.capacity import hockey_stick, max_rate_for_slo, min_replicas_for_slo
from latency.plots import fmt_duration
from latency.calibration import calibrated, recorded_arrivals
from latency.simulate import ServiceModel, SimConfig, simulate, utilisation
from latency.snapshot import build_snapshot
from ui.shared import run_manager

SIM_REQUESTS = 40_000


def service_model(source: str, service_ms: float, dist: str, cv: float) -> ServiceModel:
    if source == "parametric":
        return ServiceModel(forward_ms=service_ms, dist=dist, cv=cv)
    return _recorded(source)


@st.cache_resource(max_entries=16, show_spinner=False)
def _recorded(run_id: str) -> ServiceModel:
    handle = run_manager().get(run_id)
    if handle is None:
        raise ValueError(f"run {run_id} is no longer in memory")
    return ServiceModel.from_rows(handle.result().log)


def recorded_runs() -> list[str]:
    """Finished runs of this server with successful requests, newest first."""
    # the snapshot of a finished run is built once and memoised: no copy of its rows per rerun
    return [h.run_id for h in reversed(run_manager().finished())
            if h.status in ("completed", "stopped") and h.snapshot().progress.get("measured")]


@st.cache_data(max_entries=128, show_spinner=False)
def predict(source: str, service_ms: float, dist: str, cv: float, rate: float, replicas: int,
            batch: int, delay_ms: float) -> dict[str, Any]:
    svc = service_model(source, service_ms, dist, cv)
    cfg = SimConfig(rate=rate, replicas=replicas, batch_size=batch, max_batch_delay_ms=delay_ms,
                    requests=SIM_REQUESTS)
    rows = simulate(cfg, svc)
    measured = rows[~rows["warmup"]]
    snap = build_snapshot("simulated", 0, "completed", "simulated", {"rate": rate}, rows, {},
                          {}, int(measured["t_intended"][0]), int(measured["t_done"].max()))
    return {"snapshot": snap, "utilisation": utilisation(cfg, svc),
            "curve": hockey_stick(cfg, svc)}


@st.cache_data(max_entries=128, show_spinner=False)
def plan(source: str, service_ms: float, dist: str, cv: float, rate: float, replicas: int,
         batch: int, delay_ms: float, slo_ms: float) -> tuple[float | None, int | None]:
    svc = service_model(source, service_ms, dist, cv)
    cfg = SimConfig(rate=rate, replicas=replicas, batch_size=batch, max_batch_delay_ms=delay_ms)
    return max_rate_for_slo(cfg, svc, slo_ms), min_replicas_for_slo(cfg, svc, slo_ms)


def validation_config(service_ms: float, dist: str, cv: float, rate: float, replicas: int,
                      batch: int, delay_ms: float, duration_s: float = 10.0) -> RunConfig:
    """The real run that checks a parametric prediction: the synthetic pipeline holding the
    same forward-time distribution, at the same arrivals, replicas and batching."""
    return RunConfig(model="synthetic",
                     model_args={"preprocess_ms": 0.0, "forward_ms": service_ms,
                                 "postprocess_ms": 0.0, "dist": dist,
                                 "sigma": math.sqrt(math.log(1 + cv ** 2))},
                     rate=rate, arrival="poisson", replicas=replicas, batch_size=batch,
                     max_batch_delay_ms=delay_ms, duration_s=duration_s, warmup=20)


@st.cache_data(max_entries=32, show_spinner=False)
def calibrated_prediction(run_id: str, service_ms: float, dist: str, cv: float, replicas: int,
                          batch: int, delay_ms: float) -> dict[str, float]:
    """The prediction again, knowing what this machine delivered: the forward mean and the
    fixed hand-off costs measured by the run, over the run's own arrival times (nothing about
    its queueing). Simulated on 8× the run's requests so the prediction's own noise is small."""
    log = run_manager().get(run_id).result().log
    svc = calibrated(ServiceModel(forward_ms=service_ms, dist=dist, cv=cv), log)
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


def comparison_markdown(predicted: dict[str, Any], measured: dict[str, Any],
                        calibrated_to: dict[str, Any] | None = None) -> str:
    """Predicted vs measured p50/p99/mean as a Markdown table with the difference; with
    ``calibrated_to``, the calibrated prediction too, and the difference is measured against
    it (the fair comparison)."""
    head = "| | predicted (as set) |" + (" predicted (calibrated) |" if calibrated_to else "")
    rows = [head + " measured | difference |",
            "|:--|--:|" + ("--:|" if calibrated_to else "") + "--:|--:|"]
    for key in ("p50", "p99", "mean"):
        p, m = predicted.get(key), measured.get(key)
        cells = f"| {key} | {fmt_duration(p)} |"
        if calibrated_to:
            p = calibrated_to.get(key)
            cells += f" {fmt_duration(p)} |"
        diff = f"{(m / p - 1):+.0%}" if p and m is not None else "—"
        rows.append(f"{cells} {fmt_duration(m)} | {diff} |")
    return "\n".join(rows)
