"""Presenter mode in the dashboard: the instructor's session publishes its page, its controls'
settings and its run (``latency.workshop.room``); every other session follows them.

How a follower follows: at the top of every rerun (``app.py``, before the page's widgets
render) it copies the presentation's settings into its own session state and, if it is on
another page, switches to the presenter's; a small fragment looks once a second for a newer
presentation and reruns the page when there is one. A follower who moves a control is put
back at the next rerun: the projector's settings win until the instructor releases the room.

Which session-state keys travel: only those listed in ``TRAVELS`` (and ``TRAVEL_PREFIXES``,
for controls made per item) — the pages' controls and the page state that says what they
show. Everything else stays in its session: who it is, its guesses and confirmations, the
keys of buttons (Streamlit refuses a button whose key was set from session state), and any
key nobody listed, so a new widget does not reach the followers' screens by accident. A new
control that should follow the projector is added here; ``tests/test_room.py`` checks that
no button's key travels.

A reloaded presenter resumes: a reload is a new Streamlit session, so the page that presented
is gone and the new one is, at first, a follower. The presenting page keeps a token in its URL
(``?presenter=…``), which a reload carries and no other page has; once the instructor key is
entered again on the page that carries it, it takes the presentation over as it stands
(``latency.workshop.room.Room.resume``: the same page, settings and run — the followers'
screens do not move) instead of "Another instructor is presenting". Gone means the server no
longer holds the presenting page's browser session (``connected``); another instructor's page
that is still open keeps the room until Present takes it over.
"""
from __future__ import annotations

import uuid
from typing import Any

import streamlit as st

from latency.workshop.room import Presentation
from ui.priority import yield_cpu_to_runs
from ui.reruns import rerun_page
from ui.rights import is_instructor
from ui.server import room, run_manager
from ui.session import session_id

#: the session-state keys that travel from the presenter to the followers, page by page
TRAVELS = frozenset({
    # Live Profiler: the run's controls (ui/controls.py)
    "model", "pre_ms", "fwd_ms", "post_ms", "stage_dist", "error_rate", "stall_ms", "device",
    "dtype", "threads", "replicas", "batch", "delay", "mode", "concurrency", "rate", "arrival",
    "duration", "slo", "backend", "ray_preprocess", "transport", "payload", "net_rtt",
    "net_jitter", "net_bw",
    # Optimisation Lab: the A/B's arms, the what-if, and the lesson step and A/B shown
    "lab_model", "lab_pre", "lab_post", "lab_batch", "lab_delay", "lab_replicas", "lab_threads",
    "lab_workers", "lab_concurrency", "lab_block_s", "lab_pairs", "lab_b_levers", "lab_b_pre",
    "lab_b_post", "lab_b_workers", "lab_b_replicas", "lab_b_batch", "wi_arm", "wi_comp",
    "wi_pct", "lesson_step", "ab_group",
    # Load Simulator
    "sim_source", "sim_service", "sim_dist", "sim_cv", "sim_per_item", "sim_arrival",
    "sim_replicas", "sim_batch", "sim_delay", "sim_rate", "sim_slo", "sim_plan", "sim_val_len",
    "sim_as_recorded", "sim_kind", "live_kind",
    # Compare Runs: the filters, the runs compared, the run being renamed
    "cmp_text", "cmp_models", "cmp_status", "cmp_runs", "cmp_logy", "cmp_target", "cmp_kind",
    # Workshop: the lesson a shared link opened
    "workshop_focus",
})
#: prefixes of controls made per item that travel: a pipeline's own arguments
#: (``arg_<model>_<name>``), the what-if's load per arm, a run's new name; and the Load
#: Simulator's and the Live Profiler's generation modes (``gsim_``, ``glive_``:
#: ui/gen_controls.py), and Compare Runs' (``gcmp_``: ui/compare_generations.py)
TRAVEL_PREFIXES = ("arg_", "wi_load_", "wi_rate_", "cmp_name_", "gsim_", "glive_", "gcmp_")


def travels(key: str) -> bool:
    """Whether a session-state key is copied from the presenter to followers: only the keys
    listed (``TRAVELS``, ``TRAVEL_PREFIXES``)."""
    return key in TRAVELS or key.startswith(TRAVEL_PREFIXES)


