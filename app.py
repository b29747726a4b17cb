"""Latency Lab dashboard: ``streamlit run app.py``.

A frame only: page navigation and the sidebar parts every page shares. Pages live in
``views/`` — not ``pages/``, which Streamlit would also read as old-style pages and, on a
first visit to a deep link, run without this frame. Figures come from
``latency.figures.plots``; runs go through the shared run manager. Pipelines of your own are
named when the server starts (``streamlit run app.py -- --pipeline file.py:Name``), never sent
from a browser.
"""
from pathlib import Path

import streamlit as st

from ui import room as room_ui
from ui.priority import yield_cpu_to_runs
from ui.reruns import page_done
from ui.rights import instructor_box
from ui.server import run_manager
from ui.session import session_id
from ui.startup import startup_pipelines, startup_targets

# the favicon ships with the app (an icon font or emoji would be fetched from the internet,
# which a workshop room may not have)
st.set_page_config(page_title="Latency Lab",
                   page_icon=str(Path(__file__).parent / "static" / "favicon.png"),
                   layout="wide")
# the pages have their own Stop for runs; Streamlit's "Stop" (of the script rerun) beside it
# would read as a second way to stop the run, and stops nothing a user started
st.html("<style>[data-testid='stStatusWidget'] button {display: none;}</style>")

startup_pipelines()  # `streamlit run app.py -- --pipeline file.py:Name` (docs/your-pipeline.md)
startup_targets()  # `streamlit run app.py -- --target NAME=URL` (docs/your-llm-server.md)
run_manager()  # start the server-wide manager (and its thread) before lowering priority
yield_cpu_to_runs()
session_id()
#: URL path → page (the keys are the pages' own url_path; Home's is ""). Kept as literals:
#: a Page's url_path property needs a running session, and a run process started by
#: multiprocessing may import this file without one.
pages = {
    "": st.Page("views/home.py", title="Home", icon=":material/home:", default=True),
    "live": st.Page("views/live_profiler.py", title="Live Profiler",
                    icon=":material/monitoring:", url_path="live"),
    "simulator": st.Page("views/load_simulator.py", title="Load Simulator",
                         icon=":material/ssid_chart:", url_path="simulator"),
    "lab": st.Page("views/optimisation_lab.py", title="Optimisation Lab",
                   icon=":material/tune:", url_path="lab"),
    "compare": st.Page("views/compare_runs.py", title="Compare Runs",
                       icon=":material/compare_arrows:", url_path="compare"),
    "workshop": st.Page("views/workshop.py", title="Workshop", icon=":material/school:",
                        url_path="workshop"),
    "sweep": st.Page("views/sweep.py", title="Sweep", icon=":material/stacked_line_chart:",
                     url_path="sweep"),
}
nav = st.navigation(list(pages.values()), position="top")
here = nav.url_path
followed = room_ui.follow(pages, here)  # presenter mode
instructor_box()
room_ui.presenter_controls(here)
room_ui.banner(followed)
if here not in room_ui.OWN_WATCH:
    room_ui.watch()
try:
    nav.run()
    room_ui.publish(here)
finally:  # however the page ended (st.stop, a rerun, an error): the next page's turn
    page_done()  # ui/page_turns.py
