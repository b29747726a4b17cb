"""Compare Runs for generations: the history's generation runs, filtered; two or
more side by side — the headline changes, every setting that differs, the machine's badges,
TTFT and ITL by percentile, TTFT's parts, the figure-by-figure diff — and rename, delete,
export. What ``python -m latency compare`` prints for generation runs, on the page.

A stored generation never changes once saved (only its name can), so its aggregates are cached
per (database, id); the list is read fresh on every rerun.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from latency.analysis.compare import setup_differences
from latency.analysis.gen_compare import gen_diff_rows, gen_headline
from latency.analysis.gen_result import GenResult
from latency.analysis.gen_summary import GenSummary
from latency.analysis.machine import MACHINE_WORDS, unequal_disturbance
from latency.core.config import RunConfig
from latency.core.errors import ConfigError
from latency.core.gen_records import token_gaps
from latency.figures.compare_plots import (
    letters,
    runs_spectrum_figure,
    runs_ttft_parts_figure,
)
from latency.storage.export import FORMATS
from latency.storage.store import RunInfo, RunStore, StoreError, latency_spectrum
from ui.compare_runs import EXPORTS, export_file, rename_and_delete, store
from ui.controls import default
from ui.machine import badge_row, disturbed_badge, unequal_warning
from ui.rights import may_manage, may_see_server_details
from ui.text import code_span, option_text, plain


@dataclass(frozen=True)
class GenAggregates:
    """What the comparison draws of one stored generation (no request rows)."""

    info: RunInfo
    config: RunConfig
    environment: dict[str, Any]
    summary: GenSummary
    ttft_spectrum: tuple[np.ndarray, np.ndarray] | None
    itl_spectrum: tuple[np.ndarray, np.ndarray] | None
    #: TTFT's parts, {"mean": {part: ms}, "p99": {…}}: the client's components, or a server
    #: of yours' split (its requests are whole to the client)
    ttft_parts: dict[str, dict[str, float]]
    #: a --target run's server split (``TargetView.to_dict``), else None
    split: dict[str, Any] | None


@st.cache_data(max_entries=64, show_spinner=False)
def aggregates(db: str, run_id: str) -> GenAggregates:
    stored = RunStore(db).load(run_id)
    info, result = stored.info, stored.result
    if not isinstance(result, GenResult):
        raise ConfigError(f"{run_id} is a {info.kind} run, not a generation")
    rows = result.rows  # a summary-only generation (saved without rows) has no curves
    ok = np.flatnonzero((rows["status"] == 0) & ~rows["warmup"])
    ttft = (rows["t_first_deliv"] - rows["t_intended"])[ok] / 1e6
    gaps, _ = token_gaps(result.tokens[np.isin(result.tokens["request"], ok)])
    view = result.target_view
    parts = (view.ttft_parts_ms() if view is not None else
             {"mean": result.summary.ttft_mean_parts_ms,
              "p99": result.summary.ttft_p99_parts_ms})
    return GenAggregates(info, result.config, dict(result.environment), result.summary,
                         latency_spectrum(ttft.astype(np.float64)),
                         latency_spectrum(gaps.astype(np.float64) / 1e6), parts,
                         view.to_dict() if view is not None else None)


@st.cache_data(max_entries=4, show_spinner="Building the file…")
def option_label(info: RunInfo) -> str:
    return option_text(f"{info.id} · {info.name or info.model} · {info.load} · {info.n:,} "
                       f"requests")


def _r(v: float | None, digits: int = 2) -> float | None:
    return None if v is None else round(v, digits)


def runs_frame(infos: list[RunInfo], letter_of: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame([{
        "as": letter_of.get(i.id, ""), "id": i.id, "name": i.name or "", "when": i.when[:16],
        "model": i.model, "load": i.load, "status": i.status,
        "machine": MACHINE_WORDS[i.disturbed], "requests": i.n, "errors": i.errors,
        "TTFT p50 (ms)": _r(i.p50_ms), "TTFT p99 (ms)": _r(i.p99_ms),
        "ITL p99 (ms)": _r(i.itl_p99_ms), "TPOT p99 (ms)": _r(i.tpot_p99_ms),
        "tokens/s": _r(i.tokens_per_s, 1), "from": i.source, "setup": i.setup}
        for i in infos])


def render() -> None:
    history = store()
    try:
        every = history.list(kind="generation")
    except (ConfigError, StoreError) as exc:
        st.error("Cannot read the run history" + (f": {plain(exc)}" if may_see_server_details()
                                                    else " (the server's log says why)."))
        return
    models = sorted({i.model for i in every})
    f1, f2, f3 = st.columns([2, 2, 2])
    text = f1.text_input("Search", key="gcmp_text", placeholder="id, name, model, load, setup…",
                         help="Any part of a generation's id, name, model, load or setup.")
    model_sel = f2.multiselect("Model", models, key="gcmp_models",
                               help="Only generations of these pipelines.")
    status_sel = f3.multiselect("Status", ["completed", "stopped", "failed"],
                                key="gcmp_status",
                                help="Stopped runs ended early; failed runs keep what they "
                                     "measured.")
    infos = [i for i in (history.list(text=text, kind="generation") if text else every)
             if (not model_sel or i.model in model_sel)
             and (not status_sel or i.status in status_sel)]
    if not infos:
        st.info("No saved generations match." if (text or model_sel or status_sel) else
                "No saved generations yet. Start one on the **Live Profiler** (streamed "
                "generation), or run `python -m latency run --model synthetic-lm` in a "
                "terminal; it appears here when it finishes.")
        return
    by_id = {i.id: i for i in infos}
    previous = [r for r in st.session_state.get("gcmp_runs", []) if r in by_id]
    if "gcmp_runs" not in st.session_state or previous != st.session_state["gcmp_runs"]:
        usable = [i for i in infos if i.n and i.status != "failed"] or infos
        st.session_state["gcmp_runs"] = previous or [i.id for i in usable[:2]][::-1]
    chosen = st.multiselect("Generations to compare (the first is the baseline, **A**)",
                            list(by_id), key="gcmp_runs",
                            format_func=lambda rid: option_label(by_id[rid]),
                            help="Pick two or more; each is compared with the first.")
    names = letters(len(chosen))
    st.dataframe(runs_frame(infos, dict(zip(chosen, names))), hide_index=True,
                 height=min(38 + 35 * len(infos), 320))
    if chosen:
        compared(history, chosen, names)
    manage(history, by_id, chosen)


def compared(history: RunStore, chosen: list[str], names: list[str]) -> None:
    db = str(history.path)
    runs = [aggregates(db, rid) for rid in chosen]
    for x, r in zip(names[1:], runs[1:]):
        st.markdown(f"**{plain(gen_headline(runs[0].summary, r.summary, 'A', x))}**")
        diffs = setup_differences(runs[0].config, r.config, runs[0].environment, r.environment)
        if diffs:
            st.caption(f"Setup A → {x}: " + "; ".join(plain(d) for d in diffs))
    with badge_row():
        for x, r in zip(names, runs):
            disturbed_badge(r.environment, x)
    unequal_warning(unequal_disturbance({x: [r.environment] for x, r in zip(names, runs)}))
    for x, r in zip(names, runs):
        if r.info.status != "completed" or not r.summary.successful:
            st.warning(f"{x} ({r.info.id}) {r.info.status}: {r.summary.successful} successful "
                       "requests")
    label = {rid: f"{x} · {r.info.name or r.info.model}" for x, rid, r in
             zip(names, chosen, runs)}
    log_y = st.toggle("Log time axes", key="gcmp_logy",
                      help="For runs whose times differ by orders of magnitude.")
    left, right = st.columns(2)
    with left:
        st.caption("Time to first token by percentile (each further nine gets the same "
                   "width).")
        st.plotly_chart(runs_spectrum_figure({label[rid]: r.ttft_spectrum
                                              for rid, r in zip(chosen, runs)}, log_y,
                                             "Time to first token", "TTFT"),
                        key="gcmp_ttft")
    with right:
        st.caption("Every gap between two tokens by percentile: the stream's smoothness.")
        st.plotly_chart(runs_spectrum_figure({label[rid]: r.itl_spectrum
                                              for rid, r in zip(chosen, runs)}, log_y,
                                             "Inter-token gaps", "gap between two tokens"),
                        key="gcmp_itl")
    targets = [x for x, r in zip(names, runs) if r.config.target is not None]
    if targets:
        st.caption(f"{', '.join(targets)}: a server of yours — its time to first token is "
                   "split by the server's own account (network, queue, prefill, from the "
                   "send); no split where it reported nothing.")
    st.plotly_chart(runs_ttft_parts_figure({x: r.ttft_parts for x, r in zip(names, runs)},
                                           "Where the time to first token goes"),
                    key="gcmp_parts")
    if len(runs) >= 2:
        st.subheader("Figure by figure")
        # every run a server of yours: their splits stand in for the client's components
        splits = [r.split for r in runs] if len(targets) == len(runs) else None
        st.dataframe(pd.DataFrame(gen_diff_rows(names, [r.summary for r in runs], splits)),
                     hide_index=True, height=35 * 22)
        st.caption("Times in ms; rates per second. Δ% against A: for a time, negative is "
                   "faster; for a rate, positive serves more. `python -m latency compare` "
                   "prints the same table for the runs' JSON files.")
    else:
        st.info("Select a second generation to see the figure-by-figure diff.")


def manage(history: RunStore, by_id: dict[str, RunInfo], chosen: list[str]) -> None:
    st.subheader("Manage a generation")
    ids = list(by_id)
    target = st.selectbox("Generation", ids, key="gcmp_target",
                          format_func=lambda rid: option_label(by_id[rid]),
                          index=default("gcmp_target", ids.index(chosen[0]) if chosen else 0, 0))
    allowed = may_manage(by_id[target].owner)
    rename_and_delete(history, target, by_id[target].name,
                      lambda rid: f"{by_id[rid].load}, {by_id[rid].n:,} requests", allowed,
                      name_key="gcmp_name_", key="gcmpbtn_", noun="generation")
    if not allowed:
        st.caption("Only the session that ran it, or an instructor, can rename or delete this "
                   "generation (this dashboard is shared: it was started with an instructor "
                   "key).")
    st.caption(f"Export {code_span(target)}: the whole result (every request, token and "
               "scheduler step) as JSON, a row a request as CSV, a row a token as Parquet, "
               "a Chrome trace of its requests and steps, or a report to send (one HTML "
               "file that opens offline).")
    db = str(history.path)
    for col, (kind, label) in zip(st.columns(len(EXPORTS)), EXPORTS):
        col.download_button(label.replace("Requests (Parquet)", "Tokens (Parquet)"),
                            (lambda k=kind: export_file(db, target, k, None)),
                            file_name=f"latency-{target}.{FORMATS[kind][0]}",
                            mime=FORMATS[kind][1],
                            key=f"gcmpbtn_dl_{kind}", on_click="ignore",
                            icon=":material/download:")


__all__ = ["aggregates", "render", "runs_frame"]
