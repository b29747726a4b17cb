"""Figures for the dashboard: pure functions from snapshot data to ``plotly`` figures.

Every function takes aggregates a Snapshot already holds (bins, quantile curves, per-second
series, component make-up) and never raw samples, so a figure costs a few milliseconds however
long the run is, and can be tested without a browser or Streamlit: build it, inspect
``fig.data`` / ``fig.layout``.

Conventions shared by all charts, so that a reader learns them once:

* each component has one fixed colour (``COMPONENT_COLOURS``, Okabe–Ito, safe for the common
  colour-vision deficiencies) and appears in ``COMPONENTS`` order;
* latency is in milliseconds, with axis titles that say so;
* no data is not an error: an empty input gives a figure that says "no data yet", because a
  live dashboard renders before the first request completes.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from latency.analysis.summary import Summary
from latency.core import fmt
from latency.core.records import COMPONENTS
from latency.figures.text import as_text

#: One colour per component (Okabe & Ito 2008, "Color Universal Design"). The yellow is left
#: out because it vanishes on white; overhead — the measurement's own remainder, not something
#: to optimise — is a neutral grey so it never draws the eye.
COMPONENT_COLOURS: dict[str, str] = {
    "network": "#56B4E9",  # sky blue
    "queue": "#D55E00",  # vermillion: waiting is the usual culprit, so it gets the loud colour
    "preprocess": "#E69F00",  # orange
    "forward": "#0072B2",  # blue
    "postprocess": "#009E73",  # bluish green
    "overhead": "#999999",  # grey
}
#: components whose segments are dark enough for white text
DARK_COMPONENTS = frozenset({"queue", "forward", "prefill", "decode"})

#: colours for lines that are not components (runs compared, p50/p99), also Okabe–Ito.
SERIES_COLOURS: tuple[str, ...] = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
                                   "#56B4E9", "#000000")
#: the histogram's bars: a muted blue-grey, so the percentile and SLO lines stand out on it.
HIST_COLOUR = "#8DA0B8"
PERCENTILE_LINE_COLOUR = "#333333"
SLO_COLOUR = "#C0392B"  # red, dashed: the one line on the histogram that is a target, not data

#: the bars of the stacked chart, in order, with their x-axis labels.
MAKEUP_LABELS: dict[str, str] = {"mean": "mean", "p50": "p50", "p90": "p90",
                                 "p99": "p99 (tail)"}
#: the columns of the summary table: (summary key, column title).
SUMMARY_COLUMNS: tuple[tuple[str, str], ...] = (("mean", "mean"), ("p50", "p50"),
                                                ("p90", "p90"), ("p95", "p95"),
                                                ("p99", "p99"), ("p999", "p99.9"),
                                                ("max", "max"))
#: percentile ticks of the spectrum chart: percentile → label.
SPECTRUM_TICKS: dict[float, str] = {0.5: "50%", 0.9: "90%", 0.99: "99%", 0.999: "99.9%"}

TEMPLATE = "plotly_white"
FONT_SIZE = 14
TITLE_SIZE = 18
EMPTY_TEXT = "no data yet"
#: the histogram's x axis opens where all but this share of the fastest requests lie.
HIST_LEFT_SHARE = 0.001
#: fraction of the histogram's height kept free above the tallest bar for the line labels.
HIST_LABEL_HEADROOM = 0.36
#: to decide which way a line's label reads: a conservative plot width (half of a wide
#: Streamlit page at 1280 px leaves ~460 px between the axes) and one 13 px character's width.
ASSUMED_PLOT_PX = 480.0
LABEL_CHAR_PX = 8.0


# --------------------------------------------------------------------------- helpers


def _figure(data: Sequence[Any], layout: dict[str, Any]) -> go.Figure:
    """``go.Figure(data, layout)`` with ``template="plotly_white"``, in about a millisecond.

    Our traces and layout are validated as usual (a typo still raises), but the registered
    template is attached without re-validating it: validating its ~25 trace-type defaults is
    ~9 ms a figure, most of the cost of every chart. Plotly does the same for its own default
    template (``BaseFigure._initialize_layout_template``); the resulting figure is identical.
    """
    fig = go.Figure(data=list(data), layout=layout)
    lay = fig.layout
    try:
        lay._validate = False
        lay.template = pio.templates[TEMPLATE]
    except Exception:  # pragma: no cover - a future plotly without the switch: slow path
        lay._validate = True
        lay.template = TEMPLATE
    finally:
        lay._validate = True
    return fig


def _base_layout(title: str | None, height: int, top: int = 90) -> dict[str, Any]:
    """Layout every chart shares: white template, legible fonts, margins wide enough that the
    title, the legend above the plot and the axis titles never collide."""
    layout: dict[str, Any] = {
        "font": {"size": FONT_SIZE},
        "height": height,
        "margin": {"l": 80, "r": 40, "t": top if title else max(top - 35, 40), "b": 70},
        "hoverlabel": {"font": {"size": 13}},
        "legend": {"orientation": "h", "x": 0.0, "xanchor": "left", "y": 1.02,
                   "yanchor": "bottom", "font": {"size": 13}},
    }
    if title:
        layout["title"] = {"text": title, "font": {"size": TITLE_SIZE}, "x": 0.0,
                           "xanchor": "left", "xref": "paper", "y": 0.98, "yanchor": "top",
                           "yref": "container"}
    return layout


def empty_figure(title: str | None = None, message: str = EMPTY_TEXT,
                 height: int = 440) -> go.Figure:
    """A figure that says there is nothing to show yet, so a live page keeps its layout (and
    never raises) before the first request completes."""
    layout = _base_layout(title, height)
    layout.update(
        xaxis={"visible": False}, yaxis={"visible": False}, showlegend=False,
        annotations=[{"text": message, "x": 0.5, "y": 0.5, "xref": "paper", "yref": "paper",
                      "showarrow": False, "font": {"size": 18, "color": "#888888"}}])
    return _figure([], layout)


def _log_ticks(lo: float, hi: float) -> dict[str, Any]:
    """Tick values and labels for a log axis from ``lo`` to ``hi`` (ms): the coarsest of
    1 / 1-2-5 / 1…9 / half-steps per decade that still gives at least four ticks, all in the
    normal font (plotly's own minor-digit labels are tiny, and a narrow range gets one tick)."""
    steps = ((1.0,), (1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0, 7.0),
             tuple(float(m) for m in range(1, 10)), tuple(m / 2 for m in range(2, 20)))
    d0, d1 = math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1
    vals: list[float] = []
    for mantissas in steps:
        vals = [v for d in range(d0, d1) for m in mantissas
                if lo <= (v := float(f"{m:g}e{d}")) <= hi]
        if len(vals) >= 4:
            break
    return {"tickmode": "array", "tickvals": vals,
            "ticktext": [fmt.tick(v) for v in vals]}


def _count_ticks(top: float, target: int = 5) -> dict[str, Any]:
    """A count axis from 0 to ``top``: ticks at whole numbers, a 1-2-5 step of at least 1 that
    gives about ``target`` of them (so a few requests read 0, 1, 2, never 0 0 1 1)."""
    raw = max(top / target, 1.0)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1.0, 2.0, 5.0, 10.0) if m * mag >= raw - 1e-9)
    return {"range": [0, top], "tickmode": "linear", "tick0": 0, "dtick": step}


