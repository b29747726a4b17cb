"""Latency Lab dashboard: ``streamlit run app.py``.

A frame only: page navigation and the sidebar parts every page shares. Pages live in
``pages/``; figures come from ``latency.plots``; runs go through the shared run manager.
"""
import streamlit as st

from ui.shared import instructor_box, run_manager, session_id

st.set_page_config(page_title="Latency Lab", page_icon=":material/timer:", layout="wide")

run_manager()  # start the server-wide manager with the first session
session_id()
nav = st.navigation([
    st.Page("pages/home.py", title="Home", icon=":material/home:", default=True),
    st.Page("pages/live_profiler.py", title="Live Profiler", icon=":material/monitoring:", url_path="live"),
], position="top")
instructor_box()
nav.run()
