"""The workshop course: its lessons' known answers, measured (Little's law on a real run, the
coordinated-omission stall), and the Workshop page through AppTest (guess, run, reveal; a
second session sees the same lesson)."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from latency.analysis.littles_law import littles_law
from latency.execution.engine import execute
from latency.workshop import course
from tests.app_support import guess_run_reveal
from tests.timing_support import machine_note

APP = str(Path(__file__).resolve().parents[1] / "app.py")


@pytest.mark.timing
def test_littles_law_holds_on_the_queueing_lessons_measured_run():
    label, config = course.queueing().steps[0].runs[2]  # 80 % load
    r = execute(config)
    assert r.status == "completed", r.failure
    law, note = littles_law(r.measured()), machine_note(r)
    assert law is not None and law.l_sampled > 1, (law, note)  # a queue, not an idle server
    assert law.l_sampled == pytest.approx(law.l_predicted, rel=0.10), (repr(law), note)
    assert law.throughput_rps == pytest.approx(0.8 * course.CAPACITY_RPS, rel=0.10), \
        (law.throughput_rps, note)


def test_the_open_loop_p99_exceeds_the_closed_loop_p99_by_about_the_stall():
    item = course.coordinated_omission()
    results = [execute(c) for c in item.steps[0].configs()]
    assert [r.status for r in results] == ["completed", "completed"]
    ans = course.answer(item, results)
    assert ans.value == "open loop"
    closed, open_ = (row["p99_ms"] for row in ans.table)
    assert closed < course.STALL_MS / 4  # one stalled request hides below the p99
    assert 0.8 * course.STALL_MS < open_ - closed < 1.05 * course.STALL_MS


def test_each_lesson_fits_its_five_minutes_and_the_knee_and_histograms_are_right():
    for item in course.course():
        assert item.estimated_s <= 300, item.key
        for step in item.steps:
            assert step.question.endswith("?") and step.idea
    assert course.knee([100, 180, 305, 330, 335]) == 2  # 305 is within 10 % of 335
    item = course.coordinated_omission()
    labels, counts = course.guess_histogram(["open loop", "open loop", "both"], item)
    assert dict(zip(labels, counts)) == {"closed loop": 0, "open loop": 2, "both": 1,
                                         "neither": 0}
    labels, counts = course.guess_histogram([1, 2, 2, 3, 10], course.queueing())
    assert sum(counts) == 5 and len(labels) == len(counts)


def page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/workshop.py").run()
    return at


def test_a_lesson_is_guessed_run_and_revealed_and_a_second_session_sees_it():
    from ui.server import room, run_groups, run_manager

    room.clear()
    at = page()
    assert not at.exception
    assert any("Where the time goes" in m.value for m in at.markdown)
    guess_run_reveal(at, "where", "forward")
    measured = [s.value for s in at.success if s.value.startswith("**Measured:**")]
    assert measured and "of the mean" in measured[0]
    # the answer is the measured top component, and the page says it
    group = run_groups().latest("lesson:where")
    result = run_manager().get(group.blocks[0][1]).result()
    means = {c: result.summary.components_ms[c].mean for c in
             ("network", "queue", "preprocess", "forward", "postprocess")}
    assert max(means, key=means.get) in measured[0]
    assert {b.key for b in at.download_button} >= {"handout_pdf_where", "handout_png_where"}
    other = page()  # another student, or a reload: the same finished lesson
    assert any(s.value == measured[0] for s in other.success)
    assert not other.exception
    from ui.workshop import lesson_handout  # the handout says what the page says

    item = course.where_the_time_goes().steps[0]
    h = lesson_handout(item, group.to_state(), [result], room().guesses("where"))
    assert h.answer in measured[0] and "1 guess(es): forward ×1" == h.guesses
    assert h.render("pdf").startswith(b"%PDF")
    room.clear()


def test_the_targets_lesson_reads_each_capacity_off_the_measured_curve():
    """Known answer: p99s from the M/M/1 closed form at the lesson's loads → each target's
    capacity read between the loads that bracket the exact one; a dip (noise) is pooled."""
    import math

    s = course.TARGET_SERVICE_MS
    rows = [{"load": u, "p99_ms": math.log(100) * s / (1 - u)} for u in course.TARGET_LOADS]
    got = {name: course.capacity_at_target(rows, name, slo, s) for name, slo, _ in course.TARGETS}
    for name, slo, _ in course.TARGETS:
        exact = 1 - math.log(100) * s / slo  # M/M/1: p99 = ln100·S/(1−ρ)
        assert got[name]["theory"] == f"{exact:.0%}"
        if exact > course.TARGET_LOADS[-1]:
            assert got[name]["measured"].startswith("at least 90%")
        else:  # a convex curve read linearly: a little below the exact load, never above
            assert exact - 0.03 < got[name]["load_pct"] / 100 <= exact + 1e-9, name
    assert got["payment fraud check"]["load_pct"] < got["search autocomplete"]["load_pct"]
    assert course.monotone([40.0, 30.0, 60.0]) == [35.0, 35.0, 60.0]
    banded = [{**r, "p99_lo_ms": 0.9 * r["p99_ms"], "p99_hi_ms": 1.1 * r["p99_ms"]}
              for r in rows]
    fraud = course.capacity_at_target(banded, "fraud", 50.0, s)
    low, high = fraud["range_pct"]
    assert low < fraud["load_pct"] < high and "95 % intervals" in fraud["measured"]
    strict = course.capacity_at_target(rows, "x", 10.0, s)  # even 30 % misses 10 ms
    assert strict["load_pct"] is None and strict["measured"].startswith("less than 30%")
    assert strict["theory"].startswith("none")


def test_shared_links_open_a_lesson_or_a_lab_step():
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["lesson"] = "co"
    at.run()
    at.switch_page("views/workshop.py").run()
    titles = [m.value for m in at.markdown if m.value.startswith("#### ")]
    assert titles == ["#### 3. Coordinated omission"] and not at.error

    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["lesson"] = "no-such-lesson"
    at.run()
    at.switch_page("views/workshop.py").run()
    titles = [m.value for m in at.markdown if m.value.startswith("#### ")]
    # the ten in order: five lessons, the practice question, the four on serving LLMs
    assert [t.split(".")[0] for t in titles] == [f"#### {i}" for i in range(1, 11)]
    assert "practice question" in titles[5] and "Time to first token" in titles[6]
    assert len(at.error) == 1 and "?lesson=co" in at.error[0].value

    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["lesson"] = "help"  # the Lab's lesson at step 2, its preset loaded
    at.run()
    at.switch_page("views/optimisation_lab.py").run()
    assert not at.exception and at.session_state["lesson_step"] == "help"
    assert at.sidebar.selectbox(key="lab_b_pre").value == "fast"
    assert at.sidebar.selectbox(key="lab_pre").value == "naive"
    assert any(m.value.startswith("**Step 2.**") for m in at.markdown)


def test_the_workshop_is_a_stage_of_its_own_that_no_cli_path_imports():
    """The workshop (lessons, the room, run groups) sits on ``execution``; the command line
    neither may nor does import it, and ``execution`` holds one run and the queue only."""
    import importlib.util
    import subprocess
    import sys

    from latency.layers import LAYERS

    assert "execution" in LAYERS["workshop"] and "workshop" not in LAYERS["cli"]
    assert not any("workshop" in allowed for stage, allowed in LAYERS.items())
    for gone in ("course", "room", "lesson"):
        assert importlib.util.find_spec(f"latency.execution.{gone}") is None, gone
    code = ("import sys, latency.cli.main\n"
            "print(any(m.startswith('latency.workshop') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(APP).parent, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr
