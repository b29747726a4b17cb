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
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
from matplotlib.axes import Axes
from matplotlib.figure import Figure

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
        several threads at once cannot draw on each other's page."""
        fig = Figure(figsize=PAGE_IN)
        fig.text(0.05, 0.95, self.title, fontsize=18, weight="bold", va="top")
        y = _paragraph(fig, 0.895, "Question", self.question)
        y = _paragraph(fig, y, "The room's guesses", self.guesses)
        y = _paragraph(fig, y, "Measured", self.answer + "".join(
            f" {c}" if c.endswith(".") else f" {c}." for c in self.checks))
        height = max(0.2, y - 0.27)
        draw_plotly(self.figure, fig.add_axes((0.07, 0.2, 0.47, height)))
        top = 0.2 + height
        for rows in self.tables:  # stacked in the right column, each as tall as its rows
            h = 0.034 * (len(rows) + 1)
            _table(fig, rows, (0.64, top - h, 0.32, h))
            top -= h + 0.04
        fig.text(0.05, 0.115, "\n".join(textwrap.wrap(self.idea, 145)), fontsize=9.5,
                 va="top", style="italic")
        fig.text(0.05, 0.02, "\n".join(textwrap.wrap(self.provenance, 200)), fontsize=8,
                 color="#555555", va="bottom")
        return fig


def _paragraph(fig: Figure, y: float, head: str, body: str, width: int = 150) -> float:
    lines = textwrap.wrap(body, width) or [""]
    fig.text(0.05, y, head, fontsize=11, weight="bold", va="top")
    fig.text(0.05, y - 0.028, "\n".join(lines), fontsize=10, va="top")
    return y - 0.028 - 0.027 * len(lines) - 0.02


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
    grouped bars, log axes, bar labels, dashed lines). A trace kind it does not know raises,
    rather than leaving a chart silently incomplete."""
    layout = figure.layout
    cats: list[Any] = []
    for tr in figure.data:
        if layout.xaxis.type == "category" or tr.type == "bar":
            cats.extend(x for x in (tr.x or ()) if x not in cats)
    pos = {c: i for i, c in enumerate(cats)}
    bars = [tr for tr in figure.data if tr.type == "bar"]
    grouped = layout.barmode == "group" and len(bars) > 1
    width = 0.8 / len(bars) if grouped else 0.8
    right: Axes | None = None
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
            drawn = target.bar([x + shift for x in xs], list(tr.y), width=width, label=label,
                               color=colour, alpha=tr.opacity if tr.opacity is not None else 1)
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
        ax.set_xticks(range(len(cats)), [str(c) for c in cats], fontsize=8,
                      rotation=20 if len(cats) > 4 else 0)
    _axis(ax, layout.xaxis, "x")
    _axis(ax, layout.yaxis, "y")
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
    if spec.range is not None and spec.type != "log":
        (ax.set_xlim if which == "x" else ax.set_ylim)(*spec.range)


__all__ = ["FORMATS", "Handout", "draw_plotly"]
