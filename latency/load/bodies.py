"""``--bodies FILE``: prebuilt HTTP request bodies, sent as they are (one JSON document a line).
"""
from __future__ import annotations

import json
from pathlib import Path

from latency.core.errors import ConfigError

#: the most bodies one file may hold (they are all kept in memory for the run).
MAX_BODIES = 1_000_000


def load_bodies(path: str) -> list[bytes]:
    """The request bodies of a JSON-lines file: one JSON document (an OIP infer request) a
    line, blank lines skipped. ConfigError names the first bad line."""
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read --bodies {path}: {exc.strerror}") from None
    bodies = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
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
