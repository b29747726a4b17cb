"""The Load Simulator in its generation mode: the sidebar's settings, then the simulated run's
figures, its load curves, the highest rate meeting both objectives and the what-ifs. Everything
here is simulated (``ui/gen_simulator.py`` caches it); the figures come from
``latency.figures.gen_plots``."""
from __future__ import annotations

import streamlit as st

from latency.core import fmt
from latency.core.config import field_help
from latency.core.errors import ConfigError
from latency.core.slo import PRESETS
from latency.figures import gen_plots
from latency.simulation.gen_capacity import DEFAULT_ATTAINMENT
from latency.simulation.gen_parametric import ParametricCosts
from ui.controls import KEEP, default
from ui.gen_simulator import (
    PARAMETRIC,
    GenSimPage,
    curve,
    figures_of,
    headline,
    marked_curve,
    recorded,
    recorded_generations,
    synthetic_lm_args,
    what_ifs,
)
from ui.text import plain

CUSTOM = "custom"


def take_preset() -> None:
    """A preset's targets fill the two objective inputs (MLPerf's, checked at p99)."""
    name = st.session_state.get("gsim_preset")
    if name in PRESETS:
        st.session_state["gsim_ttft"], st.session_state["gsim_tpot"] = PRESETS[name]


def take_run_setup() -> None:
    """A recorded generation chosen: the scheduler and load widgets take its own, as its
    replay does (``simulate --from-run``), until one is moved. Unreadable: left as they are."""
    source = st.session_state.get("gsim_source")
    if not source or source == PARAMETRIC:
        st.session_state["gsim_prompts"] = GenSimPage.prompt_tokens
        st.session_state["gsim_outputs"] = GenSimPage.output_tokens
        return
    try:
        run, _ = recorded(source)
    except ConfigError:
        return
    c = run.config
    st.session_state.update({
        "gsim_prompts": "", "gsim_outputs": "", "gsim_max_running": int(c.max_running),
        "gsim_step_tokens": int(c.max_step_tokens), "gsim_batching": c.batching,
        "gsim_chunked": bool(c.chunked_prefill), "gsim_replicas": int(c.replicas),
        "gsim_closed": bool(c.concurrency and not c.rate)})
    if c.chunked_prefill:
        st.session_state["gsim_chunk"] = int(c.chunked_prefill)
    if c.concurrency and not c.rate:
        st.session_state["gsim_clients"] = int(c.concurrency)
    elif c.rate:
        st.session_state["gsim_rate"] = float(c.rate)


