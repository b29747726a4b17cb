"""Figures and tables of the Optimisation Lab: pure functions from A/B results to Plotly.

Same conventions as ``latency.plots`` (component colours, ms axes, "no data yet"): an A/B is
read by putting each arm's bar next to the other's for the same statistic, so the segment
that shrank — or did not — is visible at a glance.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from latency.components import COMPONENTS
from latency.plots import (COMPONENT_COLOURS, SERIES_COLOURS, _base_layout, _figure,
                           empty_figure, fmt_ms, percentile_spectrum_figure)

#: the statistics shown side by side, with their axis labels.
AB_POINTS: dict[str, str] = {"mean": "mean", "p50": "p50", "p99": "p99"}


def ab_bars_figure(makeup_a: Mapping[str, Mapping[str, float]] | None,
                   makeup_b: Mapping[str, Mapping[str, float]] | None,
                   labels: tuple[str, str] = ("A", "B"), title: str | None = None) -> go.Figure:
    """Stacked component bars, A and B side by side for the mean, p50 and p99 requests.

    ``makeup_*`` are an arm's component make-up per statistic (``ArmStats.makeup_ms``): the
    mean of each component, and the components of the requests around each percentile scaled
    to it. Every component is always a trace, so colours and legend never move.
    """
    if not makeup_a or not makeup_b:
        return empty_figure(title)
    x: list[list[str]] = [[], []]
    values: dict[str, list[float]] = {c: [] for c in COMPONENTS}
    for point, name in AB_POINTS.items():
        for label, makeup in zip(labels, (makeup_a, makeup_b)):
            x[0].append(name)
            x[1].append(label)
            for c in COMPONENTS:
                values[c].append(float((makeup.get(point) or {}).get(c, 0.0) or 0.0))
    totals = [sum(values[c][i] for c in COMPONENTS) for i in range(len(x[0]))]
    traces = []
    for c in COMPONENTS:
        shares = [v / t if t > 0 else 0.0 for v, t in zip(values[c], totals)]
        traces.append(go.Bar(
            name=c, x=x, y=values[c], marker={"color": COMPONENT_COLOURS[c], "line": {"width": 0}},
            customdata=shares, text=[f"{s:.0%}" if s >= 0.08 else "" for s in shares],
            textposition="inside", insidetextanchor="middle",
            textfont={"size": 12, "color": "#ffffff" if c in ("queue", "forward") else "#111111"},
            hovertemplate=f"<b>{c}</b><br>%{{y:.3f}} ms (%{{customdata:.1%}} of the bar)"
                          "<extra></extra>"))
    layout = _base_layout(title, 460)
    top = max(totals) if totals else 0.0
    layout.update(
        barmode="stack", bargap=0.25, uniformtext={"minsize": 11, "mode": "hide"},
        yaxis={"title": {"text": "latency (ms)"}, "rangemode": "tozero",
               "range": [0, top * 1.14] if top > 0 else None},
        annotations=[{"x": [p, arm], "y": t, "xref": "x", "yref": "y", "text": fmt_ms(t),
                      "showarrow": False, "yanchor": "bottom", "yshift": 3,
                      "font": {"size": 13, "color": "#222222"}}
                     for p, arm, t in zip(x[0], x[1], totals)],
        legend={**layout["legend"], "traceorder": "normal"})
    return _figure(traces, layout)


def ab_spectrum_figure(quantiles_a: Sequence[float] | None, quantiles_b: Sequence[float] | None,
                       labels: tuple[str, str] = ("A", "B"),
                       title: str | None = None) -> go.Figure:
    """Both arms' latency against percentile (1/(1−p) axis): where along the distribution
    the variant helps — the body, the tail, or neither."""
    return percentile_spectrum_figure({labels[0]: quantiles_a, labels[1]: quantiles_b}, title)


def whatif_figure(before: Mapping[str, float], measured_after: Mapping[str, float],
                  simulated: tuple[Mapping[str, float], Mapping[str, float]] | None = None,
                  title: str | None = None) -> go.Figure:
    """Grouped bars: now, predicted from the decomposition, and (when given) the simulated
    pair under load, for mean, p50 and p99."""
    if not before:
        return empty_figure(title)
    keys = ["mean", "p50", "p99"]
    series: list[tuple[str, Mapping[str, float]]] = [("as measured", before),
                                                     ("predicted (decomposition)", measured_after)]
    if simulated is not None:
        series += [("simulated under load, now", simulated[0]),
                   ("simulated under load, faster", simulated[1])]
    traces = [go.Bar(name=name, x=keys, y=[float(d[k]) for k in keys],
                     marker={"color": SERIES_COLOURS[i % len(SERIES_COLOURS)]},
                     text=[fmt_ms(float(d[k])) for k in keys], textposition="outside",
                     hovertemplate=f"{name}<br>%{{x}}: %{{y:.3f}} ms<extra></extra>")
              for i, (name, d) in enumerate(series)]
    layout = _base_layout(title, 380)
    layout.update(barmode="group", yaxis={"title": {"text": "latency (ms)"},
                                          "rangemode": "tozero"}, showlegend=True)
    return _figure(traces, layout)


def accuracy_rows(arms: Sequence[Any]) -> list[dict[str, Any]]:
    """One row per arm: its levers and their measured effect on the answers and the forward
    pass (None where the arm is the baseline itself)."""
    rows = []
    for arm in arms:
        opt = arm.optimization or {}
        rows.append({
            "arm": arm.arm, "levers": arm.label,
            "top-1 agreement": opt.get("agreement", 1.0 if not opt else None),
            "max |Δ prob|": opt.get("max_abs_diff", 0.0 if not opt else None),
            "checked on": f"{opt['inputs']} held-out inputs" if opt.get("inputs") else "—",
            "parameters": opt.get("params_after") or None,
            "first call (ms)": opt.get("first_call_ms"),
            "steady call (ms)": opt.get("steady_ms"),
            "compile (s)": opt.get("compile_s"),
            "backend": "; ".join(lv.get("backend", "") for lv in opt.get("levers", [])) or "—",
        })
    return rows
