"""The run manager: one profiling run at a time per machine, the rest wait in line.

A dashboard server (a workshop room) shares one machine. Every Start goes through this
manager: it validates the config (bad input fails at once, nothing queued), queues it, and
starts runs one after another in their own processes, so two runs never compete for the same
cores. Everyone can watch the current run; only its owner (or an instructor) may stop it. The
last ``KEEP_FINISHED`` finished runs stay readable in memory; older ones are forgotten here
(their record: rows, owner, save state) and live on in the run history, so a server that runs
all day keeps flat memory.

What the manager knows of a run is one record (``RunRecord``), so forgetting a run forgets
all of it. Time is read from an injectable clock (the moments a run was submitted and last
watched), so what is decided from those moments — the workshop cancelling a group nobody
watches — is tested without waiting for it.
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from latency.core.config import RunConfig
from latency.core.errors import ConfigError
from latency.execution.gen_handle import GenRunHandle
from latency.execution.process import RunHandle, RunOptions
from latency.pipelines.gen_checks import generative_run
from latency.storage.store import RunStore

#: a one-shot run's handle or a generation's: what the line holds
Handle = RunHandle | GenRunHandle

log = logging.getLogger(__name__)
#: ``RunManager(store=DEFAULT_STORE)``: save finished runs to the default history database.
DEFAULT_STORE: Any = object()

#: finished runs kept in memory for viewers (the SQLite store keeps everything for history).
KEEP_FINISHED = 20
#: a room shares one machine: each person may have this many submissions waiting (a group —
#: an A/B's blocks, a lesson step — counts as one), and the line holds at most this many runs
MAX_WAITING_PER_OWNER = 3
MAX_WAITING_RUNS = 200
#: how often the queue thread calls its watchers (``add_watcher``), in real seconds
TICK_S = 1.0
#: how long ``close`` waits for the run it stopped to end (its process reports what it
#: measured, or is killed with the server)
CLOSE_WAIT_S = 30.0


@dataclass
class RunRecord:
    """Everything the manager keeps about one run."""

    handle: Handle
    owner: str
    #: what the run is called in the history (None: the history's default)
    name: str | None = None
    #: the history id it was saved under, or why it could not be saved
    saved_id: str | None = None
    save_error: str | None = None
    #: the manager's clock when it was submitted, and when somebody last watched it
    submitted_at: float = 0.0
    last_viewed: float = 0.0
    #: the submission it came in (the runs of one group share it)
    submission: int = 0


@dataclass(frozen=True)
class Ticket:
    """What a caller gets back from ``submit``: the run's id and its place in line."""

    run_id: str
    position: int  # 0 = running now, 1 = next, ...


class QueueFull(ConfigError):
    """The line is full, for this person or for everyone: one line to show, nothing queued."""


class PermissionDenied(Exception):
    """Stopping a run that belongs to somebody else without instructor rights."""


