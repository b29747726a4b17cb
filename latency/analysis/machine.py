"""The machine while runs measured, for the places that show several runs or one run briefly:
the DISTURBED mark (history, compare, the dashboard's badge), one arm's machine pooled over
its blocks (A/B), and the warning that two runs or arms were disturbed unequally.

One run's verdict — quiet or DISTURBED, and why — is ``latency.analysis.validity``
(``machine_reasons``, the ``quiet machine`` check, the ``machine`` finding); this module only
reads it. A run without samples of the machine (saved before they were taken, or too short to
tell) is *unknown*: it gets no mark at all, never "quiet".

``unequal_disturbance({"A": [a.environment], "B": [b.environment]})`` says, for a quiet A
and a busy B: 'B was measured while other processes used 0.9 of 2 cores, A 0.02: the
difference between B and A may be the machine's, not the setup's — …'.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from latency.analysis.validity import (
    MAX_MEMORY_PRESSURE_PCT,
    MAX_STEAL_CORES,
    MAX_THROTTLED_SHARE,
    MIN_SAMPLED_S,
    as_number,
    disturbance_of,
    machine_reasons,
    max_other_cores,
)

DISTURBED = "DISTURBED"
#: the per-run fields pooled as time-weighted means (by each run's measured seconds)
_MEANS = ("other_cores_mean", "run_cores_mean", "steal_cores_mean", "memory_pressure_pct")
#: the per-run fields pooled as sums
_SUMS = ("involuntary_switches", "throttled_periods", "throttled_s")


def sampled(environment: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A result's machine samples when they can say anything (long enough a measurement),
    else None: no mark."""
    d = disturbance_of(dict(environment) if environment is not None else None)
    if d is None or (as_number(d.get("measured_s")) or 0.0) < MIN_SAMPLED_S:
        return None
    return d


def is_disturbed(environment: Mapping[str, Any] | None) -> bool | None:
    """True: the machine was busy while the run measured (its ``quiet machine`` check fails);
    False: it was quiet; None: not known (no samples)."""
    d = sampled(environment)
    return None if d is None else bool(machine_reasons(d))


#: a run's machine in one word, by ``is_disturbed``: what the history's ``machine`` column
#: says (nothing for a run without samples — unknown is not quiet)
MACHINE_WORDS: Mapping[bool | None, str] = MappingProxyType(
    {True: DISTURBED, False: "quiet", None: ""})


def disturbed_mark(environment: Mapping[str, Any] | None) -> str | None:
    """A disturbed run's badge, with its numbers: 'DISTURBED: other processes used 1.3 of 2
    cores on average during the measurement (quiet: ≤ 0.4)'; None for a quiet or unknown
    run."""
    d = sampled(environment)
    reasons = machine_reasons(d) if d is not None else []
    return f"{DISTURBED}: " + "; ".join(reasons) if reasons else None


def badge_label(machine: Mapping[str, Any] | None) -> str | None:
    """A DISTURBED badge's short label from a run's samples (``sampled``) or an arm's pooled
    ones (``pooled``): 'DISTURBED · other processes 1.30 of 2 cores (quiet ≤ 0.4)', with
    '· 2 of 4 blocks' for an arm and what else was over its limit ('steal 0.30 cores',
    'throttled 5% of the time', 'memory pressure 25%'); None when not disturbed. (The
    sentence with every number is ``disturbed_mark`` / ``pooled_mark``.)"""
    if not machine:
        return None
    d = dict(machine)
    blocks = d.get("runs")
    if not (d.get("disturbed_runs") if blocks is not None else machine_reasons(d)):
        return None
    span = as_number(d.get("measured_s")) or 0.0
    cores = int(as_number(d.get("cores")) or 0)
    of = f" of {cores}" if cores else ""
    parts = [DISTURBED]
    if blocks is not None:
        parts.append(f"{d['disturbed_runs']} of {blocks} blocks")
    other = as_number(d.get("other_cores_mean"))
    if other is not None:
        limit = max_other_cores(cores)
        # over the limit by less than the shown digits: one more ('0.402', not '0.40 …
        # (quiet ≤ 0.4)', which reads as within it)
        shown = _cores(other) if other <= limit or float(_cores(other)) > limit \
            else f"{other:.3f}"
        parts.append(f"other processes {shown}{of} cores"
                     + (f" (quiet ≤ {limit:.2g})" if other > limit else ""))
    steal = as_number(d.get("steal_cores_mean"))
    if steal is not None and steal > MAX_STEAL_CORES:
        parts.append(f"steal {steal:.2f} cores")
    throttled = as_number(d.get("throttled_s"))
    if throttled is not None and span and throttled > MAX_THROTTLED_SHARE * span:
        parts.append(f"throttled {throttled / span:.0%} of the time")
    memory = as_number(d.get("memory_pressure_pct"))
    if memory is not None and memory > MAX_MEMORY_PRESSURE_PCT:
        parts.append(f"memory pressure {memory:.0f}%")
    return " · ".join(parts)