def sidebar() -> tuple[GenSimPage, float]:
    """The settings, and the attainment asked of the highest rate."""
    sb = st.sidebar
    d = GenSimPage()  # the defaults
    sb.header("Simulated LLM server")
    recorded_runs = recorded_generations()
    source = sb.selectbox(
        "Step costs from", [PARAMETRIC, *recorded_runs], key="gsim_source",
        on_change=take_run_setup, format_func=lambda k: recorded_runs.get(k, k),
        help="Parametric: a server whose prefill and decode costs you set (synthetic-lm's). "
             "Or a saved generation run (`python -m latency run --model tiny-lm …`): its "
             "scheduler steps are fitted — fixed + per prompt token + per attention pair for "
             "a prefill, fixed + per sequence + per KV token for a decode step — with the "
             "fit's error shown, and its spread and drift kept.", **KEEP)
    costs = None
    if source == PARAMETRIC:
        args = synthetic_lm_args()

        def cost(label: str, name: str, step: float) -> float:
            a = args[name]
            return float(sb.number_input(label, 0.0, float(a.high),
                                         default(f"gsim_{name}", float(a.default), "min"), step,
                                         format="%.3f", key=f"gsim_{name}",
                                         help=f"synthetic-lm's {name}: {a.help}.", **KEEP))

        costs = ParametricCosts(
            prefill_ms=cost("Prefill call, fixed (ms)", "prefill_ms", 0.5),
            prefill_ms_per_token=cost("Prefill, per prompt token (ms)", "prefill_ms_per_token",
                                      0.01),
            step_ms=cost("Decode step, fixed (ms)", "step_ms", 0.5),
            step_ms_per_seq=cost("Decode step, per sequence (ms)", "step_ms_per_seq", 0.1),
            max_context=int(args["max_context"].default))
    own = "" if source != PARAMETRIC else None
    prompts = sb.text_input("Prompt tokens", default("gsim_prompts", d.prompt_tokens),
                            key="gsim_prompts", placeholder="the run's own lengths",
                            help=field_help("prompt_tokens") + (
                                " Empty: the recorded run's own." if own == "" else ""), **KEEP)
    outputs = sb.text_input("Output tokens", default("gsim_outputs", d.output_tokens),
                            key="gsim_outputs", placeholder="the run's own lengths",
                            help=field_help("output_tokens") + (
                                " Empty: the recorded run's own." if own == "" else ""), **KEEP)
    closed = sb.toggle("Closed loop (clients)", key="gsim_closed",
                       help="Clients that each send again when their stream ends, instead of "
                            "arrivals at a rate.", **KEEP)
    clients = rate = None
    if closed:
        clients = int(sb.slider("Clients", 1, 128, default("gsim_clients", 8),
                                key="gsim_clients", help=field_help("concurrency"), **KEEP))
    else:
        rate = float(sb.number_input("Arrival rate (requests/s)", 0.01, 10_000.0,
                                     default("gsim_rate", d.rate, "min"), 0.5, key="gsim_rate",
                                     help=field_help("rate"), **KEEP))
    arrival = sb.selectbox("Arrivals", ["poisson", "constant", "bursty"], key="gsim_arrival",
                           disabled=closed, help=field_help("arrival"), **KEEP)
    batching = sb.selectbox("Batching", ["continuous", "static"], key="gsim_batching",
                            help=field_help("batching"), **KEEP)
    max_running = sb.slider("Max running sequences (slots)", 1, 64,
                            default("gsim_max_running", d.max_running), key="gsim_max_running",
                            help=field_help("max_running"), **KEEP)
    step_tokens = sb.slider("Max tokens per step", 64, 8192,
                            default("gsim_step_tokens", d.max_step_tokens), 64,
                            key="gsim_step_tokens", help=field_help("max_step_tokens"),
                            **KEEP)
    chunked = sb.toggle("Chunked prefill", key="gsim_chunked", disabled=batching == "static",
                        help=field_help("chunked_prefill"), **KEEP)
    chunk = 0
    if chunked and batching != "static":
        chunk = int(sb.slider("Chunk size (tokens)", 16, 2048, default("gsim_chunk", 256), 16,
                              key="gsim_chunk",
                              help="The most prompt tokens one step prefills: smaller chunks "
                                   "stall the decoding streams less, and take longer to "
                                   "reach a long prompt's first token.", **KEEP))
    kv = int(sb.number_input("KV budget (tokens; 0: every slot a whole context)", 0,
                             10_000_000, default("gsim_kv", 0, "min"), 1024, key="gsim_kv",
                             help=field_help("kv_tokens"), **KEEP))
    replicas = sb.slider("Replicas", 1, 8, default("gsim_replicas", 1), key="gsim_replicas",
                         help=field_help("replicas"), **KEEP)
    sb.subheader("Objectives")
    sb.selectbox("Preset (MLPerf's)", [CUSTOM, *PRESETS], key="gsim_preset",
                 on_change=take_preset, help=field_help("slo"), **KEEP)
    ttft = sb.number_input("TTFT target (ms)", 0.1, 3_600_000.0,
                           default("gsim_ttft", d.ttft_target_ms, "min"), 10.0, key="gsim_ttft",
                           help=field_help("slo_ttft_ms"), **KEEP)
    tpot = sb.number_input("TPOT target (ms)", 0.01, 3_600_000.0,
                           default("gsim_tpot", d.tpot_target_ms, "min"), 1.0, key="gsim_tpot",
                           help=field_help("slo_tpot_ms"), **KEEP)
    attainment = sb.slider("Requests that must meet both (%)", 50, 99,
                           default("gsim_attain", int(DEFAULT_ATTAINMENT * 100)),
                           key="gsim_attain",
                           help="DistServe's SLO attainment: the highest rate is the one at "
                                "which at least this share of requests meet both targets.",
                           **KEEP) / 100
    requests = sb.slider("Simulated requests", 100, 2000, default("gsim_requests", d.requests), 100,
                         key="gsim_requests",
                         help="Each simulation's length (the curves simulate as many at "
                              "each rate). More pins the p99 down, and takes longer.", **KEEP)
    page = GenSimPage(source=source, costs=costs, prompt_tokens=(prompts or "").strip(),
                      output_tokens=(outputs or "").strip(), rate=rate or 1.0, clients=clients,
                      arrival=arrival, replicas=replicas, batching=batching,
                      max_running=max_running, max_step_tokens=step_tokens,
                      chunked_prefill=chunk, kv_tokens=kv, ttft_target_ms=float(ttft),
                      tpot_target_ms=float(tpot), requests=requests)
    return page, float(attainment)


