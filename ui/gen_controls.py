"""The generation controls the Live Profiler and the Load Simulator share: synthetic-lm's costs,
the lengths, the load, the scheduler and the objectives — one widget each, keyed by the page's
prefix (``gsim_`` on the simulator, ``glive_`` on the profiler), each tooltip the setting's own
help (``field_help``), so a run and its simulation are set with the same words."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from latency.core.config import APIS, RunConfig, field_help
from latency.core.slo import PRESETS
from ui.controls import KEEP, default

CUSTOM = "custom"
#: the lengths a page starts with: prompts across a real chat's range, short answers
PROMPT_TOKENS, OUTPUT_TOKENS = "uniform:16:900", "uniform:8:48"
#: the targets a page starts with, in the scale of synthetic-lm's default costs (a 900-token
#: prompt prefills in 46 ms, a step of 8 decodes in 8 ms)
TTFT_TARGET_MS, TPOT_TARGET_MS = 100.0, 10.0
#: the widgets' ranges' tops (a saved run's setting is clamped to them when a page takes it)
MAX_CLIENTS, MAX_SLOTS, MAX_STEP_TOKENS, MAX_CHUNK = 128, 64, 8192, 2048


@st.cache_resource(show_spinner=False)
def synthetic_lm_args() -> dict[str, Any]:
    """synthetic-lm's arguments (their defaults, help and ranges): a parametric server's
    costs are these, so the pages and the pipeline cannot disagree."""
    from latency.pipelines.registry import pipeline_class

    cls = pipeline_class("synthetic-lm")
    assert cls is not None  # a sample: always registered
    return {a.name: a for a in cls.model_args}


def cost_inputs(sb: Any, prefix: str) -> dict[str, float]:
    """synthetic-lm's four costs (ms), as its arguments by name."""
    args = synthetic_lm_args()

    def cost(label: str, name: str, step: float) -> float:
        a = args[name]
        return float(sb.number_input(label, 0.0, float(a.high),
                                     default(f"{prefix}{name}", float(a.default), "min"), step,
                                     format="%.3f", key=f"{prefix}{name}",
                                     help=f"synthetic-lm's {name}: {a.help}.", **KEEP))

    return {"prefill_ms": cost("Prefill call, fixed (ms)", "prefill_ms", 0.5),
            "prefill_ms_per_token": cost("Prefill, per prompt token (ms)",
                                         "prefill_ms_per_token", 0.01),
            "step_ms": cost("Decode step, fixed (ms)", "step_ms", 0.5),
            "step_ms_per_seq": cost("Decode step, per sequence (ms)", "step_ms_per_seq", 0.1)}


def length_inputs(sb: Any, prefix: str, own: bool = False) -> tuple[str, str]:
    """The prompt and output length specs (``own``: empty means a recorded run's own)."""
    note = " Empty: the recorded run's own." if own else ""
    prompts = sb.text_input("Prompt tokens", default(f"{prefix}prompts", PROMPT_TOKENS),
                            key=f"{prefix}prompts", placeholder="the run's own lengths",
                            help=field_help("prompt_tokens") + note, **KEEP)
    outputs = sb.text_input("Output tokens", default(f"{prefix}outputs", OUTPUT_TOKENS),
                            key=f"{prefix}outputs", placeholder="the run's own lengths",
                            help=field_help("output_tokens") + note, **KEEP)
    return (prompts or "").strip(), (outputs or "").strip()


@dataclass(frozen=True)
class Load:
    """A closed loop of ``clients``, or arrivals at ``rate`` (the other None)."""

    clients: int | None
    rate: float | None
    arrival: str


def load_inputs(sb: Any, prefix: str, rate: float, arrivals: tuple[str, ...]) -> Load:
    closed = sb.toggle("Closed loop (clients)", key=f"{prefix}closed",
                       help="Clients that each send again when their stream ends, instead of "
                            "arrivals at a rate.", **KEEP)
    if closed:
        clients = int(sb.slider("Clients", 1, MAX_CLIENTS, default(f"{prefix}clients", 8),
                                key=f"{prefix}clients", help=field_help("concurrency"),
                                **KEEP))
        sb.selectbox("Arrivals", arrivals, key=f"{prefix}arrival", disabled=True,
                     help=field_help("arrival"), **KEEP)
        return Load(clients, None, "poisson")
    value = float(sb.number_input("Arrival rate (requests/s)", 0.01, 10_000.0,
                                  default(f"{prefix}rate", rate, "min"), 0.5,
                                  key=f"{prefix}rate", help=field_help("rate"), **KEEP))
    arrival = sb.selectbox("Arrivals", arrivals, key=f"{prefix}arrival",
                           help=field_help("arrival"), **KEEP)
    return Load(None, value, arrival)