def shared_settings() -> dict[str, Any]:
    """This session's controls as the presenter publishes them."""
    return {k: v for k, v in st.session_state.items() if travels(str(k))}


def connection_id() -> str | None:
    """This page's browser session on the Streamlit server (None outside a script run)."""
    try:
        from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
    except ImportError:  # another Streamlit
        return None
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else None


def connected(connection: str | None) -> bool | None:
    """Whether the Streamlit server still holds that browser session (a reloaded or closed
    page's is dropped at once); None where it cannot say (no server: AppTest, a script, or
    another Streamlit), and the room then goes by the presenter's check-ins."""
    if connection is None:
        return None
    try:
        from streamlit.runtime import Runtime

        if not Runtime.exists():
            return None
        alive = Runtime.instance().is_active_session(connection)
    except Exception:  # noqa: BLE001 - an internal API that moved: say "cannot tell"
        return None
    return alive if isinstance(alive, bool) else None  # AppTest's Runtime is a mock


def presenter_gone(p: Presentation) -> bool:
    """Whether the presenting page is gone (reloaded, closed): see ``connected``."""
    alive = connected(p.connection)
    return room().gone(None if alive is None else not alive)


#: session-state key: what a follower's own action keeps from the projector (``keep_own``)
OWN = "room_own"


def keep_own(keys: list[str]) -> None:
    """A follower's own action — a lesson step it pressed, whose A/B it then watches — keeps
    these keys at this session's values instead of the projector's, until the projector moves
    on: its page, or any of these keys' values there, change (the instructor goes to another
    step or A/B). Without it the next rerun put the follower's screen back to the projector's
    step while its own step's A/B ran. Outside presenter mode it does nothing."""
    p = room().current()
    if p is None or not st.session_state.get("room_following"):
        return
    st.session_state[OWN] = {"page": p.page, "theirs": {k: p.settings.get(k) for k in keys}}


def own_keys(p: Presentation) -> frozenset[str]:
    """The keys this follower keeps (``keep_own``) while the projector shows what it showed
    then; forgets them once it shows something else."""
    own = st.session_state.get(OWN)
    if not own:
        return frozenset()
    if own["page"] != p.page or any(p.settings.get(k) != v for k, v in own["theirs"].items()):
        st.session_state.pop(OWN, None)
        return frozenset()
    return frozenset(own["theirs"])


def adopt(p: Presentation, pages: dict[str, Any], here: str) -> None:
    """Take the presentation's settings and run into this session (before the page's widgets
    render) and go to its page — but the keys a follower's own action keeps (``own_keys``)."""
    kept = own_keys(p)
    for key, value in p.settings.items():
        if not travels(key) or key in kept:
            continue
        try:
            st.session_state[key] = value
        except Exception:  # noqa: BLE001, S112 - a value this page's widget refuses: skip it
            continue
    if p.run_id is not None:
        st.session_state["watch"] = p.run_id
    st.session_state["room_version"] = p.version
    if p.page != here and p.page in pages:
        go_to(pages[p.page])


#: the query parameter of the presenting page's token (``Presentation.browser``)
PRESENTER_PARAM = "presenter"


def browser_token() -> str | None:
    """The presentation token this page's URL carries, if any."""
    value = st.query_params.get(PRESENTER_PARAM)
    return value if isinstance(value, str) and value else None


def resume(pages: dict[str, Any], here: str) -> Presentation | None:
    """An instructor's session takes over a presentation whose page is gone (its own, before
    a reload: the URL carries its token): it shows what the room shows and presents from
    there. None: nothing resumed."""
    p = room().current()
    me = session_id()
    if p is None or p.presenter == me or not is_instructor():
        return None
    alive = connected(p.connection)
    mine = room().resume(me, connection_id(), None if alive is None else not alive,
                         browser_token())
    if mine is None:
        return None
    st.session_state.pop("room_following", None)
    st.session_state["room_resumed"] = True
    adopt(mine, pages, here)
    return mine


