"""Generation runs side by side (Compare Runs): each run's time to first token as its parts —
the mean request's and the requests' around TTFT's p99 — stacked, one bar a run, grouped by
statistic, in the generation charts' colours."""
from __future__ import annotations

from collections.abc import Mapping

import plotly.graph_objects as go

from latency.core.gen_records import TTFT_COMPONENTS
from latency.figures.gen_plots import GEN_COLOURS, part_label
from latency.figures.plots import _base_layout, _figure, empty_figure

#: the statistics drawn: (key in a run's parts, the axis's group label)
STATS = (("mean", "mean"), ("p99", "around p99"))


def runs_ttft_parts_figure(parts: Mapping[str, Mapping[str, Mapping[str, float]]],
                           title: str | None = None) -> go.Figure:
    """``parts``: a run's letter → {"mean": {part: ms}, "p99": {part: ms}}
    (``GenSummary.ttft_mean_parts_ms`` and ``ttft_p99_parts_ms``). Every part is a trace in
    every chart, so colours and legend never move between comparisons."""
    runs = [(k, v) for k, v in parts.items() if v]
    if not runs:
        return empty_figure(title)
    x: list[list[str]] = [[], []]
    values: dict[str, list[float]] = {c: [] for c in TTFT_COMPONENTS}
    for key, group in STATS:
        for letter, p in runs:
            x[0].append(group)
            x[1].append(letter)
            for c in TTFT_COMPONENTS:
                values[c].append(float((p.get(key) or {}).get(c, 0.0) or 0.0))
    traces = [go.Bar(x=x, y=values[c], name=part_label(c), marker_color=GEN_COLOURS.get(c),
                     hovertemplate=f"{part_label(c)}: %{{y:.2f}} ms<extra></extra>")
              for c in TTFT_COMPONENTS]
    layout = _base_layout(title, 420)
    layout.update(barmode="stack", xaxis={"title": None},
                  yaxis={"title": "time to first token (ms)", "rangemode": "tozero"})
    return _figure(traces, layout)


__all__ = ["runs_ttft_parts_figure"]
