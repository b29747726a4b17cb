"""A/B runs, analysed: each arm's blocks pooled, and the headline comparing the arms.

The plan, why its blocks are interleaved, and how they run: ``latency.execution.ab``.

The merged arms pool their blocks' measured requests. The headline compares what a person
would otherwise compare by hand — "forward −X% → end-to-end p50 −Y%, p99 −Z%" — and explains
the gap with Amdahl's law: a component that was a share *s* of the total can change the total
by at most *s* times its own change.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from latency.analysis.result import RunResult
from latency.analysis.snapshot import MAKEUP_POINTS, QUANTILE_GRID
from latency.analysis.stats import LatencyStats, describe_ms, tail_makeup_ms
from latency.analysis.summary import MIN_FOR_P99
from latency.core import fmt
from latency.core.optimization import lever_summary
from latency.core.records import COMPONENTS, component_ns, measured_and_ok

ARMS = ("A", "B")
#: serving settings an arm may change besides levers, as the arm's label names them.
SETTING_NAMES = {"replicas": "replicas", "threads": "threads", "batch_size": "batch ≤",
                 "max_batch_delay_ms": "batch delay ms", "preprocess_workers": "pre workers",
                 "concurrency": "clients", "rate": "req/s", "device": "on", "dtype": "dtype"}


@dataclass
class ArmStats:
    """One arm's blocks pooled: latency and components of every measured, successful request."""

    arm: str
    label: str
    config: dict[str, Any]
    blocks: int
    requests: int
    errors: int
    throughput_rps: float
    latency_ms: LatencyStats
    components_ms: dict[str, LatencyStats]
    makeup_ms: dict[str, dict[str, float]]
    quantiles_ms: list[float]
    block_p50_ms: list[float]
    optimization: dict[str, Any] | None
    warnings: list[str] = field(default_factory=list)
    rows: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("rows")
        d["latency_ms"] = self.latency_ms.to_dict()
        d["components_ms"] = {c: s.to_dict() for c, s in self.components_ms.items()}
        return d


def arm_stats(arm: str, results: Sequence[RunResult]) -> ArmStats:
    """Pool one arm's block results (each block's warm-up already excluded)."""
    if not results:
        raise ValueError(f"arm {arm} has no finished blocks")
    oks, errors, seconds, block_p50, warnings = [], 0, 0.0, [], []
    next_batch = next_replica = 0
    for r in results:
        measured, ok = measured_and_ok(r.log)
        ok = ok.copy()
        if len(ok):  # every block is its own server: batch and replica ids restart in each,
            # so renumber them to stay distinct in the pool (the simulator reads per-batch
            # forward times and per-replica turnarounds from these ids)
            ok["batch_id"] += next_batch - int(ok["batch_id"].min())
            next_batch = int(ok["batch_id"].max()) + 1
            ok["replica"] += next_replica - int(ok["replica"].min())
            next_replica = int(ok["replica"].max()) + 1
        oks.append(ok)
        errors += len(measured) - len(ok)
        s = r.summary
        seconds += s.duration_s
        if len(ok):
            block_p50.append(float(s.latency_ms.p50))
        warnings += [w for w in s.warnings if w not in warnings
                     and w.kind != "too_few"]  # judged on the pool below, not per block
        if r.failure:
            warnings.append(f"a block failed: {r.failure}")
    rows = np.concatenate(oks) if oks else np.zeros(0)
    if len(rows) == 0:
        raise ValueError(f"arm {arm} has no successful measured requests")
    if len(rows) < MIN_FOR_P99:  # judged on the pool, not block by block
        warnings.append(f"only {len(rows)} successful requests in this arm: too few for a p99 "
                        f"confidence interval (need ≥ {MIN_FOR_P99}); use longer blocks or "
                        "more pairs for a trustworthy tail")
    comps = component_ns(rows)
    total_ms = comps["total"] / 1e6
    comps_ms = {c: comps[c] / 1e6 for c in COMPONENTS}
    order = np.argsort(total_ms, kind="stable")
    makeup = {name: ({c: float(v.mean()) for c, v in comps_ms.items()} if q is None else
                     tail_makeup_ms(comps_ms, total_ms, q, order=order))
              for name, q in MAKEUP_POINTS.items()}
    sorted_total = total_ms[order]
    quantiles = np.interp(QUANTILE_GRID * (len(sorted_total) - 1), np.arange(len(sorted_total)),
                          sorted_total)
    cfg = results[0].config
    return ArmStats(
        arm=arm, label=lever_summary(cfg.get("optimize") or [], cfg.get("pre", "fast"),
                                     cfg.get("post", "fast")),
        config=cfg, blocks=len(results), requests=int(len(rows)), errors=errors,
        throughput_rps=len(rows) / seconds if seconds else 0.0,
        latency_ms=describe_ms(comps["total"]),
        components_ms={c: describe_ms(comps[c], with_ci=False) for c in COMPONENTS},
        makeup_ms=makeup, quantiles_ms=[float(v) for v in quantiles], block_p50_ms=block_p50,
        optimization=results[0].environment.get("optimization"), warnings=warnings, rows=rows)


def _change(a: float, b: float) -> float:
    return (b - a) / a if a else 0.0


def _batch_forward_ms(rows: np.ndarray) -> dict[int, np.ndarray]:
    """Forward time of every batch (ms), by batch size; one entry per batch, not per request."""
    first = np.unique(rows["batch_id"], return_index=True)[1]
    sizes = rows["batch_size"][first]
    fwd = (rows["t_fwd_end"][first] - rows["t_fwd_start"][first]) / 1e6
    return {int(s): fwd[sizes == s] for s in np.unique(sizes)}


