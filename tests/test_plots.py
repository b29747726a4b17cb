"""Figures from known data: the right traces, values, lines and labels come out.

No browser: every check reads the figure object (``fig.data``, ``fig.layout``, ``to_dict``).
"""
from __future__ import annotations

import base64
import json
import math
import time

import numpy as np
import plotly.graph_objects as go
import pytest

from latency.analysis.stats import HIST_EDGES_MS, histogram_ms
from latency.analysis.summary import Summary
from latency.core import fmt
from latency.core.records import COMPONENTS
from latency.figures import plots
from tests.timing_support import watched

MAKEUP = {
    "mean": {"network": 0.5, "queue": 4.0, "preprocess": 1.0, "forward": 3.0,
             "postprocess": 0.5, "overhead": 0.1},
    "p50": {"network": 0.4, "queue": 2.0, "preprocess": 1.0, "forward": 3.0,
            "postprocess": 0.5, "overhead": 0.1},
    "p90": {"network": 0.6, "queue": 9.0, "preprocess": 1.2, "forward": 3.1,
            "postprocess": 0.6, "overhead": 0.1},
    "p99": {"network": 1.0, "queue": 30.0, "preprocess": 1.5, "forward": 3.5,
            "postprocess": 0.8, "overhead": 0.2},
}


def _texts(fig: go.Figure) -> list[str]:
    return [a.text for a in fig.layout.annotations]


def _is_empty_figure(fig: go.Figure) -> bool:
    return len(fig.data) == 0 and any(plots.EMPTY_TEXT in t for t in _texts(fig))


# ------------------------------------------------------------------------ colours


def test_colours_fixed_for_every_component_and_overhead_grey():
    assert list(plots.COMPONENT_COLOURS) == list(COMPONENTS)
    assert len(set(plots.COMPONENT_COLOURS.values())) == len(COMPONENTS)
    okabe_ito = {"#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7",
                 "#000000", "#999999"}
    assert set(plots.COMPONENT_COLOURS.values()) <= okabe_ito
    r, g, b = (int(plots.COMPONENT_COLOURS["overhead"][i:i + 2], 16) for i in (1, 3, 5))
    assert r == g == b  # neutral grey


# ------------------------------------------------------------------------ stacked bars


def test_stacked_has_six_component_traces_in_order_with_values():
    fig = plots.stacked_components_figure(MAKEUP, title="make-up")
    assert [t.name for t in fig.data] == list(COMPONENTS)
    assert all(t.type == "bar" for t in fig.data)
    assert fig.layout.barmode == "stack"
    cats = ["mean", "p50", "p90", "p99 (tail)"]
    for trace in fig.data:
        assert list(trace.x) == cats
        assert list(trace.y) == pytest.approx([MAKEUP[k][trace.name] for k in MAKEUP])
        assert trace.marker.color == plots.COMPONENT_COLOURS[trace.name]
        # hover carries the share of the bar
        totals = [sum(MAKEUP[k].values()) for k in MAKEUP]
        assert list(trace.customdata) == pytest.approx(
            [MAKEUP[k][trace.name] / t for k, t in zip(MAKEUP, totals)])
        assert "ms" in trace.hovertemplate and "customdata" in trace.hovertemplate
    assert fig.layout.yaxis.title.text == "latency (ms)"
    assert fig.layout.legend.orientation == "h"
    assert fig.layout.template.layout.paper_bgcolor == "white"  # plotly_white
    assert fig.layout.title.text == "make-up"


def test_stacked_writes_total_above_each_bar():
    fig = plots.stacked_components_figure(MAKEUP)
    ann = {a.x: a for a in fig.layout.annotations}
    for key, label in (("mean", "mean"), ("p99", "p99 (tail)")):
        total = sum(MAKEUP[key].values())
        assert ann[label].y == pytest.approx(total)
        assert ann[label].yanchor == "bottom"
        assert fmt.ms(total) in ann[label].text
    assert fig.layout.yaxis.range[1] > sum(MAKEUP["p99"].values())  # room for the label


