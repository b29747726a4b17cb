"""A server of yours, seen from outside and from its own account: the split of each request
between the network, its queue, its prefill, its decode and the rest — each part labelled by
where it came from (reported by the server, derived from what it reported, measured by the
client) — and its /metrics over the run beside the client's own requests in flight.

Pure functions of a ``TargetView``'s split and a run's scraped series
(``analysis.server_split``, ``analysis.server_metrics``), drawn as the other generation
figures are (``gen_plots``' colours and bars).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go

from latency.analysis.server_metrics import COUNTERS, GAUGES
from latency.analysis.server_split import TTFT_SPLIT, ServerSplit
from latency.analysis.snapshot import MAKEUP_POINTS
from latency.analysis.stats import tail_makeup_ms
from latency.core.gen_reports import DERIVED, FROM_REPORT, MEASURED, REPORTED, SPLIT_PARTS
from latency.figures.gen_plots import GEN_COLOURS
from latency.figures.plots import (
    SERIES_COLOURS,
    _base_layout,
    _figure,
    empty_figure,
    stacked_components_figure,
)

#: each way a part is known, as a legend says it
HOW = {REPORTED: "reported", DERIVED: "derived", FROM_REPORT: "derived", MEASURED: "measured"}
#: the split's colours: the generation parts' own, "other" (streaming, detokenizing) grey
SPLIT_COLOURS = {**{p: GEN_COLOURS[p] for p in ("network", "queue", "prefill", "decode")},
                 "other": "#BBBBBB"}


def part_labels(split: ServerSplit) -> dict[str, str]:
    """'queue (derived)', 'prefill (reported)' … over the sources the run's requests had."""
    out = {}
    for part in SPLIT_PARTS:
        hows = sorted({HOW.get(rule.get(part, ""), "?") for rule in split.provenance.values()})
        out[part] = f"{part} ({' / '.join(hows)})" if hows else part
    return out


def split_bars_figure(split: ServerSplit, of: str = "ttft", title: str | None = None
                      ) -> go.Figure:
    """What the mean, p50, p90 and p99 time to first token (``of="ttft"``) or whole request
    (``"e2e"``) are made of by the server's account (each bar: the requests around it)."""
    if not split.n:
        return empty_figure(title, "no request had a usable report from the server")
    parts = TTFT_SPLIT if of == "ttft" else SPLIT_PARTS
    total = (split.ttft_ns if of == "ttft" else split.e2e_ns) / 1e6
    comps = {p: split.parts[p] / 1e6 for p in parts}
    order = np.argsort(total, kind="stable")
    makeup = {name: ({p: float(v.mean()) for p, v in comps.items()} if q is None
                     else tail_makeup_ms(comps, total, q, order=order))
              for name, q in MAKEUP_POINTS.items()}
    what = "time to first token (ms)" if of == "ttft" else "whole request, E2E (ms)"
    return stacked_components_figure(makeup, title, part_labels(split), parts, what,
                                     SPLIT_COLOURS)


def server_metrics_figure(series: dict[str, Any] | None, rows: np.ndarray,
                          start_ns: int | None, title: str | None = None) -> go.Figure:
    """The server's gauges (running, waiting, KV cache use …) and counters' growth
    (preemptions) at each scrape, and the client's requests in flight at the same moments
    (sent, not yet done): where the two disagree, requests wait somewhere the server does
    not count (a proxy, its frontend, the network)."""
    t = list((series or {}).get("t_ns") or [])
    values = (series or {}).get("values") or {}
    if not t:
        return empty_figure(title, "no /metrics scraped (turn on reading its /metrics)")
    t0 = start_ns if start_ns is not None else t[0]
    x = [(ti - t0) / 1e9 for ti in t]
    traces: list[Any] = []
    named = [(n, label) for n, label in (*GAUGES, *COUNTERS) if n in values]
    for i, (name, label) in enumerate(named):
        y = values[name]
        if (name, label) in COUNTERS:  # a counter: its growth since the first scrape
            first = next((v for v in y if v is not None), 0.0)
            y = [None if v is None else v - first for v in y]
            label = f"{label} (since the first scrape)"
        traces.append(go.Scatter(x=x, y=y, name=f"server: {label}", mode="lines+markers",
                                 line={"color": SERIES_COLOURS[i % len(SERIES_COLOURS)]},
                                 hovertemplate=f"%{{x:.1f}} s: {label} %{{y:.2f}}"
                                               "<extra></extra>"))
    sent, done = rows["t_sent"], rows["t_done"]
    in_flight = [int(((sent <= ti) & ((done > ti) | (done == 0)) & (sent > 0)).sum())
                 for ti in t]
    traces.append(go.Scatter(x=x, y=in_flight, name="client: requests in flight",
                             mode="lines", line={"color": "#000000", "dash": "dot"},
                             hovertemplate="%{x:.1f} s: %{y} in flight<extra></extra>"))
    layout = _base_layout(title, 380)
    layout.update(xaxis={"title": {"text": "seconds since measuring began"}},
                  yaxis={"title": {"text": "requests, or the gauge's value"},
                         "rangemode": "tozero"}, hovermode="x unified")
    return _figure(traces, layout)


__all__ = ["part_labels", "server_metrics_figure", "split_bars_figure"]
