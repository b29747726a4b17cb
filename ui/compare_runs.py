"""The Compare Runs page's data: the run history, cached where it is immutable.

A stored run's aggregates and export files never change once saved (only its name can), so
they are cached per (database, id); the list of runs is read fresh on every rerun (a few
milliseconds: it touches no request rows), so renames, deletes and runs just finished show at
once. Export files are built when their download button is clicked, not on every rerun.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import streamlit as st

from latency.analysis.machine import MACHINE_WORDS
from latency.core import fmt
from latency.storage.export import export_bytes
from latency.storage.store import RunInfo, RunStore, StoredRun
from ui.controls import default
from ui.text import code_span, option_text, plain

#: a Chrome trace of more requests than this is slow to open in a viewer: the download keeps
#: the first ones (the CLI's `history export --format trace` has no cap).
TRACE_MAX_REQUESTS = 20_000
EXPORTS: tuple[tuple[str, str], ...] = (
    ("csv", "Requests (CSV)"), ("parquet", "Requests (Parquet)"), ("json", "Result (JSON)"),
    ("trace", "Chrome trace (Perfetto)"), ("html", "Report (HTML)"))


def history_state(mgr: Any, handle: Any) -> tuple[Any, ...] | None:
    """What the Live Profiler watches to know it must redraw: the run shown, whether it is
    done, and whether it has been saved (the save follows the end by a moment)."""
    if handle is None:
        return None
    rid = handle.run_id
    return rid, handle.done(), mgr.saved_id(rid) or mgr.save_error(rid)


def history_note(mgr: Any, handle: Any) -> None:
    """Under a finished run: its id in the history, or why it could not be saved."""
    if not handle.done():
        return
    saved, error = mgr.saved_id(handle.run_id), mgr.save_error(handle.run_id)
    if saved:
        st.caption(f"Saved in the run history as `{code_span(saved)}`: compare it with other "
                   f"runs on **Compare Runs**, or `python -m latency history show "
                   f"{code_span(saved)}`.")
    elif error:
        st.warning(f"This run was not saved to the run history ({plain(error)}). Its results "
                   "stay here while the server runs: download them to keep them.")


def store() -> RunStore:
    """The history this server writes: ``$LATENCY_LAB_DB`` or ``~/.latency_lab/runs.sqlite``."""
    return RunStore()


@st.cache_data(max_entries=64, show_spinner=False)
def aggregates(db: str, run_id: str) -> StoredRun:
    """A run's summary, quantile curve and make-up (no request rows)."""
    return RunStore(db).load(run_id, rows=False)


@st.cache_data(max_entries=4, show_spinner="Building the file…")
def export_file(db: str, run_id: str, file_format: str,
                max_trace_requests: int | None = TRACE_MAX_REQUESTS) -> bytes:
    """A saved run of either kind as a file to download (``EXPORTS``)."""
    run = RunStore(db).load(run_id)
    if file_format == "html":
        from latency.figures.report import stored_report_html

        return stored_report_html(run)
    return export_bytes(run, file_format,
                        max_trace_requests if file_format == "trace" else None)


def runs_frame(infos: list[RunInfo], letter_of: dict[str, str]) -> pd.DataFrame:
    """The table of runs as a person scans it: newest first, the compared ones lettered; its
    numbers before the setup, the one column whose text runs long (batching, replicas,
    levers, HTTP or Ray Serve), which comes last with room for all of it."""
    return pd.DataFrame([{
        "as": letter_of.get(i.id, ""), "id": i.id, "name": i.name or "", "when": i.when[:16],
        "model": i.model, "load": i.load, "status": i.status,
        "machine": MACHINE_WORDS[i.disturbed], "requests": i.n,
        "errors": i.errors, "p50 (ms)": _r(i.p50_ms), "p99 (ms)": _r(i.p99_ms),
        "req/s": None if i.throughput_rps is None else round(i.throughput_rps, 1),
        "from": i.source, "setup": i.setup} for i in infos])


def runs_columns() -> dict[str, Any]:
    """The runs table's column widths (px): the short ones narrow, so that every column but
    the setup fits a 1280-pixel window, and the setup as wide as its longest text needs."""
    cc = st.column_config
    widths = {"as": 36, "id": 66, "name": 120, "when": 124, "model": 100, "load": 140,
              "status": 86, "machine": 86, "requests": 72, "errors": 54, "p50 (ms)": 68,
              "p99 (ms)": 68, "req/s": 58, "from": 70, "setup": 420}
    out: dict[str, Any] = {c: cc.Column(c, width=w) for c, w in widths.items()}
    out["as"] = cc.Column("as", width=36, help="letter in the charts")
    out["machine"] = cc.Column("machine", width=86, help=(
        "DISTURBED: the machine was busy while the run measured (other processes, CPU steal, "
        "throttling or memory pressure), so its times are inflated; quiet: it was not; empty: "
        "the run has no samples of the machine (saved before they were taken)"))
    return out