def _with_gaps(values: Sequence[float | None] | None, n: int) -> np.ndarray:
    """A series as float array with NaN where it has None (or is missing/short): plotly draws
    NaN as a gap (``connectgaps`` off), and an array validates far faster than a list."""
    out = np.full(n, np.nan)
    if values is not None:
        vals = [np.nan if v is None else v for v in list(values)[:n]]
        out[: len(vals)] = np.asarray(vals, dtype=np.float64)
    return out


def _percentile_label(key: str) -> str:
    """'p999' → 'p99.9'; other keys unchanged."""
    return {"p999": "p99.9", "p9999": "p99.99"}.get(key, key)


# --------------------------------------------------------------------------- stacked make-up


def component_bars(x: Sequence[Any], values: Mapping[str, Sequence[float]],
                   labels: Mapping[str, str] | None = None,
                   colours: Mapping[str, str] = COMPONENT_COLOURS, min_share: float = 0.08,
                   hover_x: str = "%{x}") -> tuple[list[go.Bar], list[float]]:
    """One stacked bar trace a component (``values``: its ms at each ``x``, in stacking
    order), each segment's share of its bar written inside it, and the bars' totals.

    The share is shown when it is ``min_share`` or more; uniformtext hides the ones that
    would not fit at a readable size. ``labels``: a component's name as shown, where it is not
    its key; ``hover_x``: what the hover calls the bar."""
    named = dict(labels or {})
    totals = [sum(column) for column in zip(*values.values())]
    traces = []
    for c, ys in values.items():
        shares = [y / t if t > 0 else 0.0 for y, t in zip(ys, totals)]
        traces.append(go.Bar(
            name=named.get(c, c), x=x, y=list(ys),
            marker={"color": colours[c], "line": {"width": 0}}, customdata=shares,
            text=[f"{s:.0%}" if s >= min_share else "" for s in shares],
            textposition="inside", insidetextanchor="middle",
            textfont={"size": 12, "color": "#ffffff" if c in DARK_COMPONENTS else "#111111"},
            hovertemplate=f"<b>{named.get(c, c)}</b> · {hover_x}<br>%{{y:.3f}} ms "
                          "(%{customdata:.1%} of the bar)<extra></extra>"))
    return traces, totals


