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

from latency.analysis.stats import describe_ms
from latency.simulation.closed_form import closed_form
from latency.simulation.simulator import ServiceModel, SimConfig, simulate
from latency.simulation.utilisation import utilisation

#: utilisations of the hockey-stick curve (the knee sits between 0.7 and 0.9)
CURVE_UTILISATION = np.array([0.05, 0.2, 0.35, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.93,
                              0.95, 0.97, 0.98])


@dataclass(frozen=True)
class Curve:
    """The hockey stick: simulated p50/p99 at each utilisation, the p99's 95 % interval where
    the run was long enough for an honest one (NaN elsewhere), the M/M/c closed form where it
    applies, and ``marked`` — the index of the page's own setting when it was put on the curve
    (``with_point``), so the marker is a vertex of the line it sits on."""

    utilisation: np.ndarray
    p50_ms: np.ndarray
    p99_ms: np.ndarray
    theory_p50_ms: np.ndarray | None  # M/M/c response percentiles, where they apply
    theory_p99_ms: np.ndarray | None
    p99_lo_ms: np.ndarray | None = None
    p99_hi_ms: np.ndarray | None = None
    marked: int | None = None

    def with_point(self, rho: float, p50: float, p99: float,
                   ci: tuple[float, float] | None,
                   theory: tuple[float, float] | None) -> Curve:
        """The curve with the setting's own simulation inserted as a vertex (replacing a grid
        point at the same utilisation): the marker lies on the curve by construction."""
        u = self.utilisation
        keep = np.abs(u - rho) > 1e-9
        i = int(np.searchsorted(u[keep], rho))

        def put(a: np.ndarray | None, v: float) -> np.ndarray | None:
            return None if a is None else np.insert(a[keep], i, v)

        lo, hi = ci if ci else (np.nan, np.nan)
        th50, th99 = theory if theory else (np.nan, np.nan)
        return Curve(np.insert(u[keep], i, rho), put(self.p50_ms, p50), put(self.p99_ms, p99),
                     put(self.theory_p50_ms, th50), put(self.theory_p99_ms, th99),
                     put(self.p99_lo_ms, lo), put(self.p99_hi_ms, hi), marked=i)


def capacity_rps(config: SimConfig, service: ServiceModel) -> float:
    """Requests per second the server sustains (utilisation 1): the replicas at full batches,
    or the preprocess workers when they are counted and slower."""
    return 1.0 / utilisation(replace(config, rate=1.0), service)


def point(config: SimConfig, service: ServiceModel) -> tuple[float, float,
                                                             tuple[float, float] | None]:
    """p50, p99 and the p99's 95 % interval (None when the run is too short for an honest
    one) of the total latency of one simulated run, its warm-up transient dropped."""
    rows = simulate(config, service)
    m = rows[~rows["warmup"]]
    d = describe_ms(m["t_done"] - m["t_intended"])
    return float(d.p50), float(d.p99), d.p99_ci95


def hockey_stick(config: SimConfig, service: ServiceModel, requests: int = 4000,
                 most: int = 20_000) -> Curve:
    """p50/p99 of the total latency against utilisation 0.05…0.98, everything else fixed.

    A queue near saturation needs ~1/(1−ρ) times longer to settle, so each point simulates
    ``requests / (1 − ρ)`` requests, capped at ``most`` to keep the page quick: the last
    points (ρ ≥ 0.8) are then still short of steady state and under-state the tail a little.
    Every point draws the same random numbers (one stream per quantity, the same seed), so the
    curve rises smoothly instead of jittering, and a longer run at any utilisation — the
    page's headline — begins with exactly the requests of the point it replaces.
    """
    cap = capacity_rps(config, service)
    p50, p99, lo, hi = [], [], [], []
    for u in CURVE_UTILISATION:
        n = int(min(most, requests / (1 - u)))
        a, b, ci = point(replace(config, rate=u * cap, requests=n), service)
        p50.append(a)
        p99.append(b)
        lo.append(ci[0] if ci else np.nan)
        hi.append(ci[1] if ci else np.nan)
    theory = [closed_form(replace(config, rate=u * cap), service) for u in CURVE_UTILISATION]
    theory50 = theory99 = None
    if all(t.p50_ms is not None and t.p99_ms is not None for t in theory):
        theory50 = np.array([t.p50_ms for t in theory])
        theory99 = np.array([t.p99_ms for t in theory])
    return Curve(CURVE_UTILISATION, np.array(p50), np.array(p99), theory50, theory99,
                 np.array(lo), np.array(hi))


def max_rate_for_slo(config: SimConfig, service: ServiceModel, slo_ms: float,
                     requests: int = 8000, steps: int = 12) -> float | None:
    """Highest rate whose simulated p99 meets ``slo_ms`` (bisection below capacity); None when
    even a trickle misses it (the service alone is slower than the SLO)."""
    cap = capacity_rps(config, service)
    lo, hi = 0.0, 0.999 * cap
    if point(replace(config, rate=0.02 * cap, requests=requests), service)[1] > slo_ms:
        return None
    for _ in range(steps):
        mid = (lo + hi) / 2
        ok = point(replace(config, rate=mid, requests=requests), service)[1] <= slo_ms
        lo, hi = (mid, hi) if ok else (lo, mid)
    return lo


def min_replicas_for_slo(config: SimConfig, service: ServiceModel, slo_ms: float,
                         requests: int = 8000, most: int = 32) -> int | None:
    """Fewest replicas whose simulated p99 meets ``slo_ms`` at ``config.rate``."""
    for c in range(1, most + 1):
        trial = replace(config, replicas=c, requests=requests)
        if utilisation(trial, service) >= 1:
            continue
        if point(trial, service)[1] <= slo_ms:
            return c
    return None