def _r(v: float | None) -> float | None:

    return fmt.round_ms(v)


def option_label(info: RunInfo) -> str:
    """A run in a select box or the multiselect's chips: its id, label and time, as text
    (``option_text``: Streamlit renders no Markdown there, so escaping showed every
    backslash)."""
    return option_text(f"{info.id} · {info.label} · {info.when[5:16]}")


def diff_colours(rows: list[dict[str, Any]]) -> list[list[str]]:
    """Per row, the colour of each later run's Δ%: red where slower, green where faster —
    only where the difference lies beyond both runs' noise (``beyond_noise``), so a few
    microseconds of overhead moving by 40 % stay uncoloured."""
    out = []
    for r in rows:
        pcts = [r[c] for c in r if c.startswith("Δ%")]
        out.append(["" if not sig or p is None else
                    ("color: #B22222; font-weight: 600" if p > 0 else
                     "color: #1B7F3B; font-weight: 600")
                    for p, sig in zip(pcts, r.get("_beyond_noise") or [None] * len(pcts))])
    return out


def style_diff(rows: list[dict[str, Any]]) -> Any:
    """The diff table with Δ% coloured where beyond the runs' noise (``diff_colours``)."""
    colours = diff_colours(rows)
    df = pd.DataFrame([{k: v for k, v in r.items() if not k.startswith("_")} for r in rows])
    pct_cols = [c for c in df.columns if c.startswith("Δ%")]
    styles = pd.DataFrame("", index=df.index, columns=df.columns)
    for i, row in enumerate(colours):
        for c, css in zip(pct_cols, row):
            styles.loc[i, c] = css
    cells = {c: (lambda v: fmt.change(v / 100)) for c in pct_cols}
    cells.update({c: fmt.signed_ms for c in df.columns if c.startswith("Δ ")})
    cells.update({c: fmt.ms for c in df.columns if c.endswith("(ms)") and not c.startswith("Δ")})
    return df.style.apply(lambda _: styles, axis=None).format(cells, na_rep=fmt.DASH)


def rename_and_delete(history: Any, target: str, name: str | None,
                      described: Callable[[str], str], allowed: bool, *, name_key: str,
                      key: str, noun: str) -> None:
    """A saved run's Name box and Rename, and Delete… with its confirmation (Yes / Cancel),
    for a one-shot run's history and a generation's alike. ``described(id)``: what the
    confirmation names ("image-cnn · closed 4 clients, 1,200 requests"); ``name_key``: the
    name box's key prefix (it travels to a room: one per run); ``key``: the buttons' and the
    pending confirmation's key prefix (they must not travel). A pending delete is void once
    the selection moves to another run."""
    confirm = f"{key}confirm"
    pending = st.session_state.get(confirm)
    if pending is not None and pending != target:
        st.session_state.pop(confirm, None)
        pending = None
    m1, m2 = st.columns([3, 2])
    with m1:
        new_name = st.text_input("Name", value=default(f"{name_key}{target}", name or "", ""),
                                 key=f"{name_key}{target}", max_chars=200, disabled=not allowed,
                                 help="A name shown instead of model and load in charts.")
        if st.button("Rename", key=f"{key}rename", disabled=not allowed or not new_name.strip()
                     or new_name.strip() == (name or "")):
            history.rename(target, new_name)
            st.toast(f"Renamed {target} to “{plain(new_name.strip())}”.")
            st.rerun()
    with m2:
        st.write("")
        if pending is None:
            if st.button("Delete…", key=f"{key}delete", icon=":material/delete:",
                         disabled=not allowed):
                st.session_state[confirm] = target  # the id the user picked, and only it
                st.rerun()
        else:
            st.warning(f"Delete {noun} `{pending}` ({plain(described(pending))})? This cannot "
                       "be undone.")
            y, n = st.columns(2)
            if y.button(f"Yes, delete {pending}", key=f"{key}delete_yes", type="primary"):
                history.delete(pending)
                st.session_state.pop(confirm, None)
                st.toast(f"Deleted {noun} {pending}.")
                st.rerun()
            if n.button("Cancel", key=f"{key}delete_no"):
                st.session_state.pop(confirm, None)
                st.rerun()
