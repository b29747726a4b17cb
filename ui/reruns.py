"""Whole-page reruns that a fragment's timer asks for, in turns (``ui/page_turns.py``): a
room's pages all see the same change in the same second, so they catch up a few at a time."""
from __future__ import annotations

import streamlit as st

from ui.server import page_turns
from ui.session import session_id


def rerun_page() -> None:
    """A fragment's whole-page rerun after it saw a change, when it is this page's turn;
    otherwise nothing now — the fragment looks again at its next tick."""
    if page_turns().take(session_id()):
        st.rerun()


def page_done() -> None:
    """At the end of every whole-page run (``app.py``): this page's turn is over."""
    page_turns().end(session_id())


__all__ = ["page_done", "rerun_page"]