def test_stacked_keeps_all_six_traces_when_components_are_zero_or_missing():
    makeup = {"mean": {"forward": 2.0}, "p50": {"forward": 1.5, "queue": 0.0},
              "p90": {"forward": 2.5}, "p99": {"forward": 3.0}}
    fig = plots.stacked_components_figure(makeup)
    assert [t.name for t in fig.data] == list(COMPONENTS)
    queue = next(t for t in fig.data if t.name == "queue")
    assert list(queue.y) == [0.0, 0.0, 0.0, 0.0]
    assert list(queue.customdata) == [0.0, 0.0, 0.0, 0.0]


def test_stacked_empty_makeup_is_a_no_data_figure():
    assert _is_empty_figure(plots.stacked_components_figure({}))
    assert _is_empty_figure(plots.stacked_components_figure({"mean": {}}))


# ------------------------------------------------------------------------ histogram


def _hist_case():
    rng = np.random.default_rng(0)
    values = rng.lognormal(np.log(10.0), 0.5, 5000)
    counts = histogram_ms(values)
    pct = {"p50": float(np.percentile(values, 50)), "p95": float(np.percentile(values, 95)),
           "p99": float(np.percentile(values, 99))}
    return values, counts, pct


def test_histogram_bars_sum_to_counts_on_log_axis_trimmed():
    values, counts, pct = _hist_case()
    fig = plots.latency_histogram_figure(HIST_EDGES_MS, counts, pct)
    (bars,) = fig.data
    assert bars.type == "bar"
    assert sum(bars.y) == counts.sum() == len(values)
    assert fig.layout.xaxis.type == "log"
    assert fig.layout.xaxis.title.text == "total latency (ms, log scale)"
    assert fig.layout.yaxis.title.text == "requests"
    # trimmed to the occupied bins plus one empty bin either side
    nz = np.flatnonzero(counts)
    assert len(bars.y) == nz[-1] - nz[0] + 3
    assert bars.y[0] == 0 and bars.y[-1] == 0
    # each bar spans exactly its bin: [x + offset, x + offset + width]
    lo = np.asarray(bars.x) + np.asarray(bars.offset)
    hi = lo + np.asarray(bars.width)
    assert lo == pytest.approx(HIST_EDGES_MS[nz[0] - 1: nz[-1] + 2])
    assert hi == pytest.approx(HIST_EDGES_MS[nz[0]: nz[-1] + 3])


def test_histogram_lines_at_percentiles_and_slo_with_share_text():
    _, counts, pct = _hist_case()
    fig = plots.latency_histogram_figure(HIST_EDGES_MS, counts, pct, slo_ms=20.0,
                                         share_within_slo=0.973)
    lines = [s for s in fig.layout.shapes if s.type == "line"]
    xs = sorted(s.x0 for s in lines)
    assert xs == pytest.approx(sorted([*pct.values(), 20.0]))
    assert all(s.x0 == s.x1 and s.xref == "x" and s.yref == "paper" for s in lines)
    slo = [s for s in lines if s.name == "slo"]
    assert len(slo) == 1 and slo[0].x0 == 20.0
    assert slo[0].line.dash == "dash" and slo[0].line.color == plots.SLO_COLOUR
    others = [s for s in lines if s.name != "slo"]
    assert all(s.line.dash != "dash" for s in others)
    texts = _texts(fig)
    assert any("SLO 20 ms: 97.3% of the requests within" in t for t in texts)
    for k, v in pct.items():
        assert any(t.startswith(f"{k} {fmt.ms(v)} ms") for t in texts)
    # annotations on a log axis are placed at log10(value)
    by_text = {a.text: a for a in fig.layout.annotations}
    a99 = next(a for t, a in by_text.items() if t.startswith("p99"))
    assert a99.x == pytest.approx(math.log10(pct["p99"]))


def test_histogram_labels_are_staggered_even_when_values_coincide():
    _, counts, _ = _hist_case()
    close = {"p50": 10.0, "p95": 10.01, "p99": 10.02}
    fig = plots.latency_histogram_figure(HIST_EDGES_MS, counts, close, slo_ms=10.0,
                                         share_within_slo=0.5)
    ys = [a.y for a in fig.layout.annotations]
    assert len(ys) == 4
    gaps = np.diff(sorted(ys))
    assert np.all(gaps >= 0.05)  # one row each, never on top of each other
    # all labels sit in the headroom above the tallest bar
    assert min(ys) > 1 - plots.HIST_LABEL_HEADROOM
    assert fig.layout.yaxis.range[1] * (1 - plots.HIST_LABEL_HEADROOM) == pytest.approx(
        counts.max())


