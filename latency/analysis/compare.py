"""Comparing runs: the component diff table, the differences in setup, and the p99 gate.

Separate from measuring, as ``torch.utils.benchmark.Compare`` is from ``Timer``: it reads only
stored summaries (mean/p50/p99 of the total and of each component, the p99 confidence
interval), so comparing two runs costs nothing however long they were.

The gate for CI: ``p99_gate(base, candidate, pct)`` fails when the candidate's p99 is more
than ``pct`` % above the baseline's. It also says whether the two p99 95% intervals overlap —
a regression inside overlapping intervals may be noise, and a person should know that even
when the gate trips.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

from latency.analysis.machine import disturbed_mark, unequal_disturbance
from latency.analysis.summary import Summary
from latency.core import fmt
from latency.core.config import RunConfig
from latency.core.records import COMPONENTS

STATS: tuple[str, ...] = ("mean", "p50", "p99")
ROWS: tuple[str, ...] = ("total",) + COMPONENTS
#: the RunConfig fields that never describe a setup difference, each with why: two runs that
#: differ only in these ran the same experiment. Every other field is a setting that is named
#: when two runs differ in it, so a field added to RunConfig is compared without being listed.
NOT_SETUP: Mapping[str, str] = MappingProxyType({
    "max_error_rate": "the verdict's limit on failed requests: it judges the run, changes nothing"
                      " that was measured",
    "health_url": "an HTTP target's readiness probe, sent once before the run; no measured "
                  "request goes there",
})
#: the settings two runs are compared by: every RunConfig field but ``NOT_SETUP``, in field
#: order (derived, so a renamed field is renamed here too instead of reading None)
CONFIG_KEYS: tuple[str, ...] = tuple(f.name for f in fields(RunConfig) if f.name not in NOT_SETUP)
#: RunConfig properties that sum up several fields, named before them ('mode: closed → open')
SETUP_PROPERTIES: tuple[str, ...] = ("mode",)
ENV_KEYS = ("cpu_model", "cores", "device_name", "torch", "python", "git_commit")


def _stat(summary: Summary, row: str, stat: str) -> float | None:
    v = summary.component(row).get(stat)
    return None if v is None else float(v)


#: a difference is worth a colour only beyond this many standard errors (and 5 %)
NOISE_SE = 3.0
#: ...and never below this (ms): a thread hand-off on a 2-core machine costs ~20 µs and
#: varies between runs by as much, however many requests pin down each run's own mean
NOISE_FLOOR_MS = 0.02


def _standard_error(summary: Summary, row: str, stat: str) -> float | None:
    """Rough standard error (ms) of a run's mean or median of one component: the spread
    read off its own percentiles (σ ≈ (p90 − p50) / 1.28, robust to the tail) over √n; the
    median's is 1.25× the mean's. Requests that queue are not independent, hence the margin
    of ``NOISE_SE`` errors."""
    c = summary.component(row)
    if c.p90 is None or c.p50 is None or not summary.successful:
        return None
    sigma = max(c.p90 - c.p50, 0.0) / 1.2816
    return (1.25 if stat == "p50" else 1.0) * sigma / math.sqrt(summary.successful)


def beyond_noise(a: Summary, b: Summary, row: str, stat: str) -> bool | None:
    """Whether B's ``stat`` of ``row`` differs from A's by more than the two runs' noise:
    p99 when their 95 % intervals do not overlap; mean and p50 when the difference exceeds
    ``NOISE_SE`` combined standard errors — and in every case by 5 % or more and by
    ``NOISE_FLOOR_MS``. None when it cannot be told (no interval, no requests)."""
    va, vb = _stat(a, row, stat), _stat(b, row, stat)
    if va is None or vb is None:
        return None
    if abs(vb - va) < NOISE_FLOOR_MS or (va and abs(vb - va) / va < 0.05):
        return False
    if stat == "p99":
        ca, cb = a.component(row).p99_ci95, b.component(row).p99_ci95
        if not ca or not cb:
            return None
        return ca[1] < cb[0] or cb[1] < ca[0]
    sa, sb = _standard_error(a, row, stat), _standard_error(b, row, stat)
    if sa is None or sb is None:
        return None
    return abs(vb - va) > NOISE_SE * math.hypot(sa, sb)


def diff_rows(summaries: Sequence[Summary]) -> list[dict[str, Any]]:
    """One row per (component, statistic): every run's value (ms), and each later run's
    difference from the first, absolute (ms) and relative (%, None when the first is 0), and
    whether it lies beyond the runs' noise (``beyond_noise``)."""
    out = []
    for row in ROWS:
        for stat in STATS:
            vals = [_stat(s, row, stat) for s in summaries]
            base = vals[0]
            deltas = [None if v is None or base is None else v - base for v in vals[1:]]
            pcts = [None if d is None or not base else 100.0 * d / base for d in deltas]
            out.append({"component": row, "stat": stat, "values": vals, "delta_ms": deltas,
                        "delta_pct": pcts,
                        "beyond_noise": [beyond_noise(summaries[0], s, row, stat)
                                         for s in summaries[1:]]})
    return out


