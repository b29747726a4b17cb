"""Who this browser session is: a random id kept in its session state. It owns the runs it
starts, its guesses and its presentation."""
from __future__ import annotations

import uuid

import streamlit as st


def session_id() -> str:
    """A random id for this browser session: it owns the runs it starts."""
    if "owner" not in st.session_state:
        st.session_state["owner"] = uuid.uuid4().hex
    return st.session_state["owner"]


__all__ = ["session_id"]