def stacked_components_figure(makeup_ms: Mapping[str, Mapping[str, float]],
                              title: str | None = None,
                              labels: Mapping[str, str] | None = None,
                              components: Sequence[str] = COMPONENTS,
                              y_title: str = "latency (ms)",
                              colours: Mapping[str, str] = COMPONENT_COLOURS) -> go.Figure:
    """Stacked bars of what the mean, p50, p90 and p99 requests are made of.

    This is the chart that answers "why is my tail slow": the p99 bar (built from the requests
    around p99, scaled to p99 — see ``stats.tail_makeup_ms``) shows which component grows in
    the tail compared to the median. All six components are always traces, even when zero, so
    colours and legend entries never move between refreshes. ``labels``: a component's name
    as shown, where it is not its key (``records.component_labels``: an in-process run's
    network is its hand-off). ``components``: the parts stacked, in order (a generation's TTFT
    or gap parts) with their ``colours``.
    """
    points = [k for k in MAKEUP_LABELS if k in makeup_ms and makeup_ms[k]]
    if not points:
        return empty_figure(title)
    cats = [MAKEUP_LABELS[k] for k in points]
    values = {c: [float(makeup_ms[k].get(c, 0.0) or 0.0) for k in points] for c in components}
    traces, totals = component_bars(cats, values, labels, colours)
    top = max(totals) if totals else 0.0
    layout = _base_layout(title, 440)
    layout.update(
        barmode="stack", bargap=0.35,
        uniformtext={"minsize": 11, "mode": "hide"},
        xaxis={"type": "category",
               "categoryorder": "array", "categoryarray": cats},
        yaxis={"title": {"text": y_title}, "rangemode": "tozero",
               # room above the tallest bar for its total
               "range": [0, top * 1.14] if top > 0 else None},
        annotations=[{"x": cat, "y": t, "xref": "x", "yref": "y", "text": f"{fmt.ms(t)} ms",
                      "showarrow": False, "yanchor": "bottom", "yshift": 3,
                      "font": {"size": 14, "color": "#222222"}}
                     for cat, t in zip(cats, totals)],
        legend={**layout["legend"], "traceorder": "normal"},
    )
    return _figure(traces, layout)


# --------------------------------------------------------------------------- histogram


