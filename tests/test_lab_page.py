"""The Optimisation Lab page through AppTest: controls, one-line errors, a real A/B from the
widgets with its headline, charts and accuracy table, and the lesson's guided steps."""
import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

from latency.core.config import RunConfig
from latency.execution.ab import variant_config
from tests.conftest import rerun_until

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def lab_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.switch_page("views/optimisation_lab.py").run()
    assert not at.exception
    return at


def finished(at) -> bool:
    # a lesson step shows "Measured: …" until its question is answered, then the headline
    return any(s.value.startswith(("Headline:", "Measured:")) for s in at.subheader) or \
        bool(at.error)


def test_lab_renders_every_control_with_help():
    at = lab_page()
    labels = {w.label for w in list(at.sidebar.selectbox) + list(at.sidebar.slider)
              + list(at.sidebar.number_input) + list(at.sidebar.multiselect)}
    for label in ("Pipeline", "Preprocess", "Postprocess", "Max batch size", "Replicas",
                  "Threads", "Workers", "Concurrency (clients)", "Levers",
                  "B preprocess", "B replicas", "B batch", "Block pairs"):
        assert label in labels, label
    for w in list(at.sidebar.selectbox) + list(at.sidebar.slider) + list(at.sidebar.multiselect):
        assert w.help, f"{w.label} has no tooltip"
    # the results area: the room's latest A/B when an earlier test (this process shares the
    # server's run groups) left one, else the empty state
    from ui.server import run_groups
    latest = run_groups().latest("ab")
    if latest is None:
        assert any("No A/B yet" in i.value for i in at.info)
    else:
        assert any("The room's latest A/B" in c.value for c in at.caption)


def test_an_impossible_lever_is_an_error_box_not_a_traceback():
    at = lab_page()
    at.sidebar.selectbox(key="lab_model").set_value("text-transformer")
    at.sidebar.multiselect(key="lab_b_levers").set_value(["channels_last"]).run()
    next(b for b in at.button if b.label == "Run A/B").click().run()
    assert not at.exception
    assert any("Cannot start" in e.value and "convolutional" in e.value for e in at.error)
    at.sidebar.multiselect(key="lab_b_levers").set_value([]).run()
    next(b for b in at.button if b.label == "Run A/B").click().run()
    assert any("identical" in e.value for e in at.error)


def test_an_ab_from_the_widgets_shows_headline_bars_spectrum_accuracy_and_whatif():
    at = lab_page()
    at.sidebar.selectbox(key="lab_model").set_value("tabular-mlp")
    at.sidebar.slider(key="lab_concurrency").set_value(2)
    at.sidebar.number_input(key="lab_block_s").set_value(0.5)
    at.sidebar.number_input(key="lab_pairs").set_value(1)
    at.sidebar.multiselect(key="lab_b_levers").set_value(["int8"])
    at.sidebar.selectbox(key="lab_b_pre").set_value("naive").run()
    next(b for b in at.button if b.label == "Run A/B").click().run()
    assert not at.exception and not at.error
    rerun_until(at, finished, timeout=120)
    assert not at.error, [e.value for e in at.error]
    head = next(s.value for s in at.subheader if s.value.startswith("Headline:"))
    # end to end first, the mean's change component by component, and the model's own change
    # timed alone (forward is named only when it moved the mean enough to be)
    assert "p50" in head and "p99" in head and "the model alone" in head and " = " in head
    assert any("Amdahl" in i.value for i in at.info)
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    bars = next(s for s in specs if {t.get("name") for t in s["data"]} >= {"queue", "forward"})
    assert len(bars["data"][0]["x"][0]) == 6  # mean, p50, p99 × A, B
    assert any(len(s["data"]) == 2 and s["data"][0]["type"] == "scatter" for s in specs)
    table = at.dataframe[0].value.set_index("measure")
    assert list(table.columns) == ["A", "B"]
    assert float(table.loc["top-1 agreement", "B"].rstrip(" %")) >= 90
    assert table.loc["levers", "B"].startswith("levers int8 (A: none)")
    assert "None" not in table.to_string()
    assert any("From the measured decomposition" in m.value for m in at.markdown)
    at.selectbox(key="wi_comp").set_value("preprocess").run()
    assert any("preprocess 40% faster" in m.value for m in at.markdown)
    assert not at.exception


