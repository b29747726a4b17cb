"""Compare Runs: every saved run, filtered; two or more overlaid; rename, delete, export."""
import streamlit as st

from latency.analysis.compare import headline, setup_differences
from latency.analysis.machine import unequal_disturbance
from latency.core.errors import ConfigError
from latency.core.records import network_labels
from latency.figures.compare_plots import (
    diff_table,
    letters,
    runs_bars_figure,
    runs_spectrum_figure,
)
from ui import compare_generations
from ui.compare_runs import (
    EXPORTS,
    TRACE_MAX_REQUESTS,
    aggregates,
    export_file,
    option_label,
    rename_and_delete,
    runs_columns,
    runs_frame,
    store,
    style_diff,
)
from ui.controls import KEEP, default
from ui.machine import badge_row, disturbed_badge, unequal_warning
from ui.priority import yield_cpu_to_runs
from ui.rights import may_manage, may_see_server_details
from ui.text import code_span, plain

#: the two kinds of run the history keeps; runs of one kind are compared with each other
KINDS = {"one-shot": "one-shot runs", "generation": "generations (LLM)"}

yield_cpu_to_runs()
st.title("Compare Runs")
history = store()
try:
    newest = history.list(limit=1)
except ConfigError:
    newest = []
kind = st.segmented_control(
    "Compare", list(KINDS), format_func=KINDS.get, key="cmp_kind",
    default=default("cmp_kind", newest[0].kind if newest else "one-shot"), required=True,
    help="One-shot runs (requests in, replies out) or generations (streamed tokens: TTFT, "
         "gaps between tokens, TPOT): one history, one kind compared at a time (their "
         "figures measure different things). It opens on the kind of the newest run.",
    **KEEP)
if kind == "generation":
    st.caption("Every finished generation — from the dashboard or `python -m latency run` "
               "with a generative pipeline — is saved in the run history beside the one-shot "
               "runs. `python -m latency compare A B` prints the same diff in a terminal.")
    compare_generations.render()
    st.stop()
where = (f"in `{code_span(history.path)}` (set `LATENCY_LAB_DB` to use another file)"
         if may_see_server_details() else "in this server's run history")
st.caption(f"Every finished run — from the dashboard or `python -m latency run` — is saved "
           f"{where}. `python -m latency compare A B` prints the same diff in a terminal.")
try:
    models = history.models()
except ConfigError as exc:
    st.error("Cannot read the run history" + (f": {plain(exc)}" if may_see_server_details()
                                                else " (the server's log says why)."))
    st.stop()

f1, f2, f3 = st.columns([2, 2, 2])
text = f1.text_input("Search", key="cmp_text", placeholder="id, name, model, load, setup…",
                     help="Any part of a run's id, name, model, load, setup or device.")
model_sel = f2.multiselect("Model", models, key="cmp_models", help="Only runs of these pipelines.")
status_sel = f3.multiselect("Status", ["completed", "stopped", "failed"], key="cmp_status",
                            help="Stopped runs ended early; failed runs keep what they measured.")
infos = [i for i in history.list(text=text or None, kind="one-shot")
         if (not model_sel or i.model in model_sel) and (not status_sel or i.status in status_sel)]
if not infos:
    st.info("No saved one-shot runs match." if (text or model_sel or status_sel) else
            "No saved one-shot runs yet. Start one on the **Live Profiler**, or run "
            "`python -m latency run` in a terminal; it appears here when it finishes.")
    st.stop()
by_id = {i.id: i for i in infos}
previous = [r for r in st.session_state.get("cmp_runs", []) if r in by_id]
if "cmp_runs" not in st.session_state or previous != st.session_state["cmp_runs"]:
    # default: the two newest, the older one as the baseline A (before → after)
    # (runs that measured something: a failed run with no requests has nothing to overlay)
    usable = [i for i in infos if i.n and i.status != "failed"] or infos
    st.session_state["cmp_runs"] = previous or [i.id for i in usable[:2]][::-1]
chosen = st.multiselect("Runs to compare (the first is the baseline, **A**)", list(by_id),
                        key="cmp_runs", format_func=lambda rid: option_label(by_id[rid]),
                        help="Pick two or more; each is compared with the first.")
