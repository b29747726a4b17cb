"""The Workshop page's parts: one lesson's card — for each of its steps, the question, the
room's guesses, its runs and, once revealed, the measured answer (``latency.workshop.lesson``:
the same model as the Optimisation Lab's lesson).

Who may run and reveal: anyone on a private dashboard; in a shared room (a server started with
an instructor key) only an instructor — the students guess, the instructor asks the machine.
A step's runs are one group kept for the room (``kind: lesson:<step key>``), so every
viewer, a reload and a late arrival see the same finished lesson.
"""
from __future__ import annotations

import streamlit as st

from latency.analysis.validity import QUIET_MACHINE
from latency.core import fmt
from latency.core.errors import ConfigError
from latency.core.records import REQUEST_COMPONENTS, component_labels, in_process
from latency.figures import course_plots
from latency.figures.handout import Handout
from latency.workshop.course import TARGETS, guess_histogram
from latency.workshop.lesson import Answer, Lesson, Step
from ui.optimisation_lab import group_progress
from ui.priority import yield_cpu_to_runs
from ui.rights import can_manage_room
from ui.server import room, run_groups, run_manager
from ui.session import session_id

#: the query parameter of a shared link to one lesson: /workshop?lesson=co
LINK_PARAM = "lesson"


def focused_lesson(lessons: list[Lesson]) -> str | None:
    """The lesson a shared link opens (``?lesson=<key>``), or None for the whole course. A
    follower shows the presenter's (its settings carry ``workshop_focus``); a link to no
    lesson gets a one-line error and the whole course."""
    if st.session_state.get("room_following"):
        return st.session_state.get("workshop_focus")
    key = st.query_params.get(LINK_PARAM)
    keys = [item.key for item in lessons]
    if key is not None and key not in keys:
        st.error(f"No lesson {key!r} in this course: the links are "
                 + ", ".join(f"?{LINK_PARAM}={k}" for k in keys) + ".")
        key = None
    st.session_state["workshop_focus"] = key
    return key


def lesson_group(item: Step) -> dict | None:
    g = run_groups().latest(f"lesson:{item.key}")
    return g.to_state() if g is not None else None


def run_lesson(item: Step) -> None:
    """Queue the step's runs as one group, named after it. Guesses sent before the runs
    stay (students guess while the instructor starts them); a lesson run again after its
    answer was revealed opens a new round of guesses."""
    mgr = run_manager()
    names = [f"Workshop {item.title} · {label}" for label in item.labels()]
    try:
        tickets = mgr.submit_group(item.configs(), owner=session_id(), names=names)
    except ConfigError as exc:  # bad input, or the line is full: an error box, nothing queued
        st.error(f"Cannot run the lesson: {exc}")
        return
    run_groups().register(item.title, session_id(),
                       [(label, t.run_id) for label, t in zip(item.labels(), tickets)],
                       {"kind": f"lesson:{item.key}"})
    if room().revealed(item.key):
        room().reset(item.key)


def signature(lessons: list[Lesson]) -> tuple:
    """What the page shows that others can change: each lesson's group and its progress, the
    number of guesses, whether it is revealed."""
    out = []
    for item in (step for lesson in lessons for step in lesson.steps):
        g = lesson_group(item)
        progress = group_progress([tuple(b) for b in g["blocks"]])[0] if g else None
        out.append((g["group_id"] if g else None, progress, len(room().guesses(item.key)),
                    room().revealed(item.key)))
    return tuple(out)


def guess_input(item: Step) -> None:
    """A student's guess, sent to the room (one per session; a new guess replaces it)."""
    me = session_id()
    mine = room().my_guess(item.key, me)
    c1, c2 = st.columns([3, 1])
    if item.choices is not None:
        value = c1.radio("Your guess", item.choices, index=None, horizontal=True,
                         key=f"guess_{item.key}")
    else:
        value = c1.number_input(f"Your guess ({item.unit})", 0.0, 1e6, None, 0.5,
                                key=f"guess_{item.key}")
    if c2.button("Send my guess", key=f"lesson_send_{item.key}", disabled=value is None):
        room().guess(item.key, me, value)
        mine = value
    if mine is not None:
        c1.caption(f"Your guess: **{mine}**.")


def results(item: Step, group: dict) -> list | None:
    """The finished runs of the step's group, in order (None while some still run)."""
    mgr = run_manager()
    out = []
    for _, rid in group["blocks"]:
        h = mgr.get(rid)
        if h is None or not h.done():
            return None
        out.append(h.result())
    return out


