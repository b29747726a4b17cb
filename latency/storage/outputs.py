"""Writing an output file without ever destroying anything: checked first, written atomically.

Every file a command writes (``run --json/--csv``, ``simulate --json``, ``ab --json``,
``history export --out``, ``export --to``, ``new-pipeline``) goes through here:

- ``check_output`` runs *before* the work starts, and creates nothing: the path must not be the
  run history (or its ``-wal``/``-shm`` files) nor an input of the same command, must not be a
  directory, its directory must exist and be writable, and an existing file is overwritten
  only with ``--force``;
- ``write_atomic`` writes a temporary file in the same directory, flushes it to disk and
  renames it over the target, so a failure (disk full, Ctrl-C) leaves the old file or none —
  never a truncated or empty one. The new file gets the mode a plain ``open`` would give it
  (0666 less the umask), or the mode of the file it replaces.
- A path that is not a regular file is never replaced: a symlink is written through (the file
  it names is replaced atomically, the link stays), and a device or a pipe (``/dev/null``,
  ``/dev/stdout``) is written to as it is — renaming a file over ``/dev/null`` as root would
  replace the machine's ``/dev/null``. Such a path needs no ``--force``: nothing is lost.
"""
from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from latency.core.errors import ConfigError


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def check_output(path: str | Path, flag: str, *, force: bool = False,
                 history: str | Path | None = None,
                 inputs: Iterable[str | Path | None] = ()) -> Path:
    """The output ``path`` of ``flag`` (e.g. ``--json``) if it can be written without harm;
    ConfigError (one line) otherwise. Creates nothing."""
    p = Path(path).expanduser()
    if history is not None:
        db = Path(history).expanduser()
        for protected in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), Path(f"{db}-journal")):
            if _same(p, protected):
                raise ConfigError(f"{flag} {path} is the run history database: refusing to "
                                  "overwrite it (every saved run would be lost)")
    for source in inputs:
        if source is not None and _same(p, Path(source).expanduser()):
            raise ConfigError(f"{flag} {path} is also an input of this command: refusing to "
                              "overwrite it")
    if p.is_dir():
        raise ConfigError(f"cannot write {flag} {path}: it is a directory; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ConfigError(f"cannot write {flag} {path}: no directory {parent}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write {flag} {path}: the directory {parent} is not "
                          "writable")
    if p.exists() and not _regular(p.resolve()):
        if not os.access(p, os.W_OK):
            raise ConfigError(f"cannot write {flag} {path}: it is not writable")
        return p  # a device or a pipe: written to, never replaced
    if p.exists():
        if not force:
            raise ConfigError(f"{flag} {path} exists; add --force to overwrite it")
        if not os.access(p, os.W_OK):
            raise ConfigError(f"cannot write {flag} {path}: the file is not writable")
    return p


def _regular(p: Path) -> bool:
    """``p`` is a regular file, or nothing yet (a new file will be one)."""
    try:
        return stat.S_ISREG(os.stat(p).st_mode)
    except FileNotFoundError:
        return True


def _umask() -> int:
    """The process's umask, read without changing it (``os.umask`` sets it, racing threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_json_flag(path: str, value: Any, flag: str = "--json", indent: int = 1) -> None:
    """A command's ``--json`` written at once (``write_flag``)."""
    write_flag(path, json.dumps(value, indent=indent) + "\n", flag)


def write_flag(path: str, data: bytes | str, flag: str) -> None:
    """A command's output file written at once (``write_atomic``); a failure is one line
    (ConfigError), as every command says it."""
    try:
        write_atomic(path, data)
    except OSError as exc:
        raise ConfigError(f"cannot write {flag} {path}: {exc.strerror or exc}") from None


def write_atomic(path: str | Path, data: bytes | str) -> None:
    """Write ``data`` to ``path`` all at once: a temporary file beside it, flushed to disk,
    then renamed over it. OSError on failure, with nothing left behind. Through a symlink,
    the file it names is replaced; a device or a pipe is written to directly."""
    p = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if p.is_symlink():
        p = p.resolve()
    if not _regular(p):  # /dev/null, /dev/stdout, a FIFO: write, never replace
        with open(p, "wb") as f:
            f.write(raw)
        return
    try:
        mode = stat.S_IMODE(os.stat(p).st_mode)  # replacing a file keeps its mode
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".partial", dir=p.parent or ".")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
