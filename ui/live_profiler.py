"""The live part of the Live Profiler: status, progress, charts, verdict, downloads.

Rendered inside ``st.fragment(run_every=...)``: only this part reruns while a run is in
flight; its explanations (``explain``) sit outside the fragment and are sent once. Everything
it draws comes from cached figures of the shared snapshot (bins and statistics, never
samples).
"""
from __future__ import annotations

from typing import Any

import streamlit as st

from latency.analysis.snapshot import Snapshot
from latency.analysis.transport_summary import TransportSummary
from latency.analysis.validity import validity
from latency.core.config import RunConfig
from latency.core.describe import OUR_SERVER, load_description, server_label
from latency.execution.process import RunHandle
from ui.downloads import downloads
from ui.explain import COMPONENTS_TABLE, MISTAKES
from ui.figure_cache import figures, placeholder
from ui.machine import disturbed_badge
from ui.server import run_manager
from ui.text import plain

STATUS_ICON = {"queued": ":material/hourglass_top:", "running": ":material/play_circle:",
               "completed": ":material/check_circle:", "stopped": ":material/stop_circle:",
               "failed": ":material/error:"}

#: beside a finished run's DISTURBED badge: what it means for the numbers below it, and the
#: one other process a dashboard user may not think of (a browser on the same machine
#: rendering the live charts takes a good part of a core)
BADGE_NOTE = ("Times inflated: the machine was busy while this run measured (a browser "
              "showing this page on the same machine counts too). Details: **Validity**, "
              "below the charts.")

EXPLAIN_BARS = """
Each bar splits latency into the five components (plus overhead, the client's own gap).
**mean** and **p50** are typical requests; **p90** and **p99 (tail)** are built from the
requests *around* that percentile — not from per-component percentiles, which do not add up.
Compare the p99 bar with the p50 bar: the segment that grows is what makes the tail slow.
"""
EXPLAIN_HIST = """
How many requests took how long, on a log time axis (each bar is a ±6% band). Lines mark
p50, p95 and p99; the red dashed line is your SLO. A long right tail means a few requests are
far slower than the typical one — usually queueing, not the model.
"""
EXPLAIN_SERIES = """
Throughput (requests completed per second) and p50/p99 of the requests completed in each
second. Under open-loop overload p99 climbs steadily: the queue is growing.
"""


def run_buttons(config: RunConfig, handle: Any, say: str, keys: tuple[str | None, str | None]
                = (None, None)) -> None:
    """Start (queue ``config`` as this session's run, and watch it) and Stop (the shown run:
    yours, or any for an instructor), with what they do as a caption beside them — not as
    their tooltips: a tooltip opens above its button, over the page's title."""
    from latency.core.errors import ConfigError
    from latency.execution.manager import PermissionDenied
    from ui.rights import is_instructor
    from ui.session import session_id

    mgr, me = run_manager(), session_id()
    in_flight = handle is not None and not handle.done()
    mine = handle is not None and mgr.owner(handle.run_id) == me
    b1, b2, caption = st.columns([1, 1, 4], vertical_alignment="center")
    caption.caption(say)
    if b1.button("Start", icon=":material/play_arrow:", type="primary", key=keys[0]):
        try:
            ticket = mgr.submit(config, owner=me)
            st.session_state["watch"] = ticket.run_id
            st.rerun()
        except ConfigError as exc:
            where = (" On this page: **Context (tokens)** for synthetic-lm, a pipeline's "
                     "**Model arguments** → max_context for another."
                     if "max_context=" in str(exc) else "")
            st.error(f"Cannot start: {plain(exc)}{where}")
    can_stop = in_flight and (mine or is_instructor())
    if b2.button("Stop", icon=":material/stop:", disabled=not can_stop, key=keys[1]):
        try:
            mgr.stop(handle.run_id, requester=me, instructor=is_instructor())
        except (PermissionDenied, KeyError) as exc:
            st.error(plain(exc))