def latency_histogram_figure(edges_ms: Sequence[float] | np.ndarray | None,
                             counts: Sequence[int] | np.ndarray | None,
                             percentiles: Mapping[str, float | None] | None = None,
                             slo_ms: float | None = None,
                             share_within_slo: float | None = None,
                             title: str | None = None, x_title: str = "total latency",
                             counted: str = "requests", slo_label: str = "SLO"
                             ) -> go.Figure:
    """Request counts over the fixed log-spaced bins, with percentile and SLO lines.

    A log x axis because latency spans decades and the tail is the point; the bins are already
    equal-width in log space, so bars keep their true proportions. Only the non-empty range
    (plus one bin each side) is drawn — the fixed bins run from 1 µs to 100 s — and, when a
    few near-zero outliers lie decades below the rest, the axis opens where the fastest 0.1 %
    end (``HIST_LEFT_SHARE``) rather than leave the chart half empty. The y axis counts in
    whole numbers. Each line label sits on its own row in the headroom above the bars, so
    labels never overlap however close p95 and p99 are. ``x_title``, ``counted`` and
    ``slo_label`` name what is counted (a generation's TTFT of requests, or its gaps between
    tokens against the TPOT target).
    """
    edges = np.asarray(edges_ms if edges_ms is not None else [], dtype=np.float64)
    cnt = np.asarray(counts if counts is not None else [], dtype=np.float64)
    if len(cnt) == 0 or len(edges) != len(cnt) + 1 or not np.any(cnt > 0):
        return empty_figure(title)
    nz = np.flatnonzero(cnt > 0)
    lo, hi = max(int(nz[0]) - 1, 0), min(int(nz[-1]) + 1, len(cnt) - 1)
    left, right = edges[lo: hi + 1], edges[lo + 1: hi + 2]
    c = cnt[lo: hi + 1]
    centres = np.sqrt(left * right)
    total = float(cnt.sum())
    custom = np.column_stack([left, right, c / total])
    bars = go.Bar(
        x=centres, y=c, name=counted, showlegend=False,
        # plotly places bars on a log axis in linear data units: so each bar is pinned to
        # its bin exactly, [left, right], while x stays the bin's geometric centre.
        offset=left - centres, width=right - left,
        marker={"color": HIST_COLOUR, "line": {"width": 0}},
        customdata=custom,
        hovertemplate="%{customdata[0]:.3g}–%{customdata[1]:.3g} ms<br>%{y:,} " + counted
                      + " (%{customdata[2]:.1%})<extra></extra>")

    # x range: the trimmed bins to the slowest request — the tail is the point — except that
    # a few near-zero outliers (an exponential service time draws some) would open the axis
    # decades early and leave half the chart empty: when all but the fastest HIST_LEFT_SHARE
    # start more than a decade later, the axis opens there (one bin before). Those bars stay
    # in the figure (autoscale shows them). Then widened to show any line outside.
    start = int(np.searchsorted(np.cumsum(c), HIST_LEFT_SHARE * total, side="right"))
    x_lo, x_hi = float(left[0]), float(right[-1])
    if float(left[max(start - 1, 0)]) > 10 * x_lo:
        x_lo = float(left[max(start - 1, 0)])
    lines: list[tuple[str, float, bool]] = []  # (label, value, is_slo)
    for key, v in (percentiles or {}).items():
        if v is not None and math.isfinite(v) and v > 0:
            lines.append((f"{_percentile_label(key)} {fmt.ms(v)} ms", float(v), False))
    if slo_ms is not None and math.isfinite(slo_ms) and slo_ms > 0:
        text = f"{slo_label} {fmt.tick(slo_ms)} ms"
        if share_within_slo is not None:
            text += f": {share_within_slo:.1%} of the {counted} within"
        lines.append((text, float(slo_ms), True))
    for _, v, _ in lines:
        x_lo, x_hi = min(x_lo, v / 1.25), max(x_hi, v * 1.25)
    log_lo, log_hi = math.log10(x_lo), math.log10(x_hi)

    shapes, annotations = [], []
    # Each label gets its own row in the headroom above the bars, and its line ends at its
    # label, like a flag, so no two labels can overlap however close the values. A label reads
    # rightwards from its line when it fits before the right edge, else leftwards. Within each
    # group the rows go so that a label only reaches towards lines that stop below it
    # (rightwards: left to right, top down; leftwards: right to left). Which group takes the
    # top rows is chosen to minimise the lines that still run behind a label of the other.
    span = log_hi - log_lo

    def extent(text: str, v: float) -> tuple[float, float, bool]:
        frac = (math.log10(v) - log_lo) / span
        width = len(text) * LABEL_CHAR_PX / ASSUMED_PLOT_PX
        rightwards = frac + width <= 1.0
        return (frac, frac + width, True) if rightwards else (frac - width, frac, False)

    ordered = sorted(lines, key=lambda t: t[1])
    ext = {id(t): extent(t[0], t[1]) for t in ordered}
    rightwards = [t for t in ordered if ext[id(t)][2]]
    leftwards = [t for t in ordered if not ext[id(t)][2]][::-1]

    def crossings(rows: list[tuple[str, float, bool]]) -> int:
        """Lines that pass behind a label: those starting above it within its extent."""
        n = 0
        for i, t in enumerate(rows):
            a, b, _ = ext[id(t)]
            n += sum(1 for u in rows[:i] if a < (math.log10(u[1]) - log_lo) / span < b)
        return n

    candidates = (rightwards + leftwards, leftwards + rightwards)
    rows = min(candidates, key=crossings)
    row_h = min(0.085, (HIST_LABEL_HEADROOM - 0.03) / max(len(lines), 1))
    for row, line in enumerate(rows):
        text, v, is_slo = line
        to_left = not ext[id(line)][2]
        y = 0.99 - row * row_h
        shapes.append({
            "type": "line", "xref": "x", "yref": "paper", "x0": v, "x1": v, "y0": 0, "y1": y,
            "layer": "above",
            "line": {"color": SLO_COLOUR if is_slo else PERCENTILE_LINE_COLOUR,
                     "width": 2.5 if is_slo else 1.5, "dash": "dash" if is_slo else "dot"},
            "name": "slo" if is_slo else text.split(" ")[0]})
        annotations.append({
            "x": math.log10(v),  # annotations on a log axis take log10 positions
            "y": y, "xref": "x", "yref": "paper",
            "text": f"<b>{text}</b>" if is_slo else text, "showarrow": False,
            "xanchor": "right" if to_left else "left", "yanchor": "middle",
            "xshift": -3 if to_left else 3,
            "bgcolor": "#ffffff", "borderpad": 1,
            "font": {"size": 13, "color": SLO_COLOUR if is_slo else "#222222"}})

    # counts are whole numbers: integer ticks at least 1 apart (plotly's own step on a range
    # of 0-1.6 is 0.2, which ",d" printed as "0 0 0 1 1 1 1 1")
    y_top = float(c.max()) / (1 - HIST_LABEL_HEADROOM)
    # no legend on this chart: the lines are labelled in place, so less room is needed on top
    layout = _base_layout(title, 440, top=60)
    layout.update(
        bargap=0.0, showlegend=False,
        xaxis={"type": "log", "title": {"text": f"{x_title} (ms, log scale)"},
               "range": [log_lo, log_hi], **_log_ticks(x_lo, x_hi), "showgrid": True},
        yaxis={"title": {"text": counted}, **_count_ticks(y_top), "tickformat": ",d"},
        shapes=shapes, annotations=annotations)
    return _figure([bars], layout)


