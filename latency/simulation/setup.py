"""What to simulate, from a surface's settings: the one glue between ``simulate``'s flags,
``latency.simulate``'s keywords and the simulator — the rate-or-clients rule, a recorded run
read and resampled (``replay_config``), or the parametric service with its defaults — so the
CLI and the API refuse the same mistake with the same line and simulate the same system.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from latency.core.errors import ConfigError
from latency.simulation.config import SimConfig
from latency.simulation.replay import Recording, recorded_batching, replay_config
from latency.simulation.service import ServiceModel

__all__ = ["SimSetup", "simulation_setup"]

#: the mistakes a surface can make, worded once (as the CLI's flags name them)
BOTH_LOADS = "--clients (a closed loop) and --rate (arrivals) exclude each other: choose one"
NO_LOAD = "--rate is required (or --clients N, or --from-run RUN to take a recorded run's)"


@dataclass(frozen=True)
class SimSetup:
    """The checked system to simulate, its service, and where the service came from in words
    (the CLI's header)."""

    config: SimConfig
    service: ServiceModel
    source: str


def simulation_setup(*, rate: float | None = None, clients: int | None = None,
                     replicas: int | None = None, batch_size: int | None = None,
                     max_batch_delay_ms: float | None = None, arrival: str | None = None,
                     preprocess_workers: int | None = None, requests: int | None = None,
                     seed: int = 0, service_ms: float | None = None,
                     service_dist: str | None = None, service_cv: float | None = None,
                     from_run: Any = None,
                     load: Callable[[str], tuple[Any, Any]] | None = None) -> SimSetup:
    """The SimConfig and ServiceModel the settings ask for. ``from_run``: a run with ``log``
    and ``config`` (a RunResult, a ``Recording``), or a name ``load`` reads into (rows,
    config) — the storage stage's ``load_run``, passed in because simulation sits below it.
    None means "as recorded" for a replay, ``SimConfig``'s default otherwise. ConfigError,
    one line, for any mistake, worded the same for every caller."""
    if rate is not None and clients is not None:
        raise ConfigError(BOTH_LOADS)
    settings: dict[str, Any] = dict(
        rate=rate, clients=clients, replicas=replicas, batch_size=batch_size,
        max_batch_delay_ms=max_batch_delay_ms, arrival=arrival,
        preprocess_workers=preprocess_workers, requests=requests, seed=seed)
    if from_run is not None:
        run = from_run
        try:
            if not hasattr(run, "log"):
                if load is None:
                    raise ValueError(f"cannot read {from_run!r} (no reader given)")
                run = Recording(*load(str(from_run)))
            service = ServiceModel.from_rows(run.log, *recorded_batching(run))
        except ValueError as exc:
            raise ConfigError(f"--from-run: {exc}") from None
        config = replay_config(run, **settings)
        named = from_run if isinstance(from_run, str) else "the given run"
        return SimSetup(config, service, (
            f"service resampled from {named} ({len(run.log)} recorded requests, batch sizes "
            f"{', '.join(str(b) for b in sorted(service.forward_by_batch))})"))
    default = ServiceModel()
    service = ServiceModel(
        forward_ms=default.forward_ms if service_ms is None else service_ms,
        dist=default.dist if service_dist is None else service_dist,
        cv=default.cv if service_cv is None else service_cv).checked()
    given = {k: v for k, v in settings.items() if v is not None}
    given.setdefault("rate", 1.0)  # a closed loop's rate is an outcome
    config = SimConfig(**given).checked()  # a bad value is named even without a rate
    if rate is None and clients is None:
        raise ConfigError(NO_LOAD)
    return SimSetup(config, service, f"service {service.forward_ms:g} ms {service.dist}")
