"""The live part of the Live Profiler: status, progress, charts, verdict, downloads.

Rendered inside ``st.fragment(run_every=...)``: only this part reruns while a run is in
flight; its explanations (``explain``) sit outside the fragment and are sent once. Everything
it draws comes from cached figures of the shared snapshot (bins and statistics, never
samples).
"""
from __future__ import annotations

import streamlit as st

from latency.analysis.snapshot import Snapshot
from latency.analysis.transport_summary import TransportSummary
from latency.analysis.validity import validity
from latency.core import fmt
from latency.core.config import RunConfig
from latency.core.describe import OUR_SERVER, load_description, server_label
from latency.execution.process import RunHandle
from ui.downloads import downloads
from ui.explain import COMPONENTS_TABLE, MISTAKES
from ui.figure_cache import figures, placeholder
from ui.server import run_manager

STATUS_ICON = {"queued": ":material/hourglass_top:", "running": ":material/play_circle:",
               "completed": ":material/check_circle:", "stopped": ":material/stop_circle:",
               "failed": ":material/error:"}

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


def render(handle: RunHandle, slo_ms: float) -> None:
    mgr = run_manager()
    position = mgr.position(handle.run_id)
    if position and position > 0:
        current = mgr.current()
        st.info(f"Your run is number {position} in line; the server runs one at a time. "
                + (f"Now running: {current.config.model}." if current else ""))
    figs = figures(handle.run_id, handle.version, slo_ms)
    snap = figs.get("snapshot")
    if snap is None:
        return
    c = snap.config
    st.markdown(heading(snap))
    if c.transport == "http":
        st.caption(transport_caption(c, snap.summary.transport if snap.summary else None))
    prog = snap.progress
    frac = float(prog.get("fraction") or 0.0)
    remaining = prog.get("remaining_s")
    left = (f" · ~{remaining:.0f} s left" if remaining is not None and not snap.finished
            else "")
    phase = {"draining": "draining (all requests sent; serving the backlog)",
             "waiting": "waiting for the machine: "
                        f"{prog.get('waiting_for', 'another run')} is measuring"}.get(
        snap.phase, snap.phase)
    # a finished run's length is its measured span; a running one's, the phase so far
    elapsed = (f"{snap.summary.duration_s:.1f} s measured" if snap.finished and snap.summary
               else f"{prog.get('elapsed_s', 0):.1f} s elapsed")
    st.progress(frac, text=f"{phase} · {prog.get('measured', 0)} requests measured · "
                f"{elapsed}{left}")
    if snap.failure:
        st.error(f"The run failed: {snap.failure}")
    if "bars" not in figs:
        # the charts' places, each saying what it waits for: the layout does not jump when
        # the data comes, and the browser has Plotly loaded by then (loading it on the first
        # real chart took ~2 s of the first figures' time)
        st.caption("Waiting for the first measured requests…")
        waiting = "waiting for the first measured requests…"
        left, right = st.columns(2)
        left.plotly_chart(placeholder(waiting), key="bars")
        right.plotly_chart(placeholder(waiting), key="histogram")
        st.plotly_chart(placeholder(waiting, height=320), key="timeseries")
        return
    s = snap.summary
    m = st.columns(5)
    m[0].metric("throughput (req/s)", f"{s.throughput_rps:,.0f}")
    m[1].metric("p50", fmt.duration(s.latency_ms.p50))
    m[2].metric("p99", fmt.duration(s.latency_ms.p99))
    share = figs["share"]
    m[3].metric(f"within SLO {slo_ms:g} ms", f"{share:.1%}" if share is not None else "—")
    m[4].metric("errors", f"{s.errors}")
    left, right = st.columns(2)
    left.caption("Where the time goes. The p90/p99 bars show the components of the requests "
                 "*in the tail* (around that percentile), not per-component percentiles, "
                 "which do not add up.")
    left.plotly_chart(figs["bars"], key="bars")
    right.caption("How long requests took: the distribution of the total, on a log axis, "
                  "with your SLO.")
    right.plotly_chart(figs["histogram"], key="histogram")
    st.plotly_chart(figs["timeseries"], key="timeseries")
    st.info(f"**Verdict:** {s.verdict}")
    if snap.finished:  # VALID / INVALID, as the CLI's exit code and the JSON say
        v = validity(s, c, snap.status)
        (st.success if v.valid else st.error)(f"**Validity:** {v.line()}")
    for w in s.warnings:
        st.warning(w)
    st.markdown(figs["table"])
    if snap.finished:  # files are built only when clicked (and then cached)
        rid, version = handle.run_id, handle.version
        d1, d2 = st.columns(2)
        d1.download_button("Download requests (CSV)", lambda: downloads(rid, version)[0],
                           f"{rid}.csv", "text/csv", on_click="ignore")
        d2.download_button("Download result (JSON)", lambda: downloads(rid, version)[1],
                           f"{rid}.json", "application/json", on_click="ignore")


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
            f"{c.model} · batch ≤ {c.batch_size} · replicas {c.replicas} · "
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
