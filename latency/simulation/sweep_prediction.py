"""The simulator beside a sweep's measured points: its costs fitted from the sweep's own first
runs (``gen_replay``: a run of our pipeline from its steps, a server of yours from outside),
each point simulated at the load it was measured at — the simulator's fidelity seen on your
own server, point by point.

Which runs: the floor and the ceiling pooled (one client shows each prefill alone, every slot
busy shows the batched decode), else the ceiling alone, else the floor alone — the first that
can be fitted. Seen from outside, a closed loop that keeps every slot busy never shows a
prefill on its own, so a server of yours is fitted from both or from the floor.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from latency.analysis.sweep import SweepPoint, point_of
from latency.core.errors import ConfigError
from latency.simulation.gen_replay import fitted_service, gen_replay
from latency.simulation.gen_step_cost import FitError

#: the calibrations tried, in order: (which runs of the sweep's first two, named)
CALIBRATIONS = (((0, 1), "the floor's and the ceiling's runs, pooled"),
                ((1,), "the ceiling's run"), ((0,), "the floor's run"))


def pooled(runs: list[Any]) -> Any:
    r"""``runs`` (``GenResult``\s) as one run to fit a server's costs over: their requests,
    tokens, steps and reports side by side (a token's request renumbered to its row in the
    pooled rows). Their stamps are one clock (``perf_counter_ns``: the machine's monotonic
    clock, in any process), so the steps stay in the order they ran."""
    if len(runs) == 1:
        return runs[0]
    offsets = np.cumsum([0] + [len(r.rows) for r in runs[:-1]])
    tokens = []
    for r, off in zip(runs, offsets, strict=True):
        t = r.tokens.copy()
        t["request"] += off
        tokens.append(t)
    aligned = all(len(r.reports) == len(r.rows) for r in runs)
    return replace(runs[0], rows=np.concatenate([r.rows for r in runs]),
                   tokens=np.concatenate(tokens), steps=np.concatenate([r.steps for r in runs]),
                   reports=(np.concatenate([r.reports for r in runs]) if aligned
                            else runs[0].reports[:0]))


def predict_points(runs: list[Any], points: list[SweepPoint]
                   ) -> tuple[str, list[SweepPoint | None]]:
    r"""(what was fitted, the predicted point beside each measured one — None where it could
    not be simulated), from the sweep's first measured runs (``GenResult``\s: the floor, the
    ceiling)."""
    why = "no run to fit"
    for which, named in CALIBRATIONS:
        if max(which) >= len(runs):
            continue
        calibration = pooled([runs[i] for i in which])
        try:
            service = fitted_service(calibration)  # fitted once, for every point
            about = gen_replay(calibration, service=service, source=named).about
        except (ConfigError, FitError, ValueError) as exc:
            why = str(exc)
            continue
        out: list[SweepPoint | None] = []
        for point in points:
            load = ({"rate": point.value, "arrival": "poisson"} if point.load == "rate"
                    else {"clients": int(point.value)})
            try:
                sim = gen_replay(calibration, service=service, source=named, **load).run()
            except (ConfigError, FitError, ValueError):
                out.append(None)
                continue
            out.append(point_of(sim, point.label))
        return f"fitted from {named}: {about.get('fit', '')}", out
    return f"not fitted: {why}", [None] * len(points)


__all__ = ["CALIBRATIONS", "pooled", "predict_points"]
