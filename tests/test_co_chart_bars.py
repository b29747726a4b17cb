"""The coordinated-omission lesson's chart on the dashboard (issue 27, item 14): its p50 bars
(a few ms) were invisible slivers beside the open loop's p99 (hundreds of ms) on a linear
axis. Bars spanning that much go on a log axis, every bar labelled with its value."""
from __future__ import annotations

import math

from latency.figures import course_plots

CO = [{"run": "closed loop (8 clients)", "requests": 1200, "throughput_rps": 240.0,
       "p50_ms": 4.2, "p99_ms": 12.5},
      {"run": "open loop (200 req/s)", "requests": 1400, "throughput_rps": 198.0,
       "p50_ms": 5.1, "p99_ms": 480.0}]


def share_of_axis(axis, v: float) -> float:
    """How much of the axis's height a bar of value v fills (Plotly's log range is in
    powers of ten)."""
    lo, hi = axis.range
    return (math.log10(v) - lo) / (hi - lo) if axis.type == "log" else (v - lo) / (hi - lo)


def test_the_co_charts_p50_bars_are_seen_and_read():
    fig = course_plots.answer_figure("co", CO)
    axis = fig.layout.yaxis
    assert axis.type == "log" and "log scale" in axis.title.text
    bars = {tr.name: tr for tr in fig.data}
    assert list(bars["p50"].y) == [4.2, 5.1] and list(bars["p99"].y) == [12.5, 480.0]
    assert share_of_axis(axis, 4.2) > 0.15  # the shortest bar is a bar, not a sliver
    assert share_of_axis(axis, 480.0) < 0.9  # and the tallest's label fits above it
    assert list(bars["p50"].text) == ["4.2 ms", "5.1 ms"]
    assert list(bars["p99"].text) == ["12 ms", "480 ms"]
    assert 5 in axis.tickvals and 500 in axis.tickvals  # ticks people read
    assert list(axis.ticktext)[list(axis.tickvals).index(500)] == "500"


def test_bars_of_a_similar_size_keep_a_linear_axis_from_zero():
    near = [{**r, "p99_ms": 3 * r["p50_ms"]} for r in CO]
    axis = course_plots.answer_figure("co", near).layout.yaxis
    assert axis.type != "log" and axis.rangemode == "tozero"
    assert axis.title.text == "latency (ms)"
