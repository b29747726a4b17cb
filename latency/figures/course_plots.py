"""The workshop's figures, as pure functions: the room's guesses, and each lesson's answer from
its measured runs (``latency.workshop.course.answer``'s table)."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from latency.core import fmt
from latency.figures.llm_course_plots import KEYS as LLM_KEYS
from latency.figures.llm_course_plots import llm_answer_figure
from latency.figures.plots import COMPONENT_COLOURS, _base_layout, _figure

GUESS_COLOUR = "#7F8C9D"
P50_COLOUR, P99_COLOUR = "#0072B2", "#D55E00"
#: the targets' lines: colour-blind-safe and apart from the measured p99's vermilion
TARGET_COLOURS = ("#56B4E9", "#009E73", "#CC79A7", "#7F8C9D")
#: bars of one chart spanning this factor or more are drawn on a log axis: on a linear one the
#: shortest is a sliver (as the handout redraws them: latency.figures.handout.VANISH_RATIO)
LOG_BARS_RATIO = 25.0


def guesses_figure(labels: Sequence[str], counts: Sequence[int],
                   answer: str | None = None) -> go.Figure:
    """The room's guesses, one bar per choice or bin; the answer's bar marked once revealed."""
    colours = [COMPONENT_COLOURS.get("forward", "#0072B2") if answer is not None and lab == answer
               else GUESS_COLOUR for lab in labels]
    layout = _base_layout(f"The room's guesses ({sum(counts)})", 300, top=70)
    layout.update(xaxis={"title": None}, yaxis={"title": "guesses", "rangemode": "tozero",
                                                "dtick": 1 if max(counts or [0]) < 10 else None},
                  showlegend=False)
    return _figure([go.Bar(x=list(labels), y=list(counts), marker_color=colours,
                           hovertemplate="%{x}: %{y}<extra></extra>")], layout)


def answer_figure(key: str, table: Sequence[Mapping[str, Any]],
                  components: Mapping[str, float] | None = None,
                  details: Sequence[Mapping[str, Any]] = (),
                  labels: Mapping[str, str] | None = None) -> go.Figure:
    """Each lesson's chart: the component means (where), latency against load (queueing),
    p50/p99 closed vs open loop (coordinated omission), throughput and p50 against batch size
    with the knee (batching), the measured p99 against load with each application's target
    and the load where the curve crosses it (targets). ``labels``: a component's name as shown
    where it is not its key (an in-process run's network is its hand-off). The lessons on
    serving LLMs draw their own (``llm_course_plots``)."""
    if key in LLM_KEYS:
        return llm_answer_figure(key, table, details)
    runs = [str(r["run"]) for r in table]
    if key == "where" and components:
        layout = _base_layout("Mean time of one request, by component", 340)
        layout.update(yaxis={"title": "ms"}, xaxis={"title": None}, showlegend=False)
        names = list(components)
        shown = [(labels or {}).get(c, c) for c in names]
        return _figure([go.Bar(x=shown, y=[components[c] for c in names],
                               marker_color=[COMPONENT_COLOURS.get(c, GUESS_COLOUR)
                                             for c in names],
                               text=[f"{components[c]:.2f} ms" for c in names],
                               textposition="outside")], layout)
    if key in ("queueing", "batching"):
        title = ("Latency against load: the hockey stick" if key == "queueing"
                 else "Throughput and latency against the batch size")
        layout = _base_layout(title, 380)
        data = [go.Scatter(x=runs, y=[r["p50_ms"] for r in table], name="p50",
                           mode="lines+markers", line={"color": P50_COLOUR}),
                go.Scatter(x=runs, y=[r["p99_ms"] for r in table], name="p99",
                           mode="lines+markers", line={"color": P99_COLOUR})]
        layout.update(xaxis={"title": None, "type": "category"},
                      yaxis={"title": "latency (ms)", "rangemode": "tozero"})
        if key == "batching":
            data.append(go.Bar(x=runs, y=[r["throughput_rps"] for r in table],
                               name="throughput (req/s)", yaxis="y2", opacity=0.35,
                               marker_color=GUESS_COLOUR))
            layout["yaxis2"] = {"title": "throughput (req/s)", "overlaying": "y",
                                "side": "right", "rangemode": "tozero", "showgrid": False}
            layout["margin"]["r"] = 80
        return _figure(data, layout)
    if key == "co":
        layout = _base_layout("The same stall, measured two ways", 340)
        layout.update(barmode="group", yaxis=_bar_axis([v for r in table
                                                        for v in (r["p50_ms"], r["p99_ms"])]),
                      xaxis={"title": None})
        return _figure([go.Bar(x=runs, y=[r[f"{q}_ms"] for r in table], name=q,
                               marker_color=colour,
                               text=[f"{_bar_label(r[f'{q}_ms'])} ms" for r in table],
                               textposition="outside")
                        for q, colour in (("p50", P50_COLOUR), ("p99", P99_COLOUR))], layout)
    if key == "targets":
        layout = _base_layout("The p99 against load, and each application's target", 400)
        ticks = [10, 20, 50, 100, 200, 500, 1000, 2000, 5000]
        layout.update(xaxis={"title": "load (% of the server's capacity)",
                             "range": [0, 100], "ticksuffix": " %"},
                      yaxis={"title": "p99 latency (ms)", "type": "log", "tickvals": ticks,
                             "ticktext": [f"{t:g}" for t in ticks]})
        data = [go.Scatter(x=[100 * r["load"] for r in table], y=[r["p99_ms"] for r in table],
                           name="measured p99", mode="lines+markers",
                           line={"color": P99_COLOUR})]
        for d, colour in zip(details, TARGET_COLOURS):
            data.append(go.Scatter(x=[0, 100], y=[d["slo_ms"]] * 2, mode="lines",
                                   name=f"{d['application']} ≤ {d['slo_ms']:g} ms",
                                   line={"dash": "dash", "width": 1.5, "color": colour}))
            if d["load_pct"] is not None and not d["measured"].startswith("at least"):
                data.append(go.Scatter(x=[d["load_pct"]], y=[d["slo_ms"]], mode="markers",
                                       marker={"size": 11, "symbol": "diamond",
                                               "color": P99_COLOUR},
                                       showlegend=False,
                                       hovertemplate=f"{d['application']}: "
                                                     f"{d['measured']}<extra></extra>"))
        return _figure(data, layout)
    raise KeyError(key)


def _bar_label(v: float) -> str:
    """A bar's value, as short as reads: 4.2, 0.42, 12, 480."""
    return f"{v:.0f}" if abs(v) >= 10 else f"{v:.2g}"


def _bar_axis(values: Sequence[float]) -> dict[str, Any]:
    """The latency axis of a bar chart: linear, or — when the shortest bar would be a sliver
    beside the tallest (the coordinated-omission lesson: p50 5 ms beside a p99 of 480 ms, the
    p50 bars invisible) — logarithmic, with ticks people read (1, 2, 5, 10…) and room above
    the tallest bar for its label; its title says it is a log scale."""
    shown = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not shown or min(shown) <= 0 or max(shown) / min(shown) < LOG_BARS_RATIO:
        return {"title": "latency (ms)", "rangemode": "tozero"}
    lo, hi = min(shown) / 4, max(shown) * 3
    ticks = [m * 10 ** e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
             for m in (1, 2, 5) if lo <= m * 10 ** e <= hi]
    return {"title": "latency (ms, log scale)", "type": "log",
            "range": [math.log10(lo), math.log10(hi)], "tickvals": ticks,
            "ticktext": [fmt.tick(t) for t in ticks]}


__all__ = ["answer_figure", "guesses_figure"]
