"""The figures of a generation run (measured or simulated), as pure functions of its view
(``analysis.gen_view``) and of the simulator's curves (``simulation.gen_capacity``).

They keep the one-shot charts' conventions (``plots``): one colour per component, in the order
they happen; milliseconds; a figure that says "no data yet" rather than raising. The
waterfall is the one chart without a one-shot twin: a row a request, its queue, prefill and
decode as spans of its own stamps and each token a tick — the picture in which a long
prompt's prefill freezes every other stream (the ticks marked as stalls), and chunked prefill
removes the freeze.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from latency.analysis.gen_view import GenView, WaterfallRow
from latency.core import fmt
from latency.core.gen_records import GAP_COMPONENTS, TTFT_COMPONENTS
from latency.figures.plots import (
    COMPONENT_COLOURS,
    SERIES_COLOURS,
    SLO_COLOUR,
    _base_layout,
    _figure,
    _log_ticks,
    empty_figure,
    latency_histogram_figure,
    stacked_components_figure,
)
from latency.simulation.gen_capacity import BestRate, GenCurve, GenPoint

#: a generation's parts' colours (``gen_records.GEN_COMPONENTS``): the one-shot palette where
#: the part is its twin (network, queue; tokenize as preprocessing, prefill as the forward
#: pass), the decode call green, a stall — waiting for another request's prefill — reddish
#: purple; detokenizing a darker orange than tokenizing, handing a token over a light grey
GEN_COLOURS: dict[str, str] = {
    "overhead": COMPONENT_COLOURS["overhead"], "network": COMPONENT_COLOURS["network"],
    "queue": COMPONENT_COLOURS["queue"], "tokenize": COMPONENT_COLOURS["preprocess"],
    "prefill": COMPONENT_COLOURS["forward"], "prefill_stall": "#CC79A7",
    "decode": "#009E73", "stall": "#CC79A7", "detokenize": "#B07A00", "delivery": "#BBBBBB",
}
#: a generation part's name as the charts show it (the key where absent)
PART_LABELS: dict[str, str] = {"overhead": "send lag", "prefill_stall": "prefill stall",
                               "stall": "stall (others' prefill)"}
#: the waterfall's spans: (name, colour)
SPANS: tuple[tuple[str, str], ...] = (("queue", GEN_COLOURS["queue"]),
                                      ("prefill", GEN_COLOURS["prefill"]),
                                      ("decode", GEN_COLOURS["decode"]))
#: the waterfall's height per request row (px)
ROW_PX = 17



def part_label(part: str) -> str:
    return PART_LABELS.get(part, part)


def ttft_bars_figure(view: GenView, title: str | None = None) -> go.Figure:
    """What the mean, p50, p90 and p99 time to first token are made of (each bar: the
    requests around that percentile, scaled to it)."""
    return stacked_components_figure(view.ttft_makeup_ms, title,
                                     {c: part_label(c) for c in TTFT_COMPONENTS},
                                     TTFT_COMPONENTS, "time to first token (ms)", GEN_COLOURS)


def gap_bars_figure(view: GenView, title: str | None = None) -> go.Figure:
    """What the mean, p50, p90 and p99 gaps between tokens are made of."""
    return stacked_components_figure(view.gap_makeup_ms, title,
                                     {c: part_label(c) for c in GAP_COMPONENTS},
                                     GAP_COMPONENTS, "gap between tokens (ms)", GEN_COLOURS)


def ttft_histogram_figure(view: GenView, target_ms: float | None = None,
                          title: str | None = None) -> go.Figure:
    return latency_histogram_figure(view.hist_edges_ms, view.ttft_counts,
                                    view.ttft_percentiles_ms, target_ms, view.ttft_within,
                                    title, x_title="time to first token", counted="requests",
                                    slo_label="TTFT target")


def itl_histogram_figure(view: GenView, tpot_target_ms: float | None = None,
                         title: str | None = None) -> go.Figure:
    """Every gap between tokens; the TPOT target drawn for scale (it bounds a request's mean
    gap, so single gaps may pass it and the request still meet it)."""
    return latency_histogram_figure(view.hist_edges_ms, view.itl_counts,
                                    view.itl_percentiles_ms, tpot_target_ms, view.itl_within,
                                    title, x_title="gap between tokens (ITL)", counted="gaps",
                                    slo_label="TPOT target")


def waterfall_figure(rows: Sequence[WaterfallRow], title: str | None = None) -> go.Figure:
    """The last requests, a row each (the newest at the bottom): queue, prefill and decode as
    spans, each delivered token a tick, each stall (another request's prefill holding the
    step) a red bar as long as it lasted."""
    if not rows:
        return empty_figure(title)
    names = [f"#{r.request} · {r.prompt_tokens}→{r.output_tokens}" for r in rows]
    traces: list[Any] = []
    for span, colour in SPANS:
        starts = [getattr(r, span)[0] for r in rows]
        widths = [max(getattr(r, span)[1] - getattr(r, span)[0], 0.0) for r in rows]
        traces.append(go.Bar(
            name=span, y=names, x=widths, base=starts, orientation="h",
            marker={"color": colour, "line": {"width": 0}}, opacity=0.55,
            hovertemplate=f"<b>{span}</b> %{{y}}<br>%{{base:.1f}} → +%{{x:.1f}} ms"
                          "<extra></extra>"))
    ticks_x = [t for r in rows for t in r.tokens_ms]
    ticks_y = [n for r, n in zip(rows, names) for _ in r.tokens_ms]
    traces.append(go.Scatter(
        name="token delivered", x=ticks_x, y=ticks_y, mode="markers",
        marker={"symbol": "line-ns", "size": 8, "line": {"width": 1, "color": "#333333"}},
        opacity=0.7,
        hovertemplate="token at %{x:.1f} ms<extra></extra>"))
    stalls = [(n, a, b) for r, n in zip(rows, names) for a, b in r.stalls]
    traces.append(go.Bar(
        name="stalled (another request's prefill)", y=[n for n, _, _ in stalls],
        x=[b - a for _, a, b in stalls], base=[a for _, a, _ in stalls], orientation="h",
        marker={"color": SLO_COLOUR, "line": {"width": 0}}, width=0.45,
        hovertemplate="<b>stalled</b> %{x:.1f} ms<extra></extra>"))
    layout = _base_layout(title, max(320, 120 + ROW_PX * len(rows)))
    layout.update(barmode="overlay", bargap=0.25,
                  xaxis={"title": {"text": "ms since the first drawn request arrived"},
                         "rangemode": "tozero", "showgrid": True},
                  yaxis={"type": "category", "autorange": "reversed",
                         "title": {"text": "request · prompt→output tokens"},
                         "tickfont": {"size": 11}},
                  hovermode="closest")
    return _figure(traces, layout)


def scheduler_figure(view: GenView, title: str | None = None) -> go.Figure:
    """The scheduler over time in three panels sharing the time axis: sequences running and
    waiting; KV cache tokens held (with preemptions so far); output tokens served a second."""
    s, tps = view.scheduler, view.tokens_per_s
    if not s.get("t_s"):
        return empty_figure(title)
    traces = [
        go.Scatter(x=s["t_s"], y=s["running"], name="running", mode="lines",
                   line={"color": SERIES_COLOURS[0], "width": 2}, yaxis="y"),
        go.Scatter(x=s["t_s"], y=s["waiting"], name="waiting", mode="lines",
                   line={"color": SERIES_COLOURS[1], "width": 2}, yaxis="y"),
        go.Scatter(x=s["t_s"], y=s["kv_tokens"], name="KV tokens held", mode="lines",
                   line={"color": SERIES_COLOURS[2], "width": 2}, yaxis="y2"),
        go.Scatter(x=s["t_s"], y=s["preemptions"], name="preemptions so far", mode="lines",
                   line={"color": SERIES_COLOURS[3], "width": 1.5, "dash": "dot"}, yaxis="y2"),
    ]
    if tps.get("t_s"):
        traces.append(go.Bar(x=tps["t_s"], y=tps["tokens_per_s"], name="output tokens/s",
                             marker={"color": SERIES_COLOURS[4]}, yaxis="y3", width=0.9))
    layout = _base_layout(title, 520)
    layout.update(
        xaxis={"title": {"text": "seconds since the first step"}, "anchor": "y3",
               "showgrid": True},
        yaxis={"domain": [0.7, 1.0], "title": {"text": "sequences"}, "rangemode": "tozero"},
        yaxis2={"domain": [0.37, 0.63], "title": {"text": "KV tokens"}, "rangemode": "tozero"},
        yaxis3={"domain": [0.0, 0.3], "title": {"text": "tokens/s"}, "rangemode": "tozero"},
        hovermode="x unified", bargap=0.1)
    return _figure(traces, layout)


def quantile_panels(x: Sequence[float], column: Callable[[str], Sequence[float | None]],
                    panels: Sequence[tuple[str, str, float | None]], title: str | None,
                    height: int, log: bool = False) -> tuple[list[Any], dict[str, Any]]:
    """Two panels sharing the arrival-rate axis, each a figure's p50 and p99 (``column`` of
    ``"<what>_p50_ms"``, solid in the top panel, dotted in the bottom one) with its target
    dashed where one is set: the traces, and the layout (log axes when ``log``).
    ``panels``: (what, its name, its target in ms or None), top first."""
    traces: list[Any] = []
    targets: list[Any] = []  # drawn after every panel's lines, so the legend lists them last
    axes: dict[str, Any] = {}
    for axis, domain, (what, unit, target) in zip(("y", "y2"), ([0.55, 1.0], [0.0, 0.45]),
                                                  panels):
        values: list[float] = []
        for i, q in enumerate(("p50", "p99")):
            y = column(f"{what}_{q}_ms")
            values += [v for v in y if v]
            traces.append(go.Scatter(
                x=x, y=y, name=f"{unit} {q}", mode="lines+markers", yaxis=axis,
                line={"color": SERIES_COLOURS[i], "width": 2,
                      "dash": "solid" if axis == "y" else "dot"},
                hovertemplate=f"%{{x:.2f}} req/s: {unit} {q} %{{y:.2f}} ms<extra></extra>"))
        if target:
            values.append(target)
            # a trace, not a shape: shapes on a log axis take log10 coordinates
            targets.append(go.Scatter(
                x=[min(x), max(x)], y=[target, target], name=f"{unit} target "
                f"{fmt.tick(target)} ms", mode="lines", yaxis=axis, hoverinfo="skip",
                line={"color": SLO_COLOUR, "dash": "dash", "width": 1.5}))
        name = "yaxis" if axis == "y" else "yaxis2"
        if log:
            vals = [v for v in values if v and v > 0]
            axes[name] = {"domain": domain, "type": "log", "title": {"text": f"{unit} (ms, log)"},
                          **_log_ticks(min(vals, default=1.0), max(vals, default=10.0))}
        else:
            axes[name] = {"domain": domain, "title": {"text": f"{unit} (ms)"},
                          "rangemode": "tozero"}
    layout = _base_layout(title, height)
    layout.update(xaxis={"title": {"text": "arrival rate (requests/s)"}, "anchor": "y2",
                         "rangemode": "tozero", "showgrid": True},
                  hovermode="closest", **axes)
    return traces + targets, layout


def gen_rate_figure(curve: GenCurve, ttft_target_ms: float | None = None,
                    tpot_target_ms: float | None = None, title: str | None = None) -> go.Figure:
    """TTFT (top) and TPOT (bottom) p50 and p99 against the arrival rate — the hockey stick
    of a generation server — with the targets dashed and the headline's point marked."""
    if not curve.points:
        return empty_figure(title)
    traces, layout = quantile_panels(
        [p.rate for p in curve.points], curve.column,
        (("ttft", "TTFT", ttft_target_ms), ("tpot", "TPOT", tpot_target_ms)), title, 560,
        log=True)
    if curve.marked is not None:
        p = curve.points[curve.marked]
        for axis, ys, legend in (
                ("y", [p.ttft_p50_ms, p.ttft_p99_ms], {"name": "your setting"}),
                ("y2", [p.tpot_p50_ms, p.tpot_p99_ms], {"showlegend": False})):
            traces.append(go.Scatter(
                x=[p.rate] * 2, y=ys, **legend, mode="markers",
                marker={"size": 12, "color": "#000000", "symbol": "diamond"},
                hovertemplate="your setting: %{y:.2f} ms<extra></extra>", yaxis=axis))
    return _figure(traces, layout)


