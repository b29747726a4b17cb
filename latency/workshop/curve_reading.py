"""Reading a measured curve whose true shape is known to be monotone: a p99 cannot fall as
the load rises, a share meeting targets cannot rise — so a step the wrong way is noise, pooled
with its neighbour rather than read as capacity (the targets and goodput lessons)."""
from __future__ import annotations

from collections.abc import Sequence


def monotone(values: Sequence[float]) -> list[float]:
    """The closest non-decreasing sequence (pool adjacent violators): a p99 cannot fall as
    the load rises, so a dip is noise — pooled with its neighbour, not read as capacity."""
    blocks: list[list[float]] = []  # [sum, count]
    for v in values:
        blocks.append([float(v), 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, n = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += n
    return [b[0] / b[1] for b in blocks for _ in range(int(b[1]))]


__all__ = ["monotone"]