def pooled(environments: Sequence[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """Several runs' machine as one (an A/B arm's blocks): means weighted by each run's
    measured time, counts summed, the peak the highest; ``runs`` (with samples) and
    ``disturbed_runs`` beside them. None when no run has samples."""
    ds = [d for d in (sampled(e) for e in environments) if d is not None]
    if not ds:
        return None
    span = sum(float(d["measured_s"]) for d in ds)
    out: dict[str, Any] = {"measured_s": round(span, 3), "runs": len(ds),
                           "disturbed_runs": sum(1 for d in ds if machine_reasons(d))}
    cores = [int(c) for c in (as_number(d.get("cores")) for d in ds) if c]
    out["cores"] = min(cores) if cores else None
    for key in _MEANS:
        known = [(float(d["measured_s"]), v) for d in ds
                 if (v := as_number(d.get(key))) is not None]
        weight = sum(w for w, _ in known)
        out[key] = round(sum(w * v for w, v in known) / weight, 3) if weight else None
    for key in _SUMS:
        values = [v for d in ds if (v := as_number(d.get(key))) is not None]
        out[key] = sum(values) if values else None
    peaks = [v for d in ds if (v := as_number(d.get("other_cores_max"))) is not None]
    out["other_cores_max"] = max(peaks) if peaks else None
    return out


def _cores(x: float) -> str:
    """Cores as the machine line prints them (0.02, 0.90, 1.30)."""
    return f"{x:.2f}"


def pooled_mark(machine: Mapping[str, Any] | None) -> str | None:
    """An arm's badge from its pooled machine (``pooled``): 'DISTURBED: 3 of 4 blocks; over
    all of them other processes used 1.1 of 2 cores on average …'; None when no block was
    disturbed (or none has samples)."""
    if not machine or not machine.get("disturbed_runs"):
        return None
    reasons = machine_reasons(dict(machine))
    return (f"{DISTURBED}: {machine['disturbed_runs']} of {machine['runs']} blocks"
            + ("; over all of them " + "; ".join(reasons) if reasons else
               "; over all of them the machine was within the quiet limits"))


def pooled_finding(environments: Sequence[Mapping[str, Any] | None]) -> str | None:
    """An arm's ``machine`` finding over its blocks, once: 'machine: DISTURBED: 3 of 4
    blocks; over all of them other processes used 1.1 of 2 cores on average …; expect …';
    None when no block was disturbed (or none has samples)."""
    mark = pooled_mark(pooled(environments))
    return None if mark is None else (
        f"machine: {mark}; expect this arm's times inflated and not comparable with a quiet "
        "arm's")


def unequal_disturbance(arms: Mapping[str, Sequence[Mapping[str, Any] | None]],
                        noun: str = "") -> str | None:
    """Whether runs (``compare``) or A/B arms were measured on an unequally busy machine, in
    words with the numbers: 'arm B was measured while other processes used 0.9 of 2 cores,
    arm A 0.02: …'. ``arms``: each run's or arm's name → the environments of its runs
    (pooled, ``pooled``); each later one is held against the first (the baseline). Unequal:
    one is DISTURBED and the other not, or their other processes' mean CPU differs by more
    than the quiet limit (``validity.max_other_cores``). None when they were alike — or when
    either has no samples of the machine (then nothing can be said)."""
    names = list(arms)
    if len(names) < 2:
        return None
    pools = {n: pooled(arms[n]) for n in names}
    base_name, base = names[0], pools[names[0]]
    if base is None:
        return None
    say = f"{noun} " if noun else ""
    out = []
    for name in names[1:]:
        other = pools[name]
        if other is None:
            continue
        da, db = bool(machine_reasons(base)), bool(machine_reasons(other))
        oa = as_number(base.get("other_cores_mean")) or 0.0
        ob = as_number(other.get("other_cores_mean")) or 0.0
        known = [int(c) for c in (base.get("cores"), other.get("cores")) if c]
        cores = min(known) if known else None
        if da == db and abs(oa - ob) <= max_other_cores(cores):
            continue
        # the busier one first: the disturbed one, else the one with more other CPU
        (busy, pb, ob_), (calm, pc, oc) = sorted(
            ((name, other, ob), (base_name, base, oa)),
            key=lambda t: (not machine_reasons(t[1]), -t[2]))
        of = f" of {cores}" if cores else ""
        others = (f"other processes used {_cores(ob_)}{of} cores, {say}{calm} {_cores(oc)}")
        # what else disturbed the busier one (steal, throttling, memory), in its own words
        extra = [r for r in machine_reasons(pb) if not r.startswith("other processes")]
        if extra and len(extra) == len(machine_reasons(pb)):  # not other processes at all
            text = f"{say}{busy} was measured while " + "; ".join(extra) + f" ({others})"
        else:
            text = f"{say}{busy} was measured while {others}" + "".join(
                f"; {r}" for r in extra)
        blocks = [f"{n} {p['disturbed_runs']} of {p['runs']}" for n, p in
                  ((busy, pb), (calm, pc)) if p["runs"] > 1]
        if blocks:
            text += f" ({', '.join(blocks)} blocks {DISTURBED})"
        out.append(text + f": the difference between {busy} and {calm} may be the machine's, "
                   "not the setup's — measure both again on a quiet machine")
    return "; ".join(out) if out else None


__all__ = ["DISTURBED", "MACHINE_WORDS", "badge_label", "disturbed_mark", "is_disturbed",
           "pooled", "pooled_finding", "pooled_mark", "sampled",
           "unequal_disturbance"]
