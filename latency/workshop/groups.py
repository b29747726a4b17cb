"""Run groups: runs queued together for one question (an A/B's blocks, a lesson step), kept
for the whole room — not by the browser session that asked — so every viewer, a reload and a
late arrival see the same result.

A group nobody has looked at for ``ABANDON_S``, with runs still to come, is cancelled, so a
lesson left running by everyone does not hold the machine. Looking counts on the group's page
(``viewed``) and on any of its runs (the run manager's ``viewed_run``, from the Live
Profiler). Time is the run manager's clock; the check runs on the manager's queue thread
(``RunManager.add_watcher``) and can be called directly.
"""
from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from latency.execution.manager import RunManager

log = logging.getLogger(__name__)
#: run groups the room remembers, newest last
KEEP_GROUPS = 16
#: a group nobody has looked at for this long, with runs still to come, is cancelled (long
#: enough for a reload, and for a browser tab in the background, whose timers the browser
#: slows to once a minute)
ABANDON_S = 90.0


@dataclass
class RunGroup:
    """One group: ``blocks`` are (label or arm, run id) in order; ``info`` what the page
    keeps with it (``kind``: "ab", "lesson:<key>"; the A/B's pairs; the lesson step)."""

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


class RunGroups:
    """The groups of one run manager's runs; thread-safe, one per dashboard server."""

    def __init__(self, manager: RunManager, abandon_s: float = ABANDON_S,
                 keep: int = KEEP_GROUPS) -> None:
        self._manager = manager
        self._clock = manager.clock
        self.abandon_s = abandon_s
        self._keep = keep
        self._lock = threading.Lock()
        self._groups: deque[RunGroup] = deque()
        self._ids = itertools.count(1)
        manager.add_watcher(self.cancel_abandoned)

    def register(self, title: str, owner: str, blocks: list[tuple[str, str]],
                 info: dict[str, Any] | None = None) -> RunGroup:
        """Remember a group of queued runs for everyone (the oldest beyond ``keep`` is
        forgotten; its runs live on in the history)."""
        with self._lock:
            group = RunGroup(f"g{next(self._ids)}", title, owner, list(blocks),
                             dict(info or {}), self._clock())
            self._groups.append(group)
            while len(self._groups) > self._keep:
                self._groups.popleft()
        return group

    def group(self, group_id: str) -> RunGroup | None:
        with self._lock:
            return next((g for g in self._groups if g.group_id == group_id), None)

    def latest(self, kind: str | None = None) -> RunGroup | None:
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
                    g.last_viewed = self._clock()

    def cancel_abandoned(self) -> list[str]:
        """Cancel the runs still to come of every group nobody has watched for
        ``abandon_s``; returns their ids."""
        now = self._clock()
        mgr = self._manager
        with self._lock:
            groups = [g for g in self._groups if not g.cancelled]
        out: list[str] = []
        for g in groups:
            seen = [g.last_viewed] + [t for _, rid in g.blocks
                                      if (t := mgr.last_viewed(rid)) is not None]
            if now - max(seen) <= self.abandon_s:
                continue
            pending = [rid for _, rid in g.blocks
                       if (h := mgr.get(rid)) is not None and not h.done()]
            if not pending:
                continue
            g.cancelled = True
            log.info("group %s (%s) abandoned: cancelling %d run(s)", g.group_id, g.title,
                     len(pending))
            for rid in pending:
                mgr.cancel(rid)
            out += pending
        return out


__all__ = ["ABANDON_S", "KEEP_GROUPS", "RunGroup", "RunGroups"]
