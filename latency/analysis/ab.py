"""A/B runs, analysed: each arm's blocks pooled, and the headline comparing the arms.

The plan, why its blocks are interleaved, and how they run: ``latency.execution.ab``.

The merged arms pool their blocks' measured requests. The headline compares what a person
would otherwise compare by hand — "forward −X% → end-to-end p50 −Y%, p99 −Z%" — and explains
the gap with Amdahl's law: a component that was a share *s* of the total can change the total
by at most *s* times its own change.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from latency.analysis.compare import CONFIG_KEYS, setting_of
from latency.analysis.findings import Finding
from latency.analysis.machine import pooled, pooled_finding, unequal_disturbance
from latency.analysis.result import RunResult
from latency.analysis.snapshot import makeup_ms, quantile_curve
from latency.analysis.stats import (
    LatencyStats,
    describe_ms,
    interval_note,
)
from latency.core import fmt
from latency.core.config import RunConfig
from latency.core.flags import flags_of
from latency.core.optimization import lever_summary
from latency.core.records import COMPONENTS, RECORD_DTYPE, component_ns, measured_and_ok

ARMS = ("A", "B")
#: how an arm's label names the settings an A/B most often changes, in this order (RunConfig
#: field names: tests/test_ab.py checks them against the fields)
SETTING_NAMES = {"replicas": "replicas", "threads": "threads", "batch_size": "batch ≤",
                 "max_batch_delay_ms": "batch delay ms", "preprocess_workers": "pre workers",
                 "concurrency": "clients", "rate": "req/s", "device": "on", "dtype": "dtype",
                 "pre": "preprocessing", "post": "postprocessing", "model": "pipeline",
                 "transport": "transport", "payload": "payload", "inputs": "inputs",
                 "pipeline": "pipeline spec"}
#: setup fields the label does not walk by name, each with why
NOT_WALKED: Mapping[str, str] = MappingProxyType({
    "optimize": "the levers are named as one list ('levers int8 (A: none)')",
    "model_args": "each model-arg is named by its own name ('fwd_ms 3 (A: 1)')",
    "seed": "the plan gives both arms of a pair the same seed, each pair its own: a block's "
            "seed says which pair it ran in, never what B changed",
})
#: every setting an arm's label names when it changes: those of ``SETTING_NAMES`` first, then
#: every other setup field (``compare.CONFIG_KEYS``, derived from RunConfig) by its flag's name
#: ('backend ray (A: builtin)'), so no change goes unnamed because nobody listed it
_FLAGS = flags_of(RunConfig)
ARM_SETTINGS: dict[str, str] = {**SETTING_NAMES, **{
    k: _FLAGS[k].name.removeprefix("--") if k in _FLAGS else k
    for k in CONFIG_KEYS if k not in SETTING_NAMES and k not in NOT_WALKED}}


def _levers(config: RunConfig | Mapping[str, Any]) -> list[str]:
    levers = setting_of(config, "optimize") or []
    return [str(x) for x in (levers if isinstance(levers, list) else [levers])]


def arm_changes(a: RunConfig | Mapping[str, Any], b: RunConfig | Mapping[str, Any]
                ) -> list[str]:
    """Every setting B changes against A, each with both values: 'int8 (A: none)',
    'preprocessing fast (A: naive)', 'pre workers 4 (A: 1)'. An A/B's label names all of
    them: a result must never be credited to one change while another made it, hence every
    setting of ``ARM_SETTINGS``. (A RunConfig is read by attribute, a table by name.)"""
    out = []
    la, lb = _levers(a), _levers(b)
    if la != lb:
        out.append(f"levers {'+'.join(lb) or 'none'} (A: {'+'.join(la) or 'none'})")
    for key, name in ARM_SETTINGS.items():
        va, vb = setting_of(a, key), setting_of(b, key)
        if va != vb:
            out.append(f"{name} {fmt.setting(vb)} (A: {fmt.setting(va)})")
    ma, mb = setting_of(a, "model_args") or {}, setting_of(b, "model_args") or {}
    for k in sorted(set(ma) | set(mb)):
        if ma.get(k) != mb.get(k):
            out.append(f"{k} {fmt.setting(mb.get(k))} (A: {fmt.setting(ma.get(k))})")
    return out


@dataclass
class ArmStats:
    """One arm's blocks pooled: latency and components of every measured, successful request."""

    arm: str
    label: str
    config: RunConfig
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
    #: the machine while this arm's blocks measured, pooled (``machine.pooled``: time-weighted
    #: means, ``runs`` and ``disturbed_runs``); None when no block has samples of it
    machine: dict[str, Any] | None = None

    @property
    def disturbed(self) -> bool:
        """Some block of this arm was measured on a busy machine (DISTURBED)."""
        return bool(self.machine and self.machine.get("disturbed_runs"))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("rows")
        d["config"] = self.config.to_dict()  # with its ``mode``, as the A/B JSON always had
        d["latency_ms"] = self.latency_ms.to_dict()
        d["components_ms"] = {c: s.to_dict() for c, s in self.components_ms.items()}
        return d