# --------------------------------------------------------------------------- time series


def timeseries_figure(series: Mapping[str, Sequence[float | None]] | None,
                      title: str | None = None, offered_rps: float | None = None) -> go.Figure:
    """Throughput and p50/p99 per elapsed second, in two panels sharing the time axis.

    In open loop ``offered_rps`` draws the offered rate as a dashed line: served below offered
    is overload, the single most telling sight in a queueing lesson.

    Shown together because the usual story is one in time: latency climbs when throughput hits
    its ceiling. A second without completions has no percentile (None): it is drawn as a gap,
    never interpolated across, so a stall is visible as a stall.
    """
    series = series or {}
    t_s = series.get("t_s")
    if t_s is None or len(t_s) == 0:
        return empty_figure(title, height=520)
    t = np.asarray(t_s, dtype=np.float64)
    thr, p50, p99 = (_with_gaps(series.get(k), len(t))
                     for k in ("throughput_rps", "p50_ms", "p99_ms"))
    hover_ms = "%{y:.2f} ms at %{x:g} s<extra>%{fullData.name}</extra>"
    traces = [
        go.Scatter(x=t, y=thr, name="throughput", mode="lines+markers", xaxis="x", yaxis="y",
                   line={"color": "#444444", "width": 2}, marker={"size": 5},
                   connectgaps=False, showlegend=True,
                   hovertemplate="%{y:.0f} req/s at %{x:g} s<extra></extra>"),
        *([go.Scatter(x=[0, float(t[-1])], y=[offered_rps, offered_rps], name="offered rate",
                      mode="lines", xaxis="x", yaxis="y",
                      line={"color": "#CC79A7", "width": 2, "dash": "dash"},
                      hovertemplate="offered %{y:.0f} req/s<extra></extra>")]
          if offered_rps else []),
        *(go.Scatter(x=t, y=y, name=name, mode="lines+markers", xaxis="x2", yaxis="y2",
                     line={"color": SERIES_COLOURS[i], "width": 2}, marker={"size": 5},
                     connectgaps=False, hovertemplate=hover_ms)
          for i, (name, y) in enumerate((("p50", p50), ("p99", p99)))),
    ]
    # Two panels by hand rather than make_subplots: same result, a fraction of the time.
    layout = _base_layout(title, 520)
    layout.update(
        hovermode="x unified",
        xaxis={"domain": [0, 1], "anchor": "y", "matches": "x2", "showticklabels": False,
               "rangemode": "tozero"},
        yaxis={"domain": [0.56, 1.0], "anchor": "x", "rangemode": "tozero",
               "title": {"text": "throughput (req/s)"}},
        xaxis2={"domain": [0, 1], "anchor": "y2", "title": {"text": "elapsed (s)"},
                "rangemode": "tozero"},
        yaxis2={"domain": [0.0, 0.46], "anchor": "x2", "rangemode": "tozero",
                "title": {"text": "latency (ms)"}},
    )
    return _figure(traces, layout)


