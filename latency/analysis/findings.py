"""Findings (the warnings a reader must see next to the numbers) and the verdict, as values.

Both are strings — they print, compare and serialise as the sentence they say, so the JSON and
the history hold plain text as before — that also know what they are about: a finding's
``kind`` (``overloaded``, ``too_few``, ``errors``...) lets code ask "was this run overloaded?"
without matching words, and the verdict knows which component leads and by how much.
"""
from __future__ import annotations

from typing import Any

#: finding kinds: what a warning is about.
KINDS = ("run", "machine", "too_few", "overloaded", "schedule_lag", "errors", "transport",
         "unstable", "recorded")


class Finding(str):
    """One warning: its sentence, and its ``kind`` (one of ``KINDS``)."""

    kind: str

    def __new__(cls, text: str, kind: str = "recorded") -> Finding:
        obj = super().__new__(cls, text)
        obj.kind = kind
        return obj

    def __reduce__(self) -> tuple[Any, ...]:  # pickles across the run process's pipe
        return (Finding, (str(self), self.kind))

    def __repr__(self) -> str:
        return f"Finding({self.kind}: {str(self)!r})"


def findings(texts: list[str] | None, kind: str = "recorded") -> list[Finding]:
    """Findings from plain strings (a run's own warnings, or a stored summary's)."""
    return [t if isinstance(t, Finding) else Finding(str(t), kind) for t in texts or []]


class Verdict(str):
    """The one-line verdict, and what it rests on: the component with the largest share of the
    mean (``top``, ``share``), None when nothing was measured."""

    top: str | None
    share: float | None

    def __new__(cls, text: str, top: str | None = None, share: float | None = None
                ) -> Verdict:
        obj = super().__new__(cls, text)
        obj.top, obj.share = top, share
        return obj

    def __reduce__(self) -> tuple[Any, ...]:
        return (Verdict, (str(self), self.top, self.share))

    def __repr__(self) -> str:
        return f"Verdict({str(self)!r})"