class RunManager:
    def __init__(self, store: Any = DEFAULT_STORE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``store``: the RunStore finished runs are saved to (default: ``$LATENCY_LAB_DB`` or
        ``~/.latency_lab/runs.sqlite``); None saves nothing. ``clock``: the time a run's
        moments are read on (a test's fake clock)."""
        if store is DEFAULT_STORE:
            store = RunStore()
        self._store = store
        self.clock = clock
        self._lock = threading.Condition()
        self._submissions = itertools.count(1)
        self._runs: dict[str, RunRecord] = {}
        self._queue: deque[Handle] = deque()
        self._current: Handle | None = None
        self._finished: deque[Handle] = deque()
        self._watchers: list[Callable[[], Any]] = []
        self._closed = False
        self._thread = threading.Thread(target=self._schedule, name="run-manager", daemon=True)
        self._thread.start()

    # ---- submitting and stopping ------------------------------------------------------------
    def submit(self, config: RunConfig, owner: str, inputs: list[Any] | None = None) -> Ticket:
        """Validate and queue a run (ConfigError on bad input); returns its ticket. A
        generation (``generative_run``) gets a generation run's handle, watched and saved as
        one."""
        handle = self._handle(config, inputs, None)  # validates
        self._enqueue([(handle, owner, None)])
        return Ticket(handle.run_id, self.position(handle.run_id))  # type: ignore[arg-type]

    def submit_group(self, configs: list[RunConfig], owner: str,
                     names: list[str] | None = None) -> list[Ticket]:
        """Validate every config, then queue them all back to back (an A/B's blocks): nobody
        else's run can land between them. Nothing is queued if any config is bad. ``names``:
        what each run is called in the history."""
        names = list(names or [])
        handles = [self._handle(c, None, names[i] if i < len(names) else None)
                   for i, c in enumerate(configs)]  # validates all first
        self._enqueue([(h, owner, names[i] if i < len(names) else None)
                       for i, h in enumerate(handles)])
        return [Ticket(h.run_id, self.position(h.run_id) or 0) for h in handles]

    def _handle(self, config: RunConfig, inputs: list[Any] | None, name: str | None) -> Handle:
        if generative_run(config):
            if inputs is not None:
                raise ConfigError("a generation takes its prompts from --prompts or the "
                                  "pipeline's samples, not from inputs")
            return GenRunHandle(config, options=self._options(name))
        return RunHandle(config, inputs, options=self._options(name))

    def _options(self, name: str | None) -> RunOptions:
        """How this manager's runs run: a run process whose dashboard is killed saves its own
        result to this manager's history (nobody is left to do it)."""
        path = getattr(self._store, "path", None)
        return RunOptions(history=str(path) if path is not None else None, name=name,
                          source="dashboard")

    def _enqueue(self, runs: list[tuple[Handle, str, str | None]]) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the run manager is closed")
            self._check_room(runs[0][1], len(runs))
            now = self.clock()
            submission = next(self._submissions)
            for handle, owner, name in runs:
                self._queue.append(handle)
                self._runs[handle.run_id] = RunRecord(handle, owner, name, submitted_at=now,
                                                      last_viewed=now, submission=submission)
            self._lock.notify_all()

    def _check_room(self, owner: str, n: int) -> None:
        """QueueFull unless ``owner`` may queue ``n`` more runs (the caller holds the lock)."""
        waiting = [self._runs[h.run_id] for h in self._queue if h.run_id in self._runs]
        mine = {r.submission for r in waiting if r.owner == owner}
        if len(mine) >= MAX_WAITING_PER_OWNER:
            raise QueueFull(f"you already have {len(mine)} runs waiting in line (at most "
                            f"{MAX_WAITING_PER_OWNER}): wait for one to start, or stop one")
        if len(waiting) + n > MAX_WAITING_RUNS:
            raise QueueFull(f"the line is full ({len(waiting)} runs waiting, at most "
                            f"{MAX_WAITING_RUNS}): try again when some have run")

    def stop(self, run_id: str, requester: str, instructor: bool = False) -> None:
        """Stop (or un-queue) a run; only its owner or an instructor may."""
        with self._lock:
            record = self._runs.get(run_id)
            if record is None:
                raise KeyError(run_id)
            if not instructor and record.owner != requester:
                raise PermissionDenied("only the person who started this run (or an "
                                       "instructor) can stop it")
        self.cancel(run_id)

    def cancel(self, run_id: str) -> bool:
        """Stop (or un-queue) a run whoever owns it — for decisions of the server itself, such
        as the workshop cancelling a group nobody watches. False if the run is unknown."""
        with self._lock:
            record = self._runs.get(run_id)
            if record is None:
                return False
            if record.handle in self._queue:
                self._queue.remove(record.handle)
                self._retire(record.handle)
        record.handle.cancel()
        return True

    def close(self) -> None:
        """Stop the queue thread and the run in flight, and un-queue the rest (each stopped,
        never started). Closing twice does nothing; a closed manager takes no runs."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            waiting, self._queue = list(self._queue), deque()
            for handle in waiting:
                self._retire(handle)
            current = self._current
            self._lock.notify_all()
        for handle in waiting:
            handle.cancel()
        if current is not None:
            current.cancel()
        if self._thread is not threading.current_thread():
            self._thread.join(CLOSE_WAIT_S)

    # ---- watching -----------------------------------------------------------------------------
    def viewed_run(self, run_id: str) -> None:
        """Somebody watches this run now (each live refresh of its page says so)."""
        with self._lock:
            record = self._runs.get(run_id)
            if record is not None:
                record.last_viewed = self.clock()

    def last_viewed(self, run_id: str) -> float | None:
        """When somebody last watched the run (on ``clock``; its submission if nobody did),
        None if the run is unknown or forgotten."""
        with self._lock:
            record = self._runs.get(run_id)
            return record.last_viewed if record is not None else None

    def add_watcher(self, check: Callable[[], Any]) -> None:
        """Have the queue thread call ``check()`` about every ``TICK_S``, whether runs are in
        line or not (the workshop's check for groups nobody watches). A check that raises is
        logged and called again at the next tick."""
        with self._lock:
            self._watchers.append(check)

    # ---- reading ------------------------------------------------------------------------------
    def get(self, run_id: str) -> Handle | None:
        record = self._runs.get(run_id)
        return record.handle if record is not None else None

    def owner(self, run_id: str) -> str | None:
        record = self._runs.get(run_id)
        return record.owner if record is not None else None

    def current(self) -> Handle | None:
        return self._current

    def queued(self) -> list[Handle]:
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

    def latest(self, kind: str | None = None) -> Handle | None:
        """The run to show a newcomer: the current one, else the most recently finished —
        of that ``kind`` (a handle's: one-shot, generation) when one is given."""
        with self._lock:
            runs = [*self._finished, *([self._current] if self._current is not None else [])]
            if self._current is not None and kind is None:
                return self._current
            for handle in reversed(runs):
                if kind is None or handle.kind == kind:
                    return handle
            return None

    def finished(self) -> list[Handle]:
        with self._lock:
            return list(self._finished)

    def saved_id(self, run_id: str) -> str | None:
        """The history id a finished run was saved under (None: not saved, or not yet)."""
        record = self._runs.get(run_id)
        return record.saved_id if record is not None else None

    def save_error(self, run_id: str) -> str | None:
        """Why a finished run could not be saved to the history, if it could not."""
        record = self._runs.get(run_id)
        return record.save_error if record is not None else None

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until nothing is running or queued (for tests and scripts)."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._queue and self._current is None,
                                       timeout)

    # ---- scheduling ---------------------------------------------------------------------------
    def _schedule(self) -> None:
        while True:
            self._tick()
            with self._lock:
                if self._closed:
                    return
                if not self._queue:
                    self._lock.wait(timeout=TICK_S)
                    continue
                handle = self._queue.popleft()
                self._current = handle
            handle.start()  # does nothing if it was stopped while it waited in line
            if handle.started_at is not None:
                while True:
                    try:
                        handle.wait(timeout=TICK_S)
                        break
                    except TimeoutError:  # a watcher may stop it meanwhile
                        self._tick()
                self._save(handle)
            with self._lock:
                self._retire(handle)
                self._current = None
                self._lock.notify_all()

    def _tick(self) -> None:
        """Call every watcher, outside the lock (a watcher calls back into the manager)."""
        with self._lock:
            watchers = list(self._watchers)
        for check in watchers:
            try:
                check()
            except Exception:  # noqa: BLE001 - a watcher's bug must not stop the queue
                log.exception("run manager watcher %r failed", check)

    def _retire(self, handle: Handle) -> None:
        """Keep ``handle`` among the finished runs; forget the oldest beyond the limit.
        Caller holds the lock."""
        self._finished.append(handle)
        while len(self._finished) > KEEP_FINISHED:
            self._runs.pop(self._finished.popleft().run_id, None)

    def _save(self, handle: Handle) -> None:
        """Save a finished run to the history, here in the scheduler thread: off every
        dashboard script thread, and before the next run starts, so the write (compressing
        the rows) never competes with a measurement for the CPU. A failed save loses nothing:
        the run stays in memory and viewable; the error is kept for the page to show."""
        record = self._runs.get(handle.run_id)
        if self._store is None or record is None:
            return
        try:
            result = handle.result()
            saved = self._store.save(result, name=record.name, source="dashboard",
                                     origin_id=handle.run_id, owner=record.owner)
        except Exception as exc:  # noqa: BLE001 - any failure: warn, keep the result
            message = f"{type(exc).__name__}: {exc}"
            log.warning("run %s was not saved to the history: %s", handle.run_id, message)
            with self._lock:
                record.save_error = message
            return
        with self._lock:
            record.saved_id = saved
