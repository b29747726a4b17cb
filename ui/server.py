"""The dashboard server's singletons: one of each for every session of the server
(``st.cache_resource``), as a room of browsers shares one machine.

- the run manager: runs execute one at a time, each in its own process; everybody watches the
  same runs;
- the run groups (an A/B's blocks, a lesson's runs), kept for the whole room;
- the room (presenter mode, guesses), the audience (the pages watching runs) and the page
  turns (timer-driven whole-page reruns, a few at a time).
"""
from __future__ import annotations

import streamlit as st

from latency.execution.manager import RunManager
from latency.workshop.groups import RunGroups
from latency.workshop.room import Room
from ui.audience import Audience
from ui.page_turns import PageTurns


@st.cache_resource
def run_manager() -> RunManager:
    """The server-wide run manager (created once, shared by all sessions)."""
    return RunManager()


@st.cache_resource
def run_groups() -> RunGroups:
    """The server-wide run groups (an A/B's blocks, a lesson's runs), kept for the room."""
    return RunGroups(run_manager())


@st.cache_resource
def room() -> Room:
    """The server-wide presentation (presenter mode): who presents, and what they show."""
    return Room()


@st.cache_resource
def audience() -> Audience:
    """The server-wide count of pages watching runs (ui/audience.py)."""
    return Audience()


@st.cache_resource
def page_turns() -> PageTurns:
    """The server-wide turns of timer-driven whole-page reruns (ui/page_turns.py)."""
    return PageTurns()


__all__ = ["audience", "page_turns", "room", "run_groups", "run_manager"]
