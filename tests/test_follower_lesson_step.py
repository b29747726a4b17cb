"""A student following the projector presses the Lab lesson's Step 2 (issue 27, item 1: a step
is the same experiment whoever presses it): the student's screen then shows step 2 — its card,
its controls, its A/B — not the projector's step 1 around step 2's A/B, and not, at the next
rerun, step 1's result again (the presenter's settings are copied at the top of every rerun).
Once the projector moves on, the student follows it again."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from latency.workshop import practice
from tests.test_lab_page import APP, room_has_step_1
from tests.test_room import KEY, button, following, instructor


def step_heading(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("**Step "))


def controls(at: AppTest) -> dict:
    return {w.key: w.value for kind in ("slider", "selectbox", "number_input", "multiselect")
            for w in getattr(at.sidebar, kind) if str(w.key).startswith("lab_")}


def test_a_follower_who_presses_step_2_sees_step_2_until_the_projector_moves_on(monkeypatch):
    from ui.optimisation_lab import lesson, step_preset, step_time
    from ui.server import room, run_groups, run_manager

    monkeypatch.setenv("LATENCY_LAB_INSTRUCTOR_KEY", KEY)
    monkeypatch.setattr(practice, "HELP_BLOCK_S", 0.5)  # step 2's A/B, short
    monkeypatch.setattr(practice, "HELP_PAIRS", 1)
    room.clear()
    try:
        room_has_step_1()
        teacher = instructor()
        teacher.query_params["lesson"] = "quantise"
        teacher.switch_page("views/optimisation_lab.py").run()
        teacher.session_state["ab_group"] = run_groups().latest("ab").to_state()
        teacher.run()  # the projector shows step 1 and its A/B
        button(teacher, "Present").click().run()
        step_1_group = teacher.session_state["ab_group"]["group_id"]

        student = AppTest.from_file(APP, default_timeout=90)
        student.run()
        assert following(student) and step_heading(student).startswith("**Step 1.**")
        student.radio(key="lesson_answer").set_value(
            student.radio(key="lesson_answer").options[1]).run()
        next(b for b in student.button if b.label.startswith("Step 2")).click().run()
        assert not student.exception and not student.error
        for _ in range(2):  # right after the press, and at the next rerun
            assert step_heading(student).startswith("**Step 2.**")
            assert any(c.value.startswith(step_time(lesson().step("help")))
                       for c in student.caption)  # step 2's time, not step 1's
            assert student.session_state["lesson_step"] == "help"
            group = student.session_state["ab_group"]
            assert group["lesson"] == "help" and group["group_id"] != step_1_group
            shown = controls(student)
            assert {k: shown[k] for k in step_preset("help")} == step_preset("help")
            assert following(student) and any("stays on your screen" in i.value
                                               for i in student.info)
            student.run()
        teacher.run()  # the projector did not move
        assert step_heading(teacher).startswith("**Step 1.**")
        assert teacher.session_state["ab_group"]["group_id"] == step_1_group

        teacher.sidebar.slider(key="lab_concurrency").set_value(4).run()  # it moves on
        student.run()
        assert following(student)
        assert student.session_state["lesson_step"] == "quantise"
        assert student.session_state["ab_group"]["group_id"] == step_1_group
        assert controls(student)["lab_concurrency"] == 4
        assert not any("stays on your screen" in i.value for i in student.info)
    finally:
        room.clear()
        assert run_manager().wait_idle(240)
