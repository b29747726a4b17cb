"""Whether a closed form describes a simulated setting, which one, and its figures — or why
none does. One owner, so the CLI and the Load Simulator page never disagree about whether
theory exists for the same setting.

Poisson arrivals, one request a batch and nothing but a forward pass on the replicas make a
textbook queue: exponential forward times are M/M/c (exact, with response-time percentiles),
other distributions on one replica M/G/1 (Pollaczek–Khinchine, exact means; M/D/1 for
constant), on several the Allen–Cunneen G/G/c approximation (means only). Anything else —
overload, a closed loop, other arrivals, batching, a chain of stages, resampled service — has
its own reason, said in words.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from latency.core import fmt
from latency.simulation import queueing
from latency.simulation.config import SimConfig
from latency.simulation.service import ServiceModel
from latency.simulation.utilisation import utilisation

__all__ = ["ClosedForm", "closed_form"]


@dataclass(frozen=True)
class ClosedForm:
    """The closed form of a setting (``model`` names it) and its figures in ms, or — when
    ``model`` is None — the ``reason`` none applies. Percentiles only where the formula gives
    them (M/M/c); ``exact`` False for an approximation."""

    model: str | None
    reason: str | None = None
    exact: bool = True
    wait_mean_ms: float | None = None
    response_mean_ms: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None

    @property
    def applies(self) -> bool:
        return self.model is not None

    def sentence(self) -> str:
        """One line: the formula and its figures, or why there is none (CLI and page)."""
        if not self.applies:
            return f"no closed form applies: {self.reason}"
        text = (f"closed form {self.model}{'' if self.exact else ' (an approximation)'}: "
                f"mean wait {fmt.duration(self.wait_mean_ms)}, mean response "
                f"{fmt.duration(self.response_mean_ms)}")
        if self.p50_ms is not None and self.p99_ms is not None:
            text += f", p50 {fmt.duration(self.p50_ms)}, p99 {fmt.duration(self.p99_ms)}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def closed_form(config: SimConfig, service: ServiceModel) -> ClosedForm:
    """The closed form that describes ``config`` with ``service``, or why none does."""
    def none(reason: str) -> ClosedForm:
        return ClosedForm(None, reason)

    if config.clients:
        return none("a closed loop of clients (its arrivals are an outcome of the server, "
                    "not a Poisson stream)")
    rho = utilisation(config, service)
    if rho >= 1:
        return none(f"overload: utilisation ρ = {rho:.2f} ≥ 1, so the queue grows without "
                    "bound and there is no steady state to predict")
    if config.arrival != "poisson":
        return none(f"{config.arrival} arrivals (the closed forms assume Poisson arrivals)")
    if service.samples or service.forward_by_batch or service.forward_trace_ms is not None:
        return none("service times resampled from a recorded run (several components, not "
                    "one forward-time distribution)")
    if config.batch_size > 1:
        return none("batching (a batch waits to fill and its forward time grows with its "
                    "size: no textbook queue)")
    if (service.preprocess_ms or service.postprocess_ms or service.network_ms
            or service.lag_ms or service.turnaround_ms or service.wakeup_ms):
        return none("preprocessing, postprocessing or hand-off costs (a chain of stages, not "
                    "one queue)")
    rate, tau, c = config.rate / 1000, service.forward_ms, config.replicas
    if service.dist == "exponential":
        p = queueing.mmc(rate, tau, c)
        return ClosedForm(p.model, wait_mean_ms=p.wait_mean,
                          response_mean_ms=p.response_mean,
                          p50_ms=queueing.mmc_response_percentile(rate, tau, c, 0.5),
                          p99_ms=queueing.mmc_response_percentile(rate, tau, c, 0.99))
    cv = 0.0 if service.dist == "constant" else service.cv
    if c == 1:
        p = queueing.md1(rate, tau) if cv == 0 else queueing.mg1(rate, tau, cv)
        return ClosedForm(p.model, wait_mean_ms=p.wait_mean,
                          response_mean_ms=p.response_mean)
    p = queueing.allen_cunneen(rate, tau, c, 1.0, cv)
    return ClosedForm(p.model, exact=False, wait_mean_ms=p.wait_mean,
                      response_mean_ms=p.response_mean)
