"""Statistics of latency samples: percentiles with distribution-free intervals, log-binned
histograms, per-second series and the component make-up of the tail.

Rules (docs/method.md): never trim outliers; report a 95% confidence interval for p99 from
order statistics (no distribution assumed) and say when there are too few samples for one.

Requests that queue are not independent: one slow request delays every request behind it, so
slow requests come in clusters and a run of N requests pins its p99 down no better than N/τ
independent ones would (τ ≈ 8 at utilisation 0.5, ≈ 27 at 0.7 for M/M/1). The binomial
order-statistic interval assumes independence and covers the true p99 of a queue as little as
~30 % of the time. So the p99 interval here is the order-statistic interval with its rank
spread measured, not assumed: the variance of the share of requests below the estimated p99 is
estimated by batch means over ``CI_BATCHES`` consecutive stretches of the run (the clusters
stay inside a stretch), and the interval is given only when the run is worth at least
``MIN_EFFECTIVE_FOR_P99`` independent requests. Coverage is checked on simulated M/M/1 runs of
known p99 (``tests/test_stats.py``).
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from scipy.stats import binom
from scipy.stats import t as student_t

from latency.core import fmt

#: the percentiles every summary reports, by key.
PERCENTILES: dict[str, float] = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0,
                                 "p999": 99.9}
#: histogram bin edges in ms: 1 µs to 100 s, 20 log-spaced bins per decade. Fixed edges make
#: histograms of different runs (and of successive snapshots) directly comparable.
BINS_PER_DECADE = 20
HIST_EDGES_MS: np.ndarray = 10.0 ** np.linspace(-3, 5, 8 * BINS_PER_DECADE + 1)


def quantile_ci(sorted_values: np.ndarray, q: float, confidence: float = 0.95
                ) -> tuple[float, float] | None:
    """Distribution-free confidence interval for the ``q``-quantile (0<q<1) of sorted samples.

    The number of samples below the true quantile is Binomial(n, q); the interval runs from the
    order statistic of rank ``binom.ppf(α/2)`` to that of rank ``binom.ppf(1-α/2) + 1``, which
    covers the quantile with probability ≥ ``confidence``. Returns None when n is too small for
    the upper rank to exist (e.g. fewer than ~370 samples for p99).
    """
    n = len(sorted_values)
    if n == 0:
        return None
    alpha = 1.0 - confidence
    lo_rank = int(binom.ppf(alpha / 2, n, q))  # 1-based rank of the lower bound
    hi_rank = int(binom.ppf(1 - alpha / 2, n, q)) + 1
    if lo_rank < 1 or hi_rank > n:
        return None
    return float(sorted_values[lo_rank - 1]), float(sorted_values[hi_rank - 1])


#: consecutive stretches the batch-means variance of the p99 interval is estimated from
CI_BATCHES = 20
#: the p99 interval is reported only when the run is worth this many independent requests
#: (below it the batch-means variance itself is too unsure: coverage falls to ~80-90 %)
MIN_EFFECTIVE_FOR_P99 = 1000


@dataclass(frozen=True)
class QuantileSpread:
    """How well a run pins down its p99: the interval's ranks (0-based, None when it cannot
    be given) and the run's worth in independent requests (``effective_n`` = n / τ)."""

    n: int
    effective_n: float
    ranks: tuple[int, int] | None


def quantile_spread(values: np.ndarray, estimate: float, q: float = 0.99,
                    confidence: float = 0.95) -> QuantileSpread:
    """Batch-means spread of the ``q``-quantile of ``values`` (in time order), around its
    ``estimate``: the share of values at or below it is averaged over ``CI_BATCHES``
    consecutive stretches; the spread of those shares (Student's t on the stretches) gives a
    rank interval around ``n·q``, and its ratio to the binomial spread is τ."""
    n = len(values)
    b = n // CI_BATCHES
    if b < 1:
        return QuantileSpread(n, float(n), None)
    below = (values[: b * CI_BATCHES] <= estimate).reshape(CI_BATCHES, b).mean(axis=1)
    var_share = float(below.var(ddof=1)) / CI_BATCHES  # variance of the run's share
    tau = max(1.0, var_share * n / (q * (1 - q)))
    effective = n / tau
    half = float(student_t.ppf(0.5 + confidence / 2, CI_BATCHES - 1)) * np.sqrt(
        max(var_share, q * (1 - q) / n))  # never narrower than independent requests allow
    lo, hi = int(np.floor(n * (q - half))), int(np.ceil(n * (q + half)))
    if effective < MIN_EFFECTIVE_FOR_P99 or lo < 1 or hi > n:
        return QuantileSpread(n, effective, None)
    return QuantileSpread(n, effective, (lo - 1, hi - 1))