def test_histogram_widens_x_range_to_show_an_slo_outside_the_data():
    _, counts, pct = _hist_case()
    fig = plots.latency_histogram_figure(HIST_EDGES_MS, counts, pct, slo_ms=5000.0)
    lo, hi = fig.layout.xaxis.range  # log10 units
    assert 10 ** hi > 5000.0 and 10 ** lo < pct["p50"]
    assert any(t.startswith("<b>SLO 5000 ms") for t in _texts(fig))


def test_histogram_label_near_the_right_edge_reads_leftwards():
    _, counts, pct = _hist_case()
    fig = plots.latency_histogram_figure(HIST_EDGES_MS, counts, pct, slo_ms=5000.0,
                                         share_within_slo=0.999)
    slo = next(a for a in fig.layout.annotations if "SLO" in a.text)
    p50 = next(a for a in fig.layout.annotations if a.text.startswith("p50"))
    assert slo.xanchor == "right" and p50.xanchor == "left"
    # each line ends at its own label's row (a flag), so it cannot run through labels above
    for shape, ann in zip(fig.layout.shapes, fig.layout.annotations):
        assert shape.y1 == pytest.approx(ann.y)


def test_histogram_slo_without_share_and_missing_percentiles():
    _, counts, _ = _hist_case()
    fig = plots.latency_histogram_figure(HIST_EDGES_MS, counts, {"p50": 10.0, "p99": None},
                                         slo_ms=30.0)
    assert len(fig.layout.shapes) == 2
    assert any("SLO 30 ms" in t and "within" not in t for t in _texts(fig))


@pytest.mark.parametrize("edges, counts", [
    (None, None), ([], []), (HIST_EDGES_MS, np.zeros(len(HIST_EDGES_MS) - 1, dtype=int)),
    (HIST_EDGES_MS, None),
])
def test_histogram_empty_input_is_a_no_data_figure(edges, counts):
    fig = plots.latency_histogram_figure(edges, counts, {"p50": None}, slo_ms=50.0,
                                         share_within_slo=None)
    assert _is_empty_figure(fig)


def _count_ticks(axis) -> list[str]:
    """The tick labels plotly draws on a linear count axis: tick0 + k·dtick within the range,
    in the axis's ``tickformat`` (d3 ",d": rounded to an integer, thousands separated)."""
    assert axis.tickmode == "linear" and axis.tickformat == ",d"
    lo, hi = axis.range
    ticks = np.arange(axis.tick0, hi + 1e-9, axis.dtick)
    return [f"{round(v):,}" for v in ticks if v >= lo]


@pytest.mark.parametrize("counts_at, top", [((3, 7, 8, 12), 1), ((5,), 1), ((4, 5, 6), 7)])
def test_histogram_count_ticks_are_distinct_whole_numbers_when_counts_are_small(counts_at, top):
    """A few requests drew the y axis as "0 0 0 1 1 1 1 1": plotly stepped 0.2 over 0-1.56 and
    the integer format rounded each step. Counts tick at whole numbers, a step of at least 1."""
    counts = np.zeros(20)
    counts[list(counts_at)] = 1
    counts[counts_at[0]] = top
    fig = plots.latency_histogram_figure(np.geomspace(5, 50, 21), counts, {"p50": 12.0})
    labels = _count_ticks(fig.layout.yaxis)
    assert len(labels) == len(set(labels)) >= 2, labels
    assert labels[0] == "0" and fig.layout.yaxis.dtick >= 1
    assert fig.layout.yaxis.range[1] >= top  # the tallest bar fits under the labels' headroom


def test_histogram_count_ticks_stay_few_and_round_for_large_counts():
    _, counts, pct = _hist_case()
    fig = plots.latency_histogram_figure(HIST_EDGES_MS, counts, pct)
    labels = _count_ticks(fig.layout.yaxis)
    assert 3 <= len(labels) <= 8 and len(set(labels)) == len(labels)
    assert str(int(fig.layout.yaxis.dtick))[0] in "125"


