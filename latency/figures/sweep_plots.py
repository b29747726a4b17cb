"""A sweep's curves: the generation simulator's rate and goodput figures
(``latency.figures.gen_plots``) drawn through the points a sweep measured, with the
simulator's prediction at each point beside them — fidelity seen point by point."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import plotly.graph_objects as go

from latency.analysis.sweep import SweepPoint, answer_loads
from latency.figures import gen_plots
from latency.figures.plots import _figure, empty_figure
from latency.simulation.gen_capacity import BestRate, GenCurve, GenPoint

#: the prediction's colour: beside the measurement, never mistaken for it
PREDICTED_COLOUR = "#8c8c8c"


def curve_of(points: Sequence[SweepPoint | None]) -> GenCurve:
    """The loads of the answer (``_loads``) as a curve by rising rate."""
    return GenCurve(tuple(_gen_point(p) for p in sorted(_loads(points), key=lambda p: p.rate)),
                    0.0)


def sweep_rate_figure(result: Any, title: str | None = None) -> go.Figure:
    """TTFT (top) and TPOT (bottom) p50 and p99 against the load, measured; the simulator's
    p99 at each point dashed grey; the objectives dashed."""
    base = result.plan.base
    slo = base.objectives
    fig = gen_plots.gen_rate_figure(curve_of(result.points), slo.ttft_ms, slo.tpot_ms, title)
    predicted = _predicted(result)
    for axis, what, unit in (("y", "ttft_p99_ms", "TTFT"), ("y2", "tpot_p99_ms", "TPOT")):
        if predicted.points:
            fig.add_trace(_predicted_line(predicted, what, f"{unit} p99 simulated",
                                          "%{y:.2f} ms", axis))
    return fig


def sweep_goodput_figure(result: Any, title: str | None = None) -> go.Figure:
    """Served and goodput against the load, the highest load meeting the objectives
    starred; the simulator's goodput dashed grey."""
    answer = result.answer
    best = (BestRate(answer.best.rate, answer.attainment, _gen_point(answer.best))
            if answer.best is not None else None)
    fig = gen_plots.goodput_figure(curve_of(result.points), best, title)
    predicted = _predicted(result)
    if predicted.points and predicted.points[0].goodput_rps is not None:
        fig.add_trace(_predicted_line(predicted, "goodput_rps", "goodput simulated",
                                      "%{y:.2f}/s"))
    return fig


def _predicted_line(predicted: GenCurve, column: str, name: str, value: str,
                    axis: str = "y") -> go.Scatter:
    """The simulator's ``column`` at each measured point, dashed grey beside the measured."""
    return go.Scatter(x=predicted.column("rate"), y=predicted.column(column), yaxis=axis,
                      name=name, mode="lines+markers",
                      line={"color": PREDICTED_COLOUR, "dash": "dash", "width": 1.5},
                      marker={"symbol": "circle-open"},
                      hovertemplate=f"%{{x:.2f}} req/s: {name} {value}<extra></extra>")


def sweep_itl_e2e_figure(result: Any, title: str | None = None) -> go.Figure:
    """ITL (each gap between tokens) and E2E (the whole request) p50 and p99 against the
    load, measured; the E2E objective dashed where one is set."""
    points = sorted(_loads(result.points), key=lambda p: p.rate)
    if not points:
        return empty_figure(title)
    traces, layout = gen_plots.quantile_panels(
        [p.rate for p in points], lambda key: [getattr(p, key) for p in points],
        (("itl", "ITL", None), ("e2e", "E2E", result.plan.base.objectives.e2e_ms)), title, 480)
    return _figure(traces, layout)


def _predicted(result: Any) -> GenCurve:
    """The prediction at each measured point of the curve, placed at that point's rate (the
    x the reader compares it at)."""
    on_curve = {id(p) for p in _loads(result.points)}
    pairs = sorted(((p, q) for p, q in zip(result.points, result.predicted)
                    if q is not None and id(p) in on_curve), key=lambda pq: pq[0].rate)
    return GenCurve(tuple(replace(_gen_point(q), rate=p.rate) for p, q in pairs), 0.0)


def _loads(points: Sequence[SweepPoint | None]) -> list[SweepPoint]:
    """The loads of the answer (``analysis.sweep.answer_loads``)."""
    return answer_loads([p for p in points if p is not None])


def _gen_point(p: SweepPoint) -> GenPoint:
    return GenPoint(rate=p.rate, asked=p.value, ttft_p50_ms=p.ttft_p50_ms or 0.0,
                    ttft_p99_ms=p.ttft_p99_ms or 0.0, tpot_p50_ms=p.tpot_p50_ms or 0.0,
                    tpot_p99_ms=p.tpot_p99_ms or 0.0, throughput_rps=p.served_rps,
                    tokens_per_s=p.tokens_per_s or 0.0, goodput_rps=p.goodput_rps,
                    met_share=p.met_share)
