"""The Load Simulator's settings (one frozen ``SimSettings``) and its computations, cached per
setting (instant when a slider returns to a value it had) and shared by every session. The work
itself is in ``latency.simulation`` (a recorded run replayed by ``replay_config``, the theory
from ``closed_form``, as for the CLI); this module only caches it."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import streamlit as st

from latency.analysis.result import RunResult
from latency.analysis.snapshot import build_snapshot
from latency.analysis.stats import LatencyStats
from latency.core import fmt
from latency.core.config import RunConfig
from latency.simulation.calibration import calibrated, recorded_arrivals
from latency.simulation.capacity import (
    capacity_rps,
    hockey_stick,
    max_rate_for_slo,
    min_replicas_for_slo,
)
from latency.simulation.closed_form import closed_form
from latency.simulation.horizon import BASE_REQUESTS, interval_text, requests_for, too_short
from latency.simulation.replay import Recording, recorded_batching, replay_config
from latency.simulation.simulator import ServiceModel, SimConfig, simulate, utilisation
from ui.server import run_manager

#: the headline's length where a queue settles quickly; near saturation ``predict`` simulates
#: longer (``latency.simulation.horizon.requests_for``: × 1/(1 − ρ)², within a budget)
SIM_REQUESTS = BASE_REQUESTS
HISTORY = "history:"  # source keys of runs read back from the saved history


#: a batch of b takes forward × (1 + share × (b − 1)); 45 %: image-cnn, batch 1 vs 8 (BENCHMARKS.md)
PER_ITEM_SHARE_DEFAULT = 0.45


@dataclass(frozen=True)
class SimSettings:
    """The page's sidebar as one value: the key of every cached computation, what a
    validation run remembers it was started for, and the source of the SimConfig simulated.
    ``per_item``: the forward cost of each extra request in a batch, as a share of the
    batch-1 forward time (parametric service only; a recording has its own per batch size).
    ``service_ms``, ``dist``, ``cv`` and ``per_item`` are the parametric service's; a
    recorded ``source`` (a run id, or ``history:<id>``) brings its own. ``as_recorded``: a
    recorded source's load as it ran (a closed loop's clients, an open loop's rate), as
    ``simulate --from-run RUN`` replays it without ``--rate``; ``rate`` is then unused."""

    source: str = "parametric"
    service_ms: float = 10.0
    dist: str = "exponential"
    cv: float = 1.0
    per_item: float = 0.0
    arrival: str = "poisson"
    replicas: int = 1
    batch: int = 1
    delay_ms: float = 0.0
    rate: float = 1.0
    as_recorded: bool = False

    @property
    def parametric(self) -> bool:
        return self.source == "parametric"

    def at_rate(self, rate: float) -> SimSettings:
        """The setting under open-loop arrivals at ``rate`` (the capacity and the hockey
        stick sweep a rate, whatever the load shown)."""
        return replace(self, rate=float(rate), as_recorded=False)


@dataclass(frozen=True)
class Validation:
    """A validation run the page started: its id, the settings it checks and the prediction
    it is set beside (kept so a moved slider does not re-label an earlier run's result)."""

    run_id: str
    settings: SimSettings
    predicted: LatencyStats


def service_model(s: SimSettings) -> ServiceModel:
    if s.parametric:
        return ServiceModel(forward_ms=s.service_ms, forward_per_item_ms=s.per_item * s.service_ms,
                            dist=s.dist, cv=s.cv).checked()
    return _recorded(s.source)[1]


def sim_config(s: SimSettings, requests: int = SIM_REQUESTS) -> SimConfig:
    """The checked SimConfig of the setting. A recorded source replays its run as the CLI's
    ``--from-run`` and ``latency.simulate(from_run=...)`` do (``replay_config``), with the
    sliders' values as the overrides: the run's preprocess worker pool comes with it, and its
    load too when ``as_recorded``."""
    rate = None if s.as_recorded and not s.parametric else s.rate  # None: the run's own load
    overrides: dict[str, Any] = dict(rate=rate, replicas=s.replicas, batch_size=s.batch,
                                     max_batch_delay_ms=s.delay_ms, arrival=s.arrival,
                                     requests=requests)
    if s.parametric:
        return SimConfig(**overrides).checked()
    return replay_config(_recorded(s.source)[0], **overrides)


#: the server sliders' ranges (views/load_simulator.py), which a recorded run's setup is
#: clamped to when it sets them
MAX_REPLICAS, MAX_BATCH, MAX_DELAY_MS = 16, 64, 50.0


def take_run_setup() -> None:
    """When a recorded run is chosen, the server sliders take its replicas and batching, as
    its replay takes them (``replay_config``): a run replays as it ran — as the CLI's
    ``--from-run`` does — until a slider is moved. A run that cannot be read leaves them."""
    source = st.session_state.get("sim_source")
    if not source or source == "parametric":
        return
    try:
        ran = replay_config(_recorded(source)[0], rate=1.0)
    except ValueError:
        return  # the page says why when it simulates
    st.session_state["sim_replicas"] = min(max(int(ran.replicas), 1), MAX_REPLICAS)
    st.session_state["sim_batch"] = min(max(int(ran.batch_size), 1), MAX_BATCH)
    st.session_state["sim_delay"] = min(max(float(ran.max_batch_delay_ms), 0.0), MAX_DELAY_MS)
    st.session_state["sim_as_recorded"] = True


def capacity_of(s: SimSettings) -> float:
    """Requests per second the setting serves at utilisation 1 (the rate does not matter)."""
    return capacity_rps(sim_config(s.at_rate(1.0)), service_model(s))


def preprocess_workers(source: str) -> int | None:
    """A recorded run's preprocess worker pool (its requests queued for it), as its replay
    takes it; parametric service has no preprocessing, so no pool."""
    if source == "parametric":
        return None
    return sim_config(SimSettings(source=source)).preprocess_workers


@st.cache_resource(max_entries=16, show_spinner=False)
def _recorded(source: str) -> tuple[Recording, ServiceModel]:
    if source.startswith(HISTORY):
        from latency.storage.store import RunStore, StoreError

        try:
            run = RunStore().load(source[len(HISTORY):])
        except StoreError as exc:
            raise ValueError(str(exc)) from None
        if not isinstance(run.result, RunResult):
            raise ValueError(f"{run.info.id} is a {run.info.kind} run: the one-shot simulator "
                             "replays one-shot runs")
        log, config = run.result.log, run.config
    else:
        handle = run_manager().get(source)
        if handle is None:
            raise ValueError(f"run {source} is no longer in memory")
        log, config = handle.result().log, handle.config
    recording = Recording(log, config)
    return recording, ServiceModel.from_rows(log, *recorded_batching(recording))


def recorded_runs() -> dict[str, str]:
    """Recorded runs to take service times from, {source key: label}: this server's finished
    runs first (newest first), then the saved history's completed runs."""
    # the snapshot of a finished run is built once and memoised: no copy of its rows per rerun
    out = {h.run_id: f"{h.run_id} · {h.config.model} (this session)"
           for h in reversed(run_manager().finished())
           if h.kind == "one-shot" and h.status in ("completed", "stopped")
           and h.snapshot().progress.get("measured")}
    out.update(_history_runs(history_stamp()))
    return out


def history_stamp() -> tuple[Any, ...]:
    """What changes whenever a run is saved, renamed or deleted: the history file's path and
    the size and modification time of it and of its write-ahead log (a commit lands in the
    ``-wal`` file first, the main file at a checkpoint). The key of the history's listing,
    so a run saved a moment ago — by a CLI, or by this server's run that just finished — is
    listed at once, and an unchanged history is not read again on every rerun."""
    from latency.storage.store import RunStore

    path = RunStore().path
    stamp: list[Any] = [str(path)]
    for file in (path, path.with_name(path.name + "-wal")):
        try:
            st_ = file.stat()
        except OSError:
            stamp += [None, None]
        else:
            stamp += [st_.st_size, st_.st_mtime_ns]
    return tuple(stamp)


@st.cache_data(max_entries=8, show_spinner=False)
def _history_runs(stamp: tuple[Any, ...]) -> dict[str, str]:
    """The saved history's completed runs as the picker lists them (``stamp``: the history's
    state, ``history_stamp``: a new one reads the history again)."""
    from latency.storage.store import RunStore, StoreError

    try:
        runs = RunStore(stamp[0]).list(limit=30, status="completed")
    except (StoreError, OSError):
        return {}  # no history yet, or unreadable: the page still works parametric
    return {f"{HISTORY}{r.id}": f"{r.id} · {r.label} · p50 {fmt.duration(r.p50_ms)} (history)"
            for r in runs if r.n}


@st.cache_data(max_entries=128, show_spinner=False)
def predict(s: SimSettings) -> dict[str, Any]:
    """The headline's simulation of the setting, long enough near saturation for its tail
    to be believed (``requests_for``), and said plainly when even that is too short
    (``too_short``)."""
    svc, cfg = service_model(s), sim_config(s)
    cfg = replace(cfg, requests=requests_for(cfg, svc, cfg.requests))
    rows = simulate(cfg, svc)
    measured = rows[~rows["warmup"]]
    load = RunConfig(concurrency=cfg.clients) if cfg.clients else RunConfig(rate=cfg.rate)
    snap = build_snapshot("simulated", 0, "completed", "simulated", load, rows,
                          {}, {}, int(measured["t_intended"][0]), int(measured["t_done"].max()))
    summary = snap.summary
    assert summary is not None  # a simulation always measures its requests
    lat = summary.latency_ms
    # a closed loop's rate is an outcome: its utilisation is that of the throughput it reached,
    # and it is never unstable (summarize_simulation's rule)
    rho = utilisation(replace(cfg, rate=summary.throughput_rps) if cfg.clients else cfg, svc)
    theory = closed_form(cfg, svc)
    grid = curve(s.at_rate(1.0))
    # the headline's own run becomes the curve's vertex at this utilisation: the marker lies
    # on the line, and the line's neighbours share its first requests (common random numbers)
    percentiles = (theory.p50_ms, theory.p99_ms) if theory.p99_ms is not None else None
    marked = (grid.with_point(rho, lat.p50, lat.p99, lat.p99_ci95, percentiles)
              if rho < 1 and not cfg.clients else grid)
    total_ns = measured["t_done"] - measured["t_intended"]
    return {"snapshot": snap, "utilisation": rho, "curve": marked, "theory": theory,
            "closed": bool(cfg.clients),
            "setting": cfg.describe(), "requests": cfg.requests,
            "lengthened": cfg.requests > SIM_REQUESTS,
            "interval_note": interval_text(cfg, rho, total_ns, lat),
            "too_short": too_short(cfg, rho, total_ns, lat, theory)}


@st.cache_data(max_entries=64, show_spinner=False)
def curve(s: SimSettings) -> Any:
    """The hockey stick does not depend on the arrival rate (it sweeps it), so the most-moved
    slider in a workshop only moves the marker: the curve comes from this cache (called with
    the rate set to 1)."""
    return hockey_stick(sim_config(s), service_model(s))


@st.cache_data(max_entries=128, show_spinner=False)
def plan(s: SimSettings, slo_ms: float) -> tuple[float | None, int | None]:
    cfg, svc = sim_config(s), service_model(s)
    return max_rate_for_slo(cfg, svc, slo_ms), min_replicas_for_slo(cfg, svc, slo_ms)


def validation_config(s: SimSettings, duration_s: float = 10.0) -> RunConfig:
    """The real run that checks a parametric prediction: the synthetic pipeline holding the
    same forward-time distribution (and per-request batch cost), at the same arrivals,
    replicas and batching."""
    return RunConfig(model="synthetic",
                     model_args={"preprocess_ms": 0.0, "forward_ms": s.service_ms,
                                 "forward_per_item_ms": s.per_item * s.service_ms,
                                 "postprocess_ms": 0.0, "dist": s.dist,
                                 "sigma": math.sqrt(math.log(1 + s.cv ** 2))},
                     rate=s.rate, arrival=s.arrival, replicas=s.replicas, batch_size=s.batch,
                     max_batch_delay_ms=s.delay_ms, duration_s=duration_s, warmup=20)


@st.cache_data(max_entries=32, show_spinner=False)
def calibrated_prediction(run_id: str, s: SimSettings) -> dict[str, float]:
    """The prediction again, knowing what this machine delivered: the forward mean and the
    fixed hand-off costs measured by the run, over the run's own arrival times (nothing about
    its queueing). Simulated on 8× the run's requests so the prediction's own noise is small."""
    log = run_manager().get(run_id).result().log
    svc = calibrated(service_model(s), log, s.batch, s.delay_ms)
    times, rate = recorded_arrivals(log)
    rows = simulate(SimConfig(rate=rate, replicas=s.replicas, batch_size=s.batch,
                              max_batch_delay_ms=s.delay_ms, arrival="recorded",
                              arrival_times_ms=times, requests=8 * len(times),
                              warmup_fraction=0.0, seed=1).checked(), svc)
    total = (rows["t_done"] - rows["t_intended"]) / 1e6
    p50, p99 = np.percentile(total, [50, 99])
    return {"p50": float(p50), "p99": float(p99), "mean": float(total.mean()),
            "forward_ms": svc.forward_ms,
            "handoff_ms": svc.network_ms + svc.lag_ms + svc.turnaround_ms + svc.wakeup_ms}


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
