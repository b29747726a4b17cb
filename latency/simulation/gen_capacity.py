"""A generation server's load curves, simulated: TTFT and TPOT against the arrival rate (the
hockey stick), the goodput curve, and the highest rate meeting both objectives.

Goodput (DistServe, OSDI 2024) is the rate of requests that meet both their TTFT and their
TPOT objective; "the highest rate meeting both targets" is the highest arrival rate at which
at least ``attainment`` of the requests meet both (DistServe's SLO attainment, 90 % in its
evaluation). Past it, throughput may still climb while goodput falls: the server is busy
serving requests too late to count.

Every point of a curve is one simulation of the same setup at another open-loop rate, with
the same seed and lengths (common random numbers: the curve is smooth, and its points differ
by the rate alone). A headline simulated at its own rate is a point of the curve
(``GenCurve.with_point``), so the marker lies on the line it is read against.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from latency.analysis.gen_summary import GenSummary
from latency.core.errors import ConfigError
from latency.simulation.gen_replay import GenSimSetup

#: the rates a curve sweeps, as shares of the server's saturation throughput
SWEEP_SHARES: tuple[float, ...] = (0.1, 0.25, 0.4, 0.55, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25)
#: bisection steps between the last rate meeting the objectives and the first missing them
BISECTIONS = 6
#: the closed loop that measures saturation keeps this many requests per slot waiting
SATURATION_CLIENTS_PER_SLOT = 2
#: the saturation run serves at least this many requests per client
SATURATION_WAVES = 10
#: DistServe's SLO attainment: the share of requests that must meet both objectives
DEFAULT_ATTAINMENT = 0.9


@dataclass(frozen=True)
class GenPoint:
    """One simulated rate: the rate its arrivals offered and the rate asked of them, its
    percentiles (ms) and what it served (per s)."""

    rate: float
    asked: float
    ttft_p50_ms: float
    ttft_p99_ms: float
    tpot_p50_ms: float
    tpot_p99_ms: float
    throughput_rps: float
    tokens_per_s: float
    goodput_rps: float | None
    met_share: float | None
    #: requests the server refused or failed (a prompt that cannot fit its step or context)
    errors: int = 0


def point_of(rate: float, s: GenSummary) -> GenPoint:
    """A simulated rate's point from its summary, at the rate its arrivals offered (Poisson
    draws scatter around the ``rate`` asked; every point of a curve draws the same ones, so
    all would sit off by the same factor and served would never reach offered)."""
    return GenPoint(rate=float(s.offered_rps or rate), asked=float(rate),
                    ttft_p50_ms=s.ttft_ms.p50 or 0.0,
                    ttft_p99_ms=s.ttft_ms.p99 or 0.0, tpot_p50_ms=s.tpot_ms.p50 or 0.0,
                    tpot_p99_ms=s.tpot_ms.p99 or 0.0, throughput_rps=s.throughput_rps,
                    tokens_per_s=s.output_tokens_per_s, goodput_rps=s.goodput_rps,
                    met_share=s.slo_met_share, errors=s.errors)


@dataclass(frozen=True)
class GenCurve:
    """Points by rising rate; ``marked``: the index of the headline's own point."""

    points: tuple[GenPoint, ...]
    saturation_rps: float
    marked: int | None = None

    def column(self, name: str) -> list[float | None]:
        return [getattr(p, name) for p in self.points]

    def with_point(self, point: GenPoint, mark: bool = True) -> GenCurve:
        """The curve with ``point`` in its place by rate (replacing one at the same rate),
        marked when ``mark``."""
        kept = [p for p in self.points if p.rate != point.rate]
        points = tuple(sorted([*kept, point], key=lambda p: p.rate))
        marked = points.index(point) if mark else (
            points.index(self.points[self.marked]) if self.marked is not None
            and self.points[self.marked] in points else None)
        return GenCurve(points, self.saturation_rps, marked)


