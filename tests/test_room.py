"""Presenter mode: the instructor presents, every other session follows the same page, the
same settings and the same run; release hands control back.

The shared state (``latency.workshop.room.Room``) is tested as a value; the dashboard through
two AppTest sessions of one server process (they share its ``st.cache_resource`` singletons,
as two browsers share a Streamlit server).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from latency.workshop.room import MAX_SETTINGS, STALE_S, Room, json_settings
from tests.conftest import FakeClock

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
KEY = "room-test-key"


def test_a_presentation_changes_version_only_when_what_it_shows_changes():
    room = Room()
    assert room.current() is None
    p1 = room.present("teacher", "live", {"replicas": 2}, None)
    assert room.publish("teacher", "live", {"replicas": 2}, None).version == p1.version
    p2 = room.publish("teacher", "live", {"replicas": 3}, None)
    assert p2.version > p1.version and p2.settings == {"replicas": 3}
    p3 = room.publish("teacher", "simulator", {"replicas": 3}, "run-1")
    assert p3.version > p2.version and p3.page == "simulator" and p3.run_id == "run-1"
    assert room.publish("student", "home", {}, None) is None  # only the presenter publishes
    assert room.current() == p3
    assert not room.release("student") and room.release("teacher")
    assert room.current() is None
    assert room.publish("teacher", "live", {}, None) is None  # a late publish after release


def test_another_instructor_takes_over_and_a_silent_presenter_ends_by_itself():
    clock = FakeClock(1000.0)
    room = Room(clock)
    room.present("a", "live", {}, None)
    room.present("b", "lab", {}, None)
    assert room.current().presenter == "b" and room.publish("a", "live", {}, None) is None
    clock.t += STALE_S + 1
    assert room.current() is None  # a closed laptop does not hold the room for ever


def test_a_presenter_whose_page_is_gone_is_resumed_as_it_stands():
    """A reload is a new session: the presentation passes to it as it stands (same page,
    settings, run and version) once the old page is gone — silent for GONE_S where the
    dashboard cannot say, or no longer connected (after RECONNECT_S) where it can — and never
    while the old page is still there."""
    from latency.workshop.room import GONE_S, RECONNECT_S

    clock = FakeClock(1000.0)
    room = Room(clock)
    p = room.present("old", "lab", {"lab_pairs": 4}, "run-1", connection="c-old",
                     browser="tab-1")
    assert room.resume("new", "c-new", browser="tab-1") is None  # the page was just seen
    clock.t += GONE_S - 1
    assert room.seen("old") and not room.seen("new")  # its open page checks in
    clock.t += GONE_S - 1
    assert room.resume("new", "c-new", browser="tab-1") is None and not room.gone()
    assert room.resume("new", "c-new", False, "tab-1") is None  # connected: not gone
    clock.t += 2
    assert room.gone() and room.resume("new", "c-new", False, "tab-1") is None
    assert room.resume("new", "c-new") is None  # another page: not its presentation
    assert room.resume("new", "c-new", browser="tab-2") is None
    mine = room.resume("new", "c-new", browser="tab-1")
    assert mine is not None and mine.presenter == "new" and mine.connection == "c-new"
    assert (mine.page, mine.settings, mine.run_id, mine.version) == (
        p.page, p.settings, p.run_id, p.version)  # the followers' screens do not move
    assert room.publish("old", "lab", {}, None) is None  # the old page, back: not presenting
    assert room.resume("new") == mine and not room.gone()  # already the presenter's

    assert room.publish("new", "live", {}, None).browser == "tab-1"  # kept as it publishes

    room.present("a", "live", {}, None, connection="c-a", browser="tab-a")
    clock.t += RECONNECT_S - 1
    assert room.resume("b", disconnected=True, browser="tab-a") is None  # a blip
    clock.t += 1
    assert room.resume("b", disconnected=True, browser="tab-a").presenter == "b"
    clock.t += STALE_S + 1
    assert room.resume("c", disconnected=True, browser="tab-a") is None
    assert room.current() is None


def test_settings_are_bounded_json_values():
    values = {f"k{i:04d}": i for i in range(MAX_SETTINGS + 50)}
    values.update({"obj": object(), "big": "x" * 100_000})
    out = json_settings(values)
    assert len(out) == MAX_SETTINGS and "obj" not in out and "big" not in out


def test_every_button_key_is_kept_out_of_the_shared_settings():
    """Streamlit refuses a button whose key was set from session state: each keyed button in
    the dashboard's source must be one the followers never receive."""
    from ui.room import travels

    calls = re.compile(r"(?:button|form_submit_button|download_button|file_uploader)\(")
    found, made = set(), set()  # literal keys; keys made per item (f-strings, as a prefix)
    for path in [ROOT / "app.py", *ROOT.glob("ui/*.py"), *ROOT.glob("views/*.py")]:
        text = path.read_text()
        for m in calls.finditer(text):
            depth, end = 1, m.end()  # the call's own arguments: up to its closing parenthesis
            while depth and end < len(text):
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                end += 1
            key = re.search(r'\bkey=(f?)"([^"]+)"', text[m.end():end])
            if key is not None:
                (made if key.group(1) else found).add(key.group(2).split("{")[0])
    assert found and not [k for k in found if travels(k)], [k for k in found if travels(k)]
    assert made and all(not travels(prefix + "x") for prefix in made), made


