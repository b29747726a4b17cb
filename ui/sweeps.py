"""The dashboard's sweeps: one at a time for the whole server, each in a thread of its own that
measures its points as ``python -m latency sweep`` does (each a run in a process of its own,
saved in the history), and keeps its result so far for every page that looks.

A sweep is many runs, minutes long: it cannot be a run of the run manager's queue, and it must
outlive the page that started it (a reload, a closed tab). So it lives here, server-wide
(``st.cache_resource``): the page that started it and everyone else's read the same record,
whose result grows a point at a time (``on_point``). Its runs take the machine's run lock as
any run does, so a sweep and a Live Profiler run never measure at once.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from latency.core.errors import ConfigError, error_text

#: the sweeps kept for looking at (the newest; older ones are in the history, point by point)
KEPT = 8


@dataclass
class SweepRecord:
    """A sweep started here: its plan, who started it, its result so far (a point at a time),
    and how it ended."""

    owner: str
    plan: Any
    cancel: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    #: bumped at each point: a page redraws when it changes
    version: int = 0
    done: bool = False
    error: str | None = None

    @property
    def sweep_id(self) -> str | None:
        return self.result.sweep_id if self.result is not None else None


class SweepRegistry:
    """The server's sweeps (``KEPT`` newest), one running at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[SweepRecord] = []

    def start(self, plan: Any, owner: str, history: Any) -> SweepRecord:
        """Start ``plan`` (a checked ``SweepPlan``) in a thread, saving its points in
        ``history`` (a ``RunStore``); ConfigError while another sweep runs."""
        from latency.execution.sweep import run_sweep, saved_runner
        from latency.simulation.sweep_prediction import predict_points

        with self._lock:
            if any(not r.done for r in self._records):
                raise ConfigError("a sweep is running on this server: one at a time (each "
                                  "point needs the machine to itself); stop it or wait")
            record = SweepRecord(owner, plan)
            self._records = [*self._records, record][-KEPT:]

        def seen(result: Any) -> None:
            record.result, record.version = result, record.version + 1

        def body() -> None:
            try:
                seen(run_sweep(plan, saved_runner(history, record.cancel,
                                                  who="dashboard sweep", source="dashboard"),
                               predict=predict_points, cancel=record.cancel, on_point=seen))
            except Exception as exc:  # noqa: BLE001 - said on the page, not lost in a thread
                record.error = error_text(exc)
            finally:
                record.done = True
                record.version += 1
        threading.Thread(target=body, name="dashboard-sweep", daemon=True).start()
        return record

    def latest(self) -> SweepRecord | None:
        with self._lock:
            return self._records[-1] if self._records else None


@st.cache_resource(show_spinner=False)
def sweeps() -> SweepRegistry:
    """The one registry of this server (every session sees the same sweeps)."""
    return SweepRegistry()


__all__ = ["SweepRecord", "SweepRegistry", "sweeps"]
