"""Writing an output file without ever destroying anything: checked first, written atomically.

Every file a command writes (``run --json/--csv``, ``simulate --json``, ``ab --json``,
``history export --out``, ``export --to``, ``new-pipeline``) goes through here:

- ``check_output`` runs *before* the work starts, and creates nothing: the path must not be the
  run history (or its ``-wal``/``-shm`` files) nor an input of the same command, must not be a
  directory, its directory must exist and be writable, and an existing file is overwritten
  only with ``--force``;
- ``write_atomic`` writes a temporary file in the same directory, flushes it to disk and
  renames it over the target, so a failure (disk full, Ctrl-C) leaves the old file or none —
  never a truncated or empty one.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

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
    if p.exists():
        if not force:
            raise ConfigError(f"{flag} {path} exists; add --force to overwrite it")
        if not os.access(p, os.W_OK):
            raise ConfigError(f"cannot write {flag} {path}: the file is not writable")
    return p


def write_atomic(path: str | Path, data: bytes | str) -> None:
    """Write ``data`` to ``path`` all at once: a temporary file beside it, flushed to disk,
    then renamed over it. OSError on failure, with nothing left behind."""
    p = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".partial", dir=p.parent or ".")
    try:
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