#: every control (and page state) that followed the presenter before settings travelled by an
#: allow-list: presenter mode must keep carrying each of them
CONTROLS_THAT_TRAVEL = {
    # Live Profiler (ui/controls.py)
    "model", "pre_ms", "fwd_ms", "post_ms", "stage_dist", "error_rate", "stall_ms", "device",
    "dtype", "threads", "replicas", "batch", "delay", "mode", "concurrency", "rate", "arrival",
    "duration", "slo", "backend", "ray_preprocess", "transport", "payload", "net_rtt",
    "net_jitter", "net_bw", "arg_image-cnn_size",
    # Optimisation Lab
    "lab_model", "lab_pre", "lab_post", "lab_batch", "lab_delay", "lab_replicas", "lab_threads",
    "lab_workers", "lab_concurrency", "lab_block_s", "lab_pairs", "lab_b_levers", "lab_b_pre",
    "lab_b_post", "lab_b_workers", "lab_b_replicas", "lab_b_batch", "wi_arm", "wi_comp",
    "wi_pct", "wi_load_A", "wi_rate_B", "lesson_step", "ab_group",
    # Load Simulator
    "sim_source", "sim_service", "sim_dist", "sim_cv", "sim_per_item", "sim_arrival",
    "sim_replicas", "sim_batch", "sim_delay", "sim_rate", "sim_slo", "sim_plan", "sim_val_len",
    # Compare Runs
    "cmp_text", "cmp_models", "cmp_status", "cmp_runs", "cmp_logy", "cmp_target",
    "cmp_name_run-1",
    # Workshop
    "workshop_focus",
}


def test_settings_travel_by_an_allow_list():
    """A key nobody listed — a widget added tomorrow, a page's private state — stays in its
    session; every control that followed the presenter still does."""
    from ui.room import travels

    assert not [k for k in sorted(CONTROLS_THAT_TRAVEL) if not travels(k)]
    for key in ("brand_new_widget", "lab_secret", "sim_new_slider", "owner", "watch",
                "lesson_answer", "guess_where", "lab_submit", "room_present", "_lab_link"):
        assert not travels(key), key


@pytest.fixture
def room_app(monkeypatch):
    from ui.server import room

    monkeypatch.setenv("LATENCY_LAB_INSTRUCTOR_KEY", KEY)
    room.clear()
    yield
    room.clear()