def goodput_figure(curve: GenCurve, best: BestRate | None = None,
                   title: str | None = None) -> go.Figure:
    """Served requests/s and goodput (those meeting every objective) against the arrival
    rate; the highest rate meeting them marked. Goodput peaks and falls where throughput
    keeps climbing: the server is busy serving requests too late to count."""
    if not curve.points:
        return empty_figure(title)
    x = curve.column("rate")
    traces: list[Any] = [
        go.Scatter(x=x, y=x, name="offered", mode="lines",
                   line={"color": "#999999", "dash": "dot", "width": 1}, hoverinfo="skip"),
        go.Scatter(x=x, y=curve.column("throughput_rps"), name="served (throughput)",
                   mode="lines+markers", line={"color": SERIES_COLOURS[0], "width": 2},
                   hovertemplate="%{x:.2f} req/s offered: %{y:.2f} served<extra></extra>"),
    ]
    if curve.points[0].goodput_rps is not None:
        traces.append(go.Scatter(
            x=x, y=curve.column("goodput_rps"), name="goodput (meeting the targets)",
            mode="lines+markers", line={"color": SERIES_COLOURS[2], "width": 2.5},
            hovertemplate="%{x:.2f} req/s offered: goodput %{y:.2f}/s<extra></extra>"))
    if best is not None and best.point is not None:
        traces.append(go.Scatter(
            x=[best.point.rate], y=[best.point.goodput_rps], mode="markers",
            name=f"highest rate meeting them ({best.attainment:.0%})",
            marker={"size": 14, "color": SLO_COLOUR, "symbol": "star"},
            hovertemplate="highest rate meeting the targets: %{x:.2f} req/s<extra></extra>"))
    if curve.marked is not None:
        p = curve.points[curve.marked]
        traces.append(go.Scatter(
            x=[p.rate], y=[p.throughput_rps], name="your setting", mode="markers",
            marker={"size": 12, "color": "#000000", "symbol": "diamond"},
            hovertemplate="your setting: %{y:.2f} served/s<extra></extra>"))
    layout = _base_layout(title, 420)
    layout.update(xaxis={"title": {"text": "arrival rate (requests/s)"}, "rangemode": "tozero",
                         "showgrid": True},
                  yaxis={"title": {"text": "requests/s"}, "rangemode": "tozero"},
                  hovermode="closest")
    return _figure(traces, layout)


def whatif_rows(base: GenPoint, arms: Mapping[str, GenPoint]) -> list[dict[str, str]]:
    """A table of what-ifs against the setting as it is: each figure and its change, and the
    requests refused (a lever can make prompts no longer fit a step)."""
    keys = (("ttft_p50_ms", "TTFT p50 (ms)"), ("ttft_p99_ms", "TTFT p99 (ms)"),
            ("tpot_p50_ms", "TPOT p50 (ms)"), ("tpot_p99_ms", "TPOT p99 (ms)"),
            ("goodput_rps", "goodput (/s)"))

    def row(name: str, arm: GenPoint, against: GenPoint | None) -> dict[str, str]:
        out = {"": name}
        for k, label in keys:
            v = getattr(arm, k)
            shown = fmt.ms(v) if k.endswith("ms") else _rate(v)
            b = getattr(against, k) if against is not None else None
            change = fmt.change(v / b - 1) if v is not None and b else ""
            out[label] = f"{shown} ({change})" if change else shown
        out["refused"] = f"{arm.errors:,}"
        return out

    return [row("as set", base, None), *(row(n, a, base) for n, a in arms.items())]


def _rate(v: float | None) -> str:
    return f"{v:.2f}" if v is not None else fmt.DASH
