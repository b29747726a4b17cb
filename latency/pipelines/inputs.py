"""``--inputs``: your own raw inputs, as a client would send them.

- a **directory**: one input per regular file (not recursive, hidden files skipped), its bytes,
  in file-name order — real JPEGs for an image model, for instance;
- a **JSON-lines file** (``.jsonl``/``.ndjson``): one JSON value per line — a string stays a
  string, an object arrives as a dict;
- a **JSON file** (``.json``) holding an array: one input per element (ShareGPT's
  conversations ship so);
- any other **text file**: one input per line (a string), blank lines skipped.

The inputs are read once, before the run measures anything, so reading them costs the
requests nothing (``bench/bench_inputs.py``). The load generator cycles through them in order,
or shuffled (seeded) with ``input_order="shuffle"``. Bounded: at most ``MAX_INPUTS`` inputs and
``MAX_BYTES`` in all.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from latency.core.errors import ConfigError

MAX_INPUTS = 100_000
MAX_BYTES = 1 << 30  # 1 GiB
JSONL_SUFFIXES = (".jsonl", ".ndjson")


def _kind(path: Path) -> str:
    if path.is_dir():
        return "directory"
    suffix = path.suffix.lower()
    return "jsonl" if suffix in JSONL_SUFFIXES else "json" if suffix == ".json" else "text"


def _files(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))


def check_inputs(where: str, flag: str = "--inputs",
                 check: Callable[[list[Any]], object] | None = None) -> str:
    """The absolute path of an ``--inputs`` source that exists, is not empty, is within the
    bounds and reads as inputs; ConfigError (one line) otherwise — before anything runs, so bad
    content costs no run (and leaves no failed run in the history). A text or JSON-lines file
    is parsed here; each file of a directory is opened and its first byte read. ``flag``: the
    option that named it (``--prompts`` takes the same checks and bounds); ``check``: what
    the items must be besides (ConfigError otherwise), run on the same parse."""
    path = Path(where).expanduser()
    if not path.exists():
        raise ConfigError(f"{flag} {where}: no such file or directory")
    path = path.resolve()
    if not path.is_dir() and not path.is_file():  # a device (/dev/zero), a FIFO, a socket
        raise ConfigError(f"{flag} {where}: not a regular file or a directory (a device or "
                          "a pipe has no end a run could wait for)")
    if path.is_dir():
        files = _files(path)
        if not files:
            raise ConfigError(f"{flag} {where}: the directory holds no files")
        if len(files) > MAX_INPUTS:
            raise ConfigError(f"{flag} {where}: {len(files):,} files, more than the "
                              f"{MAX_INPUTS:,} a run holds in memory")
        size = sum(p.stat().st_size for p in files)
    else:
        size = path.stat().st_size
        if size == 0:
            raise ConfigError(f"{flag} {where}: the file is empty")
    if size > MAX_BYTES:
        raise ConfigError(f"{flag} {where}: {size / 2**20:,.0f} MiB, more than the "
                          f"{MAX_BYTES / 2**20:,.0f} MiB a run holds in memory")
    if path.is_dir():
        if check is not None:
            check(read_inputs(str(path), flag=flag))
        for f in files:
            try:
                with open(f, "rb") as fh:
                    fh.read(1)
            except OSError as exc:
                raise ConfigError(f"{flag} {where}: cannot read {f.name} "
                                  f"({exc.strerror or exc})") from None
    else:
        key = (str(path), size, path.stat().st_mtime_ns, getattr(check, "__name__", None))
        if key not in _PARSED_OK:  # a run validates twice (caller, engine): parse once
            items = _parsed(path, where, flag)
            if check is not None:
                check(items)
            if len(_PARSED_OK) >= 256:  # a long-lived server: forget, never grow
                _PARSED_OK.clear()
            _PARSED_OK.add(key)
    return str(path)


#: text/JSON-lines inputs this process already parsed without fault, by (path, size, mtime):
#: the same unchanged file is not read again only to be checked (at most 256 entries)
_PARSED_OK: set[tuple[str, int, int, str | None]] = set()


def _parsed(path: Path, where: str, flag: str = "--inputs") -> list[Any]:
    """The inputs of a text or JSON-lines file; ConfigError naming the first bad line."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{flag} {where}: not UTF-8 text ({exc.reason}); a directory "
                          "of files sends each file's bytes") from None
    except OSError as exc:
        raise ConfigError(f"{flag} {where}: cannot read it ({exc.strerror or exc})") from None
    lines = [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    items: list[Any]
    if _kind(path) == "json":
        try:
            whole = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{flag} {where} is not JSON: {exc}") from None
        except RecursionError:
            raise ConfigError(f"{flag} {where} is JSON nested too deeply") from None
        if not isinstance(whole, list):
            raise ConfigError(f"{flag} {where}: a .json file must hold an array, one input "
                              f"an element (got {type(whole).__name__}; one a line: .jsonl)")
        items = whole
    elif _kind(path) == "jsonl":
        items = []
        for i, line in lines:
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{flag} {where} line {i} is not JSON: {exc}") from None
            except RecursionError:
                raise ConfigError(f"{flag} {where} line {i} is JSON nested too deeply") \
                    from None
    else:
        items = [line for _, line in lines]
    if len(items) > MAX_INPUTS:
        raise ConfigError(f"{flag} {where}: {len(items):,} inputs, more than "
                          f"{MAX_INPUTS:,}")
    if not items:
        raise ConfigError(f"{flag} {where}: no inputs in it (only blank lines)")
    return items


def read_inputs(where: str, order: str = "in-order", seed: int = 0,
                flag: str = "--inputs") -> list[Any]:
    """Every input of ``where`` (see the module docstring), in order or shuffled."""
    path = Path(where).expanduser().resolve()
    items: list[Any]
    if _kind(path) == "directory":
        try:
            items = [p.read_bytes() for p in _files(path)]
        except OSError as exc:
            raise ConfigError(f"{flag} {where}: {exc.strerror or exc}") from None
        if not items:
            raise ConfigError(f"{flag} {where}: the directory holds no files")
    else:
        items = _parsed(path, where, flag)
    if order == "shuffle":
        perm = np.random.default_rng(seed).permutation(len(items))
        items = [items[i] for i in perm]
    return items


def describe(where: str) -> str:
    """'412 files in images/' or '2,000 lines of reviews.jsonl'."""
    path = Path(where)
    if path.is_dir():
        return f"{len(_files(path)):,} files in {path.name}/"
    return f"{path.name} ({_kind(path)})"