def matched_forward_change(a: ArmStats, b: ArmStats) -> float | None:
    """How much faster the forward pass itself got, batch size for batch size: the median
    forward time of B's batches of size s against A's, averaged with A's share of requests at
    each size. A lever that changes the batch mix (a faster model drains the queue, so
    batches fill less) would otherwise show up as a change of the model. None when the arms
    share no batch size."""
    fa, fb = _batch_forward_ms(a.rows), _batch_forward_ms(b.rows)
    common = [s for s in fa if s in fb]
    if not common:
        return None
    weights = np.array([s * len(fa[s]) for s in common], dtype=float)
    ratios = np.array([np.median(fb[s]) / np.median(fa[s]) for s in common])
    return float((weights * ratios).sum() / weights.sum() - 1.0)


@dataclass
class Headline:
    """The A/B verdict in numbers (fractions: −0.4 = 40% less) and in words.
    ``forward_change`` compares the forward pass at the same batch sizes; the mean forward
    time per request (which also moves with the batch mix) is ``forward_mean_change``."""

    forward_change: float
    forward_mean_change: float
    mean_change: float
    p50_change: float
    p99_change: float
    forward_share: float
    amdahl_mean_change: float
    text: str
    explanation: str
    #: B's forward pass alone against the baseline model's, one batch as the run sends it,
    #: timed side by side in B's run process before its load (None without model levers).
    #: In the run, the forward pass also waits for the interpreter whenever Python
    #: preprocessing threads hold it, so the served forward time can move less than this.
    forward_alone_change: float | None = None


def headline(a: ArmStats, b: ArmStats) -> Headline:
    """"forward −X% → end-to-end p50 −Y%, p99 −Z%", and why, from Amdahl's law.

    The forward figure compares the forward pass at equal batch sizes
    (``matched_forward_change``). If only the forward pass had changed, the mean total would change
    by ``forward share × forward change`` — the Amdahl prediction; a measured change far from
    it means something else moved too (queueing responding to the faster service, or a
    variant of pre/postprocessing).
    """
    fa, fb = a.components_ms["forward"].mean, b.components_ms["forward"].mean
    ta, tb = a.latency_ms.mean, b.latency_ms.mean
    fwd_mean = _change(fa, fb)
    matched = matched_forward_change(a, b)
    fwd = fwd_mean if matched is None else matched
    share = fa / ta if ta else 0.0
    p50 = _change(a.latency_ms.p50, b.latency_ms.p50)
    p99 = _change(a.latency_ms.p99, b.latency_ms.p99)
    mean = _change(ta, tb)
    amdahl = share * fwd
    opt = b.optimization or {}
    alone = (_change(opt["baseline_steady_ms"], opt["steady_ms"])
             if opt.get("steady_ms") and opt.get("baseline_steady_ms") else None)
    also = f" (alone {fmt.change(alone)})" if alone is not None else ""
    text = (f"forward {fmt.change(fwd)}{also} → end-to-end p50 {fmt.change(p50)}, "
            f"p99 {fmt.change(p99)}")
    biggest = max((c for c in COMPONENTS if c != "forward"),
                  key=lambda c: a.components_ms[c].mean)
    bshare = a.components_ms[biggest].mean / ta if ta else 0.0
    explanation = (
        f"The forward pass was {fmt.share(share)} of the baseline's mean end-to-end time, so "
        f"changing it by {fmt.change(fwd)} can move the mean by about {fmt.share(share)} × "
        f"{fmt.change(fwd)} = {fmt.change(amdahl)} (Amdahl's law); measured: "
        f"{fmt.change(mean)}. "
        f"The largest other component was {biggest} at {fmt.share(bshare)} of the mean.")
    if abs(mean - amdahl) > max(0.05, 0.5 * abs(amdahl)):
        explanation += (" The measured change differs from the forward-only prediction: other "
                        "components moved too (queueing responds to service times; check the "
                        "bars).")
    if matched is not None and abs(matched - fwd_mean) > 0.1:
        explanation += (f" Per request, the mean forward time changed by "
                        f"{fmt.change(fwd_mean)}: the batch sizes differed between the arms "
                        "(the headline compares batches of the same size).")
    if alone is not None and fwd - alone > 0.15:
        explanation += (f" Alone, B's model ran {fmt.change(alone)} against the baseline model; "
                        "served under load, the forward pass also waits for a core and for the "
                        "Python interpreter (held by the server's other threads), which a "
                        "faster model does not shorten.")
    return Headline(fwd, fwd_mean, mean, p50, p99, share, amdahl, text, explanation, alone)


@dataclass
class ABResult:
    plan: dict[str, Any]
    a: ArmStats
    b: ArmStats
    headline: Headline
    order: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"plan": self.plan, "order": self.order, "headline": asdict(self.headline),
                "A": self.a.to_dict(), "B": self.b.to_dict()}


def merge(plan: Any, blocks: Sequence[tuple[str, RunResult]]) -> ABResult:
    """Pool finished blocks per arm and compare them. ``plan``: the A/B plan
    (``latency.execution.ab.ABPlan``) or its ``to_dict()``."""
    a = arm_stats("A", [r for arm, r in blocks if arm == "A"])
    b = arm_stats("B", [r for arm, r in blocks if arm == "B"])
    changed = [f"{name} {b.config[key]}" for key, name in SETTING_NAMES.items()
               if a.config.get(key) != b.config.get(key)]
    if changed:
        b.label = ", ".join(x for x in (b.label if b.label != "baseline" else "",
                                         *changed) if x)
    info = plan.to_dict() if hasattr(plan, "to_dict") else dict(plan)
    return ABResult(info, a, b, headline(a, b), [arm for arm, _ in blocks])
