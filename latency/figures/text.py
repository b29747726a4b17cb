"""User text (a run's name) in a figure, shown as the characters it is.

Plotly renders a subset of HTML in trace names, tick labels and hover text — ``<a href>``
becomes a live link, ``<b>``, ``<i>``, ``<sup>`` change the text — and a run's name is chosen
by whoever ran it, in a shared room a student. Escaped as HTML entities, which Plotly shows as
the characters they stand for.
"""
from __future__ import annotations

import html


def as_text(text: object) -> str:
    """``text`` for a Plotly name or label: its HTML signs as entities (``<`` → ``&lt;``)."""
    return html.escape(str(text), quote=False)


#: the longest legend entry a half-width chart shows whole (Plotly cuts a longer one off at
#: the chart's edge; a horizontal legend wraps between entries, never inside one)
LEGEND_CHARS = 48


def legend_text(text: object, limit: int = LEGEND_CHARS) -> str:
    """``text`` for a legend entry: as ``as_text``, shortened to ``limit`` characters with an
    ellipsis (the Compare page's p99 marker keeps the whole name in its hover, the runs table
    beside the chart too)."""
    plain = " ".join(str(text).split())
    return as_text(plain if len(plain) <= limit else plain[: limit - 1].rstrip() + "…")


__all__ = ["LEGEND_CHARS", "as_text", "legend_text"]