def render() -> None:
    page, attainment = sidebar()
    if page.parametric and not (page.prompt_tokens and page.output_tokens):
        st.error("Cannot simulate: a parametric server needs prompt and output lengths "
                 "(e.g. uniform:16:900 and 64)")
        return
    try:
        h = headline(page)
    except ConfigError as exc:
        st.error(f"Cannot simulate: {exc}")
        return
    s, v = h.result.summary, h.view
    st.caption(f"**Simulated** (no model runs): {h.describe}. Server: {h.fit}.")
    for w in h.result.warnings:
        st.warning(str(w))
    if s.errors:
        why, n = max(s.error_messages.items(), key=lambda kv: kv[1], default=("", 0))
        st.warning(f"**{s.errors:,} of {s.requests:,} requests refused** by the simulated "
                   f"server ({n:,}: {plain(why)}).")
    m = st.columns(5)
    m[0].metric("TTFT p50 (simulated)", fmt.duration(s.ttft_ms.p50))
    m[1].metric("TTFT p99", fmt.duration(s.ttft_ms.p99))
    m[2].metric("TPOT p99", fmt.duration(s.tpot_ms.p99))
    m[3].metric("meeting both targets",
                f"{s.slo_met_share:.1%}" if s.slo_met_share is not None else fmt.DASH)
    m[4].metric("output tokens/s", f"{s.output_tokens_per_s:,.0f}")
    st.caption(f"{s.successful:,} requests simulated ({s.errors:,} refused), "
               f"{s.throughput_rps:.2f} served a second; objectives {page.objectives}; "
               f"mean {s.scheduler.get('mean_running', 0):.1f} running and "
               f"{s.scheduler.get('mean_waiting', 0):.1f} waiting, "
               f"{s.preemptions:,} preemption(s).")
    left, right = st.columns(2)
    with left:
        st.caption("Time to first token, by part (each bar: the requests around it).")
        st.plotly_chart(gen_plots.ttft_bars_figure(v), key="gsimfig_ttft_bars")
        st.plotly_chart(gen_plots.ttft_histogram_figure(v, page.ttft_target_ms),
                        key="gsimfig_ttft_hist")
    with right:
        st.caption("A gap between tokens, by part (stall: another request's prefill held "
                   "the step).")
        st.plotly_chart(gen_plots.gap_bars_figure(v), key="gsimfig_gap_bars")
        st.plotly_chart(gen_plots.itl_histogram_figure(v, page.tpot_target_ms),
                        key="gsimfig_itl_hist")
    st.subheader("The last requests, step by step")
    st.caption("A row a request: waiting for a slot, prefill, then decoding; a tick per "
               "token delivered, and in red each stall — the stream standing still while "
               "another request's prefill holds the step, as long as it lasted. A whole "
               "prompt's prefill draws one long red bar through every running stream; turn on "
               "chunked prefill with a small step budget (*Max tokens per step*, vLLM's "
               "max_num_batched_tokens) and it becomes many short ones.")
    st.plotly_chart(gen_plots.waterfall_figure(v.waterfall), key="gsimfig_waterfall")
    st.subheader("The scheduler over time")
    st.plotly_chart(gen_plots.scheduler_figure(v), key="gsimfig_scheduler")
    curves(page, attainment)
    whatifs(page)


def curves(page: GenSimPage, attainment: float) -> None:
    st.subheader("TTFT and TPOT as the rate rises")
    try:
        answer, c = marked_curve(page, attainment)
    except ConfigError as exc:
        st.error(f"Cannot sweep the rate: {exc}")
        return
    st.plotly_chart(gen_plots.gen_rate_figure(c, page.ttft_target_ms, page.tpot_target_ms),
                    key="gsimfig_rate")
    closed = ("" if page.clients is None else " A closed loop has no arrival rate, so your "
              "setting is not marked on it.")
    offered = ""
    if page.clients is None:
        offered = (f" Each point sits at the rate its arrivals offered: random arrivals "
                   f"scatter around the rate asked (your {page.rate:g}/s offered "
                   f"{headline(page).point.rate:.2f}/s here).")
    st.caption(f"Each point simulates {page.requests:,} requests at that rate ({page.arrival} "
               "arrivals, the same random numbers at every rate); the server saturates near "
               f"{curve(page.curve_key()).saturation_rps:.2f} requests/s (a closed loop that "
               f"keeps every slot busy).{offered}{closed}")
    st.subheader("Goodput, and the highest rate meeting both targets")
    st.plotly_chart(gen_plots.goodput_figure(c, answer), key="gsimfig_goodput")
    st.markdown(f"**Highest arrival rate meeting both targets:** "
                f"{answer.sentence(page.objectives)}.")


def whatifs(page: GenSimPage) -> None:
    st.subheader("What if…")
    if not st.toggle("Simulate the levers at this load", key="gsim_whatif",
                     help="Chunked prefill (with a step budget of its chunk), twice the "
                          "slots, a 40 % faster decode step: each simulated at the same load "
                          "and random numbers as your setting."):
        return
    arms = {}
    for name, changed in what_ifs(page).items():
        try:
            arms[name] = figures_of(headline(changed).point)
        except ConfigError as exc:
            st.warning(f"{name}: {exc}")
    base = figures_of(headline(page).point)
    st.table(gen_plots.whatif_rows(base, arms))
    st.caption("Each what-if changes one setting and nothing else (the same load, lengths "
               "and random numbers). A faster decode step shortens TPOT; whether TTFT moves "
               "depends on what TTFT is made of — the bars above say.")

