"""Figures and tables of the Optimisation Lab: pure functions from A/B results to Plotly.

Same conventions as ``latency.figures.plots`` (component colours, ms axes, "no data yet"): an A/B is
read by putting each arm's bar next to the other's for the same statistic, so the segment
that shrank — or did not — is visible at a glance.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from latency.core import fmt
from latency.figures.compare_plots import runs_bars_figure
from latency.figures.plots import (
    SERIES_COLOURS,
    _base_layout,
    _figure,
    empty_figure,
    percentile_spectrum_figure,
)


def ab_bars_figure(makeup_a: Mapping[str, Mapping[str, float]] | None,
                   makeup_b: Mapping[str, Mapping[str, float]] | None,
                   labels: tuple[str, str] = ("A", "B"), title: str | None = None,
                   names: Mapping[str, str] | None = None) -> go.Figure:
    """Stacked component bars, A and B side by side for the mean, p50 and p99 requests: the
    Compare page's grouped bars with two runs (``ArmStats.makeup_ms`` has the same shape).
    ``names``: a component's name as shown where it is not its key (``runs_bars_figure``)."""
    if not makeup_a or not makeup_b:
        return empty_figure(title)
    return runs_bars_figure({labels[0]: makeup_a, labels[1]: makeup_b}, title, names)


def ab_spectrum_figure(quantiles_a: Sequence[float] | None, quantiles_b: Sequence[float] | None,
                       labels: tuple[str, str] = ("A", "B"),
                       title: str | None = None,
                       requests: tuple[int, int] | None = None) -> go.Figure:
    """Both arms' latency against percentile (1/(1−p) axis): where along the distribution
    the variant helps — the body, the tail, or neither. Each line stops where its arm's
    ``requests`` end."""
    counts = dict(zip(labels, requests)) if requests else None
    return percentile_spectrum_figure({labels[0]: quantiles_a, labels[1]: quantiles_b}, title,
                                      counts=counts)


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
                     text=[fmt.ms(float(d[k])) for k in keys], textposition="outside",
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


def accuracy_table(arms: Sequence[Any]) -> list[dict[str, str]]:
    """``accuracy_rows`` turned for reading: one row per measure, one column per arm, every
    cell text ("—" where a measure does not apply, never a raw None), so the table fits the
    page's width instead of running ten columns off its right edge."""
    rows = accuracy_rows(arms)
    shown = {
        "levers": str,
        "top-1 agreement": lambda v: f"{100 * v:.1f} %",
        "max |Δ prob|": lambda v: f"{v:.4f}",
        "checked on": str,
        "parameters": lambda v: f"{int(v):,}",
        "first call (ms)": fmt.ms,
        "steady call (ms)": fmt.ms,
        "compile (s)": lambda v: f"{v:.2f}",
        "backend": str,
    }
    out = []
    for key, form in shown.items():
        cells = {r["arm"]: (fmt.DASH if r.get(key) in (None, "") else form(r[key]))
                 for r in rows}
        if all(c == fmt.DASH for c in cells.values()) and key != "top-1 agreement":
            continue  # a measure no arm has (e.g. compile time without a compile lever)
        out.append({"measure": key, **cells})
    return out
