"""The machine while a run measured, on every page that shows a result's validity (Live
Profiler, Compare Runs, the Optimisation Lab): a DISTURBED badge with its numbers, and the
warning that runs or arms were measured on an unequally busy machine. The words and numbers
come from ``latency.analysis.machine`` (pure functions); this only places them."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from latency.analysis.machine import badge_label, disturbed_mark, pooled_mark, sampled

ICON = ":material/warning:"


def disturbed_badge(environment: Mapping[str, Any] | None, who: str = "",
                    note: str | None = None) -> bool:
    """An orange DISTURBED badge with the machine's numbers, when the run was measured on a
    busy machine (nothing for a quiet run, nor for one without samples); the whole sentence
    in its tooltip. True when shown. ``who``: the run's letter ('B'), put before it;
    ``note``: a caption beside it (fixed words), saying what it means there."""
    label = badge_label(sampled(environment))
    if label is None:
        return False
    if note is None:
        return badge(label, disturbed_mark(environment), who)
    with st.container(horizontal=True, wrap=False, vertical_alignment="center", gap="small"):
        badge(label, disturbed_mark(environment), who)
        st.caption(note, width="stretch")
    return True


def badge_row() -> Any:
    """A row for several runs' or arms' badges, side by side (wrapping when they do not fit):
    ``with badge_row(): ...``."""
    return st.container(horizontal=True, gap="small")


def arm_badge(machine: Mapping[str, Any] | None, arm: str) -> bool:
    """An A/B arm's DISTURBED badge, from its blocks' machine pooled (``ArmStats.machine``)."""
    return badge(badge_label(machine), pooled_mark(machine), arm)


def badge(label: str | None, sentence: str | None, who: str = "") -> bool:
    if label is None:
        return False
    # (numbers and fixed words only: no user text goes into the badge's Markdown)
    st.badge((f"{who} " if who else "") + label, icon=ICON, color="orange", help=sentence)
    return True


def unequal_warning(text: str | None) -> None:
    """The runs or arms were disturbed unequally (``unequal_disturbance``): say so."""
    if text:
        st.warning(f"**Machine:** {text}", icon=ICON)


__all__ = ["arm_badge", "badge", "badge_row", "disturbed_badge", "unequal_warning"]
