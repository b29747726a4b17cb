"""The run manager: one profiling run at a time per machine, the rest wait in line.

A workshop room shares one server. Every Start goes through this manager: it validates the
config (bad input fails at once, nothing queued), queues it, and starts runs one after another
in their own processes, so two runs never compete for the same cores. Everyone can watch the
current run; only its owner (or an instructor) may stop it. The last ``KEEP_FINISHED``
finished runs stay readable in memory; older ones are forgotten here (their rows, owner and
save state) and live on in the run history, so a server that runs all day keeps flat memory.
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from latency.core.config import RunConfig
from latency.execution.process import RunHandle
from latency.storage.store import RunStore

log = logging.getLogger(__name__)
#: ``RunManager(store=DEFAULT_STORE)``: save finished runs to the default history database.
DEFAULT_STORE: Any = object()

#: finished runs kept in memory for viewers (the SQLite store keeps everything for history).
KEEP_FINISHED = 20
#: run groups (an A/B, a lesson step) the room remembers, newest last
KEEP_GROUPS = 16
#: a group nobody has looked at for this long, with blocks still to run, is cancelled (long
#: enough for a reload, and for a browser tab in the background, whose timers the browser
#: slows to once a minute)
ABANDON_S = 90.0


@dataclass
class RunGroup:
    """Runs queued together for one question (an A/B's blocks, a lesson step), kept by the
    manager — not by the browser session that asked — so every viewer of the room, a reload and
    a late arrival see the same result. ``blocks``: (arm, run id) in order."""

    group_id: str
    title: str
    owner: str
    blocks: list[tuple[str, str]]
    info: dict[str, Any] = field(default_factory=dict)
    last_viewed: float = 0.0
    cancelled: bool = False

    def to_state(self) -> dict[str, Any]:
        """The page's view of the group (what a session keeps to show it)."""
        return {"group_id": self.group_id, "title": self.title,
                "blocks": [list(b) for b in self.blocks], **self.info}


@dataclass(frozen=True)
class Ticket:
    """What a caller gets back from ``submit``: the run's id and its place in line."""

    run_id: str
    position: int  # 0 = running now, 1 = next, ...


class PermissionDenied(Exception):
    """Stopping a run that belongs to somebody else without instructor rights."""


class RunManager:
    def __init__(self, inputs_for: Any = None, store: Any = DEFAULT_STORE) -> None:
        """``store``: the RunStore finished runs are saved to (default: ``$LATENCY_LAB_DB`` or
        ``~/.latency_lab/runs.sqlite``); None saves nothing."""
        if store is DEFAULT_STORE:
            store = RunStore()
        self._store = store
        self._saved: dict[str, str] = {}
        self._save_errors: dict[str, str] = {}
        self._lock = threading.Condition()
        self._queue: deque[RunHandle] = deque()
        self._current: RunHandle | None = None
        self._finished: deque[RunHandle] = deque()
        self._owners: dict[str, str] = {}
        self._by_id: dict[str, RunHandle] = {}
        self._names: dict[str, str] = {}
        self._groups: deque[RunGroup] = deque()
        self._group_ids = itertools.count(1)
        self.abandon_s = ABANDON_S
        self._thread = threading.Thread(target=self._schedule, name="run-manager", daemon=True)
        self._thread.start()

    # ---- submitting and stopping ------------------------------------------------------------
    def submit(self, config: RunConfig, owner: str, inputs: list[Any] | None = None) -> Ticket:
        """Validate and queue a run (ConfigError on bad input); returns its ticket."""
        handle = RunHandle(config, inputs)  # validates
        with self._lock:
            self._queue.append(handle)
            self._owners[handle.run_id] = owner
            self._by_id[handle.run_id] = handle
            self._lock.notify_all()
        return Ticket(handle.run_id, self.position(handle.run_id))

    def submit_group(self, configs: list[RunConfig], owner: str,
                     names: list[str] | None = None) -> list[Ticket]:
        """Validate every config, then queue them all back to back (an A/B's blocks): nobody
        else's run can land between them. Nothing is queued if any config is bad. ``names``:
        what each run is called in the history."""
        handles = [RunHandle(c) for c in configs]  # validates all first
        with self._lock:
            for i, handle in enumerate(handles):
                self._queue.append(handle)
                self._owners[handle.run_id] = owner
                self._by_id[handle.run_id] = handle
                if names is not None and i < len(names):
                    self._names[handle.run_id] = names[i]
            self._lock.notify_all()
        return [Ticket(h.run_id, self.position(h.run_id) or 0) for h in handles]

    # ---- groups: results that belong to the room ---------------------------------------------
    def register_group(self, title: str, owner: str, blocks: list[tuple[str, str]],
                       info: dict[str, Any] | None = None) -> RunGroup:
        """Remember a group of queued runs for everyone (the oldest beyond KEEP_GROUPS is
        forgotten; its runs live on in the history)."""
        now = time.monotonic()
        with self._lock:
            group = RunGroup(f"g{next(self._group_ids)}", title, owner, list(blocks),
                             dict(info or {}), now)
            self._groups.append(group)
            while len(self._groups) > KEEP_GROUPS:
                self._groups.popleft()
            self._lock.notify_all()
        return group

    def group(self, group_id: str) -> RunGroup | None:
        with self._lock:
            return next((g for g in self._groups if g.group_id == group_id), None)

    def latest_group(self, kind: str | None = None) -> RunGroup | None:
        """The newest group (of ``info['kind']`` when given): what a newcomer is shown."""
        with self._lock:
            for g in reversed(self._groups):
                if kind is None or g.info.get("kind") == kind:
                    return g
            return None

    def viewed(self, group_id: str) -> None:
        """A viewer is looking at the group now (each live refresh says so)."""
        with self._lock:
            for g in self._groups:
                if g.group_id == group_id:
                    g.last_viewed = time.monotonic()

    def viewed_run(self, run_id: str) -> None:
        """A viewer watches one of a group's runs (the Live Profiler): the group is watched."""
        with self._lock:
            now = time.monotonic()
            for g in self._groups:
                if any(rid == run_id for _, rid in g.blocks):
                    g.last_viewed = now

    def _abandoned(self) -> list[str]:
        """Run ids of groups in flight that nobody has viewed for ``abandon_s``: they are
        cancelled, so a lesson left running by everyone does not hold the machine. Caller
        holds the lock."""
        now = time.monotonic()
        out: list[str] = []
        for g in self._groups:
            if g.cancelled or now - g.last_viewed <= self.abandon_s:
                continue
            pending = [rid for _, rid in g.blocks
                       if (h := self._by_id.get(rid)) is not None and not h.done()]
            if pending:
                g.cancelled = True
                log.info("group %s (%s) abandoned: cancelling %d run(s)", g.group_id,
                         g.title, len(pending))
                out += pending
        return out

    def _cancel_abandoned(self) -> None:
        with self._lock:
            ids = self._abandoned()
            handles = [self._by_id[rid] for rid in ids]
            for h in handles:
                if h in self._queue:
                    self._queue.remove(h)
                    self._retire(h)
        for h in handles:
            h.cancel()

    def stop(self, run_id: str, requester: str, instructor: bool = False) -> None:
        """Stop (or un-queue) a run; only its owner or an instructor may."""
        with self._lock:
            handle = self._by_id.get(run_id)
            if handle is None:
                raise KeyError(run_id)
            if not instructor and self._owners.get(run_id) != requester:
                raise PermissionDenied("only the person who started this run (or an "
                                       "instructor) can stop it")
            if handle in self._queue:
                self._queue.remove(handle)
                self._retire(handle)
        handle.cancel()

    # ---- reading ------------------------------------------------------------------------------
    def get(self, run_id: str) -> RunHandle | None:
        return self._by_id.get(run_id)

    def owner(self, run_id: str) -> str | None:
        return self._owners.get(run_id)

    def current(self) -> RunHandle | None:
        return self._current

    def queued(self) -> list[RunHandle]:
        with self._lock:
            return list(self._queue)

    def position(self, run_id: str) -> int | None:
        """0 if running now, k if k-th in line, None if finished or unknown."""
        with self._lock:
            if self._current is not None and self._current.run_id == run_id:
                return 0
            for i, h in enumerate(self._queue, start=1):
                if h.run_id == run_id:
                    return i
            return None

    def latest(self) -> RunHandle | None:
        """The run to show a newcomer: the current one, else the most recently finished."""
        with self._lock:
            if self._current is not None:
                return self._current
            return self._finished[-1] if self._finished else None

    def finished(self) -> list[RunHandle]:
        with self._lock:
            return list(self._finished)

    # ---- scheduling ---------------------------------------------------------------------------
    def _schedule(self) -> None:
        while True:
            self._cancel_abandoned()
            with self._lock:
                while not self._queue:
                    self._lock.wait(timeout=1.0)
                    if not self._queue:
                        self._cancel_abandoned()  # the lock is re-entrant (an RLock)
                handle = self._queue.popleft()
                self._current = handle
            handle.start()  # does nothing if it was stopped while it waited in line
            if handle.started_at is not None:
                while True:
                    try:
                        handle.wait(timeout=1.0)
                        break
                    except TimeoutError:  # a group may be abandoned meanwhile
                        self._cancel_abandoned()
                self._save(handle)
            with self._lock:
                self._retire(handle)
                self._current = None
                self._lock.notify_all()

    def _retire(self, handle: RunHandle) -> None:
        """Keep ``handle`` among the finished runs; forget the oldest beyond the limit.
        Caller holds the lock."""
        self._finished.append(handle)
        while len(self._finished) > KEEP_FINISHED:
            old = self._finished.popleft().run_id
            for table in (self._by_id, self._owners, self._saved, self._save_errors,
                          self._names):
                table.pop(old, None)

    def _save(self, handle: RunHandle) -> None:
        """Save a finished run to the history, here in the scheduler thread: off every
        dashboard script thread, and before the next run starts, so the write (compressing
        the rows) never competes with a measurement for the CPU. A failed save loses nothing:
        the run stays in memory and viewable; the error is kept for the page to show."""
        if self._store is None:
            return
        try:
            saved = self._store.save(handle.result(), name=self._names.get(handle.run_id),
                                     source="dashboard",
                                     origin_id=handle.run_id,
                                     owner=self._owners.get(handle.run_id))
        except Exception as exc:  # noqa: BLE001 - any failure: warn, keep the result
            message = f"{type(exc).__name__}: {exc}"
            log.warning("run %s was not saved to the history: %s", handle.run_id, message)
            with self._lock:
                self._save_errors[handle.run_id] = message
            return
        with self._lock:
            self._saved[handle.run_id] = saved

    def saved_id(self, run_id: str) -> str | None:
        """The history id a finished run was saved under (None: not saved, or not yet)."""
        return self._saved.get(run_id)

    def save_error(self, run_id: str) -> str | None:
        """Why a finished run could not be saved to the history, if it could not."""
        return self._save_errors.get(run_id)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until nothing is running or queued (for tests and scripts)."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._queue and self._current is None,
                                       timeout)
