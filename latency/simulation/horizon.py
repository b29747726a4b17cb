"""How long a simulation must run for its tail to be believed, and whether it was.

A queue near saturation forgets its past slowly: its slow requests come in clusters whose
length grows like 1/(1 − ρ)² requests (M/M/1's relaxation time), so N simulated requests pin
its p99 down as well as ~N·(1 − ρ)²/k independent ones would. A length that is ample at
ρ 0.7 under-states the tail at ρ 0.95 by a quarter (M/M/1, 10 ms: 40,000 requests give a p99
of 660 ms against the exact 921 ms; 1,000,000 give 869 ms). So:

- ``requests_for``: the base length up to ρ 0.7, scaled with ((1 − 0.7)/(1 − ρ))² above it,
  within a budget — ``MOST_VECTORISED`` requests where the simulator is one vectorised pass
  (one replica, no batching, at most one preprocess worker: ~1 s), ``MOST_LOOPED`` where it
  loops once per batch (~1.5 s). An unstable queue (ρ ≥ 1) or a closed loop keeps the base:
  no length settles the one, the other never grows.
- ``too_short``: whether the result can be believed, and in words why not — against the
  exact closed form where one gives the figure (M/M/c's p99; M/D/1's and M/G/1's mean),
  else by the p99's worth in independent requests (batch means, ``quantile_spread``: at
  least ``MIN_EFFECTIVE_FOR_P99``, the rule of the p99 interval).
- ``interval_text``: why a simulated p99 has no interval, without the "run longer" of a
  measured run's note — a page cannot, and an unstable queue would only grow.
"""
from __future__ import annotations

import numpy as np

from latency.analysis.stats import MIN_EFFECTIVE_FOR_P99, LatencyStats, quantile_spread
from latency.core import fmt
from latency.simulation.closed_form import ClosedForm
from latency.simulation.config import SimConfig
from latency.simulation.service import ServiceModel
from latency.simulation.utilisation import utilisation

__all__ = ["BASE_REQUESTS", "interval_text", "requests_for", "suggested_requests", "too_short"]

#: the Load Simulator's length where a queue settles quickly (its default, M/M/1 at ρ 0.7,
#: puts the exact p99 inside the simulated one's 95 % interval)
BASE_REQUESTS = 40_000
#: up to this utilisation the base length is enough; above it the length grows as 1/(1 − ρ)²
SETTLES_BY = 0.7
#: the budget, in requests: one vectorised pass (Lindley), and one loop step per batch
MOST_VECTORISED = 1_000_000
MOST_LOOPED = 250_000
#: a simulated figure further than this from its exact closed form is not to be believed
TOLERANCE = 0.10


def vectorised(config: SimConfig) -> bool:
    """Whether the simulator takes one vectorised pass (no per-request Python loop)."""
    return (not config.clients and config.replicas == 1 and config.batch_size == 1
            and (config.preprocess_workers or 1) == 1)


def requests_for(config: SimConfig, service: ServiceModel, base: int = BASE_REQUESTS) -> int:
    """Requests to simulate ``config`` for a tail worth believing: ``base`` up to ρ 0.7,
    ``base`` × ((1 − 0.7)/(1 − ρ))² above, at most the budget (``MOST_VECTORISED`` or
    ``MOST_LOOPED``); ``base`` for a closed loop and for an unstable queue."""
    if config.clients:
        return base
    rho = utilisation(config, service)
    if not rho > SETTLES_BY or rho >= 1:
        return base
    most = MOST_VECTORISED if vectorised(config) else MOST_LOOPED
    return int(min(max(base, most), base * ((1 - SETTLES_BY) / (1 - rho)) ** 2))


def suggested_requests(rho: float, requests: int) -> int:
    """How many requests to simulate instead of ``requests`` that were too few at ``rho``
    (no budget: for a caller that chose the length): at least twice as many, and the
    base length scaled with ((1 − 0.7)/(1 − ρ))², at most ``MAX_REQUESTS``."""
    from latency.core.config import MAX_REQUESTS

    scaled = BASE_REQUESTS * ((1 - SETTLES_BY) / (1 - rho)) ** 2 if rho < 1 else 0
    return int(min(MAX_REQUESTS, float(f"{max(2 * requests, scaled):.2g}")))  # 4,000,000


def _effective(total_ns: np.ndarray, lat: LatencyStats) -> float:
    """The run's worth in independent requests for its p99 (batch means)."""
    return quantile_spread(total_ns, (lat.p99 or 0.0) * 1e6).effective_n


def too_short(config: SimConfig, rho: float, total_ns: np.ndarray, lat: LatencyStats,
              theory: ClosedForm | None) -> str | None:
    """Why this simulation (its measured requests' totals ``total_ns``, in request order,
    and their ``lat``) is too short to be believed, in one sentence; None when it is long
    enough. Against the exact closed form where one gives the figure, else by the p99's
    worth in independent requests. Not asked of a closed loop (it never grows) or of an
    unstable queue (no length settles it: ``interval_text`` says so)."""
    if config.clients or rho >= 1 or not len(total_ns) or lat.p99 is None:
        return None
    n = len(total_ns)
    head = (f"at utilisation {rho:.2f}, "
            + ("near saturation where a queue settles ever more slowly, " if rho > SETTLES_BY
               else "") + f"{n:,} simulated requests are too few")
    if theory is not None and theory.applies and theory.exact:
        figure, simulated, exact = (("p99", lat.p99, theory.p99_ms)
                                    if theory.p99_ms is not None else
                                    ("mean", lat.mean, theory.response_mean_ms))
        if simulated is None or not exact:
            return None
        off = simulated / exact - 1
        if abs(off) <= TOLERANCE:
            return None
        return (f"{head}: their {figure} {fmt.duration(simulated)} is {fmt.share(abs(off))} "
                f"{'below' if off < 0 else 'above'} the exact {fmt.duration(exact)} of "
                f"{theory.model}; believe the closed form")
    effective = _effective(total_ns, lat)
    if effective >= MIN_EFFECTIVE_FOR_P99:
        return None
    return (f"{head}: their slow ones come in clusters, so they pin the p99 down only as "
            f"well as ~{effective:,.0f} independent requests would (a trustworthy p99 needs "
            f"≥ {MIN_EFFECTIVE_FOR_P99:,}), and the tail shown may be far from the steady "
            "state's")


def interval_text(config: SimConfig, rho: float, total_ns: np.ndarray,
                  lat: LatencyStats) -> str | None:
    """Why the simulated p99 has no 95 % interval (None when it has one), in words that fit
    a simulation: no advice to run longer — an unstable queue only grows with the length."""
    if lat.p99_ci95 is not None or not len(total_ns):
        return None
    if rho >= 1 and not config.clients:
        return ("no p99 interval: an unstable queue has no steady state, so no length of "
                "simulation pins its p99 down — a longer one only shows a longer queue")
    effective = _effective(total_ns, lat)
    return (f"no p99 95 % interval: the slow requests come in clusters (a queue: each delays "
            f"those behind it), so these {len(total_ns):,} requests are worth only "
            f"~{effective:,.0f} independent ones (an interval needs ≥ "
            f"{MIN_EFFECTIVE_FOR_P99:,})")
