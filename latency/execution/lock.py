"""One measurement at a time: a run lock every process of a user shares.

Two runs on one machine disturb each other's timings — they share the cores, the caches and the
memory bus — and nothing in either result would say so. The dashboard's run manager already
queues its own runs; this lock also queues a CLI run, a benchmark, a notebook's
``latency.profile`` and a second dashboard behind each other, whichever started first.

It is an advisory ``flock`` on a file in ``$LATENCY_LAB_LOCK_DIR`` (default:
``latency-lab-lock-<uid>`` in the system's temp directory, one per user): the kernel drops it
when its process ends, however that happens, so a killed run never leaves the machine locked.
Next to it, each run writes a small file saying who it is (pid, what, since when), which a
waiting run shows.

The directory is where other users can reach (the temp directory is writable by all), so it is
used only when it is safe: a real directory (not a symlink) owned by this user and writable by
nobody else — created so (mode 0700) when it does not exist, refused with one line
(``UnsafeLockDir``) otherwise. Inside it, no file is ever opened through a symlink (``O_NOFOLLOW``)
and every note is written to a fresh file and renamed into place, so a link planted there can
neither redirect a write to another file nor be read as a note. One directory per user, because
a directory one user creates is one another user may not write: a shared one would lock every
other user out of their runs.

A user may force a run past the lock (``--no-wait``; ``force=True``). Then both runs are
disturbed, and both say so: every run — locked or forced — leaves a note of its interval in
the lock directory, and at its end each run looks for notes of other runs whose interval
overlapped its own and adds a warning naming them. Notes older than a day are removed.
"""
from __future__ import annotations

import fcntl
import json
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from latency.host.processes import pid_alive

LOCK_DIR_ENV = "LATENCY_LAB_LOCK_DIR"
#: how often a waiting run retries (and checks whether it was cancelled).
POLL_S = 0.2
#: notes of finished runs older than this are removed by the next run that looks.
NOTE_TTL_S = 24 * 3600.0
#: at most this many notes are read (a directory left to grow must not slow every run).
MAX_NOTES = 1000
#: a note is a few hundred bytes; a larger file in the directory is not one.
MAX_NOTE_BYTES = 64 * 1024


class UnsafeLockDir(OSError):
    """The lock directory is a symlink, not a directory, or not this user's alone."""


def lock_dir() -> Path:
    env = os.environ.get(LOCK_DIR_ENV)
    if env:
        return Path(env).expanduser()
    return Path(tempfile.gettempdir()) / f"latency-lab-lock-{os.geteuid()}"


def safe_dir(path: Path) -> Path:
    """``path`` as a directory only this user can write, created (0700) when missing; raises
    ``UnsafeLockDir`` naming what is wrong, so a run never writes where another user points."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    fix = f"remove it or set {LOCK_DIR_ENV} to a directory of your own"
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafeLockDir(f"the run lock's directory {path} is "
                            f"{'a symlink' if stat.S_ISLNK(st.st_mode) else 'not a directory'}"
                            f": refusing to use it ({fix})")
    if st.st_uid != os.geteuid():
        raise UnsafeLockDir(f"the run lock's directory {path} belongs to another user (uid "
                            f"{st.st_uid}): refusing to use it ({fix})")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeLockDir(f"the run lock's directory {path} is writable by other users "
                            f"(mode {stat.S_IMODE(st.st_mode):o}): refusing to use it ({fix})")
    return path


def _write(path: Path, text: str) -> None:
    """Write a fresh file and rename it over ``path``: a symlink at ``path`` is replaced, never
    followed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _read(path: Path) -> str:
    """A note's text, never through a symlink, at most ``MAX_NOTE_BYTES``."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path} is not a regular file")
        return os.read(fd, MAX_NOTE_BYTES).decode()
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) the machine: read from its note."""

    pid: int
    what: str
    started: float
    forced: bool = False
    ended: float | None = None

    def describe(self) -> str:
        since = time.strftime("%H:%M:%S", time.localtime(self.started))
        return f"{self.what} (pid {self.pid}, since {since})"


