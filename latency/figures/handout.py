"""A finished lesson as a one-page handout (PDF or PNG) that students keep: the question, the
room's guesses, the measured answer with its chart and its runs' numbers, and where and when
they were measured.

The chart is the dashboard's own Plotly figure (``course_plots.answer_figure``) redrawn with
matplotlib (``draw_plotly``), so the handout cannot show other numbers than the page: one
place for each chart. Matplotlib, not Plotly's image export: that needs Kaleido and a Chrome
it would download, and a workshop room may have no internet.
"""
from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

#: A4 landscape, inches; PNG at this many dots per inch
PAGE_IN = (11.69, 8.27)
PNG_DPI = 150
FORMATS = ("pdf", "png")
_DASH = {"dash": "--", "dot": ":", "dashdot": "-."}
_MARKER = {"diamond": "D", "circle": "o", "square": "s"}


@dataclass(frozen=True)
class Handout:
    """What one page says. ``tables``: the page's tables (the runs' numbers, and a lesson's
    own, like each target's capacity), each a list of rows with the same keys."""

    title: str
    question: str
    answer: str
    idea: str
    figure: go.Figure
    tables: Sequence[Sequence[Mapping[str, Any]]]
    guesses: str
    provenance: str
    checks: Sequence[str] = ()

    def render(self, kind: str = "pdf") -> bytes:
        """The page as PDF or PNG bytes."""
        if kind not in FORMATS:
            raise ValueError(f"a handout is {' or '.join(FORMATS)}, not {kind!r}")
        buf = io.BytesIO()
        self.page().savefig(buf, format=kind, dpi=PNG_DPI if kind == "png" else None)
        return buf.getvalue()

    def page(self) -> Figure:
        """The page as a matplotlib Figure — not pyplot's: no global state, so downloads in
        several threads at once cannot draw on each other's page.

        Every paragraph is wrapped to the page's width as its font measures it (a wrap by
        character count ran the question and the footer off the right edge), and the footer —
        the idea, then where and when it was measured — is laid out from the bottom up, the
        chart above it."""
        fig = Figure(figsize=PAGE_IN)
        fig.text(LEFT, 0.95, self.title, fontsize=18, weight="bold", va="top")
        y = _paragraph(fig, 0.895, "Question", self.question)
        y = _paragraph(fig, y, "The room's guesses", self.guesses)
        y = _paragraph(fig, y, "Measured", self.answer + "".join(
            f" {c}" if c.endswith(".") else f" {c}." for c in self.checks))
        source = _lines(self.provenance, 8)
        fig.text(LEFT, BOTTOM, "\n".join(source), fontsize=8, color="#555555", va="bottom",
                 linespacing=LINE_SPACING)
        idea = _lines(self.idea, 9.5, style="italic")
        idea_top = BOTTOM + _height(len(source), 8) + 0.015 + _height(len(idea), 9.5)
        fig.text(LEFT, idea_top, "\n".join(idea), fontsize=9.5, va="top", style="italic",
                 linespacing=LINE_SPACING)
        chart_bottom = max(0.2, idea_top + 0.075)  # room for the chart's tick labels
        height = max(0.2, y - 0.07 - chart_bottom)
        draw_plotly(self.figure, fig.add_axes((0.07, chart_bottom, 0.47, height)))
        top = chart_bottom + height
        for rows in self.tables:  # stacked in the right column, each as tall as its rows
            h = 0.034 * (len(rows) + 1)
            _table(fig, rows, (0.64, top - h, 0.32, h))
            top -= h + 0.04
        return fig


#: the page's text column runs from LEFT to 1 - LEFT of its width; the footer's last line
#: sits at BOTTOM
LEFT = 0.05
BOTTOM = 0.02
LINE_SPACING = 1.2
_MEASURE: dict[str, Any] = {}


