"""Capacity planning from the simulator: the hockey stick and the two questions a team asks.

- How do p50 and p99 grow with utilisation? (the hockey stick, simulated, with the M/M/c
  closed form overlaid where it applies);
- what is the highest arrival rate that still meets the SLO at p99 with these replicas?
- what is the fewest replicas that meets it at this rate?

Every answer is simulated with the same server model as ``latency.simulation`` and labelled so.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from latency.simulation import queueing
from latency.simulation.simulator import ServiceModel, SimConfig, simulate

#: utilisations of the hockey-stick curve (the knee sits between 0.7 and 0.9)
CURVE_UTILISATION = np.array([0.05, 0.2, 0.35, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.93,
                              0.95, 0.97, 0.98])


@dataclass(frozen=True)
class Curve:
    utilisation: np.ndarray
    p50_ms: np.ndarray
    p99_ms: np.ndarray
    theory_p50_ms: np.ndarray | None  # M/M/c response percentiles, where they apply
    theory_p99_ms: np.ndarray | None


def capacity_rps(config: SimConfig, service: ServiceModel) -> float:
    """Requests per second the server sustains (utilisation 1): the replicas at full batches,
    or the preprocess workers when they are counted and slower."""
    per_request_ms = service.mean_service_ms(config.batch_size) / config.batch_size
    cap = config.replicas * 1000.0 / per_request_ms
    pre_ms = service.mean_preprocess_ms()
    if config.preprocess_workers and pre_ms > 0:
        cap = min(cap, config.preprocess_workers * 1000.0 / pre_ms)
    return cap


def _percentiles(config: SimConfig, service: ServiceModel) -> tuple[float, float]:
    rows = simulate(config, service)
    m = rows[~rows["warmup"]]
    total = (m["t_done"] - m["t_intended"]) / 1e6
    p50, p99 = np.percentile(total, [50, 99])
    return float(p50), float(p99)


def hockey_stick(config: SimConfig, service: ServiceModel, requests: int = 2000,
                 most: int = 16_000) -> Curve:
    """p50/p99 of the total latency against utilisation 0.05…0.98, everything else fixed.

    A queue near saturation needs ~1/(1−ρ) times longer to settle, so each point simulates
    ``requests / (1 − ρ)`` requests, capped at ``most`` to keep the page instant: the last
    points (ρ ≥ 0.9) are then still short of steady state and under-state the tail a little.
    """
    cap = capacity_rps(config, service)
    p50, p99 = [], []
    for u in CURVE_UTILISATION:
        n = int(min(most, requests / (1 - u)))
        # the same seed at every point (common random numbers): each point scales the same
        # arrival gaps and service draws, so the curve rises smoothly instead of jittering
        a, b = _percentiles(replace(config, rate=u * cap, requests=n), service)
        p50.append(a)
        p99.append(b)
    theory50 = theory99 = None
    exact = (config.batch_size == 1 and config.arrival == "poisson" and not service.samples
             and service.dist == "exponential" and service.preprocess_ms == 0
             and service.postprocess_ms == 0)
    if exact:
        tau = service.forward_ms
        rates = CURVE_UTILISATION * cap / 1000
        theory50 = np.array([queueing.mmc_response_percentile(r, tau, config.replicas, 0.5)
                             for r in rates])
        theory99 = np.array([queueing.mmc_response_percentile(r, tau, config.replicas, 0.99)
                             for r in rates])
    return Curve(CURVE_UTILISATION, np.array(p50), np.array(p99), theory50, theory99)


def max_rate_for_slo(config: SimConfig, service: ServiceModel, slo_ms: float,
                     requests: int = 8000, steps: int = 12) -> float | None:
    """Highest rate whose simulated p99 meets ``slo_ms`` (bisection below capacity); None when
    even a trickle misses it (the service alone is slower than the SLO)."""
    cap = capacity_rps(config, service)
    lo, hi = 0.0, 0.999 * cap
    if _percentiles(replace(config, rate=0.02 * cap, requests=requests), service)[1] > slo_ms:
        return None
    for _ in range(steps):
        mid = (lo + hi) / 2
        ok = _percentiles(replace(config, rate=mid, requests=requests), service)[1] <= slo_ms
        lo, hi = (mid, hi) if ok else (lo, mid)
    return lo


def min_replicas_for_slo(config: SimConfig, service: ServiceModel, slo_ms: float,
                         requests: int = 8000, most: int = 32) -> int | None:
    """Fewest replicas whose simulated p99 meets ``slo_ms`` at ``config.rate``."""
    for c in range(1, most + 1):
        trial = replace(config, replicas=c, requests=requests)
        if config.rate >= capacity_rps(trial, service):
            continue
        if _percentiles(trial, service)[1] <= slo_ms:
            return c
    return None