class MachineLock:
    """``with MachineLock("cli run image-cnn").hold(cancel, on_wait): ...``"""

    def __init__(self, what: str, force: bool = False, directory: Path | None = None) -> None:
        self.what = what
        self.force = force
        self.dir = directory or lock_dir()
        self._fd: int | None = None
        self._note: Path | None = None
        self._started = 0.0
        self.waited_s = 0.0

    # ---- acquiring ------------------------------------------------------------------------
    def acquire(self, cancel: threading.Event | None = None,
                on_wait: Callable[[Holder | None], None] | None = None) -> bool:
        """Take the lock (wait while another run holds it); False if ``cancel`` was set while
        waiting. With ``force``, never waits: returns True at once, lock or not."""
        safe_dir(self.dir)
        fd = os.open(self.dir / "run.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        t0 = time.monotonic()
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._fd = fd
                break
            except BlockingIOError:
                if self.force:
                    os.close(fd)
                    break
                if not told and on_wait is not None:
                    on_wait(self.holder())
                    told = True
                if cancel is not None and cancel.wait(POLL_S):
                    os.close(fd)
                    return False
                if cancel is None:
                    time.sleep(POLL_S)
        self.waited_s = time.monotonic() - t0
        self._started = time.time()
        self._note = self.dir / f"run-{os.getpid()}-{time.monotonic_ns()}.json"
        self._write_note(None)
        if self._fd is not None:
            _write(self.dir / "holder.json", _read(self._note))
        return True

    def release(self) -> list[str]:
        """Give the machine back; returns the warnings this run must carry (other runs that
        overlapped it)."""
        ended = time.time()
        warnings = self.overlaps(ended)
        if self._note is not None:
            self._write_note(ended)
            if self._fd is not None:  # still holding: nobody else can have written it
                (self.dir / "holder.json").unlink(missing_ok=True)
            self._note = None
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        return warnings

    @property
    def held(self) -> bool:
        """This run holds the machine's lock (False when forced past it)."""
        return self._fd is not None

    @property
    def acquired(self) -> bool:
        """``acquire`` returned True: the run may measure (holding the lock, or forced)."""
        return self._note is not None

    # ---- who else -------------------------------------------------------------------------
    def holder(self) -> Holder | None:
        """The run holding the machine now, from its note (None when free or unknown)."""
        try:
            holder = _holder(json.loads(_read(self.dir / "holder.json")))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return holder if holder.ended is None and pid_alive(holder.pid) else None

    def overlaps(self, until: float) -> list[str]:
        """Warnings for every other run whose interval overlapped ``[started, until]``."""
        out = []
        for path in sorted(self.dir.glob("run-*.json"))[:MAX_NOTES]:
            if path == self._note:
                continue
            try:
                other = _holder(json.loads(_read(path)))
            except (OSError, ValueError, KeyError, TypeError):
                continue
            end = other.ended if other.ended is not None else (
                until if pid_alive(other.pid) else other.started)
            if other.ended is not None and time.time() - other.ended > NOTE_TTL_S:
                path.unlink(missing_ok=True)
                continue
            if other.ended is None and not pid_alive(other.pid):  # died without a word
                path.unlink(missing_ok=True)
                continue
            if other.started < until and end > self._started:
                how = "forced past the lock" if other.forced or self.force else "at once"
                out.append(f"another run measured on this machine at the same time "
                           f"({other.describe()}, {how}): both runs' timings are disturbed")
        return out

    def _write_note(self, ended: float | None) -> None:
        assert self._note is not None
        data = {"pid": os.getpid(), "what": self.what, "started": self._started,
                "forced": self._fd is None, "ended": ended}
        _write(self._note, json.dumps(data))


def _holder(d: dict) -> Holder:
    return Holder(int(d["pid"]), str(d["what"]), float(d["started"]), bool(d.get("forced")),
                  None if d.get("ended") is None else float(d["ended"]))
