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


__all__ = ["as_text"]
