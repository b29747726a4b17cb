"""The Load Simulator in its generation mode: the sidebar's settings, then the simulated run's
figures, its load curves, the highest rate meeting both objectives and the what-ifs. Everything
here is simulated (``ui/gen_simulator.py`` caches it); the figures come from
``latency.figures.gen_plots``."""
from __future__ import annotations

import streamlit as st

from latency.core.config import field_help
from latency.core.errors import ConfigError
from latency.figures import gen_plots
from latency.simulation.gen_capacity import DEFAULT_ATTAINMENT, GenPoint, point_of
from latency.simulation.gen_parametric import ParametricCosts
from latency.simulation.gen_replay import target_fit
from ui.controls import KEEP, default
from ui.gen_controls import (
    MAX_CHUNK,
    MAX_CLIENTS,
    MAX_SLOTS,
    MAX_STEP_TOKENS,
    cost_inputs,
    length_inputs,
    load_inputs,
    objective_inputs,
    scheduler_inputs,
    synthetic_lm_args,
)
from ui.gen_figures import generation_figures, headline_metrics, point_metrics
from ui.gen_simulator import (
    LISTED_RUNS,
    PARAMETRIC,
    GenSimPage,
    GenValidation,
    calibrated_headline,
    calibrated_point,
    calibration_warnings,
    curve,
    headline,
    marked_curve,
    recorded,
    recorded_generations,
    validation_config,
    validation_rows,
    what_ifs,
)
from ui.priority import yield_cpu_to_runs
from ui.server import run_manager
from ui.session import session_id
from ui.text import plain

PREFIX = "gsim_"  # the widgets' keys (ui/gen_controls.py)
MAX_REPLICAS = 8