#: the nanosecond stamps of a request row (shifted together when blocks are pooled)
STAMPS = tuple(n for n in RECORD_DTYPE.names or () if n.startswith("t_"))


def arm_stats(arm: str, results: Sequence[RunResult]) -> ArmStats:
    """Pool one arm's block results (each block's warm-up already excluded)."""
    if not results:
        raise ValueError(f"arm {arm} has no finished blocks")
    oks, errors, seconds, block_p50 = [], 0, 0.0, []
    warnings: list[str] = []
    next_batch = next_replica = 0
    next_start: int | None = None
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
            # and the blocks follow each other in time, without the pauses in which the other
            # arm ran: the pool's send times are then this arm's load, replayable as recorded
            start = int(ok["t_intended"].min())
            gap = (int(ok["t_intended"].max()) - start) // max(len(ok) - 1, 1)
            shift = (next_start - start) if next_start is not None else 0
            for name in STAMPS:  # a stamp never taken (0: not decomposed) stays untaken
                ok[name] = np.where(ok[name] != 0, ok[name] + shift, 0)
            next_start = int(ok["t_intended"].max()) + gap
        oks.append(ok)
        errors += len(measured) - len(ok)
        s = r.summary
        seconds += s.duration_s
        if len(ok):
            block_p50.append(float(s.latency_ms.p50 or 0.0))  # (set: the block has requests)
        warnings += [w for w in s.warnings if w not in warnings
                     and w.kind not in ("too_few", "machine")]  # judged on the pool below
        if r.failure:
            warnings.append(f"a block failed: {r.failure}")
    rows = np.concatenate(oks) if oks else np.zeros(0)
    if len(rows) == 0:
        raise ValueError(f"arm {arm} has no successful measured requests")
    comps = component_ns(rows)
    latency_ms = describe_ms(comps["total"])
    reason = interval_note(comps["total"], latency_ms, " in this arm")  # the pool, not a block
    if reason:
        warnings.append(f"{reason} (longer blocks or more pairs)")
    envs = [r.environment for r in results]
    busy = pooled_finding(envs)  # once for the arm, over its blocks
    if busy:
        warnings.append(Finding(busy, "machine"))
    total_ms = comps["total"] / 1e6
    order = np.argsort(total_ms, kind="stable")
    makeup = makeup_ms({c: comps[c] / 1e6 for c in COMPONENTS}, total_ms, order)
    quantiles = quantile_curve(total_ms, order)
    cfg = results[0].config
    return ArmStats(
        arm=arm, label=lever_summary(cfg.optimize or [], cfg.pre, cfg.post),
        config=cfg, blocks=len(results), requests=int(len(rows)), errors=errors,
        throughput_rps=len(rows) / seconds if seconds else 0.0,
        latency_ms=latency_ms,
        components_ms={c: describe_ms(comps[c], with_ci=False) for c in COMPONENTS},
        makeup_ms=makeup, quantiles_ms=[float(v) for v in quantiles], block_p50_ms=block_p50,
        optimization=results[0].environment.get("optimization"), warnings=warnings, rows=rows,
        machine=pooled(envs))


def _change(a: float | None, b: float | None) -> float:
    """B's relative change against A (0 when either is unknown or A is 0)."""
    return (b - a) / a if a and b is not None else 0.0


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
    #: B − A of each component's mean, ms: they sum to the change of the mean total exactly
    component_deltas_ms: dict[str, float] = field(default_factory=dict)
    #: B's forward pass alone against the baseline model's, one batch as the run sends it,
    #: timed side by side in B's run process before its load (None without model levers).
    #: In the run, the forward pass also waits for the interpreter whenever Python
    #: preprocessing threads hold it, so the served forward time can move less than this.
    forward_alone_change: float | None = None


