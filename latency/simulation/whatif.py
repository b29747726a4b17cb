"""What-if: "if component K became F% faster, what would the end-to-end latency be?"

Two answers, because they differ exactly where it matters:

* **From the measured decomposition** (``decomposition_whatif``): every measured request keeps
  its other components and has K shortened by F; the new mean, p50 and p99 are read off those
  rescaled requests. Exact arithmetic on measured data — but it assumes nothing else moves,
  and under load something does: a faster server shortens the queue.
* **Under load, through the simulator** (``load_whatif``): the measured service times (each
  component per request, forward per batch size) are resampled into the discrete-event model
  of the server (``latency.simulation``), once as measured and once with K scaled by (1 − F);
  queueing is then an outcome, so it responds to the faster service. Labelled *simulated*.
  The load is the run's own by default — its recorded send times, so its rate and burstiness —
  or Poisson arrivals at a chosen rate. The preprocess worker pool is simulated with the
  run's own worker count, so on a preprocess-bound server a faster preprocess shortens the
  wait for a worker. ``now`` (the simulation as measured) is set beside the measurement: how
  far apart they are says how far to trust the simulated pair's level (their difference is
  the prediction).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from latency.core import fmt
from latency.core.records import COMPONENTS, component_ns, measured_and_ok

#: components a what-if may speed up (overhead is the measurement's own remainder).
WHATIF_COMPONENTS = ("network", "queue", "preprocess", "forward", "postprocess")
#: components the simulator can rescale (queueing is its output, not an input).
SERVICE_COMPONENTS = ("network", "preprocess", "forward", "postprocess")


@dataclass
class WhatIf:
    """Before and after (ms) and the relative change, for mean, p50 and p99."""

    component: str
    faster: float
    before: dict[str, float]
    after: dict[str, float]
    share: float  # the component's share of the mean total before
    simulated: bool = False
    rate: float | None = None
    utilisation: tuple[float, float] | None = None
    #: simulated: "recorded" (the run's own send times replayed) or "poisson"
    arrival: str | None = None
    #: simulated: the measurement the "before" simulation should reproduce (mean, p50, p99)
    measured: dict[str, float] | None = None
    #: closed loop: the clients, and the throughput they reach once faster (req/s)
    clients: int | None = None
    rate_after: float | None = None

    @property
    def change(self) -> dict[str, float]:
        return {k: (self.after[k] - v) / v if v else 0.0 for k, v in self.before.items()}

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "change": self.change}

    @property
    def assumption(self) -> str:
        """What the prediction takes as given, in one sentence."""
        if not self.simulated:
            return ("every measured request keeps its other components as they were: nothing "
                    "else moves, not even the queue")
        if self.arrival == "closed":
            load = (f"the run's {self.clients} closed-loop clients, each asking again as soon "
                    "as it is answered (so a faster server is asked more often: "
                    f"{self.rate:.4g} → {self.rate_after or 0:.4g} req/s)")
        elif self.arrival == "recorded":
            load = ("the run's own send times replayed (its rate and bursts), so the same load, "
                    "not the same clients: a closed-loop client would send sooner when served "
                    "faster")
        else:
            load = f"Poisson arrivals at {self.rate:g} req/s"
        return (f"the measured service times resampled through the same workers, batching and "
                f"replicas, with {load}; the queue is an outcome; the CPU cores the stages "
                "share are not modelled")

    def calibration(self) -> dict[str, float] | None:
        """The simulation as measured against the measurement: relative error per statistic."""
        if not self.measured:
            return None
        return {k: (self.before[k] - v) / v if v else 0.0 for k, v in self.measured.items()}

    def sentence(self) -> str:
        c = self.change
        if not self.simulated:
            where = "from the measured requests"
        elif self.arrival == "closed":
            where = f"simulated with {self.clients} closed-loop clients"
        else:
            where = (f"simulated at {self.rate:.4g} req/s"
                     + (" as recorded" if self.arrival == "recorded" else ", Poisson"))
        return (f"{self.component} {fmt.share(self.faster)} faster → mean "
                f"{fmt.change(c['mean'])}, p50 {fmt.change(c['p50'])}, p99 "
                f"{fmt.change(c['p99'])} ({where}; {self.component} was "
                f"{fmt.share(self.share)} of the mean)")


def _check(component: str, faster: float, allowed: tuple[str, ...]) -> None:
    if component not in allowed:
        raise ValueError(f"component must be one of: {', '.join(allowed)} (got {component!r})")
    if not 0.0 <= faster <= 1.0:
        raise ValueError(f"faster must be a fraction from 0 to 1 (got {faster!r})")


def _stats(total_ms: np.ndarray) -> dict[str, float]:
    return {"mean": float(total_ms.mean()), "p50": float(np.percentile(total_ms, 50)),
            "p99": float(np.percentile(total_ms, 99))}


def decomposition_whatif(rows: np.ndarray, component: str, faster: float) -> WhatIf:
    """Shorten ``component`` by ``faster`` (0.4 = 40% faster) in every measured, successful
    request and recompute mean/p50/p99 of the totals. Everything else stays as measured."""
    _check(component, faster, WHATIF_COMPONENTS)
    _, ok = measured_and_ok(rows)
    if len(ok) == 0:
        raise ValueError("no successful measured requests to rescale")
    comps = component_ns(ok)
    total = comps["total"] / 1e6
    part = comps[component] / 1e6
    after = total - faster * part
    share = float(part.mean() / total.mean()) if total.mean() else 0.0
    return WhatIf(component, faster, _stats(total), _stats(after), share)


def load_whatif(rows: np.ndarray, component: str, faster: float, rate: float | None = None,
                *, clients: int | None = None, replicas: int = 1, batch_size: int = 1,
                max_batch_delay_ms: float = 0.0, preprocess_workers: int | None = None,
                requests: int = 20_000, seed: int = 0) -> WhatIf:
    """Simulate the server with the measured service times, as measured and with
    ``component`` scaled by (1 − ``faster``); the queue responds to the change. ``clients``:
    a closed loop of that many clients (the load of a closed-loop run: a faster server is
    asked more often); else ``rate`` None: the run's own recorded send times, replayed
    (cycled to ``requests``); a rate: Poisson arrivals at it."""
    from latency.simulation.replay import Recording, replay_config
    from latency.simulation.simulator import ServiceModel, simulate, utilisation

    _check(component, faster, SERVICE_COMPONENTS)
    if rate is not None and not rate > 0:
        raise ValueError("rate must be > 0")
    before = ServiceModel.from_rows(rows, batch_size, max_batch_delay_ms)
    after = ServiceModel.from_rows(rows, batch_size, max_batch_delay_ms)
    if component == "forward":
        after.forward_by_batch = {k: v * (1 - faster) for k, v in after.forward_by_batch.items()}
    else:
        after.samples = {**after.samples, component: after.samples[component] * (1 - faster)}
    _, ok = measured_and_ok(rows)
    comps = component_ns(ok)
    share = float(comps[component].mean() / comps["total"].mean()) if len(ok) else 0.0
    # a closed loop's rate is an outcome of the loop: reported as served
    cfg = replay_config(Recording(rows), rate=rate, clients=clients,
                        arrival="recorded" if rate is None and clients is None else "poisson",
                        replicas=replicas, batch_size=batch_size,
                        max_batch_delay_ms=max_batch_delay_ms,
                        preprocess_workers=preprocess_workers, requests=requests, seed=seed)
    out, rates, rho = [], [], []
    for svc in (before, after):
        kept = simulate(cfg, svc)
        kept = kept[~kept["warmup"]]
        out.append(_stats(component_ns(kept)["total"] / 1e6))
        span_s = (kept["t_done"].max() - kept["t_intended"].min()) / 1e9
        served = len(kept) / span_s if clients is not None and span_s > 0 else cfg.rate
        rates.append(served)
        rho.append(utilisation(replace(cfg, rate=served), svc))
    return WhatIf(component, faster, out[0], out[1], share, simulated=True, rate=rates[0],
                  utilisation=(rho[0], rho[1]),
                  arrival="closed" if clients is not None else cfg.arrival,
                  measured=_stats(comps["total"] / 1e6), clients=clients,
                  rate_after=rates[1] if clients is not None else None)


def component_means(rows: np.ndarray) -> dict[str, float]:
    """Mean of each component (ms) over the measured, successful requests."""
    _, ok = measured_and_ok(rows)
    comps = component_ns(ok)
    return {c: float(comps[c].mean() / 1e6) if len(ok) else 0.0 for c in COMPONENTS}