def test_histogram_axis_opens_where_the_requests_are_not_at_a_few_near_zero_outliers():
    """The simulator's histogram was half empty: a few exponential service times near zero
    (clipped into the first bin, 1 µs) opened the log axis at 0.001 ms, three decades before
    the requests. The axis opens where all but the fastest 0.1 % lie; those bars stay in the
    figure (autoscale shows them) and the tail is never cut."""
    rng = np.random.default_rng(1)
    values = np.concatenate([rng.lognormal(np.log(30.0), 0.4, 20_000),
                             [1e-4, 0.002, 0.01, 0.05, 0.2]])  # five strays down to 0.1 µs
    counts = histogram_ms(values)
    fig = plots.latency_histogram_figure(HIST_EDGES_MS, counts, {"p50": 30.0, "p99": 75.0})
    lo, hi = fig.layout.xaxis.range
    assert 10 ** lo > 5.0, 10 ** lo  # not 0.001 ms
    assert 10 ** hi >= values.max()  # the slowest request is on the axis
    (bars,) = fig.data
    assert sum(bars.y) == len(values)  # every request still a bar
    shown = (np.asarray(bars.x) >= 10 ** lo) & (np.asarray(bars.x) <= 10 ** hi)
    assert np.asarray(bars.y)[shown].sum() >= 0.999 * len(values)
    # a narrow distribution without strays keeps its one empty bin each side
    _, plain, pct = _hist_case()
    nz = np.flatnonzero(plain)
    fig = plots.latency_histogram_figure(HIST_EDGES_MS, plain, pct)
    assert 10 ** fig.layout.xaxis.range[0] == pytest.approx(HIST_EDGES_MS[nz[0] - 1])


# ------------------------------------------------------------------------ time series


def test_timeseries_two_panels_sharing_x_with_gaps():
    series = {"t_s": [1.0, 2.0, 3.0, 4.0], "throughput_rps": [100.0, 110.0, 0.0, 90.0],
              "p50_ms": [5.0, 6.0, None, 5.5], "p99_ms": [20.0, 25.0, None, 30.0]}
    fig = plots.timeseries_figure(series)
    names = [t.name for t in fig.data]
    assert names == ["throughput", "p50", "p99"]
    thr, p50, p99 = fig.data
    assert list(thr.x) == [1.0, 2.0, 3.0, 4.0]
    assert list(thr.y) == [100.0, 110.0, 0.0, 90.0]
    assert p50.y[0] == 5.0 and math.isnan(p50.y[2]) and p50.y[3] == 5.5
    assert math.isnan(p99.y[2]) and p99.y[3] == 30.0
    assert not any(t.connectgaps for t in fig.data)
    # throughput in the top panel, latency in the bottom one, one shared time axis
    assert thr.yaxis == "y" and p50.yaxis == p99.yaxis == "y2"
    assert fig.layout.yaxis.domain[0] > fig.layout.yaxis2.domain[1]
    assert fig.layout.xaxis.matches == "x2"
    assert fig.layout.xaxis2.title.text == "elapsed (s)"
    assert "req/s" in fig.layout.yaxis.title.text
    assert fig.layout.yaxis2.title.text == "latency (ms)"
    # what plotly.js receives still has the hole (NaN in a typed array), not a zero
    sent = json.loads(fig.to_json())["data"][1]["y"]
    decoded = np.frombuffer(base64.b64decode(sent["bdata"]), dtype=sent["dtype"])
    assert decoded[:2].tolist() == [5.0, 6.0] and math.isnan(decoded[2])


@pytest.mark.parametrize("series", [None, {}, {"t_s": [], "throughput_rps": [],
                                                "p50_ms": [], "p99_ms": []}])
def test_timeseries_empty_is_a_no_data_figure(series):
    assert _is_empty_figure(plots.timeseries_figure(series))


# ------------------------------------------------------------------------ spectrum


def test_spectrum_lines_stop_where_each_runs_data_ends():
    grid = np.linspace(0.0, 1.0, 1001)
    q_ms = 1.0 + grid
    fig = plots.percentile_spectrum_figure({"short": q_ms, "long": q_ms},
                                           counts={"short": 105, "long": 100_000})
    short, long = fig.data[0], fig.data[1]
    # 105 requests reach p = 1 - 1/105 = 0.9905: the last point drawn is p99.0
    assert max(short.customdata) == pytest.approx(99.0)
    assert max(long.customdata) == pytest.approx(99.9)  # the grid's last finite point


