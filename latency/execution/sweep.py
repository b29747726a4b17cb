"""A sweep: how much load a generation server takes while meeting its objectives, measured.

GuideLLM's order, bounded: a **floor** (one client, one request at a time: the server's own
speed), a **ceiling** (a closed loop of enough clients to keep every slot busy: what it serves
at saturation), then **points between** — arrival rates (open loop, Poisson) at shares of what
the ceiling served, up to all of it, or the rates or client counts you choose. Each point is a
run of its own, saved in the history like any run and named after the sweep (``sweep-<id> 3:
rate 4.20/s``), so ``history``, ``compare`` and the dashboard read each one. The sweep stops raising
the load past saturation (a point that served clearly less than it was offered: its queue only
grows) and never runs past ``max_duration_s`` in all: a point that would not fit what is left
is not started, and the answer says what was left out.

Its answer (``analysis.sweep``): TTFT/TPOT/ITL/E2E p50 and p99 against the load, goodput, and
the highest load meeting the objectives with its neighbours and their intervals. Beside each
measured point, the simulator's prediction fitted from the sweep's first two runs (the floor
and the ceiling: ``simulation.gen_replay``), so the simulator's fidelity is seen on your own
server, point by point.
"""
from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from latency.analysis.sweep import (
    DEFAULT_ATTAINMENT,
    SweepAnswer,
    SweepPoint,
    highest_meeting,
    point_of,
)
from latency.core import fmt
from latency.core.config import RunConfig
from latency.core.errors import ConfigError

#: the share of the ceiling's rate each automatic point between offers (the last close to
#: saturation, where the answer usually lies)
AUTO_FRACTIONS = (0.3, 0.5, 0.65, 0.8, 0.9, 1.0)
#: a point's least measured seconds, and at least this many requests at its rate (the
#: minimum-sample rule's 29, with room)
MIN_POINT_S = 5.0
POINT_REQUESTS = 40
#: the most points a sweep may be asked for
MAX_POINTS = 20


@dataclass(frozen=True)
class SweepPlan:
    """What to sweep: ``base`` (the server or pipeline, lengths, objectives, scheduler: its
    own load and length are replaced per point), the points between floor and ceiling
    (``rates`` or ``concurrencies`` chosen, else ``points`` automatic rates), each point's
    measured seconds, the ceiling's clients and the whole sweep's time bound."""

    base: RunConfig
    rates: tuple[float, ...] = ()
    concurrencies: tuple[int, ...] = ()
    points: int = 5
    point_s: float = 15.0
    ceiling_clients: int | None = None
    max_duration_s: float = 600.0
    attainment: float = DEFAULT_ATTAINMENT
    #: fit the simulator from the floor and the ceiling and predict every point beside it
    simulate: bool = True

    def checked(self) -> SweepPlan:
        """One line (ConfigError) for a plan that cannot run."""
        if self.rates and self.concurrencies:
            raise ConfigError("choose one kind of point: --rates or --concurrencies")
        if self.base.turns > 1 and not self.concurrencies:
            raise ConfigError("--turns needs closed loops (a session's next turn waits for its "
                              "reply): sweep client counts, --concurrencies N,N,…")
        for r in self.rates:
            if not 0.001 <= r <= 10_000:
                raise ConfigError(f"--rates: each rate from 0.001 to 10000 a second (got {r!r})")
        for c in self.concurrencies:
            if not 1 <= c <= 1024:
                raise ConfigError(f"--concurrencies: each from 1 to 1024 (got {c!r})")
        if not 1 <= self.points <= MAX_POINTS:
            raise ConfigError(f"--points must be from 1 to {MAX_POINTS} (got {self.points!r})")
        if len(self.rates) + len(self.concurrencies) > MAX_POINTS:
            raise ConfigError(f"at most {MAX_POINTS} points between the floor and the ceiling")
        if not 1.0 <= self.point_s <= 3600:
            raise ConfigError(f"--point-duration must be from 1 to 3600 s (got {self.point_s!r})")
        if not 10.0 <= self.max_duration_s <= 24 * 3600:
            raise ConfigError(f"--max-duration must be from 10 s to 24 h "
                              f"(got {self.max_duration_s!r})")
        if not 0 < self.attainment <= 1:
            raise ConfigError(f"--attainment must be a share above 0 and at most 1 "
                              f"(got {self.attainment!r})")
        if self.ceiling_clients is not None and not 1 <= self.ceiling_clients <= 1024:
            raise ConfigError(f"--ceiling-clients must be from 1 to 1024 "
                              f"(got {self.ceiling_clients!r})")
        return self

    def ceiling(self) -> int:
        """The ceiling's clients: given, else twice the slots (every slot busy, a queue
        behind them) and at least 8."""
        if self.ceiling_clients is not None:
            return self.ceiling_clients
        return max(2 * int(self.base.max_running or 4), 8)


