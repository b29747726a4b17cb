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


CO = [{"run": "closed loop (8 clients)", "requests": 1200, "throughput_rps": 240.0,
       "p50_ms": 4.2, "p99_ms": 12.5},
      {"run": "open loop (200 req/s)", "requests": 1400, "throughput_rps": 198.0,
       "p50_ms": 5.1, "p99_ms": 480.0}]
LONG_IDS = ", ".join(f"run-20261202-07{i:02d}00-abcdef" for i in range(8))


def _long_handout() -> Handout:
    question = ("A model stalls for 500 ms once. How much does the p99 move, measured closed "
                "loop and open loop? ") * 3
    idea = ("A closed-loop load generator waits for each answer, so a stall delays the requests "
            "it would have sent: they are never measured as slow. ") * 3
    table = [{"run": r["run"], "requests": r["requests"], "req/s": r["throughput_rps"],
              "p50 ms": r["p50_ms"], "p99 ms": r["p99_ms"]} for r in CO]
    return Handout("3. Coordinated omission", question, "Closed loop p99 12.5 ms; open loop "
                   "p99 480 ms.", idea, course_plots.answer_figure("co", CO), [table],
                   "12 guesses: ×1 ×3, ×10 ×5, ×100 ×4",
                   "Measured live by Latency Lab on 2 CPU core(s), cpu, torch 2.9.0; in the run "
                   f"history as \"Workshop 3. Coordinated omission · …\": {LONG_IDS}.",
                   ["Both runs completed."])


def test_every_line_of_the_page_stays_on_the_page_and_the_footer_under_the_idea():
    """The question and the footer ran off the right edge (wrapped at a character count, not
    at the width the font takes), and a long footer climbed into the idea above it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    page = _long_handout().page()
    renderer = FigureCanvasAgg(page).get_renderer()
    width, height = page.bbox.width, page.bbox.height
    texts = [t for t in page.texts if t.get_text()]
    for t in texts:
        box = t.get_window_extent(renderer)
        assert 0 <= box.x0 and box.x1 <= width and 0 <= box.y0 and box.y1 <= height, \
            (t.get_text()[:60], box)
    source = next(t for t in texts if "run history" in t.get_text())
    idea = next(t for t in texts if t.get_text().startswith("A closed-loop"))
    assert LONG_IDS.split(", ")[-1] in source.get_text().replace("\n", " ")  # nothing lost
    assert source.get_window_extent(renderer).y1 < idea.get_window_extent(renderer).y0
    chart = page.axes[0].get_tightbbox(renderer)
    assert idea.get_window_extent(renderer).y1 < chart.y0  # the chart sits above the footer


def test_the_co_handouts_short_p50_bars_are_seen_and_read():
    """p50 5 ms beside a p99 of 480 ms were invisible slivers on the handout's linear axis: a
    bar chart whose bars span this much is drawn on a log axis (its title says so), each bar
    without a label given its value."""
    fig, ax = axes()
    draw_plotly(course_plots.answer_figure("co", CO), ax)
    assert ax.get_yscale() == "log" and "log scale" in ax.get_ylabel()
    heights = sorted(p.get_height() for p in ax.patches)
    assert heights == sorted([4.2, 5.1, 12.5, 480.0])  # the figure's numbers, unchanged
    lo, hi = ax.get_ylim()
    assert lo < 4.2 / 1.5 and hi > 480.0
    fig.canvas.draw()  # drawn, the shortest bar is a bar, not a sliver
    shortest = min(ax.patches, key=lambda p: p.get_height())
    assert shortest.get_window_extent().height > 0.15 * ax.get_window_extent().height
    labels = {t.get_text() for t in ax.texts}
    assert {"4.2 ms", "5.1 ms"} <= labels and {"12 ms", "480 ms"} <= labels
    fig, ax = axes()  # bars within a factor 25 keep the page's linear axis
    draw_plotly(course_plots.answer_figure("co", TABLE[:2]), ax)
    assert ax.get_yscale() == "linear"


def test_a_figure_a_lesson_could_not_measure_is_a_dash_not_none():
    """A generation lesson's table as the page and the handout print it: a goodput that was
    not measured (no targets met anywhere: None) reads "—", as on the command line."""
    from ui.workshop import handout_rows

    rows = handout_rows([{"run": "rate 2", "requests": 40, "goodput_rps": None,
                          "ttft_p99_ms": 120.5},
                         {"run": "rate 4", "requests": 80, "goodput_rps": 3.5,
                          "ttft_p99_ms": 180.0}])
    assert rows[0]["goodput/s"] == "—" and rows[1]["goodput/s"] == 3.5
    assert "None" not in repr(rows)


def test_a_lesson_measured_on_a_busy_machine_says_so_on_its_card_and_handout():
    """A lesson run while other processes used 1.3 of 2 cores: its card and handout say
    DISTURBED, naming the run; quiet runs say nothing."""
    from latency.core.config import RunConfig
    from latency.execution.engine import execute
    from tests.test_disturbed_marks import BUSY, QUIET, on_machine
    from ui.workshop import disturbed_note

    real = execute(RunConfig(model="synthetic", requests=60, warmup=2))
    group = {"blocks": [("1 client", "r1"), ("8 clients", "r2")]}
    assert disturbed_note(group, [on_machine(real, QUIET), on_machine(real, QUIET)]) is None
    note = disturbed_note(group, [on_machine(real, QUIET), on_machine(real, BUSY)])
    assert note is not None and note.startswith("DISTURBED") and "“8 clients”" in note, note
    assert "“1 client”" not in note and "1.3 of 2 cores" in note, note