def test_spectrum_x_is_one_over_one_minus_p_on_log_axis():
    grid = np.linspace(0.0, 1.0, 1001)
    q_ms = 1.0 + 10.0 * grid ** 4
    fig = plots.percentile_spectrum_figure({"run A": q_ms, "run B": q_ms * 2})
    assert [t.name for t in fig.data] == ["run A", "run B"]
    a = fig.data[0]
    # q = 1 (the maximum) has no finite x and is left out
    assert len(a.x) == 1000
    assert np.asarray(a.x) == pytest.approx(1.0 / (1.0 - grid[:-1]))
    assert np.asarray(a.y) == pytest.approx(q_ms[:-1])
    assert np.asarray(fig.data[1].y) == pytest.approx(2 * q_ms[:-1])
    i99 = 990
    assert a.x[i99] == pytest.approx(100.0) and a.y[i99] == pytest.approx(q_ms[i99])
    ax = fig.layout.xaxis
    assert ax.type == "log"
    assert list(ax.ticktext) == ["50%", "90%", "99%", "99.9%"]
    assert list(ax.tickvals) == pytest.approx([2.0, 10.0, 100.0, 1000.0])
    assert fig.layout.yaxis.title.text == "latency (ms)"
    assert a.line.color != fig.data[1].line.color


def test_spectrum_x_helper():
    assert plots.spectrum_x([0.0, 0.5, 0.9, 0.99]) == pytest.approx([1.0, 2.0, 10.0, 100.0])


@pytest.mark.parametrize("curves", [{}, None, {"a": None}, {"a": np.array([])}])
def test_spectrum_empty_is_a_no_data_figure(curves):
    assert _is_empty_figure(plots.percentile_spectrum_figure(curves))


# ------------------------------------------------------------------------ table rows


def _stats(scale: float) -> dict:
    return {"mean": 1.23456 * scale, "p50": 1.0 * scale, "p90": 2.0 * scale,
            "p95": 2.5 * scale, "p99": 3.14159 * scale, "p999": 4.0 * scale,
            "max": 1234.567 * scale, "p99_ci95": [3.0, 3.3]}


def test_summary_rows_total_then_components_rounded():
    summary = {"latency_ms": _stats(1.0),
               "components_ms": {c: _stats(0.01 * (i + 1)) for i, c in enumerate(COMPONENTS)}}
    rows = plots.summary_rows(Summary.from_dict(summary))
    assert [r["component"] for r in rows] == ["total", *COMPONENTS]
    assert list(rows[0]) == ["component", "mean", "p50", "p90", "p95", "p99", "p99.9", "max"]
    total = rows[0]
    assert total["mean"] == 1.23 and total["p99"] == 3.14 and total["p99.9"] == 4.0
    assert total["max"] == 1234.6
    net = rows[1]  # scale 0.01: small values keep three significant figures
    assert net["mean"] == 0.0123 and net["p99"] == 0.0314


def test_summary_rows_handles_missing_values():
    assert plots.summary_rows(None) == []
    assert plots.summary_rows(Summary.from_dict({})) == []
    empty = {k: None for k in ("mean", "p50", "p90", "p95", "p99", "p999", "max")}
    rows = plots.summary_rows(Summary.from_dict({"latency_ms": {**empty, "mean": 0.0},
                                                 "components_ms": {}}))
    assert len(rows) == 1 + len(COMPONENTS)
    assert rows[0]["mean"] == 0.0 and rows[0]["p99"] is None
    assert all(v is None for r in rows[1:] for k, v in r.items() if k != "component")


def test_round_ms_and_fmt_ms():
    assert fmt.round_ms(123.456) == 123.5
    assert fmt.round_ms(12.3456) == 12.3
    assert fmt.round_ms(1.23456) == 1.23
    assert fmt.round_ms(0.00123456) == 0.00123
    assert fmt.round_ms(None) is None
    assert fmt.ms(90.755) == "90.8"
    assert fmt.ms(1234.0) == "1234"
    assert fmt.ms(0.1234) == "0.123"
    assert fmt.ms(None) == "—"


# ------------------------------------------------------------------------ whole-figure checks


