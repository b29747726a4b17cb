"""The Optimisation Lab's widgets and result panels (Streamlit); figures come from
``latency.figures.lab_plots``, numbers from ``latency.analysis.ab`` and
``latency.simulation.whatif``; the guided lesson is ``latency.workshop.practice`` (the same
lesson model as the Workshop's): each step's controls are set from its A/B plan, and its
answer is computed from its runs.

An A/B is a group of ordinary runs queued together with the shared run manager (see
``latency.execution.ab.submit_ab``); this module follows the group's blocks and, once all are done,
merges them — once per group, shared by every viewer (``st.cache_resource``).
"""
from __future__ import annotations

from typing import Any

import streamlit as st

from latency.analysis.ab import ABResult, merge
from latency.core import fmt
from latency.core.config import RunConfig, field_help
from latency.core.optimization import LEVERS, VARIANTS
from latency.core.records import component_labels, in_process
from latency.execution.ab import ABPlan, variant_config
from latency.figures import lab_plots as labplots
from latency.simulation import whatif
from latency.workshop.course import course
from latency.workshop.interval import MIN_PAIRS, ChangeInterval, change_interval
from latency.workshop.lesson import Answer, Lesson, Step
from latency.workshop.practice import measured as practice_measured
from latency.workshop.practice import practice
from ui.controls import default
from ui.room import keep_own
from ui.server import run_groups, run_manager
from ui.text import plain

REAL_MODELS = ("image-cnn", "text-transformer", "tabular-mlp")
SAME = "= A"
LEVER_HELP = "\n".join(f"- **{k}**: {v}" for k, v in LEVERS.items())

def lesson() -> Lesson:
    """The Lab's lesson, its steps' plans made now."""
    return practice()


def preset(plan: ABPlan) -> dict[str, Any]:
    """Widget key → value: the controls that make ``plan`` — both arms, every setting the Lab
    shows — so a step is the same experiment whoever loads it (a button, a shared link, a late
    arrival whose controls were never set)."""
    a, b = plan.baseline, plan.variant

    def b_side(field: str) -> Any:
        return SAME if getattr(b, field) == getattr(a, field) else getattr(b, field)

    return {"lab_model": a.model, "lab_pre": a.pre, "lab_post": a.post,
            "lab_batch": a.batch_size, "lab_delay": a.max_batch_delay_ms,
            "lab_replicas": a.replicas, "lab_threads": a.threads,
            "lab_workers": a.preprocess_workers, "lab_concurrency": a.concurrency,
            "lab_block_s": a.duration_s, "lab_pairs": plan.pairs,
            "lab_b_levers": list(b.optimize or []), "lab_b_pre": b_side("pre"),
            "lab_b_post": b_side("post"), "lab_b_workers": b_side("preprocess_workers"),
            "lab_b_replicas": b_side("replicas"), "lab_b_batch": b_side("batch_size")}


def step_plan(key: str) -> ABPlan:
    """The lesson step's whole A/B — both arms, as the lesson defines them. The one source of
    a step's experiment: its button queues it, its shared link and the room's screens load
    its controls from it (``step_preset``), whatever the controls showed before."""
    plan = lesson().step(key).plan
    assert plan is not None, f"the Lab's step {key!r} has no A/B"
    return plan


def step_preset(key: str) -> dict[str, Any]:
    """Widget key → value of the lesson step's controls, A and B (``preset(step_plan(key))``)."""
    return preset(step_plan(key))


def step_time(step: Step) -> str:
    """'About 96.0 s of runs: 4 pair(s) of 3.00 s blocks' (the step's estimate here)."""
    plan = step.plan
    size = (f": {plan.pairs} pair(s) of {fmt.duration((plan.baseline.duration_s or 0) * 1000)}"
            " blocks" if plan is not None else "")
    return f"About {fmt.duration(step.estimated_s * 1000)} of runs{size}"


def load_step(key: str) -> None:
    """Set the controls (before they render) to the step's plan, and the lesson step."""
    for k, v in step_preset(key).items():
        st.session_state[k] = v
    st.session_state["lesson_step"] = key
    st.session_state.pop("lesson_answer", None)


def open_shared_link() -> None:
    """``/lab?lesson=<step>`` (``quantise``, ``help``): load that step's preset into the
    controls, once per link (the user's own changes after it stay). It does not queue the A/B
    — the room's latest A/B is shown, and Run A/B measures this step. A follower's Lab follows
    the presenter, not its own link; a workshop lesson's key (kept in the query string when a
    follower is moved here) is not a Lab step and is left alone."""
    key = st.query_params.get("lesson")
    if key is None or st.session_state.get("room_following"):
        return
    steps = lesson().steps
    if key not in [s.key for s in steps]:
        if key not in {item.key for item in course()}:
            st.error(f"No lesson step {key!r} in the Lab: the links are "
                     + " and ".join(f"?lesson={s.key} (step {i})"
                                    for i, s in enumerate(steps, 1)) + ".")
        return
    if st.session_state.get("_lab_link") != key:
        st.session_state["_lab_link"] = key
        load_step(key)


def start_step(key: str) -> None:
    """Button callback of a lesson step: load its preset and queue its A/B on the next run —
    the step's own plan (``submission``), not whatever the controls hold by then (a
    follower's are put back to the projector's before the page runs). A follower then sees
    the step it pressed — its card, its controls, its A/B — until the projector moves on
    (``ui.room.keep_own``), not the projector's step around its own step's A/B."""
    keep_own([*step_preset(key), "lesson_step", "ab_group"])
    load_step(key)
    st.session_state["lab_submit"] = key


def lesson_step_of(plan: ABPlan, step: str | None) -> str | None:
    """The lesson step ``plan`` measures: ``step`` if the plan is exactly that step's A/B,
    else None (the controls were changed after the step loaded them: an A/B of its own,
    named as such, never answered as the lesson's)."""
    steps = [s.key for s in lesson().steps]
    if step is None or step not in steps or plan.to_dict() != step_plan(step).to_dict():
        return None
    return step


def submission(controls_plan: ABPlan, pressed: str | None,
               lesson_step: str | None) -> tuple[ABPlan, str | None]:
    """What to queue and the lesson step it answers: a lesson step's button (``pressed``, its
    key) queues that step's plan whatever the controls show; Run A/B queues the controls'
    plan, a lesson step only if it is exactly that step's."""
    if pressed in [s.key for s in lesson().steps]:
        return step_plan(pressed), pressed
    return controls_plan, lesson_step_of(controls_plan, lesson_step)


def controls() -> ABPlan:
    """Sidebar: the baseline (A) and what the B arm changes. Returns the (unvalidated) plan."""
    sb = st.sidebar
    sb.header("Baseline (A)")
    model = sb.selectbox("Pipeline", REAL_MODELS, key="lab_model",
                         help="A real sample pipeline (levers need a real torch model).")
    c1, c2 = sb.columns(2)
    pre = c1.selectbox("Preprocess", VARIANTS, key="lab_pre",
                       help=field_help("pre"))
    post = c2.selectbox("Postprocess", VARIANTS, key="lab_post",
                        help=field_help("post"))
    batch = sb.slider("Max batch size", 1, 32, default("lab_batch", 1), key="lab_batch",
                      help=field_help("batch_size"))
    delay = sb.slider("Max batch delay (ms)", 0.0, 50.0, default("lab_delay", 0.0), 1.0,
                      key="lab_delay",
                      help=field_help("max_batch_delay_ms"))
    c3, c4, c5 = sb.columns(3)
    replicas = c3.number_input("Replicas", 1, 8, default("lab_replicas", 1, "min"),
                               key="lab_replicas",
                               help=field_help("replicas"))
    threads = c4.number_input("Threads", 1, 8, default("lab_threads", 1, "min"),
                              key="lab_threads",
                              help=field_help("threads"))
    workers = c5.number_input("Workers", 1, 16, default("lab_workers", 4, "min"),
                              key="lab_workers",
                              help=field_help("preprocess_workers"))
    conc = sb.slider("Concurrency (clients)", 1, 64, default("lab_concurrency", 8),
                     key="lab_concurrency",
                     help=field_help("concurrency"))
    c6, c7 = sb.columns(2)
    block_s = c6.number_input("Block length (s)", 0.5, 30.0, default("lab_block_s", 2.0, "min"),
                              0.5, key="lab_block_s",
                              help="Measured seconds of each block (after a short warm-up).")
    pairs = c7.number_input("Block pairs", 1, 6, default("lab_pairs", 2, "min"), key="lab_pairs",
                            help="Blocks run A B, B A, A B…: drift of the machine hits both "
                                 "arms alike.")
    sb.header("Variant (B) changes")
    levers = sb.multiselect("Levers", list(LEVERS), key="lab_b_levers",
                            help="Applied in B's run process; each is checked against the "
                                 "baseline's answers.\n\n" + LEVER_HELP)
    d1, d2 = sb.columns(2)
    b_pre = d1.selectbox("B preprocess", (SAME, *VARIANTS), key="lab_b_pre",
                         help="Change B's preprocessing variant.")
    b_post = d2.selectbox("B postprocess", (SAME, *VARIANTS), key="lab_b_post",
                          help="Change B's postprocessing variant.")
    d3, d4, d5 = sb.columns(3)
    b_workers = d3.selectbox("B pre workers", (SAME, 1, 2, 4, 8), key="lab_b_workers",
                             help="Change B's preprocess worker threads.")
    b_replicas = d4.selectbox("B replicas", (SAME, 1, 2, 3, 4), key="lab_b_replicas",
                              help="Change B's number of replicas.")
    b_batch = d5.selectbox("B batch", (SAME, 1, 2, 4, 8, 16, 32), key="lab_b_batch",
                           help="Change B's max batch size.")
    base = RunConfig(model=model, pre=pre, post=post, batch_size=int(batch),
                     max_batch_delay_ms=float(delay), replicas=int(replicas),
                     threads=int(threads), preprocess_workers=int(workers),
                     concurrency=int(conc), duration_s=float(block_s), warmup=8)
    pick = lambda v: None if v == SAME else v  # noqa: E731
    variant = variant_config(base, optimize=list(levers), pre=pick(b_pre), post=pick(b_post),
                             preprocess_workers=pick(b_workers), replicas=pick(b_replicas),
                             batch_size=pick(b_batch))
    return ABPlan(base, variant, int(pairs))