def card(lesson: Lesson) -> bool:
    """Render one lesson, step by step; returns whether runs of it are in flight (the page
    then refreshes)."""
    with st.container(border=True):
        st.markdown(f"#### {lesson.title}")
        st.page_link("views/workshop.py", label="Link to this lesson", icon=":material/link:",
                     query_params={LINK_PARAM: lesson.key},
                     help=f"Opens this lesson alone: /workshop?{LINK_PARAM}={lesson.key}")
        in_flight = False
        for item in lesson.steps:
            if len(lesson.steps) > 1:
                st.markdown(f"**Step {lesson.number(item.key)}: {item.title}.** {item.intro}")
            in_flight = step_card(item) or in_flight
    return in_flight


def step_card(item: Step) -> bool:
    """Render one step; returns whether its runs are in flight."""
    manage = can_manage_room()
    group = lesson_group(item)
    st.caption(f"About {fmt.duration(item.estimated_s * 1000)} of runs on this machine: "
               f"{len(item.runs)} run(s) — " + ", ".join(item.labels()) + ".")
    if item.key == "targets":
        st.table([{"application": name, "p99 target": fmt.duration(ms), "why": why}
                  for name, ms, why in TARGETS])
    st.markdown(f"**Question.** {item.question}")
    guess_input(item)
    guesses = room().guesses(item.key)
    revealed = room().revealed(item.key)
    in_flight = False
    if group is not None:
        run_groups().viewed(group["group_id"])
        done, line = group_progress([tuple(b) for b in group["blocks"]])
        in_flight = done < len(group["blocks"])
        if in_flight:
            st.progress(done / len(group["blocks"]),
                        text=f"measuring: {done} of {len(group['blocks'])} runs · {line}")
    if manage:
        b1, b2, _ = st.columns([1, 1, 2])
        b1.button("Run this lesson", key=f"lesson_run_{item.key}", type="primary",
                  icon=":material/play_arrow:", disabled=in_flight,
                  on_click=run_lesson, args=(item,),
                  help="Queue the lesson's runs (one after another, nobody else's in "
                       "between) and open a new round of guesses.")
        b2.button("Reveal the answer", key=f"lesson_reveal_{item.key}",
                  disabled=group is None or in_flight or revealed,
                  on_click=room().reveal, args=(item.key,),
                  help="Show everyone the measured answer.")
        if guesses and not revealed:  # once revealed, shown with the answer marked
            labels, counts = guess_histogram(guesses, item)
            st.plotly_chart(course_plots.guesses_figure(labels, counts),
                            key=f"guesses_{item.key}")
        elif not guesses:
            st.caption("No guesses yet.")
    elif not revealed:
        st.caption(f"{len(guesses)} guess(es) in the room. The instructor reveals the "
                   "answer once the runs are measured.")
    if group is None or in_flight or not revealed:
        return in_flight
    finished = results(item, group)
    if finished is None:
        return in_flight
    if any(r.status != "completed" for r in finished):
        st.warning("Some of the lesson's runs did not complete: "
                   + ", ".join(f"{label}: {r.status}" for (label, _), r
                               in zip(group["blocks"], finished)))
        return in_flight
    ans = answer_of(item, group, finished)
    st.success(f"**Measured:** {ans.text}")
    busy = disturbed_note(group, finished)
    if busy:
        st.warning(busy, icon=":material/warning:")
    st.plotly_chart(course_plots.answer_figure(item.key, ans.table,
                                               components(item, finished), ans.details,
                                               shown_names(finished)),
                    key=f"answer_{item.key}")
    if item.key == "targets":
        st.table([{"application": d["application"], "p99 target": fmt.duration(d["slo_ms"]),
                   "measured: load it can take": d["measured"],
                   "M/M/1 theory": d["theory"]} for d in ans.details])
    for check in ans.checks:
        st.caption(check)
    st.markdown(item.idea)
    if guesses:
        labels, counts = guess_histogram(guesses, item)
        mark = ans.value if item.choices is not None else None
        st.plotly_chart(course_plots.guesses_figure(labels, counts, mark),
                        key=f"guesses_after_{item.key}")
    handout_buttons(item, group, finished, guesses)
    return in_flight


@st.cache_resource(max_entries=64, show_spinner="Reading the answer off the runs…")
def _answer(step_key: str, run_ids: tuple[str, ...], _item: Step, _finished: list) -> Answer:
    return _item.answer(_finished)


def disturbed_note(group: dict, finished: list) -> str | None:
    """DISTURBED on the lesson's card and handout when any of its runs measured on a busy
    machine (the answer read off them may be the machine's, not the lesson's); None when
    every run was quiet."""
    busy = [(label, r) for (label, _), r in zip(group["blocks"], finished)
            if r.validity.disturbed]
    if not busy:
        return None
    why = next(c.detail for c in busy[0][1].validity.checks if c.name == QUIET_MACHINE)
    names = ", ".join(f"“{label}”" for label, _ in busy)
    return (f"DISTURBED: the machine was busy while {names} measured ({why.split(';')[0]}): "
            "their times are inflated, and the answer read off them may be the machine's. "
            "Run the lesson again on a quieter machine before trusting it.")