def follow(pages: dict[str, Any], here: str) -> Presentation | None:
    """Before the page renders: an instructor whose presenting page is gone resumes it
    (``resume``); a follower takes the presenter's settings and run, and goes to the
    presenter's page. An instructor does not follow another page's presentation whose page
    is gone (``left_behind``). Returns the presentation followed (None: free, or
    presenting)."""
    st.session_state.setdefault("room_opened", here)  # the page this session's URL named
    if resume(pages, here) is not None:
        return None
    p = room().current()
    me = session_id()
    if p is None or p.presenter == me:
        st.session_state.pop("room_following", None)
        st.session_state.pop(OWN, None)
        return None
    if is_instructor() and presenter_gone(p):
        left_behind(pages, here)
        return None
    st.session_state["room_following"] = True
    adopt(p, pages, here)
    return p


def left_behind(pages: dict[str, Any], here: str) -> None:
    """An instructor and a presentation another page started, whose page is gone: not
    followed, and, if following it had moved this session (before its key was entered), back
    to the page it opened. The sidebar says why (``presenter_controls``)."""
    dragged = st.session_state.pop("room_following", None)
    st.session_state.pop(OWN, None)
    opened = st.session_state.get("room_opened")
    if dragged and opened != here and opened in pages:
        go_to(pages[opened])


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
    p = room().publish(me, here, shared_settings(), rid, connection_id())
    if p is not None:
        st.session_state["room_version"] = p.version
        if p.browser is not None and browser_token() != p.browser:
            st.query_params[PRESENTER_PARAM] = p.browser  # a page change dropped it


def banner(p: Presentation | None) -> None:
    """A follower's page says whom it follows and why its controls snap back."""
    if p is not None:
        own = (" The lesson step you started stays on your screen until the instructor's "
               "moves on." if st.session_state.get(OWN) else "")
        st.info("**Following the instructor's screen** — the page, its settings and its run "
                "follow the projector live. Your own exploring starts when the instructor "
                "releases the room." + own, icon=":material/cast_for_education:")


def stale() -> bool:
    """Whether the room changed since this page rendered: a newer presentation, or one that
    began or ended, or (for an instructor) one whose presenting page is gone, to resume. The
    presenter's own page never is stale: asked once a second, it checks in instead (its page
    is open)."""
    p = room().current()
    following = bool(st.session_state.get("room_following"))
    if p is None:
        return following
    if p.presenter == session_id():
        room().seen(p.presenter)
        return False
    if is_instructor() and presenter_gone(p):
        # its own page's presentation to resume, or another's to stop following
        return following or (p.browser is not None and p.browser == browser_token())
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
        resumed = st.session_state.pop("room_resumed", False)
        st.sidebar.caption("Presenting: every other screen follows yours."
                           + (" Resumed where the room was: the page that presented is gone "
                              "(a reload or a closed tab)." if resumed else ""))
        if st.sidebar.button("Release", key="room_release", icon=":material/cancel_presentation:",
                     help="Hand control back: students keep what they see and explore from "
                          "there."):
            room().release(me)
            st.rerun()
        return
    if p is not None and presenter_gone(p):
        st.sidebar.caption("An earlier presentation, started on another page, still holds the "
                           "room: its page is gone, closed without Release. Students see its "
                           "last screen; Present takes the room over from here.")
    elif p is not None:
        st.sidebar.caption("Another instructor is presenting.")
    if st.sidebar.button("Present", key="room_present", icon=":material/cast:",
                 help="Every connected page follows yours: the same page, the same settings, "
                      "the same run, live. Students see the projector on their own screens."):
        token = uuid.uuid4().hex
        st.query_params[PRESENTER_PARAM] = token  # a reload of this page carries it
        room().present(me, here, shared_settings(), st.session_state.get("watch"),
                       connection_id(), token)
        st.rerun()


__all__ = ["OWN", "OWN_WATCH", "PRESENTER_PARAM", "TRAVELS", "TRAVEL_PREFIXES", "adopt",
           "banner", "browser_token", "connected", "connection_id", "follow", "keep_own",
           "left_behind", "own_keys", "presenter_controls",
           "presenter_gone", "publish", "resume", "shared_settings", "stale", "travels",
           "watch"]
