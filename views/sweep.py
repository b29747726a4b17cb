"""Sweep: how much load your server takes while meeting its objectives, measured — the
dashboard's ``python -m latency sweep``. A floor (one client), a ceiling (every slot busy),
rates between; each point a run saved in the history; the curves drawn as the points arrive,
the simulator's prediction beside them, and the highest load meeting the objectives."""
from __future__ import annotations

from typing import Any

import streamlit as st

from latency.core.config import RunConfig, field_help
from latency.core.errors import ConfigError
from latency.core.lengths import DEFAULT_OUTPUT_TOKENS, LengthSpec
from latency.execution.sweep import SweepPlan, objectives_text
from ui.controls import KEEP, default
from ui.gen_controls import length_inputs, objective_inputs, target_inputs
from ui.gen_live import SERVER, generative_infos
from ui.priority import yield_cpu_to_runs
from ui.rights import is_instructor
from ui.session import session_id
from ui.startup import named_targets
from ui.sweeps import SweepRecord, sweeps
from ui.text import code_span, plain

PREFIX = "sweep_"


def controls() -> tuple[SweepPlan | None, str | None]:
    """The sidebar: what to sweep and how; the plan it describes (or why there is none)."""
    sb = st.sidebar
    sb.header("Sweep")
    targets = named_targets()
    for line in targets.errors:
        sb.error(plain(line))
    names = [f"{SERVER}{n}" for n in targets.urls] + list(generative_infos())
    what = sb.selectbox("Server or pipeline", names, key=f"{PREFIX}what",
                        help="Your servers are those named when the dashboard started "
                             "(streamlit run app.py -- --target NAME=URL); or one of our "
                             "generative pipelines behind our scheduler.", **KEEP)
    base: dict[str, Any] = {}
    if what.startswith(SERVER):
        base["target"] = targets.urls[what[len(SERVER):]]
        base.update(target_inputs(sb, PREFIX, "Read its /metrics at each point"))
    else:
        base["model"] = what
        base["max_running"] = int(sb.slider("Slots (max running)", 1, 64,
                                            default(f"{PREFIX}slots", 4),
                                            key=f"{PREFIX}slots",
                                            help=field_help("max_running"), **KEEP))
    prompts, outputs = length_inputs(sb, PREFIX)
    ttft, tpot, e2e = objective_inputs(sb, PREFIX)
    rates = sb.text_input("Rates (requests/s)", "", key=f"{PREFIX}rates",
                          placeholder="automatic: between the floor and the ceiling",
                          help="R,R,…: the arrival rates to measure between the floor and "
                               "the ceiling; empty: --points rates chosen from what the "
                               "ceiling served.", **KEEP)
    points = int(sb.slider("Points between", 1, 8, default(f"{PREFIX}points", 4),
                           key=f"{PREFIX}points", **KEEP))
    point_s = float(sb.slider("Seconds a point", 5, 120, default(f"{PREFIX}point_s", 10),
                              key=f"{PREFIX}point_s", **KEEP))
    most = float(sb.slider("At most (s) in all", 60, 1800, default(f"{PREFIX}max", 300), 30,
                           key=f"{PREFIX}max", **KEEP))
    try:
        from latency.execution.validate import validated

        raw = RunConfig(**base, duration_s=point_s, slo_ttft_ms=ttft, slo_tpot_ms=tpot,
                        slo_e2e_ms=e2e,
                        prompt_tokens=LengthSpec.of(prompts, "--prompt-tokens")
                        if prompts else None,
                        output_tokens=LengthSpec.of(outputs or DEFAULT_OUTPUT_TOKENS,
                                                    "--output-tokens"))
        plan = SweepPlan(validated(raw, generation=True, user_code=False),
                         rates=tuple(float(r) for r in rates.replace(" ", "").split(",") if r),
                         points=points, point_s=point_s, max_duration_s=most).checked()
    except ValueError:
        return None, f"Rates must be numbers separated by commas (got {rates!r})"
    except ConfigError as exc:
        return None, str(exc)
    return plan, None


