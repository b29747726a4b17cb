"""The optimisation levers as values: their names and promises, a lever list parsed from the
command line, and the report of what applying them did. The levers themselves (which need
torch) are ``latency.pipelines.levers``; this part is read by the summary, the reports and the
dashboard without torch.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from latency.core import fmt

#: every lever, with the one-line promise it makes (the run measures whether it keeps it).
LEVERS: dict[str, str] = {
    "int8": "8-bit integer weights: dynamic quantisation of Linear layers; a CNN's convolutions "
            "are quantised statically (calibrated on held-out inputs)",
    "compile": "torch.compile: fused kernels after a one-off compilation (reported apart)",
    "channels_last": "NHWC memory layout for the CNN's convolutions",
    "bf16": "bfloat16 autocast: half-width matrix maths where the CPU has native bf16",
    "prune_unstructured": "zero the 50% smallest weights: same shapes, same dense work",
    "prune_structured": "remove the 50% weakest channels/neurons: smaller layers, less work",
}
VARIANTS = ("fast", "naive")


class LeverError(ValueError):
    """A lever that cannot apply here; one line saying why."""


# --------------------------------------------------------------------------- validation


def parse_levers(value: str | Sequence[str] | None) -> list[str]:
    """``"int8, compile"`` or ``["int8", "compile"]`` → ``["int8", "compile"]`` (order kept,
    duplicates dropped). Unknown names raise LeverError."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[str] = []
    for item in items:
        name = str(item).strip().lower().replace("-", "_")
        if not name:
            continue
        if name not in LEVERS:
            raise LeverError(f"unknown lever {item!r}; choose from: {', '.join(LEVERS)}")
        if name not in out:
            out.append(name)
    return out


@dataclass
class LeverReport:
    """What one lever did: how (backend), how long applying it took, what it changed."""

    name: str
    backend: str = ""
    apply_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class OptimizationReport:
    """Levers applied to one run and their measured effect on the answers.

    ``agreement`` is the share of the fixed held-out inputs whose response label equals the
    baseline's; ``max_abs_diff`` the largest difference of any class probability. The
    ``first_call_ms`` / ``steady_ms`` pair separates one-off costs (compilation, lazy
    initialisation) from the steady state the run then measures.
    """

    levers: list[LeverReport] = field(default_factory=list)
    pre: str = "fast"
    post: str = "fast"
    inputs: int = 0
    agreement: float | None = None
    max_abs_diff: float | None = None
    params_before: int = 0
    params_after: int = 0
    first_call_ms: float | None = None
    steady_ms: float | None = None
    baseline_steady_ms: float | None = None
    call_batch: int = 1
    compile_s: float | None = None
    check_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OptimizationReport:
        """The report as a result's environment stores it (``to_dict``)."""
        known = set(cls.__dataclass_fields__)
        levers = [LeverReport(**lv) for lv in d.get("levers", [])]
        return cls(**{**{k: v for k, v in d.items() if k in known}, "levers": levers})

    def lines(self) -> list[str]:
        """The report for a terminal: one line per lever, then the effect on answers."""
        out = []
        for lv in self.levers:
            out.append(f"lever {lv.name}: {lv.backend} ({lv.apply_s:.2f} s to apply)"
                       + (f"; {'; '.join(lv.notes)}" if lv.notes else ""))
            out += [f"  warning recorded: {w}" for w in lv.warnings]
        if self.pre != "fast" or self.post != "fast":
            out.append(f"variants: preprocess {self.pre}, postprocess {self.post}")
        if self.compile_s is not None:
            out.append(f"compile: {self.compile_s:.2f} s of compilation and first calls, "
                       "before warm-up (not in the measured latencies)")
        if self.first_call_ms is not None and self.steady_ms is not None:
            base = (f" (baseline {fmt.ms(self.baseline_steady_ms)} ms)"
                    if self.baseline_steady_ms is not None else "")
            out.append(f"forward, one batch of {self.call_batch}: first call "
                       f"{fmt.ms(self.first_call_ms)} ms, "
                       f"steady {fmt.ms(self.steady_ms)} ms{base}")
        if self.agreement is not None:
            diff = ("n/a" if self.max_abs_diff is None else f"{self.max_abs_diff:.4f}")
            out.append(f"answers vs baseline on {self.inputs} held-out inputs: top-1 agreement "
                       f"{self.agreement:.1%}, max |Δ probability| {diff}; "
                       f"parameters {self.params_before:,} → {self.params_after:,}")
        return out


def lever_summary(levers: Sequence[str], pre: str = "fast", post: str = "fast") -> str:
    """A short label for a configuration's levers, e.g. ``int8+compile, pre naive``."""
    parts = ["+".join(levers)] if levers else []
    parts += [f"{k} {v}" for k, v in (("pre", pre), ("post", post)) if v != "fast"]
    return ", ".join(parts) or "baseline"
