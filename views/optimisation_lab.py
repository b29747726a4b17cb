"""Optimisation Lab: a baseline against levers, interleaved A/B, results side by side, what-if,
and the guided lesson "a much faster model, about the same latency"."""
import streamlit as st

from latency.core.errors import ConfigError
from latency.execution.ab import submit_ab
from ui import optimisation_lab as lab
from ui.machine import arm_badge, unequal_warning
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
lesson = lab.lesson()
steps = {s.key: s for s in lesson.steps}
step = steps.get(st.session_state.get("lesson_step"))

with st.container(border=True):
    st.markdown(f"#### :material/school: The lesson: {lesson.title}")
    if step is None:
        st.markdown(lesson.summary)
        st.caption("; ".join(f"Step {i}: {lab.step_time(s).lower()}"
                             for i, s in enumerate(lesson.steps, 1)) + " on this machine.")
        st.button("Start the lesson", icon=":material/play_arrow:", key="lesson_start",
                  on_click=lab.start_step, args=(lesson.steps[0].key,),
                  help="Loads the preset into the controls and runs the A/B.")
    else:
        st.markdown(f"**Step {lesson.number(step.key)}.** {step.intro}")
        st.caption(f"{lab.step_time(step)} on this machine.")
        st.button("Leave the lesson", key="lesson_leave",
                  on_click=lambda: st.session_state.pop("lesson_step", None))
        st.page_link("views/optimisation_lab.py", label="Link to this step",
                     icon=":material/link:", query_params={"lesson": step.key},
                     help="Opens the Lab at this step, its preset loaded: "
                          f"/lab?lesson={step.key}")

plan = lab.controls()
run_now = st.button("Run A/B", type="primary", icon=":material/compare_arrows:",
                    help="Queue the blocks (A B, B A, …) with the server's run manager; "
                         "runs go one at a time, each in its own process.")
pressed = st.session_state.pop("lab_submit", None)  # a lesson step's button: its key
if run_now or pressed:
    try:
        # a step's button queues the step's own A/B, whatever the controls hold now
        queued, lesson_step = lab.submission(plan, None if run_now else pressed,
                                             st.session_state.get("lesson_step"))
        title = lab.group_title(queued, lesson_step)
        blocks = submit_ab(mgr, queued, me, title=title)
        # the result belongs to the room: kept by the server, shown to every viewer
        st.session_state["ab_group"] = run_groups().register(
            title, me, blocks, {"kind": "ab", "pairs": queued.pairs,
                                "lesson": lesson_step}).to_state()
        st.session_state.pop("lesson_answer", None)
    except ConfigError as exc:
        st.error(f"Cannot start: {exc}")

group = st.session_state.get("ab_group")
if group is None and (latest := run_groups().latest("ab")) is not None:
    group = latest.to_state()  # a newcomer, or a reload: the room's latest A/B
    st.caption(f"The room's latest A/B: **{plain(group['title'])}**.")
in_flight = bool(group) and lab.group_progress(group["blocks"])[0] < len(group["blocks"])


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
    asked = steps.get(group.get("lesson"))  # a lesson step that asks before it answers
    hide_bars = asked is not None and asked.question is not None
    iv = lab.interval(tuple(r for _, r in blocks), tuple(a for a, _ in blocks))
    # a lesson asks before it answers: where the change came from stays hidden until then
    lab.headline_panel(ab, reveal=not hide_bars
                       or st.session_state.get("lesson_answer") is not None, iv=iv)
    if asked is not None and hide_bars:
        # what was measured is above it: end to end with how sure, and the model alone
        guess = st.radio(asked.question or "", asked.choices, index=None, key="lesson_answer")
        if guess is None:
            st.caption("Answer to reveal the component bars.")
        else:
            ans = lab.step_answer(asked.key, tuple(r for _, r in blocks),
                                  tuple(a for a, _ in blocks))
            if isinstance(ans, str):
                st.error(f"The step has no answer: {ans}")
            else:
                if guess == ans.value:
                    st.success(f"Yes — the runs say so: {ans.value}.")
                else:
                    st.warning(f"The runs point elsewhere: {ans.value}.")
                st.markdown(ans.text)
            hide_bars = False
            number = lesson.number(asked.key)
            if number < len(lesson.steps):
                after = lesson.steps[number]
                st.button(f"Step {number + 1}: {after.title}", type="primary",
                          icon=":material/build:", key="lesson_next",
                          on_click=lab.start_step, args=(after.key,))
    if not hide_bars:
        lab.charts_panel(ab)
    lab.accuracy_panel(ab)
    unequal_warning(ab.machine_warning)  # the arms on an unequally busy machine
    for arm in (ab.a, ab.b):  # an arm with a block measured on a busy machine: by how much
        arm_badge(arm.machine, arm.arm)
    for w in ab.b.warnings:
        st.warning(f"B: {w}")
    for w in ab.a.warnings:
        st.warning(f"A: {w}")
    lab.whatif_panel(ab)


results()
