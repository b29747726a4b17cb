"""Closed-form queueing results: what theory predicts a run should measure.

The load simulator's closed forms and the yardstick of the engine's own
known-answer tests (M/D/1). Times are in whatever unit the arguments use (ms throughout the
project). Every function refuses an unstable queue (utilisation ρ ≥ 1) with ``UnstableQueue``
rather than returning a negative or infinite latency.

- M/M/1, M/M/c (Erlang C through the numerically stable Erlang B recursion, with waiting- and
  response-time percentiles), M/D/1, M/G/1 (Pollaczek–Khinchine), Kingman's G/G/1 and the
  Allen–Cunneen G/G/c approximation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


class UnstableQueue(ValueError):
    """Arrivals at or above capacity: the queue grows without bound, there is no steady state."""


@dataclass(frozen=True)
class QueuePrediction:
    """Steady-state prediction of one queue: mean wait in queue, mean response, utilisation."""

    model: str
    utilisation: float
    wait_mean: float
    response_mean: float
    wait_probability: float | None = None  # P(a request waits at all), where known

    def __repr__(self) -> str:
        return (f"{self.model}(ρ={self.utilisation:.3f}, Wq={self.wait_mean:.4g}, "
                f"W={self.response_mean:.4g})")


def _check(rate: float, service_mean: float, servers: int = 1) -> float:
    if rate <= 0 or service_mean <= 0 or servers < 1:
        raise ValueError("rate and service time must be > 0 and servers >= 1")
    rho = rate * service_mean / servers
    if rho >= 1:
        raise UnstableQueue(f"utilisation {rho:.2f} ≥ 1: {rate:g} arrivals per unit time "
                            f"exceed the capacity {servers / service_mean:g}")
    return rho


def erlang_b(servers: int, load: float) -> float:
    """Blocking probability B(c, a) by the recursion B(k) = a·B(k−1) / (k + a·B(k−1)):
    stable for hundreds of servers, where the factorial formula overflows."""
    b = 1.0
    for k in range(1, servers + 1):
        b = load * b / (k + load * b)
    return b


def erlang_c(servers: int, load: float) -> float:
    """Probability that an arrival waits, C(c, a), for offered load a = λ·E[S] < c."""
    if load >= servers:
        raise UnstableQueue(f"offered load {load:g} ≥ {servers} servers")
    b = erlang_b(servers, load)
    rho = load / servers
    return b / (1 - rho * (1 - b))


def mm1(rate: float, service_mean: float) -> QueuePrediction:
    rho = _check(rate, service_mean)
    mu = 1 / service_mean
    return QueuePrediction("M/M/1", rho, rho / (mu - rate), 1 / (mu - rate), rho)


def mmc(rate: float, service_mean: float, servers: int) -> QueuePrediction:
    rho = _check(rate, service_mean, servers)
    c_prob = erlang_c(servers, rate * service_mean)
    wq = c_prob / (servers / service_mean - rate)
    return QueuePrediction(f"M/M/{servers}", rho, wq, wq + service_mean, c_prob)


def mmc_wait_percentile(rate: float, service_mean: float, servers: int, p: float) -> float:
    """The p-quantile of the wait in queue: P(Wq > t) = C·exp(−(cμ − λ)t)."""
    _check(rate, service_mean, servers)
    c_prob = erlang_c(servers, rate * service_mean)
    if 1 - p >= c_prob:
        return 0.0  # at least a share p of requests never wait
    return math.log(c_prob / (1 - p)) / (servers / service_mean - rate)


def mmc_response_percentile(rate: float, service_mean: float, servers: int, p: float) -> float:
    """The p-quantile of the response time (wait + exponential service), solved numerically
    from P(T > t) = e^{−μt} + C·μ/(cμ−λ−μ)·(e^{−μt} − e^{−(cμ−λ)t})."""
    _check(rate, service_mean, servers)
    mu = 1 / service_mean
    theta = servers * mu - rate
    c_prob = erlang_c(servers, rate * service_mean)

    def tail(t: float) -> float:
        if abs(theta - mu) < 1e-12 * mu:  # the limit θ → μ
            return math.exp(-mu * t) * (1 + c_prob * mu * t)
        return math.exp(-mu * t) + c_prob * mu / (theta - mu) * (
            math.exp(-mu * t) - math.exp(-theta * t))

    lo, hi = 0.0, service_mean
    while tail(hi) > 1 - p:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if tail(mid) > 1 - p else (lo, mid)
    return (lo + hi) / 2


def mm1_response_percentile(rate: float, service_mean: float, p: float) -> float:
    """M/M/1 response time is exponential with rate μ − λ."""
    _check(rate, service_mean)
    return -math.log(1 - p) / (1 / service_mean - rate)


def mm1_max_rate_for_percentile(service_mean: float, target: float, p: float) -> float:
    """The highest arrival rate whose M/M/1 response-time p-quantile is within ``target``
    (the inverse of ``mm1_response_percentile``: T is exponential at μ − λ, so
    λ = μ + ln(1 − p) / target); ≤ 0 when the service alone misses the target."""
    return 1 / service_mean + math.log(1 - p) / target


def mg1(rate: float, service_mean: float, service_cv: float) -> QueuePrediction:
    """Pollaczek–Khinchine: Wq = ρ·E[S]·(1 + cv²) / (2(1 − ρ)), cv the service time's
    coefficient of variation (0 deterministic, 1 exponential)."""
    rho = _check(rate, service_mean)
    wq = rho * service_mean * (1 + service_cv ** 2) / (2 * (1 - rho))
    return QueuePrediction("M/G/1", rho, wq, wq + service_mean, rho)


def md1(rate: float, service_mean: float) -> QueuePrediction:
    """M/D/1: P-K with constant service, Wq = ρτ / (2(1 − ρ))."""
    p = mg1(rate, service_mean, 0.0)
    return QueuePrediction("M/D/1", p.utilisation, p.wait_mean, p.response_mean, p.utilisation)


def kingman(rate: float, service_mean: float, arrival_cv: float, service_cv: float
            ) -> QueuePrediction:
    """Kingman's G/G/1 approximation: Wq ≈ ρ/(1 − ρ) · (ca² + cs²)/2 · E[S] (exact for M/G/1)."""
    rho = _check(rate, service_mean)
    wq = rho / (1 - rho) * (arrival_cv ** 2 + service_cv ** 2) / 2 * service_mean
    return QueuePrediction("G/G/1 (Kingman)", rho, wq, wq + service_mean)


def allen_cunneen(rate: float, service_mean: float, servers: int, arrival_cv: float,
                  service_cv: float) -> QueuePrediction:
    """Allen–Cunneen G/G/c: the M/M/c wait scaled by (ca² + cs²)/2 (exact for M/M/c)."""
    base = mmc(rate, service_mean, servers)
    wq = base.wait_mean * (arrival_cv ** 2 + service_cv ** 2) / 2
    return QueuePrediction(f"G/G/{servers} (Allen–Cunneen)", base.utilisation, wq,
                           wq + service_mean, base.wait_probability)
