"""Load Simulator: move a slider, see queueing — simulated instantly, checked against theory.
One-shot requests (``ui/load_simulator_page.py``) or streamed generation
(``ui/gen_simulator_page.py``)."""
import streamlit as st

from ui import gen_simulator_page, load_simulator_page
from ui.controls import KEEP, default
from ui.priority import yield_cpu_to_runs

#: what the page simulates: one-shot requests, or streamed generation (an LLM server)
KINDS = {"one-shot": "one-shot requests", "generation": "streamed generation (LLM)"}


yield_cpu_to_runs()
kind = st.sidebar.segmented_control(
    "Simulate", list(KINDS), format_func=KINDS.get, key="sim_kind",
    default=default("sim_kind", "one-shot"), required=True,
    help="One-shot requests (a queue, a batcher, replicas) or streamed generation (an LLM "
         "server's iteration-level scheduler: slots, prefill, decode steps, a KV budget).",
    **KEEP)
if kind == "generation":
    st.title("Load Simulator · generation")
    st.caption("Everything on this page is **simulated**: a discrete-event model of an LLM "
               "server's scheduler — the one our generation server runs — step by step, with "
               "each step's time from a cost model. No model runs here.")
    gen_simulator_page.render()
else:
    load_simulator_page.render()