def format_diff(letters: Sequence[str], summaries: Sequence[Summary]) -> str:
    """The diff table as text: values of every run, then Δ and Δ% of each against the first."""
    rows = diff_rows(summaries)
    head = [f"{'ms':<12}{'':<5}"] + [f"{x:>10}" for x in letters]
    for x in letters[1:]:
        head += [f"{'Δ ' + x:>10}", f"{'Δ% ' + x:>10}"]
    lines = ["".join(head)]
    lines.append("-" * len(lines[0]))
    for r in rows:
        name = r["component"] if r["stat"] == STATS[0] else ""
        cells = [f"{name:<12}{r['stat']:<5}"] + [f"{fmt.ms(v):>10}" for v in r["values"]]
        for d, p in zip(r["delta_ms"], r["delta_pct"]):
            cells += [f"{fmt.signed_ms(d):>10}",
                      f" {fmt.change(None if p is None else p / 100):>9}"]
        lines.append("".join(cells))
    return "\n".join(lines)


def setting_of(config: RunConfig | Mapping[str, Any], name: str) -> Any:
    """One setting of a config: a RunConfig's attribute (a name it does not have raises, so a
    renamed field fails here instead of reading None), or a table's value (None when absent:
    a config from a file written before the setting existed)."""
    return getattr(config, name) if isinstance(config, RunConfig) else config.get(name)


def setup_differences(a_config: RunConfig | Mapping[str, Any],
                      b_config: RunConfig | Mapping[str, Any],
                      a_env: Mapping[str, Any], b_env: Mapping[str, Any]) -> list[str]:
    """'batch_size: 1 → 8' for every setting (``SETUP_PROPERTIES``, ``CONFIG_KEYS``) or
    environment fact (``ENV_KEYS``) that differs."""
    out = []
    pairs = [(setting_of(a_config, k), setting_of(b_config, k), k)
             for k in SETUP_PROPERTIES + CONFIG_KEYS]
    pairs += [(a_env.get(k), b_env.get(k), k) for k in ENV_KEYS]
    for va, vb, k in pairs:
        if va == vb or (va is None and vb is None):
            continue
        if isinstance(va, Mapping) and isinstance(vb, Mapping):  # name the keys that differ
            for sub in sorted(set(va) | set(vb), key=str):
                if va.get(sub) != vb.get(sub):
                    out.append(f"{k}.{sub}: {fmt.setting(va.get(sub))} → "
                               f"{fmt.setting(vb.get(sub))}")
        else:
            out.append(f"{k}: {fmt.setting(va)} → {fmt.setting(vb)}")
    return out


@dataclass(frozen=True)
class GateResult:
    passed: bool
    message: str
    change_pct: float | None


def p99_gate(base: Summary, candidate: Summary, max_worse_pct: float,
             base_name: str = "A", candidate_name: str = "B") -> GateResult:
    """Fail when the candidate's p99 is more than ``max_worse_pct`` % above the baseline's.
    A candidate without successful requests fails (it has no p99 at all)."""
    b99, c99 = _stat(base, "total", "p99"), _stat(candidate, "total", "p99")
    if b99 is None or b99 <= 0:
        raise ValueError(f"{base_name} has no successful requests: no p99 to compare against")
    if c99 is None:
        return GateResult(False, f"REGRESSION: {candidate_name} has no successful requests "
                                 "(no p99)", None)
    change = 100.0 * (c99 - b99) / b99
    verb = "worse" if change > 0 else "better"
    overlap = ci_overlap(base, candidate)
    noise = {True: "; the p99 95% intervals overlap: the difference may be noise",
             False: "; the p99 95% intervals do not overlap",
             None: "; too few requests for a p99 confidence interval"}[overlap]
    text = (f"{candidate_name} p99 {fmt.ms(c99)} ms vs {base_name} {fmt.ms(b99)} ms: "
            f"{abs(change):.1f}% {verb} (limit {max_worse_pct:g}% worse){noise}")
    passed = change <= max_worse_pct
    return GateResult(passed, ("OK: " if passed else "REGRESSION: ") + text, change)