def missing_interval_reason(spread: QuantileSpread, what: str = "") -> str | None:
    """Why a run has no p99 interval, in one sentence (None when it has one)."""
    if spread.ranks is not None:
        return None
    if spread.n < MIN_EFFECTIVE_FOR_P99:
        return (f"only {spread.n:,} successful requests{what}: too few for a p99 confidence "
                f"interval (need ≥ {MIN_EFFECTIVE_FOR_P99:,}); run longer for a trustworthy "
                "tail")
    return (f"no p99 confidence interval{what}: slow requests came in clusters (a queue: each "
            f"delays those behind it), so these {spread.n:,} requests pin the p99 down only as "
            f"well as ~{spread.effective_n:,.0f} independent ones would (need ≥ "
            f"{MIN_EFFECTIVE_FOR_P99:,}); run about "
            f"{math.ceil(MIN_EFFECTIVE_FOR_P99 / max(spread.effective_n, 1.0))}× longer for a "
            "trustworthy tail")


def interval_note(values_ns: np.ndarray, stats: LatencyStats, what: str = "") -> str | None:
    """Why ``stats`` (``describe_ms`` of ``values_ns``) has no p99 interval; None when it has
    one."""
    if stats.p99_ci95 is not None:
        return None
    return missing_interval_reason(quantile_spread(values_ns, (stats.p99 or 0.0) * 1e6), what)


def _linear_positions(n: int, qs: list[float]) -> list[tuple[int, int, float]]:
    """numpy's default ('linear') percentile as (lower index, upper index, weight) triples."""
    out = []
    for q in qs:
        pos = q / 100.0 * (n - 1)
        lo = int(np.floor(pos))
        out.append((lo, min(lo + 1, n - 1), pos - lo))
    return out


@dataclass(frozen=True)
class LatencyStats:
    """mean, p50…p99.9 and max of one quantity, in ms, with the p99's 95 % interval.

    A value that prints itself (``p50 1.23 ms · p99 4.56 ms [4.1, 5.2] · max 9.87 ms``). Every
    field is None when there were no samples. ``has_ci`` says whether the interval was asked
    for (the JSON then carries ``p99_ci95``, None when too few samples): warm-up and the
    emulated WAN delay are described without one.
    """

    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    p999: float | None = None
    max: float | None = None
    p99_ci95: tuple[float, float] | None = None
    has_ci: bool = field(default=True, compare=False)

    #: the statistics in the order every table shows them
    KEYS: ClassVar[tuple[str, ...]] = ("mean", *PERCENTILES, "max")

    def get(self, key: str) -> float | None:
        """A statistic by its key ('mean', 'p50', …, 'max')."""
        if key not in self.KEYS:
            raise KeyError(key)
        return getattr(self, key)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {k: getattr(self, k) for k in self.KEYS}
        if self.has_ci:
            d["p99_ci95"] = list(self.p99_ci95) if self.p99_ci95 is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> LatencyStats:
        d = d or {}
        ci = d.get("p99_ci95")
        return cls(**{k: d.get(k) for k in cls.KEYS},
                   p99_ci95=(float(ci[0]), float(ci[1])) if ci else None,
                   has_ci="p99_ci95" in d)

    def __repr__(self) -> str:
        if self.p50 is None:
            return "LatencyStats(no samples)"
        ci = (f" [{fmt.ms(self.p99_ci95[0])}, {fmt.ms(self.p99_ci95[1])}]"
              if self.p99_ci95 else "")
        return (f"LatencyStats(mean {fmt.ms(self.mean)} · p50 {fmt.ms(self.p50)} · p99 "
                f"{fmt.ms(self.p99)}{ci} · max {fmt.ms(self.max)} ms)")


def describe_ms(values_ns: np.ndarray, with_ci: bool = True) -> LatencyStats:
    """mean, p50…p999, max (and the p99 95% interval) of durations given in ns, in ms.

    ``values_ns`` in the order the requests were made: the p99 interval measures how the slow
    ones cluster in time (``quantile_spread``). One ``np.partition`` on the few order
    statistics needed instead of a full sort: O(n), so a 200,000-request snapshot stays cheap.
    Same values as ``np.percentile`` (linear).
    """
    n = len(values_ns)
    if n == 0:
        return LatencyStats(has_ci=with_ci)
    positions = _linear_positions(n, list(PERCENTILES.values()))
    kth = sorted({n - 1} | {i for lo, hi, _ in positions for i in (lo, hi)})
    part = np.partition(values_ns, kth)
    ms = lambda i: float(part[i]) / 1e6  # noqa: E731
    pct = {key: ms(lo) + w * (ms(hi) - ms(lo)) for key, (lo, hi, w) in zip(PERCENTILES, positions)}
    ci = None
    if with_ci:
        ranks = quantile_spread(values_ns, pct["p99"] * 1e6).ranks
        if ranks:
            ci = (_select(part, kth, ranks[0]) / 1e6, _select(part, kth, ranks[1]) / 1e6)
    return LatencyStats(mean=float(values_ns.mean()) / 1e6, **pct, max=ms(n - 1),
                        p99_ci95=ci, has_ci=with_ci)