@dataclass
class SweepResult:
    """A sweep's points (measured, in the order run), the simulator's prediction beside each
    (None where it could not fit), what it left out, and its answer."""

    sweep_id: str
    plan: SweepPlan
    points: list[SweepPoint] = field(default_factory=list)
    predicted: list[SweepPoint | None] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    stopped: str | None = None
    fit: str | None = None
    elapsed_s: float = 0.0

    @property
    def answer(self) -> SweepAnswer:
        return highest_meeting(self.points, self.plan.attainment)

    def __repr__(self) -> str:  # a value that prints what the CLI prints
        return "\n".join([self.table(), "", *self.notes(),
                          f"answer: {self.answer.sentence(objectives_text(self.plan.base))}"])

    def table(self) -> str:
        """A row a point, in the order of their load: measured, and the simulator's
        prediction beside its p99s."""
        rows = sorted(zip(self.points, self.predicted), key=lambda pq: pq[0].rate)
        head = (f"{'point':<16}{'offered/s':>10}{'served/s':>10}{'TTFT p50':>10}"
                f"{'TTFT p99':>10}{'sim':>9}{'TPOT p50':>10}{'TPOT p99':>10}{'sim':>9}"
                f"{'E2E p99':>10}{'met':>6}{'goodput/s':>10}  run")
        lines = [head]
        for p, q in rows:
            lines.append(
                f"{p.label:<16}{_n(p.offered_rps):>10}{_n(p.served_rps):>10}"
                f"{fmt.ms(p.ttft_p50_ms):>10}{fmt.ms(p.ttft_p99_ms):>10}"
                f"{fmt.ms(q.ttft_p99_ms if q else None):>9}{fmt.ms(p.tpot_p50_ms):>10}"
                f"{fmt.ms(p.tpot_p99_ms):>10}{fmt.ms(q.tpot_p99_ms if q else None):>9}"
                f"{fmt.ms(p.e2e_p99_ms):>10}{fmt.share(p.met_share):>6}"
                f"{_n(p.goodput_rps):>10}  {p.run_id or fmt.DASH}"
                + ("" if p.valid else " INVALID"))
        return "\n".join(lines)

    def notes(self) -> list[str]:
        """What the table's columns mean, where its runs are, what was fitted, stopped and
        left out."""
        out = ["times in ms; sim: the simulator's prediction at that load; met: the share of "
               "requests meeting the objectives; INVALID points (too few requests, overload) "
               "are not taken as the capacity",
               f"sweep {self.sweep_id}: {len(self.points)} point(s) in {self.elapsed_s:.0f} s; "
               "each a run in the history: python -m latency history --search "
               f"sweep-{self.sweep_id}"]
        if self.fit:
            out.append(f"simulated beside (sim): {self.fit}")
        if self.stopped:
            out.append(f"stopped: {self.stopped}")
        out += [f"not run: {s}" for s in self.skipped]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "sweep", "sweep_id": self.sweep_id,
                "base": self.plan.base.to_dict(),
                "plan": {k: v for k, v in dataclasses.asdict(self.plan).items() if k != "base"},
                "points": [p.to_dict() for p in self.points],
                "predicted": [p.to_dict() if p is not None else None for p in self.predicted],
                "skipped": self.skipped, "stopped": self.stopped, "fit": self.fit,
                "elapsed_s": self.elapsed_s,
                "answer": self.answer.sentence(objectives_text(self.plan.base))}


def _n(value: float | None) -> str:
    return fmt.DASH if value is None else f"{value:.2f}"


def objectives_text(config: RunConfig) -> str:
    """'TTFT ≤ 500 ms and TPOT ≤ 50 ms'."""

    return str(config.objectives) or "no objective"


#: runs one point's config (named, stopped after at most the seconds given: what is left of
#: the sweep's bound) to its finished GenResult and saves it: (result, its history id)
Runner = Callable[[RunConfig, str, float], tuple[Any, str | None]]
#: the simulator beside the points: (the measured runs to fit: the floor's and the ceiling's,
#: the points) → (what was fitted, a predicted point per measured one, None where it could not)
Predictor = Callable[[list[Any], list[SweepPoint]], tuple[str, list[SweepPoint | None]]]


def saved_runner(store: Any, cancel: threading.Event, who: str = "CLI sweep",
                 source: str = "cli") -> Runner:
    """The runner of the command line, the API and the dashboard: each point in a run
    process of its own (as ``run`` does), stopped by ``cancel`` or at the sweep's time bound,
    saved in ``store`` (a ``RunStore``) under its name, from ``source``."""
    from latency.execution.gen_handle import GenRunHandle
    from latency.execution.process import RunOptions, run_watched

    def runner(config: RunConfig, name: str, seconds: float) -> tuple[Any, str | None]:
        options = RunOptions(who=who, user_code_here=False, history=str(store.path),
                             name=name, source=source)
        expired = threading.Event()
        bound = threading.Timer(max(seconds, 0.0), expired.set)  # the sweep's time left
        bound.daemon = True
        bound.start()
        try:
            result = run_watched(GenRunHandle(config, options=options),
                                 cancel=_Either(cancel, expired))  # type: ignore[arg-type]
        finally:
            bound.cancel()
        return result, store.save(result, name=name, source=source)
    return runner


