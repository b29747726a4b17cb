"""The Load Simulator for one-shot requests: move a slider, see queueing — simulated
instantly, checked against theory, validated against a real run. The page's settings and
computations are ``ui/load_simulator.py``'s; this module lays them out."""
from __future__ import annotations

from dataclasses import replace

import streamlit as st

from latency.core import fmt
from latency.core.errors import ConfigError
from latency.figures import plots
from latency.simulation.config import setting_help
from latency.simulation.horizon import MOST_VECTORISED
from latency.simulation.utilisation import utilisation_text
from ui.controls import KEEP, default
from ui.load_simulator import (
    MAX_BATCH,
    MAX_DELAY_MS,
    MAX_REPLICAS,
    PER_ITEM_SHARE_DEFAULT,
    SIM_REQUESTS,
    SimSettings,
    Validation,
    calibrated_prediction,
    capacity_of,
    comparison_markdown,
    plan,
    predict,
    preprocess_workers,
    recorded_runs,
    take_run_setup,
    validation_config,
)
from ui.priority import yield_cpu_to_runs
from ui.server import run_manager
from ui.session import session_id


def render() -> None:
    st.title("Load Simulator")
    st.caption("Everything on this page is **simulated** (a discrete-event model of the same "
               "server the profiler runs) — no model runs here, until you press **Validate** at "
               "the bottom, which runs the same setting for real and sets it beside the "
               "prediction.")
    sb = st.sidebar
    sb.header("Simulated system")
    recorded = recorded_runs()
    source = sb.selectbox("Service times from", ["parametric", *recorded], key="sim_source",
                          on_change=take_run_setup,
                          format_func=lambda k: recorded.get(k, k),
                          help="Parametric: a forward time you choose. Or a recorded run (this "
                               "session's or the saved history's): each component and the forward "
                               "time per batch size are resampled from what was measured, and "
                               "the replicas and batching start at the run's own.", **KEEP)
    service_ms, dist, cv, per_item = 10.0, "exponential", 1.0, 0.0
    if source != "parametric":
        try:
            sb.caption(f"Preprocessing through {preprocess_workers(source) or 'unlimited'} "
                       "worker(s), as in the recorded run: requests wait for a free one.")
        except ValueError as exc:
            st.error(f"Cannot read the recorded run: {exc}")
            return
    if source == "parametric":
        service_ms = sb.slider("Forward time, mean (ms)", 0.5, 200.0,
                               default("sim_service", 10.0), 0.5,
                               key="sim_service",
                               help=setting_help("forward_ms"), **KEEP)
        dist = sb.selectbox("Forward-time distribution", ["exponential", "constant", "lognormal"],
                            key="sim_dist", help=setting_help("dist"), **KEEP)
        if dist == "lognormal":
            cv = sb.slider("Spread (coefficient of variation)", 0.1, 3.0,
                           default("sim_cv", 1.0), 0.1,
                           key="sim_cv",
                           help=setting_help("cv"), **KEEP)
        per_item = sb.slider(
            "Each extra request in a batch costs (% of batch-1 time)", 0, 150,
            default("sim_per_item", int(round(100 * PER_ITEM_SHARE_DEFAULT))), 5,
            key="sim_per_item",
            help="A batch of b requests takes forward × (1 + share × (b − 1)): batching saves "
                 "the fixed part, never the per-request work. Default 45 %: the sample image-cnn "
                 "measured 1.53 ms at batch 1 and 6.37 ms at batch 8 (BENCHMARKS.md, "
                 "bench/bench_onnx.py); the text-transformer measured 115 %. 0 % makes batching "
                 "free, which no real model is.", **KEEP) / 100
    arrival = sb.selectbox("Arrivals", ["poisson", "constant", "bursty"], key="sim_arrival",
                           help=setting_help("arrival"), **KEEP)
    replicas = sb.slider("Replicas", 1, MAX_REPLICAS, default("sim_replicas", 1),
                         key="sim_replicas",
                         help=setting_help("replicas"), **KEEP)
    batch = sb.slider("Max batch size", 1, MAX_BATCH, default("sim_batch", 1), key="sim_batch",
                      help=setting_help("batch_size"), **KEEP)
    delay = sb.slider("Max batch delay (ms)", 0.0, MAX_DELAY_MS, default("sim_delay", 0.0), 0.5,
                      key="sim_delay",
                      help=setting_help("max_batch_delay_ms"), **KEEP)
    as_recorded = source != "parametric" and sb.toggle(
        "Load as recorded", key="sim_as_recorded",
        help="The recorded run's own load: its clients for a closed-loop run, its rate for an open "
             "one — as `simulate --from-run RUN` replays it without --rate. Off: open-loop "
             "arrivals at the rate below.", **KEEP)
    base = SimSettings(source=source, service_ms=service_ms, dist=dist, cv=cv, per_item=per_item,
                       arrival=arrival, replicas=replicas, batch=batch, delay_ms=float(delay))
    # the rate slider spans what this setting can serve (to 2.5× its capacity, where queues blow
    # up), not a fixed 1-3000 where the interesting part would be a sliver at one end
    try:
        capacity = capacity_of(base)
    except ValueError as exc:
        st.error(f"Cannot simulate: {exc}")
        return
    top = max(10, int(round(2.5 * capacity)))
    if st.session_state.get("sim_rate", 0) > top:
        st.session_state["sim_rate"] = top
    rate = float(sb.slider("Arrival rate (req/s)", 1, top,
                           default("sim_rate", min(70, max(1, int(0.7 * capacity)))),
                           key="sim_rate", disabled=as_recorded,
                           help=f"{setting_help('rate')} This setting serves about "
                                f"{capacity:,.0f} req/s (utilisation 1); the slider runs to 2.5× "
                                "that.", **KEEP))
    settings = replace(base.at_rate(rate), as_recorded=as_recorded)
    slo = sb.number_input("SLO target, p99 (ms)", 0.1, 100000.0,
                          default("sim_slo", 100.0, "min"), 1.0,
                          key="sim_slo",
                          help="The p99 latency you promise.", **KEEP)

    try:
        p = predict(settings)
    except ValueError as exc:
        st.error(f"Cannot simulate: {exc}")
        return
    snap, rho = p["snapshot"], p["utilisation"]
    lat = snap.summary.latency_ms
    m = st.columns(4)
    m[0].metric("utilisation ρ", utilisation_text(rho))
    m[1].metric("p50 (simulated)", fmt.duration(lat.p50))
    m[2].metric("p99 (simulated)", fmt.duration(lat.p99))
    share = snap.share_within(slo)
    m[3].metric(f"within SLO {slo:g} ms", f"{share:.1%}" if share is not None else "—")
    ci, theory = lat.p99_ci95, p["theory"]
    st.caption(
        f"Simulated over {snap.summary.requests:,} requests (the first "
        f"{snap.summary.warmup_requests:,}, from an empty system, dropped"
        + (f"; simulated longer than the usual {SIM_REQUESTS:,} because near saturation a queue "
           "settles ever more slowly" if p["lengthened"] else "") + "). "
        + (f"p99 95 % interval {fmt.duration(ci[0])} – {fmt.duration(ci[1])} (batch means: "
           "queued requests are not independent). " if ci else (p["interval_note"] or "") + ". ")
        + f"Simulated setting: {p['setting']}. Queueing theory: {theory.sentence()}"
        + ("." if theory.applies else " — the simulation is the answer."))
    if p["too_short"]:
        st.warning(f"**Too short to trust:** {p['too_short']}.")
    if rho >= 1 and not p["closed"]:
        st.error(f"**Unstable:** ρ = {rho:.2f} ≥ 1 — requests arrive faster than the replicas can "
                 "serve them, so the queue grows without limit and there is no steady-state "
                 "latency. The figures below are for this simulated stretch only; the chart of "
                 "latency over time shows the queue growing.")
        st.plotly_chart(plots.timeseries_figure(snap.series, offered_rps=rate), key="sim_growth")
    left, right = st.columns(2)
    with left:
        st.caption("Where the time goes, predicted (p99 bar: the requests around p99).")
        st.plotly_chart(plots.stacked_components_figure(snap.makeup_ms), key="sim_bars")
    with right:
        st.caption("Predicted distribution of the total latency.")
        st.plotly_chart(plots.latency_histogram_figure(
            snap.hist_edges_ms, snap.hist_counts,
            {k: lat.get(k) for k in ("p50", "p95", "p99")}, slo,
            share), key="sim_hist")
    c = p["curve"]
    st.subheader("The hockey stick")
    mark = ((c.utilisation[c.marked], c.p50_ms[c.marked], c.p99_ms[c.marked])
            if c.marked is not None else None)
    st.plotly_chart(plots.hockey_stick_figure(
        c.utilisation, c.p50_ms, c.p99_ms, c.theory_p50_ms, c.theory_p99_ms, mark, slo,
        p99_interval_ms=(c.p99_lo_ms, c.p99_hi_ms) if c.p99_lo_ms is not None else None),
        key="sim_curve")
    if rho >= 1 and not p["closed"]:
        st.caption(f"Your setting (ρ = {rho:.2f}) is off this chart: at ρ ≥ 1 there is no steady "
                   "state to plot.")
    st.caption("p50 and p99 as the arrival rate rises (all else as set); your setting is the "
               "headline's own simulation, a point of the line. Every point draws the same random "
               "numbers, so the line is smooth; bars: the p99's 95 % interval where the point's "
               "run is long enough for an honest one. Near ρ = 1 a queue takes ever longer to "
               "settle; the last points are simulated on a capped horizon (20,000 requests) and "
               "under-state the tail, while your setting is simulated as long as the headline "
               f"(up to {MOST_VECTORISED:,} requests near saturation), so there it can stand above "
               "its neighbours. Dotted: the M/M/c closed form, where it applies.")
    st.subheader("Capacity planning (simulated)")
    if st.toggle("Answer: highest rate and fewest replicas for the SLO", key="sim_plan",
                 help="Searches the simulator (about a second)."):
        best_rate, fewest = plan(settings, float(slo))
        st.markdown(
            f"- **Highest arrival rate meeting p99 ≤ {slo:g} ms with {replicas} replica(s):** "
            + (f"{best_rate:.0f} req/s." if best_rate is not None else
               "none — even a trickle misses the SLO: the service itself is too slow.") + "\n"
            f"- **Fewest replicas meeting it at {rate:g} req/s:** "
            + (f"{fewest}." if fewest is not None else
               "more than 32 — or none helps: the preprocess workers are the bottleneck."
               if preprocess_workers(source) else "more than 32."))

    st.subheader("Validate against a real run")
    if source != "parametric" or arrival == "bursty":
        st.caption("Validation runs the synthetic pipeline with a parametric forward time under "
                   "Poisson or constant arrivals (the load generator has no bursty mode): choose "
                   "*parametric* service times and those arrivals to validate a prediction.")
    else:
        length = st.slider("Validation run length (s)", 5, 120, default("sim_val_len", 10), 5,
                           key="sim_val_len",
                           help="Longer runs pin the p99 down: about "
                                f"{rate * 10:,.0f} requests per 10 s at this rate. A queue's p99 "
                                "needs thousands of requests to settle near ρ = 0.8.", **KEEP)
    if (source == "parametric" and arrival != "bursty"
            and st.button(f"Validate: run it for real ({length} s)", key="sim_validate",
                          help="Runs the synthetic pipeline, holding these forward times, at this "
                               "rate, replicas and batching on this machine (queued like any run), "
                               "then sets measured against predicted.")):
        try:
            ticket = run_manager().submit(validation_config(settings, duration_s=float(length)),
                                          owner=session_id())
            st.session_state["sim_validation"] = Validation(ticket.run_id, settings, lat)
        except ConfigError as exc:
            st.error(f"Cannot validate: {exc}")
    validation = st.session_state.get("sim_validation")
    validation = validation if isinstance(validation, Validation) else None  # (an older page's)
    handle = run_manager().get(validation.run_id) if validation else None
    if handle is not None:
        @st.fragment(run_every=1.0 if not handle.done() else None)
        def validation_view() -> None:
            assert validation is not None  # (a handle exists only for one)
            yield_cpu_to_runs()
            snap = handle.snapshot()
            if not snap.finished:
                st.progress(float(snap.progress.get("fraction") or 0.0),
                            text=f"real run {snap.phase} · {snap.progress.get('measured', 0)} "
                                 "requests measured")
                return
            if snap.summary is None or not snap.summary.successful:
                st.error(f"The validation run {snap.status}: {snap.failure or 'nothing measured'}")
                return
            if validation.settings != settings:
                st.info("The settings changed since this validation; press Validate again.")
            cal = calibrated_prediction(handle.run_id, validation.settings)
            st.markdown(comparison_markdown(validation.predicted, snap.summary.latency_ms, cal))
            ci = snap.summary.latency_ms.p99_ci95
            why = next((str(w) for w in snap.summary.warnings if w.kind == "too_few"), "")
            ci_text = (f"measured p99's 95 % interval {fmt.duration(ci[0])} – "
                       f"{fmt.duration(ci[1])} (batch means: queued requests are not "
                       "independent, and the interval says so)" if ci else why)
            st.caption(f"Measured on this machine by {handle.run_id} ({snap.status}, "
                       f"{snap.summary.requests} requests; {ci_text}). "
                       "*Calibrated*: simulated again with "
                       f"what this machine delivered — forward mean {fmt.ms(cal['forward_ms'])} ms "
                       f"(set {validation.settings.service_ms:g}), hand-offs "
                       f"{fmt.ms(cal['handoff_ms'])} ms a request — over the run's own arrival "
                       "times; the difference column is against it. A p99 difference inside the "
                       "measured interval is noise, not a wrong prediction.")
            if st.session_state.get("sim_validation_shown") != handle.run_id:
                st.session_state["sim_validation_shown"] = handle.run_id
                st.rerun()  # stop polling

        validation_view()