def session(page: str | None = None, **query: str) -> AppTest:
    """A browser opening the dashboard: on ``page`` (Home by default), its URL carrying
    ``query``."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(query)
    if page is not None:
        at.switch_page(page)
    at.run()
    return at


def instructor() -> AppTest:
    at = session()
    next(t for t in at.sidebar.text_input if t.label == "Instructor key").input(KEY).run()
    assert any(b.label == "Present" for b in at.sidebar.button)
    return at


def button(at: AppTest, label: str):
    return next(b for b in at.sidebar.button if b.label == label)


def following(at: AppTest) -> bool:
    return any("Following the instructor" in i.value for i in at.info)


def test_students_follow_the_presenter_page_settings_and_run_until_release(room_app):
    teacher, student = instructor(), session()
    assert not following(student)
    teacher.switch_page("views/live_profiler.py").run()
    teacher.sidebar.slider(key="replicas").set_value(3).run()
    teacher.session_state["brand_new_widget"] = "the presenter's own"  # listed nowhere
    button(teacher, "Present").click().run()
    assert any(b.label == "Release" for b in teacher.sidebar.button)

    student.run()  # the student was on Home: now on the presenter's page, with its settings
    assert following(student) and not student.exception
    assert student.sidebar.slider(key="replicas").value == 3
    assert "brand_new_widget" not in student.session_state  # an unknown key stays home
    teacher.sidebar.slider(key="batch").set_value(4).run()
    student.run()
    assert student.sidebar.slider(key="batch").value == 4
    student.sidebar.slider(key="replicas").set_value(5).run()
    assert student.sidebar.slider(key="replicas").value == 3  # the projector's settings win

    teacher.sidebar.number_input(key="fwd_ms").set_value(1.0)
    teacher.sidebar.slider(key="duration").set_value(2)
    next(b for b in teacher.button if b.label == "Start").click().run()
    run_id = teacher.session_state["watch"]
    assert isinstance(run_id, str) and run_id  # the teacher's Start made a run
    # not yet the student's: the next rerun is what follows the presenter to it
    assert (student.session_state["watch"] if "watch" in student.session_state
            else None) != run_id
    student.run()
    assert student.session_state["watch"] == run_id  # the same run, live

    teacher.switch_page("views/load_simulator.py").run()
    student.run()
    assert any(h.value == "Load Simulator" for h in student.title)

    button(teacher, "Release").click().run()
    student.run()
    assert not following(student)
    student.switch_page("views/live_profiler.py").run()
    student.sidebar.slider(key="replicas").set_value(5).run()
    assert student.sidebar.slider(key="replicas").value == 5  # free to explore
    assert not student.exception and not teacher.exception


def test_a_follower_opens_the_lesson_the_presenter_opened_by_its_link(room_app):
    teacher, student = instructor(), session()
    teacher.query_params["lesson"] = "co"  # /workshop?lesson=co
    teacher.switch_page("views/workshop.py").run()
    button(teacher, "Present").click().run()
    student.run()
    titles = [m.value for m in student.markdown if m.value.startswith("#### ")]
    assert following(student) and titles == ["#### 3. Coordinated omission"]
    assert not student.exception and not teacher.exception


@pytest.fixture
def browsers(monkeypatch):
    """Each AppTest session its own browser connection, and the set of those the server no
    longer holds (AppTest cannot close a session, nor tell one from another: its sessions
    share one id and its Runtime is a mock). A dropped one is gone at once: no grace for a
    network blip."""
    import streamlit as st

    from latency.workshop import room as room_model
    from ui import room as room_ui

    gone: set[str] = set()
    monkeypatch.setattr(room_model, "RECONNECT_S", 0.0)
    monkeypatch.setattr(room_ui, "connection_id", lambda: st.session_state.get("owner"))
    monkeypatch.setattr(room_ui, "connected", lambda c: None if c is None else c not in gone)
    return gone


def presenting(at: AppTest) -> bool:
    return any(b.label == "Release" for b in at.sidebar.button)


def test_an_instructor_who_reloads_resumes_the_presentation(room_app, browsers):
    """The instructor presents, then reloads: a new session, at first following its own dead
    presentation; once the same key is entered it presents again — the same page, settings
    and run, the students' screens unmoved — not "Another instructor is presenting"."""
    from ui.server import room

    teacher, student = instructor(), session()
    teacher.switch_page("views/live_profiler.py").run()
    teacher.sidebar.slider(key="replicas").set_value(3).run()
    button(teacher, "Present").click().run()
    student.run()
    shown = room().current()
    assert following(student) and shown.presenter == teacher.session_state["owner"]

    browsers.add(teacher.session_state["owner"])  # the reload: that page's session is dropped
    token = teacher.query_params["presenter"]
    assert token and token == room().current().browser  # the presenting page's URL keeps it
    again = session(presenter=token)  # the reloaded page: a new session, its URL kept
    assert following(again) and not presenting(again)
    next(t for t in again.sidebar.text_input if t.label == "Instructor key").input(KEY).run()
    assert not again.exception and presenting(again) and not following(again)
    captions = [c.value for c in again.sidebar.caption]
    assert any("Resumed" in c for c in captions), captions
    assert not any("Another instructor" in c for c in captions)
    assert any(h.value == "Live Profiler" for h in again.title)  # where the room was
    assert again.sidebar.slider(key="replicas").value == 3
    now = room().current()
    assert now.presenter == again.session_state["owner"] and now.version == shown.version
    again.sidebar.slider(key="batch").set_value(4).run()  # presenting from there
    student.run()
    assert following(student) and student.sidebar.slider(key="batch").value == 4
    assert student.sidebar.slider(key="replicas").value == 3
    teacher.run()  # the old page, if it ever came back, follows; it does not take over
    assert following(teacher) and room().current().presenter == again.session_state["owner"]
    assert not student.exception and not teacher.exception and not again.exception