def headline(base: Summary, candidate: Summary, base_name: str = "A",
             candidate_name: str = "B") -> str:
    """'B vs A: p50 +12.0%, p99 +42.2% (the p99 95% intervals do not overlap)'."""
    for name, run in ((base_name, base), (candidate_name, candidate)):
        if not run.successful:
            return (f"{candidate_name} vs {base_name}: nothing to compare — {name} has no "
                    "successful requests")
    parts = []
    for stat in ("p50", "p99"):
        a, b = _stat(base, "total", stat), _stat(candidate, "total", stat)
        parts.append(f"{stat} " + ("—" if a is None or b is None or a <= 0 else
                                   f"{fmt.ms(b)} vs {fmt.ms(a)} ms "
                                   f"({fmt.change((b - a) / a)})"))
    note = {True: "the p99 95% intervals overlap: may be noise",
            False: "the p99 95% intervals do not overlap",
            None: "too few requests for a p99 interval"}[ci_overlap(base, candidate)]
    return f"{candidate_name} vs {base_name}: " + ", ".join(parts) + f" — {note}"


def ci_overlap(a: Summary, b: Summary) -> bool | None:
    """Whether the two runs' p99 95% confidence intervals overlap (None: one has none)."""
    ca, cb = a.latency_ms.p99_ci95, b.latency_ms.p99_ci95
    if not ca or not cb:
        return None
    return ca[0] <= cb[1] and cb[0] <= ca[1]


@dataclass(frozen=True)
class Comparison:
    """Runs side by side (the first is the baseline A): what ``RunResult.compare`` returns.
    Prints the headline of each run against A, what differs in their setup, and the
    component diff table — the same text as ``python -m latency compare``."""

    labels: tuple[str, ...]
    summaries: tuple[Summary, ...]
    configs: tuple[RunConfig, ...]
    environments: tuple[dict[str, Any], ...]

    def rows(self) -> list[dict[str, Any]]:
        return diff_rows(self.summaries)

    def gate(self, max_worse_pct: float) -> list[GateResult]:
        """The p99 gate of every later run against A."""
        return [p99_gate(self.summaries[0], s, max_worse_pct, self.labels[0], x)
                for x, s in zip(self.labels[1:], self.summaries[1:])]

    @property
    def machine_warning(self) -> str | None:
        """The runs were measured on an unequally busy machine, in words with the numbers
        (``machine.unequal_disturbance``); None when alike or not sampled."""
        return unequal_disturbance({x: [e] for x, e in zip(self.labels, self.environments)})

    def __repr__(self) -> str:
        a = self.labels[0]
        lines = []
        for i, x in enumerate(self.labels[1:], start=1):
            lines.append(headline(self.summaries[0], self.summaries[i], a, x))
            diffs = setup_differences(self.configs[0], self.configs[i], self.environments[0],
                                      self.environments[i])
            if diffs:
                lines.append(f"setup {a} → {x}: " + "; ".join(diffs))
        lines += [f"{x} {m}" for x, e in zip(self.labels, self.environments)
                  if (m := disturbed_mark(e))]
        if self.machine_warning:
            lines.append(f"warning: {self.machine_warning}")
        lines += ["", format_diff(self.labels, self.summaries),
                  f"(ms; Δ and Δ% against {a}; negative is faster)"]
        return "\n".join(lines)


def compare_results(*results: Any) -> Comparison:
    """Runs (anything with ``summary``, ``config``, ``environment``) as a Comparison."""
    if len(results) < 2:
        raise ValueError("compare needs at least two runs (the first is the baseline)")
    labels = tuple(chr(ord("A") + i) if i < 26 else f"R{i}" for i in range(len(results)))
    return Comparison(labels, tuple(r.summary for r in results),
                      tuple(r.config for r in results),
                      tuple(r.environment for r in results))
