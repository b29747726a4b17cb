"""Who may do what on the dashboard. A server started with ``LATENCY_LAB_INSTRUCTOR_KEY=<secret>``
is shared by a room: an instructor (who entered the same secret in the sidebar) may stop
anyone's run, rename or delete any saved run, run the workshop's lessons and reveal their
answers; without a key it is a personal dashboard, where its one user may do everything."""
from __future__ import annotations

import hmac
import os

import streamlit as st

from ui.session import session_id

INSTRUCTOR_ENV = "LATENCY_LAB_INSTRUCTOR_KEY"


def key_matches(entered: str, key: str) -> bool:
    """Constant-time comparison of the instructor key, as UTF-8 bytes (``compare_digest`` on
    str refuses anything but ASCII, which would crash the page on a typed "é")."""
    return hmac.compare_digest(entered.encode("utf-8"), key.encode("utf-8"))


def is_instructor() -> bool:
    return bool(st.session_state.get("instructor"))


def shared_room() -> bool:
    """A server started with an instructor key is shared by a room; without one it is a
    personal dashboard (bound to 127.0.0.1 by default, see .streamlit/config.toml)."""
    return bool(os.environ.get(INSTRUCTOR_ENV))


def may_manage(owner: str | None) -> bool:
    """Whether this session may rename or delete a saved run: always on a personal
    dashboard; in a shared room, only the session that ran it, or an instructor."""
    return not shared_room() or is_instructor() or (owner is not None and owner == session_id())


def can_manage_room() -> bool:
    """Whether this session runs the workshop's lessons and reveals their answers: anyone on a
    personal dashboard; in a shared room, an instructor (students guess)."""
    return not shared_room() or is_instructor()


def may_see_server_details() -> bool:
    """File paths and raw errors of the server are for its owner, not for visitors."""
    return not shared_room() or is_instructor()


def instructor_box() -> None:
    """Sidebar unlock for instructors (only shown when the server has a key configured)."""
    key = os.environ.get(INSTRUCTOR_ENV)
    if not key:
        return
    with st.sidebar.expander("Instructor", expanded=False):
        if is_instructor():
            st.success("Instructor mode: you can stop any run and rename or delete any saved "
                       "run.")
            return
        entered = st.text_input("Instructor key", type="password",
                                help="The key the server was started with "
                                     f"({INSTRUCTOR_ENV}); lets you stop anyone's run.")
        if entered:
            if key_matches(entered, key):
                st.session_state["instructor"] = True
                st.rerun()
            else:
                st.error("Wrong key.")


__all__ = ["INSTRUCTOR_ENV", "can_manage_room", "instructor_box", "is_instructor",
           "key_matches", "may_manage", "may_see_server_details", "shared_room"]