def test_an_old_presentation_closed_without_release_holds_no_new_instructor(room_app,
                                                                            browsers):
    """A presentation whose page closed without Release is resumed only by a reload of that
    page: an instructor opening another page is not made its presenter, and, once the key
    is entered, is taken back to the page it opened (following had moved it) and told in one
    line that Present takes the room over."""
    from ui.server import room

    old = instructor()
    old.switch_page("views/workshop.py").run()
    button(old, "Present").click().run()
    browsers.add(old.session_state["owner"])  # closed, never released
    new = session()  # opens Home …
    assert following(new) and any(h.value == "Workshop" for h in new.title)  # … a student
    new.switch_page("views/workshop.py")  # (AppTest's own page: where the browser is now)
    next(t for t in new.sidebar.text_input if t.label == "Instructor key").input(KEY).run()
    assert not new.exception and not presenting(new) and not following(new)
    assert any(h.value == "Latency Lab" for h in new.title), [h.value for h in new.title]
    captions = [c.value for c in new.sidebar.caption]
    assert sum("still holds the room" in c and "Present takes the room over" in c
               for c in captions) == 1, captions
    assert room().current().presenter == old.session_state["owner"]  # not taken silently
    new.switch_page("views/live_profiler.py").run()
    new.sidebar.slider(key="replicas").set_value(4).run()
    assert not following(new) and new.sidebar.slider(key="replicas").value == 4  # free
    button(new, "Present").click().run()
    assert presenting(new) and room().current().presenter == new.session_state["owner"]
    assert new.query_params["presenter"] == room().current().browser


def test_another_instructors_open_page_keeps_the_room(room_app, browsers):
    """A second instructor (the key is the room's, not a person's) does not take over a
    presentation whose page is still open: it follows, is told, and Present takes over."""
    from ui.server import room

    teacher = instructor()
    button(teacher, "Present").click().run()
    other = instructor()
    assert following(other) and not presenting(other)
    assert any("Another instructor is presenting" in c.value for c in other.sidebar.caption)
    assert room().current().presenter == teacher.session_state["owner"]
    button(other, "Present").click().run()
    assert presenting(other) and room().current().presenter == other.session_state["owner"]


def test_only_an_instructor_can_present(room_app):
    student = session()
    assert not any(b.label == "Present" for b in student.sidebar.button)


def synthetic_run(**kw):
    from latency.core.config import RunConfig

    return RunConfig(model="synthetic", model_args={"forward_ms": 1, "preprocess_ms": 0,
                                                    "postprocess_ms": 0}, warmup=0, **kw)


