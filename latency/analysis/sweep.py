"""A sweep's measured answer: one point per run (its load, what it served, its percentiles and
their intervals, its goodput), and the highest load meeting the objectives with how sure it is.

A point is read off a finished generation run, nothing else: the load it was offered (its
arrival rate, or its clients), what it served, TTFT, TPOT, ITL and E2E at p50 and p99 — each
p99 with its 95 % interval where the run has the requests for one — and the share of requests
that met the objectives. The highest load meeting them is the highest arrival rate measured
whose share reaches the attainment asked (DistServe's SLO attainment), *and* every rate below
it does too: a point that meets them above one that misses is noise, not capacity. The closed
loops (the floor's one client, the ceiling's many) are references, not loads of the answer: a
closed loop slows down with the server it measures, so its rate is the server's, not one
offered to it — they count only in a sweep of client counts, which has no rates. How sure: the
neighbouring points are named (the last that meets, the first that misses) with their p99
intervals — the true capacity lies between them, and a p99 interval that reaches past an
objective says the point could have gone either way.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from latency.analysis.stats import quantile_ci
from latency.core import fmt

#: a point served less than this share of what it was offered: past saturation (its queue
#: grows for as long as the run lasts), and a sweep stops raising the load there
SATURATED_SHARE = 0.9
#: the share of requests that must meet the objectives at the highest load (DistServe's 90 %)
DEFAULT_ATTAINMENT = 0.9


@dataclass(frozen=True)
class SweepPoint:
    """One measured load of a sweep (times in ms)."""

    label: str
    #: "clients" (a closed loop of that many) or "rate" (arrivals a second, open loop)
    load: str
    value: float
    run_id: str | None
    valid: bool
    requests: int
    offered_rps: float | None
    served_rps: float
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    tpot_p50_ms: float | None
    tpot_p99_ms: float | None
    itl_p99_ms: float | None
    e2e_p50_ms: float | None
    e2e_p99_ms: float | None
    #: the p99's 95 % interval (None: too few requests for one)
    ttft_p99_ci: tuple[float, float] | None
    tpot_p99_ci: tuple[float, float] | None
    goodput_rps: float | None
    met_share: float | None
    #: output tokens a second served
    tokens_per_s: float | None = None
    itl_p50_ms: float | None = None

    @property
    def rate(self) -> float:
        """The load as requests a second: offered (open loop) or served (closed)."""
        return float(self.offered_rps if self.load == "rate" and self.offered_rps
                     else self.served_rps)

    @property
    def saturated(self) -> bool:
        """An open-loop point that served clearly less than it was offered."""
        return (self.load == "rate" and bool(self.offered_rps)
                and self.served_rps < SATURATED_SHARE * float(self.offered_rps or 0.0))

    def meets(self, attainment: float) -> bool:
        return self.met_share is not None and self.met_share >= attainment

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SweepPoint:
        d = dict(d)
        for key in ("ttft_p99_ci", "tpot_p99_ci"):
            d[key] = tuple(d[key]) if d.get(key) is not None else None
        return cls(**d)


def point_of(result: Any, label: str, run_id: str | None = None) -> SweepPoint:
    """The point a finished generation run (``GenResult``) measured."""
    s, c = result.summary, result.config
    frame = result.requests_frame()
    ok = frame[(~frame["warmup"]) & (frame["status"] == "ok")]

    def ci(column: str) -> tuple[float, float] | None:
        if column not in ok:
            return None
        values = np.sort(ok[column].dropna().to_numpy(dtype=np.float64))
        return quantile_ci(values, 0.99)

    return SweepPoint(
        label=label, load="rate" if c.rate else "clients",
        value=float(c.rate if c.rate else (c.concurrency or 1)), run_id=run_id,
        valid=bool(result.validity.valid), requests=int(s.successful),
        offered_rps=s.offered_rps, served_rps=float(s.throughput_rps),
        ttft_p50_ms=s.ttft_ms.p50, ttft_p99_ms=s.ttft_ms.p99, tpot_p50_ms=s.tpot_ms.p50,
        tpot_p99_ms=s.tpot_ms.p99, itl_p99_ms=s.itl_ms.p99, e2e_p50_ms=s.e2e_ms.p50,
        e2e_p99_ms=s.e2e_ms.p99, ttft_p99_ci=ci("ttft_ms"), tpot_p99_ci=ci("tpot_ms"),
        goodput_rps=s.goodput_rps, met_share=s.slo_met_share,
        tokens_per_s=float(s.output_tokens_per_s), itl_p50_ms=s.itl_ms.p50)


@dataclass(frozen=True)
class SweepAnswer:
    """The highest measured load meeting the objectives, and its neighbours."""

    attainment: float
    #: the highest point meeting them with every point below it meeting them too (None: none)
    best: SweepPoint | None
    #: the first point above it that misses (None: every point met them)
    miss: SweepPoint | None
    #: whether any objective was set (without one, nothing can be met)
    judged: bool = True
    #: points below the first miss that met the objectives but were INVALID
    passed_over: tuple[SweepPoint, ...] = ()

    def sentence(self, objectives: str) -> str:
        if not self.judged:
            return ("no objective set (--slo, --slo-ttft-ms, --slo-tpot-ms, --slo-e2e-ms): "
                    "nothing to meet")
        if self.best is None:
            first = self.miss
            shown = (f" (at {first.label}: {fmt.share(first.met_share)} met them)"
                     if first is not None else "")
            if self.passed_over:
                return (f"none that counts: the loads meeting {objectives} were INVALID "
                        f"({', '.join(p.label for p in self.passed_over)}: too few requests "
                        f"or a disturbed machine — a longer --point-duration){shown}")
            return (f"none: even the lightest load measured had fewer than "
                    f"{self.attainment:.0%} of its requests meeting {objectives}{shown}")
        b = self.best
        head = (f"{b.rate:.2f} requests/s ({b.label}) with {fmt.share(b.met_share)} of its "
                f"requests meeting {objectives} — TTFT p99 {_ms_ci(b.ttft_p99_ms, b.ttft_p99_ci)}"
                f", TPOT p99 {_ms_ci(b.tpot_p99_ms, b.tpot_p99_ci)}")
        if self.miss is None:
            return head + "; every load measured met them: the capacity is at least this"
        m = self.miss
        return (head + f"; the next load measured, {m.rate:.2f} requests/s ({m.label}), had "
                f"{fmt.share(m.met_share)} (TTFT p99 {_ms_ci(m.ttft_p99_ms, m.ttft_p99_ci)}, "
                f"TPOT p99 {_ms_ci(m.tpot_p99_ms, m.tpot_p99_ci)}): the capacity lies between")


def highest_meeting(points: list[SweepPoint], attainment: float = DEFAULT_ATTAINMENT
                    ) -> SweepAnswer:
    """The highest load meeting the objectives, over ``points`` in the order of their rate:
    the last point of the run of points, from the lightest, that all meet them. A point that
    meets them but is INVALID (too few requests for its percentiles, say) is passed over —
    it neither stands for the capacity nor ends the run; one that misses them ends it,
    valid or not (an overloaded point is INVALID and a miss)."""
    # open-loop points are the loads the answer is about (arrivals a second, whatever the
    # server does); a closed loop's rate is its own (it slows with the server): those count
    # only where no rate was swept, in the order of their clients
    ordered = answer_loads(points)
    if not ordered or all(p.met_share is None for p in ordered):
        return SweepAnswer(attainment, None, None, judged=False)
    best: SweepPoint | None = None
    passed: list[SweepPoint] = []
    for p in ordered:
        if not p.meets(attainment):
            return SweepAnswer(attainment, best, p, passed_over=tuple(passed))
        if p.valid:
            best = p
        else:
            passed.append(p)
    return SweepAnswer(attainment, best, None, passed_over=tuple(passed))


def answer_loads(points: list[SweepPoint]) -> list[SweepPoint]:
    """The loads an answer is about, lightest first: the open-loop points by rate where the
    sweep has any (a closed loop's rate is the server's own), else the client counts."""
    rates = [p for p in points if p.load == "rate"]
    return sorted(rates or points, key=lambda p: p.value)


def _ms_ci(value: float | None, ci: tuple[float, float] | None) -> str:
    if value is None:
        return fmt.DASH
    interval = f" [{fmt.ms(ci[0])}, {fmt.ms(ci[1])}]" if ci is not None else ""
    return f"{fmt.ms(value)} ms{interval}"


__all__ = ["DEFAULT_ATTAINMENT", "SATURATED_SHARE", "SweepAnswer", "SweepPoint",
           "answer_loads", "highest_meeting", "point_of"]