def group_title(plan: Any, lesson_step: str | None) -> str:
    """What a group of A/B runs answers, as the history names its runs."""
    the = lesson()
    if lesson_step in [s.key for s in the.steps]:
        step = the.step(lesson_step)
        return f"Lesson: {the.title} — step {the.number(step.key)} ({step.title})"
    from latency.core.describe import setup_description

    a, b = plan.baseline, plan.variant
    return (f"A/B: {a.model} · A = {setup_description(a) or 'plain'} · "
            f"B = {setup_description(b) or 'plain'}")


def group_progress(blocks: list[tuple[str, str]]) -> tuple[int, str]:
    """(blocks finished, a line about the one in flight or waiting)."""
    mgr = run_manager()
    done = 0
    line = ""
    for i, (arm, rid) in enumerate(blocks):
        h = mgr.get(rid)
        if h is None or h.done():
            done += 1
            continue
        if not line:
            pos = mgr.position(rid)
            line = (f"block {i + 1} of {len(blocks)} (arm {arm}) " +
                    ("running" if pos == 0 else f"waiting, number {pos} in line"))
    return done, line


@st.cache_resource(max_entries=16, show_spinner=False)
def merged(run_ids: tuple[str, ...], arms: tuple[str, ...], pairs: int) -> ABResult | str:
    """The finished group merged (once per group, shared by every viewer), or why not."""
    mgr = run_manager()
    results = [(arm, mgr.get(rid).result()) for arm, rid in zip(arms, run_ids)]  # type: ignore[union-attr]
    failed = [r.failure for _, r in results if r.status == "failed"]
    plan = ABPlan(results[0][1].config, results[1][1].config, pairs)
    try:
        return merge(plan, [(a, r) for a, r in results if r.status != "failed"])
    except ValueError as exc:
        return f"{exc}" + (f" (a block failed: {failed[0]})" if failed else "")


@st.cache_resource(max_entries=16, show_spinner=False)
def interval(run_ids: tuple[str, ...], arms: tuple[str, ...]) -> ChangeInterval | None:
    """The finished group's end-to-end p50 change with its 95 % interval over the pairs (once
    per group, shared by every viewer); None with fewer than ``MIN_PAIRS`` complete pairs."""
    mgr = run_manager()
    return change_interval([(arm, mgr.get(rid).result())  # type: ignore[union-attr]
                            for arm, rid in zip(arms, run_ids)])


def room_lesson_measured() -> tuple[str, str] | None:
    """(step key, what it measured) when the room's latest A/B is a finished step of the
    lesson — figures from its runs, for a card that names the lesson — else None."""
    g = run_groups().latest("ab")
    if g is None or g.info.get("lesson") not in [s.key for s in lesson().steps]:
        return None
    mgr = run_manager()
    if any(mgr.get(rid) is None for _, rid in g.blocks) or \
            group_progress(list(g.blocks))[0] < len(g.blocks):
        return None
    run_ids, arms = tuple(r for _, r in g.blocks), tuple(a for a, _ in g.blocks)
    ab = merged(run_ids, arms, int(g.info.get("pairs") or 1))
    if isinstance(ab, str):
        return None
    return str(g.info["lesson"]), practice_measured(ab, interval(run_ids, arms))