def test_a_group_belongs_to_the_room_and_its_runs_are_named_after_it(tmp_path):
    from latency.execution.ab import ABPlan, submit_ab
    from latency.execution.manager import RunManager
    from latency.storage.store import RunStore
    from latency.workshop.groups import RunGroups

    store = RunStore(tmp_path / "h.sqlite")
    mgr = RunManager(store=store)
    groups = RunGroups(mgr)
    try:
        base = synthetic_run(requests=30)
        plan = ABPlan(base, synthetic_run(requests=30, batch_size=2), pairs=1)
        blocks = submit_ab(mgr, plan, "teacher", title="Lesson: batching")
        group = groups.register("Lesson: batching", "teacher", blocks, {"kind": "ab"})
        assert groups.latest("ab") is group and groups.latest("other") is None
        assert groups.group(group.group_id).to_state()["blocks"] == [list(b) for b in blocks]
        assert mgr.wait_idle(120)
        names = {store.info(mgr.saved_id(rid)).name for _, rid in blocks}
        assert names == {"Lesson: batching · A 1/1", "Lesson: batching · B 1/1"}
    finally:
        mgr.close()


def test_a_group_nobody_watches_is_cancelled_and_a_watched_one_is_not():
    """On the manager's clock, moved by hand: the whole time-out passes in milliseconds. A
    group is watched on its page (``viewed``) or through one of its runs (the Live Profiler's
    ``viewed_run``); the one nobody watched loses its runs still to come."""
    import time

    from latency.execution.manager import RunManager
    from latency.workshop.groups import ABANDON_S, RunGroups

    clock = FakeClock(1000.0)
    mgr = RunManager(store=None, clock=clock)
    groups = RunGroups(mgr)
    t0 = time.monotonic()
    try:
        watched = mgr.submit_group([synthetic_run(duration_s=60.0)], owner="a")
        wg = groups.register("watched", "a", [("A", watched[0].run_id)])
        live = mgr.submit_group([synthetic_run(duration_s=60.0)], owner="c")
        vg = groups.register("on the Live Profiler", "c", [("A", live[0].run_id)])
        left = mgr.submit_group([synthetic_run(duration_s=60.0) for _ in range(3)], owner="b")
        lg = groups.register("left", "b", [("A", t.run_id) for t in left])
        clock.t += ABANDON_S - 1
        groups.cancel_abandoned()
        assert not lg.cancelled  # not yet: a reload, a tab in the background
        groups.viewed(wg.group_id)  # one viewer keeps watching the first group's page
        mgr.viewed_run(live[0].run_id)  # another watches the second group's run
        clock.t += 2
        groups.cancel_abandoned()
        assert lg.cancelled and not wg.cancelled and not vg.cancelled
        statuses = [mgr.get(t.run_id).status for t in left]
        assert statuses == ["stopped"] * 3, statuses  # never started: stopped in line
        assert not mgr.get(live[0].run_id).cancelled
        assert not mgr.get(watched[0].run_id).cancelled
    finally:
        mgr.close()
    assert time.monotonic() - t0 < 30  # no minute-and-a-half of real waiting


def test_the_managers_own_thread_cancels_a_group_nobody_watches():
    """End to end, nobody calling ``cancel_abandoned``: the groups' watcher runs on the run
    manager's queue thread (every ``TICK_S``, while a run runs and while the line waits), so
    once the manager's clock passes ``ABANDON_S`` the group nobody views loses its runs, the
    one running and the one in line. The clock is moved by hand: seconds, not 90."""
    import time

    from latency.execution.manager import TICK_S, RunManager
    from latency.workshop.groups import ABANDON_S, RunGroups

    clock = FakeClock(1000.0)
    mgr = RunManager(store=None, clock=clock)
    groups = RunGroups(mgr)
    t0 = time.monotonic()
    try:
        left = mgr.submit_group([synthetic_run(duration_s=60.0) for _ in range(2)], owner="b")
        group = groups.register("left", "b", [("A", t.run_id) for t in left])
        time.sleep(2 * TICK_S)  # the thread ticks; on its clock nobody has left yet
        assert not group.cancelled
        clock.t += ABANDON_S + 1
        deadline = time.monotonic() + 20 * TICK_S
        while not group.cancelled and time.monotonic() < deadline:
            time.sleep(0.05)
        assert group.cancelled, "the manager's thread never cancelled the abandoned group"
        assert all(mgr.get(t.run_id).cancelled for t in left)
        assert mgr.wait_idle(timeout=30)  # both end: the running one stopped, the other unrun
    finally:
        mgr.close()
    assert time.monotonic() - t0 < 45  # no minute-and-a-half of real waiting, nor a 60 s run
