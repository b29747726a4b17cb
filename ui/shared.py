"""Singletons and caches shared by every session of the dashboard server.

- One ``RunManager`` per server (``st.cache_resource``): runs execute one at a time, each in
  its own process; everybody watches the same runs.
- Figures are built once per (run, snapshot version, SLO) and shared by every viewer, so
  thirty browsers cost one build per second, not thirty. ``st.cache_resource`` rather than
  ``st.cache_data``: the latter unpickles a copy for every reader (~50 ms a figure); the
  figures are never mutated after they are built, so sharing the object is safe.
- Instructor rights: start the server with ``LATENCY_LAB_INSTRUCTOR_KEY=<secret>`` and enter
  the same secret in the sidebar; an instructor may stop anyone's run.
"""
from __future__ import annotations

import hmac
import os
import threading
import uuid
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from latency.execution.manager import RunManager
from latency.figures import plots
from latency.workshop.groups import RunGroups
from latency.workshop.room import Room
from ui.audience import Audience
from ui.page_turns import PageTurns

INSTRUCTOR_ENV = "LATENCY_LAB_INSTRUCTOR_KEY"


def startup_pipelines(argv: list[str] | None = None) -> list[str]:
    """``streamlit run app.py -- --pipeline file.py:Name [--pipeline mod:Name]``: add those
    specs to ``$LATENCY_LAB_PIPELINES`` (inherited by every run process), so the shared
    dashboard offers them by name. A browser never sends code or model files; only whoever
    starts the server names pipelines. Returns the specs added."""
    import sys

    from latency.pipelines.registry import STARTUP_ENV

    args = list(sys.argv[1:] if argv is None else argv)
    specs = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--pipeline"]
    specs += [a.split("=", 1)[1] for a in args if a.startswith("--pipeline=")]
    have = [s for s in os.environ.get(STARTUP_ENV, "").split(",") if s.strip()]
    new = [s for s in specs if s not in have]
    if new:
        os.environ[STARTUP_ENV] = ",".join(have + new)
    return new


#: niceness of the dashboard's script threads: under CPU contention a thread at nice 10 gets
#: about a tenth of the share of one at nice 0, so a room of viewers yields to the measurement.
SCRIPT_NICENESS = 10


def yield_cpu_to_runs() -> None:
    """Lower the priority of the calling script thread (Linux: niceness is per thread).

    The profiling run executes in its own process and must not be slowed by thirty browsers
    re-rendering charts. Streamlit runs each script and fragment rerun in a fresh thread
    started from its (un-niced) event loop, so every render calls this first. The run
    process is spawned by the run manager's thread, which is created before any thread is
    niced, so runs keep normal priority. Raising niceness needs no privilege.
    """
    if not hasattr(os, "setpriority"):
        return
    try:
        tid = threading.get_native_id()
        if os.getpriority(os.PRIO_PROCESS, tid) < SCRIPT_NICENESS:
            os.setpriority(os.PRIO_PROCESS, tid, SCRIPT_NICENESS)
    except OSError:
        pass


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


def rerun_page() -> None:
    """A fragment's whole-page rerun after it saw a change, when it is this page's turn;
    otherwise nothing now — the fragment looks again at its next tick."""
    if page_turns().take(session_id()):
        st.rerun()


def page_done() -> None:
    """At the end of every whole-page run (``app.py``): this page's turn is over."""
    page_turns().end(session_id())


def session_id() -> str:
    """A random id for this browser session: it owns the runs it starts."""
    if "owner" not in st.session_state:
        st.session_state["owner"] = uuid.uuid4().hex
    return st.session_state["owner"]


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


_MARKDOWN_SPECIALS = set("\\`*_{}[]()#+-.!|<>~:$&")


def plain(text: object) -> str:
    """User text (a run's name, an error) shown as the characters it is: every Markdown,
    shortcode or LaTeX sign escaped, so a name like ``![p](http://host/x.png)`` makes no
    browser fetch anything."""
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIALS else ch for ch in str(text))


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


@st.cache_resource(max_entries=64, show_spinner=False)
def figures(run_id: str, version: int, slo_ms: float) -> dict[str, Any]:
    """Every chart of one snapshot version, built once and shared by all viewers."""
    handle = run_manager().get(run_id)
    if handle is None:
        return {}
    snap = handle.snapshot()
    if snap.summary is None or snap.hist_counts is None:
        return {"snapshot": snap}
    lat = snap.summary.latency_ms
    share = snap.share_within(slo_ms)
    return {
        "snapshot": snap,
        "bars": SharedFigure.of(plots.stacked_components_figure(snap.makeup_ms)),
        "histogram": SharedFigure.of(plots.latency_histogram_figure(
            snap.hist_edges_ms, snap.hist_counts,
            {"p50": lat.p50, "p95": lat.p95, "p99": lat.p99}, slo_ms, share)),
        "timeseries": SharedFigure.of(plots.timeseries_figure(
            snap.series, offered_rps=snap.config.rate)),
        "table": plots.summary_markdown(snap.summary),
        "share": share,
    }


@st.cache_resource(max_entries=8, show_spinner=False)
def placeholder(message: str, height: int | None = None) -> SharedFigure:
    """An empty chart saying what it waits for, built once for every page that shows it."""
    kwargs = {} if height is None else {"height": height}
    return SharedFigure.of(plots.empty_figure(message=message, **kwargs))


class SharedFigure(go.Figure):
    """A figure shown to every viewer: its dict form is computed once, not once per viewer.

    ``st.plotly_chart`` calls ``to_dict()`` (a deep copy and array encoding) on every render;
    with thirty browsers refreshing every second that was the server's largest cost. The
    figure is never mutated after it is built, so the dict is computed once and reused.
    """

    @classmethod
    def of(cls, fig: go.Figure) -> SharedFigure:
        """The same figure object, now shared. Not ``SharedFigure(fig)``: that copies the
        figure through Plotly's validators, template included — ~24 ms a chart, three charts
        a snapshot version, once a second for every run being watched."""
        fig.__class__ = cls
        return fig  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        cached = self.__dict__.get("_shared_dict")
        if cached is None:
            cached = super().to_dict()
            self.__dict__["_shared_dict"] = cached
        return cached


@st.cache_data(max_entries=8, show_spinner=False)
def downloads(run_id: str, version: int) -> tuple[bytes, str]:
    """CSV of requests and JSON of the result, once per finished run."""
    result = run_manager().get(run_id).result()  # type: ignore[union-attr]
    return result.csv_bytes(), result.json_text()
