"""The dashboard yields the CPU to the measurement: every script run lowers its own thread's
priority, so thirty browsers re-rendering never slow the run they watch."""
from __future__ import annotations

import os
import threading

#: niceness of the dashboard's script threads: under CPU contention a thread at nice 10 gets
#: about a tenth of the share of one at nice 0, so a room of viewers yields to the measurement.
SCRIPT_NICENESS = 10


def yield_cpu_to_runs() -> None:
    """Lower the priority of the calling script thread (Linux: niceness is per thread).

    The profiling run executes in its own process and must not be slowed by thirty browsers
    re-rendering charts. Streamlit runs each script and fragment rerun in a fresh thread
    started from its (un-niced) event loop, so every render calls this first. The run
    process is spawned by the run manager's thread, which is created before any thread is
    niced, so runs keep normal priority. Raising niceness needs no privilege.
    """
    if not hasattr(os, "setpriority"):
        return
    try:
        tid = threading.get_native_id()
        if os.getpriority(os.PRIO_PROCESS, tid) < SCRIPT_NICENESS:
            os.setpriority(os.PRIO_PROCESS, tid, SCRIPT_NICENESS)
    except OSError:
        pass


__all__ = ["SCRIPT_NICENESS", "yield_cpu_to_runs"]
