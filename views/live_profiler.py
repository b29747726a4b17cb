"""Live Profiler: start a run, watch its latency decompose live, stop it."""
import streamlit as st

from latency.host.cores import usable_cores
from ui import gen_live
from ui import live_profiler as live
from ui import room as room_ui
from ui.compare_runs import history_note, history_state
from ui.controls import KEEP, default, profiler_controls
from ui.figure_cache import has_charts
from ui.priority import yield_cpu_to_runs
from ui.reruns import rerun_page
from ui.server import audience, run_manager
from ui.session import session_id

#: the run owner's page refreshes every second (the others' as ui/audience.py allows)
OWNER_REFRESH_S = 1.0
#: what the page profiles: one-shot requests, or streamed generation (a generative pipeline)
KINDS = {"one-shot": "one-shot requests", "generation": "streamed generation (LLM)"}
ONE_SHOT = "one-shot"


def one_shot_page() -> None:
    st.title("Live Profiler")
    config, slo_ms = profiler_controls()
    mgr = run_manager()
    me = session_id()

    if config.replicas * config.threads > usable_cores():
        st.warning(f"{config.replicas} replicas × {config.threads} threads = "
                   f"{config.replicas * config.threads} threads on {usable_cores()} cores: "
                   "replicas will steal cores from each other and every timing inflates. "
                   "You can still start it, to see the effect.")

    watch_id = st.session_state.get("watch")
    handle = mgr.get(watch_id) if watch_id else mgr.latest(ONE_SHOT)
    if handle is not None and handle.kind != ONE_SHOT:  # a generation: its own mode shows it
        handle = mgr.latest(ONE_SHOT)
    st.session_state["shown"] = history_state(mgr, handle)
    mine = handle is not None and mgr.owner(handle.run_id) == me
    in_flight = handle is not None and not handle.done()

    live.run_buttons(config, handle, "**Start** queues a run with these settings (the server "
                     "runs one at a time, each in its own process); **Stop** ends yours "
                     "(instructors: any), keeping what was measured.")


    def shown_run():
        """Your latest run if you started one, else whatever the room is running (or ran last)."""
        rid = st.session_state.get("watch")
        run = mgr.get(rid) if rid else mgr.latest(ONE_SHOT)
        return run if run is None or run.kind == ONE_SHOT else mgr.latest(ONE_SHOT)


    def changed() -> bool:
        """A new run appeared, the shown one ended or was saved, or the room moved on."""
        return (history_state(mgr, shown_run()) != st.session_state.get("shown")
                or room_ui.stale())


    @st.fragment(run_every=None if in_flight else 1.0)
    def follow() -> None:
        """Cheap check each second while no run is in flight (the live view checks while one
        is): a new run appeared, or the room moved on → refresh the page."""
        yield_cpu_to_runs()
        audience().saw(me)
        if changed():
            rerun_page()


    #: this page run's one snapshot of the run: the live view's first run (inside this page run)
    #: shows it; its later runs, on their own each second, take one each
    page_snap = [handle.snapshot()] if handle is not None else []


    # Charts refresh only while the run is in flight: every second on the page of the run's
    # owner (the projector, in presenter mode); on the other pages watching it, every two seconds
    # in a small room and less often in a large one, so that all of them together refresh at most
    # ui/audience.RENDERS_PER_S times a second — each refresh is a Streamlit script run costing
    # the server ~15-20 ms of a core, taken from the run it watches (bench/bench_watchers.py). A
    # finished run's charts are static, so a room of idle browsers costs next to nothing. Until
    # the first figures exist the owner's page looks four times a second (the run process hands
    # its rows over as often then), so they appear within 2 s of measuring starting.
    first_wait = in_flight and mine and not has_charts(page_snap[0])
    refresh_s = 0.25 if first_wait else (OWNER_REFRESH_S if mine else audience().refresh_s(me))


    @st.fragment(run_every=refresh_s if in_flight else None)
    def live_view() -> None:
        yield_cpu_to_runs()
        audience().saw(me)
        if handle is None:
            st.info("No run yet. Choose settings in the sidebar and press **Start**.")
        elif in_flight and handle.done():
            # finished since this page last ran: the finished view (and no more polling) comes
            # with the page's rerun. While the page waits for its turn, a line — not the whole
            # view again each second (ui/page_turns.py)
            rerun_page()
            st.info(f"`{handle.run_id}` finished — its result appears in a moment.")
        else:
            if in_flight and changed():  # the look of ``follow``, which rests while a run is in
                rerun_page()  # flight; before rendering, so a failing render cannot hide it
            shown = live.render(handle, slo_ms, page_snap.pop() if page_snap else None)
            history_note(mgr, handle)
            if in_flight:
                mgr.viewed_run(handle.run_id)  # an A/B's or a lesson's block: watched here
            if first_wait and has_charts(shown):
                rerun_page()  # the first figures are up: back to the once-a-second cadence


    follow()
    live_view()
    if handle is not None:
        live.explain()


def generation_page() -> None:
    """A generation run: its settings, Start and Stop, and its live view."""
    st.title("Live Profiler · generation")
    config = gen_live.run_controls()
    mgr, me = run_manager(), session_id()
    watch_id = st.session_state.get("watch")
    handle = mgr.get(watch_id) if watch_id else None
    if handle is None or handle.kind != "generation":
        handle = mgr.latest("generation")
    in_flight = handle is not None and not handle.done()
    live.run_buttons(config, handle, "**Start** queues a generation run with these settings "
                     "(one run at a time, each in its own process); **Stop** ends yours "
                     "(instructors: any), keeping what was measured.",
                     ("glivebtn_start", "glivebtn_stop"))

    mine = handle is not None and mgr.owner(handle.run_id) == me
    shown_id = handle.run_id if handle is not None else None

    @st.fragment(run_every=None if in_flight else 1.0)
    def follow() -> None:
        """While no generation is in flight: one that somebody (the presenter) starts is
        shown as soon as it appears."""
        yield_cpu_to_runs()
        audience().saw(me)
        latest = mgr.latest("generation")
        if (latest.run_id if latest is not None else None) != shown_id or room_ui.stale():
            rerun_page()

    # the owner's page refreshes every second, the others' as the room's budget allows (the
    # one-shot view's rule: ui/audience.py)
    refresh_s = OWNER_REFRESH_S if mine else audience().refresh_s(me)

    @st.fragment(run_every=refresh_s if in_flight else None)
    def live_view() -> None:
        yield_cpu_to_runs()
        audience().saw(me)
        if handle is None:
            st.info("No generation run yet. Choose settings in the sidebar and press "
                    "**Start**.")
            return
        if in_flight and handle.done():
            rerun_page()  # finished since the page ran: the finished view with the rerun
        gen_live.render(handle)
        gen_live.saved_note(mgr.saved_id(handle.run_id), mgr.save_error(handle.run_id))
        if in_flight:
            mgr.viewed_run(handle.run_id)

    follow()
    live_view()


yield_cpu_to_runs()
kind = st.sidebar.segmented_control(
    "Profile", list(KINDS), format_func=KINDS.get, key="live_kind",
    default=default("live_kind", ONE_SHOT), required=True,
    help="One-shot requests (a request in, a reply out: queue, preprocess, forward, "
         "postprocess) or streamed generation (a generative pipeline behind a "
         "continuous-batching scheduler: TTFT, gaps between tokens, stalls).", **KEEP)
if kind == "generation":
    generation_page()
else:
    one_shot_page()
