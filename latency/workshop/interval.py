"""How sure an A/B's end-to-end change is: its 95 % interval over the A/B's pairs.

An A/B's blocks come in pairs (A B, B A, …; both blocks of a pair share a seed and follow
each other in time). On a shared machine whole blocks scatter — a neighbour's job slows one
block's requests two- or threefold — so the requests of one block are not independent of each
other, and an interval from the pooled requests alone would be far too narrow. The interval
here resamples at both levels (a two-stage bootstrap): the pairs, with replacement, then each
chosen block's requests, with replacement; each resample pools its blocks per arm as the A/B
does and takes B's quantile against A's. A handful of pairs estimates its own scatter poorly
(with two, the bootstrap has three distinct resamples and signed a change of ≈ −1 % as
"−22 % to −1.4 %"), so the bootstrap's spread is widened as a t-interval's would be, on the
log of the ratio: × √(P/(P−1)) · t(P−1)/z for P pairs (1.9× for four) — and below
``MIN_PAIRS`` there is no interval at all. Wide is the honest answer: when it holds both
signs, the runs cannot tell whether B is faster or slower end to end, and the page says so
instead of printing a headline figure alone.

(It reads the blocks' own results, which ``latency.analysis.ab.ABResult`` does not keep per
block; the pooled figure it is centred on is the headline's.)
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t

from latency.analysis.result import RunResult
from latency.core import fmt
from latency.core.records import component_ns, measured_and_ok

CONFIDENCE = 0.95
#: fewer pairs than this: no interval (two pairs cannot say how pairs scatter)
MIN_PAIRS = 3
#: bootstrap resamples: the interval's ends move by well under a percentage point between
#: seeds at this count (the blocks' scatter is what makes it wide)
RESAMPLES = 2000


@dataclass(frozen=True)
class ChangeInterval:
    """B's change of an end-to-end quantile against A's (fractions: −0.1 = 10 % less), pooled
    over ``pairs`` complete pairs, and its interval."""

    quantile: float
    change: float
    low: float
    high: float
    pairs: int
    confidence: float = CONFIDENCE

    @property
    def name(self) -> str:
        return f"p{self.quantile * 100:g}"

    @property
    def sign_known(self) -> bool:
        """Whether the interval excludes no change: the runs tell faster from slower."""
        return self.low > 0 or self.high < 0

    def verdict(self) -> str:
        if self.high < 0:
            return "B is faster end to end"
        if self.low > 0:
            return "B is slower end to end"
        return ("the interval holds both signs: these runs cannot tell whether B is faster or "
                "slower end to end")

    def span(self) -> str:
        return f"{fmt.change(self.low)} to {fmt.change(self.high)}"

    def text(self) -> str:
        """'end-to-end p50 +6.7% (95% interval over 4 pairs: −42% to +53%): the interval
        holds both signs: …'"""
        return (f"end-to-end {self.name} {fmt.change(self.change)} "
                f"({self.confidence:.0%} interval over {self.pairs} pairs: {self.span()}): "
                f"{self.verdict()}")


def _block_totals(result: RunResult) -> np.ndarray:
    """End-to-end latency (ms) of every measured, successful request of one block."""
    _, ok = measured_and_ok(result.log)
    return component_ns(ok)["total"] / 1e6 if len(ok) else np.zeros(0)


def pairs_of(blocks: Sequence[tuple[str, RunResult]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(A's latencies, B's latencies) of each complete pair, in run order: the blocks of a
    pair share a seed (``ABPlan.blocks``); a pair whose other block failed or measured
    nothing is left out."""
    by_seed: dict[int, dict[str, np.ndarray]] = {}
    for arm, r in blocks:
        if r.status == "failed":
            continue
        values = _block_totals(r)
        if len(values):
            by_seed.setdefault(int(r.config.seed), {})[arm] = values
    return [(p["A"], p["B"]) for p in by_seed.values() if "A" in p and "B" in p]


def change_interval(blocks: Sequence[tuple[str, RunResult]], quantile: float = 0.5,
                    confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                    seed: int = 0) -> ChangeInterval | None:
    """The interval of B's change of the end-to-end ``quantile`` against A's, from the A/B's
    finished blocks ((arm, result) in run order, as ``merge`` takes them). None with fewer
    than ``MIN_PAIRS`` complete pairs. Deterministic for a given ``seed`` (every viewer sees
    the same interval)."""
    pairs = pairs_of(blocks)
    if len(pairs) < MIN_PAIRS:
        return None
    q = quantile * 100
    change = float(np.percentile(np.concatenate([b for _, b in pairs]), q)
                   / np.percentile(np.concatenate([a for a, _ in pairs]), q) - 1.0)
    rng = np.random.default_rng(seed)
    n = len(pairs)
    out = np.empty(resamples)
    for i in range(resamples):
        chosen = [pairs[j] for j in rng.integers(0, n, n)]
        a = np.concatenate([rng.choice(pa, len(pa)) for pa, _ in chosen])
        b = np.concatenate([rng.choice(pb, len(pb)) for _, pb in chosen])
        out[i] = np.percentile(b, q) / np.percentile(a, q) - 1.0
    tail = (1 - confidence) / 2
    low, high = np.log1p(np.percentile(out, [tail * 100, 100 - tail * 100]))
    centre = np.log1p(change)
    widen = np.sqrt(n / (n - 1)) * student_t.ppf(1 - tail, n - 1) / norm.ppf(1 - tail)
    low, high = (np.expm1(centre + widen * min(low - centre, 0.0)),
                 np.expm1(centre + widen * max(high - centre, 0.0)))
    return ChangeInterval(quantile, change, float(low), float(high), n, confidence)


__all__ = ["CONFIDENCE", "MIN_PAIRS", "RESAMPLES", "ChangeInterval", "change_interval", "pairs_of"]