def _select(part: np.ndarray, kth: list[int], rank: int) -> float:
    """The ``rank``-th smallest of an array already partitioned at the sorted ranks ``kth``:
    only the stretch between the two pivots around it needs partitioning (a few % of it)."""
    i = bisect.bisect_left(kth, rank)
    if i < len(kth) and kth[i] == rank:
        return float(part[rank])
    start = kth[i - 1] + 1 if i else 0
    end = kth[i] if i < len(kth) else len(part)
    return float(np.partition(part[start:end], rank - start)[rank - start])


def histogram_ms(values_ms: np.ndarray) -> np.ndarray:
    """Counts of ``values_ms`` in the fixed log bins ``HIST_EDGES_MS`` (clipped into range)."""
    clipped = np.clip(values_ms, HIST_EDGES_MS[0], HIST_EDGES_MS[-1] * 0.999999)
    counts, _ = np.histogram(clipped, bins=HIST_EDGES_MS)
    return counts


def per_second_series(t_done_s: np.ndarray, total_ms: np.ndarray,
                      end_s: float | None = None) -> dict[str, list[float]]:
    """Throughput (completions/s) and p50/p99 of the requests completed in each whole second.

    ``t_done_s`` are completion times in seconds since the start of measurement; ``end_s`` is
    when observation stopped. The last second is usually cut short: its throughput is its
    count divided by the part of the second observed (not a false dip). A second with no
    completion shows throughput 0 and no percentile (None), never an invented value.
    """
    if len(t_done_s) == 0:
        return {"t_s": [], "throughput_rps": [], "p50_ms": [], "p99_ms": []}
    sec = np.floor(t_done_s).astype(np.int64)
    sec = np.clip(sec, 0, None)
    n_sec = int(sec.max()) + 1
    order = np.argsort(sec, kind="stable")
    sec_sorted, tot_sorted = sec[order], total_ms[order]
    bounds = np.searchsorted(sec_sorted, np.arange(n_sec + 1))
    p50: list[float | None] = []
    p99: list[float | None] = []
    counts = np.diff(bounds)
    for i in range(n_sec):
        chunk = tot_sorted[bounds[i]: bounds[i + 1]]
        if len(chunk):
            a, b = np.percentile(chunk, [50, 99])
            p50.append(float(a))
            p99.append(float(b))
        else:
            p50.append(None)
            p99.append(None)
    rates = [float(c) for c in counts]
    if end_s is not None:
        observed = end_s - (n_sec - 1)
        if 0.05 < observed < 1.0:
            rates[-1] = float(counts[-1] / observed)
        elif observed <= 0.05:  # too short a sliver to rate: leave it out
            rates, p50, p99, n_sec = rates[:-1], p50[:-1], p99[:-1], n_sec - 1
    return {"t_s": [float(i + 1) for i in range(n_sec)],
            "throughput_rps": rates, "p50_ms": p50, "p99_ms": p99}


def tail_makeup_ms(components_ms: dict[str, np.ndarray], total_ms: np.ndarray, q: float,
                   window: float | None = None, min_samples: int = 5,
                   order: np.ndarray | None = None) -> dict[str, float]:
    """The component make-up of the requests *around* the ``q``-quantile of the total.

    Per-component percentiles do not add up (the p99 request is rarely p99 in every part), so
    the p99 bar instead shows the mean components of the requests whose total lies within
    ``window`` quantile points of p99 (at least ``min_samples`` nearest requests), scaled so the
    segments sum to the quantile itself. That is what makes the tail slow.
    """
    n = len(total_ms)
    if n == 0:
        return {k: 0.0 for k in components_ms}
    if window is None:
        window = min(0.005, (1 - q) / 2) if q > 0.5 else 0.005
    if order is None:
        order = np.argsort(total_ms, kind="stable")
    lo = int(np.floor((q - window) * (n - 1)))
    hi = int(np.ceil((q + window) * (n - 1)))
    centre = int(round(q * (n - 1)))
    if hi - lo + 1 < min_samples:
        lo, hi = centre - min_samples // 2, centre + min_samples // 2
    lo, hi = max(lo, 0), min(hi, n - 1)
    idx = order[lo: hi + 1]
    means = {k: float(v[idx].mean()) for k, v in components_ms.items()}
    pos = q * (n - 1)  # the q-quantile (numpy's linear rule) read off the sorted totals
    a, b = total_ms[order[int(np.floor(pos))]], total_ms[order[min(int(np.floor(pos)) + 1, n - 1)]]
    target = float(a + (pos - np.floor(pos)) * (b - a))
    s = sum(means.values())
    scale = target / s if s > 0 else 0.0
    return {k: v * scale for k, v in means.items()}
