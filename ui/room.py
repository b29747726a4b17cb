"""Presenter mode in the dashboard: the instructor's session publishes its page, its controls'
settings and its run (``latency.workshop.room``); every other session follows them.

How a follower follows: at the top of every rerun (``app.py``, before the page's widgets
render) it copies the presentation's settings into its own session state and, if it is on
another page, switches to the presenter's; a small fragment looks once a second for a newer
presentation and reruns the page when there is one. A follower who moves a control is put
back at the next rerun: the projector's settings win until the instructor releases the room.

Which session-state keys travel: every JSON-able one except this session's own (who it is,
its guesses, its confirmations) and the keys of buttons (Streamlit refuses a button whose key
was set from session state). ``tests/test_room.py`` checks that every button's key is listed.
"""
from __future__ import annotations

from typing import Any

import streamlit as st

from latency.workshop.room import Presentation
from ui.shared import (
    is_instructor,
    rerun_page,
    room,
    run_manager,
    session_id,
    yield_cpu_to_runs,
)

#: session-state keys that are this session's own, never copied from the presenter
OWN_KEYS = frozenset({
    "owner", "instructor", "watch", "shown", "lesson_answer", "cmp_confirm",
    "sim_validation", "sim_validation_shown", "room_version", "room_following",
    "workshop_seen",
})
#: keys of buttons (and forms' submit buttons): Streamlit refuses them from session state
BUTTON_KEYS = frozenset({
    "cmp_delete", "cmp_delete_no", "cmp_delete_yes", "cmp_rename", "lesson_leave",
    "lesson_start", "lesson_help", "sim_validate", "lab_submit", "room_present",
    "room_release",
})


#: prefixes of keys that are a session's own (its guesses) or buttons made per lesson
OWN_PREFIXES = ("_", "guess_", "lesson_run_", "lesson_reveal_", "lesson_send_", "handout_",
                "cmp_dl_")


def travels(key: str) -> bool:
    """Whether a session-state key is copied from the presenter to followers."""
    return key not in OWN_KEYS and key not in BUTTON_KEYS and not key.startswith(OWN_PREFIXES)


def shared_settings() -> dict[str, Any]:
    """This session's controls as the presenter publishes them."""
    return {k: v for k, v in st.session_state.items() if travels(str(k))}


def follow(pages: dict[str, Any], here: str) -> Presentation | None:
    """Before the page renders: a follower takes the presenter's settings and run, and goes
    to the presenter's page. Returns the presentation followed (None: free, or presenting)."""
    p = room().current()
    me = session_id()
    if p is None or p.presenter == me:
        st.session_state.pop("room_following", None)
        return None
    for key, value in p.settings.items():
        if not travels(key):
            continue
        try:
            st.session_state[key] = value
        except Exception:  # noqa: BLE001, S112 - a value this page's widget refuses: skip it
            continue
    if p.run_id is not None:
        st.session_state["watch"] = p.run_id
    st.session_state["room_version"] = p.version
    st.session_state["room_following"] = True
    if p.page != here and p.page in pages:
        go_to(pages[p.page])
    return p


def go_to(page: Any) -> None:
    """``st.switch_page`` that keeps the query string. Streamlit 1.67's switch_page clears the
    query parameters, which it refuses while widgets are bound to them (every control here
    is); this asks for the same rerun on the other page without clearing them."""
    try:
        from streamlit.commands.execution_control import _force_yield_point
        from streamlit.runtime.scriptrunner import RerunData
        from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
    except ImportError:  # another Streamlit: its own switch_page
        st.switch_page(page)
        return
    ctx = get_script_run_ctx()
    if ctx is None or ctx.script_requests is None:
        return
    ctx.script_requests.request_rerun(RerunData(
        query_string=ctx.query_string, page_script_hash=page._script_hash,
        cached_message_hashes=ctx.cached_message_hashes, context_info=ctx.context_info))
    _force_yield_point()


def publish(here: str) -> None:
    """After the page rendered: the presenter's session publishes what it shows now."""
    me = session_id()
    if not room().presenting(me):
        return
    rid = st.session_state.get("watch")
    if rid is None:
        latest = run_manager().latest()
        rid = latest.run_id if latest is not None else None
    p = room().publish(me, here, shared_settings(), rid)
    if p is not None:
        st.session_state["room_version"] = p.version


def banner(p: Presentation | None) -> None:
    """A follower's page says whom it follows and why its controls snap back."""
    if p is not None:
        st.info("**Following the instructor's screen** — the page, its settings and its run "
                "follow the projector live. Your own exploring starts when the instructor "
                "releases the room.", icon=":material/cast_for_education:")


def stale() -> bool:
    """Whether the room changed since this page rendered: a newer presentation, or one that
    began or ended (for the presenter itself, never)."""
    p = room().current()
    following = bool(st.session_state.get("room_following"))
    if p is None:
        return following
    if p.presenter == session_id():
        return False
    return not following or st.session_state.get("room_version") != p.version


#: pages whose own once-a-second look also asks ``stale()``: one timer a page, not two (a
#: room of pages with two timers each saturated the server: ui/page_turns.py)
OWN_WATCH = frozenset({"live", "workshop"})


@st.fragment(run_every=1.0)
def watch() -> None:
    """Once a second, on pages without a look of their own: the room changed → rerun."""
    yield_cpu_to_runs()
    if stale():
        rerun_page()


def presenter_controls(here: str) -> None:
    """For instructors, in the sidebar: Present / Release."""
    if not is_instructor():
        return
    st.sidebar.markdown("**Workshop room**")
    me = session_id()
    p = room().current()
    if p is not None and p.presenter == me:
        st.sidebar.caption("Presenting: every other screen follows yours.")
        if st.sidebar.button("Release", key="room_release", icon=":material/cancel_presentation:",
                     help="Hand control back: students keep what they see and explore from "
                          "there."):
            room().release(me)
            st.rerun()
        return
    if p is not None:
        st.sidebar.caption("Another instructor is presenting.")
    if st.sidebar.button("Present", key="room_present", icon=":material/cast:",
                 help="Every connected page follows yours: the same page, the same settings, "
                      "the same run, live. Students see the projector on their own screens."):
        room().present(me, here, shared_settings(), st.session_state.get("watch"))
        st.rerun()


__all__ = ["BUTTON_KEYS", "OWN_KEYS", "OWN_WATCH", "banner", "follow", "presenter_controls",
           "publish", "shared_settings", "stale", "watch"]