class _Either:
    """Set once either is: the sweep was stopped, or its time bound passed — what
    ``run_watched`` polls to stop a point."""

    def __init__(self, stop: threading.Event, expired: threading.Event) -> None:
        self.stop, self.expired = stop, expired

    def is_set(self) -> bool:
        return self.stop.is_set() or self.expired.is_set()


def _at(base: RunConfig, *, rate: float | None = None, clients: int | None = None,
        seconds: float | None = None, requests: int | None = None) -> RunConfig:
    """``base`` at one load, measured for ``seconds`` or ``requests``."""
    return dataclasses.replace(base, rate=rate, concurrency=None if rate else clients,
                               arrival="poisson", burstiness=1.0,
                               requests=requests,
                               duration_s=None if requests else round(seconds or 0.0, 1))


def run_sweep(plan: SweepPlan, runner: Runner, *, predict: Predictor | None = None,
              cancel: threading.Event | None = None,
              on_point: Callable[[SweepResult], None] | None = None) -> SweepResult:
    """Measure the sweep ``plan`` describes, a point at a time with ``runner``; ``predict``
    (``simulation.sweep_prediction.predict_points``) sets the simulator's prediction beside
    each point, fitted from the floor's and the ceiling's runs;
    ``cancel`` stops it between points (the points measured are kept), ``on_point`` sees the
    result after each point."""
    plan = plan.checked()
    result = SweepResult(uuid.uuid4().hex[:6], plan)
    t0 = time.monotonic()
    cancel = cancel or threading.Event()
    runs: list[Any] = []

    def left() -> float:
        return plan.max_duration_s - (time.monotonic() - t0)

    def measure(label: str, config: RunConfig) -> SweepPoint | None:
        if cancel.is_set():
            result.stopped = result.stopped or "stopped before " + label
            return None
        seconds = float(config.duration_s or MIN_POINT_S)
        if seconds > left():
            result.skipped.append(f"{label} (its {seconds:.0f} s would not fit the "
                                  f"{max(left(), 0):.0f} s left of --max-duration)")
            return None
        n = len(result.points) + 1
        run, run_id = runner(config, f"sweep-{result.sweep_id} {n}: {label}", left())
        if run.status == "stopped" and not cancel.is_set():
            result.stopped = (f"{label} reached the --max-duration bound and was stopped "
                              "there (its requests so far are kept)")
        runs.append(run)
        point = point_of(run, label, run_id)
        result.points.append(point)
        result.predicted.append(None)
        result.elapsed_s = time.monotonic() - t0
        if on_point is not None:
            on_point(result)
        return point

    # the closed loops measure requests, not seconds: one client of a slow server would
    # otherwise finish a handful in a point's seconds, too few for a p99
    floor = measure("1 client", _at(plan.base, clients=1, requests=POINT_REQUESTS))
    ceiling_n = plan.ceiling()
    ceiling = measure(f"{ceiling_n} clients",
                      _at(plan.base, clients=ceiling_n,
                          requests=max(POINT_REQUESTS, 4 * ceiling_n)))
    between = _between(plan, floor, ceiling)
    for label, config in between:
        point = measure(label, config)
        if point is None:
            continue
        if point.saturated:
            rest = between[between.index((label, config)) + 1:]
            result.stopped = (f"past saturation at {label}: it served {point.served_rps:.2f} "
                              f"of the {point.offered_rps or 0:.2f} requests/s offered"
                              + (f"; {len(rest)} heavier point(s) not run" if rest else ""))
            break
    if plan.simulate and predict is not None and runs:
        result.fit, result.predicted = predict(runs[:2], result.points)
    result.elapsed_s = time.monotonic() - t0
    return result


def _between(plan: SweepPlan, floor: SweepPoint | None, ceiling: SweepPoint | None
             ) -> list[tuple[str, RunConfig]]:
    """The points between floor and ceiling: those chosen, else automatic rates, shares of
    what the ceiling served (``AUTO_FRACTIONS``: the last ones close to it, where the answer
    usually lies)."""
    base = plan.base
    if plan.concurrencies:
        return [(f"{c} client{'s' * (c > 1)}",
                 _at(base, clients=c, requests=max(POINT_REQUESTS, 4 * c)))
                for c in sorted(plan.concurrencies)]
    rates = sorted(plan.rates)
    if not rates:
        if floor is None or ceiling is None or not ceiling.served_rps:
            return []
        high = max(ceiling.served_rps, floor.served_rps)
        fractions = AUTO_FRACTIONS[-plan.points:] if plan.points <= len(AUTO_FRACTIONS) else \
            [i / plan.points for i in range(1, plan.points + 1)]
        rates = sorted({round(f * high, 3) for f in fractions})
    return [(f"rate {r:.2f}/s", _at(base, rate=r, seconds=max(plan.point_s, MIN_POINT_S,
                                                               POINT_REQUESTS / r)))
            for r in rates]


__all__ = ["AUTO_FRACTIONS", "SweepPlan", "SweepResult", "objectives_text", "run_sweep",
           "saved_runner"]
