"""Figures and tables of the Compare Runs page: pure functions from stored aggregates to Plotly.

Same conventions as ``latency.figures.plots`` (component colours, ms axes, "no data yet"). Runs are
named by letter — A is the baseline — in every chart and table of the page, so a reader
matches a bar to a curve to a table column without reading ids twice.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from latency.analysis.compare import diff_rows
from latency.analysis.summary import Summary
from latency.core import fmt
from latency.core.gen_records import TTFT_COMPONENTS
from latency.core.records import COMPONENTS
from latency.figures.gen_plots import GEN_COLOURS, part_label
from latency.figures.plots import (
    COMPONENT_COLOURS,
    SERIES_COLOURS,
    _base_layout,
    _figure,
    component_bars,
    empty_figure,
    spectrum_x,
)
from latency.figures.text import as_text, legend_text

#: the statistics whose make-up is drawn side by side, with their axis labels.
BAR_POINTS: dict[str, str] = {"mean": "mean", "p50": "p50", "p99": "p99 (tail)"}
#: a generation's: the mean request's time to first token, and the requests' around its p99
TTFT_POINTS: dict[str, str] = {"mean": "mean", "p99": "around p99"}


def letters(n: int) -> list[str]:
    """A, B, … Z, then R26, R27, … (A is the baseline): the runs' names on the Compare page
    and in ``python -m latency compare`` alike."""
    return [chr(ord("A") + i) if i < 26 else f"R{i}" for i in range(n)]


def runs_bars_figure(makeups: Mapping[str, Mapping[str, Mapping[str, float]] | None],
                     title: str | None = None,
                     labels: Mapping[str, str] | None = None,
                     components: Sequence[str] = COMPONENTS,
                     colours: Mapping[str, str] = COMPONENT_COLOURS,
                     points: Mapping[str, str] = BAR_POINTS,
                     y_title: str = "latency (ms)") -> go.Figure:
    """Stacked component bars of several runs side by side, grouped by statistic (mean, p50,
    p99): within each group one bar per run, in the order given, labelled by its key.

    ``makeups`` maps a short run label to its make-up (``StoredRun.makeup_ms``: the mean of
    each component, and the components of the requests around each percentile, scaled to
    it). All six components are always traces so colours and legend never move.
    ``labels``: a component's name as shown where it is not its key (an in-process run's
    network is its hand-off: ``records.component_labels``). ``components``, ``colours``,
    ``points`` (a statistic's key → its group's label) and ``y_title``: what is stacked
    where it is not a one-shot run's components (``runs_ttft_parts_figure``).
    """
    runs = [(k, m) for k, m in makeups.items() if m]
    shown = [p for p in points if any(m.get(p) for _, m in runs)]
    if not runs or not shown:
        return empty_figure(title)
    x: list[list[str]] = [[], []]
    values: dict[str, list[float]] = {c: [] for c in components}
    for p in shown:
        for label, makeup in runs:
            x[0].append(points[p])
            x[1].append(as_text(label))
            for c in components:
                values[c].append(float((makeup.get(p) or {}).get(c, 0.0) or 0.0))
    traces: list[Any]
    traces, totals = component_bars(x, values, labels, colours, min_share=0.1,
                                    hover_x="run %{x}")
    traces.append(go.Scatter(  # each bar's total, written above it
        x=x, y=totals, mode="text", text=[fmt.ms(t) for t in totals], textposition="top center",
        textfont={"size": 13, "color": "#222222"}, showlegend=False, hoverinfo="skip",
        name="total"))
    top = max(totals)
    layout = _base_layout(title, 460)
    layout.update(
        barmode="stack", bargap=0.2, uniformtext={"minsize": 11, "mode": "hide"},
        xaxis={"type": "multicategory", "tickfont": {"size": 13}},
        yaxis={"title": {"text": y_title}, "rangemode": "tozero",
               "range": [0, top * 1.15] if top > 0 else None},
        legend={**layout["legend"], "traceorder": "normal"})
    return _figure(traces, layout)


def runs_ttft_parts_figure(parts: Mapping[str, Mapping[str, Mapping[str, float]]],
                           title: str | None = None) -> go.Figure:
    """Generation runs side by side (Compare Runs): each run's time to first token as its
    parts — the mean request's and the requests' around TTFT's p99 — stacked, one bar a run,
    grouped by statistic, in the generation charts' colours. ``parts``: a run's letter →
    {"mean": {part: ms}, "p99": {part: ms}} (``GenSummary.ttft_mean_parts_ms`` and
    ``ttft_p99_parts_ms``)."""
    return runs_bars_figure(parts, title, {c: part_label(c) for c in TTFT_COMPONENTS},
                            TTFT_COMPONENTS, GEN_COLOURS, TTFT_POINTS,
                            "time to first token (ms)")


#: percentile ticks of the spectrum, as far as the longest run reaches.
SPECTRUM_TICKS: dict[float, str] = {0.5: "50%", 0.9: "90%", 0.99: "99%", 0.999: "99.9%",
                                    0.9999: "99.99%", 0.99999: "99.999%"}


def runs_spectrum_figure(curves: Mapping[str, tuple[Sequence[float], Sequence[float]] | None],
                         log_y: bool = False, title: str | None = None,
                         y_title: str = "total latency") -> go.Figure:
    """Latency against percentile on the 1/(1−p) axis, one line per run — HdrHistogram's
    percentile plot: each further nine (90 → 99 → 99.9 %) gets the same width, so tails
    compare as plainly as medians.

    ``curves`` maps a run's label to (p, ms) (``StoredRun.spectrum``), which stops at
    p = 1 − 1/n: a run of 1,000 requests has no p99.99, and its line ends where its data does
    instead of drawing the maximum as if it were a percentile. A marker shows each run's p99.
    ``y_title``: what the times are (a generation's: its TTFT, or its gaps between tokens).
    """
    items = [(name, np.asarray(c[0], dtype=np.float64), np.asarray(c[1], dtype=np.float64))
             for name, c in curves.items() if c is not None and len(c[0]) >= 2]
    if not items:
        return empty_figure(title)
    traces: list[Any] = []
    for i, (name, p, ms) in enumerate(items):
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
        traces.append(go.Scatter(
            x=spectrum_x(p), y=ms, name=legend_text(name), mode="lines", legendgroup=str(i),
            line={"color": colour, "width": 2.5}, customdata=p * 100,
            hovertemplate="p%{customdata:.3g}: %{y:.3f} ms<extra>%{fullData.name}</extra>"))
        if p[-1] >= 0.99:
            p99 = float(np.interp(0.99, p, ms))
            traces.append(go.Scatter(
                x=[100.0], y=[p99], mode="markers", legendgroup=str(i), showlegend=False,
                marker={"color": colour, "size": 9, "line": {"color": "#ffffff", "width": 1}},
                hovertemplate=f"{as_text(name)}<br>p99: {fmt.ms(p99)} ms<extra></extra>"))
    reach = max(float(p[-1]) for _, p, _ in items)
    ticks = [t for t in SPECTRUM_TICKS if t <= reach + 1e-12] or [0.5]
    x_max = float(spectrum_x([reach])[0])
    layout = _base_layout(title, 440)
    layout.update(
        showlegend=True, hovermode="x unified",
        xaxis={"type": "log", "title": {"text": "percentile (axis: 1/(1−p))"},
               "tickvals": [float(v) for v in spectrum_x(ticks)],
               "ticktext": [SPECTRUM_TICKS[t] for t in ticks],
               "range": [0, np.log10(x_max) + 0.05], "showgrid": True},
        yaxis={"title": {"text": f"{y_title} (ms" + (", log scale)" if log_y else ")")},
               "type": "log" if log_y else "linear", "rangemode": "tozero"})
    return _figure(traces, layout)


def diff_table(labels: Sequence[str], summaries: Sequence[Summary]
               ) -> list[dict[str, Any]]:
    """Rows for the diff table: component, statistic, each run's value (ms), then Δ (ms) and
    Δ% of each later run against the first. Numbers stay numbers (rounded to ~3 significant
    figures) so the table sorts; a missing value is None."""
    out = []
    for r in diff_rows(summaries):
        row: dict[str, Any] = {"component": r["component"], "stat": r["stat"]}
        for label, v in zip(labels, r["values"]):
            row[f"{label} (ms)"] = fmt.round_ms(v)
        for label, d, p in zip(labels[1:], r["delta_ms"], r["delta_pct"]):
            row[f"Δ {label} (ms)"] = fmt.round_ms(d)
            row[f"Δ% {label}"] = None if p is None else round(p, 1)
        row["_beyond_noise"] = r["beyond_noise"]  # for the colouring; not a column shown
        out.append(row)
    return out
