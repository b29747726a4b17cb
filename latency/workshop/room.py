"""A workshop room: who presents, and what every follower's screen shows.

Presenter mode: an instructor's session publishes the page it is on, the settings of its
controls and the run it watches; every other session of the dashboard server follows them —
the same page, the same settings, the same run, live — until the instructor releases the room.
This module holds that shared state for one server (the dashboard keeps one ``Room``, as it
keeps one run manager); it knows nothing of Streamlit, so it is tested as a plain value.

Bounded: settings are JSON values of at most ``MAX_SETTINGS`` keys and ``MAX_SETTINGS_BYTES``
in all (anything larger is not a control's value and is left out), and a presentation whose
presenter has not published for ``STALE_S`` (a closed laptop) ends by itself.

Resumed: a presenter's page that is gone (reloaded, its tab closed) does not lock the room to
it. An instructor's session on that same page — reloaded (its URL keeps the presentation's
``browser`` token), once its key is entered again — takes the presentation over as it stands
(``resume``: the same page, settings, run and version, so the followers' screens do not move),
without pressing Present. Gone means: the dashboard says the
presenter's browser session is no longer connected, or, where it cannot say, the presenter's
page has not checked in (``seen``: once a second while it is open) for ``GONE_S``.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

MAX_SETTINGS = 256
MAX_SETTINGS_BYTES = 64 * 1024
#: a presenter silent this long (its browser closed) releases the room by itself
STALE_S = 600.0
#: a presenter's page silent this long (it checks in once a second while open) is gone: an
#: instructor's session may resume the presentation (used where the dashboard cannot say
#: whether the presenter's browser session is still connected)
GONE_S = 20.0
#: a presenter's browser session the dashboard no longer holds is gone once its page has also
#: been silent this long (a dropped connection that comes back within it is a network blip)
RECONNECT_S = 5.0
#: guesses kept per question (one per session; a room is tens of people)
MAX_GUESSES = 500


@dataclass(frozen=True)
class Presentation:
    """What the presenter shows: a page (its URL path, '' for Home), the settings of its
    controls (widget key → value), the run it watches, and a version that changes with them."""

    presenter: str
    page: str
    settings: dict[str, Any] = field(default_factory=dict)
    run_id: str | None = None
    version: int = 0
    #: the presenter's browser session on the dashboard server (to tell a page that is gone);
    #: not part of what is shown
    connection: str | None = field(default=None, compare=False)
    #: a token the presenting page keeps in its URL: a reload of that page carries it, another
    #: page does not — only the page that started a presentation may resume it
    browser: str | None = field(default=None, compare=False)


def json_settings(values: dict[str, Any]) -> dict[str, Any]:
    """The JSON-able part of ``values`` (controls' values: numbers, text, booleans, lists of
    them), within the bounds; other values (objects a page keeps for itself) are left out."""
    out: dict[str, Any] = {}
    size = 0
    for key in sorted(values):
        if len(out) >= MAX_SETTINGS:
            break
        value = values[key]
        try:
            text = json.dumps(value)
        except (TypeError, ValueError):
            continue
        if size + len(text) > MAX_SETTINGS_BYTES:
            continue
        size += len(text)
        out[str(key)] = value
    return out


class Room:
    """The presentation of one dashboard server; every method is thread-safe."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._current: Presentation | None = None
        self._published = 0.0
        self._seen = 0.0
        self._versions = 0
        self._guesses: dict[str, dict[str, Any]] = {}
        self._revealed: set[str] = set()

    def _now_current(self) -> Presentation | None:
        """(with the lock held) The presentation, ended first if its presenter went silent."""
        if self._current is not None and self._clock() - self._published > STALE_S:
            self._current = None  # the presenter went away without releasing
        return self._current

    def current(self) -> Presentation | None:
        """The presentation followers follow now, or None (everyone explores freely)."""
        with self._lock:
            return self._now_current()

    def present(self, presenter: str, page: str, settings: dict[str, Any],
                run_id: str | None, connection: str | None = None,
                browser: str | None = None) -> Presentation:
        """Start presenting (taking the room over from another presenter) or publish what the
        presenter shows now. The version changes only when what is shown does, so followers
        re-render only then. ``connection``: the presenter's browser session, if known;
        ``browser``: the token its page keeps in its URL (kept from before when None)."""
        settings = json_settings(settings)
        with self._lock:
            self._published = self._seen = self._clock()
            cur = self._current
            mine = cur is not None and cur.presenter == presenter
            if browser is None and mine and cur is not None:
                browser = cur.browser
            if (cur is not None and mine and cur.page == page
                    and cur.settings == settings and cur.run_id == run_id):
                if ((connection is not None and cur.connection != connection)
                        or cur.browser != browser):
                    self._current = cur = replace(
                        cur, connection=connection or cur.connection, browser=browser)
                return cur
            self._versions += 1
            self._current = Presentation(presenter, page, settings, run_id, self._versions,
                                         connection, browser)
            return self._current

    def publish(self, presenter: str, page: str, settings: dict[str, Any],
                run_id: str | None, connection: str | None = None) -> Presentation | None:
        """Like ``present`` but only for the session presenting now: a released or taken-over
        presenter's late publish changes nothing."""
        with self._lock:
            cur = self._current
            if cur is None or cur.presenter != presenter:
                return None
        return self.present(presenter, page, settings, run_id, connection)

    def seen(self, presenter: str) -> bool:
        """The presenter's page checks in (once a second while it is open); False for anyone
        else. It does not publish: a presenter who only watches still ends after STALE_S."""
        with self._lock:
            if self._current is None or self._current.presenter != presenter:
                return False
            self._seen = self._clock()
            return True

    def gone(self, disconnected: bool | None = None) -> bool:
        """Whether the presenter's page is gone. ``disconnected``: what the dashboard server
        says of its browser session — True (no longer held: gone once the page has been
        silent for ``RECONNECT_S`` too), False (still connected: not gone), None (it cannot
        say: gone once silent — no ``seen``, ``present`` or ``publish`` — for ``GONE_S``).
        False with no presentation."""
        with self._lock:
            return self._gone_locked(disconnected)

    def _gone_locked(self, disconnected: bool | None) -> bool:
        if self._now_current() is None or disconnected is False:
            return False
        silent = self._clock() - self._seen
        return silent >= (RECONNECT_S if disconnected else GONE_S)

    def resume(self, presenter: str, connection: str | None = None,
               disconnected: bool | None = None,
               browser: str | None = None) -> Presentation | None:
        """Hand the presentation, as it stands, to ``presenter`` (an instructor's session: the
        caller checks) if its presenter's page is gone (``gone``, ``disconnected`` as the
        dashboard says it) and ``browser`` is the token that page kept in its URL (a reload
        of it): the same page, settings, run and version, so the followers' screens do not
        move. Returns the presentation now ``presenter``'s (also when it already was), or
        None: nothing to resume, another page's presentation (an old one closed without
        Release is not taken over by a new page), or its presenter is still there (then
        only Present takes it over)."""
        with self._lock:
            cur = self._now_current()
            if cur is None:
                return None
            if cur.presenter == presenter:
                return cur
            if cur.browser is None or browser != cur.browser:
                return None
            if not self._gone_locked(disconnected):
                return None
            self._published = self._seen = self._clock()
            self._current = replace(cur, presenter=presenter, connection=connection)
            return self._current

    def release(self, presenter: str) -> bool:
        """End the presentation if ``presenter`` holds it; followers keep what they see and may
        explore from there."""
        with self._lock:
            if self._current is None or self._current.presenter != presenter:
                return False
            self._current = None
            self._versions += 1
            return True

    # ---- a lesson's question: the room's guesses, then the answer ----------------------------
    def guess(self, question: str, session: str, value: Any) -> bool:
        """Record (or replace) ``session``'s guess; False once the room holds MAX_GUESSES
        other sessions' guesses, or when the value is not a plain JSON value."""
        if not json_settings({"v": value}):
            return False
        with self._lock:
            book = self._guesses.setdefault(question, {})
            if session not in book and len(book) >= MAX_GUESSES:
                return False
            book[session] = value
            return True

    def guesses(self, question: str) -> list[Any]:
        with self._lock:
            return list(self._guesses.get(question, {}).values())

    def my_guess(self, question: str, session: str) -> Any:
        with self._lock:
            return self._guesses.get(question, {}).get(session)

    def reveal(self, question: str) -> None:
        with self._lock:
            self._revealed.add(question)

    def revealed(self, question: str) -> bool:
        with self._lock:
            return question in self._revealed

    def reset(self, question: str) -> None:
        """A new run of the lesson: a new round of guesses, the answer hidden again."""
        with self._lock:
            self._guesses.pop(question, None)
            self._revealed.discard(question)

    def presenting(self, session: str) -> bool:
        cur = self.current()
        return cur is not None and cur.presenter == session


__all__ = ["GONE_S", "MAX_SETTINGS", "RECONNECT_S", "STALE_S", "Presentation", "Room",
           "json_settings"]