@st.cache_resource(max_entries=16, show_spinner=False)
def step_answer(step: str, run_ids: tuple[str, ...], arms: tuple[str, ...]) -> Answer | str:
    """A lesson step's answer from the group's finished blocks (once per group, shared by every
    viewer), or why there is none."""
    mgr = run_manager()
    results = [mgr.get(rid).result() for rid in run_ids]  # type: ignore[union-attr]
    try:
        return lesson().step(step).answer(results, arms)
    except ValueError as exc:
        return str(exc)


def interval_line(iv: ChangeInterval | None) -> None:
    """How sure the end-to-end p50 change is, said plainly when the runs cannot tell its
    sign."""
    if iv is None:
        st.caption(f"How sure: no interval for the end-to-end change — it takes at least "
                   f"{MIN_PAIRS} block pairs (fewer cannot say how pairs scatter).")
    elif iv.sign_known:
        st.markdown(f"**How sure:** {iv.text()}.")
    else:
        st.markdown(f"**How sure:** {iv.text()} — the headline's sign is not measured. More "
                    "block pairs narrow the interval.")


def headline_panel(ab: ABResult, reveal: bool = True,
                   iv: ChangeInterval | None = None) -> None:
    """The A/B's headline, its metrics and why, and how sure its end-to-end change is
    (``iv``). ``reveal`` False (a lesson's question not yet answered): only what was measured
    end to end and the model alone — not where the change came from, which is the
    question."""
    h = ab.headline
    if reveal:
        st.subheader(f"Headline: {h.text}")
    else:
        alone = (f"; the model alone {fmt.change(h.forward_alone_change)}"
                 if h.forward_alone_change is not None else "")
        st.subheader(f"Measured: end-to-end p50 {fmt.change(h.p50_change)}, p99 "
                     f"{fmt.change(h.p99_change)}{alone}")
    m = st.columns(5)
    m[0].metric("forward pass, served", fmt.change(h.forward_mean_change),
                help="Mean forward time per request in the runs, B against A. It also moves "
                     "with the batch mix and the load (waits for a core and the interpreter), "
                     "so it is not the model's own speed-up: that is 'alone'.")
    m[4].metric("forward pass, alone",
                fmt.change(h.forward_alone_change),
                help="B's model against the baseline model on one batch, timed call by call "
                     "side by side in B's run process before its load.")
    # Streamlit reads a delta's direction from a leading ASCII "-": the typographic minus of
    # fmt.change would show a fall in latency as a red rise
    m[1].metric("end-to-end p50", fmt.duration(ab.b.latency_ms.p50),
                fmt.change(h.p50_change).replace("−", "-"), delta_color="inverse")
    m[2].metric("end-to-end p99", fmt.duration(ab.b.latency_ms.p99),
                fmt.change(h.p99_change).replace("−", "-"), delta_color="inverse")
    if reveal:
        m[3].metric("forward's share of A", fmt.share(h.forward_share),
                    help="Amdahl's law: the most the total can change is this share times "
                         "the forward pass's own change.")
    interval_line(iv)
    if reveal:
        st.info(f"**Why (Amdahl):** {h.explanation}")
    st.caption(f"A = {plain(ab.a.label)}: {ab.a.requests} requests in {ab.a.blocks} block(s), "
               f"{ab.a.throughput_rps:.0f} req/s · B changes {plain(ab.b.label)}: "
               f"{ab.b.requests} requests in {ab.b.blocks} block(s), "
               f"{ab.b.throughput_rps:.0f} req/s · order {' '.join(ab.order)} · all measured on "
               "this machine just now.")


def shown_names(ab: ABResult) -> dict[str, str]:
    """The components' names as both arms call them: in-process, network is the hand-off."""
    return component_labels(in_process(ab.a.config) and in_process(ab.b.config))


def charts_panel(ab: ABResult) -> None:
    left, right = st.columns(2)
    with left:
        st.caption("Where the time goes, A and B side by side (mean, and the requests around "
                   "p50 and p99).")
        st.plotly_chart(labplots.ab_bars_figure(ab.a.makeup_ms, ab.b.makeup_ms, ("A", "B"),
                                                names=shown_names(ab)), key="ab_bars")
    with right:
        st.caption("Latency by percentile, both arms (each further nine gets equal width).")
        st.plotly_chart(labplots.ab_spectrum_figure(
            ab.a.quantiles_ms, ab.b.quantiles_ms, (f"A: {ab.a.label}", f"B: {ab.b.label}"),
            requests=(ab.a.requests, ab.b.requests)),
            key="ab_spectrum")