def take_run_setup() -> None:
    """A recorded generation chosen: the scheduler widgets take its own settings, and the load
    widgets its clients or rate where it had one, as its replay does (``simulate
    --from-run``), until one is moved — each clamped to its widget's range. Unreadable: left
    as they are."""
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

    def within(value: int, low: int, high: int) -> int:
        return min(max(int(value), low), high)

    slots = c.max_running
    if run.is_target:  # its server's slots as the run showed them (gen_target_service)
        try:
            slots = target_fit(run).slots
        except ConfigError:
            return
    st.session_state.update({
        "gsim_prompts": "", "gsim_outputs": "",
        "gsim_max_running": within(slots, 1, MAX_SLOTS),
        "gsim_step_tokens": within(c.max_step_tokens // 64 * 64, 64, MAX_STEP_TOKENS),
        "gsim_batching": c.batching, "gsim_chunked": bool(c.chunked_prefill),
        "gsim_replicas": within(c.replicas, 1, MAX_REPLICAS),
        "gsim_closed": bool(c.concurrency and not c.rate)})
    if c.chunked_prefill:
        st.session_state["gsim_chunk"] = within(c.chunked_prefill // 16 * 16, 16, MAX_CHUNK)
    if c.concurrency and not c.rate:
        st.session_state["gsim_clients"] = within(c.concurrency, 1, MAX_CLIENTS)
    elif c.rate:
        st.session_state["gsim_rate"] = float(c.rate)


def sidebar() -> tuple[GenSimPage, float]:
    """The settings, and the attainment asked of the highest rate."""
    sb = st.sidebar
    d = GenSimPage()  # the defaults
    sb.header("Simulated LLM server")
    find = sb.text_input(
        "Find a saved generation", key="gsim_find", placeholder="id or name",
        help=f"The picker below lists the newest {LISTED_RUNS} saved generations whose id, "
             "name, model or load contain this — searched over the whole history.")
    recorded_runs = recorded_generations(find, st.session_state.get("gsim_source"))
    source = sb.selectbox(
        "Step costs from", [PARAMETRIC, *recorded_runs], key="gsim_source",
        on_change=take_run_setup, format_func=lambda k: recorded_runs.get(k, k),
        help="Parametric: a server whose prefill and decode costs you set (synthetic-lm's). "
             "Or a saved generation run (`python -m latency run --model tiny-lm …`): its "
             "scheduler steps are fitted — fixed + per prompt token + per attention pair for "
             "a prefill, fixed + per sequence + per KV token for a decode step — with the "
             "fit's error shown, and its spread and drift kept. A run of a server of yours "
             "(`--target`) is fitted from outside: its decode step from the gaps between "
             "tokens, its prefill from the first tokens, its slots from the most requests it "
             "ran at once (the slots slider is set to them).", **KEEP)
    if source in recorded_runs:  # the whole label: the box cuts a long one
        sb.caption(recorded_runs[source])
    costs = None
    if source == PARAMETRIC:
        costs = ParametricCosts(**cost_inputs(sb, PREFIX),
                                max_context=int(synthetic_lm_args()["max_context"].default))
    prompts, outputs = length_inputs(sb, PREFIX, own=source != PARAMETRIC)
    load = load_inputs(sb, PREFIX, d.rate, ("poisson", "constant", "bursty"))
    scheduler = scheduler_inputs(sb, PREFIX)
    replicas = sb.slider("Replicas", 1, MAX_REPLICAS, default("gsim_replicas", 1),
                         key="gsim_replicas",
                         help=field_help("replicas"), **KEEP)
    ttft, tpot, e2e = objective_inputs(sb, PREFIX)
    attainment = sb.slider("Requests that must meet the targets (%)", 50, 99,
                           default("gsim_attain", int(DEFAULT_ATTAINMENT * 100)),
                           key="gsim_attain",
                           help="DistServe's SLO attainment: the highest rate is the one at "
                                "which at least this share of requests meet every target.",
                           **KEEP) / 100
    requests = sb.slider("Simulated requests", 100, 2000, default("gsim_requests", d.requests), 100,
                         key="gsim_requests",
                         help="Each simulation's length (the curves simulate as many at "
                              "each rate). More pins the p99 down, and takes longer.", **KEEP)
    page = GenSimPage(source=source, costs=costs, prompt_tokens=prompts, output_tokens=outputs,
                      rate=load.rate or 1.0, clients=load.clients, arrival=load.arrival,
                      replicas=replicas, ttft_target_ms=ttft, tpot_target_ms=tpot,
                      e2e_target_ms=e2e,
                      requests=requests, **scheduler)
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
    doubts = [] if page.parametric else calibration_warnings(*recorded(page.source))
    for w in doubts:
        st.warning(w, icon=":material/warning:")
    calibrated = calibrated_headline(page) if doubts else None
    if calibrated is not None:
        run_id, point = calibrated
        point_metrics(point, " (calibrated)")
        st.caption(f"**Calibrated** by the validation run `{run_id}`: this setting simulated "
                   "again with the step costs this machine delivered in it, over its own "
                   "arrivals and lengths — the figures to read while the saved run's "
                   "calibration is in doubt. Below them, the prediction as set from the saved "
                   "run.")
    for w in h.result.warnings:
        st.warning(str(w))
    if s.errors:
        why, n = max(s.error_messages.items(), key=lambda kv: kv[1], default=("", 0))
        st.warning(f"**{s.errors:,} of {s.requests:,} requests refused** by the simulated "
                   f"server ({n:,}: {plain(why)}).")
    headline_metrics(s, " (simulated)")
    st.caption(f"{s.successful:,} requests simulated ({s.errors:,} refused), "
               f"{s.throughput_rps:.2f} served a second; objectives {page.objectives}; "
               f"mean {s.scheduler.get('mean_running', 0):.1f} running and "
               f"{s.scheduler.get('mean_waiting', 0):.1f} waiting, "
               f"{s.preemptions:,} preemption(s).")
    generation_figures(v, page.ttft_target_ms, page.tpot_target_ms, key="gsimfig_")
    curves(page, attainment)
    whatifs(page)
    validate(page, h.point)


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
    if page.clients is None and page.arrival != "poisson":
        offered = (f" Each point sits at the rate its arrivals offered (your {page.rate:g}/s "
                   f"offered {headline(page).point.rate:.2f}/s here).")
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
                          "slots, a 40 % faster decode step (its time × 0.6): each simulated "
                          "at the same load and random numbers as your setting."):
        return
    arms = {}
    for name, changed in what_ifs(page).items():
        try:
            arms[name] = headline(changed).point
        except ConfigError as exc:
            st.warning(f"{name}: {exc}")
    base = headline(page).point
    st.table(gen_plots.whatif_rows(base, arms))
    st.caption("Each what-if changes one setting and nothing else (the same load, lengths "
               "and random numbers). A faster decode step shortens TPOT; whether TTFT moves "
               "depends on what TTFT is made of — the bars above say.")



def validate(page: GenSimPage, predicted: GenPoint) -> None:
    """Run the setting for real and set measured beside predicted (and beside the prediction
    calibrated on the real run's own costs)."""
    st.subheader("Validate against a real run")
    length = st.slider("Validation run length (s)", 5, 120, default("gsim_val_len", 15), 5,
                       key="gsim_val_len",
                       help="Longer runs pin the p99 down. The run is queued like any other "
                            "and measures on this machine.", **KEEP)
    what = ("synthetic-lm holding these costs" if page.parametric
            else "the saved run's pipeline with these settings")
    if st.button(f"Validate: run it for real ({length} s)", key="gsimbtn_validate",
                 help=f"Runs {what} at this load and scheduler on this machine, then sets "
                      "measured against predicted."):
        try:
            ticket = run_manager().submit(validation_config(page, float(length)),
                                          owner=session_id())
            st.session_state["gsimval_run"] = GenValidation(ticket.run_id, page,
                                                                    predicted)
        except ConfigError as exc:
            st.error(f"Cannot validate: {plain(exc)}")
    validation = st.session_state.get("gsimval_run")
    if not isinstance(validation, GenValidation):
        return
    handle = run_manager().get(validation.run_id)
    if handle is None:
        return

    @st.fragment(run_every=1.0 if not handle.done() else None)
    def validation_view() -> None:
        yield_cpu_to_runs()
        snap = handle.snapshot()
        if not snap.finished:
            st.progress(0.0 if snap.phase != "measuring" else 0.5,
                        text=f"real run {snap.phase} · {snap.progress.get('measured', 0)} "
                             "requests measured")
            return
        result = handle.result()
        first_view = st.session_state.get("gsimval_shown") != handle.run_id
        st.session_state["gsimval_shown"] = handle.run_id
        if snap.summary is None or not snap.summary.successful:
            why = snap.failure or "nothing measured"
            st.error(f"The validation run {snap.status}: {plain(why)}")
            if first_view:
                st.rerun()  # stop polling
            return
        if validation.page != page:
            st.info("The settings changed since this validation; press Validate again.")
        measured = point_of(validation.page.rate, result.summary)
        try:
            calibrated = calibrated_point(handle.run_id)
        except ConfigError as exc:
            calibrated = None
            st.warning(f"No calibrated prediction: {plain(exc)}")
        st.table(validation_rows(validation.predicted, measured, calibrated))
        st.caption(f"Measured on this machine by `{handle.run_id}` ({snap.status}, "
                   f"{result.summary.successful:,} requests; {plain(result.validity.line())}). "
                   "*Calibrated*: simulated again with the costs this machine delivered — "
                   "fitted from the validation run's own steps — over its own arrivals and "
                   "lengths; the difference column is against it. A tail from a short run "
                   "moves from run to run: run longer before calling a p99 wrong.")
        if first_view:
            st.rerun()  # stop polling

    validation_view()