def _all_figures():
    values, counts, pct = _hist_case()
    grid_q = np.quantile(values, np.linspace(0, 1, 1001))
    return {
        "stacked": plots.stacked_components_figure(MAKEUP, title="t"),
        "hist": plots.latency_histogram_figure(HIST_EDGES_MS, counts, pct, 20.0, 0.9),
        "timeseries": plots.timeseries_figure(
            {"t_s": [1.0, 2.0], "throughput_rps": [3.0, 4.0], "p50_ms": [1.0, None],
             "p99_ms": [2.0, None]}),
        "spectrum": plots.percentile_spectrum_figure({"a": grid_q}),
        "empty": plots.empty_figure("t"),
    }


@pytest.mark.parametrize("name", ["stacked", "hist", "timeseries", "spectrum", "empty"])
def test_figures_share_the_legible_layout_and_serialise(name):
    fig = _all_figures()[name]
    d = fig.to_dict()
    assert d["layout"]["template"]["layout"]["paper_bgcolor"] == "white"  # plotly_white
    assert fig.layout.font.size >= 12
    m = fig.layout.margin
    assert m.l >= 60 and m.b >= 50 and m.t >= 25
    fig.to_json()  # the dashboard sends JSON; must not raise (numpy arrays, NaN)


@pytest.mark.timing
def test_figures_are_fast():
    values, counts, pct = _hist_case()
    q = np.quantile(values, np.linspace(0, 1, 1001))
    hour = {"t_s": [float(i) for i in range(1, 3601)], "throughput_rps": [100.0] * 3600,
            "p50_ms": [5.0] * 3600, "p99_ms": [None, 20.0] * 1800}
    calls = [
        lambda: plots.stacked_components_figure(MAKEUP),
        lambda: plots.latency_histogram_figure(HIST_EDGES_MS, counts, pct, 20.0, 0.9),
        lambda: plots.timeseries_figure(hour),
        lambda: plots.percentile_spectrum_figure({"a": q, "b": q}),
    ]
    for i, f in enumerate(calls):
        f()  # warm caches
        with watched() as machine:
            t0 = time.perf_counter()
            for _ in range(5):
                f()
            per_call_ms = (time.perf_counter() - t0) / 5 * 1e3
        # ~2–5 ms measured; generous for slow CI machines
        assert per_call_ms < 50, (f"figure {i}: {per_call_ms:.1f} ms a call", machine.note())


def test_summary_markdown_is_a_table_of_every_component():
    summary = {"latency_ms": {"mean": 10.0, "p50": 9.0, "p90": 12.0, "p95": 13.0, "p99": 20.0,
                              "p999": 25.0, "max": 30.0},
               "components_ms": {c: {"mean": 1.0, "p50": 1.0, "p90": 1.0, "p95": 1.0,
                                     "p99": 1.0, "p999": 1.0, "max": 1.0}
                                 for c in ("network", "queue", "preprocess", "forward",
                                           "postprocess", "overhead")}}
    text = plots.summary_markdown(Summary.from_dict(summary))
    lines = [line for line in text.splitlines() if line.startswith("|")]
    assert len(lines) == 2 + 7  # header, rule, total + six components
    assert "**total**" in lines[2] and "20.0" in lines[2]
    assert plots.summary_markdown(None) == ""


def test_timeseries_draws_the_offered_rate_in_open_loop():
    series = {"t_s": [1.0, 2.0], "throughput_rps": [90.0, 91.0], "p50_ms": [5.0, 6.0],
              "p99_ms": [9.0, 12.0]}
    fig = plots.timeseries_figure(series, offered_rps=300.0)
    offered = next(t for t in fig.data if t.name == "offered rate")
    assert list(offered.y) == [300.0, 300.0]
    assert "offered rate" not in {t.name for t in plots.timeseries_figure(series).data}


def test_hockey_stick_marks_the_setting_and_overlays_theory():
    fig = plots.hockey_stick_figure([0.1, 0.5, 0.9], [1.0, 2.0, 9.0], [3.0, 8.0, 40.0],
                                    [1.0, 2.1, 9.5], [3.1, 8.5, 46.0], (0.5, 2.0, 8.0), 20.0)
    names = [t.name for t in fig.data]
    assert names[:2] == ["p50 (simulated)", "p99 (simulated)"]
    assert "p99 (M/M/c theory)" in names and "your setting" in names
    assert fig.layout.yaxis.type == "log"
    slo = next(t for t in fig.data if t.name.startswith("SLO"))
    assert list(slo.y) == [20.0, 20.0]
    assert plots.hockey_stick_figure([], [], []).layout.annotations  # "no data yet"