# --------------------------------------------------------------------------- spectrum


def spectrum_x(p: np.ndarray | Sequence[float]) -> np.ndarray:
    """The spectrum's x coordinate, 1/(1−p): each further "nine" (90 → 99 → 99.9%) gets the
    same width on a log axis, so the tail is as wide as the body instead of a sliver."""
    return 1.0 / (1.0 - np.asarray(p, dtype=np.float64))


def percentile_spectrum_figure(curves: Mapping[str, np.ndarray | Sequence[float] | None],
                               title: str | None = None, log_y: bool = False,
                               counts: Mapping[str, int] | None = None) -> go.Figure:
    """Latency against percentile, HdrHistogram style, one line per run.

    Each curve is a Snapshot's ``quantiles_ms`` (total latency at q = 0, 0.001, …, 1). The
    point q = 1 (the maximum) has no finite x and is left out; the curve ends at p99.9 — or,
    given the run's request count in ``counts``, where its data ends (p ≤ 1 − 1/n: a run of
    105 requests says nothing about its p99.9, so its line stops before p99.1). Two runs'
    tails compare directly here, which their means and even their p99s hide.
    """
    items = [(name, np.asarray(v, dtype=np.float64)) for name, v in (curves or {}).items()
             if v is not None and len(v) >= 2]
    if not items:
        return empty_figure(title)
    traces = []
    for i, (name, q_ms) in enumerate(items):
        grid = np.linspace(0.0, 1.0, len(q_ms))
        n = (counts or {}).get(name)
        keep = grid < (1.0 - 1.0 / n + 1e-12 if n and n > 1 else 1.0 - 1e-12)
        p, y = grid[keep], q_ms[keep]
        traces.append(go.Scatter(
            x=spectrum_x(p), y=y, name=as_text(name), mode="lines",
            line={"color": SERIES_COLOURS[i % len(SERIES_COLOURS)], "width": 2.5},
            customdata=p * 100,
            hovertemplate="p%{customdata:.1f}: %{y:.3f} ms<extra>%{fullData.name}</extra>"))
    ticks = sorted(SPECTRUM_TICKS)
    layout = _base_layout(title, 440)
    layout.update(
        showlegend=True,
        xaxis={"type": "log", "title": {"text": "percentile"},
               "tickvals": [float(v) for v in spectrum_x(ticks)],
               "ticktext": [SPECTRUM_TICKS[k] for k in ticks],
               "range": [0, math.log10(float(spectrum_x([0.999])[0])) + 0.05],
               "showgrid": True},
        yaxis={"title": {"text": "latency (ms)"}, "type": "log" if log_y else "linear",
               "rangemode": "tozero"},
        hovermode="x unified")
    return _figure(traces, layout)


# --------------------------------------------------------------------------- table