names = letters(len(chosen))
letter_of = dict(zip(chosen, names))
st.dataframe(runs_frame(infos, letter_of), hide_index=True, height=min(38 + 35 * len(infos), 320),
             column_config=runs_columns())

if chosen:
    runs = [aggregates(str(history.path), rid) for rid in chosen]
    for x, r in zip(names[1:], runs[1:]):
        st.markdown(f"**{headline(runs[0].summary, r.summary, 'A', x)}**")
        diffs = setup_differences(runs[0].config, r.config, runs[0].environment, r.environment)
        if diffs:
            st.caption(f"Setup A → {x}: " + "; ".join(plain(d) for d in diffs))
    with badge_row():  # measured on a busy machine: by how much (side by side)
        for x, r in zip(names, runs):
            disturbed_badge(r.environment, x)
    unequal_warning(unequal_disturbance({x: [r.environment] for x, r in zip(names, runs)}))
    for x, r in zip(names, runs):
        if r.info.status != "completed" or not r.summary.successful:
            st.warning(f"{x} ({r.info.id}) {r.info.status}: {r.summary.successful} successful "
                       "requests")
    left, right = st.columns(2)
    with left:
        st.caption("Latency by percentile: each further nine (90 → 99 → 99.9 %) gets the same "
                   "width, so the tails compare as clearly as the medians.")
        chart = st.container()  # the toggle sits under the chart, so both charts align
        log_y = st.toggle("Log latency axis", key="cmp_logy",
                          help="For runs whose latencies differ by orders of magnitude.")
        chart.plotly_chart(runs_spectrum_figure(
            {f"{x} · {by_id[rid].label}": r.spectrum  # fresh label: names change
             for x, rid, r in zip(names, chosen, runs)}, log_y),
            key="cmp_spectrum")
    with right:
        st.caption("Where the time goes in each run: the mean request, the median one and the "
                   "requests around p99. The segment that changes between runs is the story.")
        st.plotly_chart(runs_bars_figure({x: r.makeup_ms for x, r in zip(names, runs)},
                                         labels=network_labels([r.config for r in runs])),
                        key="cmp_bars")
    if len(runs) >= 2:
        st.subheader("Component by component")
        st.dataframe(style_diff(diff_table(names, [r.summary for r in runs])), hide_index=True,
                     height=35 * 22)
        st.caption("ms. Δ and Δ% against A: negative is faster. Coloured only beyond the runs' "
                   "noise and by 5 % or more — red slower, green faster: a p99 when the two "
                   "runs' 95 % intervals do not overlap, a mean or median when the change "
                   "exceeds three standard errors (each run's spread over √requests); never a "
                   "change under 20 µs.")
    else:
        st.info("Select a second run to see the component-by-component diff.")

st.subheader("Manage a run")
target = st.selectbox("Run", list(by_id), key="cmp_target",
                      format_func=lambda rid: option_label(by_id[rid]),
                      index=default("cmp_target", list(by_id).index(chosen[0]) if chosen else 0,
                                    0))
info = by_id[target]
allowed = may_manage(info.owner)
rename_and_delete(history, target, info.name,
                  lambda rid: f"{by_id[rid].label}, {by_id[rid].n:,} requests", allowed,
                  name_key="cmp_name_", key="cmp_", noun="run")
if not allowed:
    st.caption("Only the session that ran it, or an instructor, can rename or delete this run "
               "(this dashboard is shared: it was started with an instructor key).")
st.caption(f"Export {target}. The Chrome trace opens at ui.perfetto.dev: one span per "
           f"component of every request, on lanes, plus each replica's batches (the first "
           f"{TRACE_MAX_REQUESTS:,} requests; the CLI exports all).")
cols = st.columns(len(EXPORTS))
db = str(history.path)
for col, (fmt, label) in zip(cols, EXPORTS):
    from latency.storage.export import FORMATS, file_name

    col.download_button(label, (lambda f=fmt: export_file(db, target, f)),
                        file_name=file_name(aggregates(db, target), fmt), mime=FORMATS[fmt][1],
                        key=f"cmp_dl_{fmt}", on_click="ignore", icon=":material/download:")
