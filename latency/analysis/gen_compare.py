"""Generation runs side by side: TTFT, TPOT, ITL, E2E, throughput and goodput, each run's
change against the first, and the parts of E2E.

What ``python -m latency compare`` prints for generation runs (their ``--json`` files). The
setup differences are ``analysis.compare.setup_differences``, as for one-shot runs, so every
setting that differs is named. The gate (``--fail-if-p99-worse``) holds when none of TTFT,
TPOT and ITL p99 got worse by more than the percentage.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from latency.analysis.gen_summary import GenSummary
from latency.core import fmt
from latency.core.gen_records import GEN_COMPONENTS
from latency.core.gen_reports import SPLIT_PARTS

#: (label, how to read it from a summary); times in ms, rates as their unit says
ROWS: tuple[tuple[str, str], ...] = (
    ("TTFT p50", "ttft_ms.p50"), ("TTFT p99", "ttft_ms.p99"),
    ("TPOT p50", "tpot_ms.p50"), ("TPOT p99", "tpot_ms.p99"),
    ("ITL p50", "itl_ms.p50"), ("ITL p99", "itl_ms.p99"),
    ("E2E p50", "e2e_ms.p50"), ("E2E p99", "e2e_ms.p99"),
    ("output tokens/s", "output_tokens_per_s"), ("requests/s", "throughput_rps"),
    ("goodput req/s", "goodput_rps"),
    *((f"{c.replace('_', ' ')} (mean)", f"components_ms.{c}.mean") for c in GEN_COMPONENTS),
)
GATED = ("TTFT p99", "TPOT p99", "ITL p99")


def value(s: GenSummary, path: str) -> float | None:
    obj: object = s
    for part in path.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else getattr(obj, part, None)
        if obj is None:
            return None
    return float(obj) if isinstance(obj, (int, float)) else None


@dataclass(frozen=True)
class GenGate:
    passed: bool
    message: str


def gen_gate(base: GenSummary, other: GenSummary, pct: float, a: str, b: str) -> GenGate:
    """Whether ``other``'s TTFT, TPOT and ITL p99 are each within ``pct`` % of ``base``'s."""
    worse = []
    for label, path in ROWS:
        if label not in GATED:
            continue
        x, y = value(base, path), value(other, path)
        if x is None or y is None or x <= 0:
            continue
        change = (y - x) / x * 100
        if change > pct:
            worse.append(f"{label} {fmt.ms(x)} → {fmt.ms(y)} ms (+{change:.1f}%; "
                         f"{_intervals(base, other, path)})")
    if worse:
        return GenGate(False, f"gate FAILED: {b} against {a}: " + "; ".join(worse)
                       + f" (more than {pct:g}% worse)")
    return GenGate(True, f"gate passed: {b} against {a}: TTFT, TPOT and ITL p99 within "
                         f"{pct:g}%")


def _intervals(base: GenSummary, other: GenSummary, path: str) -> str:
    """Whether two runs' p99 95 % intervals of one figure (``ttft_ms.p99``, …) overlap, in
    words: a gate that fails inside overlapping intervals may be failing on noise."""
    stats = path.rsplit(".", 1)[0]
    ca = getattr(getattr(base, stats, None), "p99_ci95", None)
    cb = getattr(getattr(other, stats, None), "p99_ci95", None)
    if ca is None or cb is None:
        return "too few samples for a p99 95% interval: the p99 may be noise"
    if ca[0] <= cb[1] and cb[0] <= ca[1]:
        return (f"the p99 95% intervals [{fmt.ms(ca[0])}, {fmt.ms(ca[1])}] and "
                f"[{fmt.ms(cb[0])}, {fmt.ms(cb[1])}] ms overlap: may be noise")
    return (f"the p99 95% intervals [{fmt.ms(ca[0])}, {fmt.ms(ca[1])}] and "
            f"[{fmt.ms(cb[0])}, {fmt.ms(cb[1])}] ms do not overlap")


#: the headline's figures: (label, path, whether higher is better)
HEADLINE: tuple[tuple[str, str, bool], ...] = (
    ("TTFT p99", "ttft_ms.p99", False), ("TPOT p99", "tpot_ms.p99", False),
    ("ITL p99", "itl_ms.p99", False), ("output tokens/s", "output_tokens_per_s", True))


def gen_headline(base: GenSummary, other: GenSummary, a: str = "A", b: str = "B") -> str:
    """'B vs A: TTFT p99 120 → 95 ms (−21%), TPOT p99 …, output tokens/s 800 → 900 (+12%)'."""
    for name, s in ((a, base), (b, other)):
        if not s.successful:
            return f"{b} vs {a}: nothing to compare — {name} has no successful requests"
    parts = []
    for label, path, _ in HEADLINE:
        x, y = value(base, path), value(other, path)
        if x is None or y is None:
            continue
        unit = "" if path.endswith("per_s") else " ms"
        change = f" ({fmt.change((y - x) / x)})" if x else ""
        parts.append(f"{label} {fmt.ms(x)} → {fmt.ms(y)}{unit}{change}")
    return f"{b} vs {a}: " + ", ".join(parts)


def diff_rows(summaries: list[GenSummary], splits: list[dict[str, Any] | None] | None = None
              ) -> list[tuple[str, list[float | None]]]:
    """Each figure of the diff and its value in each run (None where a run has none; a figure
    no run has is left out). ``splits``: when every run is a --target's, their server splits
    (``TargetView.to_dict``) stand in for the client's components (a target's requests are
    whole to the client)."""
    if splits is None:
        rows = [(label, [value(s, path) for s in summaries]) for label, path in ROWS]
    else:
        rows = [(label, [value(s, path) for s in summaries]) for label, path in ROWS
                if not path.startswith("components_ms.")]
        means = [split_means(v) for v in splits]
        rows += [(f"split: {p} (mean)", [m[p] for m in means]) for p in SPLIT_PARTS]
    return [(label, values) for label, values in rows if any(v is not None for v in values)]


def gen_diff_rows(letters: list[str], summaries: list[GenSummary],
                  splits: list[dict[str, Any] | None] | None = None) -> list[dict[str, Any]]:
    """The diff as table rows (the dashboard's): a figure, each run's value (ms, or its rate
    unit), each later run's change against the first (%); None where a run has no value."""
    out = []
    for label, values in diff_rows(summaries, splits):
        row: dict[str, Any] = {"figure": label}
        for x, v in zip(letters, values):
            row[x] = None if v is None else round(v, 3)
        base = values[0]
        for x, v in zip(letters[1:], values[1:]):
            row[f"Δ% {x}"] = (round((v - base) / base * 100, 1)
                              if base and v is not None else None)
        out.append(row)
    return out


def split_means(view: dict[str, Any] | None) -> dict[str, float | None]:
    """A target run's server split as mean ms a part (None where it has no split)."""
    parts = (view or {}).get("parts_ms") or {}
    n = (view or {}).get("requests_split") or 0
    return {p: (parts.get(p) or {}).get("mean") if n else None for p in SPLIT_PARTS}


def format_gen_diff(letters: list[str], summaries: list[GenSummary],
                    splits: list[dict[str, Any] | None] | None = None) -> str:
    """The table: a row a figure, a column a run, then each run's change against the first.
    ``splits``: when every run is a --target's, their server splits (``TargetView.to_dict``)
    stand in for the client's components (a target's requests are whole to the client)."""
    head = f"{'':<22}" + "".join(f"{x:>10}" for x in letters) + "".join(
        f"{'Δ% ' + x:>10}" for x in letters[1:])
    lines = [head, "-" * len(head)]
    for label, values in diff_rows(summaries, splits):
        cells = "".join(f"{fmt.ms(v):>10}" for v in values)
        base = values[0]
        deltas = "".join(
            f"{(fmt.change((v - base) / base) if base and v is not None else '—'):>10}"
            for v in values[1:])
        lines.append(f"{label:<22}{cells}{deltas}")
    return "\n".join(lines)