def summary_rows(summary: Summary | None,
                 labels: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Rows for the statistics table: the total, then each component in ``COMPONENTS`` order,
    columns mean, p50, p90, p95, p99, p99.9, max in ms. Numbers stay numbers (rounded to about
    three significant figures) so the table can sort them; a missing value is None.
    ``labels``: a component's name as shown where it is not its key (an in-process run's
    network is its hand-off: ``records.component_labels``)."""
    if summary is None or summary.latency_ms.mean is None:
        return []
    named = dict(labels or {})
    return [{"component": named.get(name, name),
             **{col: fmt.round_ms(summary.component(name).get(key))
                for key, col in SUMMARY_COLUMNS}}
            for name in ("total", *COMPONENTS)]


def summary_markdown(summary: Summary | None,
                     labels: Mapping[str, str] | None = None) -> str:
    """The statistics table as Markdown (ms). A dashboard rerendering it every second for a
    room of viewers pays almost nothing for text, unlike an interactive data grid."""
    rows = summary_rows(summary, labels)
    if not rows:
        return ""
    cols = list(rows[0])
    head = "| " + " | ".join(cols) + " |\n|" + "|".join([":--"] + ["--:"] * (len(cols) - 1))
    body = "\n".join("| " + " | ".join(
        f"**{r[c]}**" if c == "component" and r[c] == "total" else
        (str(r[c]) if r[c] is not None else "—") for c in cols) + " |" for r in rows)
    return f"{head}|\n{body}\n\n(all times in ms)"


def hockey_stick_figure(utilisation: Sequence[float], p50_ms: Sequence[float],
                        p99_ms: Sequence[float], theory_p50_ms: Sequence[float] | None = None,
                        theory_p99_ms: Sequence[float] | None = None,
                        current: tuple[float, float, float] | None = None,
                        slo_ms: float | None = None, title: str | None = None,
                        p99_interval_ms: tuple[Sequence[float], Sequence[float]] | None = None
                        ) -> go.Figure:
    """p50 and p99 against utilisation: flat, then a wall. ``current`` = (ρ, p50, p99) marks
    the slider's setting; dashed lines are the closed form where one applies (M/M/c);
    ``p99_interval_ms`` = (low, high) per point draws the p99's 95 % interval as error bars
    where it is finite (a point too short for an honest interval has none)."""
    if len(utilisation) == 0:
        return empty_figure(title)
    u = list(utilisation)
    error_y = None
    if p99_interval_ms is not None:
        lo, hi = (np.asarray(v, dtype=float) for v in p99_interval_ms)
        p99 = np.asarray(p99_ms, dtype=float)
        error_y = {"type": "data", "symmetric": False, "array": list(hi - p99),
                   "arrayminus": list(p99 - lo), "color": SERIES_COLOURS[1], "thickness": 1,
                   "width": 4}
    traces = [go.Scatter(x=u, y=list(y), name=f"{q} (simulated)", mode="lines+markers",
                         line={"color": SERIES_COLOURS[i], "width": 2}, error_y=errors,
                         hovertemplate=f"ρ=%{{x:.2f}}: {q} %{{y:.1f}} ms<extra></extra>")
              for i, (q, y, errors) in enumerate((("p50", p50_ms, None),
                                                  ("p99", p99_ms, error_y)))]
    if theory_p50_ms is not None and theory_p99_ms is not None:
        for i, (q, y) in enumerate((("p50", theory_p50_ms), ("p99", theory_p99_ms))):
            traces.append(go.Scatter(x=u, y=list(y), name=f"{q} (M/M/c theory)", mode="lines",
                                     line={"color": SERIES_COLOURS[i], "width": 1.5,
                                           "dash": "dot"},
                                     hovertemplate="ρ=%{x:.2f}: %{y:.1f} ms<extra></extra>"))
    if current is not None:
        cu, c50, c99 = current
        traces.append(go.Scatter(x=[cu, cu], y=[c50, c99], name="your setting",
                                 mode="markers", marker={"size": 13, "color": "#000000",
                                                         "symbol": "diamond"},
                                 hovertemplate="your setting: %{y:.1f} ms<extra></extra>"))
    layout = _base_layout(title, 420)
    ys = [float(v) for v in (*p50_ms, *p99_ms, *([slo_ms] if slo_ms else [])) if v and v > 0]
    layout.update(xaxis={"title": {"text": "utilisation ρ (offered load ÷ capacity)"},
                         "range": [0, 1.0]},
                  yaxis={"title": {"text": "total latency (ms, log scale)"}, "type": "log",
                         **_log_ticks(min(ys, default=1.0), max(ys, default=10.0))},
                  hovermode="closest")
    if slo_ms:  # a trace, not a shape: shapes on a log axis take log10 coordinates
        traces.append(go.Scatter(x=[0, 1], y=[slo_ms, slo_ms], name=f"SLO {fmt.ms(slo_ms)} ms",
                                 mode="lines", line={"color": "#555555", "dash": "dashdot",
                                                     "width": 1.5}, hoverinfo="skip"))
    fig = _figure(traces, layout)
    return fig
