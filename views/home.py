"""Home: what the tool shows, the five components, and where to start."""
import streamlit as st

from latency.components import COMPONENTS
from latency.plots import COMPONENT_COLOURS
from latency.registry import list_pipelines

st.title("Latency Lab")
st.markdown(
    "**Where does the time of one prediction request go?** Latency Lab runs real PyTorch "
    "pipelines under load and times every request component by component, live. Find the "
    "real bottleneck *before* you optimise: quantising the model does little when queueing "
    "or preprocessing dominates.")
st.page_link("views/live_profiler.py", label="Open the Live Profiler", icon=":material/monitoring:")

st.subheader("The five components of one request")
MEANING = {
    "network": ("client sends → server receives, plus server replies → client receives",
                "Transport and serialisation. In-process it is the thread hand-off."),
    "queue": ("request ready → a worker starts it",
              "Waiting for a free worker and for a batch to form. Grows sharply near capacity."),
    "preprocess": ("raw input → model-ready tensor",
                   "Decode, tokenise, resize, normalise, host→device copy."),
    "forward": ("tensor in → tensor out", "The model itself (on a GPU: synchronised)."),
    "postprocess": ("model output → response", "Softmax, top-k, labels, serialisation."),
    "overhead": ("intended send → actual send",
                 "The client's own gap (schedule lag in open loop). Shown, never hidden."),
}
rows = "\n".join(
    f"| <span style='color:{COMPONENT_COLOURS[c]}'>■</span> **{c}** | {MEANING[c][0]} | "
    f"{MEANING[c][1]} |" for c in COMPONENTS)
st.markdown("| component | from → to | what it is |\n|---|---|---|\n" + rows,
            unsafe_allow_html=True)
st.caption("Every request records integer-nanosecond timestamps; components are differences "
           "of them, so they add up to the total exactly.")

st.subheader("Sample pipelines")
for info in list_pipelines():
    st.markdown(f"- **{info.name}** — {info.description}")

st.subheader("Two classic mistakes")
st.markdown(
    "1. **Optimising the forward pass while another component dominates.** If the model is "
    "20% of the time, an infinitely fast model saves at most 20%.\n"
    "2. **Looking only at the end-to-end total.** The same p99 can come from a slow model or "
    "from requests waiting in a queue; the fixes are opposite.")
