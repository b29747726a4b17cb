"""Optimisation Lab: a baseline against levers, interleaved A/B, results side by side, what-if,
and the guided lesson "a much faster model, about the same latency"."""
import streamlit as st

from latency.core import fmt
from latency.core.errors import ConfigError
from latency.execution.ab import submit_ab
from ui import optimisation_lab as lab
from ui.priority import yield_cpu_to_runs
from ui.reruns import rerun_page
from ui.server import run_groups, run_manager
from ui.session import session_id
from ui.text import plain

yield_cpu_to_runs()
st.title("Optimisation Lab")
st.caption("Pick a baseline (A) and what the variant (B) changes; the A/B runs both in "
           "alternating blocks on this machine and sets them side by side — latency with "
           "its effect on the answers. Every figure is measured when you press Run.")
mgr, me = run_manager(), session_id()
lab.open_shared_link()  # /lab?lesson=quantise (step 1) or ?lesson=help (step 2)
step = st.session_state.get("lesson_step")

with st.container(border=True):
    st.markdown("#### :material/school: The lesson: a much faster model, the same latency")
    if step is None:
        st.markdown("A beginner's image server: naive preprocessing (pixel loops, a PNG "
                    "round trip), eight clients keeping it saturated. We quantise the model "
                    "to int8 and measure what the users get.")
        st.button("Start the lesson", icon=":material/play_arrow:", key="lesson_start",
                  on_click=lab.start_step, args=(lab.LESSON_PRESET, "quantise"),
                  help="Loads the preset into the controls and runs the A/B.")
    elif step == "quantise":
        st.markdown("**Step 1.** A = the beginner's server, B = the same with an **int8** "
                    "model. Watch the headline when the blocks finish.")
    else:
        st.markdown("**Step 2.** B keeps int8 and fixes what the bars showed: vectorised "
                    "pre/postprocessing and more preprocess workers.")
    if step is not None:
        st.button("Leave the lesson", key="lesson_leave",
                  on_click=lambda: st.session_state.pop("lesson_step", None))
        st.page_link("views/optimisation_lab.py", label="Link to this step",
                     icon=":material/link:", query_params={"lesson": step},
                     help=f"Opens the Lab at this step, its preset loaded: /lab?lesson={step}")

plan = lab.controls()
run_now = st.button("Run A/B", type="primary", icon=":material/compare_arrows:",
                    help="Queue the blocks (A B, B A, …) with the server's run manager; "
                         "runs go one at a time, each in its own process.")
if run_now or st.session_state.pop("lab_submit", False):
    try:
        lesson_step = st.session_state.get("lesson_step")
        title = lab.group_title(plan, lesson_step)
        blocks = submit_ab(mgr, plan, me, title=title)
        # the result belongs to the room: kept by the server, shown to every viewer
        st.session_state["ab_group"] = run_groups().register(
            title, me, blocks, {"kind": "ab", "pairs": plan.pairs,
                                "lesson": lesson_step}).to_state()
        st.session_state.pop("lesson_answer", None)
    except ConfigError as exc:
        st.error(f"Cannot start: {exc}")

group = st.session_state.get("ab_group")
if group is None and (latest := run_groups().latest("ab")) is not None:
    group = latest.to_state()  # a newcomer, or a reload: the room's latest A/B
    st.caption(f"The room's latest A/B: **{plain(group['title'])}**.")
in_flight = bool(group) and lab.group_progress(group["blocks"])[0] < len(group["blocks"])

ANSWERS = ("Quantise harder: the model must still be the bottleneck",
           "Where the rest of the time goes: the component bars",
           "Buy a GPU")


@st.fragment(run_every=1.0 if in_flight else None)
def results() -> None:
    yield_cpu_to_runs()
    if st.session_state.get("lab_submit"):  # a lesson button in here: rerun the whole page
        st.rerun()
    if not group:
        st.info("No A/B yet. Choose a baseline and levers in the sidebar and press **Run "
                "A/B** — or start the lesson above.")
        return
    blocks = [tuple(b) for b in group["blocks"]]
    if group.get("group_id"):
        run_groups().viewed(group["group_id"])  # somebody still watches: the group is not abandoned
    done, line = lab.group_progress(blocks)
    if done < len(blocks):
        st.progress(done / len(blocks), text=f"{done} of {len(blocks)} blocks done · {line}")
        return
    if in_flight:  # just finished: rerun the page once (in its turn), to stop polling
        rerun_page()
    ab = lab.merged(tuple(r for _, r in blocks), tuple(a for a, _ in blocks), group["pairs"])
    if isinstance(ab, str):
        st.error(f"The A/B has no result: {ab}")
        return
    hide_bars = group.get("lesson") == "quantise"
    # a lesson asks before it answers: where the change came from stays hidden until then
    lab.headline_panel(ab, reveal=not hide_bars
                       or st.session_state.get("lesson_answer") is not None)
    if hide_bars:
        h = ab.headline
        model = (f"the model alone {fmt.change(h.forward_alone_change)}"
                 if h.forward_alone_change is not None
                 else f"the forward pass {fmt.change(h.forward_mean_change)}")
        question = (f"Measured: {model}, end-to-end p50 {fmt.change(h.p50_change)}. What do "
                    "you look at next?")
        answer = st.radio(question, ANSWERS, index=None, key="lesson_answer")
        if answer is None:
            st.caption("Answer to reveal the component bars.")
        else:
            if answer == ANSWERS[1]:
                st.success("Yes: the bars show where the time goes.")
            else:
                st.warning("Look at the bars first: they say where the time goes.")
            comps = ab.a.components_ms
            top = sorted(comps, key=lambda c: -(comps[c].mean or 0.0))[:2]
            share = sum(comps[c].mean or 0.0 for c in top) / ab.a.latency_ms.mean
            st.markdown(f"In A, **{top[0]}** and **{top[1]}** took {share:.0%} of the mean; the "
                        f"forward pass {ab.headline.forward_share:.0%}. Making the forward pass "
                        "faster can only move the total by its share (Amdahl's law).")
            hide_bars = False
            st.button("Step 2: apply the levers that help", type="primary",
                      icon=":material/build:", key="lesson_help",
                      on_click=lab.start_step, args=(lab.HELP_PRESET, "help"))
    if not hide_bars:
        lab.charts_panel(ab)
    lab.accuracy_panel(ab)
    for w in ab.b.warnings:
        st.warning(f"B: {w}")
    for w in ab.a.warnings:
        st.warning(f"A: {w}")
    lab.whatif_panel(ab)


results()
