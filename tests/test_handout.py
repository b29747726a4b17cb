"""The lesson handout: the dashboard's own chart redrawn on a one-page PDF/PNG (known
answers: the drawn bars and lines carry the Plotly figure's numbers)."""
from __future__ import annotations

import io

import pytest
from PIL import Image

from latency.figures import course_plots
from latency.figures.handout import PAGE_IN, PNG_DPI, Handout, draw_plotly

TABLE = [{"run": f"batch ≤ {b}", "requests": 100 * b, "throughput_rps": 250.0 + 40 * i,
          "p50_ms": 10.0 + i, "p99_ms": 20.0 + 3 * i} for i, b in enumerate((1, 2, 4, 8))]


def axes():
    from matplotlib import pyplot as plt

    fig = plt.figure()
    return fig, fig.add_subplot()


def test_the_drawn_chart_carries_the_figures_numbers():
    fig, ax = axes()
    draw_plotly(course_plots.answer_figure("batching", TABLE), ax)
    lines = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines()}
    assert lines["p50"] == [r["p50_ms"] for r in TABLE]
    assert lines["p99"] == [r["p99_ms"] for r in TABLE]
    right = next(a for a in fig.axes if a is not ax)  # throughput on its own axis
    assert [p.get_height() for p in right.patches] == [r["throughput_rps"] for r in TABLE]
    assert [t.get_text() for t in ax.get_xticklabels()] == [r["run"] for r in TABLE]

    fig, ax = axes()
    rows = [{**r, "load": u} for r, u in zip(TABLE, (0.3, 0.45, 0.6, 0.75))]
    details = [{"application": "fraud", "slo_ms": 25.0, "load_pct": 52.0, "measured": "52%"}]
    draw_plotly(course_plots.answer_figure("targets", rows, details=details), ax)
    assert ax.get_yscale() == "log"
    marker = [line for line in ax.get_lines() if list(line.get_xdata()) == [52.0]]
    assert marker and list(marker[0].get_ydata()) == [25.0]  # the crossing, on the target

    fig, ax = axes()  # grouped bars: p50 and p99 side by side, each at its run
    draw_plotly(course_plots.answer_figure("co", TABLE[:2]), ax)
    bars = {(round(p.get_x() + p.get_width() / 2, 3), p.get_height()) for p in ax.patches}
    centres = sorted(x for x, _ in bars)
    assert sorted(h for _, h in bars) == sorted([10.0, 11.0, 20.0, 23.0])
    assert len(set(centres)) == 4  # side by side, none drawn over another
    # each run's p50 left of its p99, both around the run's tick (0, then 1)
    assert [h for _, h in sorted(bars)] == [10.0, 20.0, 11.0, 23.0]
    assert centres[0] < 0 < centres[1] < centres[2] < 1 < centres[3]


def test_a_handout_is_one_page_pdf_or_png_and_refuses_other_formats():
    h = Handout("4. Batching", "How many times more?", "batch ≤ 8 serves 1.5×.", "Idea.",
                course_plots.answer_figure("batching", TABLE), [TABLE], "3 guesses: 1–2 ×3",
                "Measured live on 2 CPU cores.")
    pdf = h.render("pdf")
    assert pdf.startswith(b"%PDF")
    assert pdf.count(b"/Type /Page") - pdf.count(b"/Type /Pages") == 1  # one page
    png = Image.open(io.BytesIO(h.render("png")))
    assert png.size == (int(PAGE_IN[0] * PNG_DPI), int(PAGE_IN[1] * PNG_DPI))
    with pytest.raises(ValueError, match="pdf or png"):
        h.render("svg")
