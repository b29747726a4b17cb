"""``--bodies FILE``: prebuilt HTTP request bodies, sent as they are (one JSON document a line).
"""
from __future__ import annotations

import json
from pathlib import Path

from latency.core.errors import ConfigError

#: the most bodies one file may hold (they are all kept in memory for the run).
MAX_BODIES = 1_000_000


def load_bodies(path: str, require_json: bool = True) -> list[bytes]:
    """The request bodies of a file, one a line, blank lines skipped: JSON documents (an OIP
    infer request each) unless ``require_json`` is False (a plain HTTP target's bodies, sent
    as they are). ConfigError names the first bad line."""
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read --bodies {path}: {exc.strerror}") from None
    bodies = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if require_json:
            try:
                json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise ConfigError(f"--bodies {path} line {i} is not JSON: {exc}") from None
        bodies.append(line.strip())
        if len(bodies) > MAX_BODIES:
            raise ConfigError(f"--bodies {path} has more than {MAX_BODIES} lines")
    if not bodies:
        raise ConfigError(f"--bodies {path} holds no request bodies")
    return bodies
