"""The offered load of a simulated setting: the one number that says whether a steady state
exists (ρ < 1) — read by the simulator, the closed forms and every surface that shows it."""
from __future__ import annotations

from latency.simulation.config import SimConfig
from latency.simulation.service import ServiceModel


def utilisation(config: SimConfig, service: ServiceModel) -> float:
    """Offered load on the busiest stage — the replicas at full batches, or the preprocess
    workers when they are counted; ≥ 1 means the queue grows without bound."""
    per_request = service.mean_service_ms(config.batch_size) / config.batch_size
    rho = config.rate * per_request / 1000 / config.replicas
    if config.preprocess_workers:
        rho = max(rho, config.rate * service.mean_preprocess_ms() / 1000
                  / config.preprocess_workers)
    return rho


def utilisation_text(rho: float) -> str:
    """ρ as every surface prints it: two decimals, but never "1.00" for a stable ρ (0.996
    prints 0.996, not the 1.00 that reads as overload beside a closed form's other reason)."""
    if rho < 1 and f"{rho:.2f}" == "1.00":
        return f"{min(rho, 0.999):.3f}"
    return f"{rho:.2f}"
