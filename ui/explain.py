"""Workshop texts shared by the Home page and the Live Profiler's "What am I looking at?"."""
from __future__ import annotations

from latency.core.records import COMPONENTS, HANDOFF
from latency.figures.plots import COMPONENT_COLOURS

MEANING = {
    "network": ("client sends → server receives, plus server replies → client receives",
                "Transport and serialisation. In-process there is no network: the run calls "
                f"it the **{HANDOFF}**, the client thread handing the request to the server's "
                "(and the reply back)."),
    "queue": ("request ready → a worker starts it",
              "Waiting for a free worker and for a batch to form. Grows sharply near capacity."),
    "preprocess": ("raw input → model-ready tensor",
                   "Decode, tokenise, resize, normalise, host→device copy."),
    "forward": ("tensor in → tensor out", "The model itself (on a GPU: synchronised)."),
    "postprocess": ("model output → response", "Softmax, top-k, labels, serialisation."),
    "overhead": ("intended send → actual send",
                 "The client's own gap (schedule lag in open loop). Shown, never hidden."),
}

#: the components table, with each component's chart colour (needs unsafe_allow_html).
COMPONENTS_TABLE = "| component | from → to | what it is |\n|---|---|---|\n" + "\n".join(
    f"| <span style='color:{COMPONENT_COLOURS[c]}'>■</span> **{c}** | {MEANING[c][0]} | "
    f"{MEANING[c][1]} |" for c in COMPONENTS)

MISTAKES = (
    "1. **Optimising the forward pass while another component dominates.** If the model is "
    "20% of the time, an infinitely fast model saves at most 20%.\n"
    "2. **Looking only at the end-to-end total.** The same p99 can come from a slow model or "
    "from requests waiting in a queue; the fixes are opposite.")