def _lines(text: str, size: float, width: float = 1 - 2 * LEFT, **font: Any) -> list[str]:
    """``text`` wrapped into lines no wider than ``width`` (a share of the page's width), as
    matplotlib's own renderer measures them in this font (with 3 % to spare)."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    renderer = _MEASURE.get("renderer")
    if renderer is None:
        renderer = _MEASURE["renderer"] = RendererAgg(10, 10, 72)
    prop = FontProperties(size=size, **font)
    limit = width * PAGE_IN[0] * 72 * 0.97  # points
    widths: dict[str, float] = {}

    def measure(word: str) -> float:
        if word not in widths:
            widths[word] = renderer.get_text_width_height_descent(word, prop, ismath=False)[0]
        return widths[word]

    space = measure("a a") - 2 * measure("a")
    lines: list[str] = []
    for para in text.splitlines() or [""]:
        line, used = "", 0.0
        for word in para.split():
            w = measure(word)
            if line and used + space + w > limit:
                lines.append(line)
                line, used = "", 0.0
            line, used = (f"{line} {word}", used + space + w) if line else (word, w)
        lines.append(line)
    return lines


def _height(n_lines: int, size: float) -> float:
    """The height of ``n_lines`` lines of text at ``size`` points, as a share of the page."""
    return n_lines * size * LINE_SPACING / (PAGE_IN[1] * 72)


def _paragraph(fig: Figure, y: float, head: str, body: str) -> float:
    lines = _lines(body, 10)
    fig.text(LEFT, y, head, fontsize=11, weight="bold", va="top")
    fig.text(LEFT, y - 0.028, "\n".join(lines), fontsize=10, va="top", linespacing=LINE_SPACING)
    return y - 0.028 - _height(len(lines), 10) - 0.03


def _table(fig: Figure, rows: Sequence[Mapping[str, Any]], box: tuple[float, ...]) -> None:
    ax = fig.add_axes(box)
    ax.axis("off")
    if not rows:
        return
    head = list(rows[0])
    cells = [[_cell(r.get(k)) for k in head] for r in rows]
    t = ax.table(cellText=cells, colLabels=head, bbox=(0, 0, 1, 1), cellLoc="right")
    t.auto_set_font_size(False)
    t.set_fontsize(8.5)
    width = [max(len(str(h)), *(len(row[i]) for row in cells)) + 2 for i, h in enumerate(head)]
    for (_, col), cell in t.get_celld().items():  # columns as wide as their text
        cell.set_width(width[col] / sum(width))
        if col == 0:  # names read from the left
            cell._loc = "left"  # noqa: SLF001 - matplotlib has no public setter for it
            cell.set_text_props(ha="left")


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) < 1e4 else f"{v:.3g}"
    return "" if v is None else str(v)


def draw_plotly(figure: go.Figure, ax: Axes) -> None:
    """Draw a Plotly figure's bars and lines on matplotlib axes: the trace kinds, axes and
    annotations this project's lesson charts use (categorical or numeric x, a second y axis,
    grouped or stacked bars, log axes, bar labels, dashed lines). A trace kind it does not
    know raises, rather than leaving a chart silently incomplete."""
    layout = figure.layout
    cats: list[Any] = []
    for tr in figure.data:
        if layout.xaxis.type == "category" or tr.type == "bar":
            cats.extend(x for x in (tr.x or ()) if x not in cats)
    pos = {c: i for i, c in enumerate(cats)}
    bars = [tr for tr in figure.data if tr.type == "bar"]
    grouped = layout.barmode == "group" and len(bars) > 1
    stacked = layout.barmode == "stack"
    bottoms: dict[Any, float] = {}  # a stack's height so far, per x
    width = 0.8 / len(bars) if grouped else 0.8
    right: Axes | None = None
    on_left: list[tuple[Any, bool]] = []  # the main axis's bars, and whether labelled
    for tr in figure.data:
        if tr.type not in ("bar", "scatter"):
            raise ValueError(f"the handout cannot draw a {tr.type} trace")
        target = ax
        if tr.yaxis == "y2":
            right = right or ax.twinx()
            target = right
        xs = [pos[x] for x in tr.x] if cats else list(tr.x)
        label = tr.name if tr.showlegend is not False and tr.name else None
        if tr.type == "bar":
            shift = (bars.index(tr) - (len(bars) - 1) / 2) * width if grouped else 0.0
            colour = tr.marker.color if tr.marker.color is not None else None
            below = [bottoms.get(x, 0.0) for x in xs] if stacked else None
            drawn = target.bar([x + shift for x in xs], list(tr.y), width=width, label=label,
                               color=colour, alpha=tr.opacity if tr.opacity is not None else 1,
                               bottom=below)
            if stacked:
                for x, y in zip(xs, tr.y):
                    bottoms[x] = bottoms.get(x, 0.0) + float(y or 0.0)
            if target is ax:
                on_left.append((drawn, tr.text is not None))
            if tr.text is not None:
                texts = [tr.text] * len(xs) if isinstance(tr.text, str) else list(tr.text)
                target.bar_label(drawn, labels=texts, fontsize=8)
        else:
            mode = tr.mode or "lines"
            style = ("-" if "lines" in mode else "") if tr.line.dash is None \
                else _DASH.get(tr.line.dash, "--")
            marker = (_MARKER.get(tr.marker.symbol, "o") if "markers" in mode else None)
            target.plot(xs, list(tr.y), linestyle=style or "none", marker=marker,
                        color=tr.line.color or (tr.marker.color if isinstance(
                            tr.marker.color, str) else None),
                        label=label, markersize=(tr.marker.size or 6) * 0.8)
    if cats:
        ax.set_xticks(range(len(cats)), [str(c).replace("<br>", "\n") for c in cats], fontsize=8,
                      rotation=20 if len(cats) > 4 else 0)
    _axis(ax, layout.xaxis, "x")
    _axis(ax, layout.yaxis, "y")
    if not stacked:  # a stack's parts are read as shares of its height: linear
        _log_if_bars_vanish(ax, on_left, layout.yaxis)
    if right is not None:
        _axis(right, layout.yaxis2, "y")
        ax.set_zorder(right.get_zorder() + 1)  # the lines over the second axis's bars
        ax.patch.set_visible(False)
    if layout.title.text:
        ax.set_title(layout.title.text, fontsize=11, loc="left")
    handles, labels = ax.get_legend_handles_labels()
    if right is not None:
        h2, l2 = right.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    if len(labels) > 1 or (labels and layout.showlegend):
        ax.legend(handles, labels, fontsize=7.5, loc="upper left")
    ax.grid(alpha=0.3)


#: on a linear axis, a bar this much shorter than the tallest is a sliver on paper
VANISH_RATIO = 25.0


def _log_if_bars_vanish(ax: Axes, drawn: Sequence[tuple[Any, bool]], spec: Any) -> None:
    """Bars of a linear axis that would be slivers beside the tallest (the coordinated
    omission lesson: p50 5 ms beside a p99 of 500 ms) are drawn on a log axis instead, each
    bar without a label given its value, so the short ones are seen and read. The numbers are
    the figure's; only the scale differs from the page's chart, and its axis title says so.
    ``drawn``: each bar container of this axis, and whether the figure labelled it."""
    values = [float(p.get_height()) for bars, _ in drawn for p in bars]
    if spec.type == "log" or not values or min(values) <= 0 \
            or max(values) / min(values) < VANISH_RATIO:
        return
    title = ax.get_ylabel()
    ax.set_yscale("log")
    ax.set_ylim(min(values) / 2, max(values) * 3)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # 10, not 10¹
    ax.set_ylabel(f"{title}, log scale" if title else "log scale", fontsize=9)
    unit = " ms" if "ms" in title else ""
    for bars, labelled in drawn:
        if not labelled:
            ax.bar_label(bars, labels=[f"{p.get_height():.3g}{unit}" for p in bars],
                         fontsize=8)


def _axis(ax: Axes, spec: Any, which: str) -> None:
    title = spec.title.text if spec.title is not None else None
    if title:
        (ax.set_xlabel if which == "x" else ax.set_ylabel)(title, fontsize=9)
    if spec.type == "log":
        (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    elif spec.rangemode == "tozero" and which == "y":
        ax.set_ylim(bottom=0)
    if spec.tickvals is not None:
        labels = spec.ticktext if spec.ticktext is not None else [f"{v:g}" for v in spec.tickvals]
        (ax.set_xticks if which == "x" else ax.set_yticks)(list(spec.tickvals), list(labels))
    if spec.range is not None:  # a log axis's range is in powers of ten, as Plotly's is
        span = [10 ** v for v in spec.range] if spec.type == "log" else list(spec.range)
        (ax.set_xlim if which == "x" else ax.set_ylim)(*span)


__all__ = ["FORMATS", "Handout", "draw_plotly"]