def scheduler_inputs(sb: Any, prefix: str) -> dict[str, Any]:
    """The scheduler's settings as RunConfig's fields (``chunked_prefill`` and ``kv_tokens``
    0 when off: the default)."""
    batching = sb.selectbox("Batching", ["continuous", "static"], key=f"{prefix}batching",
                            help=field_help("batching"), **KEEP)
    max_running = sb.slider("Max running sequences (slots)", 1, MAX_SLOTS,
                            default(f"{prefix}max_running", RunConfig.max_running),
                            key=f"{prefix}max_running", help=field_help("max_running"), **KEEP)
    step_tokens = sb.slider("Max tokens per step", 64, MAX_STEP_TOKENS,
                            default(f"{prefix}step_tokens", RunConfig.max_step_tokens), 64,
                            key=f"{prefix}step_tokens", help=field_help("max_step_tokens"),
                            **KEEP)
    chunked = sb.toggle("Chunked prefill", key=f"{prefix}chunked",
                        disabled=batching == "static", help=field_help("chunked_prefill"),
                        **KEEP)
    chunk = 0
    if chunked and batching != "static":
        chunk = int(sb.slider("Chunk size (tokens)", 16, MAX_CHUNK, default(f"{prefix}chunk", 256),
                              16, key=f"{prefix}chunk",
                              help="The most prompt tokens of one sequence a step prefills; "
                                   "the step's own budget (Max tokens per step) bounds them "
                                   "all together — a small one stalls the decoding streams "
                                   "less, and takes longer to reach a long prompt's first "
                                   "token.", **KEEP))
    kv = int(sb.number_input("KV budget (tokens; 0: every slot a whole context)", 0,
                             10_000_000, default(f"{prefix}kv", 0, "min"), 1024,
                             key=f"{prefix}kv", help=field_help("kv_tokens"), **KEEP))
    return {"batching": batching, "max_running": int(max_running),
            "max_step_tokens": int(step_tokens), "chunked_prefill": chunk, "kv_tokens": kv}


def objective_inputs(sb: Any, prefix: str) -> tuple[float, float, float | None]:
    """The TTFT and TPOT targets (ms), which a preset (MLPerf's) fills, and an E2E target
    (ms; empty: none)."""

    def take_preset() -> None:
        name = st.session_state.get(f"{prefix}preset")
        if name in PRESETS:
            st.session_state[f"{prefix}ttft"], st.session_state[f"{prefix}tpot"] = PRESETS[name]

    sb.subheader("Objectives")
    sb.selectbox("Preset (MLPerf's)", [CUSTOM, *PRESETS], key=f"{prefix}preset",
                 on_change=take_preset, help=field_help("slo"), **KEEP)
    ttft = sb.number_input("TTFT target (ms)", 0.1, 3_600_000.0,
                           default(f"{prefix}ttft", TTFT_TARGET_MS, "min"), 10.0,
                           key=f"{prefix}ttft", help=field_help("slo_ttft_ms"), **KEEP)
    tpot = sb.number_input("TPOT target (ms)", 0.01, 3_600_000.0,
                           default(f"{prefix}tpot", TPOT_TARGET_MS, "min"), 1.0,
                           key=f"{prefix}tpot", help=field_help("slo_tpot_ms"), **KEEP)
    e2e = sb.number_input("E2E target (ms, optional)", 0.1, 3_600_000.0, None, 100.0,
                          key=f"{prefix}e2e",
                          placeholder="none", help=field_help("slo_e2e_ms"), **KEEP)
    return float(ttft), float(tpot), None if e2e is None else float(e2e)


def target_inputs(sb: Any, prefix: str, scrape_label: str) -> dict[str, Any]:
    """How a server of yours is asked and read — the API, counting tokens with its own
    tokenizer, its /metrics — as RunConfig's fields."""
    api = sb.selectbox("API", list(APIS), key=f"{prefix}api",
                       help=field_help("api"), **KEEP)
    counted = sb.toggle("Count tokens with its tokenizer", True, key=f"{prefix}tokenizer",
                        help=field_help("tokenizer"), **KEEP)
    scrape = sb.toggle(scrape_label, True, key=f"{prefix}scrape",
                       help=field_help("scrape_metrics"), **KEEP)
    return {"api": api, "tokenizer": "server" if counted else None,
            "scrape_metrics": bool(scrape)}

