"""The charts of the course's lessons on serving LLMs (``latency.workshop.llm_course``), as
pure functions of each answer's table: TTFT's parts against load, the short prompts' gaps over
time with and without chunked prefill, static against continuous batching, and goodput
measured beside simulated."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from latency.core.gen_records import TTFT_COMPONENTS
from latency.figures.gen_plots import GEN_COLOURS, part_label
from latency.figures.plots import SERIES_COLOURS, _base_layout, _figure

#: the lessons' keys this module draws
KEYS = ("ttft", "stutter", "static", "goodput", "decode40")


def llm_answer_figure(key: str, table: Sequence[Mapping[str, Any]],
                      details: Sequence[Mapping[str, Any]] = ()) -> go.Figure:
    if key in ("ttft", "decode40"):
        return _ttft_parts(key, table)
    if key == "stutter":
        return _gaps_over_time(table)
    if key == "static":
        return _batching(table)
    if key == "goodput":
        return _goodput(table, details)
    raise KeyError(key)


def _ttft_parts(key: str, table: Sequence[Mapping[str, Any]]) -> go.Figure:
    """TTFT p99 as its parts, one bar a run (the parts sum to the bar: scaled to the p99)."""
    if key == "ttft":
        runs = [str(r["run"]) for r in table]
        title = "TTFT p99 and its parts, as the load rises"
    else:
        runs = [f"{r['run']}<br>TPOT p50 {r['tpot_p50_ms']:.2f} ms" for r in table]
        title = "TTFT p99 and its parts, the decode step as it is and faster"
    shown = [c for c in TTFT_COMPONENTS if any(r["parts"].get(c, 0.0) > 0 for r in table)]
    bars = [go.Bar(x=runs, y=[r["parts"].get(c, 0.0) for r in table], name=part_label(c),
                   marker_color=GEN_COLOURS.get(c, "#999999"),
                   hovertemplate=f"{part_label(c)}: %{{y:.2f}} ms<extra></extra>")
            for c in shown]
    layout = _base_layout(title, 400)
    layout.update(barmode="stack", xaxis={"title": None, "type": "category"},
                  yaxis={"title": "ms (at TTFT's p99)", "rangemode": "tozero"})
    # the prefill is a few ms under a queue of hundreds: a segment no eye finds on a linear
    # axis, so each bar says it in words above itself
    layout["annotations"] = [
        {"x": run, "y": sum(r["parts"].get(c, 0.0) for c in shown), "yshift": 12,
         "text": f"prefill {r['parts'].get('prefill', 0.0):.1f} ms", "showarrow": False,
         "font": {"size": 12}} for run, r in zip(runs, table)]
    return _figure(bars, layout)


def _gaps_over_time(table: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Every gap between two tokens of the short prompts' streams, at the time it ended: the
    long prompt's whole prefill is a spike in each of them; chunked, the spikes shrink."""
    traces = [go.Scatter(x=r["gaps_at_s"], y=r["gaps_ms"], mode="markers", name=str(r["run"]),
                         marker={"size": 5, "color": SERIES_COLOURS[i % len(SERIES_COLOURS)],
                                 "opacity": 0.7},
                         hovertemplate="%{x:.3f} s: a gap of %{y:.1f} ms<extra></extra>")
              for i, r in enumerate(table)]
    layout = _base_layout("The short prompts' gaps between tokens, over the run", 400)
    layout.update(xaxis={"title": "time since the first request (s)"},
                  yaxis={"title": "gap between two tokens (ms)", "rangemode": "tozero"})
    return _figure(traces, layout)


def _batching(table: Sequence[Mapping[str, Any]]) -> go.Figure:
    runs = [str(r["run"]) for r in table]
    data = [go.Bar(x=runs, y=[r["tokens_per_s"] for r in table], name="output tokens/s",
                   marker_color=SERIES_COLOURS[0], text=[f"{r['tokens_per_s']:.0f}/s"
                                                         for r in table],
                   textposition="outside"),
            go.Scatter(x=runs, y=[r["ttft_p50_ms"] for r in table], name="TTFT p50 (ms)",
                       yaxis="y2", mode="markers", marker={"size": 14, "symbol": "diamond",
                                                           "color": SERIES_COLOURS[1]})]
    layout = _base_layout("The same load, batched statically and continuously", 380)
    layout.update(xaxis={"title": None, "type": "category"},
                  yaxis={"title": "output tokens/s", "rangemode": "tozero"},
                  yaxis2={"title": "TTFT p50 (ms)", "overlaying": "y", "side": "right",
                          "rangemode": "tozero", "showgrid": False})
    layout["margin"]["r"] = 80
    return _figure(data, layout)


def _goodput(table: Sequence[Mapping[str, Any]],
             details: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Throughput and goodput against the offered rate: measured points, the simulated
    curve's lines."""
    x = [r["offered_rps"] for r in table]
    traces: list[Any] = []
    if details:
        sx = [d["rate"] for d in details]
        traces += [go.Scatter(x=sx, y=[d["throughput_rps"] for d in details],
                              name="served, simulated", mode="lines",
                              line={"color": SERIES_COLOURS[0], "dash": "dash"}),
                   go.Scatter(x=sx, y=[d["goodput_rps"] for d in details],
                              name="goodput, simulated", mode="lines",
                              line={"color": SERIES_COLOURS[2], "dash": "dash"})]
    traces += [go.Scatter(x=x, y=[r["throughput_rps"] for r in table], name="served, measured",
                          mode="markers", marker={"size": 11, "color": SERIES_COLOURS[0]}),
               go.Scatter(x=x, y=[r["goodput_rps"] for r in table],
                          name="goodput, measured", mode="markers",
                          marker={"size": 11, "color": SERIES_COLOURS[2], "symbol": "diamond"})]
    top = max([r["throughput_rps"] for r in table] + [d["throughput_rps"] for d in details])
    for key, name, dash in (("best_measured_rps", "highest rate meeting the targets, measured",
                             "solid"),
                            ("best_simulated_rps", "… simulated", "dot")):
        at = table[0].get(key) if table else None
        if at is not None:
            traces.append(go.Scatter(x=[at, at], y=[0, top], mode="lines", name=name,
                                     line={"color": "#000000", "dash": dash, "width": 1.5},
                                     hovertemplate=f"{name}: {at:.1f} req/s<extra></extra>"))
    layout = _base_layout("Throughput keeps climbing; goodput turns", 420)
    layout.update(xaxis={"title": "arrival rate (requests/s)", "rangemode": "tozero"},
                  yaxis={"title": "requests/s", "rangemode": "tozero"}, hovermode="closest")
    return _figure(traces, layout)


__all__ = ["KEYS", "llm_answer_figure"]
