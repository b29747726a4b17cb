"""How many cores this process may run on (no torch needed to ask)."""
from __future__ import annotations

import os


def usable_cores() -> int:
    """Cores this process may run on (affinity-aware)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def oversubscribed(replicas: int, threads: int) -> bool:
    """More intra-op threads across replicas than the machine has cores."""
    return replicas * threads > usable_cores()