def at_rate(setup: GenSimSetup, rate: float) -> GenSimSetup:
    """The setup under open-loop arrivals at ``rate`` (a recorded or closed-loop load becomes
    Poisson arrivals: a curve sweeps a rate)."""
    load = setup.load
    arrival = load.arrival if load.arrival in ("poisson", "constant", "bursty") else "poisson"
    new = replace(load, rate=float(rate), clients=None, arrival=arrival,
                  arrival_times_ms=None).checked()
    return replace(setup, load=new, config=replace(setup.config, rate=float(rate),
                                                   concurrency=None))


def saturation_rps(setup: GenSimSetup) -> float:
    """Requests per second the server completes when it is never idle: a closed loop with
    ``SATURATION_CLIENTS_PER_SLOT`` requests for each of its slots."""
    slots = setup.config.max_running * setup.load.replicas
    clients = max(2, SATURATION_CLIENTS_PER_SLOT * slots)
    # long enough that the clients' first wave is a small part of it: a steady state, not
    # the makespan of one burst
    load = replace(setup.load, clients=clients, arrival="poisson", arrival_times_ms=None,
                   requests=max(setup.load.requests, SATURATION_WAVES * clients)).checked()
    result = replace(setup, load=load).run()
    rps = result.summary.throughput_rps
    if not rps > 0:
        raise ConfigError("the simulated server completed no request: nothing to sweep")
    return float(rps)


def gen_sweep(setup: GenSimSetup, shares: tuple[float, ...] = SWEEP_SHARES) -> GenCurve:
    """The curve over ``shares`` of the setup's saturation rate."""
    top = saturation_rps(setup)
    points = tuple(point_of(top * s, at_rate(setup, top * s).run().summary) for s in shares)
    return GenCurve(points, top)


@dataclass(frozen=True)
class BestRate:
    """The highest rate meeting both objectives for ``attainment`` of the requests: ``rate``
    None when even the lowest rate tried misses them; ``beyond`` when every rate swept meets
    them (the answer is then at least ``rate``)."""

    rate: float | None
    attainment: float
    point: GenPoint | None
    beyond: bool = False

    def sentence(self, objectives: str) -> str:
        if self.rate is None:
            return (f"none: even at the lowest rate simulated fewer than {self.attainment:.0%} "
                    f"of the requests meet {objectives} — the server itself is too slow")
        head = "at least " if self.beyond else ""
        p = self.point
        tail = (f" (TTFT p99 {p.ttft_p99_ms:,.1f} ms, TPOT p99 {p.tpot_p99_ms:,.2f} ms, "
                f"goodput {p.goodput_rps or 0:.2f}/s)" if p else "")
        return (f"{head}{self.rate:.2f} requests/s with {self.attainment:.0%} of them meeting "
                f"{objectives}{tail}")


def best_rate(setup: GenSimSetup, curve: GenCurve, attainment: float = DEFAULT_ATTAINMENT,
              bisections: int = BISECTIONS) -> tuple[BestRate, GenCurve]:
    """The highest rate meeting the objectives (``BestRate``) by bisection between the last
    swept rate that meets them and the first that does not; the points it simulated join the
    curve, so the answer lies on it."""
    if not 0 < attainment <= 1:
        raise ConfigError(f"the attainment must be a share from 0 to 1 (got {attainment!r})")
    if not curve.points or curve.points[0].met_share is None:
        raise ConfigError("no request of the lowest rate swept succeeded (each refused: see "
                          "the headline's warning), or no objective is set: no rate meets "
                          "them" if curve.points else "nothing was swept")
    meets = [p.met_share is not None and p.met_share >= attainment for p in curve.points]
    if all(meets):
        last = curve.points[-1]
        return BestRate(last.rate, attainment, last, beyond=True), curve
    first_miss = meets.index(False)
    lo = curve.points[first_miss - 1] if first_miss else None
    hi = curve.points[first_miss]
    lo_asked = lo.asked if lo else 0.0
    for _ in range(bisections):  # in the rates asked: the ones a simulation is given
        mid = (lo_asked + hi.asked) / 2
        point = point_of(mid, at_rate(setup, mid).run().summary)
        curve = curve.with_point(point, mark=False)
        if point.met_share is not None and point.met_share >= attainment:
            lo, lo_asked = point, mid
        else:
            hi = point
    if lo is None:
        return BestRate(None, attainment, None), curve
    return BestRate(lo.rate, attainment, lo), curve
