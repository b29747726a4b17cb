"""Home: what the tool shows, the five components, and where to start."""
import streamlit as st

from latency.pipelines.registry import list_pipelines
from ui.explain import COMPONENTS_TABLE, MISTAKES
from ui.text import plain

st.title("Latency Lab")
st.markdown(
    "**Where does the time of one prediction request go?** Latency Lab runs real PyTorch "
    "pipelines under load and times every request component by component, live. Find the "
    "real bottleneck *before* you optimise: quantising the model does little when queueing "
    "or preprocessing dominates.")
st.subheader("Where to start")
PAGES = [
    ("views/live_profiler.py", "Live Profiler", ":material/monitoring:",
     "Run a real model under load — in-process or over HTTP, optionally across an emulated "
     "WAN — and watch every request's time split into its components."),
    ("views/load_simulator.py", "Load Simulator", ":material/ssid_chart:",
     "Move a slider, see queueing appear: the hockey stick, capacity for an SLO, and a "
     "Validate button that checks the prediction against a real run."),
    ("views/optimisation_lab.py", "Optimisation Lab", ":material/tune:",
     "Measure levers end to end (int8, compile, pruning, naive vs fast preprocessing) in an "
     "interleaved A/B — and the lesson: a much faster model, the same latency."),
    ("views/compare_runs.py", "Compare Runs", ":material/compare_arrows:",
     "Every run is saved: overlay percentile curves and component bars, diff, export CSV, "
     "Parquet, JSON or a Chrome trace."),
    ("views/workshop.py", "Workshop", ":material/school:",
     "A course for a room: each lesson asks, the room guesses, a live run answers — and a "
     "handout to keep. Instructors present their screen to everyone's."),
]
for col, (page, label, icon, text) in zip(st.columns(len(PAGES)), PAGES):
    with col:
        st.page_link(page, label=label, icon=icon)
        st.caption(text)

st.subheader("The five components of one request (and overhead)")
st.markdown(COMPONENTS_TABLE, unsafe_allow_html=True)
st.caption("Every request records integer-nanosecond timestamps; components are differences "
           "of them, so they add up to the total exactly.")

st.subheader("Sample pipelines")
for info in list_pipelines():
    where = (" *(generative: profiled from the command line, `python -m latency run --model "
             f"{plain(info.name)} --output-tokens 64`; docs/generation.md)*"
             if info.generative else "")
    st.markdown(f"- **{plain(info.name)}** — {plain(info.description)}{where}")

st.subheader("Two classic mistakes")
st.markdown(MISTAKES)
