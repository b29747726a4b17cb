"""Presenter mode as two people see it: an instructor's browser and a student's, in separate
Chromium contexts (two sessions) against one dashboard server. The student's page follows the
instructor's to the same page and settings within seconds, says so, and is free again after
Release. Screenshots go to ``artifacts/``."""

import pytest

from tests.browser import ROOT, body, chromium_browser, streamlit_server, until, wait_idle

# skips without Chromium or Playwright, fails instead where LATENCY_LAB_REQUIRE_EXTRAS=1
# (tests/conftest.py)
pytestmark = pytest.mark.browser
KEY = "browser-room-key"
BANNER = "Following the instructor"


def slider(page, label: str) -> str | None:
    """The value a slider shows (its label, then its value, in its text)."""
    for text in page.evaluate("Array.from(document.querySelectorAll("
                              "'[data-testid=stSlider]')).map(e => e.innerText)"):
        parts = [t for t in text.split("\n") if t.strip()]
        if parts and parts[0] == label:
            return parts[1]
    return None


def present(teacher) -> None:
    """The instructor signs in with the room's key (the sidebar's box) and presses Present."""
    teacher.get_by_text("Instructor", exact=True).click()
    key_box = teacher.locator("input[aria-label='Instructor key']")
    key_box.fill(KEY)
    key_box.press("Enter")
    wait_idle(teacher)
    teacher.get_by_role("button", name="Present").click()
    wait_idle(teacher)


def test_a_student_follows_the_presenter_and_is_released():
    (ROOT / "artifacts").mkdir(exist_ok=True)
    with streamlit_server({"LATENCY_LAB_INSTRUCTOR_KEY": KEY}) as url, \
            chromium_browser() as browser:
        teacher = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
        student = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
        student.goto(url)
        wait_idle(student)
        assert BANNER not in body(student)
        teacher.goto(f"{url}/live?replicas=3&batch=4")
        wait_idle(teacher)
        present(teacher)
        assert until(teacher, lambda p: "Presenting" in body(p))
        # the student's page follows within seconds: the Live Profiler, the same settings
        assert until(student, lambda p: BANNER in body(p) and "Live Profiler" in body(p))
        assert until(student, lambda p: slider(p, "Replicas") == "3")
        assert slider(student, "Max batch size") == "4"
        student.screenshot(path=str(ROOT / "artifacts" / "room_student_following.png"))
        teacher.screenshot(path=str(ROOT / "artifacts" / "room_teacher_presenting.png"))
        teacher.get_by_role("button", name="Release").click()
        wait_idle(teacher)
        assert until(student, lambda p: BANNER not in body(p))
        student.screenshot(path=str(ROOT / "artifacts" / "room_student_released.png"))


def test_a_shared_lesson_link_runs_reveals_and_downloads_its_handout():
    """What a person does with a lesson's link: /workshop?lesson=co opens that lesson alone;
    Run, Reveal, then the handout downloads as a one-page PDF."""
    (ROOT / "artifacts").mkdir(exist_ok=True)
    with streamlit_server() as url, chromium_browser() as browser:
        ctx = browser.new_context(viewport={"width": 1280, "height": 800}, accept_downloads=True)
        page = ctx.new_page()
        page.goto(f"{url}/workshop?lesson=co")
        wait_idle(page)
        text = body(page)
        assert "3. Coordinated omission" in text and "1. Where the time goes" not in text
        page.get_by_role("button", name="Run this lesson").click()
        reveal = page.get_by_role("button", name="Reveal the answer")
        assert until(page, lambda p: reveal.is_enabled(), timeout_s=240)
        reveal.click()
        wait_idle(page)
        assert until(page, lambda p: "Measured:" in body(p))
        page.screenshot(path=str(ROOT / "artifacts" / "workshop_lesson_link.png"),
                        full_page=True)
        with page.expect_download(timeout=60_000) as dl:
            page.get_by_role("button", name="Handout (PDF)").click()
        path = dl.value.path()
        assert dl.value.suggested_filename == "latency-lab-co.pdf"
        with open(path, "rb") as f:
            assert f.read(5) == b"%PDF-"


def test_a_student_follows_the_presenters_generation_run():
    """The room follows a generation: the instructor presents the Live Profiler's generation
    mode and starts a run; the student's page switches to that mode, the same settings, and
    shows the presenter's run — its id — live and when it has finished."""
    import re

    with streamlit_server({"LATENCY_LAB_INSTRUCTOR_KEY": KEY}) as url, \
            chromium_browser() as browser:
        teacher = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
        student = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
        student.goto(url)
        wait_idle(student)
        teacher.goto(f"{url}/live?live_kind=streamed+generation+%28LLM%29"
                     "&glive_model=synthetic-lm&glive_duration=4&glive_max_running=3")
        wait_idle(teacher)
        present(teacher)
        assert until(student, lambda p: BANNER in body(p)
                     and "Live Profiler · generation" in body(p))
        assert until(student, lambda p: slider(p, "Max running sequences (slots)") == "3")
        teacher.get_by_role("button", name="Start").click()
        run_id = re.compile(r"gen-[0-9a-f-]+")  # a generation run's id
        assert until(teacher, lambda p: run_id.search(body(p)) is not None, timeout_s=60)
        rid = run_id.search(body(teacher)).group(0)
        assert until(student, lambda p: rid in body(p), timeout_s=60)  # live, while it runs
        assert until(teacher, lambda p: "Verdict:" in body(p), timeout_s=120)
        assert until(student, lambda p: "Verdict:" in body(p) and rid in body(p))
        student.screenshot(path=str(ROOT / "artifacts" / "room_student_generation.png"))
        teacher.get_by_role("button", name="Release").click()
        wait_idle(teacher)
        assert until(student, lambda p: BANNER not in body(p))