def render(handle: RunHandle, slo_ms: float, snap: Snapshot | None = None) -> Snapshot:
    """The run's live view, all of it from one snapshot — ``snap``, the one the page took in
    this run, else one taken here, once — which it returns (the page decides from the same
    one whether the first charts are up)."""
    mgr = run_manager()
    position = mgr.position(handle.run_id)
    if position and position > 0:
        current = mgr.current()
        st.info(f"Your run is number {position} in line; the server runs one at a time. "
                + (f"Now running: {plain(current.config.model)}." if current else ""))
    if snap is None:
        snap = handle.snapshot()  # the one snapshot of this render
    figs = figures(snap, slo_ms)
    c = snap.config
    if "bars" not in figs:
        head(snap)
        # the charts' places, each saying what it waits for: the layout does not jump when
        # the data comes, and the browser has Plotly loaded by then (loading it on the first
        # real chart took ~2 s of the first figures' time)
        st.caption("Waiting for the first measured requests…")
        waiting = "waiting for the first measured requests…"
        left, right = st.columns(2)
        left.plotly_chart(placeholder(waiting), key="bars")
        right.plotly_chart(placeholder(waiting), key="histogram")
        st.plotly_chart(placeholder(waiting, height=320), key="timeseries")
        return snap
    # Streamlit sends each element as it is made, and this thread runs niced (ui/priority):
    # under a busy run, time passes between two elements, and a page showed the new p99 in
    # its metric row beside the previous second's charts. So everything of the snapshot is
    # ready before the first element goes (figs), the static captions go first, and the
    # numbers and charts follow back to back.
    top = st.container()
    m = st.columns(5)
    left, right = st.columns(2)
    left.caption("Where the time goes. The p90/p99 bars show the components of the requests "
                 "*in the tail* (around that percentile), not per-component percentiles, "
                 "which do not add up.")
    right.caption("How long requests took: the distribution of the total, on a log axis, "
                  "with your SLO.")
    bars, hist, series = left.empty(), right.empty(), st.empty()
    # a finished run's machine (read once per run and version, before the first element):
    # its DISTURBED badge goes beside the heading, above the numbers it inflated — the
    # validity box with the whole sentence is below the charts, out of a 1280x800 window
    final = final_of(handle, snap.version) if snap.finished else None
    with top:
        head(snap)
        if final is not None:
            disturbed_badge(final[1], note=BADGE_NOTE)
    for col, (label, value) in zip(m, figs["metrics"]):
        col.metric(label, value)
    bars.plotly_chart(figs["bars"], key="bars")
    hist.plotly_chart(figs["histogram"], key="histogram")
    series.plotly_chart(figs["timeseries"], key="timeseries")
    s = snap.summary
    assert s is not None
    st.info(f"**Verdict:** {s.verdict}")
    if final is not None:  # VALID / INVALID, as the CLI's exit code and the JSON say
        timings, environment = final
        v = validity(s, c, snap.status, timings, environment)
        (st.error if not v.valid else st.warning if v.disturbed else st.success)(
            f"**Validity:** {v.line()}")
    for w in s.warnings:
        st.warning(w)
    st.markdown(figs["table"])
    if snap.finished:  # files are built only when clicked (and then cached)
        rid, version = snap.run_id, snap.version
        d1, d2, d3 = st.columns(3)
        d1.download_button("Download requests (CSV)", lambda: downloads(rid, version)[0],
                           f"{rid}.csv", "text/csv", on_click="ignore")
        d2.download_button("Download result (JSON)", lambda: downloads(rid, version)[1],
                           f"{rid}.json", "application/json", on_click="ignore")
        d3.download_button("Download the report (HTML)", lambda: downloads(rid, version)[2],
                           f"{rid}.html", "text/html", on_click="ignore",
                           help="one file that opens offline: the charts, the text and "
                                "verdict, the settings")
    return snap


def final_of(handle: RunHandle, version: int) -> tuple[Any, dict[str, Any]]:
    """A finished run's timings and environment (the machine while it measured), for its
    validity as the CLI and the JSON judge it; read once per run and version."""
    return _final(handle.run_id, version, handle)


@st.cache_resource(max_entries=16, show_spinner=False)
def _final(run_id: str, version: int, _handle: RunHandle) -> tuple[Any, dict[str, Any]]:
    result = _handle.result()  # (a copy of its rows: once per finished run, not per viewer)
    return result.timings, dict(result.environment or {})


def head(snap: Snapshot) -> None:
    """The run's heading, what carried its requests, its progress and its failure."""
    c = snap.config
    st.markdown(heading(snap))
    if c.transport == "http":
        st.caption(transport_caption(c, snap.summary.transport if snap.summary else None))
    frac, text = progress_line(snap)
    st.progress(frac, text=text)
    if snap.failure:
        st.error(f"The run failed: {plain(snap.failure)}")


PHASE_TEXT = {"draining": "draining (all requests sent; serving the backlog)",
              "finishing": "finishing: computing the summary"}


def progress_line(snap: Snapshot) -> tuple[float, str]:
    """The progress bar's fraction and line. Time left only while measuring (a run of a set
    length); in the other phases of a running run the time since it started, which is true
    whatever the phase (the phase's own clock restarts at each phase: "finishing · 0.0 s
    elapsed · ~0 s left" said nothing true). A finished run's length is its measured span."""
    prog = snap.progress
    frac = float(prog.get("fraction") or 0.0)
    phase = snap.phase
    if phase == "waiting":
        text = f"waiting for the machine: {prog.get('waiting_for', 'another run')} is measuring"
    else:
        text = PHASE_TEXT.get(phase, phase)
    parts = [text, f"{prog.get('measured', 0)} requests measured"]
    if snap.finished:
        if snap.summary is not None:
            parts.append(f"{snap.summary.duration_s:.1f} s measured")
    elif phase == "measuring":
        parts.append(f"{float(prog.get('elapsed_s') or 0.0):.1f} s elapsed")
        remaining = prog.get("remaining_s")
        if remaining is not None:
            parts.append(f"~{remaining:.0f} s left")
    elif prog.get("wall_s") is not None:
        parts.append(f"{prog['wall_s']:.1f} s elapsed")
    if phase == "finishing":
        frac = 1.0
    return frac, " · ".join(parts)


def explain() -> None:
    """What the three charts show, once below the live view (outside its fragment).

    Static text is not re-sent with every refresh of the charts: each element a refresh
    renders costs the dashboard's server about half a millisecond per watching page, and a
    room has thirty (bench/bench_watchers.py)."""
    with st.expander("What am I looking at?"):
        st.markdown("**Where the time goes** (the bars)\n" + EXPLAIN_BARS)
        st.markdown(COMPONENTS_TABLE, unsafe_allow_html=True)
        st.markdown("**Two classic mistakes**\n\n" + MISTAKES)
        st.markdown("**How long requests took** (the histogram)\n" + EXPLAIN_HIST)
        st.markdown("**Over time** (throughput and latency per second)\n" + EXPLAIN_SERIES)


def heading(snap: Snapshot) -> str:
    """The run's line above its charts: status, id, model, serving, and its load in the words
    of ``load_description`` (as the CLI's summary, the history and the Compare page say it)."""
    c = snap.config
    return (f"**{STATUS_ICON.get(snap.status, '')} {snap.status}** · `{snap.run_id}` · "
            f"{plain(c.model)} · batch ≤ {c.batch_size} · replicas {c.replicas} · "
            + ("on Ray Serve · " if c.backend == "ray" else "") + load_description(c))


def transport_caption(c: RunConfig, t: TransportSummary | None) -> str:
    """One line saying what carried the requests, with the emulated WAN labelled."""
    server = server_label(c)
    who = "our server (own process, 127.0.0.1)" if server == OUR_SERVER else server
    text = f"Transport: HTTP to {who}, Open Inference Protocol, {c.payload} payload"
    if c.backend == "ray":
        text += " · network includes Ray's HTTP proxy and router"
    if t and t.request_bytes and t.request_bytes.get("mean") is not None:
        text += (f" · request {t.request_bytes['mean']:.0f} B, response "
                 f"{(t.response_bytes or {})['mean']:.0f} B (mean)")
    wan = c.wan
    if wan.active:
        text += (f" · **{wan.describe()}** — the network segment includes this EMULATED delay"
                 " (added by the client; no real network)")
    return text