def accuracy_panel(ab: ABResult) -> None:
    st.markdown("**Effect on the answers** — latency is never shown without accuracy: each "
                "arm's answers against the unoptimised baseline's on the same held-out inputs.")
    st.dataframe(labplots.accuracy_table([ab.a, ab.b]), hide_index=True)
    for arm in (ab.a, ab.b):
        for lv in (arm.optimization or {}).get("levers", []):
            if lv.get("warnings") or lv.get("notes"):
                with st.expander(f"{arm.arm}: {lv['name']} — notes and library warnings"):
                    for n in lv.get("notes", []):
                        st.markdown(f"- {n}")
                    for w in lv.get("warnings", []):
                        st.markdown(f"- warning recorded: `{w}`")


def whatif_panel(ab: ABResult) -> None:
    st.subheader("What if…")
    c1, c2, c3 = st.columns(3)
    arm = c1.radio("Measured arm", ["A", "B"], horizontal=True, key="wi_arm",
                   help="Whose measured requests to rescale.")
    stats = ab.a if arm == "A" else ab.b
    comp = c2.selectbox("component", whatif.WHATIF_COMPONENTS, index=default("wi_comp", 3, 0),
                        key="wi_comp", format_func=shown_names(ab).get,
                        help="The component to make faster.")
    faster = c3.slider("became faster by (%)", 0, 95, default("wi_pct", 40), 5, key="wi_pct",
                       help="0% = as measured; 100% would remove it entirely.") / 100
    flat = whatif.decomposition_whatif(stats.rows, comp, faster)
    st.markdown(f"**From the measured decomposition:** {flat.sentence()}.  \n"
                f"*Assumes* {flat.assumption}.")
    sim = None
    if comp in whatif.SERVICE_COMPONENTS:
        cfg = stats.config
        clients = int(cfg.concurrency) if cfg.concurrency else None
        closed = f"its {clients} clients (closed loop)" if clients else None
        options = [o for o in (closed, "as recorded", "Poisson at a rate") if o]
        load = st.radio("Simulated load", options, horizontal=True, key=f"wi_load_{arm}",
                        help="Its clients: the arm's closed loop replayed as a closed loop — "
                             "each client asks again when answered, so a faster server is "
                             "asked more often (how the arm was measured). As recorded: the "
                             "arm's own send times replayed, whatever the server does. "
                             "Poisson: independent arrivals at the rate you choose (default: "
                             "the arm's measured throughput).")
        rate = None
        if load == "Poisson at a rate":
            rate = float(st.number_input("Simulated arrival rate (req/s)", 0.1, 100000.0,
                                         default(f"wi_rate_{arm}",
                                                 max(round(stats.throughput_rps, 1), 0.1),
                                                 "min"),
                                         key=f"wi_rate_{arm}",
                                         help="Open-loop Poisson arrivals in the simulator; "
                                              "the default is this arm's measured "
                                              "throughput."))
        try:
            sim = whatif.load_whatif(stats.rows, comp, faster, rate,
                                     clients=clients if load == closed else None,
                                     replicas=int(cfg.replicas),
                                     batch_size=int(cfg.batch_size),
                                     max_batch_delay_ms=float(cfg.max_batch_delay_ms),
                                     preprocess_workers=int(cfg.preprocess_workers or 4))
            u0, u1 = sim.utilisation or (0, 0)
            st.markdown(f"**Under load (simulated, utilisation of the busiest stage {u0:.0%} → "
                        f"{u1:.0%}):** {sim.sentence()}.  \n*Assumes* {sim.assumption}.")
            cal = sim.calibration() or {}
            off = max(abs(v) for v in cal.values()) if cal else 0.0
            check = (f"Check — simulated as measured: mean {fmt.duration(sim.before['mean'])}, "
                     f"p99 {fmt.duration(sim.before['p99'])}; measured: mean "
                     f"{fmt.duration(sim.measured['mean'])}, p99 "
                     f"{fmt.duration(sim.measured['p99'])} "
                     f"(mean {fmt.change(cal['mean'])}, p99 {fmt.change(cal['p99'])}).")
            if off > 0.2:
                st.warning(check + " The simulation does not reproduce this arm's measurement "
                           "closely: read its *change* (faster vs now), not its level, and "
                           "prefer the decomposition where they disagree.")
            else:
                st.caption(check)
        except ValueError as exc:
            st.error(f"Cannot simulate: {exc}")
    else:
        st.caption("Queueing is an outcome of the service times, not a service time: the "
                   "simulator cannot make it faster directly — make a stage faster instead.")
    st.plotly_chart(labplots.whatif_figure(
        flat.before, flat.after, (sim.before, sim.after) if sim else None), key="wi_fig")