def headline(a: ArmStats, b: ArmStats) -> Headline:
    """"end-to-end p50 −Y%, p99 −Z%; mean −d ms = preprocess −a ms, queue −b ms, …; the model
    alone −X%", and why, from Amdahl's law.

    The end-to-end change leads, attributed component by component (the mean's deltas sum to
    the total's exactly), so a gain is never credited to the model when preprocessing or
    queueing made it. The model's own speed-up is the one timed alone, side by side; the
    served forward time also moves with the batch mix and the load. If only the model had
    changed, the mean would change by ``forward share × model change`` — the Amdahl
    prediction; a measured change far from it means something else moved too.
    """
    # (an arm always has requests, so its means are set: arm_stats refuses an empty one)
    fa, fb = a.components_ms["forward"].mean or 0.0, b.components_ms["forward"].mean or 0.0
    ta, tb = a.latency_ms.mean or 0.0, b.latency_ms.mean or 0.0
    fwd_mean = _change(fa, fb)
    matched = matched_forward_change(a, b)
    fwd = fwd_mean if matched is None else matched
    share = fa / ta if ta else 0.0
    p50 = _change(a.latency_ms.p50, b.latency_ms.p50)
    p99 = _change(a.latency_ms.p99, b.latency_ms.p99)
    mean = _change(ta, tb)
    opt = b.optimization or {}
    alone = (_change(opt["baseline_steady_ms"], opt["steady_ms"])
             if opt.get("steady_ms") and opt.get("baseline_steady_ms") else None)
    deltas = {c: (b.components_ms[c].mean or 0.0) - (a.components_ms[c].mean or 0.0)
              for c in COMPONENTS}
    text = (f"end-to-end p50 {fmt.change(p50)}, p99 {fmt.change(p99)}; mean "
            f"{fmt.signed_ms(tb - ta)} ms = {attribution(deltas, tb - ta)}")
    if alone is not None:
        text += f"; the model alone {fmt.change(alone)}"
    # Amdahl's bound with the model's own change: timed alone when B changed the model, else
    # the served forward time per request (which also moves with the batch mix and the load)
    model = alone if alone is not None else fwd_mean
    amdahl = share * model
    which = "the model alone" if alone is not None else "the served forward time"
    explanation = (
        f"The forward pass was {fmt.share(share)} of A's mean end-to-end time, so a change of "
        f"{fmt.change(model)} ({which}) can move the mean by about {fmt.share(share)} × "
        f"{fmt.change(model)} = {fmt.change(amdahl)} (Amdahl's law); measured: "
        f"{fmt.change(mean)}, made of: {attribution(deltas, tb - ta)}.")
    if abs(mean - amdahl) > max(0.05, 0.5 * abs(amdahl)):
        explanation += (" The measured change differs from the forward-only prediction: other "
                        "components moved — B changes more than the model, or queueing "
                        "responded to the faster service.")
    if matched is not None and abs(matched - fwd_mean) > 0.1:
        explanation += (f" Served, the forward time per request changed by "
                        f"{fmt.change(fwd_mean)} and per batch of equal size by "
                        f"{fmt.change(matched)}: the batch sizes differed between the arms, so "
                        "neither is the model's own speed-up.")
    if alone is not None and fwd_mean - alone > 0.15:
        explanation += (f" Alone, B's model ran {fmt.change(alone)} against A's; served under "
                        "load, the forward pass also waits for a core and for the Python "
                        "interpreter (held by the server's other threads), which a faster "
                        "model does not shorten.")
    return Headline(fwd, fwd_mean, mean, p50, p99, share, amdahl, text, explanation, deltas,
                    alone)


def attribution(deltas: dict[str, float], total: float, keep: float = 0.05) -> str:
    """'preprocess −225 ms, queue −4.1 ms, others +0.3 ms': the components that moved the
    mean, largest first, each ≥ ``keep`` of the largest move; the rest summed, so the parts
    add up to ``total`` as printed."""
    ranked = sorted(deltas, key=lambda c: -abs(deltas[c]))
    top = abs(deltas[ranked[0]]) if ranked else 0.0
    named = [c for c in ranked if top and abs(deltas[c]) >= keep * top]
    moved_rest = [c for c in ranked if c not in named and deltas[c] != 0]
    if len(moved_rest) == 1:  # one small mover is named, never hidden as "others"
        named += moved_rest
    parts = [f"{c} {fmt.signed_ms(deltas[c])} ms" for c in named]
    rest = total - sum(deltas[c] for c in named)
    if len(named) < len(ranked) and abs(rest) > 0:
        parts.append(f"others {fmt.signed_ms(rest)} ms")
    return ", ".join(parts) or "no change"


@dataclass
class ABResult:
    plan: dict[str, Any]
    a: ArmStats
    b: ArmStats
    headline: Headline
    order: list[str]
    #: the arms were measured on an unequally busy machine, in words with the numbers
    #: (``machine.unequal_disturbance``); None when alike or not sampled
    machine_warning: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"plan": self.plan, "order": self.order, "headline": asdict(self.headline),
                "A": self.a.to_dict(), "B": self.b.to_dict(),
                "machine_warning": self.machine_warning}


def merge(plan: Any, blocks: Sequence[tuple[str, RunResult]]) -> ABResult:
    """Pool finished blocks per arm and compare them. ``plan``: the A/B plan
    (``latency.execution.ab.ABPlan``) or its ``to_dict()``."""
    a = arm_stats("A", [r for arm, r in blocks if arm == "A"])
    b = arm_stats("B", [r for arm, r in blocks if arm == "B"])
    b.label = ", ".join(arm_changes(a.config, b.config)) or "the same settings as A"
    info = plan.to_dict() if hasattr(plan, "to_dict") else dict(plan)
    machine = unequal_disturbance({arm: [r.environment for x, r in blocks if x == arm]
                                   for arm in ARMS}, noun="arm")
    return ABResult(info, a, b, headline(a, b), [arm for arm, _ in blocks], machine)
