"""Little's law checked on a measured run: L = λW, each side measured its own way.

- **L, sampled**: how many requests are in the system (intended send ≤ t < reply), counted at
  ``SAMPLES`` evenly spaced instants of the measured window and averaged — what a gauge of
  the server's occupancy would read.
- **λW**: the measured throughput (requests finished per second in the window) times the
  measured mean latency (intended send → reply).

They agree for any stable system without assuming anything about arrivals or service; a gap
beyond sampling noise means the window is not steady (a queue still growing, a run stopped
mid-burst). The lesson on queueing shows both; ``tests/test_course.py`` checks them within
10 % on real runs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from latency.core.records import STATUS_OK

SAMPLES = 2000


@dataclass(frozen=True)
class LittlesLaw:
    """Both sides of L = λW for one run's measured window."""

    l_sampled: float
    throughput_rps: float
    mean_latency_ms: float
    window_s: float
    samples: int

    @property
    def l_predicted(self) -> float:
        """λW: requests per second × mean seconds in the system."""
        return self.throughput_rps * self.mean_latency_ms / 1000.0

    @property
    def relative_gap(self) -> float:
        """|L − λW| / λW (0 when both are 0)."""
        predicted = self.l_predicted
        return abs(self.l_sampled - predicted) / predicted if predicted else 0.0

    def __repr__(self) -> str:
        return (f"Little's law: L sampled {self.l_sampled:.2f} requests in the system; λW = "
                f"{self.throughput_rps:.1f} req/s × {self.mean_latency_ms:.2f} ms = "
                f"{self.l_predicted:.2f} (gap {self.relative_gap:.1%}, {self.samples} samples "
                f"over {self.window_s:.1f} s)")


def littles_law(rows: np.ndarray, samples: int = SAMPLES) -> LittlesLaw | None:
    """Both sides of Little's law over the middle of a run's measured window (its first and
    last tenth left out: requests begun before the window or ending after it would count on
    one side only). None when the run has too few successful measured requests (< 50)."""
    ok = rows[(rows["status"] == STATUS_OK) & ~rows["warmup"]]
    if len(ok) < 50:
        return None
    start = ok["t_intended"].astype(np.int64)
    end = ok["t_done"].astype(np.int64)
    lo, hi = int(start.min()), int(end.max())
    span = hi - lo
    w0, w1 = lo + span // 10, hi - span // 10
    if w1 <= w0:
        return None
    window_s = (w1 - w0) / 1e9
    instants = np.linspace(w0, w1, samples, endpoint=False)
    order_s, order_e = np.sort(start), np.sort(end)
    in_system = (np.searchsorted(order_s, instants, side="right")
                 - np.searchsorted(order_e, instants, side="right"))
    finished = (end >= w0) & (end < w1)
    throughput = float(finished.sum()) / window_s
    inside = (start >= w0) & (start < w1)  # requests that arrived in the window
    mean_ms = float(np.mean(end[inside] - start[inside])) / 1e6 if inside.any() else 0.0
    return LittlesLaw(float(in_system.mean()), throughput, mean_ms, window_s, samples)


__all__ = ["LittlesLaw", "littles_law"]