def test_the_lesson_asks_before_it_reveals_the_bars(monkeypatch):
    from latency.workshop import practice

    # the page's flow, not the lesson's statistics (tests/test_ab.py measures those): one
    # pair of 1 s blocks is enough to reach the question and the bars
    monkeypatch.setattr(practice, "PAIRS", 1)
    monkeypatch.setattr(practice, "BLOCK_S", 1.0)
    at = lab_page()
    at.button(key="lesson_start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.sidebar.selectbox(key="lab_model").value == "image-cnn"
    assert at.sidebar.selectbox(key="lab_pre").value == "naive"
    assert at.sidebar.multiselect(key="lab_b_levers").value == ["int8"]
    assert any("Step 1" in m.value for m in at.markdown)
    # keep the test short: the preset's blocks were queued; let them finish
    rerun_until(at, finished, timeout=240)
    assert not at.error, [e.value for e in at.error]
    assert at.radio(key="lesson_answer").value is None
    # the answer is not given away: no attribution, no Amdahl explanation before the guess
    assert not any(s.value.startswith("Headline:") for s in at.subheader)
    assert not any("Amdahl" in i.value for i in at.info)
    names = [{t.get("name") for t in json.loads(c.proto.spec)["data"]}
             for c in at.get("plotly_chart")]
    assert not any({"queue", "forward"} <= n for n in names)  # bars hidden until answered
    at.radio(key="lesson_answer").set_value(
        "Where the rest of the time goes: the component bars").run()
    assert any("Yes" in s.value for s in at.success)
    assert any(s.value.startswith("Headline:") for s in at.subheader)  # revealed now
    names = [{t.get("name") for t in json.loads(c.proto.spec)["data"]}
             for c in at.get("plotly_chart")]
    assert any({"queue", "forward", "preprocess"} <= n for n in names)
    assert any(b.label.startswith("Step 2") for b in at.button)


def queued_configs(group: dict) -> list[dict]:
    """The configs the group's blocks run, in order — then stopped: only what was queued is
    under test, not the measurement."""
    from ui.server import run_manager

    mgr = run_manager()
    out = [mgr.get(rid).config.to_dict() for _, rid in group["blocks"]]
    for _, rid in group["blocks"]:
        mgr.stop(rid, requester="test", instructor=True)
    assert mgr.wait_idle(120)
    return out


def test_a_lesson_step_is_the_same_experiment_whoever_presses_it():
    """Step 2 pressed by a late arrival (who never loaded step 1's preset: the controls are
    the defaults) and step 2 from its shared link queue the same A/B: the lesson's, both
    arms. Step 1's finished A/B in the room is a cheap stand-in; only step 2 is under test."""
    from latency.execution.ab import ABPlan, submit_ab
    from latency.execution.validate import validated
    from latency.workshop.practice import helping_plan
    from ui.server import run_groups, run_manager

    expected = [validated(c).to_dict() for _, c in helping_plan().blocks()]
    base = RunConfig(model="tabular-mlp", concurrency=1, duration_s=0.3, warmup=2)
    blocks = submit_ab(run_manager(), ABPlan(base, variant_config(base, optimize=["int8"]), 1),
                       "someone")
    run_groups().register("step 1, earlier", "someone", blocks,
                          {"kind": "ab", "pairs": 1, "lesson": "quantise"})
    mgr = run_manager()
    assert mgr.wait_idle(240), [(h.run_id, h.status, h.config.model)
                                for h in [mgr.current(), *mgr.queued()] if h is not None]

    late = lab_page()  # the room's latest A/B: step 1, asking its question
    late.radio(key="lesson_answer").set_value(late.radio(key="lesson_answer").options[1]).run()
    next(b for b in late.button if b.label.startswith("Step 2")).click().run()
    assert not late.exception and not late.error, [e.value for e in late.error]
    assert late.session_state["lesson_step"] == "help"
    assert queued_configs(late.session_state["ab_group"]) == expected

    link = AppTest.from_file(APP, default_timeout=90)
    link.query_params["lesson"] = "help"
    link.run()
    link.switch_page("views/optimisation_lab.py").run()
    next(b for b in link.button if b.label == "Run A/B").click().run()
    assert not link.exception and not link.error
    assert queued_configs(link.session_state["ab_group"]) == expected


def room_has_step_1() -> None:
    """A finished A/B in the room named as the lesson's step 1: a cheap stand-in (tabular-mlp,
    0.3 s blocks), so the page asks step 1's question and offers step 2."""
    from latency.execution.ab import ABPlan, submit_ab
    from ui.server import run_groups, run_manager

    base = RunConfig(model="tabular-mlp", concurrency=1, duration_s=0.3, warmup=2)
    blocks = submit_ab(run_manager(), ABPlan(base, variant_config(base, optimize=["int8"]), 1),
                       "someone")
    run_groups().register("step 1, earlier", "someone", blocks,
                          {"kind": "ab", "pairs": 1, "lesson": "quantise"})
    mgr = run_manager()
    assert mgr.wait_idle(240)


def test_step_2_pressed_by_a_student_following_the_room_queues_the_lessons_step_2(monkeypatch):
    """A student follows the instructor, whose Lab shows step 1 (opened by its link): the
    student's controls are put back to the projector's (step 1's) before the page runs, so
    the step 2 button must queue step 2's own A/B — both arms — not the controls'."""
    from latency.execution.validate import validated
    from latency.workshop.practice import helping_plan
    from tests.test_room import KEY, button, following, instructor
    from ui.server import room

    monkeypatch.setenv("LATENCY_LAB_INSTRUCTOR_KEY", KEY)
    room.clear()
    try:
        room_has_step_1()
        teacher = instructor()
        teacher.query_params["lesson"] = "quantise"
        teacher.switch_page("views/optimisation_lab.py").run()
        button(teacher, "Present").click().run()
        student = AppTest.from_file(APP, default_timeout=90)
        student.run()
        assert following(student) and student.session_state["lesson_step"] == "quantise"
        student.radio(key="lesson_answer").set_value(
            student.radio(key="lesson_answer").options[1]).run()
        next(b for b in student.button if b.label.startswith("Step 2")).click().run()
        assert not student.exception and not student.error, [e.value for e in student.error]
        group = student.session_state["ab_group"]
        assert group["lesson"] == "help" and "step 2" in group["title"]
        assert queued_configs(group) == [validated(c).to_dict()
                                         for _, c in helping_plan().blocks()]
    finally:
        room.clear()


def test_an_ab_is_the_lessons_step_only_when_it_is_exactly_that_step():
    """Run A/B after a step's link loaded the controls: the lesson's step while the controls
    are the step's; once a control changed, an A/B of its own (never answered as the
    lesson's). A step's button queues the step whatever the controls hold."""
    from dataclasses import replace

    from ui import optimisation_lab as lab

    one, two = lab.step_plan("quantise"), lab.step_plan("help")
    assert lab.submission(one, None, "quantise") == (one, "quantise")
    changed = replace(one, pairs=one.pairs + 1)
    assert lab.submission(changed, None, "quantise") == (changed, None)
    assert lab.submission(one, None, "help") == (one, None)  # step 1's controls, step 2 shown
    assert lab.submission(changed, "help", "quantise") == (two, "help")
    assert lab.submission(one, None, None) == (one, None)
    # the preset holds both arms: loaded into the controls, it gives the step's plan back
    assert set(lab.step_preset("help")) >= {"lab_model", "lab_pre", "lab_batch", "lab_workers",
                                            "lab_b_levers", "lab_b_pre", "lab_b_workers"}