def buttons(plan: SweepPlan | None, why: str | None, record: SweepRecord | None) -> None:
    me = session_id()
    running = record is not None and not record.done
    b1, b2, caption = st.columns([1, 1, 4], vertical_alignment="center")
    caption.caption("**Start** measures a floor (one client), a ceiling (every slot busy) and "
                    "the rates between, a run each, saved in the history; **Stop** ends it "
                    "after the point in flight (yours; instructors: any).")
    if b1.button("Start", icon=":material/play_arrow:", type="primary", key="sweepbtn_start",
                 disabled=running):
        if plan is None:
            st.error(f"Cannot start: {plain(why)}")
        else:
            from ui.compare_runs import store

            try:
                sweeps().start(plan, me, store())
                st.rerun()
            except ConfigError as exc:
                st.error(plain(exc))
    can_stop = record is not None and running and (record.owner == me or is_instructor())
    if b2.button("Stop", icon=":material/stop:", key="sweepbtn_stop", disabled=not can_stop) \
            and record is not None:
        record.cancel.set()


def shown(record: SweepRecord) -> None:
    """The sweep so far: its curves, its table, its answer."""
    from latency.figures.report import report_html, sweep_report
    from latency.figures.sweep_plots import (
        sweep_goodput_figure,
        sweep_itl_e2e_figure,
        sweep_rate_figure,
    )

    # read once, before anything is drawn: the thread sets ``done`` only after the result is
    # whole (its prediction too), so a render that began before then shows no answer beside
    # curves drawn without the prediction
    done = record.done
    result, plan = record.result, record.plan
    what = plan.base.target or plan.base.model
    state = "finished" if done else "running"
    n = len(result.points) if result is not None else 0
    st.markdown(f"Sweep `{code_span(record.sweep_id or '…')}` · {state} · `{code_span(what)}` · "
                f"{n} point(s) measured · objectives {plain(objectives_text(plan.base))}")
    if record.error:
        st.error(f"The sweep failed: {plain(record.error)}")
    if result is None or not result.points:
        st.caption("Measuring the floor (one client)…" if not done else
                   "No point was measured.")
        return
    left, right = st.columns(2)
    with left:
        st.plotly_chart(sweep_rate_figure(result), key="sweepfig_rate")
    with right:
        st.plotly_chart(sweep_goodput_figure(result), key="sweepfig_goodput")
    st.plotly_chart(sweep_itl_e2e_figure(result), key="sweepfig_itl_e2e")
    st.caption("The curves run through the rates (the floor's and the ceiling's closed loops "
               "are in the table: a closed loop's rate is the server's own). Grey dashes: "
               "the simulator's prediction at each point, fitted from the floor and ceiling.")
    st.code(result.table(), language=None)
    for line in result.notes():
        st.caption(plain(line))
    if done:
        st.success(f"**Highest load meeting the objectives:** "
                   f"{plain(result.answer.sentence(objectives_text(plan.base)))}")
        st.download_button("Download the report (HTML)",
                           lambda: report_html(sweep_report(result)).encode(),
                           file_name=f"latency-sweep-{record.sweep_id}.html",
                           mime="text/html", key="sweepbtn_html", on_click="ignore")


yield_cpu_to_runs()
st.title("Sweep")
plan, why = controls()
record = sweeps().latest()
buttons(plan, why, record)
record = sweeps().latest()
if record is None:
    st.info("No sweep yet. Choose a server of yours (named when the dashboard started) or a "
            "pipeline, your objectives, and press **Start**.")
else:
    @st.fragment(run_every=None if record.done else 1.0)
    def live() -> None:
        current = sweeps().latest()
        if current is not None:
            shown(current)
            if current.done and not record.done:
                st.rerun()
    live()
