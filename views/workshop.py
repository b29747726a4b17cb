"""Workshop: the course of lessons on one page, in order — each a question, the room's guesses,
a live measured experiment and, when the instructor reveals it, the measured answer."""
import streamlit as st

from latency.core import fmt
from latency.workshop.course import PRACTICE_AFTER, course
from latency.workshop.practice import practice
from ui import optimisation_lab as lab_ui
from ui import room as room_ui
from ui import workshop
from ui.priority import yield_cpu_to_runs
from ui.reruns import rerun_page
from ui.rights import can_manage_room

yield_cpu_to_runs()
st.title("Workshop")
lessons = course()
total_s = sum(item.estimated_s for item in lessons)
st.caption("A course of lessons, in order. Each asks its question before it measures: guess, "
           "the machine runs the experiment (real runs, queued one after another), then the "
           f"answer is revealed. The lessons' runs take about {fmt.duration(total_s * 1000)} in "
           "all on this machine; the practice question, the quantisation paradox, is the "
           "Optimisation Lab's lesson. Lessons 7–10 serve an LLM: streamed generation on a "
           "server whose steps hold set times.")
if not can_manage_room():
    st.caption("The instructor runs each lesson and reveals its answer; send your guess "
               "first.")


focus = workshop.focused_lesson(lessons)


def lessons_view() -> None:
    if focus is not None:
        st.page_link("views/workshop.py", label="All lessons", icon=":material/list:",
                     query_params={})
    for item in lessons:
        if focus is None or item.key == focus:
            workshop.card(item)
        if focus is None and item.key == PRACTICE_AFTER:
            practice_card(lessons.index(item) + 2)


def practice_card(number: int) -> None:
    lab = practice()  # the same lesson model, measured in the Optimisation Lab
    with st.container(border=True):
        st.markdown(f"#### {number}. The practice question: {lab.title}")
        st.markdown(f"{lab.summary} The Optimisation Lab runs it in {len(lab.steps)} steps: "
                    + "; ".join(f"{i}. {s.title}" for i, s in enumerate(lab.steps, 1)) + ".")
        st.caption("; ".join(f"Step {i}: {lab_ui.step_time(s).lower()}"
                             for i, s in enumerate(lab.steps, 1)) + " on this machine.")
        shown = lab_ui.room_lesson_measured()  # the figures come from the room's runs
        if shown is not None:
            key, what = shown
            st.markdown(f"**Measured in this room, step {lab.number(key)} "
                        f"({lab.step(key).title}):** {what}.")
        st.page_link("views/optimisation_lab.py", label="Open the lesson in the Optimisation "
                     "Lab", icon=":material/school:",
                     query_params={"lesson": lab.steps[0].key})


@st.fragment(run_every=1.0)
def watch() -> None:
    """Once a second, a cheap look: a lesson's runs progressed, a guess arrived or an answer
    was revealed → redraw the page (an idle room of browsers costs next to nothing)."""
    yield_cpu_to_runs()
    if workshop.signature(lessons) != st.session_state.get("workshop_seen") or room_ui.stale():
        rerun_page()


st.session_state["workshop_seen"] = workshop.signature(lessons)
watch()  # before the cards: a card that fails must not stop the page following the room
lessons_view()
