"""The Load Simulator's computations, cached per setting (instant when a slider returns to a
value it had) and shared by every session. The work itself is in ``latency.simulate`` and
``latency.capacity``; this module only caches it."""
from __future__ import annotations

from typing import Any

import streamlit as st

from latency.capacity import hockey_stick, max_rate_for_slo, min_replicas_for_slo
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
    return [h.run_id for h in reversed(run_manager().finished())
            if h.status in ("completed", "stopped") and len(h.result().log)]


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