def answer_of(item: Step, group: dict, finished: list) -> Answer:
    """The step's answer, computed once for its finished runs (whoever views it: thirty
    followers' reruns must not redo the goodput lesson's simulation)."""
    return _answer(item.key, tuple(rid for _, rid in group["blocks"]), item, finished)


def components(item: Step, finished: list) -> dict[str, float] | None:
    """The component means the "where the time goes" chart shows (None for other lessons)."""
    if item.key != "where":
        return None
    s = finished[0].summary
    return {c: s.components_ms[c].mean or 0.0 for c in REQUEST_COMPONENTS}


def shown_names(finished: list) -> dict[str, str]:
    """The components' names as the lesson's runs call them: in-process, network is the
    thread hand-off."""
    return component_labels(bool(finished) and all(in_process(r.config) for r in finished))


def lesson_handout(item: Step, group: dict, finished: list, guesses: list) -> Handout:
    """The finished lesson as the handout's page: the same answer, chart and table as the card
    (computed from the same runs), the room's guesses, and where the runs were measured."""
    ans = answer_of(item, group, finished)
    if guesses:
        labels, counts = guess_histogram(guesses, item)
        said = f"{len(guesses)} guess(es): " + ", ".join(
            f"{label} ×{n}" for label, n in zip(labels, counts) if n)
    else:
        said = "no guesses were sent."
    env = finished[0].environment
    provenance = (f"Measured live by Latency Lab on {env.get('cores', '?')} CPU core(s), "
                  f"{env.get('device_name', env.get('device', '?'))}, torch "
                  f"{env.get('torch', '?')}; in the run history as \"Workshop {item.title} · "
                  f"…\": " + ", ".join(rid for _, rid in group["blocks"]) + ".")
    tables = [handout_rows(ans.table)]
    if item.key == "targets":
        tables.insert(0, [{"application": d["application"],
                           "p99 target": fmt.duration(d["slo_ms"]),
                           "measured": d["measured"].replace(" from the p99s' 95 % intervals", "")
                           .replace(" (every load measured)", ""), "M/M/1": d["theory"]}
                          for d in ans.details])
    checks = [*filter(None, [disturbed_note(group, finished)]), *ans.checks]
    return Handout(item.title, item.question or "", ans.text, item.idea,
                   course_plots.answer_figure(item.key, ans.table, components(item, finished),
                                              ans.details, shown_names(finished)),
                   tables, said, provenance, checks)


#: a generation lesson's figures in its handout's table: (key, heading)
GEN_COLUMNS = (("offered_rps", "offered/s"), ("throughput_rps", "served/s"),
               ("tokens_per_s", "tokens/s"), ("ttft_p50_ms", "TTFT p50 ms"),
               ("ttft_p99_ms", "TTFT p99 ms"), ("tpot_p50_ms", "TPOT p50 ms"),
               ("met_share", "met targets"), ("goodput_rps", "goodput/s"),
               ("freeze_ms", "typical freeze ms"), ("long_ttft_ms", "long prompt TTFT ms"))


def handout_rows(table: list[dict]) -> list[dict]:
    """The answer's table as the handout prints it: a one-shot lesson's requests, req/s, p50
    and p99; a generation lesson's figures it has."""
    if table and "p50_ms" in table[0]:
        return [{"run": r["run"], "requests": r["requests"], "req/s": r["throughput_rps"],
                 "p50 ms": r["p50_ms"], "p99 ms": r["p99_ms"]} for r in table]
    return [{"run": r["run"], "requests": r["requests"],
             **{head: "—" if r[k] is None else r[k] for k, head in GEN_COLUMNS if k in r}}
            for r in table]


def handout_bytes(item: Step, group: dict, finished: list, guesses: list, kind: str) -> bytes:
    """A download's file, drawn in Streamlit's worker thread at the dashboard's low priority
    (thirty students pressing it must not slow the next lesson's run)."""
    yield_cpu_to_runs()
    return lesson_handout(item, group, finished, guesses).render(kind)


def handout_buttons(item: Step, group: dict, finished: list, guesses: list) -> None:
    """Download the lesson's one-page handout; rendered when pressed, not on every rerun."""
    c1, c2, _ = st.columns([1, 1, 3])
    for col, kind in ((c1, "pdf"), (c2, "png")):
        col.download_button(
            f"Handout ({kind.upper()})", key=f"handout_{kind}_{item.key}",
            data=lambda kind=kind: handout_bytes(item, group, finished, guesses, kind),
            file_name=f"latency-lab-{item.key}.{kind}",
            mime="application/pdf" if kind == "pdf" else "image/png", on_click="ignore",
            icon=":material/download:",
            help="One page to keep: the question, the room's guesses, the measured answer, "
                 "its chart and numbers.")
