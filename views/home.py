"""Home: what the tool shows, the five components, and where to start."""
import streamlit as st

from latency.registry import list_pipelines
from ui.explain import COMPONENTS_TABLE, MISTAKES

st.title("Latency Lab")
st.markdown(
    "**Where does the time of one prediction request go?** Latency Lab runs real PyTorch "
    "pipelines under load and times every request component by component, live. Find the "
    "real bottleneck *before* you optimise: quantising the model does little when queueing "
    "or preprocessing dominates.")
st.page_link("views/live_profiler.py", label="Open the Live Profiler", icon=":material/monitoring:")

st.subheader("The five components of one request (and overhead)")
st.markdown(COMPONENTS_TABLE, unsafe_allow_html=True)
st.caption("Every request records integer-nanosecond timestamps; components are differences "
           "of them, so they add up to the total exactly.")

st.subheader("Sample pipelines")
for info in list_pipelines():
    st.markdown(f"- **{info.name}** — {info.description}")

st.subheader("Two classic mistakes")
st.markdown(MISTAKES)
